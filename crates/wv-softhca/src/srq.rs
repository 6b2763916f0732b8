//! Shared receive queues: one receive ring consumed by every QP attached to it, resizable with
//! the receives not yet used carried over.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicU32, Ordering};

use spin::Mutex;
use wv_hal::{KArc, SrqEventSink, VerbsError};

use crate::device::{AsyncEvent, Device, Rundown};
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
    consumer: Mutex<Arc<Ring>>,
    pub sink: KArc<dyn SrqEventSink>,
    pub rundown: Rundown,
}

impl Srq {
    /// An SRQ, unless its ring cannot be allocated.
    pub(crate) fn try_new(
        handle: u32,
        pd: u32,
        max_wr: u32,
        max_sge: u32,
        limit: u32,
        sink: KArc<dyn SrqEventSink>,
    ) -> Result<Self, VerbsError> {
        Ok(Srq {
            handle,
            pd,
            max_sge,
            limit: AtomicU32::new(limit),
            consumer: Mutex::new(Arc::new(Self::ring_of(max_wr, max_sge)?)),
            sink,
            rundown: Rundown::new(),
        })
    }

    fn ring_of(max_wr: u32, max_sge: u32) -> Result<Ring, VerbsError> {
        Ring::try_new(max_wr, RQ_HDR_WORDS + 2 * max_sge as usize)
            .map_err(|_| VerbsError::InsufficientMemory)
    }

    /// The ring receives are taken from now.
    pub(crate) fn ring(&self) -> Arc<Ring> {
        Arc::clone(&self.consumer.lock())
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

    /// Resizes to at least `max_wr` receives (the device limit checked by the caller): a new
    /// ring that starts with the receives not yet taken, oldest first. The same size keeps the
    /// ring. The producer must not post meanwhile (the user-mode provider holds its post lock
    /// across the command) and maps the ring returned.
    ///
    /// # Errors
    /// `InvalidParameter` when the new size cannot hold the receives waiting;
    /// `InsufficientMemory` when the new ring cannot be allocated.
    pub(crate) fn resize(&self, max_wr: u32) -> Result<Arc<Ring>, VerbsError> {
        // Allocated before the consumers' lock is taken, never under it.
        let new = Self::ring_of(max_wr, self.max_sge)?;
        let mut ring = self.consumer.lock();
        if new.entries() == ring.entries() {
            return Ok(Arc::clone(&ring));
        }
        if !ring.copy_pending_to(&new) {
            return Err(VerbsError::InvalidParameter);
        }
        *ring = Arc::new(new);
        Ok(Arc::clone(&ring))
    }
}
