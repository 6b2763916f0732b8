//! The responder (rxe's `rxe_resp.c`): takes a burst of a message's packets at the receiving
//! QP under its responder lock — PSN sequence checks, receive WQEs from the RQ or the SRQ,
//! remote access checks against regions and windows, the copies, reads and atomics, the
//! resources that answer duplicates — writes the receive completions and answers the burst.

use alloc::sync::Arc;

use wv_hal::{KArc, QpEvent, QpState, QpType};

use super::requester::run_sq;
use super::segments::{Cursor, Seg, SegList, resolve_recv};
use super::wire::{Grh, Msg, Reply};
use super::{GRH_BYTES, PSN_MASK, psn_add, psn_diff};
use crate::cq::CqPort;
use crate::device::Device;
use crate::dma::AtomicFault;
use crate::mr::Want;
use crate::mr_cache::{MrCache, MrRef};
use crate::mw::is_mw_key;
use crate::qp::{Qp, RespCtx, RespSide, recv_in_place, recv_sge};
use crate::ring::Word;
use crate::srq::Srq;
use crate::wr::{WcOpcode, WcStatus, WorkCompletion, WrOpcode, recv_header, wc_flags};

/// The encoding of the AETH's RNR NAK timer field (IBTA vol. 1) in microseconds: 0 is the
/// longest (655.36 ms).
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// How long a requester waits after an RNR NAK carrying the timer field `code`.
fn rnr_delay_ns(code: u8) -> u64 {
    u64::from(RNR_TIMER_US[usize::from(code & 31)]) * 1_000
}

/// A message being received across packets (in `RespCtx`).
#[derive(Debug, Default)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per QP, in its responder context; boxing would allocate per message"
)]
pub(crate) enum InMsg {
    #[default]
    None,
    /// A send: its receive (taken from the SRQ, or still at the head of the RQ until the
    /// message completes) and the resolved buffers.
    Send { recv: Recv, dst: SegList<'static> },
    /// An RDMA write: the remote range its first packet was granted.
    Write { seg: Option<Seg<'static>> },
    /// UC: the rest of this message is dropped.
    Drop,
}

/// What a responder resource remembers of a read or an atomic.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ResKind {
    Read,
    /// The original value it answered with.
    Atomic(u64),
}

/// A receive WQE taken for a message: all its completion needs once its buffers are resolved.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Recv {
    wr_id: u64,
    /// Taken from the SRQ (already gone from its ring), not at the head of the QP's RQ.
    from_srq: bool,
}

/// [`Responder::remote_range`] through the memory window `rkey` names.
#[inline(never)]
fn window_range(
    dev: &Device,
    qp: &Qp,
    rkey: u32,
    addr: u64,
    len: u64,
    want: Want,
) -> Option<Seg<'static>> {
    let mw = dev.mw_by_key(rkey)?;
    let (mr, off) = mw.check(rkey, qp, qp.pd, addr, len, want).ok()?;
    Some(Seg {
        mr: MrRef::Owned(mr),
        off,
        len,
    })
}

/// [`Responder::take_recv`] from the SRQ `srq` of `qp`: its WQE copied out (its slot is
/// released at once), out of line so that the RQ's path keeps none of that copy's stack.
#[inline(never)]
fn take_srq_recv<'a>(
    srq: &Srq,
    dev: &Device,
    mrs: &'a MrCache,
    qp: &Qp,
    dst: &mut SegList<'a>,
) -> Option<(Recv, Result<(), ()>)> {
    let wqe = srq.take(dev)?;
    let resolved = resolve_recv(dst, dev, mrs, qp, wqe.sges[..wqe.n].iter().copied());
    let recv = Recv {
        wr_id: wqe.wr_id,
        from_srq: true,
    };
    Some((recv, resolved))
}

/// [`resolve_recv`] of the `n` SGEs of the receive WQE in `slot`.
#[inline(never)]
fn resolve_recv_slot<'a>(
    dst: &mut SegList<'a>,
    dev: &Device,
    mrs: &'a MrCache,
    qp: &Qp,
    slot: &[Word],
    n: usize,
) -> Result<(), ()> {
    resolve_recv(dst, dev, mrs, qp, (0..n).map(|i| recv_sge(slot, i)))
}

/// A responder resource: one read or atomic and its PSNs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RdRes {
    first_psn: u32,
    last_psn: u32,
    kind: ResKind,
}

/// What the responder leaves to do once it has dropped its lock.
#[derive(Default)]
struct After {
    comm_est: bool,
    errored: bool,
}

/// Executes packets `[first, first + count)` of `msg` on QP `qp` of device `dev`, then raises
/// the interrupts that caused on the receiving device (with only the requester's `sq_ctx`
/// held, which the data path only ever `try_lock`s, so an inline DPC cannot deadlock against
/// it).
pub(super) fn respond(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    msg: &Msg<'_>,
    first: u32,
    count: u32,
) -> Reply {
    let mut after = After::default();
    let reply = respond_locked(dev, qp, msg, first, count, &mut after);
    if after.comm_est {
        dev.post_qp_event(qp, QpEvent::CommEstablished);
    }
    if after.errored {
        if qp.srq.is_some() {
            dev.post_qp_event(qp, QpEvent::LastWqeReached);
        }
        run_sq(dev, qp);
    }
    dev.deliver_interrupts();
    reply
}

fn respond_locked(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    msg: &Msg<'_>,
    first: u32,
    count: u32,
    after: &mut After,
) -> Reply {
    if dev.is_removed() {
        return Reply::Lost;
    }
    let mut side = qp.resp.lock();
    let RespSide { ctx, mrs } = &mut *side;
    let state = qp.state();
    if !matches!(
        state,
        QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::SqError
    ) || qp.qp_type != msg.qp_type
    {
        return Reply::Lost;
    }
    mrs.validate(dev);
    let mut responder = Responder {
        dev,
        qp,
        ctx,
        mrs,
        msg,
        after,
    };
    let reply = match qp.qp_type {
        QpType::Ud => {
            if msg.qkey == responder.ctx.qkey {
                responder.ud_receive();
            }
            Reply::Lost
        }
        QpType::Uc => {
            if responder.ctx.dest_qpn == msg.src_qpn {
                responder.uc_receive(first, count);
            }
            Reply::Lost
        }
        QpType::Rc if responder.ctx.dest_qpn != msg.src_qpn => Reply::Lost,
        QpType::Rc => responder.rc_receive(first, count, state),
    };
    if after.errored {
        if qp.set_error() {
            flush_rq_locked(dev, qp, ctx);
        } else {
            after.errored = false;
        }
    }
    reply
}

/// Completes every outstanding receive WQE of the QP's own receive queue (and one taken from
/// its SRQ for a message in progress) with `WR_FLUSH_ERR`.
pub(crate) fn flush_rq(dev: &Device, qp: &Qp) {
    flush_rq_locked(dev, qp, &mut qp.resp.lock().ctx);
}

fn flush_rq_locked(dev: &Device, qp: &Qp, ctx: &mut RespCtx) {
    if let InMsg::Send { recv, .. } = core::mem::replace(&mut ctx.msg, InMsg::None)
        && recv.from_srq
    {
        post_recv_error(dev, qp, &ctx.cq, recv.wr_id, WcStatus::WrFlushErr, true);
    }
    if qp.srq.is_some() {
        return;
    }
    while let Some(slot) = qp.rq.consumer_slot() {
        let (wr_id, _) = recv_header(slot);
        qp.rq.consume(1);
        post_recv_error(dev, qp, &ctx.cq, wr_id, WcStatus::WrFlushErr, false);
    }
}

/// Completes the receive WQE `wr_id` of `qp` in error (one taken from its SRQ if `from_srq`).
#[cold]
#[inline(never)]
fn post_recv_error(
    dev: &Device,
    qp: &Qp,
    port: &CqPort,
    wr_id: u64,
    status: WcStatus,
    from_srq: bool,
) {
    let wc = WorkCompletion {
        wr_id,
        status,
        opcode: WcOpcode::Recv,
        qp_num: qp.qpn,
        ..WorkCompletion::default()
    };
    port.post_with(dev, true, |slot| wc.encode_recv(slot, !from_srq));
}

/// Records a read or atomic in the responder resources (the oldest is recycled).
fn record_resource(ctx: &mut RespCtx, first_psn: u32, last_psn: u32, kind: ResKind) {
    let cap = (ctx.max_dest_rd_atomic as usize).clamp(1, ctx.res.len());
    // A ring of `cap` entries, stepped without a division (this runs for every read); a
    // modify may have shrunk `cap` below the next index.
    let at = if ctx.res_next < cap { ctx.res_next } else { 0 };
    ctx.res[at] = Some(RdRes {
        first_psn,
        last_psn,
        kind,
    });
    ctx.res_next = if at + 1 < cap { at + 1 } else { 0 };
}

/// The responder resource of the read or atomic whose PSNs include `psn`.
fn find_resource(ctx: &RespCtx, psn: u32) -> Option<RdRes> {
    let cap = (ctx.max_dest_rd_atomic as usize).clamp(1, ctx.res.len());
    ctx.res[..cap]
        .iter()
        .flatten()
        .copied()
        .find(|res| psn_diff(psn, res.first_psn) >= 0 && psn_diff(psn, res.last_psn) <= 0)
}

/// The GRH a UD receive buffer starts with (IBTA vol. 1, ch. 8): IP version 6, traffic class, flow
/// label, payload length (the packet after the GRH: BTH, DETH, immediate data, payload,
/// ICRC), next header 0x1B (BTH), hop limit, SGID, DGID.
fn grh_bytes(grh: &Grh, msg: &Msg<'_>) -> [u8; GRH_BYTES] {
    let mut bytes = [0u8; GRH_BYTES];
    let word0 = (6u32 << 28) | (u32::from(grh.traffic_class) << 20) | (grh.flow_label & 0xF_FFFF);
    bytes[0..4].copy_from_slice(&word0.to_be_bytes());
    let imm = if msg.op == WrOpcode::SendWithImm {
        4
    } else {
        0
    };
    let paylen = 12 + 8 + imm + msg.len + 4;
    bytes[4..6].copy_from_slice(&(paylen as u16).to_be_bytes());
    bytes[6] = 0x1B;
    bytes[7] = grh.hop_limit;
    bytes[8..24].copy_from_slice(&grh.sgid);
    bytes[24..40].copy_from_slice(&grh.dgid);
    bytes
}

/// The responder of one QP for one burst of packets: the receiving device and QP, the QP's
/// responder context (its lock held), the regions the message may use, the message, and what
/// is left to do once the lock is dropped.
struct Responder<'r, 'm> {
    dev: &'r Device,
    qp: &'r Qp,
    ctx: &'r mut RespCtx,
    mrs: &'r MrCache,
    msg: &'r Msg<'m>,
    after: &'r mut After,
}

impl<'r> Responder<'r, '_> {
    /// The next receive WQE, for a message that puts no bytes in it: taken from the QP's SRQ,
    /// or read at the head of its RQ (consumed when the message completes).
    fn next_recv(&self) -> Option<Recv> {
        match &self.qp.srq {
            Some(srq) => srq.take(self.dev).map(|wqe| Recv {
                wr_id: wqe.wr_id,
                from_srq: true,
            }),
            None => self.qp.rq.consumer_slot().map(|slot| Recv {
                wr_id: recv_header(slot).0,
                from_srq: false,
            }),
        }
    }

    /// The next receive WQE, as [`Responder::next_recv`], with its buffers resolved into `dst`
    /// (an RQ WQE's SGEs read where they lie in the ring) and whether they all resolved.
    #[inline]
    fn take_recv(&self, dst: &mut SegList<'r>) -> Option<(Recv, Result<(), ()>)> {
        let (dev, mrs, qp) = (self.dev, self.mrs, self.qp);
        match &qp.srq {
            Some(srq) => take_srq_recv(srq, dev, mrs, qp, dst),
            None => {
                let slot = qp.rq.consumer_slot()?;
                let (wr_id, n) = recv_in_place(slot, qp.rq_max_sge as usize);
                // One SGE, the common receive, without the loop's setup; any other number
                // out of line.
                let resolved = if n == 1 {
                    resolve_recv(dst, dev, mrs, qp, core::iter::once(recv_sge(slot, 0)))
                } else {
                    resolve_recv_slot(dst, dev, mrs, qp, slot, n)
                };
                let recv = Recv {
                    wr_id,
                    from_srq: false,
                };
                Some((recv, resolved))
            }
        }
    }

    /// A receive WQE is done with: an RQ WQE leaves the ring now (an SRQ one already has).
    fn retire_recv(&self, recv: Recv) {
        if !recv.from_srq {
            self.qp.rq.consume(1);
        }
    }

    /// Completes receive WQE `recv` in error.
    fn recv_error(&self, recv: Recv, status: WcStatus) {
        post_recv_error(
            self.dev,
            self.qp,
            &self.ctx.cq,
            recv.wr_id,
            status,
            recv.from_srq,
        );
    }

    /// A receive WQE names memory the QP may not write: the receive completes with
    /// `LOC_PROT_ERR` and the QP goes to ERR, whatever its type (class A).
    #[cold]
    #[inline(never)]
    fn bad_recv_wqe(&mut self, recv: Recv) {
        self.retire_recv(recv);
        self.recv_error(recv, WcStatus::LocProtErr);
        self.after.errored = true;
    }

    /// Class C: a fatal NAK for `psn`, and the responder goes to ERR.
    fn fatal(&mut self, status: WcStatus, psn: u32) -> Reply {
        self.after.errored = true;
        Reply::Nak(psn, status)
    }

    /// Writes the receive completion of the message into `recv`.
    fn recv_complete(&self, recv: Recv, byte_len: u64, flags: u32) {
        let msg = self.msg;
        let mut flags = flags;
        let mut imm = 0;
        match msg.op {
            WrOpcode::SendWithImm | WrOpcode::RdmaWriteWithImm => {
                flags |= wc_flags::WITH_IMM;
                imm = msg.imm_or_inv;
            }
            WrOpcode::SendWithInv => {
                flags |= wc_flags::WITH_INV;
                imm = msg.imm_or_inv;
            }
            _ => {}
        }
        let opcode = if msg.op == WrOpcode::RdmaWriteWithImm {
            WcOpcode::RecvRdmaWithImm
        } else {
            WcOpcode::Recv
        };
        let (wr_id, qp_num, src_qp, slid) = (recv.wr_id, self.qp.qpn, msg.src_qpn, msg.slid);
        // The CQE says whether the receive took a slot of the QP's own receive queue: the
        // user-mode provider counts those to know, without reading the head the device wrote,
        // how many of its receives may still be in the ring. Every such receive is retired
        // (its slot released) before its CQE is written, so a polled CQE never stands for a
        // slot still in use.
        let took = !recv.from_srq;
        // Built in its slot: the fields left at their defaults are stored as the constants
        // they are.
        self.ctx.cq.post_with(self.dev, msg.solicited, |slot| {
            WorkCompletion {
                wr_id,
                opcode,
                byte_len: byte_len as u32,
                imm_data: imm,
                wc_flags: flags,
                qp_num,
                src_qp,
                slid,
                ..WorkCompletion::default()
            }
            .encode_recv(slot, took);
        });
    }

    /// Checks the message's remote access of `len` bytes at `addr` under `rkey` (a region's
    /// or a window's) for `want`, against the QP's access flags.
    // Inline, with a window's key out of line: a region's is what nearly every RDMA names.
    #[inline]
    fn remote_range(&self, rkey: u32, addr: u64, len: u64, want: Want) -> Option<Seg<'r>> {
        let (dev, qp, mrs) = (self.dev, self.qp, self.mrs);
        if self.ctx.access & want.remote_bit() == 0 {
            return None;
        }
        if is_mw_key(rkey) {
            return window_range(dev, qp, rkey, addr, len, want);
        }
        let mr = mrs.get(dev, rkey)?;
        let off = mr.check(rkey, qp.pd, addr, len, want).ok()?;
        Some(Seg { mr, off, len })
    }

    /// The range an RDMA write or read of the whole message names.
    fn message_range(&self, want: Want) -> Option<Seg<'r>> {
        let msg = self.msg;
        self.remote_range(msg.rkey, msg.remote_addr, msg.len, want)
    }

    /// Invalidates the region or window `key` names on behalf of the QP (`SEND_WITH_INV`).
    fn invalidate_remote(&self, key: u32) -> bool {
        let (dev, pd) = (self.dev, self.qp.pd);
        if is_mw_key(key) {
            dev.mw_by_key(key)
                .is_some_and(|mw| mw.invalidate(key, pd).is_ok())
        } else {
            dev.mr_by_key(key)
                .filter(|mr| mr.pd == pd)
                .is_some_and(|mr| mr.invalidate(key).is_ok())
        }
    }

    /// Executes an RDMA read: the data goes straight into the requester's buffers.
    fn do_read(&self) -> Result<(), WcStatus> {
        let msg = self.msg;
        let Some(dst) = msg.read_dst else {
            return Err(WcStatus::RemInvReqErr);
        };
        if msg.len == 0 {
            return Ok(());
        }
        let seg = self
            .message_range(Want::RemoteRead)
            .ok_or(WcStatus::RemAccessErr)?;
        Cursor::at(dst, 0)
            .put(None, Some((&seg.mr.range, seg.off)), msg.len)
            .map_err(|()| WcStatus::RemOpErr)
    }

    // -----------------------------------------------------------------------------------------
    // UD

    fn ud_receive(&mut self) {
        let msg = self.msg;
        let mut dst = SegList::new();
        let Some((recv, resolved)) = self.take_recv(&mut dst) else {
            return; // Class D: no receive, no message.
        };
        if resolved.is_err() {
            return self.bad_recv_wqe(recv);
        }
        let need = GRH_BYTES as u64 + msg.len;
        if need > dst.total {
            // Too small: dropped (the WQE stays); a WQE taken from an SRQ completes in error.
            if recv.from_srq {
                self.recv_error(recv, WcStatus::RemInvReqErr);
            }
            return;
        }
        let mut flags = 0;
        if let Some(grh) = &msg.grh {
            // Only a sender's global route puts a GRH in the buffer; without one its first 40
            // bytes are left as they were.
            if Cursor::at(&dst, 0)
                .put(Some(&grh_bytes(grh, msg)), None, GRH_BYTES as u64)
                .is_err()
            {
                return self.bad_recv_wqe(recv);
            }
            flags |= wc_flags::GRH;
        }
        if Cursor::at(&dst, GRH_BYTES as u64)
            .put_src(&msg.src, 0, msg.len)
            .is_err()
        {
            return self.bad_recv_wqe(recv);
        }
        self.retire_recv(recv);
        self.recv_complete(recv, need, flags);
    }

    // -----------------------------------------------------------------------------------------
    // UC

    /// A UC message in progress is abandoned (a packet of it was lost): its receive stays for
    /// the next message, or, taken from an SRQ, completes in error (rxe's classes D1 and E).
    fn uc_abandon(&mut self) {
        if let InMsg::Send { recv, .. } = core::mem::replace(&mut self.ctx.msg, InMsg::None)
            && recv.from_srq
        {
            self.recv_error(recv, WcStatus::RemInvReqErr);
        }
    }

    /// Packets `[first, first + count)` of a UC message.
    fn uc_receive(&mut self, first: u32, count: u32) {
        let msg = self.msg;
        let psn = psn_add(msg.first_psn, first);
        if psn != self.ctx.epsn || first == 0 {
            // A gap in the PSNs loses the message in progress; a first packet starts a new one
            // (UC resynchronises on it), a later one is dropped with the rest of its message.
            self.uc_abandon();
            if first != 0 {
                self.ctx.msg = InMsg::Drop;
            }
        }
        self.ctx.epsn = psn_add(psn, count);
        let last = first + count == msg.npkts;
        if first == 0 && !self.uc_start() {
            return;
        }
        let (from, len) = msg.payload(first, count);
        let placed = match &self.ctx.msg {
            InMsg::Send { dst, .. } => Cursor::at(dst, from).put_src(&msg.src, from, len),
            InMsg::Write { seg } => Cursor::over(seg.as_slice(), from).put_src(&msg.src, from, len),
            InMsg::None | InMsg::Drop => return,
        };
        if placed.is_err() {
            self.uc_abandon();
            self.ctx.msg = InMsg::Drop;
            return;
        }
        if !last {
            return;
        }
        match core::mem::replace(&mut self.ctx.msg, InMsg::None) {
            InMsg::Send { recv, .. } => {
                self.retire_recv(recv);
                if msg.op == WrOpcode::SendWithInv && !self.invalidate_remote(msg.imm_or_inv) {
                    self.recv_error(recv, WcStatus::RemInvReqErr);
                    return;
                }
                self.recv_complete(recv, msg.len, 0);
            }
            InMsg::Write { .. } if msg.op == WrOpcode::RdmaWriteWithImm => {
                // The immediate data needs a receive; without one the message is dropped (its
                // bytes are in place, as on hardware).
                if let Some(recv) = self.next_recv() {
                    self.retire_recv(recv);
                    self.recv_complete(recv, msg.len, 0);
                }
            }
            _ => {}
        }
    }

    /// The first packet of a UC message: takes its receive or checks its remote range, and
    /// keeps what the rest of the message needs. Returns whether the message goes on.
    fn uc_start(&mut self) -> bool {
        let msg = self.msg;
        match msg.op {
            WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => {
                let mut dst = SegList::new();
                let Some((recv, resolved)) = self.take_recv(&mut dst) else {
                    self.ctx.msg = InMsg::Drop;
                    return false;
                };
                if resolved.is_err() {
                    self.bad_recv_wqe(recv);
                    return false;
                }
                if msg.len > dst.total {
                    self.ctx.msg = InMsg::Drop;
                    if recv.from_srq {
                        self.recv_error(recv, WcStatus::RemInvReqErr);
                    }
                    return false;
                }
                self.ctx.msg = InMsg::Send {
                    recv,
                    dst: dst.into_owned(),
                };
            }
            WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => {
                let seg = if msg.len == 0 {
                    None
                } else {
                    match self.message_range(Want::RemoteWrite) {
                        Some(seg) => Some(seg.into_owned()),
                        None => {
                            self.ctx.msg = InMsg::Drop;
                            return false;
                        }
                    }
                };
                self.ctx.msg = InMsg::Write { seg };
            }
            _ => {
                self.ctx.msg = InMsg::Drop;
                return false;
            }
        }
        true
    }

    // -----------------------------------------------------------------------------------------
    // RC

    /// Packets `[first, first + count)` of an RC message, on a QP in `state`.
    fn rc_receive(&mut self, first: u32, count: u32, state: QpState) -> Reply {
        let msg = self.msg;
        let psn = psn_add(msg.first_psn, first);
        let ahead = psn_diff(psn, self.ctx.epsn);
        if ahead > 0 {
            // Out of sequence (a packet before it was lost): one NAK per error, then silence
            // until the expected PSN arrives.
            if self.ctx.nak_sent {
                return Reply::Lost;
            }
            self.ctx.nak_sent = true;
            return Reply::NakSeq(self.ctx.epsn);
        }
        let (mut first, mut count) = (first, count);
        if ahead < 0 {
            // A duplicate (its answer was lost), possibly running into new packets.
            let dup = ahead.unsigned_abs();
            if msg.op.is_read_or_atomic() {
                return match find_resource(self.ctx, psn).map(|res| res.kind) {
                    Some(ResKind::Read) => match self.do_read() {
                        Ok(()) => Reply::ReadResp(psn_add(psn, msg.psns - 1)),
                        Err(_) => Reply::Lost,
                    },
                    Some(ResKind::Atomic(orig)) => Reply::AtomicResp(psn, orig),
                    // Not in the resources any more (class D): dropped.
                    None => Reply::Lost,
                };
            }
            if dup >= count {
                return Reply::Ack(psn_add(self.ctx.epsn, PSN_MASK));
            }
            first += dup;
            count -= dup;
        }
        self.ctx.nak_sent = false;
        if state == QpState::Rtr && !self.ctx.comm_est {
            self.ctx.comm_est = true;
            self.after.comm_est = true;
        }
        match msg.op {
            WrOpcode::RdmaRead | WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
                self.rc_read_or_atomic(psn_add(msg.first_psn, first))
            }
            WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => {
                self.rc_send(first, count)
            }
            WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => self.rc_write(first, count),
            _ => self.fatal(WcStatus::RemInvReqErr, psn_add(msg.first_psn, first)),
        }
    }

    /// A new RDMA read or atomic of PSN `psn`: executed and recorded in the resources.
    fn rc_read_or_atomic(&mut self, psn: u32) -> Reply {
        let msg = self.msg;
        if self.ctx.max_dest_rd_atomic == 0 {
            // No responder resources (rxe's "too many RDMA READ/ATOMIC requests").
            return self.fatal(WcStatus::RemInvReqErr, psn);
        }
        if msg.op == WrOpcode::RdmaRead {
            if let Err(status) = self.do_read() {
                return self.fatal(status, psn);
            }
            let last = psn_add(psn, msg.psns - 1);
            record_resource(self.ctx, psn, last, ResKind::Read);
            self.ctx.epsn = psn_add(psn, msg.psns);
            return Reply::ReadResp(last);
        }
        let Some(seg) = self.remote_range(msg.rkey, msg.remote_addr, 8, Want::RemoteAtomic) else {
            return self.fatal(WcStatus::RemAccessErr, psn);
        };
        let args = msg.atomic;
        let result = if msg.op == WrOpcode::AtomicCmpAndSwp {
            seg.mr
                .range
                .compare_swap(seg.off, args.compare_add, args.swap)
        } else {
            seg.mr.range.fetch_add(seg.off, args.compare_add)
        };
        let orig = match result {
            Ok(value) => value,
            // A misaligned atomic is an invalid request (rxe's class C).
            Err(AtomicFault::Misaligned) => return self.fatal(WcStatus::RemInvReqErr, psn),
            Err(AtomicFault::OutOfBounds) => return self.fatal(WcStatus::RemAccessErr, psn),
        };
        record_resource(self.ctx, psn, psn, ResKind::Atomic(orig));
        self.ctx.epsn = psn_add(psn, 1);
        Reply::AtomicResp(psn, orig)
    }

    /// Packets `[first, first + count)` of a send, in sequence.
    fn rc_send(&mut self, first: u32, count: u32) -> Reply {
        let msg = self.msg;
        let psn = psn_add(msg.first_psn, first);
        let last_psn = psn_add(psn, count - 1);
        let last = first + count == msg.npkts;
        let (from, len) = msg.payload(first, count);
        if first == 0 {
            // The first packet takes the receive and resolves its buffers (in place; kept in
            // the context only while the message spans several bursts).
            let mut dst = SegList::new();
            let Some((recv, resolved)) = self.take_recv(&mut dst) else {
                return Reply::Rnr(psn, rnr_delay_ns(self.ctx.min_rnr_timer));
            };
            if resolved.is_err() {
                self.bad_recv_wqe(recv);
                return Reply::Nak(psn, WcStatus::RemOpErr);
            }
            if msg.len > dst.total {
                self.retire_recv(recv);
                self.recv_error(recv, WcStatus::LocLenErr);
                return self.fatal(WcStatus::RemInvReqErr, psn);
            }
            if Cursor::at(&dst, from).put_src(&msg.src, from, len).is_err() {
                self.bad_recv_wqe(recv);
                return Reply::Nak(psn, WcStatus::RemOpErr);
            }
            self.ctx.epsn = psn_add(psn, count);
            if !last {
                self.ctx.msg = InMsg::Send {
                    recv,
                    dst: dst.into_owned(),
                };
                return Reply::Ack(last_psn);
            }
            return self.send_done(recv, last_psn);
        }
        let InMsg::Send { recv, dst } = &self.ctx.msg else {
            // A later packet without its first (cannot happen in sequence).
            return self.fatal(WcStatus::RemInvReqErr, psn);
        };
        let recv = *recv;
        if Cursor::at(dst, from).put_src(&msg.src, from, len).is_err() {
            self.ctx.msg = InMsg::None;
            self.bad_recv_wqe(recv);
            return Reply::Nak(psn, WcStatus::RemOpErr);
        }
        self.ctx.epsn = psn_add(psn, count);
        if !last {
            return Reply::Ack(last_psn);
        }
        self.ctx.msg = InMsg::None;
        self.send_done(recv, last_psn)
    }

    /// The last packet of a send arrived: its receive completes (after the invalidation a
    /// `SEND_WITH_INV` asks for).
    fn send_done(&mut self, recv: Recv, last_psn: u32) -> Reply {
        let msg = self.msg;
        self.retire_recv(recv);
        if msg.op == WrOpcode::SendWithInv && !self.invalidate_remote(msg.imm_or_inv) {
            // Class J: the receive completes in error, the responder goes to ERR.
            self.recv_error(recv, WcStatus::RemInvReqErr);
            return self.fatal(WcStatus::RemInvReqErr, last_psn);
        }
        self.recv_complete(recv, msg.len, 0);
        Reply::Ack(last_psn)
    }

    /// Packets `[first, first + count)` of an RDMA write, in sequence.
    fn rc_write(&mut self, first: u32, count: u32) -> Reply {
        let msg = self.msg;
        let psn = psn_add(msg.first_psn, first);
        let last_psn = psn_add(psn, count - 1);
        let last = first + count == msg.npkts;
        // The remote range is checked at the first packet (its RETH carries the whole
        // length) and kept in the context while the message spans several bursts.
        let seg = if first == 0 {
            if msg.len == 0 {
                None
            } else {
                match self.message_range(Want::RemoteWrite) {
                    Some(seg) => Some(seg),
                    None => return self.fatal(WcStatus::RemAccessErr, psn),
                }
            }
        } else {
            match core::mem::replace(&mut self.ctx.msg, InMsg::None) {
                InMsg::Write { seg } => seg,
                _ => return self.fatal(WcStatus::RemInvReqErr, psn),
            }
        };
        // With immediate data the last packet needs a receive: without one, everything
        // before it is taken and it gets an RNR NAK.
        let mut count = count;
        let mut recv = None;
        if last && msg.op == WrOpcode::RdmaWriteWithImm {
            match self.next_recv() {
                Some(wqe) => recv = Some(wqe),
                None => count -= 1,
            }
        }
        let (from, len) = msg.payload(first, count);
        if len > 0
            && Cursor::over(seg.as_slice(), from)
                .put_src(&msg.src, from, len)
                .is_err()
        {
            return self.fatal(WcStatus::RemOpErr, psn);
        }
        self.ctx.epsn = psn_add(psn, count);
        if !last || recv.is_none() && msg.op == WrOpcode::RdmaWriteWithImm {
            self.ctx.msg = InMsg::Write {
                seg: seg.map(Seg::into_owned),
            };
            if last {
                return Reply::Rnr(psn_add(psn, count), rnr_delay_ns(self.ctx.min_rnr_timer));
            }
            return Reply::Ack(last_psn);
        }
        if let Some(recv) = recv {
            self.retire_recv(recv);
            self.recv_complete(recv, msg.len, 0);
        }
        Reply::Ack(last_psn)
    }
}
