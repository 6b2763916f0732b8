//! Fallible allocation for the kernel half: it is the model of a Windows soft-HCA driver, where
//! the allocation-error handler is a bug check, so every allocation a request makes can fail
//! and is answered with `VerbsError::InsufficientMemory` (OFW's `IB_INSUFFICIENT_MEMORY`).
//!
//! Nothing grows while one of the device's locks is held: a vector behind a lock that is full
//! is replaced by a bigger one allocated with the lock released ([`grow`]), and whatever buffer
//! is left over is freed after the lock is dropped. Shared objects are [`wv_hal::KArc`]s, built
//! before the command that publishes them.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ops::DerefMut;

use wv_hal::{AllocError, VerbsError};

/// How the kernel half answers a refused allocation.
pub(crate) fn no_memory<E>(_: E) -> VerbsError {
    VerbsError::InsufficientMemory
}

/// An empty vector with room for exactly `n` elements.
pub(crate) fn vec_with_capacity<T>(n: usize) -> Result<Vec<T>, AllocError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)?;
    Ok(v)
}

/// `n` copies of `value` (`vec![value; n]` that can fail).
pub(crate) fn vec_of<T: Clone>(n: usize, value: T) -> Result<Vec<T>, AllocError> {
    let mut v = vec_with_capacity(n)?;
    v.resize(n, value);
    Ok(v)
}

/// `n` copies of `value` in a boxed slice (the vector's capacity is exact, so boxing it does
/// not reallocate).
pub(crate) fn boxed_slice_of<T: Clone>(n: usize, value: T) -> Result<Box<[T]>, AllocError> {
    Ok(vec_of(n, value)?.into_boxed_slice())
}

/// The capacity a full vector of `len` elements grows to.
fn grown(len: usize, capacity: usize) -> usize {
    (len + 1).max(capacity.saturating_mul(2)).max(4)
}

/// Grows the vector that `lock` guards to hold at least `capacity` elements, allocating with
/// the lock released. The new buffer is swapped in under the lock (moving the elements over
/// does not allocate); the old one, or the new one if another caller grew the vector first, is
/// freed after the lock.
fn grow<T, G: DerefMut<Target = Vec<T>>>(
    lock: &impl Fn() -> G,
    capacity: usize,
) -> Result<(), AllocError> {
    let fresh = vec_with_capacity::<T>(capacity)?;
    let _unused = {
        let mut v = lock();
        if v.capacity() >= capacity || fresh.capacity() < v.len() {
            fresh
        } else {
            let mut fresh = fresh;
            fresh.append(&mut v);
            core::mem::replace(&mut *v, fresh)
        }
    };
    Ok(())
}

/// The guard of the vector behind `lock`, with room for one more element: a full vector is
/// grown first, with the lock released (see [`grow`]).
///
/// # Errors
/// [`AllocError`] when the vector is full and cannot grow.
pub(crate) fn with_room<T, G: DerefMut<Target = Vec<T>>>(
    lock: impl Fn() -> G,
) -> Result<G, AllocError> {
    loop {
        let want = {
            let v = lock();
            if v.len() < v.capacity() {
                return Ok(v);
            }
            grown(v.len(), v.capacity())
        };
        grow(&lock, want)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spin::Mutex;

    #[test]
    fn with_room_grows_outside_the_lock_and_keeps_the_elements() {
        let m = Mutex::new(vec_of(4, 7u32).unwrap());
        assert_eq!(m.lock().capacity(), 4);
        let mut v = with_room(|| m.lock()).unwrap();
        assert!(v.len() < v.capacity());
        v.push(8);
        drop(v);
        assert_eq!(*m.lock(), [7, 7, 7, 7, 8]);
        // Room left: no growth.
        let cap = m.lock().capacity();
        with_room(|| m.lock()).unwrap().push(9);
        assert_eq!(m.lock().capacity(), cap);
    }

    #[test]
    fn boxed_slices_are_exact() {
        let b = boxed_slice_of(3, 1u8).unwrap();
        assert_eq!(&*b, &[1, 1, 1]);
    }
}
