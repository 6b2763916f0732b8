//! QP_MODIFY: converted from `WV_IO_QP_ATTRIBUTES` and applied by the controller at
//! PASSIVE_LEVEL, either on a work item (the default; FIFO per QP, parallel across QPs) or in
//! the caller's thread (`QpModifyMode::Inline`, the OFW behaviour).
//!
//! Asynchronous path: the request is parked in the QP's `modify_queue` (so it stays
//! cancellable by the I/O manager and by QP_CANCEL while it waits), and the QP's scheduler
//! makes sure exactly one drainer work item takes requests out in order. The drainer holds a
//! share of the device gate only while it calls the controller, so device removal waits for a
//! running modify and fails the queued ones.
//!
//! The work item is there so that the caller never waits for a slow command, and so that a
//! caller with several modifies in flight has their commands overlap across QPs. Neither pays
//! when the device's commands are measured much shorter than a hand-off to a worker
//! ([`crate::hand_off`]): with `n` modifies in flight the work items finish them sooner only
//! if `n - 1` commands outlast one hand-off. So while [`PIPELINE`] commands are expected to end
//! before a hand-off would start the first, a modify of a QP with nothing queued runs in the
//! caller's thread, in the drainer's place (the QP's scheduler is claimed for it, so modifies
//! of one QP stay in order and a QP destroy waits for it as for a drainer).

use wv_abi::{NtStatus, WV_IO_QP_ATTRIBUTES, read_prefix};
use wv_hal::{IoRequest, KArc, Platform, RequestQueue, Verbs, WorkItem};

use crate::QpModifyMode;
use crate::convert::qp_modify_from_abi;
use crate::hand_off;
use crate::provider::Provider;
use crate::qp::QpObj;
use crate::rdma_device::RdmaDevice;
use crate::status::{REMOVED, verbs_status};

/// Applies the modify carried by `req` and returns its status: the attributes are decoded
/// here, once, from the system buffer (the decoder checked that all 192 bytes are there and
/// read only the QP id: a parked modify carries nothing but its request). The output (the
/// user-mode provider's QP-state bytes) is then written in place over the same buffer.
fn apply<P: Platform, V: Verbs>(
    platform: &P,
    rdma: &RdmaDevice<P, V>,
    (lower, qp): (&V, &V::Qp),
    req: &mut P::Request,
) -> NtStatus {
    let attr: WV_IO_QP_ATTRIBUTES = read_prefix(req.buffer()).unwrap_or_default();
    let modify = qp_modify_from_abi(&attr);
    let out_len = req.output_len();
    let buf = req.buffer_mut();
    let out_len = out_len.min(buf.len());
    match rdma.modify_qp(platform, lower, qp, &modify, &mut buf[..out_len]) {
        Ok(()) => NtStatus::SUCCESS,
        Err(e) => verbs_status(e),
    }
}

/// How many modifies in flight a caller is assumed to overlap on the work items, for the rule
/// above: eight, as a caller that drives a batch of QPs through their states keeps (the
/// benchmark's depth); a caller that waits for each modify (librdmacm, OFW's winverbs.dll)
/// gains nothing from the work item at any depth.
const PIPELINE: u64 = 8;

/// Completes a modify: `Information = outlen` whatever the outcome (OFW), except for requests
/// that never reached the controller.
fn finish<R: IoRequest>(req: R, status: NtStatus) {
    let info = if status == REMOVED {
        0
    } else {
        req.output_len()
    };
    req.complete(status, info);
}

/// QP_MODIFY `{Id.Id = qp, attributes}` → opaque QP-state bytes, `Information = outlen`.
/// Pends (async mode) or completes inline (inline mode). Bad id: `STATUS_NOT_FOUND`.
pub(crate) fn qp_modify<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    mut req: P::Request,
    id: u64,
) {
    let Some(qp) = prov.acquire::<QpObj<P, V>>(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    match prov.shared.config.qp_modify {
        QpModifyMode::Inline => {
            let status = match (qp.dev.lower(), qp.qp.get()) {
                (Some(lower), Some(handle)) => {
                    apply(prov.platform(), &qp.dev.rdma, (&lower, &handle), &mut req)
                }
                _ => NtStatus::NOT_FOUND,
            };
            finish(req, status);
        }
        QpModifyMode::Async
            if hand_off::inline_pays(&qp.dev.rdma.commands, &prov.shared.hand_off, PIPELINE)
                && qp.sched.claim() =>
        {
            qp.run_one(req);
            // A modify parked while this one ran found the scheduler claimed and queued no
            // drainer: start one for it.
            if !qp.sched.finish() {
                start_drainer(prov, qp.arc());
            }
        }
        QpModifyMode::Async => {
            if let Err((req, status)) = qp.modify_queue.park(req) {
                return req.complete(status, 0);
            }
            if qp.sched.kick(prov.platform().now_ns()) {
                start_drainer(prov, qp.arc());
            }
        }
    }
}

/// Queues the QP's drainer; the caller holds the QP's scheduler (a kick that asked for a
/// drainer, or a claim that ended with modifies parked).
fn start_drainer<P: Platform, V: Verbs>(prov: &Provider<P, V>, qp: &KArc<QpObj<P, V>>) {
    // The QP is its own drainer: the queued work holds a reference on it.
    let work: KArc<dyn WorkItem> = KArc::clone(qp).into();
    if let Err(status) = prov.platform().queue_work(work) {
        // No drainer: fail what is queued; the next QP_MODIFY tries again.
        loop {
            qp.fail_parked(status);
            if qp.sched.finish() {
                break;
            }
        }
    }
}

impl<P: Platform, V: Verbs> QpObj<P, V> {
    fn run_one(&self, mut req: P::Request) {
        let status = if self.dev.gate.enter() {
            let status = match (self.dev.lower(), self.qp.get()) {
                (Some(lower), Some(handle)) => apply(
                    &self.shared.platform,
                    &self.dev.rdma,
                    (&lower, &handle),
                    &mut req,
                ),
                _ => REMOVED,
            };
            // The handle clone is gone before the gate share: removal may take it at once.
            self.dev.gate.leave();
            status
        } else {
            REMOVED
        };
        finish(req, status);
    }
}

/// The drainer of one QP's modify queue: the QP itself, queued by [`qp_modify`] when its
/// scheduler says no drainer runs.
impl<P: Platform, V: Verbs> WorkItem for QpObj<P, V> {
    /// PASSIVE_LEVEL on a system worker thread: applies the QP's queued modifies in order until
    /// the queue is empty.
    fn run(&self) {
        self.shared.platform.paged_code();
        self.shared.timed_start(&self.sched);
        loop {
            match self.next_modify() {
                Some(req) => self.run_one(req),
                None => {
                    #[cfg(feature = "fault-injection")]
                    if self.shared.faults().lose_modify_wakeup {
                        if self.sched.finish_silently() {
                            break;
                        }
                        continue;
                    }
                    if self.sched.finish() {
                        break;
                    }
                }
            }
        }
    }
}
