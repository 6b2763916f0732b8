//! The requester (rxe's `rxe_req.c`): walks the send queue in the doorbell caller's thread
//! (or the QP timer's DPC), runs local operations, resolves each request's buffers and its
//! destination, and hands the message's packets to the link and the target's responder —
//! UC and UD fire and forget, RC keeps what it sent for the completer.

use alloc::sync::Arc;

use wv_hal::{Gid, KArc, QpEvent, QpState, QpType};

use super::completer::{
    Deadlines, check_deadlines, complete_alone, enter_error, fail_at, flush_sq, on_reply,
    retire_acked, retire_send, slot_of, sync_timer,
};
use super::responder::respond;
use super::segments::{SegList, Src, resolve_into};
use super::wire::{Grh, Msg, Reply, fates};
use super::{MAX_INLINE, psn_add};
use crate::device::{Device, PORT_MTU};
use crate::fabric::Fate;
use crate::mr::Want;
use crate::mr_cache::MrCache;
use crate::mw::is_mw_key;
use crate::qp::{MAX_SGE, Qp, SqCtx, SqRefs, SqSide, Track};
use crate::ring::Word;
use crate::wr::{
    AtomicArgs, SQ_HDR_WORDS, SendWqe, WcStatus, WrOpcode, inline_len, inline_prefix, send_flags,
    sge_at,
};

/// Schedules the send queue of `qp` and runs it in this thread unless another thread is
/// already running it (that thread then runs the new work too): see [`crate::sched`].
pub(crate) fn run_sq(dev: &Arc<Device>, qp: &KArc<Qp>) {
    crate::sched::schedule(&qp.sq_pending, || {
        let mut side = qp.sq_ctx.try_lock()?;
        let SqSide { ctx, refs } = &mut *side;
        process_sq(dev, qp, ctx, refs);
        Some(())
    });
}

fn process_sq(dev: &Arc<Device>, qp: &KArc<Qp>, ctx: &mut SqCtx, refs: &mut SqRefs) {
    loop {
        if dev.is_removed() {
            return;
        }
        let state = qp.state();
        match state {
            QpState::Error | QpState::SqError => {
                flush_sq(dev, qp, ctx);
                break;
            }
            QpState::Rts | QpState::Sqd => {}
            _ => return,
        }
        let more = if qp.qp_type == QpType::Rc {
            rc_step(dev, qp, ctx, refs, state)
        } else {
            unreliable_step(dev, qp, ctx, refs, state)
        };
        if !more {
            break;
        }
    }
    sync_timer(dev, qp, ctx);
    if ctx.draining && ctx.tx.started == 0 && qp.state() == QpState::Sqd {
        ctx.draining = false;
        if ctx.drain_notify {
            dev.post_qp_event(qp, QpEvent::SqDrained);
        }
    }
}

/// Whether the opcode may be posted on a QP of this type (the `EINVAL` check of post_send).
pub(crate) fn opcode_valid(op: WrOpcode, qp_type: QpType) -> bool {
    match qp_type {
        QpType::Ud => matches!(op, WrOpcode::Send | WrOpcode::SendWithImm),
        QpType::Uc => !op.is_read_or_atomic(),
        QpType::Rc => true,
    }
}

/// A send WQE the requester works on: its decoded header, its ring slot (where the SGEs and
/// inline data are read), its opcode, and whether that is a read or an atomic (asked once: the
/// answer steers every step of the request).
struct Request<'s> {
    wqe: &'s SendWqe,
    slot: &'s [Word],
    op: WrOpcode,
    rd: bool,
}

/// Executes a local operation (no packet): invalidation, fast registration, window binding.
/// `wqe` is decoded from `slot`.
fn local_op(dev: &Device, qp: &KArc<Qp>, wqe: &SendWqe, slot: &[Word], op: WrOpcode) -> WcStatus {
    match op {
        WrOpcode::LocalInv => {
            let key = wqe.imm_or_inv;
            let ok = if is_mw_key(key) {
                dev.mw_by_key(key)
                    .is_some_and(|mw| mw.invalidate(key, qp.pd).is_ok())
            } else {
                dev.mr_by_key(key)
                    .filter(|mr| mr.pd == qp.pd)
                    .is_some_and(|mr| mr.invalidate(key).is_ok())
            };
            if ok {
                WcStatus::Success
            } else {
                WcStatus::LocQpOpErr
            }
        }
        WrOpcode::RegMr => {
            let reg = wqe.reg(slot);
            let ok = dev
                .mr_by_key(reg.mr_key)
                .filter(|mr| mr.pd == qp.pd)
                .is_some_and(|mr| {
                    mr.fast_register(
                        reg.mr_key,
                        reg.new_key_byte,
                        reg.access,
                        reg.iova,
                        reg.length,
                    )
                    .is_ok()
                });
            if ok {
                WcStatus::Success
            } else {
                WcStatus::LocQpOpErr
            }
        }
        WrOpcode::BindMw => {
            let (bind, by_verb) = wqe.bind(slot);
            let Some(mw) = dev.mw_by_key(bind.mw_rkey) else {
                return WcStatus::MwBindErr;
            };
            let mr = if bind.length == 0 {
                None
            } else {
                dev.mr_by_key(bind.mr_lkey)
            };
            match mw.bind(qp, qp.pd, mr, &bind, by_verb) {
                Ok(()) => WcStatus::Success,
                Err(_) => WcStatus::MwBindErr,
            }
        }
        _ => WcStatus::LocQpOpErr,
    }
}

/// An empty list (the scatter list of an inline payload).
const EMPTY_LIST: &SegList<'static> = &SegList::new();

/// Where the buffers of a request are resolved: in the caller's frame, filled only as far as
/// the request needs (a list for SGEs, a copy of an inline payload), so nothing large is
/// initialised or moved for nothing. A short inline payload gets a short buffer: clearing
/// all `MAX_INLINE` bytes for it cost a 2-byte inline send 14 more instructions.
#[derive(Default)]
struct LocalStore<'c> {
    list: Option<SegList<'c>>,
    short: Option<[u8; SHORT_INLINE]>,
    inline: Option<[u8; MAX_INLINE]>,
}

/// The largest inline payload copied into [`LocalStore::short`].
const SHORT_INLINE: usize = 32;

/// The local side of a request: its buffers resolved and its payload source.
struct Local<'s> {
    /// The resolved gather (or, for a read or atomic, scatter) list; none for an inline
    /// payload.
    list: Option<&'s SegList<'s>>,
    /// The inline payload, copied out of the WQE.
    inline: &'s [u8],
}

impl<'s> Local<'s> {
    /// Resolves the request's buffers into `store`: what a send or write carries, where a
    /// read's data or an atomic's original value goes. Errors are the completion status.
    fn new<'c: 's>(
        store: &'s mut LocalStore<'c>,
        dev: &Device,
        mrs: &'c MrCache,
        qp: &Qp,
        req: &Request<'_>,
    ) -> Result<Self, WcStatus> {
        let (wqe, slot, op) = (req.wqe, req.slot, req.op);
        if wqe.flags & send_flags::INLINE != 0 && !req.rd {
            let n = inline_len(slot, wqe.inline_len).min(MAX_INLINE);
            let inline = if n <= SHORT_INLINE {
                inline_prefix(slot, n, store.short.insert([0u8; SHORT_INLINE]))
            } else {
                inline_prefix(slot, n, store.inline.insert([0u8; MAX_INLINE]))
            };
            return Ok(Local { list: None, inline });
        }
        let want = if req.rd {
            Want::LocalWrite
        } else {
            Want::LocalRead
        };
        let n = wqe.num_sge.min(qp.sq_max_sge as usize).min(MAX_SGE);
        let list = store.list.insert(SegList::new());
        // One SGE is what nearly every request has: read without the general loop's count.
        let resolved = if n == 1 {
            let sge = sge_at(slot, SQ_HDR_WORDS, 0);
            resolve_into(list, dev, mrs, qp.pd, core::iter::once(sge), want)
        } else {
            resolve_sges(list, dev, mrs, qp.pd, slot, n, want)
        };
        resolved.map_err(|()| WcStatus::LocProtErr)?;
        if op.is_atomic() && list.total != 8 {
            return Err(WcStatus::LocLenErr);
        }
        Ok(Local {
            list: Some(list),
            inline: &[],
        })
    }
    /// The resolved list (empty for an inline payload).
    fn list(&self) -> &'s SegList<'s> {
        self.list.unwrap_or(EMPTY_LIST)
    }
    /// What the request carries (`rd`: it is a read or an atomic, and carries nothing).
    fn src(&self, rd: bool) -> Src<'s> {
        if rd {
            Src::Bytes(&[])
        } else if let Some(list) = self.list {
            Src::Segs(list)
        } else {
            Src::Bytes(self.inline)
        }
    }
    /// The message length: what is sent, or what a read asks for.
    fn len(&self, op: WrOpcode, rd: bool) -> u64 {
        if !rd {
            self.src(false).len()
        } else if op == WrOpcode::RdmaRead {
            self.list().total
        } else {
            8
        }
    }
}

/// The first `n` SGEs of send WQE `slot` resolved into `list` (any number but one: see
/// [`Local::new`]).
#[inline(never)]
fn resolve_sges<'a>(
    list: &mut SegList<'a>,
    dev: &Device,
    mrs: &'a MrCache,
    pd: u32,
    slot: &[Word],
    n: usize,
    want: Want,
) -> Result<(), ()> {
    resolve_into(
        list,
        dev,
        mrs,
        pd,
        (0..n).map(|i| sge_at(slot, SQ_HDR_WORDS, i)),
        want,
    )
}

/// Where a request goes: the device, the QP and its port, resolved once and kept (strong
/// references) while the device's QP epoch is the one read before the lookup.
pub(crate) struct Target {
    dev: Arc<Device>,
    qp: KArc<Qp>,
    port: u8,
    epoch: u32,
}

impl core::fmt::Debug for Target {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Target")
            .field("qpn", &self.qp.qpn)
            .field("port", &self.port)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

impl Target {
    /// Whether no QP of the target's device was destroyed since it was resolved.
    fn current(&self) -> bool {
        self.dev.qp_epoch() == self.epoch
    }
}

/// A UD destination as a WQE names it (the key of the requester's last-destination cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UdDest {
    grh: bool,
    dgid: Gid,
    dlid: u16,
    qpn: u32,
}

fn resolve_target(dev: &Arc<Device>, grh: bool, dgid: &Gid, dlid: u16, qpn: u32) -> Option<Target> {
    let target_dev = dev.route(grh, dgid, dlid)?;
    // Read before the lookup: a destroy after it moves the epoch, so the target is looked up
    // again; a destroy before it is seen by the lookup.
    let epoch = target_dev.qp_epoch();
    let port = target_dev.port_of(grh, dgid, dlid)?;
    let qp = target_dev.qp_by_qpn(qpn)?;
    Some(Target {
        dev: target_dev,
        qp,
        port,
        epoch,
    })
}

/// A new message that takes a receive reads the connected peer's receive queue (its tail and
/// its next WQE), lines the peer's owner wrote on its own processor when it posted the
/// receive: asked for as soon as the request is decoded, they cross while it is resolved and
/// sent rather than after.
#[inline]
fn prefetch_receive(peer: Option<&Target>) {
    if let Some(peer) = peer
        && peer.qp.srq.is_none()
    {
        peer.qp.rq.prefetch_consumer();
    }
}

/// The connected peer of a UC or RC requester: the cached one while current, else resolved
/// (and cached). The check is inline; the resolution, which runs after a connect or once the
/// peer's epoch moves, is out of line.
#[inline]
fn connected_peer<'r>(
    dev: &Arc<Device>,
    ctx: &SqCtx,
    peer: &'r mut Option<Target>,
) -> Option<&'r Target> {
    if !peer.as_ref().is_some_and(Target::current) {
        *peer = resolve_connected(dev, ctx);
    }
    peer.as_ref()
}

#[cold]
fn resolve_connected(dev: &Arc<Device>, ctx: &SqCtx) -> Option<Target> {
    resolve_target(
        dev,
        ctx.av.grh_valid,
        &ctx.av.dgid,
        ctx.av.dlid,
        ctx.dest_qpn,
    )
}

/// The target of a UD send: the cached one when it is the same destination and current, else
/// resolved (and cached).
fn ud_target<'r>(
    dev: &Arc<Device>,
    cached: &'r mut Option<(UdDest, Target)>,
    dest: UdDest,
) -> Option<&'r Target> {
    if !matches!(cached, Some((d, target)) if *d == dest && target.current()) {
        *cached = resolve_target(dev, dest.grh, &dest.dgid, dest.dlid, dest.qpn)
            .map(|target| (dest, target));
    }
    cached.as_ref().map(|(_, target)| target)
}

// ---------------------------------------------------------------------------------------------
// UC and UD

// Out of line: the RC requester's run, the common one, then spans fewer instruction-cache
// lines (with both in one body its hot lines lay more than 4 KiB apart, in the same sets).
#[inline(never)]
fn unreliable_step(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ctx: &mut SqCtx,
    refs: &mut SqRefs,
    state: QpState,
) -> bool {
    if state == QpState::Sqd {
        // Nothing is ever in flight: the queue is drained, new requests wait for RTS.
        return false;
    }
    let Some(slot) = qp.sq.consumer_slot() else {
        return false;
    };
    let wqe = SendWqe::decode(slot);
    let (status, len) = match WrOpcode::from_u8(wqe.opcode) {
        Some(op) if opcode_valid(op, qp.qp_type) => {
            if op.is_local() {
                (local_op(dev, qp, &wqe, slot, op), 0)
            } else {
                let req = Request {
                    wqe: &wqe,
                    slot,
                    op,
                    rd: op.is_read_or_atomic(),
                };
                send_unreliable(dev, qp, ctx, refs, &req)
            }
        }
        _ => (WcStatus::LocQpOpErr, 0),
    };
    retire_send(dev, qp, &ctx.cq, &wqe, status, len);
    if status != WcStatus::Success {
        // IB: a UD or UC send error is a send queue error; the receive side goes on.
        qp.set_sq_error();
    }
    true
}

fn send_unreliable(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ctx: &mut SqCtx,
    refs: &mut SqRefs,
    req: &Request<'_>,
) -> (WcStatus, u32) {
    let (wqe, op) = (req.wqe, req.op);
    refs.mrs.validate(dev);
    let mut store = LocalStore::default();
    let local = match Local::new(&mut store, dev, &refs.mrs, qp, req) {
        Ok(local) => local,
        Err(status) => return (status, 0),
    };
    let len = local.len(op, req.rd);
    let ud = qp.qp_type == QpType::Ud;
    let mtu = u64::from(if ud { PORT_MTU } else { ctx.mtu }.bytes());
    if len > u64::from(dev.limits().max_msg) || (ud && len > mtu) {
        return (WcStatus::LocLenErr, 0);
    }
    let npkts = len.div_ceil(mtu).max(1) as u32;
    let port = ctx.av.port.max(1);
    let mut msg = Msg {
        qp_type: qp.qp_type,
        op,
        src_qpn: qp.qpn,
        first_psn: ctx.psn,
        npkts,
        psns: npkts,
        mtu,
        len,
        src: local.src(req.rd),
        remote_addr: wqe.remote_addr,
        rkey: wqe.rkey,
        imm_or_inv: wqe.imm_or_inv,
        solicited: wqe.flags & send_flags::SOLICITED != 0,
        atomic: AtomicArgs::default(),
        qkey: 0,
        grh: None,
        slid: dev.lid(port),
        read_dst: None,
    };
    ctx.psn = psn_add(ctx.psn, npkts);
    if !dev.port_up(port) {
        // The packets go nowhere; an unreliable sender does not know.
        return (WcStatus::Success, len as u32);
    }
    let target = if ud {
        let addr = wqe.ud(req.slot);
        msg.qkey = if addr.remote_qkey & 0x8000_0000 != 0 {
            ctx.qkey
        } else {
            addr.remote_qkey
        };
        if addr.grh {
            let Some(sgid) = dev.sgid(port, addr.sgid_index) else {
                return (WcStatus::LocQpOpErr, 0);
            };
            msg.grh = Some(Grh {
                sgid,
                dgid: addr.dgid,
                hop_limit: addr.hop_limit,
                traffic_class: addr.traffic_class,
                flow_label: addr.flow_label,
            });
            if addr.dgid[0] == 0xFF {
                deliver_multicast(dev, &msg, &addr.dgid, &mut ctx.delivered);
                return (WcStatus::Success, len as u32);
            }
        }
        let dest = UdDest {
            grh: addr.grh,
            dgid: addr.dgid,
            dlid: addr.dlid,
            qpn: addr.remote_qpn,
        };
        ud_target(dev, &mut refs.ud_peer, dest)
    } else {
        connected_peer(dev, ctx, &mut refs.peer)
    };
    if let Some(target) = target {
        let mut sent = 0;
        while sent < npkts {
            let (arrive, fate) = fates(
                dev,
                &target.dev,
                target.port,
                npkts - sent,
                &mut ctx.delivered,
            );
            if arrive > 0 {
                respond(&target.dev, &target.qp, &msg, sent, arrive);
                sent += arrive;
            }
            match fate {
                // Unreliable: a late packet is as good as a timely one.
                Some(Fate::Delay) => {
                    respond(&target.dev, &target.qp, &msg, sent, 1);
                    sent += 1;
                }
                Some(_) => sent += 1,
                None => {}
            }
        }
    }
    (WcStatus::Success, len as u32)
}

/// A UD send to a multicast GID: a copy to every attached QP whose port is up, on this device
/// (loopback) and on every device of the fabric, each remote device's copy subject to the link.
fn deliver_multicast(dev: &Arc<Device>, msg: &Msg<'_>, group: &Gid, delivered: &mut u64) {
    let mut visit = |member_dev: &Arc<Device>| {
        let arrives = Arc::ptr_eq(member_dev, dev)
            || dev.fabric().is_some_and(|fabric| {
                matches!(fabric.fate_from(delivered), Fate::Deliver | Fate::Delay)
            });
        if !arrives {
            return;
        }
        let members = member_dev.mcast.read();
        for (gid, qpn) in members.iter() {
            if gid == group
                && let Some(member) = member_dev.qp_by_qpn(*qpn)
                && member_dev.port_up(member.port())
            {
                respond(member_dev, &member, msg, 0, 1);
            }
        }
    };
    match dev.fabric() {
        Some(fabric) => fabric.for_each(visit),
        None => visit(dev),
    }
}

// ---------------------------------------------------------------------------------------------
// RC

/// One step of the RC requester: (re)send what can be sent next. Returns whether to go on.
fn rc_step(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ctx: &mut SqCtx,
    refs: &mut SqRefs,
    state: QpState,
) -> bool {
    if ctx.tx.rnr_until.is_some() || ctx.tx.ack_due.is_some() {
        match check_deadlines(dev, qp, ctx) {
            Deadlines::Send => {}
            Deadlines::Wait => return false,
            Deadlines::Failed => return true,
        }
    }
    let cur = ctx.tx.cur;
    let Some(slot) = qp.sq.consumer_slot_at(cur) else {
        return false;
    };
    let new = cur == ctx.tx.started;
    if new && state == QpState::Sqd {
        return false;
    }
    let wqe = SendWqe::decode(slot);
    let Some(op) = WrOpcode::from_u8(wqe.opcode) else {
        return fail_at(dev, qp, ctx, cur, WcStatus::LocQpOpErr);
    };
    if new && op.takes_receive() {
        prefetch_receive(refs.peer.as_ref());
    }
    if op.is_local() {
        // Local operations run when everything before them has completed.
        if ctx.tx.started > 0 {
            return false;
        }
        let status = local_op(dev, qp, &wqe, slot, op);
        retire_send(dev, qp, &ctx.cq, &wqe, status, 0);
        if status != WcStatus::Success && qp.set_error() {
            enter_error(dev, qp);
        }
        return true;
    }
    let rd = op.is_read_or_atomic();
    if new {
        if rd && ctx.tx.rd_out >= ctx.max_rd_atomic.max(1) {
            return false;
        }
        if wqe.flags & send_flags::FENCE != 0 && ctx.tx.rd_out > 0 {
            return false;
        }
    }
    let req = Request {
        wqe: &wqe,
        slot,
        op,
        rd,
    };
    rc_send(dev, qp, ctx, refs, &req, new)
}

/// Resolves the buffers of request `i = ctx.tx.cur` and (re)sends its packets. A new request
/// of one packet with nothing in flight before it (on a lossless link, every request that is
/// not a read or an atomic and fits the MTU) takes [`send_alone`]; everything else
/// [`rc_send_packets`]. Returns whether to go on.
fn rc_send(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ctx: &mut SqCtx,
    refs: &mut SqRefs,
    req: &Request<'_>,
    new: bool,
) -> bool {
    let i = ctx.tx.cur;
    refs.mrs.validate(dev);
    let mut store = LocalStore::default();
    let local = match Local::new(&mut store, dev, &refs.mrs, qp, req) {
        Ok(local) => local,
        Err(status) => return fail_at(dev, qp, ctx, i, status),
    };
    let len = local.len(req.op, req.rd);
    if len > u64::from(dev.limits().max_msg) {
        return fail_at(dev, qp, ctx, i, WcStatus::LocLenErr);
    }
    let mtu = u64::from(ctx.mtu.bytes());
    let ready = Ready {
        req,
        local: &local,
        len,
        mtu,
    };
    if new && !req.rd && len <= mtu && ctx.tx.started == 0 && ctx.tx.cur_pkt == 0 {
        send_alone(dev, qp, &ready, ctx, &mut refs.peer)
    } else {
        rc_send_packets(dev, qp, ctx, &mut refs.peer, &ready, new)
    }
}

/// An RC request with its buffers resolved: its message length and the path MTU.
struct Ready<'r, 'l> {
    req: &'r Request<'r>,
    local: &'r Local<'l>,
    len: u64,
    mtu: u64,
}

/// Sends request 0, new, of one packet and not a read or an atomic, with nothing in flight.
/// What [`rc_send_packets`] does for it, with the tracking a request in flight needs written
/// only when it stays in flight: when the whole ACK comes back at once (the common case),
/// nothing is tracked and it completes here, leaving the state [`complete_alone`] would.
#[inline(always)]
fn send_alone(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ready: &Ready<'_, '_>,
    ctx: &mut SqCtx,
    peer: &mut Option<Target>,
) -> bool {
    let len = ready.len;
    let first_psn = ctx.psn;
    let port = ctx.av.port.max(1);
    let target = connected_peer(dev, ctx, peer);
    let msg = rc_msg(dev, qp, ready, (first_psn, 1, 1), port, false);
    let (arrive, fate) = match target {
        Some(target) if dev.port_up(port) => {
            fates(dev, &target.dev, target.port, 1, &mut ctx.delivered)
        }
        _ => (0, Some(Fate::Drop)),
    };
    if arrive > 0
        && let Some(target) = target
    {
        let reply = respond(&target.dev, &target.qp, &msg, 0, 1);
        if reply != Reply::Ack(first_psn) {
            return alone_answered(dev, qp, ctx, ready.local.list(), len, reply);
        }
        // `started`, `cur` and `cur_pkt` stay 0.
        let next = psn_add(first_psn, 1);
        ctx.psn = next;
        retire_acked(dev, qp, ctx, ready.req.wqe, next, len as u32);
        return true;
    }
    alone_lost(qp, ctx, target, &msg, fate, len)
}

/// The message of RC request `ready` from port `port`: `(first_psn, npkts, psns)` say its
/// packets and the PSNs they take (see [`Msg`]). `rd` is the request's own (a constant
/// `false` where the caller knows it, so that what only reads and atomics need is not built).
#[inline(always)]
fn rc_msg<'a>(
    dev: &Device,
    qp: &Qp,
    ready: &Ready<'_, 'a>,
    (first_psn, npkts, psns): (u32, u32, u32),
    port: u8,
    rd: bool,
) -> Msg<'a> {
    let (req, local) = (ready.req, ready.local);
    let wqe = req.wqe;
    Msg {
        qp_type: QpType::Rc,
        op: req.op,
        src_qpn: qp.qpn,
        first_psn,
        npkts,
        psns,
        mtu: ready.mtu,
        len: ready.len,
        src: local.src(rd),
        remote_addr: wqe.remote_addr,
        rkey: wqe.rkey,
        imm_or_inv: wqe.imm_or_inv,
        solicited: wqe.flags & send_flags::SOLICITED != 0,
        atomic: if rd && req.op.is_atomic() {
            wqe.atomic(req.slot)
        } else {
            AtomicArgs::default()
        },
        qkey: 0,
        grh: None,
        slid: dev.lid(port),
        read_dst: rd.then_some(local.list()),
    }
}

/// [`send_alone`]'s request stays in flight: tracked as [`rc_send_packets`] tracks it.
fn track_alone(qp: &Qp, ctx: &mut SqCtx, len: u64) {
    let first_psn = ctx.psn;
    ctx.tx.track[slot_of(qp, 0)] = Track {
        first_psn,
        npkts: 1,
        len: len as u32,
        rd: false,
        done: false,
    };
    ctx.psn = psn_add(first_psn, 1);
    ctx.tx.started = 1;
}

/// [`send_alone`]'s packet arrived and the answer is not the ACK of it: what
/// [`rc_send_packets`] does with that answer.
#[cold]
#[inline(never)]
fn alone_answered(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ctx: &mut SqCtx,
    list: &SegList<'_>,
    len: u64,
    reply: Reply,
) -> bool {
    track_alone(qp, ctx, len);
    ctx.tx.cur_pkt = 1;
    if reply == Reply::Lost {
        ctx.tx.cur += 1;
        ctx.tx.cur_pkt = 0;
        return true;
    }
    on_reply(dev, qp, ctx, 0, list, reply)
}

/// [`send_alone`]'s packet did not arrive (lost, or late: acted on, its answer too late): it is
/// on the wire, as [`rc_send_packets`] leaves it, for a retry to send again.
#[cold]
#[inline(never)]
fn alone_lost(
    qp: &Qp,
    ctx: &mut SqCtx,
    target: Option<&Target>,
    msg: &Msg<'_>,
    fate: Option<Fate>,
    len: u64,
) -> bool {
    track_alone(qp, ctx, len);
    if fate == Some(Fate::Delay)
        && let Some(target) = target
    {
        let _ = respond(&target.dev, &target.qp, msg, 0, 1);
    }
    ctx.tx.cur += 1;
    ctx.tx.cur_pkt = 0;
    true
}

/// (Re)sends the packets of request `i = ctx.tx.cur` from `ctx.tx.cur_pkt` on: in bursts
/// while the link delivers, packet by packet around a loss. Returns whether to go on. Out of
/// line: on a lossless link only reads, atomics and messages longer than the MTU come here.
#[inline(never)]
fn rc_send_packets(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ctx: &mut SqCtx,
    peer: &mut Option<Target>,
    ready: &Ready<'_, '_>,
    new: bool,
) -> bool {
    let Ready {
        req,
        local,
        len,
        mtu,
    } = *ready;
    let (wqe, op, read_or_atomic) = (req.wqe, req.op, req.rd);
    let i = ctx.tx.cur;
    let data_pkts = len.div_ceil(mtu).max(1) as u32;
    let (npkts, psns) = match op {
        WrOpcode::RdmaRead => (1, data_pkts),
        _ if read_or_atomic => (1, 1),
        _ => (data_pkts, data_pkts),
    };
    let track_slot = slot_of(qp, i);
    if new {
        ctx.tx.track[track_slot] = Track {
            first_psn: ctx.psn,
            npkts: psns,
            len: len as u32,
            rd: read_or_atomic,
            done: false,
        };
        ctx.psn = psn_add(ctx.psn, psns);
        ctx.tx.started += 1;
        if read_or_atomic {
            ctx.tx.rd_out += 1;
        }
    }
    let first_psn = ctx.tx.track[track_slot].first_psn;
    let port = ctx.av.port.max(1);
    let target = connected_peer(dev, ctx, peer);
    let msg = rc_msg(
        dev,
        qp,
        ready,
        (first_psn, npkts, psns),
        port,
        read_or_atomic,
    );
    let up = dev.port_up(port);
    loop {
        let from = ctx.tx.cur_pkt;
        if from >= npkts {
            ctx.tx.cur += 1;
            ctx.tx.cur_pkt = 0;
            return true;
        }
        let (arrive, fate) = match target {
            Some(target) if up => fates(
                dev,
                &target.dev,
                target.port,
                npkts - from,
                &mut ctx.delivered,
            ),
            _ => (0, Some(Fate::Drop)),
        };
        if arrive > 0
            && let Some(target) = target
        {
            let reply = respond(&target.dev, &target.qp, &msg, from, arrive);
            let last_psn = psn_add(first_psn, psns - 1);
            let whole = match reply {
                Reply::Ack(psn) => !read_or_atomic && psn == last_psn,
                Reply::ReadResp(psn) => op == WrOpcode::RdmaRead && psn == last_psn,
                _ => false,
            };
            if whole && ctx.tx.started == 1 {
                complete_alone(dev, qp, ctx, wqe, track_slot);
                return true;
            }
            // The burst is on the wire: only a retry (a sequence or RNR NAK, an implied NAK, a
            // local ACK timeout) sends it again. An ACK short of it (a duplicate, or a ghost
            // from a peer whose expected PSN is ahead) leaves it sent, as rxe's completer
            // ignores a response older than the one it expects; resending at once would repeat
            // for as long as the peer answers so.
            ctx.tx.cur_pkt = from + arrive;
            if reply != Reply::Lost {
                let go_on = on_reply(dev, qp, ctx, i, local.list(), reply);
                // An ACK (of the burst or short of it) leaves the position right after the
                // burst: the packet after it (whose fate is decided) goes on the wire too.
                // Anything else moved the position (or ended the request): that packet was
                // sent and is ignored.
                let moved_on = qp.state() == QpState::Rts || qp.state() == QpState::Sqd;
                if fate.is_none()
                    || !go_on
                    || !moved_on
                    || !matches!(reply, Reply::Ack(_))
                    || ctx.tx.cur != i
                    || ctx.tx.cur_pkt != from + arrive
                {
                    return go_on;
                }
            }
        }
        if let Some(fate) = fate {
            if fate == Fate::Delay
                && let Some(target) = target
            {
                // It arrives and is acted on; its answer comes too late.
                let _ = respond(&target.dev, &target.qp, &msg, ctx.tx.cur_pkt, 1);
            }
            ctx.tx.cur_pkt += 1;
        }
    }
}
