//! Rings shared between the device and user mode: fixed-size slots of 64-bit words with a
//! producer tail and a consumer head that run modulo twice the size (pvrdma's generation bit),
//! so that full (`tail == head ^ size`) and empty (`tail == head`) are distinct.
//!
//! Slots are atomics so that both sides can touch them without `unsafe`: the producer fills a
//! slot with relaxed stores and publishes it with a release store of the tail; the consumer
//! acquires the tail before reading the slot, and releases the head after it is done with it.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// An index word on its own cache line, so producer and consumer do not false-share.
#[repr(align(64))]
#[derive(Debug, Default)]
struct Index(AtomicU32);

/// A ring of `entries` slots of `stride` words.
#[derive(Debug)]
pub struct Ring {
    words: Box<[AtomicU64]>,
    entries: u32,
    stride: u32,
    tail: Index,
    head: Index,
}

impl Ring {
    /// A ring of at least `entries` slots (rounded up to a power of two, at least 1) of
    /// `stride` words each, unless its memory cannot be allocated.
    pub(crate) fn try_new(entries: u32, stride: usize) -> Result<Self, wv_hal::AllocError> {
        let entries = entries.max(1).next_power_of_two();
        let n = entries as usize * stride;
        let mut v = Vec::new();
        v.try_reserve_exact(n)?;
        v.resize_with(n, || AtomicU64::new(0));
        Ok(Ring {
            words: v.into_boxed_slice(),
            entries,
            stride: stride as u32,
            tail: Index::default(),
            head: Index::default(),
        })
    }

    /// Number of slots.
    pub fn entries(&self) -> u32 {
        self.entries
    }
    /// Words per slot.
    pub fn stride(&self) -> usize {
        self.stride as usize
    }
    /// The address of the slot memory (what vendor output reports to the user-mode provider).
    pub fn addr(&self) -> u64 {
        self.words.as_ptr() as u64
    }
    /// Bytes of slot memory.
    pub fn bytes(&self) -> u64 {
        self.words.len() as u64 * 8
    }

    fn wrap(&self, idx: u32) -> u32 {
        idx & (2 * self.entries - 1)
    }
    fn slot_of(&self, idx: u32) -> &[AtomicU64] {
        let i = (idx & (self.entries - 1)) as usize * self.stride as usize;
        &self.words[i..i + self.stride as usize]
    }

    /// Entries between head and tail as the producer sees them.
    pub(crate) fn used(&self) -> u32 {
        let t = self.tail.0.load(Ordering::Acquire);
        let h = self.head.0.load(Ordering::Acquire);
        self.wrap(t.wrapping_sub(h))
    }
    /// Whether the ring has no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.used() == 0
    }

    /// Producer: the next free slot, if the ring is not full. Fill it, then [`Ring::publish`].
    pub(crate) fn producer_slot(&self) -> Option<&[AtomicU64]> {
        let t = self.tail.0.load(Ordering::Relaxed);
        let h = self.head.0.load(Ordering::Acquire);
        if self.wrap(t.wrapping_sub(h)) >= self.entries {
            return None;
        }
        Some(self.slot_of(t))
    }
    /// Producer: the slot `ahead` entries past the tail, if free (to fill several before one
    /// publish).
    pub(crate) fn producer_slot_ahead(&self, ahead: u32) -> Option<&[AtomicU64]> {
        let t = self.tail.0.load(Ordering::Relaxed);
        let h = self.head.0.load(Ordering::Acquire);
        if self.wrap(t.wrapping_sub(h)) + ahead >= self.entries {
            return None;
        }
        Some(self.slot_of(t.wrapping_add(ahead)))
    }
    /// Producer: makes `n` filled slots visible to the consumer.
    pub(crate) fn publish(&self, n: u32) {
        let t = self.tail.0.load(Ordering::Relaxed);
        self.tail
            .0
            .store(self.wrap(t.wrapping_add(n)), Ordering::Release);
    }

    /// Consumer: the oldest entry, if any. Read it, then [`Ring::consume`].
    pub(crate) fn consumer_slot(&self) -> Option<&[AtomicU64]> {
        self.consumer_slot_at(0)
    }
    /// Consumer: the entry `n` past the oldest, if published.
    pub(crate) fn consumer_slot_at(&self, n: u32) -> Option<&[AtomicU64]> {
        let h = self.head.0.load(Ordering::Relaxed);
        let t = self.tail.0.load(Ordering::Acquire);
        if self.wrap(t.wrapping_sub(h)) <= n {
            return None;
        }
        Some(self.slot_of(h.wrapping_add(n)))
    }
    /// Consumer: releases the oldest `n` entries to the producer.
    pub(crate) fn consume(&self, n: u32) {
        let h = self.head.0.load(Ordering::Relaxed);
        self.head
            .0
            .store(self.wrap(h.wrapping_add(n)), Ordering::Release);
    }
    /// The consumer index (modulo twice the size). For the consumer's own bookkeeping.
    pub(crate) fn head(&self) -> u32 {
        self.head.0.load(Ordering::Relaxed)
    }

    /// Copies the entries not yet consumed, oldest first, into the empty ring `to` and
    /// publishes them there (a resize). Returns `false`, copying nothing, when they do not fit.
    /// Only while neither side of `self` moves (the caller holds what stops them).
    pub(crate) fn copy_pending_to(&self, to: &Ring) -> bool {
        let h = self.head.0.load(Ordering::Acquire);
        let t = self.tail.0.load(Ordering::Acquire);
        let n = self.wrap(t.wrapping_sub(h));
        if n > to.entries {
            return false;
        }
        for i in 0..n {
            let (Some(dst), src) = (to.producer_slot_ahead(i), self.slot_of(h.wrapping_add(i)))
            else {
                return false;
            };
            for (d, s) in dst.iter().zip(src) {
                d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        to.publish(n);
        true
    }

    /// Drops every entry (QP reset): both indices back to zero. Only with both sides quiet.
    pub(crate) fn reset(&self) {
        self.head.0.store(0, Ordering::Release);
        self.tail.0.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_and_empty_are_distinct_across_wraps() {
        let r = Ring::try_new(3, 2).unwrap();
        assert_eq!(r.entries(), 4);
        for round in 0..5u64 {
            assert!(r.is_empty());
            for i in 0..4u64 {
                let s = r.producer_slot().unwrap();
                s[0].store(round * 10 + i, Ordering::Relaxed);
                r.publish(1);
            }
            assert!(r.producer_slot().is_none());
            assert_eq!(r.used(), 4);
            for i in 0..4u64 {
                let s = r.consumer_slot().unwrap();
                assert_eq!(s[0].load(Ordering::Relaxed), round * 10 + i);
                r.consume(1);
            }
            assert!(r.consumer_slot().is_none());
        }
    }
}

/// A value on cache lines of its own: for state one thread writes while others read the
/// neighbouring fields (a lock, a counter), so that the writes do not bounce their line.
#[repr(align(64))]
#[derive(Debug, Default)]
pub(crate) struct Padded<T>(pub T);

impl<T> core::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
