//! Fallible allocation for the kernel half: it is the model of a Windows soft-HCA driver, where
//! the allocation-error handler is a bug check, so every allocation a request makes can fail
//! and is answered with `VerbsError::InsufficientMemory` (OFW's `IB_INSUFFICIENT_MEMORY`).
//!
//! Nothing grows while one of the device's locks is held: a container behind a lock that is
//! full is replaced by a bigger one allocated with the lock released ([`with_room_in`]), and
//! whatever buffer is left over is freed after the lock is dropped. Shared objects are [`wv_hal::KArc`]s, built
//! before the command that publishes them.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
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

/// A container that can be grown with its lock released: a bigger empty one is allocated
/// outside the lock and the elements are moved into it under the lock, which does not
/// allocate.
pub(crate) trait Room: Sized {
    /// Whether one more element fits without allocating.
    fn has_room(&self) -> bool;
    /// The capacity to grow to when there is no room.
    fn wanted(&self) -> usize;
    /// Whether `self` (a bigger container) can take every element of `other`.
    fn fits(&self, other: &Self) -> bool;
    /// An empty container with room for `n` elements.
    fn with_room_for(n: usize) -> Result<Self, AllocError>;
    /// Moves every element of `other` into `self`, which [`Room::fits`] them.
    fn take_all(&mut self, other: &mut Self);
}

/// The capacity a full container of `len` elements grows to.
pub(crate) fn grown(len: usize, capacity: usize) -> usize {
    (len + 1).max(capacity.saturating_mul(2)).max(4)
}

/// [`Room`] for a standard container, whose length, capacity and `append` say all there is
/// to it: `Vec` and `VecDeque` differ only in how an empty one with room is made.
macro_rules! room_by_capacity {
    ($($container:ident: $with_room_for:path;)+) => {$(
        impl<T> Room for $container<T> {
            fn has_room(&self) -> bool {
                self.len() < self.capacity()
            }
            fn wanted(&self) -> usize {
                grown(self.len(), self.capacity())
            }
            fn fits(&self, other: &Self) -> bool {
                self.capacity() - self.len() >= other.len()
            }
            fn with_room_for(n: usize) -> Result<Self, AllocError> {
                $with_room_for(n)
            }
            fn take_all(&mut self, other: &mut Self) {
                self.append(other);
            }
        }
    )+};
}

room_by_capacity! {
    Vec: vec_with_capacity;
    VecDeque: deque_with_capacity;
}

/// An empty queue with room for exactly `n` elements.
fn deque_with_capacity<T>(n: usize) -> Result<VecDeque<T>, AllocError> {
    let mut q = VecDeque::new();
    q.try_reserve_exact(n)?;
    Ok(q)
}

/// The guard of what `lock` guards, once the container `find` picks out of it has room for
/// one more element (or `find` picks none). A full container is grown with the lock
/// released: the bigger one is allocated outside the lock and swapped in under it, and
/// whichever is left over (the old one, or the new one when another caller grew it first) is
/// freed after the lock.
///
/// # Errors
/// [`AllocError`] when the container is full and cannot grow.
pub(crate) fn with_room_in<S, C: Room, G: DerefMut<Target = S>>(
    lock: impl Fn() -> G,
    find: impl Fn(&mut S) -> Option<&mut C>,
) -> Result<G, AllocError> {
    loop {
        let want = {
            let mut g = lock();
            match find(&mut g) {
                Some(c) if !c.has_room() => c.wanted(),
                _ => return Ok(g),
            }
        };
        let fresh = C::with_room_for(want)?;
        let _unused = {
            let mut g = lock();
            match find(&mut g) {
                Some(c) if !c.has_room() && fresh.fits(c) => {
                    let mut fresh = fresh;
                    fresh.take_all(c);
                    core::mem::replace(c, fresh)
                }
                _ => fresh,
            }
        };
    }
}

/// [`with_room_in`] for a vector that is all the lock guards.
///
/// # Errors
/// [`AllocError`] when the vector is full and cannot grow.
pub(crate) fn with_room<T, G: DerefMut<Target = Vec<T>>>(
    lock: impl Fn() -> G,
) -> Result<G, AllocError> {
    with_room_in(lock, |v| Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::Mutex;

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
    fn with_room_in_grows_a_queue_of_the_guarded_state_in_order() {
        struct State {
            q: VecDeque<u32>,
            other: u8,
        }
        let m = Mutex::new(State {
            q: VecDeque::new(),
            other: 1,
        });
        // Wrapped around before each growth: the elements keep their order.
        let mut next = 0;
        for _ in 0..20 {
            with_room_in(|| m.lock(), |s| Some(&mut s.q))
                .unwrap()
                .q
                .push_back(next);
            with_room_in(|| m.lock(), |s| Some(&mut s.q))
                .unwrap()
                .q
                .push_back(next + 1);
            m.lock().q.pop_front();
            next += 2;
        }
        let left: Vec<u32> = m.lock().q.iter().copied().collect();
        assert_eq!(left, (20..40).collect::<Vec<_>>());
        // `find` may pick nothing: the guard comes back as it is.
        let g = with_room_in(|| m.lock(), |_| None::<&mut VecDeque<u32>>).unwrap();
        assert_eq!(g.other, 1);
    }

    #[test]
    fn boxed_slices_are_exact() {
        let b = boxed_slice_of(3, 1u8).unwrap();
        assert_eq!(&*b, &[1, 1, 1]);
    }
}
