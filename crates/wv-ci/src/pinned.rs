//! A value on the heap at an address that never changes, allocated fallibly: what the adapters
//! hand to C as a callback context or a registration record. Out of memory is an error the
//! caller turns into a failed verb, never an allocation-error handler (a bug check in a
//! kernel).
//!
//! It keeps a raw pointer rather than a `Box`: C holds the address while the owner moves, and
//! moving a `Box` would assert unique access to the value (so the pointer C holds would no
//! longer be valid under Rust's aliasing rules).

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;

/// A value on the heap, at a fixed address until it is dropped.
pub(crate) struct Pinned<T> {
    ptr: NonNull<T>,
    _owns: PhantomData<T>,
}

// SAFETY: `Pinned<T>` owns its `T` like a `Box<T>` does.
unsafe impl<T: Send> Send for Pinned<T> {}
// SAFETY: as above; shared access only hands out `&T`.
unsafe impl<T: Sync> Sync for Pinned<T> {}

impl<T> Pinned<T> {
    /// Moves `value` to the heap; gives it back when no memory is left.
    pub(crate) fn new(value: T) -> Result<Self, T> {
        let mut one = Vec::new();
        // Exactly one element of capacity, so turning it into a boxed slice never reallocates.
        if one.try_reserve_exact(1).is_err() {
            return Err(value);
        }
        one.push(value);
        let slice: *mut [T] = Box::into_raw(one.into_boxed_slice());
        let ptr = NonNull::new(slice.cast::<T>()).unwrap_or(NonNull::dangling());
        Ok(Pinned {
            ptr,
            _owns: PhantomData,
        })
    }

    /// Its address, for C.
    pub(crate) fn as_ptr(&self) -> *const T {
        self.ptr.as_ptr()
    }

    /// Gives the value's ownership to C: the address, to be taken back by [`Pinned::from_raw`]
    /// exactly once.
    pub(crate) fn into_raw(self) -> *mut T {
        ManuallyDrop::new(self).ptr.as_ptr()
    }

    /// Takes back a value [`Pinned::into_raw`] gave away.
    ///
    /// # Safety
    /// `ptr` came from `Pinned::<T>::into_raw` and has not been taken back before.
    pub(crate) unsafe fn from_raw(ptr: *mut T) -> Self {
        Pinned {
            ptr: NonNull::new(ptr).unwrap_or(NonNull::dangling()),
            _owns: PhantomData,
        }
    }

    /// The value, freeing its place.
    pub(crate) fn into_inner(self) -> T {
        let ptr = ManuallyDrop::new(self).ptr;
        // SAFETY: the allocation is the one-element boxed slice `new` leaked, owned by this
        // value and not freed (drop was suppressed above).
        let [value] = *unsafe { Box::from_raw(ptr.as_ptr().cast::<[T; 1]>()) };
        value
    }
}

impl<T> Drop for Pinned<T> {
    fn drop(&mut self) {
        // SAFETY: the one-element boxed slice `new` leaked, owned by this value, freed once.
        drop(unsafe { Box::from_raw(self.ptr.as_ptr().cast::<[T; 1]>()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_is_stable_across_moves() {
        let p = Pinned::new([7u64; 4]).ok().unwrap();
        let at = p.as_ptr();
        let moved = p;
        assert_eq!(moved.as_ptr(), at);
        // A pointer taken before the move is still usable after it.
        // SAFETY: the value is alive and only read.
        assert_eq!(unsafe { (*at)[1] }, 7);
        let raw = moved.into_raw();
        assert_eq!(raw.cast_const(), at);
        // SAFETY: taken back once, from `into_raw`.
        let back = unsafe { Pinned::from_raw(raw) };
        assert_eq!(back.into_inner()[0], 7);
    }
}
