//! Shared receive queues: one receive ring consumed by every QP attached to it.

use alloc::sync::Weak;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};

use spin::Mutex;
use wv_hal::SrqEventSink;

use crate::device::{AsyncEvent, Device, Rundown};
use crate::qp::{Qp, RecvWqe};
use crate::ring::Ring;

/// A shared receive queue (aligned and padded like `Qp`).
#[repr(align(64))]
pub(crate) struct Srq {
    pub handle: u32,
    pub pd: u32,
    pub ring: Ring,
    pub max_sge: u32,
    /// Armed limit (0 = disarmed).
    pub limit: AtomicU32,
    /// Serialises the consumers (responders of several QPs).
    pub consumer: Mutex<()>,
    /// Requesters waiting after an RNR NAK for a receive to be posted here.
    pub rnr_waiters: Mutex<Vec<Weak<Qp>>>,
    pub sink: wv_hal::KArc<dyn SrqEventSink>,
    pub rundown: Rundown,
}

impl Srq {
    /// Takes the oldest receive, raising the limit event when the queue falls below the armed
    /// limit (one-shot: the limit disarms).
    pub(crate) fn take(&self, dev: &Device) -> Option<RecvWqe> {
        let w = {
            let _g = self.consumer.lock();
            let slot = self.ring.consumer_slot()?;
            let w = RecvWqe::read(slot, self.max_sge as usize);
            self.ring.consume(1);
            w
        };
        let limit = self.limit.load(Ordering::Acquire);
        if limit != 0
            && self.ring.used() < limit
            && self
                .limit
                .compare_exchange(limit, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            dev.post_async(AsyncEvent::SrqLimitReached, self.handle);
        }
        Some(w)
    }
}
