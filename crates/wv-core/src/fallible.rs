//! Fallible allocation for the collections the core keeps.
//!
//! Every allocation on a request path can fail and is answered with a status (OFW's
//! `STATUS_NO_MEMORY` unless the IOCTL documents another): never the allocation-error handler,
//! which is a bug check in the kernel. Collections grow with `try_reserve`, and never while a
//! spin lock is held: a buffer that must grow under a lock is replaced by a bigger one that was
//! allocated with the lock released ([`grow_locked`]), and the old buffer is freed after the
//! lock is dropped. Shared objects are [`wv_hal::KArc`]s.

use alloc::vec::Vec;

use wv_hal::{AllocError, KArc, KArcSlot, SpinLock};

/// An empty vector with room for `n` elements.
pub(crate) fn vec_with_capacity<T>(n: usize) -> Result<Vec<T>, AllocError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)?;
    Ok(v)
}

/// The capacity a full buffer of `len` elements grows to so that `extra` more fit.
pub(crate) fn grown(len: usize, capacity: usize, extra: usize) -> usize {
    (len + extra).max(capacity.saturating_mul(2)).max(4)
}

/// Makes room for `extra` more elements in the vector behind `lock` without allocating while
/// the lock is held: the bigger buffer is allocated outside it and swapped in under it.
pub(crate) fn grow_locked<T, L: SpinLock<Vec<T>>>(
    lock: &L,
    extra: usize,
) -> Result<(), AllocError> {
    loop {
        let want = {
            let v = lock.lock();
            if v.capacity() - v.len() >= extra {
                return Ok(());
            }
            grown(v.len(), v.capacity(), extra)
        };
        let fresh = vec_with_capacity::<T>(want)?;
        // Whatever is dropped (the old buffer, or the new one if it lost a race) is dropped
        // after the lock.
        let _unused = {
            let mut v = lock.lock();
            if v.capacity() - v.len() >= extra || fresh.capacity() < v.len() + extra {
                fresh
            } else {
                let mut fresh = fresh;
                // No allocation: `fresh` has room for every element.
                fresh.append(&mut v);
                core::mem::replace(&mut *v, fresh)
            }
        };
    }
}

/// Pushes `item` onto the vector behind `lock`, growing it outside the lock when full.
///
/// # Errors
/// The item back with [`AllocError`] when the vector cannot grow.
pub(crate) fn push_locked<T, L: SpinLock<Vec<T>>>(
    lock: &L,
    item: T,
) -> Result<(), (T, AllocError)> {
    loop {
        {
            let mut v = lock.lock();
            if v.len() < v.capacity() {
                v.push(item);
                return Ok(());
            }
        }
        if let Err(e) = grow_locked(lock, 1) {
            return Err((item, e));
        }
    }
}

/// The shared objects a create makes, reserved before its verb so that nothing can fail once
/// the lower object exists: every one is tried, and either all are there or none (the create
/// then fails with `STATUS_NO_MEMORY`).
pub(crate) trait Slots: Sized {
    fn reserve() -> Option<Self>;
}

impl<A, B> Slots for (KArcSlot<A>, KArcSlot<B>) {
    fn reserve() -> Option<Self> {
        match (KArc::try_reserve(), KArc::try_reserve()) {
            (Ok(a), Ok(b)) => Some((a, b)),
            _ => None,
        }
    }
}

impl<A, B, C> Slots for (KArcSlot<A>, KArcSlot<B>, KArcSlot<C>) {
    fn reserve() -> Option<Self> {
        match (
            KArc::try_reserve(),
            KArc::try_reserve(),
            KArc::try_reserve(),
        ) {
            (Ok(a), Ok(b), Ok(c)) => Some((a, b, c)),
            _ => None,
        }
    }
}
