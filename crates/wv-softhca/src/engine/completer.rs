//! The completer (rxe's `rxe_comp.c`): acts on what comes back for the requests in flight —
//! cumulative ACKs, read and atomic responses, RNR and sequence NAKs, fatal NAKs, silence —
//! completes the send WQEs in order, spends the retry budgets, keeps the QP's timer on its
//! next deadline, and flushes the send queue when the QP is in error.

use alloc::sync::Arc;
use core::sync::atomic::Ordering;

use wv_hal::{KArc, QpEvent, QpState};

use super::responder::flush_rq;
use super::segments::{Cursor, SegList};
use super::wire::Reply;
use super::{PSN_MASK, psn_add, psn_diff};
use crate::cq::CqPort;
use crate::device::Device;
use crate::qp::{Qp, SqCtx};
use crate::wr::{SendWqe, WcOpcode, WcStatus, WorkCompletion, WrOpcode, send_flags};

/// The local ACK timeout of the `timeout` attribute: 4.096 µs × 2^timeout; 0 means none.
pub(crate) fn ack_timeout_ns(timeout: u8) -> Option<u64> {
    (timeout != 0).then(|| 4_096u64 << timeout.min(31))
}

/// The send-ring slot of request `i`, counted from the head.
pub(super) fn slot_of(qp: &Qp, i: u32) -> usize {
    ((qp.sq.head() + i) & (qp.sq.entries() - 1)) as usize
}

fn wc_opcode(op: Option<WrOpcode>) -> WcOpcode {
    match op {
        Some(WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm) => WcOpcode::RdmaWrite,
        Some(WrOpcode::RdmaRead) => WcOpcode::RdmaRead,
        Some(WrOpcode::AtomicCmpAndSwp) => WcOpcode::CompSwap,
        Some(WrOpcode::AtomicFetchAndAdd) => WcOpcode::FetchAdd,
        Some(WrOpcode::LocalInv) => WcOpcode::LocalInv,
        Some(WrOpcode::BindMw) => WcOpcode::BindMw,
        Some(WrOpcode::RegMr) => WcOpcode::RegMr,
        _ => WcOpcode::Send,
    }
}

/// Retires the oldest send WQE, `wqe` (decoded from its slot): frees the slot, then writes its
/// completion when it is signaled (an error always is). In that order because a client that
/// polls the completion may post into the slot at once, and the device may run in another
/// process than the client's (the device service), where the client would otherwise find the
/// queue still full.
pub(super) fn retire_send(
    dev: &Device,
    qp: &Qp,
    port: &CqPort,
    wqe: &SendWqe,
    status: WcStatus,
    len: u32,
) {
    qp.sq.consume(1);
    let ok = status == WcStatus::Success;
    let signaled =
        !ok || qp.sq_sig_all.load(Ordering::Acquire) || wqe.flags & send_flags::SIGNALED != 0;
    if !signaled {
        return;
    }
    let (wr_id, opcode, qp_num) = (wqe.wr_id, wc_opcode(WrOpcode::from_u8(wqe.opcode)), qp.qpn);
    // Built in its slot: the fields left at their defaults are stored as the constants they are.
    port.post_with(dev, !ok, |slot| {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            byte_len: len,
            qp_num,
            ..WorkCompletion::default()
        }
        .encode(slot);
    });
}

/// Completes every outstanding send WQE with `WR_FLUSH_ERR`, signaled or not, and forgets
/// what was in flight.
#[cold]
#[inline(never)]
pub(super) fn flush_sq(dev: &Device, qp: &Qp, ctx: &mut SqCtx) {
    while let Some(slot) = qp.sq.consumer_slot() {
        let wqe = SendWqe::decode(slot);
        let wc = WorkCompletion {
            wr_id: wqe.wr_id,
            status: WcStatus::WrFlushErr,
            opcode: wc_opcode(WrOpcode::from_u8(wqe.opcode)),
            qp_num: qp.qpn,
            ..WorkCompletion::default()
        };
        // Freed before its completion is visible, as in `retire_send`.
        qp.sq.consume(1);
        ctx.cq.post(dev, &wc, true);
    }
    let psn = ctx.psn;
    ctx.tx.clear(psn);
}

/// What the data path does when it moves a QP to ERR (the send queue flushes itself).
#[cold]
#[inline(never)]
pub(super) fn enter_error(dev: &Arc<Device>, qp: &KArc<Qp>) {
    flush_rq(dev, qp);
    if qp.srq.is_some() {
        dev.post_qp_event(qp, QpEvent::LastWqeReached);
    }
}

/// Sets (or cancels) the QP's platform timer to its next deadline.
pub(super) fn sync_timer(dev: &Device, qp: &Qp, ctx: &mut SqCtx) {
    let tx = &mut ctx.tx;
    if tx.started == 0 {
        tx.ack_due = None;
    } else if tx.ack_due.is_none()
        && tx.rnr_until.is_none()
        && let Some(timeout) = ack_timeout_ns(ctx.timeout)
    {
        tx.ack_due = Some(dev.now_ns().saturating_add(timeout));
        tx.ack_una = tx.una;
    }
    // While an RNR wait runs nothing is sent, so it is the only deadline that matters.
    let due = tx.rnr_until.or(tx.ack_due);
    if due != tx.timer_due {
        match due {
            Some(due) => dev.set_timer(&qp.timer, due),
            None => dev.cancel_timer(&qp.timer),
        }
        tx.timer_due = due;
    }
}

/// What the requester's deadlines leave it to do.
pub(super) enum Deadlines {
    /// Send on (possibly from an earlier packet: the local ACK timer went back).
    Send,
    /// An RNR wait has not ended: nothing is sent.
    Wait,
    /// The local ACK timer expired with the retries spent: the head failed, the QP is in ERR.
    Failed,
}

/// The requester's deadlines, looked at before it sends (only when one is set): an RNR wait
/// that has not ended stops it; an expired local ACK timer with no progress since it was
/// armed goes back to the oldest unacknowledged packet, or fails the head when the retries
/// are spent.
// Out of line, as what it does is: with nothing in flight no deadline is set, and the
// requester's own run stays small enough to keep its hot lines apart in the instruction cache.
#[inline(never)]
pub(super) fn check_deadlines(dev: &Arc<Device>, qp: &KArc<Qp>, ctx: &mut SqCtx) -> Deadlines {
    let now = dev.now_ns();
    if let Some(until) = ctx.tx.rnr_until {
        if now < until {
            return Deadlines::Wait;
        }
        ctx.tx.rnr_until = None;
    }
    if let Some(due) = ctx.tx.ack_due
        && now >= due
    {
        ctx.tx.ack_due = None;
        if ctx.tx.started > 0 && ctx.tx.una == ctx.tx.ack_una {
            // The local ACK timeout: resend from the oldest unacknowledged packet.
            if !retry(dev, qp, ctx, WcStatus::RetryExcErr) {
                return Deadlines::Failed;
            }
            let una = ctx.tx.una;
            go_back(qp, ctx, una);
        }
        // Otherwise there was progress since the timer was armed: it restarts.
    }
    Deadlines::Send
}

/// Fails request `i` (from the head) with `status`: at once when it is the head, else when
/// the requests before it have completed.
pub(super) fn fail_at(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ctx: &mut SqCtx,
    i: u32,
    status: WcStatus,
) -> bool {
    if i != 0 {
        return false;
    }
    fail_head(dev, qp, ctx, status);
    true
}

/// Completes the oldest request with an error and moves the QP to ERR (the rest flushes).
#[cold]
#[inline(never)]
fn fail_head(dev: &Arc<Device>, qp: &KArc<Qp>, ctx: &mut SqCtx, status: WcStatus) {
    if let Some(slot) = qp.sq.consumer_slot() {
        let wqe = SendWqe::decode(slot);
        retire_send(dev, qp, &ctx.cq, &wqe, status, 0);
    }
    let psn = ctx.psn;
    ctx.tx.clear(psn);
    if qp.set_error() {
        enter_error(dev, qp);
    }
}

/// Spends a transport retry; when none is left, fails the oldest request with `status`.
fn retry(dev: &Arc<Device>, qp: &KArc<Qp>, ctx: &mut SqCtx, status: WcStatus) -> bool {
    if ctx.tx.retries == 0 {
        fail_head(dev, qp, ctx, status);
        return false;
    }
    ctx.tx.retries -= 1;
    true
}

/// Moves the send position back to the packet of PSN `psn` (Go-Back-N), or to an unanswered
/// read or atomic before it, which is asked again whole: a later request's ACK may have moved
/// `una` past it, and what is resent starts at the oldest request not done (as rxe's
/// `req_retry` walks the send queue from its head).
fn go_back(qp: &Qp, ctx: &mut SqCtx, psn: u32) {
    let tx = &mut ctx.tx;
    tx.cur = tx.started;
    tx.cur_pkt = 0;
    for i in 0..tx.started {
        let track = tx.track[slot_of(qp, i)];
        if track.rd && !track.done {
            tx.cur = i;
            break;
        }
        let off = psn_diff(psn, track.first_psn);
        if off >= 0 && (off as u32) < track.npkts {
            tx.cur = i;
            tx.cur_pkt = if track.rd { 0 } else { off as u32 };
            break;
        }
    }
    skip_acked(qp, ctx);
}

/// Never resends what was acknowledged or answered.
fn skip_acked(qp: &Qp, ctx: &mut SqCtx) {
    let tx = &mut ctx.tx;
    while tx.cur < tx.started {
        let track = tx.track[slot_of(qp, tx.cur)];
        if track.rd {
            if !track.done {
                break;
            }
            tx.cur += 1;
            tx.cur_pkt = 0;
            continue;
        }
        let acked = psn_diff(tx.una, track.first_psn).max(0) as u32;
        if acked >= track.npkts {
            tx.cur += 1;
            tx.cur_pkt = 0;
            continue;
        }
        tx.cur_pkt = tx.cur_pkt.max(acked);
        break;
    }
}

/// Every PSN up to `psn` arrived: completes the requests that are done, in order.
fn acked(dev: &Arc<Device>, qp: &KArc<Qp>, ctx: &mut SqCtx, psn: u32) {
    let tx = &mut ctx.tx;
    if tx.started > 0 && psn_diff(psn, tx.una) >= 0 && psn_diff(psn, ctx.psn) < 0 {
        tx.una = psn_add(psn, 1);
        // Forward progress: the retry budgets start again (as rxe, and hardware, do).
        tx.retries = ctx.retry_cnt;
        tx.rnrs = ctx.rnr_retry;
    }
    while ctx.tx.started > 0 {
        let Some(slot) = qp.sq.consumer_slot() else {
            break;
        };
        let track = ctx.tx.track[slot_of(qp, 0)];
        let last = psn_add(track.first_psn, track.npkts - 1);
        let covered = psn_diff(last, ctx.tx.una) < 0;
        if track.rd && !track.done {
            if covered {
                // A later packet was acknowledged but this read or atomic got no response:
                // it was lost (an implied NAK). Ask again.
                if retry(dev, qp, ctx, WcStatus::RetryExcErr) {
                    go_back(qp, ctx, track.first_psn);
                }
            }
            break;
        }
        if !covered {
            break;
        }
        let wqe = SendWqe::decode(slot);
        retire_send(dev, qp, &ctx.cq, &wqe, WcStatus::Success, track.len);
        let tx = &mut ctx.tx;
        tx.started -= 1;
        if tx.cur > 0 {
            tx.cur -= 1;
        } else {
            tx.cur_pkt = 0;
        }
    }
    skip_acked(qp, ctx);
}

/// The common case: the only request in flight (in send-ring slot `slot`) was acknowledged
/// (a read: answered) whole. Nothing before it waits, so it completes here without the walk
/// over the requests in flight that [`on_reply`] makes.
#[inline(always)]
pub(super) fn complete_alone(dev: &Device, qp: &Qp, ctx: &mut SqCtx, wqe: &SendWqe, slot: usize) {
    let tx = &mut ctx.tx;
    let track = tx.track[slot];
    if track.rd && !track.done {
        tx.rd_out -= 1;
    }
    tx.started = 0;
    tx.cur = 0;
    tx.cur_pkt = 0;
    retire_acked(
        dev,
        qp,
        ctx,
        wqe,
        psn_add(track.first_psn, track.npkts),
        track.len,
    );
}

/// The request at the head, the only one in flight, was acknowledged whole up to `una`: the
/// retry budgets start again and it completes with `len` bytes. What [`complete_alone`] and
/// the requester's untracked one-packet send share.
#[inline(always)]
pub(super) fn retire_acked(
    dev: &Device,
    qp: &Qp,
    ctx: &mut SqCtx,
    wqe: &SendWqe,
    una: u32,
    len: u32,
) {
    ctx.tx.una = una;
    ctx.tx.retries = ctx.retry_cnt;
    ctx.tx.rnrs = ctx.rnr_retry;
    retire_send(dev, qp, &ctx.cq, wqe, WcStatus::Success, len);
}

/// Acts on the answer to packets of request `i` (from the head); an atomic's original value
/// goes to `atomic_dst`. Returns `false` when the requester must wait (an RNR NAK).
pub(super) fn on_reply(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ctx: &mut SqCtx,
    i: u32,
    atomic_dst: &SegList<'_>,
    reply: Reply,
) -> bool {
    let answered = |ctx: &mut SqCtx| {
        let track = &mut ctx.tx.track[slot_of(qp, i)];
        if !track.done {
            track.done = true;
            ctx.tx.rd_out -= 1;
            // Forward progress even when a later request's ACK already moved `una` past it (a
            // resent read answered): the retry budgets start again, as rxe's completer resets
            // them on every read or atomic response it accepts.
            ctx.tx.retries = ctx.retry_cnt;
            ctx.tx.rnrs = ctx.rnr_retry;
        }
    };
    match reply {
        Reply::Ack(psn) => acked(dev, qp, ctx, psn),
        Reply::ReadResp(last) => {
            answered(ctx);
            acked(dev, qp, ctx, last);
        }
        Reply::AtomicResp(psn, orig) => {
            // The original value lands in the local 8-byte buffer, in host order.
            if Cursor::at(atomic_dst, 0)
                .put(Some(&orig.to_ne_bytes()), None, 8)
                .is_err()
            {
                fail_head(dev, qp, ctx, WcStatus::LocProtErr);
                return true;
            }
            answered(ctx);
            acked(dev, qp, ctx, psn);
        }
        Reply::Rnr(psn, delay) => {
            acked(dev, qp, ctx, psn_add(psn, PSN_MASK));
            if qp.state() == QpState::Error {
                return true;
            }
            if ctx.rnr_retry != 7 {
                if ctx.tx.rnrs == 0 {
                    fail_head(dev, qp, ctx, WcStatus::RnrRetryExcErr);
                    return true;
                }
                ctx.tx.rnrs -= 1;
            }
            go_back(qp, ctx, psn);
            ctx.tx.rnr_until = Some(dev.now_ns().saturating_add(delay));
            return false;
        }
        Reply::NakSeq(epsn) => {
            acked(dev, qp, ctx, psn_add(epsn, PSN_MASK));
            if qp.state() != QpState::Error && retry(dev, qp, ctx, WcStatus::RetryExcErr) {
                go_back(qp, ctx, epsn);
            }
        }
        Reply::Nak(psn, status) => {
            acked(dev, qp, ctx, psn_add(psn, PSN_MASK));
            if qp.state() != QpState::Error {
                fail_head(dev, qp, ctx, status);
            }
        }
        Reply::Lost => {}
    }
    true
}
