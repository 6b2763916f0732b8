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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// Through the pointer (pool buffers, trusted process memory).
    Pointer,
    /// Through the kernel's cross-address-space copy on this process (see [`process`]): a
    /// page the application unmapped or made read-only after registering it is a failed copy,
    /// never a fault of the device's thread.
    #[cfg(all(feature = "std", target_os = "linux"))]
    Syscall,
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

    /// A range of this process's memory reached only through [`process`]'s copies (and the
    /// checked atomics): no pointer into it is ever dereferenced by a copy, so a range whose
    /// pages go away makes copies fail instead of faulting.
    #[cfg(all(feature = "std", target_os = "linux"))]
    fn syscall(addr: u64, len: usize) -> Self {
        DmaRange {
            base: ptr::with_exposed_provenance_mut(addr as usize),
            len,
            _keep: None,
            reach: Reach::Syscall,
        }
    }

    #[cfg_attr(
        not(all(feature = "std", target_os = "linux")),
        allow(dead_code, reason = "only the process mode asks")
    )]
    fn by_pointer(&self) -> bool {
        self.reach == Reach::Pointer
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
        if !self.by_pointer() {
            return process::copy(self.base.addr() + off, out.as_mut_ptr().addr(), out.len());
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
        if !self.by_pointer() {
            return process::copy(data.as_ptr().addr(), self.base.addr() + off, data.len());
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
        if !self.by_pointer() {
            // The word must still be mapped readable and writable (a page taken away between
            // this probe and the atomic below is the application's breach of the
            // registration's contract).
            process::probe_word(p.addr()).map_err(|_| AtomicFault::OutOfBounds)?;
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
        #[cfg(all(feature = "std", target_os = "linux"))]
        if !src.by_pointer() || !dst.by_pointer() {
            return process::copy(src.base.addr() + s, dst.base.addr() + d, len);
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
                process::probe(addr, len, writable).map_err(|_| VerbsError::InvalidPermission)?;
                Ok(DmaRange::syscall(addr, len as usize))
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

/// This process's memory reached the way a device service in another process would reach it:
/// through `process_vm_readv`/`process_vm_writev` on the process itself.
///
/// Why copies through the kernel instead of pointers: application memory is not Rust memory.
/// The application may unmap or `mprotect` pages it registered (breaking the verbs contract,
/// but that must not crash the "device"), and a pointer copy into such a page is a SIGSEGV in
/// whatever thread rang the doorbell. The kernel's copy checks every page and fails with
/// `EFAULT` instead, so every copy here is memory-safe whatever the application does. The same
/// calls reach another process's memory given its pid, which a device service shared by several
/// processes needs. The price is a system call per copy (about a microsecond), which is why the
/// pool mode stays the harness's and the benchmarks'.
///
/// Registration validates as the kernel's probe-and-lock does: every page of the range mapped
/// and readable, and writable when the registration lets the device write (local write, remote
/// write or remote atomic access), read from `/proc/self/maps`. Remote atomics need a real
/// 8-byte atomic on the application's word: its mapping is checked again (readable and
/// writable, from `/proc/self/maps`: a write-back through the kernel could undo a concurrent
/// atomic on the same word), then it is reached by pointer; a page unmapped between that check
/// and the atomic is the one case left to the application's contract.
#[cfg(all(feature = "std", target_os = "linux"))]
pub mod process {
    extern crate std;

    use std::string::String;

    /// Why memory cannot be registered or reached.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Fault {
        /// Some page of the range is not mapped (or not readable).
        Unmapped,
        /// Write access was asked for a page that is not writable.
        ReadOnly,
    }

    /// Checks that `[addr, addr + len)` is mapped and readable, and writable when `write`:
    /// the kernel's probe of a registration (both faults are `EFAULT` from `ibv_reg_mr`).
    ///
    /// # Errors
    /// The first [`Fault`] found.
    pub fn probe(addr: u64, len: u64, write: bool) -> Result<(), Fault> {
        let maps = std::fs::read_to_string("/proc/self/maps").map_err(|_| Fault::Unmapped)?;
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

    // glibc's wrapper of the system call (declared here rather than through a crate, so the
    // soft HCA keeps its dependency set, which the driver package's locked build lists).
    unsafe extern "C" {
        fn process_vm_readv(
            pid: i32,
            local_iov: *const IoVec,
            liovcnt: core::ffi::c_ulong,
            remote_iov: *const IoVec,
            riovcnt: core::ffi::c_ulong,
            flags: core::ffi::c_ulong,
        ) -> isize;
    }

    /// Copies `len` bytes from address `src` to address `dst` of this process through the
    /// kernel: a page of either side that is not mapped (or, for `dst`, not writable) fails the
    /// copy instead of faulting.
    pub(super) fn copy(src: usize, dst: usize, len: usize) -> Result<(), super::OutOfBounds> {
        if len == 0 {
            return Ok(());
        }
        let local = IoVec {
            iov_base: core::ptr::with_exposed_provenance_mut(dst),
            iov_len: len,
        };
        let remote = IoVec {
            iov_base: core::ptr::with_exposed_provenance_mut(src),
            iov_len: len,
        };
        let pid = std::process::id() as i32;
        // SAFETY: `process_vm_readv` only reads the two iovecs passed by reference here; the
        // addresses they name are accessed by the kernel, which checks every page and answers
        // EFAULT for one that is not accessible. On this process, a destination the kernel can
        // write is memory the device may write by the registration it was validated for.
        let n = unsafe { process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        if n == len as isize {
            Ok(())
        } else {
            Err(super::OutOfBounds)
        }
    }

    /// Whether the 8 bytes at `addr` are mapped readable and writable now (the atomic's probe:
    /// from the mappings, since a write-back through the kernel could undo a concurrent
    /// atomic on the same word). It reads `/proc/self/maps`, tens of microseconds: the price of
    /// a remote atomic on application memory in this mode.
    pub(super) fn probe_word(addr: usize) -> Result<(), super::OutOfBounds> {
        probe(addr as u64, 8, true).map_err(|_| super::OutOfBounds)
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
