//! The memory the service shares with one client: a sealed memfd both map. Page 0 is the
//! doorbell page; the rest holds the rings of the objects the client creates, allocated here by
//! the soft HCA while the connection's thread serves the client
//! (`wv_softhca::dma::SharedMemory`). The doorbells of the client's QPs are kept here too, and
//! the connection's doorbell thread runs them when the client rings.
//!
//! Allocation is page-granular first-fit with coalescing; a freed block's pages are given back
//! to the system (a hole punched in the file), so a block handed out again reads as zero, which
//! is an empty ring.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use wv_client::service::os::{self, Mapping};
use wv_client::service::proto::doorbell;
use wv_hal::AllocError;
use wv_softhca::dma::{BlockOwner, SharedBlock, SharedMemory};
use wv_softhca::uvp::Doorbell;

const PAGE: u64 = 4096;

/// Blocks handed out by every arena of the service (the leak check counts them).
pub static BLOCKS_IN_USE: AtomicU64 = AtomicU64::new(0);
/// Arenas alive in the service.
pub static ARENAS: AtomicU64 = AtomicU64::new(0);

/// One client's shared memory.
pub struct Arena {
    fd: OwnedFd,
    map: Arc<Mapping>,
    /// Free ranges: start → length, both in bytes, page multiples.
    free: Mutex<BTreeMap<u64, u64>>,
    doorbells: Mutex<Vec<Doorbell>>,
    doorbell_page: SharedBlock,
    me: Weak<Arena>,
}

impl core::fmt::Debug for Arena {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Arena")
            .field("bytes", &self.map.len())
            .finish_non_exhaustive()
    }
}

/// Keeps a block's memory mapped and gives its pages back when the block goes.
struct Owner(Arc<Arena>);

impl BlockOwner for Owner {
    fn release(&self, addr: u64, len: usize) {
        self.0.release(addr, len as u64);
    }
}

/// The doorbell page is never released.
struct Pinned(#[allow(dead_code, reason = "held for its Drop")] Arc<Mapping>);

impl BlockOwner for Pinned {
    fn release(&self, _addr: u64, _len: usize) {}
}

impl Arena {
    /// A new arena of `bytes` bytes (a multiple of the page, at least two pages).
    ///
    /// # Errors
    /// The system's error creating or mapping the memfd.
    pub fn new(bytes: u64) -> io::Result<Arc<Arena>> {
        let bytes = bytes.max(2 * PAGE).next_multiple_of(PAGE);
        let fd = os::sealed_memfd("wvd-shared", bytes)?;
        let len = usize::try_from(bytes).map_err(|_| io::ErrorKind::InvalidInput)?;
        let map = Arc::new(Mapping::new(&fd, len)?);
        let page = map
            .block(0, PAGE, Arc::new(Pinned(Arc::clone(&map))))
            .ok_or(io::ErrorKind::InvalidInput)?;
        let mut free = BTreeMap::new();
        free.insert(PAGE, bytes - PAGE);
        ARENAS.fetch_add(1, Ordering::Relaxed);
        Ok(Arc::new_cyclic(|me| Arena {
            fd,
            map,
            free: Mutex::new(free),
            doorbells: Mutex::new(Vec::new()),
            doorbell_page: page,
            me: me.clone(),
        }))
    }

    /// The descriptor to send to the client.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Bytes of the arena.
    pub fn bytes(&self) -> u64 {
        self.map.len() as u64
    }

    /// Word `i` of the doorbell page.
    pub fn word(&self, i: usize) -> &AtomicU32 {
        &self.doorbell_page.words32()[i]
    }

    fn free(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, u64>> {
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn doorbells(&self) -> std::sync::MutexGuard<'_, Vec<Doorbell>> {
        self.doorbells.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// First fit of `len` bytes (a page multiple); the offset.
    fn take(&self, len: u64) -> Option<u64> {
        let mut free = self.free();
        let (&start, &have) = free.iter().find(|&(_, &l)| l >= len)?;
        free.remove(&start);
        if have > len {
            free.insert(start + len, have - len);
        }
        Some(start)
    }

    /// Gives `[addr, addr + len)` back: its pages go back to the system (reading zero when
    /// handed out again), and the range joins its free neighbours.
    fn release(&self, addr: u64, len: u64) {
        let len = len.next_multiple_of(PAGE);
        // Zeroed before anyone can take it again. A failure (never expected on a memfd) is
        // written over by keeping the range out of the free list: leaked, never reused dirty.
        if os::punch_hole(&self.fd, addr, len).is_err() {
            BLOCKS_IN_USE.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let mut free = self.free();
        let (mut start, mut end) = (addr, addr + len);
        if let Some((&s, &l)) = free.range(..start).next_back()
            && s + l == start
        {
            free.remove(&s);
            start = s;
        }
        if let Some(&l) = free.get(&end) {
            free.remove(&end);
            end += l;
        }
        free.insert(start, end - start);
        BLOCKS_IN_USE.fetch_sub(1, Ordering::Relaxed);
    }

    /// Runs the doorbells the client rang; drops those of QPs that are gone. Returns whether
    /// any had rung.
    pub fn run_doorbells(&self) -> bool {
        let mut rang = false;
        self.doorbells().retain(|d| match d.service() {
            Some(r) => {
                rang |= r;
                true
            }
            None => false,
        });
        rang
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        ARENAS.fetch_sub(1, Ordering::Relaxed);
    }
}

impl SharedMemory for Arena {
    fn alloc(&self, bytes: usize) -> Result<SharedBlock, AllocError> {
        let len = (bytes as u64).max(1).next_multiple_of(PAGE);
        let me = self.me.upgrade().ok_or(AllocError)?;
        let at = self.take(len).ok_or(AllocError)?;
        BLOCKS_IN_USE.fetch_add(1, Ordering::Relaxed);
        match self.map.block(at, len, Arc::new(Owner(me))) {
            Some(b) => Ok(b),
            None => {
                // Cannot happen (the free list lies inside the mapping); give it back.
                self.release(at, len);
                Err(AllocError)
            }
        }
    }

    fn add_doorbell(&self, doorbell: Doorbell) -> Result<(), AllocError> {
        let mut d = self.doorbells();
        d.retain(Doorbell::is_live);
        d.try_reserve(1).map_err(|_| AllocError)?;
        d.push(doorbell);
        Ok(())
    }
}

/// The doorbell page's words the client and the doorbell thread use.
pub fn seq(a: &Arena) -> &AtomicU32 {
    a.word(doorbell::SEQ)
}

/// See [`doorbell::SLEEPING`].
pub fn sleeping(a: &Arena) -> &AtomicU32 {
    a.word(doorbell::SLEEPING)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_zeroed_page_multiples_that_coalesce_when_freed() {
        let a = Arena::new(16 * PAGE).unwrap();
        let b1 = a.alloc(100).unwrap();
        let b2 = a.alloc(PAGE as usize + 1).unwrap();
        assert_eq!(b1.addr(), PAGE, "page 0 is the doorbell page");
        assert_eq!(b1.len() as u64, PAGE);
        assert_eq!(b2.addr(), 2 * PAGE);
        assert_eq!(b2.len() as u64, 2 * PAGE);
        b1.words32()[3].store(7, Ordering::Relaxed);
        let addr = b1.addr();
        drop(b1);
        let again = a.alloc(10).unwrap();
        assert_eq!(again.addr(), addr, "first fit reuses the hole");
        assert_eq!(again.words32()[3].load(Ordering::Relaxed), 0, "zero again");
        drop(again);
        drop(b2);
        // Everything coalesced back into one range: the whole rest fits again.
        let big = a.alloc((15 * PAGE) as usize).unwrap();
        assert_eq!(big.addr(), PAGE);
        assert!(a.alloc(1).is_err(), "full");
    }
}
