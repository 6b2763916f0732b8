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
// The crate denies `unsafe_code`; this module is its one exception.
#![allow(unsafe_code)]

use alloc::alloc::Layout;
use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU64, Ordering};

#[cfg(all(feature = "std", target_os = "linux"))]
pub use process::Client;

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

/// How a range's bytes are reached.
#[derive(Clone, Debug)]
enum Reach {
    /// Through the pointer (pool buffers, trusted process memory).
    Pointer,
    /// Through the kernel's cross-address-space copies on the client process that registered
    /// the range (see [`process`]): a page the application unmapped or made read-only after
    /// registering it is a failed copy, never a fault of the device's thread, and a range of
    /// a process that has gone fails every transfer.
    #[cfg(all(feature = "std", target_os = "linux"))]
    Syscall(Arc<process::Client>),
}

/// A pinned range of client memory the device may read and write.
pub(crate) struct DmaRange {
    /// The first byte, with the provenance of the allocation it lies in.
    base: *mut u8,
    len: usize,
    /// What keeps the memory alive (a pool buffer), if the range does not rely on the client's
    /// promise alone.
    _keep: Option<KArc<BufInner>>,
    #[cfg_attr(
        not(all(feature = "std", target_os = "linux")),
        allow(dead_code, reason = "only the process mode reads it")
    )]
    reach: Reach,
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
            reach: Reach::Pointer,
        }
    }

    /// A range of `client`'s memory reached only through [`process`]'s copies (and its
    /// checked atomics): no pointer into it is ever dereferenced by a copy, so a range whose
    /// pages go away makes copies fail instead of faulting.
    #[cfg(all(feature = "std", target_os = "linux"))]
    fn syscall(client: Arc<process::Client>, addr: u64, len: usize) -> Self {
        DmaRange {
            base: ptr::with_exposed_provenance_mut(addr as usize),
            len,
            _keep: None,
            reach: Reach::Syscall(client),
        }
    }

    /// The client process whose memory the range is, when it is reached through the kernel.
    #[cfg(all(feature = "std", target_os = "linux"))]
    fn client(&self) -> Option<&process::Client> {
        match &self.reach {
            Reach::Syscall(c) => Some(c),
            Reach::Pointer => None,
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
        #[cfg(all(feature = "std", target_os = "linux"))]
        if let Some(c) = self.client() {
            return process::read(c, self.base.addr() + off, out);
        }
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
        #[cfg(all(feature = "std", target_os = "linux"))]
        if let Some(c) = self.client() {
            return process::write(c, data, self.base.addr() + off);
        }
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
        #[cfg(all(feature = "std", target_os = "linux"))]
        if let Some(c) = self.client() {
            // Only this process's own memory is reached by pointer (another's goes through
            // `rmw`). The word must still be mapped readable and writable (a page taken away
            // between this probe and the atomic below is the application's breach of the
            // registration's contract).
            process::probe_word(c, p.addr()).map_err(|_| AtomicFault::OutOfBounds)?;
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
        #[cfg(all(feature = "std", target_os = "linux"))]
        if let Some(c) = self.client().filter(|c| !c.is_this_process()) {
            return self.rmw(c, offset, |v| if v == compare { swap } else { v });
        }
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
        #[cfg(all(feature = "std", target_os = "linux"))]
        if let Some(c) = self.client().filter(|c| !c.is_this_process()) {
            return self.rmw(c, offset, |v| v.wrapping_add(add));
        }
        Ok(self.atomic_at(offset)?.fetch_add(add, Ordering::AcqRel))
    }

    /// A remote atomic on another process's word: checked as [`DmaRange::atomic_at`] checks,
    /// then run by [`process::rmw`], which serialises every such operation of this process.
    #[cfg(all(feature = "std", target_os = "linux"))]
    fn rmw(
        &self,
        client: &process::Client,
        offset: u64,
        op: impl FnOnce(u64) -> u64,
    ) -> Result<u64, AtomicFault> {
        let off = self
            .check(offset, 8)
            .map_err(|_| AtomicFault::OutOfBounds)?;
        let addr = self.base.addr() + off;
        if !addr.is_multiple_of(8) {
            return Err(AtomicFault::Misaligned);
        }
        process::rmw(client, addr, op).map_err(|_| AtomicFault::OutOfBounds)
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
        #[cfg(all(feature = "std", target_os = "linux"))]
        if src.client().is_some() || dst.client().is_some() {
            return process::transfer(
                (src.client(), src.base.addr() + s),
                (dst.client(), dst.base.addr() + d),
                len,
            );
        }
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

/// A 32-bit word of a ring's header (loom's under `--cfg loom`, so the models see the indices).
#[cfg(loom)]
pub(crate) type HeaderWord = loom::sync::atomic::AtomicU32;
/// A 32-bit word of a ring's header (loom's under `--cfg loom`, so the models see the indices).
#[cfg(not(loom))]
pub(crate) type HeaderWord = core::sync::atomic::AtomicU32;

/// A header word on a cache line of its own, so producer and consumer do not false-share.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct HeaderLine(pub HeaderWord);

/// What only the producer touches (its owner serialises producers), on a line of its own.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct ProducerLine {
    /// The index the producer last published (the tail without a CQ's arm bits).
    pub tail: HeaderWord,
    /// The head as the producer last read it (only ever behind the real one).
    pub head: HeaderWord,
}

/// Words the ring's owner shares with the other side, on a line of their own.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct OwnerLine(pub [HeaderWord; 4]);

/// An unused line after each line of a [`RingHeader`]. x86 cores fetch lines in aligned
/// pairs (the spatial prefetcher), so two lines written by different sides must not share a
/// 128-byte pair either: with the tail and the head in one pair, a ping-pong of 2-byte sends
/// took about 6 % longer (see `docs/performance-notes.md`). Atomics, so that the whole header
/// stays memory another process may write.
#[repr(C, align(64))]
pub(crate) struct LinePad([core::sync::atomic::AtomicU32; 16]);

impl LinePad {
    const fn new() -> Self {
        LinePad([const { core::sync::atomic::AtomicU32::new(0) }; 16])
    }
}

impl core::fmt::Debug for LinePad {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("LinePad")
    }
}

/// The first [`RING_HEADER_BYTES`] of a ring's memory, before its slots: the indices, the
/// producer's own copies of them, and four words its owner shares with the other side (a QP's
/// send ring carries the QP state and the doorbell bits there, a CQ ring its overrun flag),
/// each line followed by an unused one. The layout user mode maps: every field is an atomic,
/// all-zero is an empty ring.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct RingHeader {
    /// The producer's published index (a CQ's carries the arm bits).
    pub tail: HeaderLine,
    tail_pad: LinePad,
    /// The consumer's index.
    pub head: HeaderLine,
    head_pad: LinePad,
    /// The producer's copies.
    pub producer: ProducerLine,
    producer_pad: LinePad,
    /// The owner's words.
    pub owner: OwnerLine,
    owner_pad: LinePad,
}

/// Bytes of a [`RingHeader`].
#[cfg_attr(loom, allow(dead_code, reason = "the loom build has no shared rings"))]
pub(crate) const RING_HEADER_BYTES: usize = 512;

#[cfg(not(loom))]
const _: () = {
    assert!(core::mem::size_of::<RingHeader>() == RING_HEADER_BYTES);
    assert!(core::mem::align_of::<RingHeader>() == 64);
    assert!(core::mem::offset_of!(RingHeader, head) == 128);
    assert!(core::mem::offset_of!(RingHeader, producer) == 256);
    assert!(core::mem::offset_of!(RingHeader, owner) == 384);
};

impl RingHeader {
    /// An empty ring's header.
    pub(crate) fn new() -> Self {
        let w = || HeaderWord::new(0);
        RingHeader {
            tail: HeaderLine(w()),
            head: HeaderLine(w()),
            producer: ProducerLine {
                tail: w(),
                head: w(),
            },
            owner: OwnerLine([w(), w(), w(), w()]),
            tail_pad: LinePad::new(),
            head_pad: LinePad::new(),
            producer_pad: LinePad::new(),
            owner_pad: LinePad::new(),
        }
    }
}

/// What gives a [`SharedBlock`]'s memory back when the block goes.
pub trait BlockOwner: Send + Sync {
    /// The block at device address `addr`, `len` bytes, is no longer used by this side.
    fn release(&self, addr: u64, len: usize);
}

/// A block of memory shared with another process (a device service and its client map the
/// same file): the rings of the client's objects and its doorbell page. Both sides reach it
/// only through the atomic views below, so whatever the other process writes there (it may
/// write anything, at any time) is a value to check, never undefined behaviour here.
pub struct SharedBlock {
    base: NonNull<u8>,
    len: usize,
    addr: u64,
    owner: Arc<dyn BlockOwner>,
}

impl core::fmt::Debug for SharedBlock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SharedBlock")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .finish()
    }
}

// SAFETY: the block is shared memory reached only through atomics (`new`'s contract), which
// any thread may use; the owner is `Send + Sync`.
unsafe impl Send for SharedBlock {}
// SAFETY: see `Send`; `&SharedBlock` hands out only atomic views.
unsafe impl Sync for SharedBlock {}

impl SharedBlock {
    /// The `len` bytes at `base`, which the other side knows as device address `addr`.
    ///
    /// # Safety
    /// `[base, base + len)` must be memory mapped readable and writable in this process, with
    /// `base` aligned to 64 bytes and `len` a multiple of 8, that stays mapped and backed (a
    /// shared file that cannot shrink under it) for as long as `owner` lives; and within this
    /// process it must be accessed only through `SharedBlock` views, one kind of view per
    /// block (a ring's, or 32-bit words), so that no byte is ever accessed non-atomically or
    /// by atomics of two sizes here. Other processes may write it as they like.
    pub unsafe fn new(base: *mut u8, len: usize, addr: u64, owner: Arc<dyn BlockOwner>) -> Self {
        SharedBlock {
            // A null base breaks the contract above; the block is then empty, and no view of
            // an empty block uses its (dangling, unaligned) pointer, so this only refuses the
            // obvious mistake.
            base: NonNull::new(base).unwrap_or(NonNull::dangling()),
            len: if base.is_null() { 0 } else { len },
            addr,
            owner,
        }
    }

    /// The device address (what vendor output reports).
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the block is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The block as 32-bit words (a doorbell page).
    pub fn words32(&self) -> &[core::sync::atomic::AtomicU32] {
        let words = self.len / 4;
        if words == 0 {
            // An empty block (a null base is one) has no memory behind its pointer, which may
            // then be dangling and unaligned: a slice, even an empty one, must not be built
            // from it.
            return &[];
        }
        // SAFETY: the block is not empty, so `base` is the non-null pointer `new` was given
        // (a null one leaves the block empty), and by `new`'s contract that memory is mapped,
        // aligned to 64 bytes, `len` (a multiple of 8, so of 4) bytes long, valid for as long
        // as `self` (which holds the owner) lives, and reached in this process only through
        // this one kind of view; atomics may alias memory other processes write, every bit
        // pattern is a valid `AtomicU32`.
        unsafe {
            core::slice::from_raw_parts(
                self.base.as_ptr().cast::<core::sync::atomic::AtomicU32>(),
                words,
            )
        }
    }

    /// The block as a ring of `entries` slots of `stride` words after a [`RingHeader`], if it
    /// is large enough.
    #[cfg(all(feature = "std", target_os = "linux", not(loom)))]
    pub(crate) fn ring_parts(
        &self,
        entries: u32,
        stride: usize,
    ) -> Option<(&RingHeader, &[AtomicU64])> {
        let words = (entries as usize).checked_mul(stride)?;
        let need = words.checked_mul(8)?.checked_add(RING_HEADER_BYTES)?;
        if need > self.len {
            return None;
        }
        // SAFETY: `new`'s contract (mapped, 64-byte aligned, alive as long as `self`, reached
        // here through one kind of view); `need <= len` bounds both views; `RingHeader` is
        // `repr(C)` of `AtomicU32`s only (checked by the size asserts above), for which every
        // bit pattern is valid, and so are the `AtomicU64` slots; the header and the slots do
        // not overlap.
        let header = unsafe { &*self.base.as_ptr().cast::<RingHeader>() };
        let slots = self.base.as_ptr().wrapping_add(RING_HEADER_BYTES);
        // SAFETY: as above; `slots` is 8-byte aligned (64-byte base + 512).
        let slots = unsafe { core::slice::from_raw_parts(slots.cast::<AtomicU64>(), words) };
        Some((header, slots))
    }
}

impl Drop for SharedBlock {
    fn drop(&mut self) {
        self.owner.release(self.addr, self.len);
    }
}

/// The memory a device shares with one client process, provided by whoever hosts the device
/// for it (a device service): the rings of the objects the client creates are allocated there
/// while a thread serves it ([`process::attach`]), so the client's user-mode provider maps
/// them, and each new QP's doorbell is handed over, so the host can run the QP's send queue
/// when the client rings it.
#[cfg(all(feature = "std", target_os = "linux"))]
pub trait SharedMemory: Send + Sync {
    /// A zeroed block of at least `bytes` bytes, 64-byte aligned.
    ///
    /// # Errors
    /// When the memory is exhausted.
    fn alloc(&self, bytes: usize) -> Result<SharedBlock, AllocError>;

    /// Takes the doorbell of a QP created for this client.
    ///
    /// # Errors
    /// When it cannot be kept (the QP's creation then fails).
    fn add_doorbell(&self, doorbell: crate::uvp::Doorbell) -> Result<(), AllocError>;
}

/// How the device validates ("probes and locks") client memory at registration.
#[derive(Clone, Debug)]
pub struct ClientMemory {
    kind: MemoryKind,
}

#[derive(Clone, Debug)]
enum MemoryKind {
    Pool(BufferPool),
    Trusted,
    #[cfg(all(feature = "std", target_os = "linux"))]
    Process,
}

impl ClientMemory {
    /// Client memory is the buffers of `pool`: anything else is refused.
    pub fn pool(pool: BufferPool) -> Self {
        ClientMemory {
            kind: MemoryKind::Pool(pool),
        }
    }

    /// Client memory is any memory of this process, validated at registration as the kernel's
    /// probe-and-lock validates it (every page mapped, readable, and writable when the
    /// registration grants write access) and reached through the kernel's cross-address-space
    /// copies ([`process`]), so an application that unmaps registered pages gets failed
    /// transfers, not a fault in the device. Safe: no promise is needed from the caller.
    #[cfg(all(feature = "std", target_os = "linux"))]
    pub fn process() -> Self {
        ClientMemory {
            kind: MemoryKind::Process,
        }
    }

    /// Client memory is this process's address space, trusted as is.
    ///
    /// # Safety
    /// Every range later passed to `register_mr` (or used as a fast-registration target) on a
    /// device built with this value must be memory of this process, valid for reads and writes
    /// until the region is deregistered; the caller takes the role of the kernel's probe.
    pub unsafe fn trusted_process() -> Self {
        ClientMemory {
            kind: MemoryKind::Trusted,
        }
    }

    /// Probes and pins `[addr, addr + len)`, which the device will write to when `writable`.
    pub(crate) fn pin(&self, addr: u64, len: u64, writable: bool) -> Result<DmaRange, VerbsError> {
        if len == 0 || addr == 0 || addr.checked_add(len).is_none() || len > isize::MAX as u64 {
            return Err(VerbsError::InvalidParameter);
        }
        let _ = writable;
        match &self.kind {
            MemoryKind::Pool(p) => p.find(addr, len).ok_or(VerbsError::InvalidParameter),
            #[cfg(all(feature = "std", target_os = "linux"))]
            MemoryKind::Process => {
                let client = process::caller();
                process::probe(&client, addr, len, writable)
                    .map_err(|_| VerbsError::InvalidPermission)?;
                Ok(DmaRange::syscall(client, addr, len as usize))
            }
            // SAFETY: `trusted_process`'s contract makes the caller vouch for every registered
            // range; length and overflow were checked above.
            MemoryKind::Trusted => Ok(unsafe {
                DmaRange::new(
                    ptr::with_exposed_provenance_mut(addr as usize),
                    len as usize,
                    None,
                )
            }),
        }
    }
}

/// Asks the processor to bring the cache line of `value` closer, without waiting for it: a
/// hint for a line another processor wrote that this one is about to read, so that its
/// transfer overlaps the work before the read instead of stalling it. Does nothing where the
/// architecture has no such hint here.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: a prefetch is a hint with no architectural effect: it reads nothing the program
    // can observe and cannot fault, and the address comes from a live reference anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            core::ptr::from_ref(value).cast::<i8>(),
        );
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = value;
}

/// Client processes' memory reached through the kernel: `process_vm_readv`/`process_vm_writev`
/// on the process that registered it (this process for the in-process stack, a client of a
/// device service otherwise).
///
/// Why copies through the kernel instead of pointers: application memory is not Rust memory.
/// The application may unmap or `mprotect` pages it registered (breaking the verbs contract,
/// but that must not crash the "device"), and a pointer copy into such a page is a SIGSEGV in
/// whatever thread rang the doorbell. The kernel's copy checks every page and fails with
/// `EFAULT` instead, so every copy here is memory-safe whatever the application does. The same
/// calls reach another process's memory by its pid, which is how a device service shared by
/// several processes (`wvd`) moves bytes between them: a transfer between two client
/// processes goes through a bounce buffer of the service (the kernel copies between the
/// caller and one other process only), two system calls. The price is a system call per copy
/// (about a microsecond), which is why the pool mode stays the harness's and the benchmarks'.
///
/// Which process: the one whose request is being served. A driver's probe acts on the calling
/// process (the IOCTLs that pin memory run in the caller's context); a service serving
/// several processes says which one a thread serves with [`attach`] (Windows'
/// `KeStackAttachProcess`), and [`ClientMemory::process`](super::ClientMemory::process)
/// registrations pin that process's memory. Without an attachment it is this process.
///
/// Registration validates as the kernel's probe-and-lock does: every page of the range mapped
/// and readable, and writable when the registration lets the device write (local write, remote
/// write or remote atomic access), read from `/proc/<pid>/maps`.
///
/// Remote atomics need atomicity against each other. On this process's own memory they are
/// real 8-byte CPU atomics on the application's word, after its mapping was checked again
/// (readable and writable: a write-back through the kernel could undo a concurrent atomic on
/// the same word); a page unmapped between that check and the atomic is the one case left to
/// the application's contract. On another process's memory no pointer exists, so the atomic is
/// a read, the operation and a write-back through the kernel under one lock of this process
/// ([`rmw`]): every remote atomic a device service executes, for any client and any of its
/// devices, is serialised by that lock, so they are atomic with respect to each other (what
/// `ATOMIC_HCA` promises). Neither kind is atomic with respect to the application's own plain
/// accesses to the word, as on hardware.
#[cfg(all(feature = "std", target_os = "linux"))]
pub mod process {
    extern crate std;

    use alloc::sync::Arc;
    use core::cell::RefCell;
    use core::sync::atomic::{AtomicBool, Ordering};
    use std::string::String;
    use std::sync::{Mutex, OnceLock};
    use std::vec::Vec;

    use super::SharedMemory;

    /// A process whose memory a device reaches: the owner of the registrations made while it
    /// is attached ([`attach`]), and of the shared memory its rings then live in.
    pub struct Client {
        pid: i32,
        this: bool,
        gone: AtomicBool,
        shared: Option<Arc<dyn SharedMemory>>,
    }

    impl core::fmt::Debug for Client {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("Client")
                .field("pid", &self.pid)
                .field("gone", &self.is_gone())
                .field("shared", &self.shared.is_some())
                .finish()
        }
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "host-side bookkeeping of the service's clients, not a driver allocation"
    )]
    impl Client {
        /// This process (the in-process stack's only client).
        pub fn this_process() -> Arc<Client> {
            static THIS: OnceLock<Arc<Client>> = OnceLock::new();
            THIS.get_or_init(|| {
                Arc::new(Client {
                    pid: std::process::id() as i32,
                    this: true,
                    gone: AtomicBool::new(false),
                    shared: None,
                })
            })
            .clone()
        }

        /// Process `pid` as a device service knows it: identified by the kernel (the peer
        /// credentials of its connection, never a number the client sent), with the memory the
        /// service shares with it for the rings of the objects it creates (`None`: rings stay
        /// in the device's own memory).
        pub fn new(pid: i32, shared: Option<Arc<dyn SharedMemory>>) -> Arc<Client> {
            Arc::new(Client {
                pid,
                this: pid == std::process::id() as i32,
                gone: AtomicBool::new(false),
                shared,
            })
        }

        /// Its process id.
        pub fn pid(&self) -> i32 {
            self.pid
        }

        /// Whether it is this process.
        pub fn is_this_process(&self) -> bool {
            self.this
        }

        /// The process has gone (its connection closed: it exited, was killed, or closed its
        /// handle, which deregisters everything it registered). From now on no system call
        /// names its pid (a recycled pid is never touched) and transfers with its memory do
        /// nothing: writes into it are dropped and reads from it give zeros, as a dead
        /// process's pages are out of every observer's reach. So its peers' requests in flight
        /// complete as on a real fabric, where the HCA goes on using the pinned pages until
        /// the process's QPs are destroyed (then the peers' requests go unanswered and end with
        /// the transport retry error); and nothing lands in memory it no longer registers.
        /// New registrations of it are refused. A copy that fails because the process has
        /// exited (`ESRCH`) marks it gone too.
        pub fn set_gone(&self) {
            self.gone.store(true, Ordering::Release);
        }

        /// Whether [`Client::set_gone`] was called.
        pub fn is_gone(&self) -> bool {
            self.gone.load(Ordering::Acquire)
        }

        /// The memory shared with it, if any.
        pub fn shared(&self) -> Option<&Arc<dyn SharedMemory>> {
            self.shared.as_ref()
        }
    }

    std::thread_local! {
        static ATTACHED: RefCell<Option<Arc<Client>>> = const { RefCell::new(None) };
    }

    /// While alive, the thread serves `client` (see [`attach`]); dropping it restores what the
    /// thread served before.
    #[must_use = "the attachment ends when the guard drops"]
    pub struct Attached {
        previous: Option<Arc<Client>>,
    }

    impl core::fmt::Debug for Attached {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("Attached").finish_non_exhaustive()
        }
    }

    impl Drop for Attached {
        fn drop(&mut self) {
            let previous = self.previous.take();
            ATTACHED.with(|a| *a.borrow_mut() = previous);
        }
    }

    /// The calling thread serves `client` until the guard drops: registrations pin its memory
    /// and new rings go into the memory it shares with the device.
    pub fn attach(client: &Arc<Client>) -> Attached {
        let previous = ATTACHED.with(|a| a.borrow_mut().replace(Arc::clone(client)));
        Attached { previous }
    }

    /// The process the calling thread serves.
    pub(crate) fn caller() -> Arc<Client> {
        ATTACHED
            .with(|a| a.borrow().clone())
            .unwrap_or_else(Client::this_process)
    }

    /// The shared memory of the process the calling thread serves, if it has one.
    pub(crate) fn caller_shared() -> Option<Arc<dyn SharedMemory>> {
        ATTACHED.with(|a| a.borrow().as_ref().and_then(|c| c.shared.clone()))
    }

    /// Why memory cannot be registered or reached.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Fault {
        /// Some page of the range is not mapped (or not readable), or the process is gone.
        Unmapped,
        /// Write access was asked for a page that is not writable.
        ReadOnly,
    }

    /// Checks that `[addr, addr + len)` of `client` is mapped and readable, and writable when
    /// `write`: the kernel's probe of a registration (both faults are `EFAULT` from
    /// `ibv_reg_mr`).
    ///
    /// # Errors
    /// The first [`Fault`] found.
    pub fn probe(client: &Client, addr: u64, len: u64, write: bool) -> Result<(), Fault> {
        if client.is_gone() {
            return Err(Fault::Unmapped);
        }
        let path = if client.this {
            String::from("/proc/self/maps")
        } else {
            std::format!("/proc/{}/maps", client.pid)
        };
        let maps = std::fs::read_to_string(path).map_err(|_| Fault::Unmapped)?;
        probe_in(&maps, addr, len, write)
    }

    /// [`probe`] against the text of a `/proc/<pid>/maps`.
    fn probe_in(maps: &str, addr: u64, len: u64, write: bool) -> Result<(), Fault> {
        let end = addr.checked_add(len).ok_or(Fault::Unmapped)?;
        let mut at = addr;
        // Mappings are listed in address order: walk them while they cover `at`.
        for line in maps.lines() {
            let Some((lo, hi, perms)) = parse_line(line) else {
                continue;
            };
            if hi <= at {
                continue;
            }
            if lo > at {
                return Err(Fault::Unmapped);
            }
            let p = perms.as_bytes();
            if p.first() != Some(&b'r') {
                return Err(Fault::Unmapped);
            }
            if write && p.get(1) != Some(&b'w') {
                return Err(Fault::ReadOnly);
            }
            at = hi;
            if at >= end {
                return Ok(());
            }
        }
        Err(Fault::Unmapped)
    }

    fn parse_line(line: &str) -> Option<(u64, u64, String)> {
        let mut parts = line.split_ascii_whitespace();
        let range = parts.next()?;
        let perms = parts.next()?;
        let (lo, hi) = range.split_once('-')?;
        Some((
            u64::from_str_radix(lo, 16).ok()?,
            u64::from_str_radix(hi, 16).ok()?,
            String::from(perms),
        ))
    }

    /// `struct iovec`.
    #[repr(C)]
    struct IoVec {
        iov_base: *mut core::ffi::c_void,
        iov_len: usize,
    }

    impl IoVec {
        fn at(addr: usize, len: usize) -> IoVec {
            IoVec {
                iov_base: core::ptr::with_exposed_provenance_mut(addr),
                iov_len: len,
            }
        }
    }

    /// Declares glibc's wrappers of system calls that share `process_vm_readv`'s prototype
    /// (here rather than through a crate, so the soft HCA keeps its dependency set, which the
    /// driver package's locked build lists): the read and the write take the same arguments.
    macro_rules! process_vm_calls {
        ($($name:ident),+) => {
            unsafe extern "C" {
                $(fn $name(
                    pid: i32,
                    local_iov: *const IoVec,
                    liovcnt: core::ffi::c_ulong,
                    remote_iov: *const IoVec,
                    riovcnt: core::ffi::c_ulong,
                    flags: core::ffi::c_ulong,
                ) -> isize;)+
            }
        };
    }
    process_vm_calls!(process_vm_readv, process_vm_writev);

    /// Copies `len` bytes of `from`'s memory at `remote` into this process at `local`.
    fn readv(from: &Client, remote: usize, local: usize, len: usize) -> Result<(), ()> {
        if len == 0 {
            return Ok(());
        }
        if from.is_gone() {
            return zero_local(local, len);
        }
        let (l, r) = (IoVec::at(local, len), IoVec::at(remote, len));
        // SAFETY: `process_vm_readv` only reads the two iovecs passed by reference here; the
        // addresses they name are accessed by the kernel, which checks every page of both
        // sides and answers EFAULT for one that is not accessible. The local side is either a
        // Rust buffer the caller lends for the copy or, on this process, memory the device may
        // write by the registration it was validated for.
        let n = unsafe { process_vm_readv(from.pid, &l, 1, &r, 1, 0) };
        if n == len as isize {
            Ok(())
        } else if exited(from) {
            zero_local(local, len)
        } else {
            Err(())
        }
    }

    /// After a failed copy: whether it failed because the process has exited (`ESRCH`; its
    /// connection may not have ended yet) — then it is gone from now on.
    fn exited(client: &Client) -> bool {
        const ESRCH: i32 = 3;
        if !client.this && std::io::Error::last_os_error().raw_os_error() == Some(ESRCH) {
            client.set_gone();
            return true;
        }
        false
    }

    /// Copies `len` bytes of this process at `local` into `to`'s memory at `remote`.
    fn writev(to: &Client, local: usize, remote: usize, len: usize) -> Result<(), ()> {
        if len == 0 {
            return Ok(());
        }
        if to.is_gone() {
            return Ok(());
        }
        let (l, r) = (IoVec::at(local, len), IoVec::at(remote, len));
        // SAFETY: as in `readv`: the kernel reads the local side and writes the remote one,
        // checking every page; the iovecs are only read.
        let n = unsafe { process_vm_writev(to.pid, &l, 1, &r, 1, 0) };
        if n == len as isize || n < 0 && exited(to) {
            Ok(())
        } else {
            Err(())
        }
    }

    /// Zeroes `len` bytes of this process at `local` (what reading a gone client's memory
    /// gives), through the kernel like any write to memory of a registration.
    fn zero_local(local: usize, len: usize) -> Result<(), ()> {
        static ZEROS: [u8; 4096] = [0; 4096];
        let this = Client::this_process();
        let mut done = 0;
        while done < len {
            let n = (len - done).min(ZEROS.len());
            writev(&this, ZEROS.as_ptr().addr(), local + done, n)?;
            done += n;
        }
        Ok(())
    }

    /// Copies `out.len()` bytes of `client`'s memory at `addr` into `out`.
    pub(super) fn read(
        client: &Client,
        addr: usize,
        out: &mut [u8],
    ) -> Result<(), super::OutOfBounds> {
        readv(client, addr, out.as_mut_ptr().addr(), out.len()).map_err(|_| super::OutOfBounds)
    }

    /// Copies `data` into `client`'s memory at `addr`.
    pub(super) fn write(
        client: &Client,
        data: &[u8],
        addr: usize,
    ) -> Result<(), super::OutOfBounds> {
        writev(client, data.as_ptr().addr(), addr, data.len()).map_err(|_| super::OutOfBounds)
    }

    /// The largest piece a transfer between two other processes moves at a time.
    const BOUNCE: usize = 256 * 1024;

    std::thread_local! {
        static BOUNCE_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }

    /// Copies `len` bytes from `src` to `dst`, each an address of a client process (reached
    /// through the kernel) or, with `None`, of the device's own memory. One system call when
    /// one side is this process; through a bounce buffer of this process otherwise.
    pub(super) fn transfer(
        src: (Option<&Client>, usize),
        dst: (Option<&Client>, usize),
        len: usize,
    ) -> Result<(), super::OutOfBounds> {
        let fail = |_| super::OutOfBounds;
        match (src, dst) {
            ((None, s), (Some(d), dst)) => writev(d, s, dst, len).map_err(fail),
            ((Some(c), s), (None, d)) => readv(c, s, d, len).map_err(fail),
            // One system call when one side is this process and has not gone: a gone one (a
            // client record of this process marked gone) goes through `readv`/`writev` below,
            // which drop what is written into it and read zeros from it, as for any other.
            ((Some(c), s), (Some(d), dst)) if d.this && !d.is_gone() => {
                readv(c, s, dst, len).map_err(fail)
            }
            ((Some(c), s), (Some(d), dst)) if c.this && !c.is_gone() => {
                writev(d, s, dst, len).map_err(fail)
            }
            ((Some(c), s), (Some(d), dst)) => BOUNCE_BUF.with(|b| {
                let mut b = b.borrow_mut();
                if b.len() < len.min(BOUNCE) {
                    b.resize(len.min(BOUNCE), 0);
                }
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(BOUNCE);
                    let at = b.as_mut_ptr().addr();
                    readv(c, s + done, at, n).map_err(fail)?;
                    writev(d, at, dst + done, n).map_err(fail)?;
                    done += n;
                }
                Ok(())
            }),
            ((None, _), (None, _)) => Err(super::OutOfBounds),
        }
    }

    /// Copies `len` bytes of `src`'s memory at `src_addr` into `dst`'s at `dst_addr`, as the
    /// device copies between two clients' registrations (a bounce buffer of this process
    /// between two other processes). Safe: the kernel checks every page of both sides.
    ///
    /// # Errors
    /// [`Fault::Unmapped`] when a page of either side is not accessible.
    pub fn copy_between(
        src: &Client,
        src_addr: u64,
        dst: &Client,
        dst_addr: u64,
        len: usize,
    ) -> Result<(), Fault> {
        let (s, d) = (
            usize::try_from(src_addr).map_err(|_| Fault::Unmapped)?,
            usize::try_from(dst_addr).map_err(|_| Fault::Unmapped)?,
        );
        transfer((Some(src), s), (Some(dst), d), len).map_err(|_| Fault::Unmapped)
    }

    /// Whether the 8 bytes at `addr` of `client` (this process) are mapped readable and
    /// writable now (the CPU atomic's probe: from the mappings, since a write-back through the
    /// kernel could undo a concurrent atomic on the same word). It reads `/proc/self/maps`,
    /// tens of microseconds: the price of a remote atomic on application memory in this mode.
    pub(super) fn probe_word(client: &Client, addr: usize) -> Result<(), super::OutOfBounds> {
        probe(client, addr as u64, 8, true).map_err(|_| super::OutOfBounds)
    }

    /// A remote atomic on another process's 8 bytes at `addr` (naturally aligned): reads the
    /// word, writes `op` of it back, returns the original; the lock makes every such operation
    /// of this process one after the other, so they are atomic with respect to each other.
    pub(super) fn rmw(
        client: &Client,
        addr: usize,
        op: impl FnOnce(u64) -> u64,
    ) -> Result<u64, ()> {
        static ATOMICS: Mutex<()> = Mutex::new(());
        // A panic while holding it cannot leave a word half-written (the write is one system
        // call), so a poisoned lock is still good.
        let _serial = ATOMICS.lock().unwrap_or_else(|e| e.into_inner());
        let mut word = [0u8; 8];
        readv(client, addr, word.as_mut_ptr().addr(), 8)?;
        let old = u64::from_ne_bytes(word);
        let new = op(old).to_ne_bytes();
        if new != word {
            writev(client, new.as_ptr().addr(), addr, 8)?;
        }
        Ok(old)
    }

    /// Reads `out.len()` bytes of this process's own memory at `addr` through the kernel (the
    /// user-mode provider's inline data, gathered from the application's buffers): an address
    /// the application got wrong is an error, not a fault.
    pub(crate) fn read_own(addr: u64, out: &mut [u8]) -> Result<(), super::OutOfBounds> {
        let addr = usize::try_from(addr).map_err(|_| super::OutOfBounds)?;
        read(&Client::this_process(), addr, out)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        const MAPS: &str = "\
1000-3000 r-xp 00000000 00:00 0 /bin/x
3000-5000 rw-p 00000000 00:00 0
6000-7000 ---p 00000000 00:00 0
7000-8000 r--p 00000000 00:00 0
";

        fn map(len: usize, prot: i32) -> usize {
            // SAFETY: an anonymous private mapping; no pointer is passed in.
            let p = unsafe {
                libc::mmap(
                    core::ptr::null_mut(),
                    len,
                    prot,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            p.addr()
        }

        fn unmap(addr: usize, len: usize) {
            // SAFETY: a mapping `map` made, unmapped once; nothing refers to it by reference.
            unsafe { libc::munmap(core::ptr::with_exposed_provenance_mut(addr), len) };
        }

        #[test]
        fn registrations_are_probed_and_copies_into_vanished_pages_fail_safely() {
            use crate::dma::{ClientMemory, DmaRange};
            let mem = ClientMemory::process();
            let page = 4096;
            let rw = map(2 * page, libc::PROT_READ | libc::PROT_WRITE);
            let ro = map(page, libc::PROT_READ);
            // Read-only memory: for reading only.
            assert!(mem.pin(ro as u64, page as u64, false).is_ok());
            assert!(mem.pin(ro as u64, page as u64, true).is_err());
            // Inaccessible memory (PROT_NONE) and memory nothing can map (a non-canonical
            // address: a page unmapped here could be mapped again by another test's thread).
            let none = map(page, libc::PROT_NONE);
            assert!(mem.pin(none as u64, page as u64, false).is_err());
            assert!(mem.pin(1 << 47, page as u64, false).is_err());
            // Copies through the kernel, between two ranges of one mapping.
            let a = mem.pin(rw as u64, page as u64, true).unwrap();
            let b = mem.pin((rw + page) as u64, page as u64, true).unwrap();
            a.write(0, b"abc").unwrap();
            DmaRange::copy(&a, 0, &b, 10, 3).unwrap();
            let mut out = [0u8; 3];
            b.read(10, &mut out).unwrap();
            assert_eq!(&out, b"abc");
            assert_eq!(b.fetch_add(16, 5), Ok(0));
            assert_eq!(b.fetch_add(16, 1), Ok(5));
            // The application takes the second page away (PROT_NONE, as good as unmapped to
            // the kernel's copy, and not reusable by another thread's mapping): transfers fail,
            // nothing faults.
            // SAFETY: changes the protection of the second page of the mapping made above.
            unsafe {
                libc::mprotect(
                    core::ptr::with_exposed_provenance_mut(rw + page),
                    page,
                    libc::PROT_NONE,
                )
            };
            assert!(b.read(0, &mut out).is_err());
            assert!(b.write(0, b"x").is_err());
            assert!(DmaRange::copy(&a, 0, &b, 0, 3).is_err());
            assert_eq!(
                b.fetch_add(16, 1),
                Err(super::super::AtomicFault::OutOfBounds)
            );
            // And write-protects the first: writes fail, reads work.
            // SAFETY: changes the protection of the first page of the mapping made above.
            unsafe {
                libc::mprotect(
                    core::ptr::with_exposed_provenance_mut(rw),
                    page,
                    libc::PROT_READ,
                )
            };
            assert!(a.write(0, b"x").is_err());
            assert_eq!(
                a.fetch_add(16, 1),
                Err(super::super::AtomicFault::OutOfBounds)
            );
            a.read(0, &mut out).unwrap();
            assert_eq!(&out, b"abc");
            unmap(rw, 2 * page);
            unmap(ro, page);
            unmap(none, page);
        }

        #[test]
        fn a_client_is_known_by_its_process_id() {
            let me = std::process::id() as i32;
            assert_eq!(Client::this_process().pid(), me);
            assert!(Client::this_process().is_this_process());
            let other = Client::new(me + 1, None);
            assert_eq!(other.pid(), me + 1);
            assert!(!other.is_this_process());
            assert!(Client::new(me, None).is_this_process());
        }

        #[test]
        fn another_processs_memory_is_copied_through_a_bounce_buffer_and_its_atomics_are_real() {
            use crate::dma::DmaRange;
            let page = map(4096, libc::PROT_READ | libc::PROT_WRITE);
            let mine = DmaRange::syscall(Client::this_process(), page as u64, 4096);
            mine.write(0, b"0123456789abcdef").unwrap();
            mine.write(64, &41u64.to_ne_bytes()).unwrap();
            // A forked child has this address space as it was: the page is at the same
            // address there, with the same bytes.
            // SAFETY: the child only waits for its signal (async-signal-safe calls alone, as a
            // child of a threaded process must); the parent kills and reaps it below.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork");
            if pid == 0 {
                loop {
                    // SAFETY: pause has no preconditions.
                    unsafe { libc::pause() };
                }
            }
            // Two clients that are both not this process: a copy between them goes through
            // this process's bounce buffer (here both are the child).
            let theirs = DmaRange::syscall(Client::new(pid, None), page as u64, 4096);
            let also_theirs = DmaRange::syscall(Client::new(pid, None), page as u64, 4096);
            let copied = DmaRange::copy(&theirs, 0, &also_theirs, 1024, 16);
            let mut out = [0u8; 16];
            let read = theirs.read(1024, &mut out);
            // A remote atomic on the child's word: its original value back, the sum in place.
            let fetched = theirs.fetch_add(64, 5);
            let swapped = theirs.compare_swap(64, 46, 7);
            let mut word = [0u8; 8];
            let read_word = theirs.read(64, &mut word);
            // SAFETY: `pid` is our child, killed once.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            // SAFETY: `pid` is our child, reaped once; no status is asked for.
            unsafe { libc::waitpid(pid, core::ptr::null_mut(), 0) };
            assert_eq!((copied, read), (Ok(()), Ok(())));
            assert_eq!(&out, b"0123456789abcdef");
            assert_eq!((fetched, swapped), (Ok(41), Ok(46)));
            assert_eq!((read_word, u64::from_ne_bytes(word)), (Ok(()), 7));
            // This process's page is untouched.
            let mut here = [1u8; 16];
            mine.read(1024, &mut here).unwrap();
            assert_eq!(here, [0; 16]);
            unmap(page, 4096);
        }

        #[test]
        fn a_gone_client_is_never_reached_writes_vanish_and_reads_give_zeros() {
            use crate::dma::DmaRange;
            let mut child = std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap();
            let client = Client::new(child.id() as i32, None);
            assert!(!client.is_this_process());
            client.set_gone();
            // Whatever the address: no system call names the pid any more.
            let theirs = DmaRange::syscall(client.clone(), 0x1000, 64);
            theirs.write(0, b"dropped").unwrap();
            let mut out = [0xffu8; 16];
            theirs.read(8, &mut out).unwrap();
            assert_eq!(out, [0; 16]);
            assert_eq!(theirs.fetch_add(8, 5), Ok(0));
            // A copy from it into this process's memory zeroes the destination.
            let page = map(4096, libc::PROT_READ | libc::PROT_WRITE);
            let mine = DmaRange::syscall(Client::this_process(), page as u64, 4096);
            mine.write(0, &[7u8; 32]).unwrap();
            DmaRange::copy(&theirs, 0, &mine, 0, 32).unwrap();
            let mut back = [1u8; 32];
            mine.read(0, &mut back).unwrap();
            assert_eq!(back, [0; 32]);
            // Registrations of it are refused.
            assert_eq!(probe(&client, 0x1000, 8, false), Err(Fault::Unmapped));
            unmap(page, 4096);
            let _ = child.kill();
            let _ = child.wait();
        }

        #[test]
        fn probe_walks_adjacent_mappings_and_checks_permissions() {
            assert_eq!(probe_in(MAPS, 0x1000, 0x4000, false), Ok(()));
            assert_eq!(probe_in(MAPS, 0x2000, 0x2000, true), Err(Fault::ReadOnly));
            assert_eq!(probe_in(MAPS, 0x3000, 0x2000, true), Ok(()));
            assert_eq!(probe_in(MAPS, 0x4000, 0x1001, false), Err(Fault::Unmapped));
            assert_eq!(probe_in(MAPS, 0x6000, 8, false), Err(Fault::Unmapped));
            assert_eq!(probe_in(MAPS, 0x7000, 8, true), Err(Fault::ReadOnly));
            assert_eq!(probe_in(MAPS, 0x7000, 0x1000, false), Ok(()));
            assert_eq!(probe_in(MAPS, 0x9000, 1, false), Err(Fault::Unmapped));
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests may allocate infallibly")]
mod tests {
    extern crate std;

    use super::*;

    #[test]
    fn a_null_based_block_gives_its_empty_word_view_without_touching_its_pointer() {
        struct Keep;
        impl BlockOwner for Keep {
            fn release(&self, _addr: u64, _len: usize) {}
        }
        // SAFETY: a null base, which `new` turns into an empty block whose memory is never
        // reached (what this test checks, under Miri too).
        let null = unsafe { SharedBlock::new(core::ptr::null_mut(), 64, 0, Arc::new(Keep)) };
        assert!(null.words32().is_empty());
    }

    #[test]
    fn pool_pins_only_its_buffers() {
        let pool = BufferPool::new();
        let mem = ClientMemory::pool(pool.clone());
        let b = pool.alloc(64);
        assert!(mem.pin(b.addr(), 64, true).is_ok());
        assert!(mem.pin(b.addr() + 8, 56, true).is_ok());
        assert!(mem.pin(b.addr(), 65, true).is_err());
        assert!(mem.pin(b.addr() + 64, 1, true).is_err());
        assert!(mem.pin(0, 1, true).is_err());
        assert!(mem.pin(b.addr(), 0, true).is_err());
        assert!(mem.pin(u64::MAX - 2, 8, true).is_err());
    }

    #[test]
    fn copies_are_bounds_checked() {
        let pool = BufferPool::new();
        let mem = ClientMemory::pool(pool.clone());
        let a = pool.alloc(32);
        let b = pool.alloc(16);
        a.write(0, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let ra = mem.pin(a.addr(), 32, true).unwrap();
        let rb = mem.pin(b.addr(), 16, true).unwrap();
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
        let r = mem.pin(b.addr(), 24, true).unwrap();
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
        let shifted = mem.pin(b.addr() + 4, 20, true).unwrap();
        assert_eq!(shifted.fetch_add(0, 1), Err(AtomicFault::Misaligned));
        assert_eq!(shifted.fetch_add(4, 1), Ok(100));
    }

    #[test]
    fn concurrent_atomics_from_two_threads_lose_no_update() {
        let pool = BufferPool::new();
        let mem = ClientMemory::pool(pool.clone());
        let b = pool.alloc(16);
        let r = Arc::new(mem.pin(b.addr(), 16, true).unwrap());
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
        let r = mem.pin(addr, 32, true).unwrap();
        r.write(4, b"abc").unwrap();
        let mut out = [0u8; 3];
        r.read(4, &mut out).unwrap();
        assert_eq!(&out, b"abc");
        assert!(r.write(31, b"xy").is_err());
        assert!(mem.pin(addr, 0, true).is_err());
        drop(r);
        assert_eq!(&v[4..7], b"abc");
    }

    #[test]
    fn overlapping_copy_is_a_memmove_and_registration_keeps_memory_alive() {
        let pool = BufferPool::new();
        let mem = ClientMemory::pool(pool.clone());
        let a = pool.alloc(16);
        a.write(0, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let r = mem.pin(a.addr(), 16, true).unwrap();
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
