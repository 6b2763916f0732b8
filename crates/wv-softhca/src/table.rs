//! The device's handle tables (handles start at 1; freed handles are reused).
//!
//! A create takes a handle first ([`Table::reserve`]), builds its object with every allocation
//! it needs while no lock is held, and publishes it under the table's lock
//! ([`Reservation::publish`]), which moves a pointer and allocates nothing. A reservation that
//! is dropped unpublished (the create failed) frees its handle again. The table itself grows
//! with its lock released (`fallible::with_room`).

use core::sync::atomic::{AtomicU32, Ordering};

use crate::lock::RwLock;
use wv_hal::{KArc, VerbsError};

use crate::fallible;

enum Slot<T> {
    Free,
    /// Taken by a create that has not published its object yet.
    Reserved,
    Live(KArc<T>),
}

/// A handle table.
pub(crate) struct Table<T> {
    slots: RwLock<alloc::vec::Vec<Slot<T>>>,
    /// Live and reserved handles (what the limit counts).
    used: AtomicU32,
}

/// A handle taken for an object being built; freed again unless published.
#[must_use]
pub(crate) struct Reservation<'a, T> {
    table: &'a Table<T>,
    handle: u32,
}

impl<T> Table<T> {
    pub(crate) fn new() -> Self {
        Table {
            slots: RwLock::new(alloc::vec::Vec::new()),
            used: AtomicU32::new(0),
        }
    }

    pub(crate) fn get(&self, handle: u32) -> Option<KArc<T>> {
        let i = (handle as usize).checked_sub(1)?;
        match self.slots.read().get(i)? {
            Slot::Live(o) => Some(o.clone()),
            Slot::Free | Slot::Reserved => None,
        }
    }

    /// Takes a free handle, unless `limit` handles are in use.
    ///
    /// # Errors
    /// `InsufficientResources` at the limit, `InsufficientMemory` when the table is full and
    /// cannot grow.
    pub(crate) fn reserve(&self, limit: u32) -> Result<Reservation<'_, T>, VerbsError> {
        loop {
            let mut slots = self.slots.write();
            if self.used.load(Ordering::Relaxed) >= limit {
                return Err(VerbsError::InsufficientResources);
            }
            let i = match slots.iter().position(|s| matches!(s, Slot::Free)) {
                Some(i) => i,
                None if slots.len() < slots.capacity() => {
                    slots.push(Slot::Free);
                    slots.len() - 1
                }
                None => {
                    drop(slots);
                    drop(fallible::with_room(|| self.slots.write()).map_err(fallible::no_memory)?);
                    continue;
                }
            };
            slots[i] = Slot::Reserved;
            self.used.fetch_add(1, Ordering::Relaxed);
            return Ok(Reservation {
                table: self,
                handle: i as u32 + 1,
            });
        }
    }

    pub(crate) fn remove(&self, handle: u32) -> Option<KArc<T>> {
        let i = (handle as usize).checked_sub(1)?;
        let mut slots = self.slots.write();
        let slot = slots.get_mut(i)?;
        if !matches!(slot, Slot::Live(_)) {
            return None;
        }
        self.used.fetch_sub(1, Ordering::Relaxed);
        match core::mem::replace(slot, Slot::Free) {
            Slot::Live(o) => Some(o),
            Slot::Free | Slot::Reserved => None,
        }
    }

    /// Calls `f` on each live object, taking the lock once per slot and never across `f`, and
    /// allocating nothing (the DPC and teardown walk the tables this way).
    pub(crate) fn for_each(&self, mut f: impl FnMut(KArc<T>)) {
        let mut i = 0;
        loop {
            let next = {
                let slots = self.slots.read();
                let Some(rest) = slots.get(i..) else { return };
                rest.iter().enumerate().find_map(|(k, s)| match s {
                    Slot::Live(o) => Some((i + k, o.clone())),
                    Slot::Free | Slot::Reserved => None,
                })
            };
            let Some((at, o)) = next else { return };
            f(o);
            i = at + 1;
        }
    }

    /// Handles in use (live or reserved): what leak checks look at.
    pub(crate) fn used(&self) -> u32 {
        self.used.load(Ordering::Relaxed)
    }
}

impl<T> Reservation<'_, T> {
    pub(crate) fn handle(&self) -> u32 {
        self.handle
    }

    /// Makes `obj` the object of the handle (without allocating) and returns it.
    pub(crate) fn publish(self, obj: KArc<T>) -> KArc<T> {
        let this = core::mem::ManuallyDrop::new(self);
        let mut slots = this.table.slots.write();
        slots[this.handle as usize - 1] = Slot::Live(obj.clone());
        obj
    }
}

impl<T> Drop for Reservation<'_, T> {
    fn drop(&mut self) {
        let mut slots = self.table.slots.write();
        slots[self.handle as usize - 1] = Slot::Free;
        self.table.used.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_reservation_frees_its_handle_and_handles_are_reused() {
        let t = Table::<u32>::new();
        let a = t.reserve(2).unwrap();
        assert_eq!(a.handle(), 1);
        let b = t.reserve(2).unwrap();
        assert_eq!(b.handle(), 2);
        assert!(matches!(
            t.reserve(2),
            Err(VerbsError::InsufficientResources)
        ));
        assert!(t.get(1).is_none(), "reserved is not live");
        drop(a);
        assert_eq!(t.used(), 1);
        let one = t.reserve(2).unwrap().publish(KArc::try_new(10).unwrap());
        assert_eq!(*one, 10);
        assert_eq!(t.get(1).as_deref(), Some(&10));
        assert!(t.remove(2).is_none(), "a reserved handle is not removed");
        drop(b);
        assert_eq!(t.remove(1).as_deref(), Some(&10));
        assert!(t.remove(1).is_none());
        assert_eq!(t.used(), 0);
    }

    #[test]
    fn for_each_visits_the_live_objects() {
        let t = Table::<u32>::new();
        for v in 1..=5 {
            let r = t.reserve(u32::MAX).unwrap();
            drop(r.publish(KArc::try_new(v).unwrap()));
        }
        t.remove(2);
        let mut seen = alloc::vec::Vec::new();
        t.for_each(|o| seen.push(*o));
        assert_eq!(seen, [1, 3, 4, 5]);
    }
}
