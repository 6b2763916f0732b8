//! Nonpaged pool allocations that can fail: `ExAllocatePool2` with the driver's tag. Running
//! out of pool is a status the caller returns, never the allocation-error handler (which
//! wdk-panic turns into a bug check).

use core::mem::{align_of, size_of};
use core::ops::Deref;
use core::ptr::NonNull;

use wdk_sys::ntddk::{ExAllocatePool2, ExFreePoolWithTag};
use wdk_sys::{POOL_FLAG_NON_PAGED, ULONG};

/// The driver's pool tag ("WvRs" in a pool dump).
pub const POOL_TAG: ULONG = u32::from_le_bytes(*b"WvRs");

/// The alignment `ExAllocatePool2` guarantees on x64 (`MEMORY_ALLOCATION_ALIGNMENT`).
const POOL_ALIGNMENT: usize = 16;

/// A `T` in nonpaged pool, freed (and dropped) with the box. Its address never changes, so it
/// may hold objects the kernel links to (a `KEVENT`).
pub struct PoolBox<T> {
    ptr: NonNull<T>,
}

// SAFETY: `PoolBox<T>` owns its `T` like `Box<T>`.
unsafe impl<T: Send> Send for PoolBox<T> {}
// SAFETY: as above; only `&T` is handed out.
unsafe impl<T: Sync> Sync for PoolBox<T> {}

impl<T> PoolBox<T> {
    /// Moves `value` to nonpaged pool; gives it back when the pool is exhausted.
    /// IRQL <= DISPATCH_LEVEL.
    pub fn try_new(value: T) -> Result<Self, T> {
        const { assert!(align_of::<T>() <= POOL_ALIGNMENT) };
        let bytes = size_of::<T>().max(1) as u64;
        // SAFETY: a nonpaged allocation with the driver's tag, valid at IRQL <= DISPATCH_LEVEL.
        let raw = unsafe { ExAllocatePool2(POOL_FLAG_NON_PAGED, bytes, POOL_TAG) };
        let Some(ptr) = NonNull::new(raw.cast::<T>()) else {
            return Err(value);
        };
        // SAFETY: a fresh allocation of at least `size_of::<T>()` bytes, aligned for `T`
        // (checked above against the pool's alignment).
        unsafe { ptr.as_ptr().write(value) };
        Ok(PoolBox { ptr })
    }

    /// Gives the allocation away, to be taken back by [`PoolBox::from_raw`] once.
    pub fn into_raw(self) -> *mut T {
        let ptr = self.ptr.as_ptr();
        core::mem::forget(self);
        ptr
    }

    /// The value, freeing its allocation.
    pub fn into_inner(self) -> T {
        let ptr = self.into_raw();
        // SAFETY: the live value is moved out exactly once; the memory is freed right after
        // and never read again.
        let value = unsafe { ptr.read() };
        // SAFETY: allocated by `try_new` with the same tag; the value was moved out above.
        unsafe { ExFreePoolWithTag(ptr.cast(), POOL_TAG) };
        value
    }

    /// Takes back an allocation [`PoolBox::into_raw`] gave away.
    ///
    /// # Safety
    /// `ptr` came from `PoolBox::<T>::into_raw` and was not taken back before.
    pub unsafe fn from_raw(ptr: *mut T) -> Option<Self> {
        NonNull::new(ptr).map(|ptr| PoolBox { ptr })
    }
}

impl<T> Deref for PoolBox<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the box owns a live, initialised `T`; only shared references are made.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> Drop for PoolBox<T> {
    fn drop(&mut self) {
        // SAFETY: the value is live and dropped exactly once, here.
        unsafe { self.ptr.as_ptr().drop_in_place() };
        // SAFETY: allocated by `try_new` with the same tag, not used after this.
        unsafe { ExFreePoolWithTag(self.ptr.as_ptr().cast(), POOL_TAG) };
    }
}
