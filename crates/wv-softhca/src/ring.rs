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
//! ([`Ring::produce_notify`]), the consumer arms and learns whether CQEs are waiting in one
//! fetch-or ([`Ring::arm`]). Two read-modify-writes of one word are ordered by the word itself,
//! so neither can miss the other (the publish/arm race) without any fence. The soft HCA's
//! `tests/loom.rs` checks it, with `--cfg loom` building this module on loom's atomics.

use alloc::boxed::Box;
use alloc::vec::Vec;

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};

#[cfg(not(loom))]
use core::sync::atomic::{AtomicU64, Ordering};

use crate::dma::{HeaderWord, RingHeader};
#[cfg(all(feature = "std", target_os = "linux", not(loom)))]
use crate::dma::{RING_HEADER_BYTES, SharedBlock};

/// One word of a ring slot (loom's under `--cfg loom`, so the models see the slots too).
pub(crate) type Word = AtomicU64;

/// Arm bits of a CQ ring's tail word: the next solicited completion.
pub(crate) const ARM_SOLICITED: u32 = 1 << 30;
/// Arm bits of a CQ ring's tail word: the next completion (wins over solicited).
pub(crate) const ARM_NEXT: u32 = 1 << 31;
const ARM_BITS: u32 = ARM_SOLICITED | ARM_NEXT;
/// Indices run below twice the largest ring, far below the arm bits.
const MAX_ENTRIES: u32 = 1 << 28;

/// Owner word of a QP's send ring: the QP state (`QpState` as a number), which the user-mode
/// provider reads before it posts.
pub(crate) const OWNER_QP_STATE: usize = 0;
/// Owner word of a QP's send ring: the doorbell bits a client of a device service sets
/// ([`DOORBELL_SEND`], [`DOORBELL_RECV`]) before it wakes the service.
#[cfg(all(feature = "std", target_os = "linux"))]
pub(crate) const OWNER_DOORBELL: usize = 1;
/// Owner word of a CQ ring: non-zero once the CQ overran (its error is sticky).
pub(crate) const OWNER_CQ_OVERRUN: usize = 0;
/// Doorbell bit: send requests were posted.
#[cfg(all(feature = "std", target_os = "linux"))]
pub(crate) const DOORBELL_SEND: u32 = 1;
/// Doorbell bit: receive requests were posted to a QP in ERR (they are to be flushed).
#[cfg(all(feature = "std", target_os = "linux"))]
pub(crate) const DOORBELL_RECV: u32 = 2;

/// A heap ring's header on a 128-byte boundary, so that each of its lines pairs with its own
/// unused line (see [`RingHeader`]) rather than with whatever the allocator put before it.
/// A device service's blocks are page-aligned.
#[repr(C, align(128))]
#[derive(Debug)]
struct PairAligned(RingHeader);

/// Where a ring's header and slots are.
enum Memory {
    /// The device's own memory (the in-process stack: user mode is the same process).
    Heap {
        /// One header (from a vector: boxes of one value have no fallible constructor; as an
        /// array, so that reaching it takes no length check).
        header: Box<[PairAligned; 1]>,
        words: Box<[Word]>,
    },
    /// Memory shared with the client process (a device service's client maps the block).
    #[cfg(all(feature = "std", target_os = "linux", not(loom)))]
    Shared(SharedBlock),
}

/// A ring of `entries` slots of `stride` words.
pub struct Ring {
    memory: Memory,
    entries: u32,
    stride: u32,
}

impl core::fmt::Debug for Ring {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ring")
            .field("entries", &self.entries)
            .field("stride", &self.stride)
            .field("addr", &self.addr())
            .finish()
    }
}

impl Ring {
    /// A ring of at least `entries` slots (rounded up to a power of two, at least 1) of
    /// `stride` words each, unless its memory cannot be allocated. While a thread serves a
    /// client process that shares memory with the device (`dma::process::attach`), the ring
    /// is allocated there, where the client's user-mode provider maps it.
    pub(crate) fn try_new(entries: u32, stride: usize) -> Result<Self, wv_hal::AllocError> {
        let entries = entries.clamp(1, MAX_ENTRIES).next_power_of_two();
        let n = entries as usize * stride;
        #[cfg(all(feature = "std", target_os = "linux", not(loom)))]
        if let Some(shared) = crate::dma::process::caller_shared() {
            let bytes = n
                .checked_mul(8)
                .and_then(|b| b.checked_add(RING_HEADER_BYTES))
                .ok_or(wv_hal::AllocError)?;
            let block = shared.alloc(bytes)?;
            return Ring::view(block, entries, stride).ok_or(wv_hal::AllocError);
        }
        let mut v = Vec::new();
        v.try_reserve_exact(n)?;
        v.resize_with(n, || Word::new(0));
        let mut header = crate::fallible::vec_with_capacity(1)?;
        header.push(PairAligned(RingHeader::new()));
        let header = match Box::<[PairAligned; 1]>::try_from(header) {
            Ok(header) => header,
            Err(_) => unreachable!("one header was pushed"),
        };
        Ok(Ring {
            memory: Memory::Heap {
                header,
                words: v.into_boxed_slice(),
            },
            entries,
            stride: stride as u32,
        })
    }

    /// The ring of `entries` slots (a power of two) of `stride` words in a block of shared
    /// memory (the device's side, or the user-mode provider's view of it); `None` when the
    /// geometry is impossible or the block too small.
    #[cfg(all(feature = "std", target_os = "linux", not(loom)))]
    pub(crate) fn view(block: SharedBlock, entries: u32, stride: usize) -> Option<Self> {
        if !entries.is_power_of_two() || entries > MAX_ENTRIES || stride == 0 || stride > 1 << 16 {
            return None;
        }
        block.ring_parts(entries, stride)?;
        Some(Ring {
            memory: Memory::Shared(block),
            entries,
            stride: stride as u32,
        })
    }

    /// The header and the slots, found with one look at where the ring is: an operation that
    /// touches both, or the header several times, takes them once.
    #[inline]
    fn parts(&self) -> (&RingHeader, &[Word]) {
        match &self.memory {
            Memory::Heap { header, words } => (&header[0].0, words),
            #[cfg(all(feature = "std", target_os = "linux", not(loom)))]
            Memory::Shared(block) => {
                // `view` checked the geometry against the block.
                match block.ring_parts(self.entries, self.stride as usize) {
                    Some(parts) => parts,
                    None => unreachable!("a shared ring's block holds its geometry"),
                }
            }
        }
    }

    #[inline]
    fn header(&self) -> &RingHeader {
        self.parts().0
    }

    #[inline]
    fn words(&self) -> &[Word] {
        self.parts().1
    }

    /// The tail word (with a CQ's arm bits).
    #[inline]
    fn tail(&self) -> &HeaderWord {
        &self.header().tail.0
    }
    /// The head word.
    #[inline]
    fn head_word(&self) -> &HeaderWord {
        &self.header().head.0
    }

    /// Word `i` (0..4) of the words the ring's owner shares with the other side.
    pub(crate) fn owner_word(&self, i: usize) -> &HeaderWord {
        &self.header().owner.0[i & 3]
    }

    /// Number of slots.
    pub fn entries(&self) -> u32 {
        self.entries
    }
    /// Words per slot.
    pub fn stride(&self) -> usize {
        self.stride as usize
    }
    /// Where the ring is, as vendor output reports it to the user-mode provider: the address
    /// of its header in the device's memory, or its device address in the memory shared with
    /// the client.
    pub fn addr(&self) -> u64 {
        match &self.memory {
            Memory::Heap { header, .. } => header.as_ptr().addr() as u64,
            #[cfg(all(feature = "std", target_os = "linux", not(loom)))]
            Memory::Shared(block) => block.addr(),
        }
    }
    /// Bytes of slot memory.
    pub fn bytes(&self) -> u64 {
        self.words().len() as u64 * 8
    }

    /// An index (or a difference of two) modulo twice the size; drops the arm bits.
    fn wrap(&self, idx: u32) -> u32 {
        idx & (2 * self.entries - 1)
    }
    fn slot_of(&self, idx: u32) -> &[Word] {
        self.slot_in(self.words(), idx)
    }
    /// Slot `idx` of `words` (this ring's slots, already at hand).
    #[inline]
    fn slot_in<'a>(&self, words: &'a [Word], idx: u32) -> &'a [Word] {
        let i = (idx & (self.entries - 1)) as usize * self.stride as usize;
        &words[i..i + self.stride as usize]
    }

    /// Entries between head and tail as the producer sees them.
    pub(crate) fn used(&self) -> u32 {
        let t = self.tail().load(Ordering::Acquire);
        let h = self.head_word().load(Ordering::Acquire);
        self.wrap(t.wrapping_sub(h))
    }
    /// Producer: the slot `ahead` entries past the tail, if free.
    #[inline]
    fn free_slot(&self, ahead: u32) -> Option<&[Word]> {
        let (header, words) = self.parts();
        let t = header.producer.tail.load(Ordering::Relaxed);
        self.has_room(header, t, ahead)
            .then(|| self.slot_in(words, t.wrapping_add(ahead)))
    }
    /// Producer: whether the slot `ahead` entries past the tail `t` is free. Reads the
    /// consumer's head only when the producer's copy of it says the ring is full.
    #[inline]
    fn has_room(&self, header: &RingHeader, t: u32, ahead: u32) -> bool {
        let h = header.producer.head.load(Ordering::Relaxed);
        if self.wrap(t.wrapping_sub(h)) + ahead < self.entries {
            return true;
        }
        // Acquire: the consumer is done with the slots it released.
        let h = header.head.0.load(Ordering::Acquire);
        header.producer.head.store(h, Ordering::Relaxed);
        self.wrap(t.wrapping_sub(h)) + ahead < self.entries
    }

    /// Producer: learns, without reading the consumer's line, that at most `n` entries are
    /// still in the ring (e.g. from the completions the consumer wrote for the others): the
    /// producer's copy of the head moves up to `n` behind the tail when that is newer than the
    /// copy. A bound that says nothing new (`n` at least what the copy already allows) is
    /// ignored, so the copy only ever moves forward, and never past the tail.
    #[inline]
    pub(crate) fn producer_learn_outstanding(&self, n: u32) {
        let header = self.header();
        let t = header.producer.tail.load(Ordering::Relaxed);
        let cur = header.producer.head.load(Ordering::Relaxed);
        if n < self.wrap(t.wrapping_sub(cur)) {
            header
                .producer
                .head
                .store(self.wrap(t.wrapping_sub(n)), Ordering::Relaxed);
        }
    }

    /// Producer: the next free slot, if the ring is not full. Fill it, then publish it.
    #[cfg(test)]
    #[inline]
    pub(crate) fn producer_slot(&self) -> Option<&[Word]> {
        self.free_slot(0)
    }
    /// Producer: the slot `ahead` entries past the tail, if free (to fill several before one
    /// publish).
    #[inline]
    pub(crate) fn producer_slot_ahead(&self, ahead: u32) -> Option<&[Word]> {
        self.free_slot(ahead)
    }
    /// Producer: makes `n` filled slots visible to the consumer (rings without arm bits).
    pub(crate) fn publish(&self, n: u32) {
        let header = self.header();
        let t = self.wrap(header.producer.tail.load(Ordering::Relaxed).wrapping_add(n));
        header.producer.tail.store(t, Ordering::Relaxed);
        header.tail.0.store(t, Ordering::Release);
    }

    /// Producer of a CQ ring: makes one filled slot visible and, in the same atomic step,
    /// takes the arm if this completion satisfies it (the next completion, or the next
    /// solicited one and `solicited`). Returns whether it did: the caller then raises the CQ
    /// event, exactly once per arm. (The device writes CQEs with [`Ring::produce_notify`].)
    #[cfg(test)]
    pub(crate) fn publish_notify(&self, solicited: bool) -> bool {
        let header = self.header();
        let t = header.producer.tail.load(Ordering::Relaxed);
        self.publish_notify_at(header, t, solicited)
    }

    /// Producer of a CQ ring: fills the next free slot with `fill` and publishes it as
    /// `publish_notify` does, finding the header and the slots once for both. Returns
    /// `None` (nothing written) when the ring is full, else whether the arm was taken.
    // Forced: LLVM kept it a call inside the completion.
    #[inline(always)]
    pub(crate) fn produce_notify(
        &self,
        solicited: bool,
        fill: impl FnOnce(&[Word]),
    ) -> Option<bool> {
        let (header, words) = self.parts();
        let t = header.producer.tail.load(Ordering::Relaxed);
        if !self.has_room(header, t, 0) {
            return None;
        }
        fill(self.slot_in(words, t));
        Some(self.publish_notify_at(header, t, solicited))
    }

    /// `publish_notify` with the producer's tail `t` already read.
    #[inline]
    fn publish_notify_at(&self, header: &RingHeader, t: u32, solicited: bool) -> bool {
        let next = self.wrap(t.wrapping_add(1));
        header.producer.tail.store(next, Ordering::Relaxed);
        // The first guess is the tail with no arm bits (the common case when polling): the
        // tail line is then written without being read first.
        let mut old = t;
        loop {
            let fire = old & ARM_NEXT != 0 || (solicited && old & ARM_SOLICITED != 0);
            let arm = if fire { 0 } else { old & ARM_BITS };
            // Release: the CQE's words before the index. A CAS (not a store) because the
            // consumer may set arm bits at any time; failing, it retries with those bits.
            match header.tail.0.compare_exchange_weak(
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
        let t = self.tail().fetch_or(want, Ordering::AcqRel);
        let h = self.head_word().load(Ordering::Relaxed);
        self.wrap(t.wrapping_sub(h)) != 0
    }

    /// Consumer: starts bringing in the lines the next [`Ring::consumer_slot`] reads (the tail
    /// word and the slot at the head), which the producer on another processor last wrote,
    /// without waiting for them.
    #[inline]
    pub(crate) fn prefetch_consumer(&self) {
        let (header, words) = self.parts();
        crate::dma::prefetch(&header.tail.0);
        let h = header.head.0.load(Ordering::Relaxed);
        if let Some(word) = self.slot_in(words, h).first() {
            crate::dma::prefetch(word);
        }
    }

    /// Consumer: the oldest entry, if any. Read it, then [`Ring::consume`].
    #[inline]
    pub(crate) fn consumer_slot(&self) -> Option<&[Word]> {
        self.consumer_slot_at(0)
    }
    /// Consumer: the entry `n` past the oldest, if published.
    #[inline]
    pub(crate) fn consumer_slot_at(&self, n: u32) -> Option<&[Word]> {
        let (header, words) = self.parts();
        let h = header.head.0.load(Ordering::Relaxed);
        let t = header.tail.0.load(Ordering::Acquire);
        if self.wrap(t.wrapping_sub(h)) <= n {
            return None;
        }
        Some(self.slot_in(words, h.wrapping_add(n)))
    }
    /// Consumer: hands up to `max` entries, oldest first, to `take` (with their number among
    /// them), releasing each to the producer once `take` has read it; returns how many. The
    /// header and the slots are found once for all of them.
    #[inline]
    pub(crate) fn consume_each(&self, max: usize, mut take: impl FnMut(usize, &[Word])) -> usize {
        let (header, words) = self.parts();
        let mut h = header.head.0.load(Ordering::Relaxed);
        let mut n = 0;
        while n < max {
            let t = header.tail.0.load(Ordering::Acquire);
            if self.wrap(t.wrapping_sub(h)) == 0 {
                break;
            }
            take(n, self.slot_in(words, h));
            h = self.wrap(h.wrapping_add(1));
            header.head.0.store(h, Ordering::Release);
            n += 1;
        }
        n
    }
    /// Consumer: releases the oldest `n` entries to the producer.
    pub(crate) fn consume(&self, n: u32) {
        let head = self.head_word();
        let h = head.load(Ordering::Relaxed);
        head.store(self.wrap(h.wrapping_add(n)), Ordering::Release);
    }
    /// The consumer index (modulo twice the size). For the consumer's own bookkeeping.
    pub(crate) fn head(&self) -> u32 {
        self.head_word().load(Ordering::Relaxed)
    }

    /// Copies the entries not yet consumed, oldest first, into the empty ring `to` and
    /// publishes them there with this ring's arm bits and owner words (a resize). Returns `false`, copying
    /// nothing, when they do not fit. Only while neither side of `self` moves (the caller
    /// holds what stops them).
    pub(crate) fn copy_pending_to(&self, to: &Ring) -> bool {
        let h = self.head_word().load(Ordering::Acquire);
        let t = self.tail().load(Ordering::Acquire);
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
        for i in 0..4 {
            to.owner_word(i).store(
                self.owner_word(i).load(Ordering::Acquire),
                Ordering::Release,
            );
        }
        to.header()
            .producer
            .tail
            .store(to.wrap(n), Ordering::Relaxed);
        to.tail()
            .store(to.wrap(n) | (t & ARM_BITS), Ordering::Release);
        true
    }

    /// Drops every entry (QP reset): both indices back to zero. Only with both sides quiet.
    pub(crate) fn reset(&self) {
        self.head_word().store(0, Ordering::Release);
        self.header().producer.head.store(0, Ordering::Relaxed);
        self.header().producer.tail.store(0, Ordering::Relaxed);
        self.tail().store(0, Ordering::Release);
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
    fn the_producer_leaves_the_consumers_head_alone_while_its_copy_says_room() {
        let r = Ring::try_new(4, 1).unwrap();
        let copy = || r.header().producer.head.load(Ordering::Relaxed);
        r.producer_slot().unwrap();
        r.publish(1);
        r.consumer_slot().unwrap();
        r.consume(1);
        // Room by its own copy of the head (0): the consumer's line is not read.
        for _ in 0..3 {
            r.producer_slot().unwrap();
            r.publish(1);
        }
        assert_eq!(copy(), 0, "the consumer's head was read with room to spare");
        // Full by its copy (4 past 0): now it reads the head (1), keeps it, and finds room.
        assert!(r.producer_slot().is_some());
        assert_eq!(copy(), 1);
    }

    #[test]
    fn a_learned_bound_moves_the_producers_copy_forward_only() {
        let r = Ring::try_new(4, 1).unwrap();
        let copy = || r.header().producer.head.load(Ordering::Relaxed);
        for _ in 0..4 {
            r.producer_slot().unwrap();
            r.publish(1);
        }
        for _ in 0..2 {
            r.consumer_slot().unwrap();
            r.consume(1);
        }
        // Nothing new: four (or more) may still be in it, as the copy already says.
        r.producer_learn_outstanding(4);
        r.producer_learn_outstanding(u32::MAX);
        assert_eq!(copy(), 0);
        // At most two are: the head is at least 2, and there is room without its line.
        r.producer_learn_outstanding(2);
        assert_eq!(copy(), 2);
        assert!(r.producer_slot().is_some());
        r.publish(1);
        assert_eq!(
            copy(),
            2,
            "room by the learned copy: the head line was not read"
        );
        // A looser bound later (three of five) does not move the copy back.
        r.producer_learn_outstanding(3);
        assert_eq!(copy(), 2);
        // Across the wrap of the indices (modulo twice the size): tail 5 + 4 = 9, i.e. 1.
        for _ in 0..3 {
            r.consumer_slot().unwrap();
            r.consume(1);
        }
        r.producer_learn_outstanding(0);
        assert_eq!(copy(), 5);
        for _ in 0..4 {
            r.producer_slot().unwrap();
            r.publish(1);
        }
        assert!(r.producer_slot().is_none());
        r.producer_learn_outstanding(1);
        assert_eq!(copy(), 0, "one of four left: head 8, i.e. 0");
        assert!(r.producer_slot().is_some());
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
