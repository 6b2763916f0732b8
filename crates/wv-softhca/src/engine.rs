//! The device engine: executes send-queue WQEs in the doorbell caller's thread (requester),
//! delivers each message to the target QP's responder over the link, moves the bytes between
//! registered regions, and writes the completions. Like rxe, no device thread: the work runs
//! where the doorbell was rung, or where a receive that an RNR-waiting sender needs was posted.
//!
//! Lock order: `Qp::attrs` → `Qp::sq_ctx` → `Qp::resp` → `Srq::consumer` / waiters → `Cq`
//! producer lock. The responder of another QP is entered with only the requester's `sq_ctx`
//! held, and a responder never takes an `sq_ctx` (it only *schedules* send-queue work through
//! [`run_sq`], which uses `try_lock`), so two QPs sending to each other cannot deadlock.

use alloc::sync::{Arc, Weak};
use core::sync::atomic::Ordering;

use wv_hal::{QpEvent, QpState, QpType};

use crate::device::Device;
use crate::dma::DmaRange;
use crate::fabric::Fate;
use crate::mr::{ACCESS_REMOTE_WRITE_BIT, Mr, Want};
use crate::qp::{MAX_SGE, Qp, RecvWqe, SqCtx};
use crate::wr::{
    SQ_HDR_WORDS, SendWqe, WcOpcode, WcStatus, WorkCompletion, WrOpcode, inline_bytes, send_flags,
    sge_at, wc_flags,
};

/// Largest inline payload a WQE carries.
pub const MAX_INLINE: usize = 256;
/// Bytes of the GRH that precede a UD payload in the receive buffer.
pub const GRH_BYTES: usize = 40;
const PSN_MASK: u32 = 0xFF_FFFF;

/// Schedules the send queue of `qp` and runs it in this thread unless another thread is
/// already running it (that thread then runs the new work too).
pub(crate) fn run_sq(dev: &Arc<Device>, qp: &Arc<Qp>) {
    qp.sq_pending.store(true, Ordering::SeqCst);
    loop {
        let Some(mut ctx) = qp.sq_ctx.try_lock() else {
            return;
        };
        while qp.sq_pending.swap(false, Ordering::SeqCst) {
            process_sq(dev, qp, &mut ctx);
        }
        drop(ctx);
        if !qp.sq_pending.load(Ordering::SeqCst) {
            return;
        }
    }
}

enum Step {
    Done(WcStatus, u32),
    /// RNR with infinite retry: the WQE stays at the head until a receive is posted.
    Wait,
}

fn process_sq(dev: &Arc<Device>, qp: &Arc<Qp>, ctx: &mut SqCtx) {
    loop {
        if dev.is_removed() {
            return;
        }
        match qp.state() {
            QpState::Error => {
                flush_sq(dev, qp);
                return;
            }
            QpState::Rts => {}
            _ => return,
        }
        let Some(slot) = qp.sq.consumer_slot() else {
            return;
        };
        let wqe = SendWqe::decode(slot);
        let step = execute(dev, qp, ctx, &wqe, slot);
        match step {
            Step::Wait => return,
            Step::Done(status, len) => {
                complete_send(dev, qp, &wqe, status, len);
                qp.sq.consume(1);
                if status != WcStatus::Success && qp.set_error() {
                    enter_error(dev, qp);
                }
            }
        }
    }
}

/// What the data path does when it moves a QP to ERR (the send queue flushes itself).
fn enter_error(dev: &Arc<Device>, qp: &Arc<Qp>) {
    flush_rq(dev, qp);
    if qp.srq.is_some() {
        dev.post_qp_event(qp, QpEvent::LastWqeReached);
    }
}

fn wc_opcode(op: Option<WrOpcode>) -> WcOpcode {
    match op {
        Some(WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm) => WcOpcode::RdmaWrite,
        Some(WrOpcode::RdmaRead) => WcOpcode::RdmaRead,
        Some(WrOpcode::LocalInv) => WcOpcode::LocalInv,
        Some(WrOpcode::RegMr) => WcOpcode::RegMr,
        _ => WcOpcode::Send,
    }
}

fn complete_send(dev: &Device, qp: &Qp, wqe: &SendWqe, status: WcStatus, len: u32) {
    let ok = status == WcStatus::Success;
    let signaled =
        !ok || qp.sq_sig_all.load(Ordering::Acquire) || wqe.flags & send_flags::SIGNALED != 0;
    if !signaled {
        return;
    }
    let wc = WorkCompletion {
        wr_id: wqe.wr_id,
        status,
        opcode: wc_opcode(WrOpcode::from_u8(wqe.opcode)),
        byte_len: len,
        qp_num: qp.qpn,
        ..WorkCompletion::default()
    };
    qp.send_cq.post(dev, &wc, !ok);
}

/// Completes every outstanding send WQE with `WR_FLUSH_ERR`, signaled or not.
fn flush_sq(dev: &Device, qp: &Qp) {
    while let Some(slot) = qp.sq.consumer_slot() {
        let wqe = SendWqe::decode(slot);
        let wc = WorkCompletion {
            wr_id: wqe.wr_id,
            status: WcStatus::WrFlushErr,
            opcode: wc_opcode(WrOpcode::from_u8(wqe.opcode)),
            qp_num: qp.qpn,
            ..WorkCompletion::default()
        };
        qp.send_cq.post(dev, &wc, true);
        qp.sq.consume(1);
    }
}

/// Completes every outstanding receive WQE of the QP's own receive queue with `WR_FLUSH_ERR`.
pub(crate) fn flush_rq(dev: &Device, qp: &Qp) {
    if qp.srq.is_some() {
        return;
    }
    let _rs = qp.resp.lock();
    flush_rq_locked(dev, qp);
}

fn flush_rq_locked(dev: &Device, qp: &Qp) {
    if qp.srq.is_some() {
        return;
    }
    while let Some(slot) = qp.rq.consumer_slot() {
        let w = RecvWqe::read(slot, qp.rq_max_sge as usize);
        let wc = WorkCompletion {
            wr_id: w.wr_id,
            status: WcStatus::WrFlushErr,
            opcode: WcOpcode::Recv,
            qp_num: qp.qpn,
            ..WorkCompletion::default()
        };
        qp.recv_cq.post(dev, &wc, true);
        qp.rq.consume(1);
    }
}

/// A resolved piece of a scatter/gather list.
struct Seg {
    mr: Arc<Mr>,
    off: u64,
    len: u64,
}

/// A resolved scatter/gather list (no allocation: at most [`MAX_SGE`] pieces).
struct SegList {
    segs: [Option<Seg>; MAX_SGE],
    n: usize,
    total: u64,
}

impl SegList {
    fn new() -> Self {
        SegList {
            segs: [const { None }; MAX_SGE],
            n: 0,
            total: 0,
        }
    }
    fn push(&mut self, mr: Arc<Mr>, off: u64, len: u64) {
        if len == 0 || self.n == MAX_SGE {
            return;
        }
        self.segs[self.n] = Some(Seg { mr, off, len });
        self.n += 1;
        self.total += len;
    }
    fn one(mr: Arc<Mr>, off: u64, len: u64) -> Self {
        let mut s = Self::new();
        s.push(mr, off, len);
        s
    }
    fn iter(&self) -> impl Iterator<Item = &Seg> {
        self.segs[..self.n].iter().flatten()
    }
}

/// Resolves SGEs against `dev`'s regions for protection domain `pd`.
fn resolve(
    dev: &Device,
    pd: u32,
    sges: impl Iterator<Item = crate::wr::Sge>,
    want: Want,
) -> Result<SegList, ()> {
    let mut list = SegList::new();
    for s in sges {
        if s.length == 0 {
            continue;
        }
        let mr = dev.mr_by_key(s.lkey).ok_or(())?;
        let off = mr.check(s.lkey, pd, s.addr, u64::from(s.length), want)?;
        list.push(mr, off, u64::from(s.length));
    }
    Ok(list)
}

/// Where a message's bytes come from.
enum Src<'a> {
    Bytes(&'a [u8]),
    Segs(&'a SegList),
}

impl Src<'_> {
    fn len(&self) -> u64 {
        match self {
            Src::Bytes(b) => b.len() as u64,
            Src::Segs(s) => s.total,
        }
    }
}

/// A write cursor over a destination list.
struct Cursor<'a> {
    dst: &'a SegList,
    i: usize,
    off: u64,
}

impl<'a> Cursor<'a> {
    fn new(dst: &'a SegList) -> Self {
        Cursor { dst, i: 0, off: 0 }
    }
    /// Copies `len` bytes, either from `bytes` or from `range` at `roff`.
    fn put(
        &mut self,
        bytes: Option<&[u8]>,
        range: Option<(&DmaRange, u64)>,
        len: u64,
    ) -> Result<(), ()> {
        let mut done = 0u64;
        while done < len {
            let seg = self
                .dst
                .segs
                .get(self.i)
                .and_then(Option::as_ref)
                .ok_or(())?;
            let room = seg.len - self.off;
            if room == 0 {
                self.i += 1;
                self.off = 0;
                continue;
            }
            let n = room.min(len - done);
            let at = seg.off + self.off;
            match (bytes, range) {
                (Some(b), _) => seg
                    .mr
                    .range
                    .write(at, &b[done as usize..(done + n) as usize]),
                (None, Some((r, roff))) => {
                    DmaRange::copy(r, roff + done, &seg.mr.range, at, n as usize)
                }
                (None, None) => return Err(()),
            }
            .map_err(|_| ())?;
            self.off += n;
            done += n;
        }
        Ok(())
    }
    fn put_src(&mut self, src: &Src<'_>) -> Result<(), ()> {
        match src {
            Src::Bytes(b) => self.put(Some(b), None, b.len() as u64),
            Src::Segs(list) => {
                for s in list.iter() {
                    self.put(None, Some((&s.mr.range, s.off)), s.len)?;
                }
                Ok(())
            }
        }
    }
}

/// One message on the wire.
struct Packet<'a> {
    qp_type: QpType,
    op: WrOpcode,
    src_qpn: u32,
    psn: u32,
    npkts: u32,
    src: Src<'a>,
    remote_addr: u64,
    rkey: u32,
    imm_or_inv: u32,
    solicited: bool,
    qkey: u32,
    sgid: wv_hal::Gid,
    slid: u16,
    read_dst: Option<&'a SegList>,
}

/// The responder's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    Ack,
    Rnr,
    Nak(WcStatus),
    Lost,
}

fn opcode_allowed(op: WrOpcode, t: QpType) -> bool {
    match t {
        QpType::Ud => matches!(op, WrOpcode::Send | WrOpcode::SendWithImm),
        QpType::Uc => !matches!(op, WrOpcode::RdmaRead),
        QpType::Rc => true,
    }
}

/// Whether the opcode may be posted on a QP of this type (the `EINVAL` check of post_send).
pub(crate) fn opcode_valid(op: WrOpcode, t: QpType) -> bool {
    opcode_allowed(op, t)
}

fn execute(
    dev: &Arc<Device>,
    qp: &Arc<Qp>,
    ctx: &mut SqCtx,
    wqe: &SendWqe,
    slot: &[core::sync::atomic::AtomicU64],
) -> Step {
    let Some(op) = WrOpcode::from_u8(wqe.opcode) else {
        return Step::Done(WcStatus::LocQpOpErr, 0);
    };
    if !opcode_allowed(op, qp.qp_type) {
        return Step::Done(WcStatus::LocQpOpErr, 0);
    }
    match op {
        WrOpcode::LocalInv => {
            let ok = dev
                .mr_by_key(wqe.imm_or_inv)
                .filter(|mr| mr.pd == qp.pd)
                .is_some_and(|mr| mr.invalidate(wqe.imm_or_inv).is_ok());
            Step::Done(
                if ok {
                    WcStatus::Success
                } else {
                    WcStatus::LocQpOpErr
                },
                0,
            )
        }
        WrOpcode::RegMr => {
            let r = wqe.reg();
            let ok = dev
                .mr_by_key(r.mr_key)
                .filter(|mr| mr.pd == qp.pd)
                .is_some_and(|mr| {
                    mr.fast_register(r.mr_key, r.new_key_byte, r.access, r.iova, r.length)
                        .is_ok()
                });
            Step::Done(
                if ok {
                    WcStatus::Success
                } else {
                    WcStatus::LocQpOpErr
                },
                0,
            )
        }
        _ => transport(dev, qp, ctx, wqe, slot, op),
    }
}

fn transport(
    dev: &Arc<Device>,
    qp: &Arc<Qp>,
    ctx: &mut SqCtx,
    wqe: &SendWqe,
    slot: &[core::sync::atomic::AtomicU64],
    op: WrOpcode,
) -> Step {
    let is_read = op == WrOpcode::RdmaRead;
    let mut inline = [0u8; MAX_INLINE];
    let local = if wqe.flags & send_flags::INLINE != 0 && !is_read {
        None
    } else {
        let want = if is_read {
            Want::LocalWrite
        } else {
            Want::LocalRead
        };
        let n = wqe.num_sge.min(qp.sq_max_sge as usize).min(MAX_SGE);
        match resolve(
            dev,
            qp.pd,
            (0..n).map(|i| sge_at(slot, SQ_HDR_WORDS, i)),
            want,
        ) {
            Ok(l) => Some(l),
            Err(()) => return Step::Done(WcStatus::LocProtErr, 0),
        }
    };
    let src = match &local {
        Some(l) if !is_read => Src::Segs(l),
        _ if is_read => Src::Bytes(&[]),
        _ => {
            let n = inline_bytes(slot, wqe.inline_len, &mut inline);
            Src::Bytes(&inline[..n])
        }
    };
    let len = if is_read {
        local.as_ref().map_or(0, |l| l.total)
    } else {
        src.len()
    };
    let mtu = u64::from(ctx.mtu.bytes());
    if len > u64::from(dev.limits().max_msg) || (qp.qp_type == QpType::Ud && len > mtu) {
        return Step::Done(WcStatus::LocLenErr, 0);
    }
    let npkts = len.div_ceil(mtu).max(1) as u32;

    // Where it goes.
    let port = ctx.av.port.max(1);
    let (grh, dgid, dlid, dqpn, qkey) = if qp.qp_type == QpType::Ud {
        let ud = wqe.ud();
        let qkey = if ud.remote_qkey & 0x8000_0000 != 0 {
            ctx.qkey
        } else {
            ud.remote_qkey
        };
        (ud.grh, ud.dgid, ud.dlid, ud.remote_qpn, qkey)
    } else {
        (ctx.av.grh_valid, ctx.av.dgid, ctx.av.dlid, ctx.dest_qpn, 0)
    };
    // The target and the port it receives on (resolved once per connection for RC/UC).
    let resolve_target = || {
        let d = dev.route(grh, &dgid, dlid)?;
        let p = d.port_of(grh, &dgid, dlid)?;
        let q = d.qp_by_qpn(dqpn)?;
        Some((d, q, p))
    };
    let target = if qp.qp_type != QpType::Ud {
        match ctx
            .peer
            .as_ref()
            .and_then(|(d, q, p)| Some((d.upgrade()?, q.upgrade()?, *p)))
        {
            Some(t) => Some(t),
            None => {
                let t = resolve_target();
                ctx.peer = t
                    .as_ref()
                    .map(|(d, q, p)| (Arc::downgrade(d), Arc::downgrade(q), *p));
                t
            }
        }
    } else {
        resolve_target()
    };
    // GID index 0 is the MAC-based GID, which never changes.
    let sgid = crate::device::mac_gid(dev.config.mac);
    let pkt = Packet {
        qp_type: qp.qp_type,
        op,
        src_qpn: qp.qpn,
        psn: ctx.psn,
        npkts,
        src,
        remote_addr: wqe.remote_addr,
        rkey: wqe.rkey,
        imm_or_inv: wqe.imm_or_inv,
        solicited: wqe.flags & send_flags::SOLICITED != 0,
        qkey,
        sgid,
        slid: dev.lid(port),
        read_dst: if is_read { local.as_ref() } else { None },
    };

    if qp.qp_type == QpType::Ud && grh && dgid[0] == 0xFF {
        if dev.port_up(port) {
            deliver_multicast(dev, qp, &pkt, &dgid);
        }
        return Step::Done(WcStatus::Success, len as u32);
    }
    if qp.qp_type != QpType::Rc {
        if let Some((tdev, t, tport)) = &target
            && dev.port_up(port)
            && link(dev, tdev, *tport) == Fate::Deliver
        {
            respond(tdev, t, &pkt, qp);
        }
        ctx.psn = (ctx.psn + npkts) & PSN_MASK;
        return Step::Done(WcStatus::Success, len as u32);
    }

    let (mut retries, mut rnrs) = (0u8, 0u8);
    loop {
        let reply = match &target {
            Some((tdev, t, tport)) if dev.port_up(port) => match link(dev, tdev, *tport) {
                Fate::Deliver => respond(tdev, t, &pkt, qp),
                Fate::Delay => {
                    // Executed, but the ACK arrives after the retransmission timer.
                    let _ = respond(tdev, t, &pkt, qp);
                    Reply::Lost
                }
                Fate::Drop | Fate::Corrupt => Reply::Lost,
            },
            _ => Reply::Lost,
        };
        match reply {
            Reply::Ack => {
                ctx.psn = (ctx.psn + npkts) & PSN_MASK;
                return Step::Done(WcStatus::Success, len as u32);
            }
            Reply::Nak(s) => return Step::Done(s, 0),
            Reply::Rnr => {
                if ctx.rnr_retry == 7 {
                    return Step::Wait;
                }
                rnrs += 1;
                if rnrs > ctx.rnr_retry {
                    return Step::Done(WcStatus::RnrRetryExcErr, 0);
                }
            }
            Reply::Lost => {
                retries += 1;
                if retries > ctx.retry_cnt {
                    return Step::Done(WcStatus::RetryExcErr, 0);
                }
            }
        }
    }
}

/// The fate of a packet from `from` to port `to_port` of `to`: lost when that port is down, else decided by the fabric (loopback never faults).
fn link(from: &Arc<Device>, to: &Arc<Device>, to_port: u8) -> Fate {
    if !to.port_up(to_port) {
        return Fate::Drop;
    }
    if Arc::ptr_eq(from, to) {
        return Fate::Deliver;
    }
    if to.is_removed() {
        return Fate::Drop;
    }
    match from.fabric() {
        Some(f) => f.fate_from(from),
        None => Fate::Drop,
    }
}

/// A UD send to a multicast GID: a copy to every attached QP, on this device (loopback) and on
/// every device of the fabric, each copy subject to the link.
fn deliver_multicast(dev: &Arc<Device>, qp: &Arc<Qp>, pkt: &Packet<'_>, group: &wv_hal::Gid) {
    let visit = |d: &Arc<Device>| {
        let fate = if Arc::ptr_eq(d, dev) {
            Fate::Deliver
        } else if !d.port_up(1) {
            Fate::Drop
        } else {
            match dev.fabric() {
                Some(f) => f.fate_from(dev),
                None => Fate::Drop,
            }
        };
        if fate != Fate::Deliver {
            return;
        }
        let members = d.mcast.read();
        for (g, qpn) in members.iter() {
            if g == group
                && let Some(t) = d.qp_by_qpn(*qpn)
            {
                respond(d, &t, pkt, qp);
            }
        }
    };
    match dev.fabric() {
        Some(f) => f.for_each(visit),
        None => visit(dev),
    }
}

fn psn_diff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// The responder: executes one incoming message on QP `t` of device `tdev`, then raises the
/// interrupts that caused on the receiving device (with only the requester's `sq_ctx` held,
/// which the data path only ever `try_lock`s, so an inline DPC cannot deadlock against it).
fn respond(tdev: &Arc<Device>, t: &Arc<Qp>, pkt: &Packet<'_>, requester: &Arc<Qp>) -> Reply {
    let r = respond_locked(tdev, t, pkt, requester);
    tdev.deliver_interrupts();
    r
}

fn respond_locked(tdev: &Arc<Device>, t: &Arc<Qp>, pkt: &Packet<'_>, requester: &Arc<Qp>) -> Reply {
    if tdev.is_removed() {
        return Reply::Lost;
    }
    let mut errored = false;
    let mut comm_est = false;
    let reply = {
        let mut rs = t.resp.lock();
        let st = t.state();
        if !matches!(
            st,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::SqError
        ) || t.qp_type != pkt.qp_type
        {
            return Reply::Lost;
        }
        match t.qp_type {
            QpType::Ud => {
                if pkt.qkey != rs.qkey {
                    return Reply::Lost;
                }
            }
            _ => {
                if rs.dest_qpn != pkt.src_qpn {
                    return Reply::Lost;
                }
            }
        }
        if t.qp_type == QpType::Rc {
            let d = psn_diff(pkt.psn, rs.epsn);
            if d < 0 {
                // A duplicate (our ACK was late): acknowledge again; a read is re-executed.
                return if pkt.op == WrOpcode::RdmaRead {
                    do_read(tdev, t, rs.access, pkt)
                } else {
                    Reply::Ack
                };
            }
            if d > 0 {
                return Reply::Lost;
            }
            if st == QpState::Rtr && !rs.comm_est {
                rs.comm_est = true;
                comm_est = true;
            }
        }
        let r = execute_incoming(tdev, t, rs.access, pkt, requester, &mut errored);
        if t.qp_type == QpType::Rc && r == Reply::Ack {
            rs.epsn = (rs.epsn + pkt.npkts) & PSN_MASK;
        }
        if errored && t.set_error() {
            flush_rq_locked(tdev, t);
        } else {
            errored = false;
        }
        r
    };
    if comm_est {
        tdev.post_qp_event(t, QpEvent::CommEstablished);
    }
    if errored {
        if t.srq.is_some() {
            tdev.post_qp_event(t, QpEvent::LastWqeReached);
        }
        run_sq(tdev, t);
    }
    reply
}

fn do_read(tdev: &Device, t: &Qp, access: u32, pkt: &Packet<'_>) -> Reply {
    let Some(dst) = pkt.read_dst else {
        return Reply::Nak(WcStatus::RemInvReqErr);
    };
    let len = dst.total;
    let seg = match remote_seg(tdev, t, access, pkt, len, Want::RemoteRead) {
        Ok(s) => s,
        Err(r) => return r,
    };
    match Cursor::new(dst).put(None, Some((&seg.mr.range, seg.off)), len) {
        Ok(()) => Reply::Ack,
        Err(()) => Reply::Nak(WcStatus::RemOpErr),
    }
}

fn remote_seg(
    tdev: &Device,
    t: &Qp,
    access: u32,
    pkt: &Packet<'_>,
    len: u64,
    want: Want,
) -> Result<Seg, Reply> {
    let qp_ok = match want {
        Want::RemoteRead => access & wv_abi::consts::WV_ACCESS_REMOTE_READ != 0,
        _ => access & ACCESS_REMOTE_WRITE_BIT != 0,
    };
    let seg = qp_ok
        .then(|| tdev.mr_by_key(pkt.rkey))
        .flatten()
        .and_then(|mr| {
            mr.check(pkt.rkey, t.pd, pkt.remote_addr, len, want)
                .ok()
                .map(|off| Seg { mr, off, len })
        });
    seg.ok_or(Reply::Nak(WcStatus::RemAccessErr))
}

/// Takes a receive WQE for `t` (its RQ, or its SRQ), or — with `register` — registers
/// `requester` to be woken when one is posted. The caller holds `t.resp`, which makes it the
/// RQ's only consumer (an SRQ serialises its consumers itself).
///
/// No lost wake-up: the poster publishes its WQE and then takes the waiters' lock; we check
/// for a WQE *under* that lock before registering, so either we see the WQE or it sees us.
fn take_recv(tdev: &Device, t: &Qp, requester: &Arc<Qp>, register: bool) -> Option<RecvWqe> {
    let take = || match &t.srq {
        Some(srq) => srq.take(tdev),
        None => t.rq.consumer_slot().map(|s| {
            let w = RecvWqe::read(s, t.rq_max_sge as usize);
            t.rq.consume(1);
            w
        }),
    };
    let (waiters, ring) = match &t.srq {
        Some(srq) => (&srq.rnr_waiters, &srq.ring),
        None => (&*t.rnr_waiters, &t.rq),
    };
    loop {
        if let Some(w) = take() {
            return Some(w);
        }
        if !register {
            return None;
        }
        let mut w = waiters.lock();
        if ring.is_empty() {
            if !w.iter().any(|q| q.as_ptr() == Arc::as_ptr(requester)) {
                w.push(Arc::downgrade(requester));
            }
            return None;
        }
        // A WQE arrived meanwhile (or another consumer of the SRQ raced us): try again.
    }
}

fn recv_error(tdev: &Device, t: &Qp, w: &RecvWqe, status: WcStatus, errored: &mut bool) {
    let wc = WorkCompletion {
        wr_id: w.wr_id,
        status,
        opcode: WcOpcode::Recv,
        qp_num: t.qpn,
        ..WorkCompletion::default()
    };
    t.recv_cq.post(tdev, &wc, true);
    *errored = true;
}

fn execute_incoming(
    tdev: &Device,
    t: &Qp,
    access: u32,
    pkt: &Packet<'_>,
    requester: &Arc<Qp>,
    errored: &mut bool,
) -> Reply {
    let rc = t.qp_type == QpType::Rc;
    let lost_unless_rc = |r: Reply| if rc { r } else { Reply::Lost };
    let len = pkt.src.len();
    match pkt.op {
        WrOpcode::RdmaRead => do_read(tdev, t, access, pkt),
        WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => {
            let seg = if len == 0 {
                None
            } else {
                match remote_seg(tdev, t, access, pkt, len, Want::RemoteWrite) {
                    Ok(s) => Some(s),
                    Err(r) => {
                        *errored = true;
                        return lost_unless_rc(r);
                    }
                }
            };
            let wqe = if pkt.op == WrOpcode::RdmaWriteWithImm {
                match take_recv(tdev, t, requester, rc) {
                    Some(w) => Some(w),
                    None => return if rc { Reply::Rnr } else { Reply::Lost },
                }
            } else {
                None
            };
            if let Some(seg) = seg {
                let dst = SegList::one(seg.mr, seg.off, seg.len);
                if Cursor::new(&dst).put_src(&pkt.src).is_err() {
                    *errored = true;
                    return lost_unless_rc(Reply::Nak(WcStatus::RemOpErr));
                }
            }
            if let Some(w) = wqe {
                let wc = WorkCompletion {
                    wr_id: w.wr_id,
                    opcode: WcOpcode::RecvRdmaWithImm,
                    byte_len: len as u32,
                    imm_data: pkt.imm_or_inv,
                    wc_flags: wc_flags::WITH_IMM,
                    qp_num: t.qpn,
                    src_qp: pkt.src_qpn,
                    slid: pkt.slid,
                    ..WorkCompletion::default()
                };
                t.recv_cq.post(tdev, &wc, pkt.solicited);
            }
            Reply::Ack
        }
        WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => {
            let Some(w) = take_recv(tdev, t, requester, rc) else {
                return if rc { Reply::Rnr } else { Reply::Lost };
            };
            let ud = t.qp_type == QpType::Ud;
            let dst = match resolve(tdev, t.pd, w.sges[..w.n].iter().copied(), Want::LocalWrite) {
                Ok(d) => d,
                Err(()) => {
                    recv_error(tdev, t, &w, WcStatus::LocProtErr, errored);
                    return lost_unless_rc(Reply::Nak(WcStatus::RemOpErr));
                }
            };
            let need = len + if ud { GRH_BYTES as u64 } else { 0 };
            if need > dst.total {
                recv_error(tdev, t, &w, WcStatus::LocLenErr, errored);
                return lost_unless_rc(Reply::Nak(WcStatus::RemInvReqErr));
            }
            let mut flags = 0;
            if pkt.op == WrOpcode::SendWithInv {
                let ok = tdev
                    .mr_by_key(pkt.imm_or_inv)
                    .filter(|mr| mr.pd == t.pd)
                    .is_some_and(|mr| mr.invalidate(pkt.imm_or_inv).is_ok());
                if !ok {
                    recv_error(tdev, t, &w, WcStatus::RemInvReqErr, errored);
                    return lost_unless_rc(Reply::Nak(WcStatus::RemInvReqErr));
                }
                flags |= wc_flags::WITH_INV;
            }
            let mut cur = Cursor::new(&dst);
            if ud {
                let mut grh = [0u8; GRH_BYTES];
                grh[0] = 0x60;
                grh[4..6].copy_from_slice(&((len as u16).to_be_bytes()));
                grh[6] = 0x1B;
                grh[7] = 64;
                grh[8..24].copy_from_slice(&pkt.sgid);
                flags |= wc_flags::GRH;
                if cur.put(Some(&grh), None, GRH_BYTES as u64).is_err() {
                    recv_error(tdev, t, &w, WcStatus::LocLenErr, errored);
                    return Reply::Lost;
                }
            }
            if cur.put_src(&pkt.src).is_err() {
                recv_error(tdev, t, &w, WcStatus::LocProtErr, errored);
                return lost_unless_rc(Reply::Nak(WcStatus::RemOpErr));
            }
            if pkt.op == WrOpcode::SendWithImm {
                flags |= wc_flags::WITH_IMM;
            }
            let wc = WorkCompletion {
                wr_id: w.wr_id,
                opcode: WcOpcode::Recv,
                byte_len: need as u32,
                imm_data: if pkt.op == WrOpcode::Send {
                    0
                } else {
                    pkt.imm_or_inv
                },
                wc_flags: flags,
                qp_num: t.qpn,
                src_qp: pkt.src_qpn,
                slid: pkt.slid,
                ..WorkCompletion::default()
            };
            t.recv_cq.post(tdev, &wc, pkt.solicited);
            Reply::Ack
        }
        _ => lost_unless_rc(Reply::Nak(WcStatus::RemInvReqErr)),
    }
}

/// Wakes the requesters that got an RNR NAK from `qp` (or its SRQ): a receive was posted.
pub(crate) fn kick_waiters(waiters: &spin::Mutex<alloc::vec::Vec<Weak<Qp>>>) {
    let list = core::mem::take(&mut *waiters.lock());
    for w in list {
        if let Some(q) = w.upgrade()
            && let Some(d) = q.dev.upgrade()
        {
            run_sq(&d, &q);
            d.deliver_interrupts();
        }
    }
}
