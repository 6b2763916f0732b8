//! Per-provider, per-type id tables (OFW's `INDEX_LIST`).
//!
//! Ids are what user mode holds: 1-based (0 means "none" to the user library), reused, and the
//! most recently freed id is handed out first (OFW pushes and pops the head of its free list).

use alloc::vec::Vec;

/// One id table.
pub(crate) struct IdTable<T> {
    /// Slot `i` holds id `i + 1`.
    slots: Vec<Option<T>>,
    /// Free slot indices; the last one is reused first.
    free: Vec<usize>,
    /// Most live ids allowed (`DriverConfig::max_ids_per_type`).
    limit: u32,
    live: u32,
}

impl<T> IdTable<T> {
    pub(crate) fn new(limit: u32) -> Self {
        IdTable {
            slots: Vec::new(),
            free: Vec::new(),
            limit,
            live: 0,
        }
    }

    /// Stores `item`; `None` when the table is full (OFW: `IndexListInsertHead` returns 0).
    pub(crate) fn insert(&mut self, item: T) -> Option<u64> {
        if self.live >= self.limit {
            return None;
        }
        let index = match self.free.pop() {
            Some(index) => {
                self.slots[index] = Some(item);
                index
            }
            None => {
                self.slots.push(Some(item));
                self.slots.len() - 1
            }
        };
        self.live += 1;
        Some(index as u64 + 1)
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
        self.free.push(index);
        self.live -= 1;
        Some(item)
    }

    /// Live ids, in ascending order.
    pub(crate) fn ids(&self) -> Vec<u64> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.is_some())
            .map(|(index, _)| index as u64 + 1)
            .collect()
    }

    /// Live entries.
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_start_at_one_and_are_reused_lifo() {
        let mut t = IdTable::new(u32::MAX);
        assert_eq!(t.insert('a'), Some(1));
        assert_eq!(t.insert('b'), Some(2));
        assert_eq!(t.insert('c'), Some(3));
        assert_eq!(t.get(0), None);
        assert_eq!(t.get(2), Some(&'b'));
        assert_eq!(t.remove(1), Some('a'));
        assert_eq!(t.remove(3), Some('c'));
        assert_eq!(t.remove(3), None);
        // Most recently freed first.
        assert_eq!(t.insert('d'), Some(3));
        assert_eq!(t.insert('e'), Some(1));
        assert_eq!(t.insert('f'), Some(4));
        assert_eq!(t.ids(), [1, 2, 3, 4]);
    }

    #[test]
    fn bad_ids_are_not_found() {
        let mut t = IdTable::new(u32::MAX);
        t.insert(1u8);
        for id in [0, 2, u64::MAX, 1 << 40] {
            assert_eq!(t.get(id), None);
            assert_eq!(t.remove(id), None);
        }
    }

    #[test]
    fn limit_is_enforced_and_freed_slots_count() {
        let mut t = IdTable::new(2);
        assert_eq!(t.insert(()), Some(1));
        assert_eq!(t.insert(()), Some(2));
        assert_eq!(t.insert(()), None);
        t.remove(1);
        assert_eq!(t.insert(()), Some(1));
    }
}
