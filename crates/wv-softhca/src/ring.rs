//! Rings shared between the device and user mode: fixed-size slots of 64-bit words with a
//! producer tail and a consumer head that run modulo twice the size (pvrdma's generation bit),
//! so that full (`tail == head ^ size`) and empty (`tail == head`) are distinct.
//!
//! Slots are atomics so that both sides can touch them without `unsafe`: the producer fills a
//! slot with relaxed stores and publishes it with a release store of the tail; the consumer
//! acquires the tail before reading the slot, and releases the head after it is done with it.
//!
//! The producer keeps its own copies of the tail and the head on a line the consumer never
//! reads, and reads the consumer's head only when its copy says the ring is full: in a
//! ping-pong every message would otherwise pull the consumer's head line across processors
//! once more, and read the tail line (which the polling consumer keeps shared) before writing
//! it, two transfers of that line instead of one.
//!
//! A CQ ring's tail word also carries the CQ's arm state (two bits above any index): the
//! producer publishes a CQE and takes the arm in one compare-and-swap
//! ([`Ring::publish_notify`]), the consumer arms and learns whether CQEs are waiting in one
//! fetch-or ([`Ring::arm`]). Two read-modify-writes of one word are ordered by the word itself,
//! so neither can miss the other (the publish/arm race) without any fence. The soft HCA's
//! `tests/loom.rs` checks it, with `--cfg loom` building this module on loom's atomics.

use alloc::boxed::Box;
use alloc::vec::Vec;

#[cfg(loom)]
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[cfg(not(loom))]
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// One word of a ring slot (loom's under `--cfg loom`, so the models see the slots too).
pub(crate) type Word = AtomicU64;

/// Arm bits of a CQ ring's tail word: the next solicited completion.
pub(crate) const ARM_SOLICITED: u32 = 1 << 30;
/// Arm bits of a CQ ring's tail word: the next completion (wins over solicited).
pub(crate) const ARM_NEXT: u32 = 1 << 31;
const ARM_BITS: u32 = ARM_SOLICITED | ARM_NEXT;
/// Indices run below twice the largest ring, far below the arm bits.
const MAX_ENTRIES: u32 = 1 << 28;

/// An index on a cache line of its own, so producer and consumer do not false-share.
#[repr(align(64))]
#[derive(Debug)]
struct Index(AtomicU32);

/// What only the producer touches (its owner serialises producers), on a line of its own.
#[repr(align(64))]
#[derive(Debug)]
struct ProdCopy {
    /// The index the producer last published (the tail without a CQ's arm bits).
    tail: AtomicU32,
    /// The head as the producer last read it (only ever behind the real one).
    head: AtomicU32,
}

/// A ring of `entries` slots of `stride` words.
#[derive(Debug)]
pub struct Ring {
    words: Box<[Word]>,
    entries: u32,
    stride: u32,
    /// The tail (with a CQ's arm bits).
    tail: Index,
    head: Index,
    mine: ProdCopy,
}

impl Ring {
    /// A ring of at least `entries` slots (rounded up to a power of two, at least 1) of
    /// `stride` words each, unless its memory cannot be allocated.
    pub(crate) fn try_new(entries: u32, stride: usize) -> Result<Self, wv_hal::AllocError> {
        let entries = entries.clamp(1, MAX_ENTRIES).next_power_of_two();
        let n = entries as usize * stride;
        let mut v = Vec::new();
        v.try_reserve_exact(n)?;
        v.resize_with(n, || Word::new(0));
        Ok(Ring {
            words: v.into_boxed_slice(),
            entries,
            stride: stride as u32,
            tail: Index(AtomicU32::new(0)),
            head: Index(AtomicU32::new(0)),
            mine: ProdCopy {
                tail: AtomicU32::new(0),
                head: AtomicU32::new(0),
            },
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

    /// An index (or a difference of two) modulo twice the size; drops the arm bits.
    fn wrap(&self, idx: u32) -> u32 {
        idx & (2 * self.entries - 1)
    }
    fn slot_of(&self, idx: u32) -> &[Word] {
        let i = (idx & (self.entries - 1)) as usize * self.stride as usize;
        &self.words[i..i + self.stride as usize]
    }

    /// Entries between head and tail as the producer sees them.
    pub(crate) fn used(&self) -> u32 {
        let t = self.tail.0.load(Ordering::Acquire);
        let h = self.head.0.load(Ordering::Acquire);
        self.wrap(t.wrapping_sub(h))
    }
    /// Producer: the slot `ahead` entries past the tail, if free. Reads the consumer's head
    /// only when the producer's copy of it says the ring is full.
    fn free_slot(&self, ahead: u32) -> Option<&[Word]> {
        let t = self.mine.tail.load(Ordering::Relaxed);
        let mut h = self.mine.head.load(Ordering::Relaxed);
        if self.wrap(t.wrapping_sub(h)) + ahead >= self.entries {
            // Acquire: the consumer is done with the slots it released.
            h = self.head.0.load(Ordering::Acquire);
            self.mine.head.store(h, Ordering::Relaxed);
            if self.wrap(t.wrapping_sub(h)) + ahead >= self.entries {
                return None;
            }
        }
        Some(self.slot_of(t.wrapping_add(ahead)))
    }

    /// Producer: the next free slot, if the ring is not full. Fill it, then publish it.
    pub(crate) fn producer_slot(&self) -> Option<&[Word]> {
        self.free_slot(0)
    }
    /// Producer: the slot `ahead` entries past the tail, if free (to fill several before one
    /// publish).
    pub(crate) fn producer_slot_ahead(&self, ahead: u32) -> Option<&[Word]> {
        self.free_slot(ahead)
    }
    /// Producer: makes `n` filled slots visible to the consumer (rings without arm bits).
    pub(crate) fn publish(&self, n: u32) {
        let t = self.wrap(self.mine.tail.load(Ordering::Relaxed).wrapping_add(n));
        self.mine.tail.store(t, Ordering::Relaxed);
        self.tail.0.store(t, Ordering::Release);
    }

    /// Producer of a CQ ring: makes one filled slot visible and, in the same atomic step,
    /// takes the arm if this completion satisfies it (the next completion, or the next
    /// solicited one and `solicited`). Returns whether it did: the caller then raises the CQ
    /// event, exactly once per arm.
    pub(crate) fn publish_notify(&self, solicited: bool) -> bool {
        let t = self.mine.tail.load(Ordering::Relaxed);
        let next = self.wrap(t.wrapping_add(1));
        self.mine.tail.store(next, Ordering::Relaxed);
        // The first guess is the tail with no arm bits (the common case when polling): the
        // tail line is then written without being read first.
        let mut old = t;
        loop {
            let fire = old & ARM_NEXT != 0 || (solicited && old & ARM_SOLICITED != 0);
            let arm = if fire { 0 } else { old & ARM_BITS };
            // Release: the CQE's words before the index. A CAS (not a store) because the
            // consumer may set arm bits at any time; failing, it retries with those bits.
            match self.tail.0.compare_exchange_weak(
                old,
                next | arm,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return fire,
                Err(now) => old = now,
            }
        }
    }

    /// Consumer of a CQ ring: arms it for the next completion (or, with `solicited_only`, the
    /// next solicited one; an arm for the next completion is never narrowed). Returns whether
    /// completions are already waiting (the `REPORT_MISSED_EVENTS` answer: poll again).
    pub(crate) fn arm(&self, solicited_only: bool) -> bool {
        let want = if solicited_only {
            ARM_SOLICITED
        } else {
            ARM_NEXT
        };
        // Acquire: the CQEs a waiting tail stands for are readable.
        let t = self.tail.0.fetch_or(want, Ordering::AcqRel);
        let h = self.head.0.load(Ordering::Relaxed);
        self.wrap(t.wrapping_sub(h)) != 0
    }

    /// Consumer: the oldest entry, if any. Read it, then [`Ring::consume`].
    pub(crate) fn consumer_slot(&self) -> Option<&[Word]> {
        self.consumer_slot_at(0)
    }
    /// Consumer: the entry `n` past the oldest, if published.
    pub(crate) fn consumer_slot_at(&self, n: u32) -> Option<&[Word]> {
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
    /// publishes them there with this ring's arm bits (a resize). Returns `false`, copying
    /// nothing, when they do not fit. Only while neither side of `self` moves (the caller
    /// holds what stops them).
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
        to.mine.tail.store(to.wrap(n), Ordering::Relaxed);
        to.tail
            .0
            .store(to.wrap(n) | (t & ARM_BITS), Ordering::Release);
        true
    }

    /// Drops every entry (QP reset): both indices back to zero. Only with both sides quiet.
    pub(crate) fn reset(&self) {
        self.head.0.store(0, Ordering::Release);
        self.mine.head.store(0, Ordering::Relaxed);
        self.mine.tail.store(0, Ordering::Relaxed);
        self.tail.0.store(0, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn full_and_empty_are_distinct_across_wraps() {
        let r = Ring::try_new(3, 2).unwrap();
        assert_eq!(r.entries(), 4);
        for round in 0..5u64 {
            assert_eq!(r.used(), 0);
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

    #[test]
    fn the_producer_rereads_the_head_only_when_full() {
        let r = Ring::try_new(2, 1).unwrap();
        for _ in 0..2 {
            r.producer_slot().unwrap();
            r.publish(1);
        }
        assert!(r.producer_slot().is_none(), "full");
        r.consumer_slot().unwrap();
        r.consume(1);
        // The producer's copy still says full; the real head says one is free.
        assert!(r.producer_slot().is_some());
        r.publish(1);
        assert!(r.producer_slot().is_none());
    }

    #[test]
    fn arm_and_publish_meet_in_the_tail_word() {
        let r = Ring::try_new(4, 1).unwrap();
        assert!(!r.arm(false), "nothing waits");
        r.producer_slot().unwrap();
        assert!(r.publish_notify(false), "the armed CQ fires once");
        r.producer_slot().unwrap();
        assert!(!r.publish_notify(false), "and the arm is gone");
        assert_eq!(r.used(), 2, "arm bits never count as entries");
        assert!(r.arm(false), "completions wait: poll again");
        // Solicited arm: an unsolicited completion leaves it, a solicited one takes it.
        for _ in 0..2 {
            r.consumer_slot().unwrap();
            r.consume(1);
        }
        assert!(r.publish_notify(false), "the arm above fires");
        r.consumer_slot().unwrap();
        r.consume(1);
        assert!(!r.arm(true));
        r.producer_slot().unwrap();
        assert!(!r.publish_notify(false));
        r.producer_slot().unwrap();
        assert!(r.publish_notify(true));
        // An arm for the next completion is not narrowed by a solicited one.
        assert!(r.arm(false));
        assert!(r.arm(true));
        r.producer_slot().unwrap();
        assert!(r.publish_notify(false));
        // A resize carries the arm over.
        r.arm(false);
        let to = Ring::try_new(8, 1).unwrap();
        assert!(r.copy_pending_to(&to));
        assert_eq!(to.used(), 3);
        to.producer_slot().unwrap();
        assert!(to.publish_notify(false));
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
