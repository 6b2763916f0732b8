//! Shared receive queues: one receive ring consumed by every QP attached to it, resizable with
//! the receives not yet used carried over.

use core::sync::atomic::{AtomicU32, Ordering};

use crate::lock::Mutex;
use wv_hal::{AllocError, KArc, SrqEventSink, VerbsError};

use crate::device::{AsyncEvent, Device, Rundown};
use crate::fallible::no_memory;
use crate::qp::RecvWqe;
use crate::ring::Ring;
use crate::wr::RQ_HDR_WORDS;

/// A shared receive queue (aligned and padded like `Qp`).
#[repr(align(64))]
pub(crate) struct Srq {
    pub handle: u32,
    pub pd: u32,
    pub max_sge: u32,
    /// Armed limit (0 = disarmed).
    pub limit: AtomicU32,
    /// The ring, under the lock that serialises the consumers (responders of several QPs). A
    /// resize replaces it.
    consumer: Mutex<KArc<Ring>>,
    pub sink: KArc<dyn SrqEventSink>,
    pub rundown: Rundown,
}

impl Srq {
    /// SRQ `handle` with a ring of at least `max_wr` receives, unless they cannot be
    /// allocated.
    pub(crate) fn try_new(
        handle: u32,
        pd: u32,
        max_wr: u32,
        max_sge: u32,
        limit: u32,
        sink: KArc<dyn SrqEventSink>,
    ) -> Result<KArc<Self>, VerbsError> {
        let ring = Self::new_ring(max_wr, max_sge).map_err(no_memory)?;
        KArc::try_new(Srq {
            handle,
            pd,
            max_sge,
            limit: AtomicU32::new(limit),
            consumer: Mutex::new(ring),
            sink,
            rundown: Rundown::new(),
        })
        .map_err(no_memory)
    }

    /// A receive ring of at least `max_wr` WQEs of `max_sge` SGEs (for a new SRQ, or a
    /// resize).
    pub(crate) fn new_ring(max_wr: u32, max_sge: u32) -> Result<KArc<Ring>, AllocError> {
        KArc::try_new(Ring::try_new(max_wr, RQ_HDR_WORDS + 2 * max_sge as usize)?)
    }

    /// The ring receives are taken from now.
    pub(crate) fn ring(&self) -> KArc<Ring> {
        KArc::clone(&self.consumer.lock())
    }

    /// Takes the oldest receive, raising the limit event when the queue falls below the armed
    /// limit (one-shot: the limit disarms).
    pub(crate) fn take(&self, dev: &Device) -> Option<RecvWqe> {
        let (w, left) = {
            let ring = self.consumer.lock();
            let slot = ring.consumer_slot()?;
            let w = RecvWqe::read(slot, self.max_sge as usize);
            ring.consume(1);
            (w, ring.used())
        };
        let limit = self.limit.load(Ordering::Acquire);
        if limit != 0
            && left < limit
            && self
                .limit
                .compare_exchange(limit, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            dev.post_async(AsyncEvent::SrqLimitReached, self.handle);
        }
        Some(w)
    }

    /// Resizes to the `new` ring (allocated by the caller, with [`Srq::new_ring`], before any
    /// lock was taken): it starts with the receives not yet taken, oldest first. A ring of the
    /// current size keeps the current one. The producer must not post meanwhile (the
    /// user-mode provider holds its post lock across the command) and maps the ring returned.
    ///
    /// # Errors
    /// `InvalidParameter` when the new size cannot hold the receives waiting.
    pub(crate) fn resize(&self, new: KArc<Ring>) -> Result<KArc<Ring>, VerbsError> {
        let mut ring = self.consumer.lock();
        if new.entries() == ring.entries() {
            return Ok(KArc::clone(&ring));
        }
        if !ring.copy_pending_to(&new) {
            return Err(VerbsError::InvalidParameter);
        }
        *ring = KArc::clone(&new);
        Ok(new)
    }
}
