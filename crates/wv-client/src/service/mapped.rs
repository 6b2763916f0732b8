//! The memory a device service shares with this process, as the soft HCA's user-mode provider
//! reaches it: the rings the creation responses name, and the doorbell.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use wv_softhca::dma::{BlockOwner, SharedBlock};
use wv_softhca::uvp::MappedDevice;

use super::os::{self, Mapping};
use super::proto::{Welcome, doorbell};

/// What keeps a block's mapping alive on this side (nothing is given back: the service owns
/// the memory and reuses it when the object is destroyed).
struct Keep(#[allow(dead_code, reason = "held for its Drop")] Arc<Mapping>);

impl BlockOwner for Keep {
    fn release(&self, _addr: u64, _len: usize) {}
}

/// The service's shared memory as mapped in this process.
pub struct SharedDevice {
    map: Arc<Mapping>,
    keep: Arc<dyn BlockOwner>,
    doorbell: SharedBlock,
}

impl core::fmt::Debug for SharedDevice {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SharedDevice")
            .field("bytes", &self.map.len())
            .finish()
    }
}

impl SharedDevice {
    /// Maps the memory the service sent with its welcome.
    ///
    /// # Errors
    /// `InvalidData` for a size or doorbell offset that does not fit, or a file that could
    /// shrink; the system's error of the mapping.
    pub(super) fn map(fd: &OwnedFd, w: &Welcome) -> io::Result<Arc<SharedDevice>> {
        let len = usize::try_from(w.shared_bytes).map_err(|_| io::ErrorKind::InvalidData)?;
        let map = Arc::new(Mapping::new(fd, len).map_err(|_| io::ErrorKind::InvalidData)?);
        let keep: Arc<dyn BlockOwner> = Arc::new(Keep(Arc::clone(&map)));
        let doorbell = map
            .block(w.doorbell, doorbell::PAGE as u64, Arc::clone(&keep))
            .ok_or(io::ErrorKind::InvalidData)?;
        Ok(Arc::new(SharedDevice {
            map,
            keep,
            doorbell,
        }))
    }

    fn word(&self, i: usize) -> &AtomicU32 {
        &self.doorbell.words32()[i]
    }
}

impl MappedDevice for SharedDevice {
    fn block(&self, addr: u64, len: u64) -> Option<SharedBlock> {
        // The doorbell page is not a ring.
        let db = self.doorbell.addr();
        if addr < db.saturating_add(doorbell::PAGE as u64) && db < addr.saturating_add(len) {
            return None;
        }
        self.map.block(addr, len, Arc::clone(&self.keep))
    }

    fn ring(&self) {
        // The doorbell bits were set before this (release); the sequence bump and the check
        // of the sleeping flag are sequentially consistent with the service's store of that
        // flag and its re-check of the sequence, so either it sees the new sequence or this
        // sees it sleeping and wakes it.
        self.word(doorbell::SEQ).fetch_add(1, Ordering::SeqCst);
        if self.word(doorbell::SLEEPING).load(Ordering::SeqCst) != 0 {
            os::futex_wake(self.word(doorbell::SEQ), 1);
        }
    }
}
