//! Per-provider, per-type id tables (OFW's `INDEX_LIST`).
//!
//! Ids are what user mode holds: 1-based (0 means "none" to the user library), reused, and the
//! most recently freed id is handed out first (OFW pushes and pops the head of its free list).
//!
//! The table lives under the provider's spin lock and never allocates there: an insert into a
//! full table reports how much room it wants ([`Insert::Grow`]); the caller allocates a
//! [`Spare`] with the lock released and hands it over ([`IdTable::adopt`]). The free list's
//! capacity never falls below the slots' capacity, so a removal never allocates either.

use alloc::vec::Vec;

use wv_hal::AllocError;

use crate::fallible::{grown, vec_with_capacity};

/// One id table.
pub(crate) struct IdTable<T> {
    /// Slot `i` holds id `i + 1`.
    slots: Vec<Option<T>>,
    /// Free slot indices; the last one is reused first. `free.capacity() >= slots.capacity()`.
    free: Vec<usize>,
    /// Most live ids allowed (`DriverConfig::max_ids_per_type`).
    limit: u32,
    live: u32,
}

/// What an insert did.
pub(crate) enum Insert<T> {
    /// Stored under this id.
    Done(u64),
    /// The table holds `max_ids_per_type` live ids (OFW: `IndexListInsertHead` returns 0).
    Full(T),
    /// The slots are full: a [`Spare`] for this many slots is needed first.
    Grow(T, usize),
}

/// Buffers for a bigger table, allocated with the provider lock released.
pub(crate) struct Spare<T> {
    slots: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> Spare<T> {
    /// Room for `slots` slots.
    pub(crate) fn new(slots: usize) -> Result<Self, AllocError> {
        Ok(Spare {
            slots: vec_with_capacity(slots)?,
            free: vec_with_capacity(slots)?,
        })
    }
}

impl<T> IdTable<T> {
    pub(crate) const fn new(limit: u32) -> Self {
        IdTable {
            slots: Vec::new(),
            free: Vec::new(),
            limit,
            live: 0,
        }
    }

    /// Stores `item` without allocating.
    pub(crate) fn insert(&mut self, item: T) -> Insert<T> {
        if self.live >= self.limit {
            return Insert::Full(item);
        }
        let index = match self.free.pop() {
            Some(index) => {
                self.slots[index] = Some(item);
                index
            }
            None if self.slots.len() < self.slots.capacity() => {
                self.slots.push(Some(item));
                self.slots.len() - 1
            }
            None => {
                let want = grown(self.slots.len(), self.slots.capacity(), 1);
                return Insert::Grow(item, want);
            }
        };
        self.live += 1;
        Insert::Done(index as u64 + 1)
    }

    /// Moves the table into `spare` if that makes room, and returns whichever buffers are
    /// left over, to be dropped after the lock is released. No allocation.
    pub(crate) fn adopt(&mut self, mut spare: Spare<T>) -> Spare<T> {
        let fits = spare.slots.capacity() > self.slots.len()
            && spare.slots.capacity() > self.slots.capacity()
            && spare.free.capacity() >= spare.slots.capacity();
        if !fits {
            return spare;
        }
        spare.slots.append(&mut self.slots);
        spare.free.append(&mut self.free);
        Spare {
            slots: core::mem::replace(&mut self.slots, spare.slots),
            free: core::mem::replace(&mut self.free, spare.free),
        }
    }

    fn index(&self, id: u64) -> Option<usize> {
        let index = usize::try_from(id.checked_sub(1)?).ok()?;
        (index < self.slots.len()).then_some(index)
    }

    pub(crate) fn get(&self, id: u64) -> Option<&T> {
        self.slots[self.index(id)?].as_ref()
    }

    pub(crate) fn remove(&mut self, id: u64) -> Option<T> {
        let index = self.index(id)?;
        let item = self.slots[index].take()?;
        debug_assert!(self.free.len() < self.free.capacity());
        self.free.push(index);
        self.live -= 1;
        Some(item)
    }

    /// The first live id above `after` and its entry (0 starts at the beginning): iteration
    /// that allocates nothing and tolerates the lock being dropped between steps.
    pub(crate) fn next_after(&self, after: u64) -> Option<(u64, &T)> {
        let start = usize::try_from(after).unwrap_or(usize::MAX);
        self.slots
            .iter()
            .enumerate()
            .skip(start)
            .find_map(|(index, slot)| slot.as_ref().map(|item| (index as u64 + 1, item)))
    }

    /// Live entries.
    #[cfg(test)]
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put<T>(t: &mut IdTable<T>, item: T) -> Option<u64> {
        match t.insert(item) {
            Insert::Done(id) => Some(id),
            Insert::Full(_) => None,
            Insert::Grow(item, want) => {
                drop(t.adopt(Spare::new(want).unwrap()));
                put(t, item)
            }
        }
    }

    fn ids<T>(t: &IdTable<T>) -> Vec<u64> {
        let mut ids = Vec::new();
        let mut at = 0;
        while let Some((id, _)) = t.next_after(at) {
            ids.push(id);
            at = id;
        }
        ids
    }

    #[test]
    fn ids_start_at_one_and_are_reused_lifo() {
        let mut t = IdTable::new(u32::MAX);
        assert_eq!(put(&mut t, 'a'), Some(1));
        assert_eq!(put(&mut t, 'b'), Some(2));
        assert_eq!(put(&mut t, 'c'), Some(3));
        assert_eq!(t.get(0), None);
        assert_eq!(t.get(2), Some(&'b'));
        assert_eq!(t.remove(1), Some('a'));
        assert_eq!(t.remove(3), Some('c'));
        assert_eq!(t.remove(3), None);
        // Most recently freed first.
        assert_eq!(put(&mut t, 'd'), Some(3));
        assert_eq!(put(&mut t, 'e'), Some(1));
        assert_eq!(put(&mut t, 'f'), Some(4));
        assert_eq!(ids(&t), [1, 2, 3, 4]);
        assert_eq!(t.values().count(), 4);
    }

    #[test]
    fn an_insert_into_a_full_table_asks_for_room_and_keeps_the_item() {
        let mut t = IdTable::new(u32::MAX);
        let Insert::Grow(item, want) = t.insert(5u8) else {
            panic!("an empty table has no room");
        };
        assert_eq!((item, want), (5, 4));
        // A spare too small to help is handed back untouched.
        let back = t.adopt(Spare::new(0).unwrap());
        assert_eq!(back.slots.capacity(), 0);
        drop(t.adopt(Spare::new(want).unwrap()));
        assert!(matches!(t.insert(item), Insert::Done(1)));
        for n in 2..=4 {
            assert!(matches!(t.insert(n), Insert::Done(_)));
        }
        assert!(matches!(t.insert(9), Insert::Grow(9, 8)));
    }

    #[test]
    fn bad_ids_are_not_found() {
        let mut t = IdTable::new(u32::MAX);
        put(&mut t, 1u8);
        for id in [0, 2, u64::MAX, 1 << 40] {
            assert_eq!(t.get(id), None);
            assert_eq!(t.remove(id), None);
        }
    }

    #[test]
    fn limit_is_enforced_and_freed_slots_count() {
        let mut t = IdTable::new(2);
        assert_eq!(put(&mut t, ()), Some(1));
        assert_eq!(put(&mut t, ()), Some(2));
        assert_eq!(put(&mut t, ()), None);
        t.remove(1);
        assert_eq!(put(&mut t, ()), Some(1));
    }
}
