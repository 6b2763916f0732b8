//! Client memory as the device sees it: the only module of the crate with `unsafe` code.
//!
//! A real HCA reaches user memory by DMA after the kernel has probed and pinned the pages of a
//! registration. The soft HCA does the same with raw pointers, and this module is where they
//! live: a [`DmaRange`] is a pinned byte range that the device may copy into and out of, and the
//! only ways to get one are [`ClientMemory::pin`] (the registration path) and the device's own
//! allocations. Every copy is bounds-checked against the range before a pointer is formed, so a
//! bad address or length coming from user mode yields an error, never a wild access.
//!
//! Concurrency: as with hardware DMA, the device copies bytes without synchronising with the
//! client's own accesses. The verbs rules order them (a buffer belongs to the device from post
//! to completion, and the ring indices carry release/acquire edges), so a well-behaved client
//! never races the device.
//!
//! Remote atomics ([`DmaRange::compare_swap`], [`DmaRange::fetch_add`]) are 8-byte CPU atomics
//! on naturally aligned client memory, so they are atomic with respect to each other whichever
//! threads run them (the device advertises `ATOMIC_HCA`). As on hardware, they are not atomic
//! with respect to other accesses to the same 8 bytes: a client that targets them with an
//! RDMA write, a receive or its own plain stores while an atomic may run breaks the verbs rules
//! (the result is undefined on an HCA), the same contract as for the copies above.

use alloc::alloc::Layout;
use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU64, Ordering};

use crate::lock::Mutex;
use wv_hal::{AllocError, KArc, KWeak, VerbsError};

use crate::fallible;

/// Why a copy was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutOfBounds;

/// Why a remote atomic was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomicFault {
    /// The 8 bytes are not inside the range.
    OutOfBounds,
    /// The address is not a multiple of 8.
    Misaligned,
}

/// A pinned range of client memory the device may read and write.
pub(crate) struct DmaRange {
    /// The first byte, with the provenance of the allocation it lies in.
    base: *mut u8,
    len: usize,
    /// What keeps the memory alive (a pool buffer), if the range does not rely on the client's
    /// promise alone.
    _keep: Option<KArc<BufInner>>,
}

impl core::fmt::Debug for DmaRange {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DmaRange")
            .field("base", &self.base)
            .field("len", &self.len)
            .finish()
    }
}

// SAFETY: a range is a pinned view of client memory that the device accesses from whichever
// thread rings a doorbell, exactly like hardware DMA; every access goes through the checked
// copies below, and the memory outlives the range by `new`'s contract.
unsafe impl Send for DmaRange {}
// SAFETY: see `Send`; `&DmaRange` only performs bounds-checked copies.
unsafe impl Sync for DmaRange {}

impl DmaRange {
    /// A range over `[base, base + len)`.
    ///
    /// # Safety
    /// The `len` bytes at `base` must be one allocation, valid for reads and writes for as long
    /// as the returned range (or anything holding it) lives, and accessed by others only as the
    /// module documentation describes.
    unsafe fn new(base: *mut u8, len: usize, keep: Option<KArc<BufInner>>) -> Self {
        DmaRange {
            base,
            len,
            _keep: keep,
        }
    }

    /// The client address of the first byte.
    pub(crate) fn base(&self) -> u64 {
        self.base.addr() as u64
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len as u64
    }

    fn check(&self, offset: u64, len: usize) -> Result<usize, OutOfBounds> {
        let offset = usize::try_from(offset).map_err(|_| OutOfBounds)?;
        let end = offset.checked_add(len).ok_or(OutOfBounds)?;
        if end > self.len {
            return Err(OutOfBounds);
        }
        Ok(offset)
    }

    /// Copies `out.len()` bytes at `offset` into `out`.
    pub(crate) fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), OutOfBounds> {
        let off = self.check(offset, out.len())?;
        // SAFETY: `check` proved `[off, off + out.len())` lies inside the range, which `new`'s
        // contract makes valid for reads; `out` is a distinct Rust buffer, so they do not overlap.
        unsafe {
            ptr::copy_nonoverlapping(self.base.wrapping_add(off), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    /// Copies `data` to `offset`.
    pub(crate) fn write(&self, offset: u64, data: &[u8]) -> Result<(), OutOfBounds> {
        let off = self.check(offset, data.len())?;
        // SAFETY: `check` proved the destination lies inside the range, valid for writes by
        // `new`'s contract; `data` is a Rust slice that cannot alias client memory mutably.
        unsafe { ptr::copy(data.as_ptr(), self.base.wrapping_add(off), data.len()) };
        Ok(())
    }

    /// The 8-byte word at `offset` as an atomic, after checking that it lies in the range and
    /// is naturally aligned in client memory.
    fn atomic_at(&self, offset: u64) -> Result<&AtomicU64, AtomicFault> {
        let off = self
            .check(offset, 8)
            .map_err(|_| AtomicFault::OutOfBounds)?;
        let p = self.base.wrapping_add(off);
        if p.addr() % core::mem::align_of::<AtomicU64>() != 0 {
            return Err(AtomicFault::Misaligned);
        }
        // SAFETY: `check` proved the 8 bytes at `p` lie inside the range, which `new`'s contract
        // makes valid for reads and writes for as long as `self` lives (the returned reference
        // borrows `self`); `p` is aligned for `AtomicU64` (checked just above). Every access the
        // device makes to these bytes through this function is atomic and of the same size, and
        // the module's contract makes concurrent non-atomic accesses to them the client's
        // violation of the verbs rules, as on hardware.
        Ok(unsafe { AtomicU64::from_ptr(p.cast::<u64>()) })
    }

    /// Remote compare-and-swap: if the word at `offset` equals `compare`, it becomes `swap`.
    /// Returns the original value either way.
    pub(crate) fn compare_swap(
        &self,
        offset: u64,
        compare: u64,
        swap: u64,
    ) -> Result<u64, AtomicFault> {
        let a = self.atomic_at(offset)?;
        // Atomicity is what a remote atomic promises; its result reaches the requester through
        // the completion, whose publication orders it (no total order with other locations is
        // needed, so no SeqCst).
        Ok(
            match a.compare_exchange(compare, swap, Ordering::AcqRel, Ordering::Acquire) {
                Ok(v) | Err(v) => v,
            },
        )
    }

    /// Remote fetch-and-add (wrapping, as the IB operation is modulo 2^64). Returns the
    /// original value.
    pub(crate) fn fetch_add(&self, offset: u64, add: u64) -> Result<u64, AtomicFault> {
        Ok(self.atomic_at(offset)?.fetch_add(add, Ordering::AcqRel))
    }

    /// Copies `len` bytes from `src` at `src_off` to `dst` at `dst_off`; the ranges may be the
    /// same memory (loopback), so this is a `memmove`.
    pub(crate) fn copy(
        src: &DmaRange,
        src_off: u64,
        dst: &DmaRange,
        dst_off: u64,
        len: usize,
    ) -> Result<(), OutOfBounds> {
        let s = src.check(src_off, len)?;
        let d = dst.check(dst_off, len)?;
        // SAFETY: both sub-ranges were bounds-checked against ranges that `new`'s contract makes
        // valid for reads (source) and writes (destination); `ptr::copy` allows overlap.
        unsafe { ptr::copy(src.base.wrapping_add(s), dst.base.wrapping_add(d), len) };
        Ok(())
    }
}

/// One heap buffer of a [`BufferPool`]: memory a test or client can register with the device.
struct BufInner {
    ptr: *mut u64,
    words: usize,
    len: usize,
}

// SAFETY: `BufInner` owns its allocation exclusively (it came from `BufInner::try_zeroed` and
// is freed only in `Drop`); all byte accesses go through bounds-checked raw copies, so sharing the
// pointer between threads is no different from sharing the memory of a `Box<[u64]>`.
unsafe impl Send for BufInner {}
// SAFETY: see `Send`; `&BufInner` only hands out the address and performs checked copies.
unsafe impl Sync for BufInner {}

impl Drop for BufInner {
    fn drop(&mut self) {
        let slice = ptr::slice_from_raw_parts_mut(self.ptr, self.words);
        // SAFETY: `ptr`/`words` are a block of `words` initialised `u64`s allocated by the global
        // allocator with `Layout::array::<u64>(words)` (`try_zeroed`), the layout a
        // `Box<[u64]>` of that length has; this is the only place that frees it, once.
        drop(unsafe { Box::from_raw(slice) });
    }
}

impl BufInner {
    /// `len` zeroed bytes (at least one word), unless they cannot be allocated. Zeroed by the
    /// allocator, as a client's fresh buffer is (`vec![0; n]` does the same, infallibly): a
    /// large block then comes as fresh zero pages instead of being written first.
    fn try_zeroed(len: usize) -> Result<Self, AllocError> {
        let words = len.div_ceil(8).max(1);
        let layout = Layout::array::<u64>(words).map_err(|_| AllocError)?;
        // SAFETY: `words >= 1`, so the layout is not zero-sized.
        let block = unsafe { alloc::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(block.cast::<u64>()).ok_or(AllocError)?;
        // INVARIANT: `words` zeroed (so initialised) `u64`s with the layout `Drop` frees.
        Ok(BufInner {
            ptr: ptr.as_ptr(),
            words,
            len,
        })
    }

    fn range(this: &KArc<Self>) -> DmaRange {
        // SAFETY: the allocation is `len` valid bytes that live as long as the clone of `this`,
        // which the range holds.
        unsafe { DmaRange::new(this.ptr.cast::<u8>(), this.len, Some(this.clone())) }
    }
}

/// A zeroed, 8-byte-aligned heap buffer that can be registered with a soft HCA whose client
/// memory is a [`BufferPool`]. Cloning shares the buffer.
#[derive(Clone)]
pub struct DmaBuffer {
    inner: KArc<BufInner>,
}

impl core::fmt::Debug for DmaBuffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DmaBuffer")
            .field("addr", &self.addr())
            .field("len", &self.len())
            .finish()
    }
}

impl DmaBuffer {
    fn try_new(len: usize) -> Result<Self, AllocError> {
        // A refused `KArc` drops the `BufInner`, which frees the words.
        Ok(DmaBuffer {
            inner: KArc::try_new(BufInner::try_zeroed(len)?)?,
        })
    }
    /// The client virtual address of the first byte (what `register_mr` and SGEs name).
    pub fn addr(&self) -> u64 {
        self.inner.ptr.addr() as u64
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }
    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }
    /// Writes `data` at `offset`.
    ///
    /// # Errors
    /// When the bytes do not fit.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), VerbsError> {
        BufInner::range(&self.inner)
            .write(offset as u64, data)
            .map_err(|_| VerbsError::InvalidParameter)
    }
    /// Reads `out.len()` bytes at `offset`.
    ///
    /// # Errors
    /// When the bytes are out of the buffer.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), VerbsError> {
        BufInner::range(&self.inner)
            .read(offset as u64, out)
            .map_err(|_| VerbsError::InvalidParameter)
    }
    /// A copy of the whole buffer.
    #[allow(
        clippy::disallowed_methods,
        reason = "the client's copy of its own memory (tests, tools), not a device path"
    )]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = alloc::vec![0u8; self.len()];
        let _ = self.read(0, &mut v);
        v
    }
}

/// A set of client buffers the device can validate registrations against: registering memory
/// outside a live buffer of the pool fails, and a registration keeps its buffer alive.
#[derive(Clone, Default)]
pub struct BufferPool {
    bufs: Arc<Mutex<Vec<KWeak<BufInner>>>>,
}

impl core::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BufferPool").finish_non_exhaustive()
    }
}

impl BufferPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }
    /// Allocates a zeroed buffer of `len` bytes in the pool.
    ///
    /// # Panics
    /// When the memory cannot be allocated ([`BufferPool::try_alloc`] fails instead).
    pub fn alloc(&self, len: usize) -> DmaBuffer {
        self.try_alloc(len).expect("DMA buffer")
    }

    /// Allocates a zeroed buffer of `len` bytes in the pool, unless the memory (or the pool's
    /// room for it, grown with the pool's lock released) cannot be allocated.
    ///
    /// # Errors
    /// [`AllocError`].
    pub fn try_alloc(&self, len: usize) -> Result<DmaBuffer, AllocError> {
        let b = DmaBuffer::try_new(len)?;
        self.bufs.lock().retain(|w| w.strong_count() > 0);
        fallible::with_room(|| self.bufs.lock())?.push(KArc::downgrade(&b.inner));
        Ok(b)
    }

    fn find(&self, addr: u64, len: u64) -> Option<DmaRange> {
        let bufs = self.bufs.lock();
        for w in bufs.iter() {
            let Some(inner) = w.upgrade() else { continue };
            let start = inner.ptr.addr() as u64;
            let end = start + inner.len as u64;
            if addr >= start && addr.checked_add(len)? <= end {
                let base = inner.ptr.cast::<u8>().wrapping_add((addr - start) as usize);
                // SAFETY: `[addr, addr+len)` lies inside this live allocation (and `base` carries
                // its provenance), and the range holds `inner`, so the memory outlives the range.
                return Some(unsafe { DmaRange::new(base, len as usize, Some(inner)) });
            }
        }
        None
    }
}

/// How the device validates ("probes and locks") client memory at registration.
#[derive(Clone, Debug)]
pub struct ClientMemory {
    pool: Option<BufferPool>,
}

impl ClientMemory {
    /// Client memory is the buffers of `pool`: anything else is refused.
    pub fn pool(pool: BufferPool) -> Self {
        ClientMemory { pool: Some(pool) }
    }

    /// Client memory is this process's address space, trusted as is.
    ///
    /// # Safety
    /// Every range later passed to `register_mr` (or used as a fast-registration target) on a
    /// device built with this value must be memory of this process, valid for reads and writes
    /// until the region is deregistered; the caller takes the role of the kernel's probe.
    pub unsafe fn trusted_process() -> Self {
        ClientMemory { pool: None }
    }

    /// Probes and pins `[addr, addr + len)`.
    pub(crate) fn pin(&self, addr: u64, len: u64) -> Result<DmaRange, VerbsError> {
        if len == 0 || addr == 0 || addr.checked_add(len).is_none() || len > isize::MAX as u64 {
            return Err(VerbsError::InvalidParameter);
        }
        match &self.pool {
            Some(p) => p.find(addr, len).ok_or(VerbsError::InvalidParameter),
            // SAFETY: `trusted_process`'s contract makes the caller vouch for every registered
            // range; length and overflow were checked above.
            None => Ok(unsafe {
                DmaRange::new(
                    ptr::with_exposed_provenance_mut(addr as usize),
                    len as usize,
                    None,
                )
            }),
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests may allocate infallibly")]
mod tests {
    extern crate std;

    use super::*;

    #[test]
    fn pool_pins_only_its_buffers() {
        let pool = BufferPool::new();
        let mem = ClientMemory::pool(pool.clone());
        let b = pool.alloc(64);
        assert!(mem.pin(b.addr(), 64).is_ok());
        assert!(mem.pin(b.addr() + 8, 56).is_ok());
        assert!(mem.pin(b.addr(), 65).is_err());
        assert!(mem.pin(b.addr() + 64, 1).is_err());
        assert!(mem.pin(0, 1).is_err());
        assert!(mem.pin(b.addr(), 0).is_err());
        assert!(mem.pin(u64::MAX - 2, 8).is_err());
    }

    #[test]
    fn copies_are_bounds_checked() {
        let pool = BufferPool::new();
        let mem = ClientMemory::pool(pool.clone());
        let a = pool.alloc(32);
        let b = pool.alloc(16);
        a.write(0, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let ra = mem.pin(a.addr(), 32).unwrap();
        let rb = mem.pin(b.addr(), 16).unwrap();
        DmaRange::copy(&ra, 0, &rb, 8, 8).unwrap();
        assert_eq!(&b.to_vec()[8..], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(DmaRange::copy(&ra, 0, &rb, 9, 8), Err(OutOfBounds));
        assert_eq!(DmaRange::copy(&ra, 30, &rb, 0, 4), Err(OutOfBounds));
        assert_eq!(DmaRange::copy(&ra, u64::MAX, &rb, 0, 1), Err(OutOfBounds));
        let mut out = [0u8; 4];
        assert!(rb.read(13, &mut out).is_err());
        rb.read(8, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        assert!(ra.write(31, &[1, 2]).is_err());
    }

    #[test]
    fn atomics_check_bounds_and_alignment_and_return_the_original_value() {
        let pool = BufferPool::new();
        let mem = ClientMemory::pool(pool.clone());
        let b = pool.alloc(24);
        b.write(8, &5u64.to_ne_bytes()).unwrap();
        let r = mem.pin(b.addr(), 24).unwrap();
        assert_eq!(r.fetch_add(8, 3), Ok(5));
        assert_eq!(r.compare_swap(8, 7, 100), Ok(8), "no swap: 8 != 7");
        assert_eq!(r.compare_swap(8, 8, 100), Ok(8));
        let mut word = [0u8; 8];
        b.read(8, &mut word).unwrap();
        assert_eq!(u64::from_ne_bytes(word), 100);
        // Wrapping add.
        assert_eq!(r.fetch_add(0, u64::MAX), Ok(0));
        assert_eq!(r.fetch_add(0, 2), Ok(u64::MAX));
        // Bounds: the last word fits, one byte further does not.
        assert_eq!(r.fetch_add(16, 1), Ok(0));
        assert_eq!(r.fetch_add(17, 1), Err(AtomicFault::OutOfBounds));
        assert_eq!(r.fetch_add(24, 1), Err(AtomicFault::OutOfBounds));
        assert_eq!(r.fetch_add(u64::MAX, 1), Err(AtomicFault::OutOfBounds));
        // Alignment is of the client address, not of the offset in the range.
        assert_eq!(r.compare_swap(4, 0, 1), Err(AtomicFault::Misaligned));
        let shifted = mem.pin(b.addr() + 4, 20).unwrap();
        assert_eq!(shifted.fetch_add(0, 1), Err(AtomicFault::Misaligned));
        assert_eq!(shifted.fetch_add(4, 1), Ok(100));
    }

    #[test]
    fn concurrent_atomics_from_two_threads_lose_no_update() {
        let pool = BufferPool::new();
        let mem = ClientMemory::pool(pool.clone());
        let b = pool.alloc(16);
        let r = Arc::new(mem.pin(b.addr(), 16).unwrap());
        const N: u64 = 50;
        let threads: Vec<_> = (0..2)
            .map(|t| {
                let r = Arc::clone(&r);
                std::thread::spawn(move || {
                    for _ in 0..N {
                        r.fetch_add(0, 1).unwrap();
                        // A CAS loop: increment word 1 by compare-and-swap.
                        let mut cur = r.compare_swap(8, 0, 0).unwrap();
                        loop {
                            let got = r.compare_swap(8, cur, cur + t + 1).unwrap();
                            if got == cur {
                                break;
                            }
                            cur = got;
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut w = [0u8; 16];
        b.read(0, &mut w).unwrap();
        assert_eq!(u64::from_ne_bytes(w[..8].try_into().unwrap()), 2 * N);
        assert_eq!(u64::from_ne_bytes(w[8..].try_into().unwrap()), 3 * N);
    }

    #[test]
    fn trusted_process_memory_is_reached_through_its_address() {
        let mut v = alloc::vec![0u8; 32];
        let addr = v.as_mut_ptr() as u64;
        // SAFETY: `v` outlives the range and is not touched while the range is used.
        let mem = unsafe { ClientMemory::trusted_process() };
        let r = mem.pin(addr, 32).unwrap();
        r.write(4, b"abc").unwrap();
        let mut out = [0u8; 3];
        r.read(4, &mut out).unwrap();
        assert_eq!(&out, b"abc");
        assert!(r.write(31, b"xy").is_err());
        assert!(mem.pin(addr, 0).is_err());
        drop(r);
        assert_eq!(&v[4..7], b"abc");
    }

    #[test]
    fn overlapping_copy_is_a_memmove_and_registration_keeps_memory_alive() {
        let pool = BufferPool::new();
        let mem = ClientMemory::pool(pool.clone());
        let a = pool.alloc(16);
        a.write(0, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let r = mem.pin(a.addr(), 16).unwrap();
        DmaRange::copy(&r, 0, &r, 2, 8).unwrap();
        assert_eq!(&a.to_vec()[..10], &[1, 2, 1, 2, 3, 4, 5, 6, 7, 8]);
        drop(a);
        // The range still owns the buffer: writing through it is valid.
        r.write(0, &[9]).unwrap();
        let mut one = [0u8];
        r.read(0, &mut one).unwrap();
        assert_eq!(one, [9]);
    }
}
