//! Completion queues: a CQE ring shared with user mode, one-shot arming, overrun detection,
//! and resizing with the completions not yet polled carried over.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering, fence};

use spin::Mutex;
use wv_hal::{AllocError, CqEventSink, KArc, VerbsError};

use crate::device::{AsyncEvent, Device, Rundown};
use crate::ring::{Padded, Ring};
use crate::wr::{CQE_WORDS, WorkCompletion};

/// Arm states, ordered so that arming can only widen (NEXT is never downgraded to SOLICITED).
pub(crate) const ARM_NONE: u8 = 0;
pub(crate) const ARM_SOLICITED: u8 = 1;
pub(crate) const ARM_NEXT: u8 = 2;

/// A completion queue (aligned and padded like `Qp`).
#[repr(align(64))]
pub(crate) struct Cq {
    pub handle: u32,
    /// The ring the device writes, under the lock that serialises producers (the send and
    /// receive sides of any number of QPs). A resize replaces it.
    prod: Padded<Mutex<Arc<Ring>>>,
    notify: AtomicU8,
    /// The CQ handle is in the CQ-notify ring (at most once, so the ring never overflows).
    pub queued: AtomicBool,
    /// The CQ overran: it is in error for good and takes no more CQEs.
    pub overrun: AtomicBool,
    pub sink: KArc<dyn CqEventSink>,
    pub rundown: Rundown,
}

impl Cq {
    /// A CQ, unless its ring cannot be allocated.
    pub(crate) fn try_new(
        handle: u32,
        entries: u32,
        sink: KArc<dyn CqEventSink>,
    ) -> Result<Self, AllocError> {
        Ok(Cq {
            handle,
            prod: Padded(Mutex::new(Arc::new(Ring::try_new(entries, CQE_WORDS)?))),
            notify: AtomicU8::new(ARM_NONE),
            queued: AtomicBool::new(false),
            overrun: AtomicBool::new(false),
            sink,
            rundown: Rundown::new(),
        })
    }

    /// Writes a CQE; raises the CQ interrupt if the CQ was armed for it, or the CQ error event
    /// on overrun. Returns `false` when the CQE was lost to an overrun.
    pub(crate) fn post(&self, dev: &Device, wc: &WorkCompletion, solicited: bool) -> bool {
        let fire;
        {
            let ring = self.prod.lock();
            if self.overrun.load(Ordering::Relaxed) {
                return false;
            }
            let Some(slot) = ring.producer_slot() else {
                self.overrun.store(true, Ordering::Relaxed);
                drop(ring);
                dev.post_async(AsyncEvent::CqErr, self.handle);
                return false;
            };
            wc.encode(slot);
            ring.publish(1);
            // Store (the CQE) then load (the arm) here, store (the arm) then load (the ring) in
            // `arm`: without a full fence on both sides each could miss the other's store, the
            // CQE would raise no event and a consumer that armed would sleep for ever.
            fence(Ordering::SeqCst);
            let n = self.notify.load(Ordering::Acquire);
            fire = (n == ARM_NEXT || (n == ARM_SOLICITED && solicited))
                && self
                    .notify
                    .compare_exchange(n, ARM_NONE, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok();
        }
        if fire {
            dev.cq_notify(self);
        }
        true
    }

    /// The ring completions are written to now.
    pub(crate) fn ring(&self) -> Arc<Ring> {
        Arc::clone(&self.prod.lock())
    }

    /// Resizes to at least `entries` (the device limit checked by the caller): a new ring
    /// that starts with the completions not yet polled, oldest first. The same size keeps the
    /// ring. The consumer must not poll meanwhile (the user-mode provider holds its poll lock
    /// across the command, as libmlx4 holds its CQ lock across `ibv_resize_cq`) and maps the
    /// ring returned.
    ///
    /// # Errors
    /// `InvalidParameter` when the new size cannot hold the completions waiting;
    /// `InsufficientMemory` when the new ring cannot be allocated.
    pub(crate) fn resize(&self, entries: u32) -> Result<Arc<Ring>, VerbsError> {
        // Allocated before the producers' lock is taken, never under it.
        let new = Ring::try_new(entries, CQE_WORDS).map_err(|_| VerbsError::InsufficientMemory)?;
        let mut ring = self.prod.lock();
        if new.entries() == ring.entries() {
            return Ok(Arc::clone(&ring));
        }
        if !ring.copy_pending_to(&new) {
            return Err(VerbsError::InvalidParameter);
        }
        *ring = Arc::new(new);
        Ok(Arc::clone(&ring))
    }

    /// The arm doorbell; `ring` is the ring the consumer polls. Returns whether it already
    /// holds completions (the `REPORT_MISSED_EVENTS` answer: the caller must poll again).
    pub(crate) fn arm(&self, solicited_only: bool, ring: &Ring) -> bool {
        let want = if solicited_only {
            ARM_SOLICITED
        } else {
            ARM_NEXT
        };
        self.notify.fetch_max(want, Ordering::AcqRel);
        // Pairs with the fence in `post`: either `post` sees this arm, or we see its CQE.
        fence(Ordering::SeqCst);
        !ring.is_empty()
    }
}
