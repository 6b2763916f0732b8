//! The device engine: executes send-queue WQEs in the doorbell caller's thread (requester),
//! carries each message to the target QP's responder as packets of the path MTU with one PSN
//! each, moves the bytes between registered regions, and writes the completions. Like rxe, no
//! device thread: the work runs where the doorbell was rung, or in the DPC of the QP's timer.
//!
//! The RC requester follows the InfiniBand transport (IBTA vol. 1 ch. 9):
//! * every packet gets an answer from the link: an ACK (cumulative), a read or atomic
//!   response, an RNR NAK, a sequence-error NAK, a fatal NAK, or nothing (the packet or the
//!   answer was lost);
//! * after a loss it keeps sending what follows (up to `max_rd_atomic` reads and atomics in
//!   flight, fences and local operations waiting for what precedes them); the responder
//!   answers the first out-of-sequence packet with a sequence-error NAK and the requester goes
//!   back to the lost packet at once; with nothing following, the local ACK timer (4.096 µs ×
//!   2^`timeout`) expires and it goes back to the oldest unacknowledged packet; `retry_cnt`
//!   such retries, then `RETRY_EXC_ERR`;
//! * an RNR NAK makes it wait the responder's `min_rnr_timer` before resending; `rnr_retry`
//!   such waits (7: for ever), then `RNR_RETRY_EXC_ERR`;
//! * a duplicate request is acknowledged again; a duplicate read is executed again; a
//!   duplicate atomic gets the original value it got the first time from the responder's
//!   resources, and is never executed twice.
//!
//! Timers run on the platform's clock (`Bus::now_ns`, `Bus::set_timer`), so the host's
//! deterministic mode fires them exactly when a test moves its clock.
//!
//! UC and UD have no acknowledgements: a message is complete when its packets are sent. A
//! send error moves them to SQE (the send queue flushes, the receive queue goes on); a
//! responder error drops the message silently (rxe's classes D and E), except a receive WQE
//! that names memory it may not use, which is the QP's own error (class A).
//!
//! Lock order: `Qp::attrs` → `Qp::sq_ctx` → `Qp::resp` → `Srq::consumer` → `Cq` producer
//! lock. The responder of another QP is entered with only the requester's `sq_ctx` held, and a
//! responder never takes an `sq_ctx` (it only *schedules* send-queue work through [`run_sq`],
//! which uses `try_lock`), so two QPs sending to each other cannot deadlock.

use alloc::sync::Arc;
use arrayvec::ArrayVec;
use core::sync::atomic::Ordering;

use wv_hal::{Gid, KArc, QpEvent, QpState, QpType};

use crate::cq::CqPort;
use crate::device::{Device, PORT_MTU};
use crate::dma::{AtomicFault, DmaRange};
use crate::fabric::Fate;
use crate::mr::Want;
use crate::mr_cache::{MrCache, MrRef};
use crate::mw::is_mw_key;
use crate::qp::{MAX_SGE, Qp, RecvWqe, RespCtx, SqCtx, SqRefs, Track};
use crate::wr::{
    AtomicArgs, SQ_HDR_WORDS, SendWqe, WcOpcode, WcStatus, WorkCompletion, WrOpcode, inline_len,
    inline_range, send_flags, sge_at, wc_flags,
};

/// Largest inline payload a WQE carries.
pub const MAX_INLINE: usize = 256;
/// Bytes of the GRH that precede a UD payload in the receive buffer.
pub const GRH_BYTES: usize = 40;
const PSN_MASK: u32 = 0xFF_FFFF;

// ---------------------------------------------------------------------------------------------
// Timers

/// The encoding of the AETH's RNR NAK timer field (IBTA vol. 1) in microseconds: 0 is the
/// longest (655.36 ms).
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// How long a requester waits after an RNR NAK carrying the timer field `code`.
pub(crate) fn rnr_delay_ns(code: u8) -> u64 {
    u64::from(RNR_TIMER_US[usize::from(code & 31)]) * 1_000
}

/// The local ACK timeout of the `timeout` attribute: 4.096 µs × 2^timeout; 0 means none.
pub(crate) fn ack_timeout_ns(timeout: u8) -> Option<u64> {
    (timeout != 0).then(|| 4_096u64 << timeout.min(31))
}

fn psn_diff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

fn psn_add(a: u32, n: u32) -> u32 {
    a.wrapping_add(n) & PSN_MASK
}

// ---------------------------------------------------------------------------------------------
// The send queue

/// Schedules the send queue of `qp` and runs it in this thread unless another thread is
/// already running it (that thread then runs the new work too): see [`crate::sched`].
pub(crate) fn run_sq(dev: &Arc<Device>, qp: &KArc<Qp>) {
    crate::sched::schedule(&qp.sq_pending, || {
        let mut ctx = qp.sq_ctx.try_lock()?;
        process_sq(dev, qp, &mut ctx);
        Some(())
    });
}

fn process_sq(dev: &Arc<Device>, qp: &KArc<Qp>, ctx: &mut SqCtx) {
    // The references kept between messages, out of the context while it is borrowed whole.
    let mut refs = core::mem::take(&mut ctx.refs);
    process_sq_with(dev, qp, ctx, &mut refs);
    ctx.refs = refs;
}

fn process_sq_with(dev: &Arc<Device>, qp: &KArc<Qp>, ctx: &mut SqCtx, refs: &mut SqRefs) {
    loop {
        if dev.is_removed() {
            return;
        }
        let st = qp.state();
        match st {
            QpState::Error | QpState::SqError => {
                flush_sq(dev, qp, ctx);
                break;
            }
            QpState::Rts | QpState::Sqd => {}
            _ => return,
        }
        let more = if qp.qp_type == QpType::Rc {
            rc_step(dev, qp, ctx, refs, st)
        } else {
            unreliable_step(dev, qp, ctx, refs, st)
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

/// What the data path does when it moves a QP to ERR (the send queue flushes itself).
fn enter_error(dev: &Arc<Device>, qp: &KArc<Qp>) {
    flush_rq(dev, qp);
    if qp.srq.is_some() {
        dev.post_qp_event(qp, QpEvent::LastWqeReached);
    }
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

fn complete_send(dev: &Device, qp: &Qp, port: &CqPort, wqe: &SendWqe, status: WcStatus, len: u32) {
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
    port.post(dev, &wc, !ok);
}

/// Completes every outstanding send WQE with `WR_FLUSH_ERR`, signaled or not, and forgets
/// what was in flight.
fn flush_sq(dev: &Device, qp: &Qp, ctx: &mut SqCtx) {
    while let Some(slot) = qp.sq.consumer_slot() {
        let wqe = SendWqe::decode(slot);
        let wc = WorkCompletion {
            wr_id: wqe.wr_id,
            status: WcStatus::WrFlushErr,
            opcode: wc_opcode(WrOpcode::from_u8(wqe.opcode)),
            qp_num: qp.qpn,
            ..WorkCompletion::default()
        };
        ctx.cq.post(dev, &wc, true);
        qp.sq.consume(1);
    }
    let psn = ctx.psn;
    ctx.tx.clear(psn);
}

/// Completes every outstanding receive WQE of the QP's own receive queue (and one taken from
/// its SRQ for a message in progress) with `WR_FLUSH_ERR`.
pub(crate) fn flush_rq(dev: &Device, qp: &Qp) {
    let mut rs = qp.resp.lock();
    flush_rq_locked(dev, qp, &mut rs);
}

fn flush_rq_locked(dev: &Device, qp: &Qp, rs: &mut RespCtx) {
    if let InMsg::Send {
        wqe,
        from_srq: true,
        ..
    } = core::mem::replace(&mut rs.msg, InMsg::None)
    {
        recv_complete_error(dev, qp, &rs.cq, &wqe, WcStatus::WrFlushErr);
    }
    if qp.srq.is_some() {
        return;
    }
    while let Some(slot) = qp.rq.consumer_slot() {
        let w = RecvWqe::read(slot, qp.rq_max_sge as usize);
        recv_complete_error(dev, qp, &rs.cq, &w, WcStatus::WrFlushErr);
        qp.rq.consume(1);
    }
}

/// Sets (or cancels) the QP's platform timer to its next deadline.
fn sync_timer(dev: &Device, qp: &Qp, ctx: &mut SqCtx) {
    let tx = &mut ctx.tx;
    if tx.started == 0 {
        tx.ack_due = None;
    } else if tx.ack_due.is_none()
        && tx.rnr_until.is_none()
        && let Some(t) = ack_timeout_ns(ctx.timeout)
    {
        tx.ack_due = Some(dev.now_ns().saturating_add(t));
        tx.ack_una = tx.una;
    }
    // While an RNR wait runs nothing is sent, so it is the only deadline that matters.
    let due = tx.rnr_until.or(tx.ack_due);
    if due != tx.timer_due {
        match due {
            Some(d) => dev.set_timer(&qp.timer, d),
            None => dev.cancel_timer(&qp.timer),
        }
        tx.timer_due = due;
    }
}

// ---------------------------------------------------------------------------------------------
// Scatter/gather lists and copies

/// A resolved piece of a scatter/gather list: its region as the side's cache lends it (or
/// owned, for a segment kept across packets).
#[derive(Debug)]
pub(crate) struct Seg<'a> {
    mr: MrRef<'a>,
    off: u64,
    len: u64,
}

impl Seg<'_> {
    /// The same piece, owning its region (to keep it in a context between packets).
    fn into_owned(self) -> Seg<'static> {
        Seg {
            mr: self.mr.into_owned(),
            off: self.off,
            len: self.len,
        }
    }
}

/// A resolved scatter/gather list (no allocation: at most [`MAX_SGE`] pieces). Making one
/// writes nothing but its length and dropping one visits only the pieces it holds: a request
/// has one or two SGEs, and the data path builds a list for every request.
#[derive(Debug)]
pub(crate) struct SegList<'a> {
    segs: ArrayVec<Seg<'a>, MAX_SGE>,
    total: u64,
}

impl<'a> SegList<'a> {
    const fn new() -> Self {
        SegList {
            segs: ArrayVec::new_const(),
            total: 0,
        }
    }
    fn push(&mut self, mr: MrRef<'a>, off: u64, len: u64) {
        if len == 0 || self.segs.is_full() {
            return;
        }
        self.segs.push(Seg { mr, off, len });
        self.total += len;
    }
    fn iter(&self) -> impl Iterator<Item = &Seg<'a>> {
        self.segs.iter()
    }
    /// The same list, owning its regions (to keep it in a context between packets).
    fn into_owned(self) -> SegList<'static> {
        let mut owned = SegList::new();
        for seg in self.segs {
            let seg = seg.into_owned();
            owned.push(seg.mr, seg.off, seg.len);
        }
        owned
    }
}

/// Resolves SGEs against `dev`'s regions (through the side's cache `mrs`) for protection
/// domain `pd` into `list` (built in place: the list is large, and the data path moves nothing
/// it can avoid).
fn resolve_into<'a>(
    list: &mut SegList<'a>,
    dev: &Device,
    mrs: &'a MrCache,
    pd: u32,
    sges: impl Iterator<Item = crate::wr::Sge>,
    want: Want,
) -> Result<(), ()> {
    for s in sges {
        if s.length == 0 {
            continue;
        }
        let mr = mrs.get(dev, s.lkey).ok_or(())?;
        let off = mr.check(s.lkey, pd, s.addr, u64::from(s.length), want)?;
        list.push(mr, off, u64::from(s.length));
    }
    Ok(())
}

/// The buffers of a receive WQE, resolved for the device to write.
fn resolve_recv<'a>(
    dst: &mut SegList<'a>,
    tdev: &Device,
    mrs: &'a MrCache,
    t: &Qp,
    w: &RecvWqe,
) -> Result<(), ()> {
    resolve_into(
        dst,
        tdev,
        mrs,
        t.pd,
        w.sges[..w.n].iter().copied(),
        Want::LocalWrite,
    )
}

/// Where a message's bytes come from.
enum Src<'a> {
    Bytes(&'a [u8]),
    Segs(&'a SegList<'a>),
}

impl Src<'_> {
    fn len(&self) -> u64 {
        match self {
            Src::Bytes(b) => b.len() as u64,
            Src::Segs(s) => s.total,
        }
    }
}

/// A write cursor over destination segments.
struct Cursor<'s, 'a> {
    segs: &'s [Seg<'a>],
    i: usize,
    off: u64,
}

impl<'s, 'a> Cursor<'s, 'a> {
    /// A cursor at byte `pos` of `dst`.
    fn at(dst: &'s SegList<'a>, pos: u64) -> Self {
        Self::over(&dst.segs, pos)
    }
    /// A cursor at byte `pos` of the segments `segs`.
    fn over(segs: &'s [Seg<'a>], pos: u64) -> Self {
        let mut c = Cursor { segs, i: 0, off: 0 };
        let mut left = pos;
        for s in segs {
            if left < s.len {
                break;
            }
            left -= s.len;
            c.i += 1;
        }
        c.off = left;
        c
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
            let seg = self.segs.get(self.i).ok_or(())?;
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
    /// Copies bytes `[from, from + len)` of `src`.
    fn put_src(&mut self, src: &Src<'_>, from: u64, len: u64) -> Result<(), ()> {
        match src {
            Src::Bytes(b) => {
                let b = b.get(from as usize..(from + len) as usize).ok_or(())?;
                self.put(Some(b), None, len)
            }
            Src::Segs(list) => {
                let (mut skip, mut left) = (from, len);
                for s in list.iter() {
                    if left == 0 {
                        break;
                    }
                    if skip >= s.len {
                        skip -= s.len;
                        continue;
                    }
                    let n = (s.len - skip).min(left);
                    self.put(None, Some((&s.mr.range, s.off + skip)), n)?;
                    skip = 0;
                    left -= n;
                }
                if left == 0 { Ok(()) } else { Err(()) }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Messages, packets and answers

/// A global route header, as the receiver of a UD message sees it.
#[derive(Clone, Copy, Debug)]
struct Grh {
    sgid: Gid,
    dgid: Gid,
    hop_limit: u8,
    traffic_class: u8,
    flow_label: u32,
}

/// One message on the wire: the request's headers and where its payload comes from. It
/// travels as `npkts` packets of `mtu` bytes (the last one shorter), PSNs from `first_psn`.
struct Msg<'a> {
    qp_type: QpType,
    op: WrOpcode,
    src_qpn: u32,
    first_psn: u32,
    /// Request packets (1 for a read or an atomic).
    npkts: u32,
    /// PSNs the request takes (a read: as many as its response has packets).
    psns: u32,
    mtu: u64,
    len: u64,
    src: Src<'a>,
    remote_addr: u64,
    rkey: u32,
    imm_or_inv: u32,
    solicited: bool,
    atomic: AtomicArgs,
    qkey: u32,
    grh: Option<Grh>,
    slid: u16,
    /// Where a read's response data goes (the requester's buffers).
    read_dst: Option<&'a SegList<'a>>,
}

impl Msg<'_> {
    /// The payload bytes of packets `[i0, i0 + n)`: their offset in the message and length.
    fn payload(&self, i0: u32, n: u32) -> (u64, u64) {
        let from = u64::from(i0) * self.mtu;
        let to = (u64::from(i0 + n) * self.mtu).min(self.len);
        (from, to.saturating_sub(from))
    }
}

/// The answer to the last packet of a burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    /// Every PSN up to this one arrived.
    Ack(u32),
    /// The read whose last response PSN this is was answered (its data is in place).
    ReadResp(u32),
    /// The atomic of this PSN was answered with the original value.
    AtomicResp(u32, u64),
    /// Receiver not ready for this PSN; retry after the delay.
    Rnr(u32, u64),
    /// Out of sequence: the responder expects this PSN.
    NakSeq(u32),
    /// A fatal NAK for this PSN (invalid request, remote access or operational error).
    Nak(u32, WcStatus),
    /// Nothing came back.
    Lost,
}

/// The fates of `n` packets from `from` to port `to_port` of `to`: how many in a row arrive,
/// and what happens to the next one (a port that is down loses all). A loopback packet (`from`
/// is `to`) goes through the same transport as any other, so the fabric's fault injection
/// decides it too; a device on no fabric loops back losslessly. `delivered` is the sender's
/// count of packets delivered on a lossless link.
fn fates(
    from: &Arc<Device>,
    to: &Arc<Device>,
    to_port: u8,
    n: u32,
    delivered: &mut u64,
) -> (u32, Option<Fate>) {
    if !to.port_up(to_port) || to.is_removed() {
        return (0, Some(Fate::Drop));
    }
    match from.fabric() {
        Some(f) => f.fates_from(delivered, n),
        None if Arc::ptr_eq(from, to) => (n, None),
        None => (0, Some(Fate::Drop)),
    }
}

fn opcode_allowed(op: WrOpcode, t: QpType) -> bool {
    match t {
        QpType::Ud => matches!(op, WrOpcode::Send | WrOpcode::SendWithImm),
        QpType::Uc => !op.is_read_or_atomic(),
        QpType::Rc => true,
    }
}

/// Whether the opcode may be posted on a QP of this type (the `EINVAL` check of post_send).
pub(crate) fn opcode_valid(op: WrOpcode, t: QpType) -> bool {
    opcode_allowed(op, t)
}

/// Executes a local operation (no packet): invalidation, fast registration, window binding.
fn local_op(dev: &Device, qp: &KArc<Qp>, wqe: &SendWqe, op: WrOpcode) -> WcStatus {
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
            let r = wqe.reg();
            let ok = dev
                .mr_by_key(r.mr_key)
                .filter(|mr| mr.pd == qp.pd)
                .is_some_and(|mr| {
                    mr.fast_register(r.mr_key, r.new_key_byte, r.access, r.iova, r.length)
                        .is_ok()
                });
            if ok {
                WcStatus::Success
            } else {
                WcStatus::LocQpOpErr
            }
        }
        WrOpcode::BindMw => {
            let (b, by_verb) = wqe.bind();
            let Some(mw) = dev.mw_by_key(b.mw_rkey) else {
                return WcStatus::MwBindErr;
            };
            let mr = if b.length == 0 {
                None
            } else {
                dev.mr_by_key(b.mr_lkey)
            };
            match mw.bind(qp, qp.pd, mr, &b, by_verb) {
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
/// initialised or moved for nothing.
#[derive(Default)]
struct LocalStore<'c> {
    list: Option<SegList<'c>>,
    inline: Option<[u8; MAX_INLINE]>,
}

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
        wqe: &SendWqe,
        slot: &[crate::ring::Word],
        op: WrOpcode,
    ) -> Result<Self, WcStatus> {
        let rd = op.is_read_or_atomic();
        if wqe.flags & send_flags::INLINE != 0 && !rd {
            let n = inline_len(slot, wqe.inline_len).min(MAX_INLINE);
            let buf = store.inline.insert([0u8; MAX_INLINE]);
            inline_range(slot, 0, &mut buf[..n]);
            return Ok(Local {
                list: None,
                inline: &buf[..n],
            });
        }
        let want = if rd {
            Want::LocalWrite
        } else {
            Want::LocalRead
        };
        let n = wqe.num_sge.min(qp.sq_max_sge as usize).min(MAX_SGE);
        let list = store.list.insert(SegList::new());
        resolve_into(
            list,
            dev,
            mrs,
            qp.pd,
            (0..n).map(|i| sge_at(slot, SQ_HDR_WORDS, i)),
            want,
        )
        .map_err(|()| WcStatus::LocProtErr)?;
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
    fn src(&self, op: WrOpcode) -> Src<'s> {
        if op.is_read_or_atomic() {
            Src::Bytes(&[])
        } else if let Some(list) = self.list {
            Src::Segs(list)
        } else {
            Src::Bytes(self.inline)
        }
    }
    /// The message length: what is sent, or what a read asks for.
    fn len(&self, op: WrOpcode) -> u64 {
        if op == WrOpcode::RdmaRead {
            self.list().total
        } else if op.is_atomic() {
            8
        } else {
            self.src(op).len()
        }
    }
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
    let d = dev.route(grh, dgid, dlid)?;
    // Read before the lookup: a destroy after it moves the epoch, so the target is looked up
    // again; a destroy before it is seen by the lookup.
    let epoch = d.qp_epoch();
    let port = d.port_of(grh, dgid, dlid)?;
    let qp = d.qp_by_qpn(qpn)?;
    Some(Target {
        dev: d,
        qp,
        port,
        epoch,
    })
}

/// The connected peer of a UC or RC requester: the cached one while current, else resolved
/// (and cached).
fn connected_peer<'r>(
    dev: &Arc<Device>,
    ctx: &SqCtx,
    peer: &'r mut Option<Target>,
) -> Option<&'r Target> {
    if !peer.as_ref().is_some_and(Target::current) {
        *peer = resolve_target(
            dev,
            ctx.av.grh_valid,
            &ctx.av.dgid,
            ctx.av.dlid,
            ctx.dest_qpn,
        );
    }
    peer.as_ref()
}

/// The target of a UD send: the cached one when it is the same destination and current, else
/// resolved (and cached).
fn ud_target<'r>(
    dev: &Arc<Device>,
    cached: &'r mut Option<(UdDest, Target)>,
    dest: UdDest,
) -> Option<&'r Target> {
    if !matches!(cached, Some((d, t)) if *d == dest && t.current()) {
        *cached = resolve_target(dev, dest.grh, &dest.dgid, dest.dlid, dest.qpn).map(|t| (dest, t));
    }
    cached.as_ref().map(|(_, t)| t)
}

// ---------------------------------------------------------------------------------------------
// UC and UD requester

fn unreliable_step(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ctx: &mut SqCtx,
    refs: &mut SqRefs,
    st: QpState,
) -> bool {
    if st == QpState::Sqd {
        // Nothing is ever in flight: the queue is drained, new requests wait for RTS.
        return false;
    }
    let Some(slot) = qp.sq.consumer_slot() else {
        return false;
    };
    let wqe = SendWqe::decode(slot);
    let (status, len) = match WrOpcode::from_u8(wqe.opcode) {
        Some(op) if opcode_allowed(op, qp.qp_type) => {
            if op.is_local() {
                (local_op(dev, qp, &wqe, op), 0)
            } else {
                send_unreliable(dev, qp, ctx, refs, &wqe, slot, op)
            }
        }
        _ => (WcStatus::LocQpOpErr, 0),
    };
    complete_send(dev, qp, &ctx.cq, &wqe, status, len);
    qp.sq.consume(1);
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
    wqe: &SendWqe,
    slot: &[crate::ring::Word],
    op: WrOpcode,
) -> (WcStatus, u32) {
    refs.mrs.validate(dev);
    let mut store = LocalStore::default();
    let local = match Local::new(&mut store, dev, &refs.mrs, qp, wqe, slot, op) {
        Ok(l) => l,
        Err(s) => return (s, 0),
    };
    let len = local.len(op);
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
        src: local.src(op),
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
        let a = wqe.ud();
        msg.qkey = if a.remote_qkey & 0x8000_0000 != 0 {
            ctx.qkey
        } else {
            a.remote_qkey
        };
        if a.grh {
            let Some(sgid) = dev.sgid(port, a.sgid_index) else {
                return (WcStatus::LocQpOpErr, 0);
            };
            msg.grh = Some(Grh {
                sgid,
                dgid: a.dgid,
                hop_limit: a.hop_limit,
                traffic_class: a.traffic_class,
                flow_label: a.flow_label,
            });
            if a.dgid[0] == 0xFF {
                deliver_multicast(dev, &msg, &a.dgid, &mut ctx.delivered);
                return (WcStatus::Success, len as u32);
            }
        }
        let dest = UdDest {
            grh: a.grh,
            dgid: a.dgid,
            dlid: a.dlid,
            qpn: a.remote_qpn,
        };
        ud_target(dev, &mut refs.ud_peer, dest)
    } else {
        connected_peer(dev, ctx, &mut refs.peer)
    };
    if let Some(Target {
        dev: tdev,
        qp: t,
        port: tport,
        ..
    }) = target
    {
        let mut i = 0;
        while i < npkts {
            let (ok, fate) = fates(dev, tdev, *tport, npkts - i, &mut ctx.delivered);
            if ok > 0 {
                respond(tdev, t, &msg, i, ok);
                i += ok;
            }
            match fate {
                // Unreliable: a late packet is as good as a timely one.
                Some(Fate::Delay) => {
                    respond(tdev, t, &msg, i, 1);
                    i += 1;
                }
                Some(_) => i += 1,
                None => {}
            }
        }
    }
    (WcStatus::Success, len as u32)
}

/// A UD send to a multicast GID: a copy to every attached QP whose port is up, on this device
/// (loopback) and on every device of the fabric, each remote device's copy subject to the link.
fn deliver_multicast(dev: &Arc<Device>, msg: &Msg<'_>, group: &Gid, delivered: &mut u64) {
    let mut visit = |d: &Arc<Device>| {
        let arrives = Arc::ptr_eq(d, dev)
            || dev
                .fabric()
                .is_some_and(|f| matches!(f.fate_from(delivered), Fate::Deliver | Fate::Delay));
        if !arrives {
            return;
        }
        let members = d.mcast.read();
        for (g, qpn) in members.iter() {
            if g == group
                && let Some(t) = d.qp_by_qpn(*qpn)
                && d.port_up(t.port())
            {
                respond(d, &t, msg, 0, 1);
            }
        }
    };
    match dev.fabric() {
        Some(f) => f.for_each(visit),
        None => visit(dev),
    }
}

// ---------------------------------------------------------------------------------------------
// RC requester

fn slot_of(qp: &Qp, i: u32) -> usize {
    ((qp.sq.head() + i) & (qp.sq.entries() - 1)) as usize
}

/// One step of the RC requester: (re)send what can be sent next. Returns whether to go on.
fn rc_step(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ctx: &mut SqCtx,
    refs: &mut SqRefs,
    st: QpState,
) -> bool {
    if ctx.tx.rnr_until.is_some() || ctx.tx.ack_due.is_some() {
        let now = dev.now_ns();
        if let Some(t) = ctx.tx.rnr_until {
            if now < t {
                return false;
            }
            ctx.tx.rnr_until = None;
        }
        if let Some(t) = ctx.tx.ack_due
            && now >= t
        {
            ctx.tx.ack_due = None;
            if ctx.tx.started > 0 && ctx.tx.una == ctx.tx.ack_una {
                // The local ACK timeout: resend from the oldest unacknowledged packet.
                if !retry(dev, qp, ctx, WcStatus::RetryExcErr) {
                    return true;
                }
                let una = ctx.tx.una;
                go_back(qp, ctx, una);
            }
            // Otherwise there was progress since the timer was armed: it restarts.
        }
    }
    let cur = ctx.tx.cur;
    let Some(slot) = qp.sq.consumer_slot_at(cur) else {
        return false;
    };
    let new = cur == ctx.tx.started;
    if new && st == QpState::Sqd {
        return false;
    }
    let wqe = SendWqe::decode(slot);
    let Some(op) = WrOpcode::from_u8(wqe.opcode) else {
        return fail_at(dev, qp, ctx, cur, WcStatus::LocQpOpErr);
    };
    if op.is_local() {
        // Local operations run when everything before them has completed.
        if ctx.tx.started > 0 {
            return false;
        }
        let status = local_op(dev, qp, &wqe, op);
        complete_send(dev, qp, &ctx.cq, &wqe, status, 0);
        qp.sq.consume(1);
        if status != WcStatus::Success && qp.set_error() {
            enter_error(dev, qp);
        }
        return true;
    }
    if new {
        if op.is_read_or_atomic() && ctx.tx.rd_out >= ctx.max_rd_atomic.max(1) {
            return false;
        }
        if wqe.flags & send_flags::FENCE != 0 && ctx.tx.rd_out > 0 {
            return false;
        }
    }
    rc_send(dev, qp, ctx, refs, &wqe, slot, op, new)
}

/// Fails request `i` (from the head) with `status`: at once when it is the head, else when
/// the requests before it have completed.
fn fail_at(dev: &Arc<Device>, qp: &KArc<Qp>, ctx: &mut SqCtx, i: u32, status: WcStatus) -> bool {
    if i != 0 {
        return false;
    }
    fail_head(dev, qp, ctx, status);
    true
}

/// Completes the oldest request with an error and moves the QP to ERR (the rest flushes).
fn fail_head(dev: &Arc<Device>, qp: &KArc<Qp>, ctx: &mut SqCtx, status: WcStatus) {
    if let Some(slot) = qp.sq.consumer_slot() {
        let wqe = SendWqe::decode(slot);
        complete_send(dev, qp, &ctx.cq, &wqe, status, 0);
        qp.sq.consume(1);
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

/// Moves the send position back to the packet of PSN `psn` (Go-Back-N); a read or atomic is
/// asked again whole.
fn go_back(qp: &Qp, ctx: &mut SqCtx, psn: u32) {
    let tx = &mut ctx.tx;
    tx.cur = tx.started;
    tx.cur_pkt = 0;
    for i in 0..tx.started {
        let t = tx.track[slot_of(qp, i)];
        let off = psn_diff(psn, t.first_psn);
        if off >= 0 && (off as u32) < t.npkts {
            tx.cur = i;
            tx.cur_pkt = if t.rd { 0 } else { off as u32 };
            break;
        }
    }
    skip_acked(qp, ctx);
}

/// Never resends what was acknowledged or answered.
fn skip_acked(qp: &Qp, ctx: &mut SqCtx) {
    let tx = &mut ctx.tx;
    while tx.cur < tx.started {
        let t = tx.track[slot_of(qp, tx.cur)];
        if t.rd {
            if !t.done {
                break;
            }
            tx.cur += 1;
            tx.cur_pkt = 0;
            continue;
        }
        let acked = psn_diff(tx.una, t.first_psn).max(0) as u32;
        if acked >= t.npkts {
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
        let t = ctx.tx.track[slot_of(qp, 0)];
        let last = psn_add(t.first_psn, t.npkts - 1);
        let covered = psn_diff(last, ctx.tx.una) < 0;
        if t.rd && !t.done {
            if covered {
                // A later packet was acknowledged but this read or atomic got no response:
                // it was lost (an implied NAK). Ask again.
                if retry(dev, qp, ctx, WcStatus::RetryExcErr) {
                    go_back(qp, ctx, t.first_psn);
                }
            }
            break;
        }
        if !covered {
            break;
        }
        let wqe = SendWqe::decode(slot);
        complete_send(dev, qp, &ctx.cq, &wqe, WcStatus::Success, t.len);
        qp.sq.consume(1);
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

/// Acts on the answer to packets of request `i` (from the head). Returns `false` when the
/// requester must wait (an RNR NAK).
fn on_reply(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ctx: &mut SqCtx,
    i: u32,
    local: &Local,
    reply: Reply,
) -> bool {
    let answered = |ctx: &mut SqCtx| {
        let t = &mut ctx.tx.track[slot_of(qp, i)];
        if !t.done {
            t.done = true;
            ctx.tx.rd_out -= 1;
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
            if Cursor::at(local.list(), 0)
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

/// (Re)sends the packets of request `i = ctx.tx.cur` from `ctx.tx.cur_pkt` on: in bursts
/// while the link delivers, packet by packet around a loss. Returns whether to go on.
#[allow(clippy::too_many_arguments)]
fn rc_send(
    dev: &Arc<Device>,
    qp: &KArc<Qp>,
    ctx: &mut SqCtx,
    refs: &mut SqRefs,
    wqe: &SendWqe,
    slot: &[crate::ring::Word],
    op: WrOpcode,
    new: bool,
) -> bool {
    let i = ctx.tx.cur;
    refs.mrs.validate(dev);
    let mut store = LocalStore::default();
    let local = match Local::new(&mut store, dev, &refs.mrs, qp, wqe, slot, op) {
        Ok(l) => l,
        Err(s) => return fail_at(dev, qp, ctx, i, s),
    };
    let len = local.len(op);
    if len > u64::from(dev.limits().max_msg) {
        return fail_at(dev, qp, ctx, i, WcStatus::LocLenErr);
    }
    let rd = op.is_read_or_atomic();
    let mtu = u64::from(ctx.mtu.bytes());
    let data_pkts = len.div_ceil(mtu).max(1) as u32;
    let (npkts, psns) = match op {
        WrOpcode::RdmaRead => (1, data_pkts),
        _ if rd => (1, 1),
        _ => (data_pkts, data_pkts),
    };
    let ti = slot_of(qp, i);
    if new {
        ctx.tx.track[ti] = Track {
            first_psn: ctx.psn,
            npkts: psns,
            len: len as u32,
            rd,
            done: false,
        };
        ctx.psn = psn_add(ctx.psn, psns);
        ctx.tx.started += 1;
        if rd {
            ctx.tx.rd_out += 1;
        }
    }
    let first_psn = ctx.tx.track[ti].first_psn;
    let port = ctx.av.port.max(1);
    let target = connected_peer(dev, ctx, &mut refs.peer);
    let msg = Msg {
        qp_type: QpType::Rc,
        op,
        src_qpn: qp.qpn,
        first_psn,
        npkts,
        psns,
        mtu,
        len,
        src: local.src(op),
        remote_addr: wqe.remote_addr,
        rkey: wqe.rkey,
        imm_or_inv: wqe.imm_or_inv,
        solicited: wqe.flags & send_flags::SOLICITED != 0,
        atomic: if op.is_atomic() {
            wqe.atomic()
        } else {
            AtomicArgs::default()
        },
        qkey: 0,
        grh: None,
        slid: dev.lid(port),
        read_dst: rd.then_some(local.list()),
    };
    let up = dev.port_up(port);
    loop {
        let from = ctx.tx.cur_pkt;
        if from >= npkts {
            ctx.tx.cur += 1;
            ctx.tx.cur_pkt = 0;
            return true;
        }
        let (ok, fate) = match target {
            Some(t) if up => fates(dev, &t.dev, t.port, npkts - from, &mut ctx.delivered),
            _ => (0, Some(Fate::Drop)),
        };
        if ok > 0
            && let Some(t) = target
        {
            let reply = respond(&t.dev, &t.qp, &msg, from, ok);
            let last_psn = psn_add(first_psn, psns - 1);
            let whole = match reply {
                Reply::Ack(p) => !rd && p == last_psn,
                Reply::ReadResp(p) => op == WrOpcode::RdmaRead && p == last_psn,
                _ => false,
            };
            if whole && ctx.tx.started == 1 {
                // The common case: the only request in flight, acknowledged (or, a read,
                // answered) whole. Nothing before it waits, so it completes here without the
                // walk over the requests in flight that `on_reply` makes.
                let tx = &mut ctx.tx;
                if rd && !tx.track[ti].done {
                    tx.rd_out -= 1;
                }
                tx.una = psn_add(first_psn, psns);
                tx.retries = ctx.retry_cnt;
                tx.rnrs = ctx.rnr_retry;
                tx.started = 0;
                tx.cur = 0;
                tx.cur_pkt = 0;
                complete_send(dev, qp, &ctx.cq, wqe, WcStatus::Success, len as u32);
                qp.sq.consume(1);
                return true;
            }
            if reply == Reply::Lost {
                ctx.tx.cur_pkt = from + ok;
            } else {
                let go_on = on_reply(dev, qp, ctx, i, &local, reply);
                // An ACK of the burst leaves the position right after it: the packet after it
                // (whose fate is decided) goes on the wire too. Anything else moved the
                // position (or ended the request): that packet was sent and is ignored.
                let moved_on = qp.state() == QpState::Rts || qp.state() == QpState::Sqd;
                if fate.is_none()
                    || !go_on
                    || !moved_on
                    || !matches!(reply, Reply::Ack(_))
                    || ctx.tx.cur != i
                    || ctx.tx.cur_pkt != from + ok
                {
                    return go_on;
                }
            }
        }
        if let Some(fate) = fate {
            if fate == Fate::Delay
                && let Some(t) = target
            {
                // It arrives and is acted on; its answer comes too late.
                let _ = respond(&t.dev, &t.qp, &msg, ctx.tx.cur_pkt, 1);
            }
            ctx.tx.cur_pkt += 1;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The responder

/// A message being received across packets (in `RespCtx`).
#[derive(Debug, Default)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per QP, in its responder context; boxing would allocate per message"
)]
pub(crate) enum InMsg {
    #[default]
    None,
    /// A send: its receive WQE (taken from the SRQ, or still at the head of the RQ until the
    /// message completes) and the resolved buffers.
    Send {
        wqe: RecvWqe,
        from_srq: bool,
        dst: SegList<'static>,
    },
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

/// The responder: executes packets `[i0, i0 + n)` of `m` on QP `t` of device `tdev`, then
/// raises the interrupts that caused on the receiving device (with only the requester's
/// `sq_ctx` held, which the data path only ever `try_lock`s, so an inline DPC cannot deadlock
/// against it).
fn respond(tdev: &Arc<Device>, t: &KArc<Qp>, m: &Msg<'_>, i0: u32, n: u32) -> Reply {
    let mut after = After::default();
    let r = respond_locked(tdev, t, m, i0, n, &mut after);
    if after.comm_est {
        tdev.post_qp_event(t, QpEvent::CommEstablished);
    }
    if after.errored {
        if t.srq.is_some() {
            tdev.post_qp_event(t, QpEvent::LastWqeReached);
        }
        run_sq(tdev, t);
    }
    tdev.deliver_interrupts();
    r
}

fn respond_locked(
    tdev: &Arc<Device>,
    t: &KArc<Qp>,
    m: &Msg<'_>,
    i0: u32,
    n: u32,
    after: &mut After,
) -> Reply {
    if tdev.is_removed() {
        return Reply::Lost;
    }
    let mut rs = t.resp.lock();
    let st = t.state();
    if !matches!(
        st,
        QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::SqError
    ) || t.qp_type != m.qp_type
    {
        return Reply::Lost;
    }
    // The regions kept between messages, out of the context while it is borrowed whole.
    let mut mrs = core::mem::take(&mut rs.mrs);
    mrs.validate(tdev);
    let reply = match t.qp_type {
        QpType::Ud => {
            if m.qkey == rs.qkey {
                ud_receive(tdev, t, &rs, &mrs, m, after);
            }
            Reply::Lost
        }
        QpType::Uc => {
            if rs.dest_qpn == m.src_qpn {
                uc_receive(tdev, t, &mut rs, &mrs, m, i0, n, after);
            }
            Reply::Lost
        }
        QpType::Rc if rs.dest_qpn != m.src_qpn => Reply::Lost,
        QpType::Rc => rc_receive(tdev, t, &mut rs, &mrs, m, i0, n, st, after),
    };
    rs.mrs = mrs;
    if after.errored {
        if t.set_error() {
            flush_rq_locked(tdev, t, &mut rs);
        } else {
            after.errored = false;
        }
    }
    reply
}

/// The next receive WQE of `t`: taken from its SRQ, or read at the head of its RQ (consumed
/// when the message completes).
fn next_recv(tdev: &Device, t: &Qp) -> Option<(RecvWqe, bool)> {
    match &t.srq {
        Some(srq) => srq.take(tdev).map(|w| (w, true)),
        None => {
            t.rq.consumer_slot()
                .map(|s| (RecvWqe::read(s, t.rq_max_sge as usize), false))
        }
    }
}

/// A receive WQE is done with: an RQ WQE leaves the ring now (an SRQ one already has).
fn retire_recv(t: &Qp, from_srq: bool) {
    if !from_srq {
        t.rq.consume(1);
    }
}

fn recv_complete_error(tdev: &Device, t: &Qp, port: &CqPort, w: &RecvWqe, status: WcStatus) {
    let wc = WorkCompletion {
        wr_id: w.wr_id,
        status,
        opcode: WcOpcode::Recv,
        qp_num: t.qpn,
        ..WorkCompletion::default()
    };
    port.post(tdev, &wc, true);
}

/// A receive WQE names memory the QP may not write: the receive completes with
/// `LOC_PROT_ERR` and the QP goes to ERR, whatever its type (class A).
fn bad_recv_wqe(
    tdev: &Device,
    t: &Qp,
    port: &CqPort,
    w: &RecvWqe,
    from_srq: bool,
    after: &mut After,
) {
    recv_complete_error(tdev, t, port, w, WcStatus::LocProtErr);
    retire_recv(t, from_srq);
    after.errored = true;
}

/// Checks a remote access of `len` bytes at `addr` under `rkey` (a region's or a window's)
/// for `want`, by QP `t` whose access flags are `qp_access`.
#[allow(clippy::too_many_arguments)]
fn remote_range<'a>(
    tdev: &Device,
    t: &Qp,
    mrs: &'a MrCache,
    qp_access: u32,
    rkey: u32,
    addr: u64,
    len: u64,
    want: Want,
) -> Option<Seg<'a>> {
    if qp_access & want.remote_bit() == 0 {
        return None;
    }
    if is_mw_key(rkey) {
        let mw = tdev.mw_by_key(rkey)?;
        let (mr, off) = mw.check(rkey, t, t.pd, addr, len, want).ok()?;
        Some(Seg {
            mr: MrRef::Owned(mr),
            off,
            len,
        })
    } else {
        let mr = mrs.get(tdev, rkey)?;
        let off = mr.check(rkey, t.pd, addr, len, want).ok()?;
        Some(Seg { mr, off, len })
    }
}

/// Invalidates the region or window `key` names on behalf of QP `t` (`SEND_WITH_INV`).
fn invalidate_remote(tdev: &Device, t: &Qp, key: u32) -> bool {
    if is_mw_key(key) {
        tdev.mw_by_key(key)
            .is_some_and(|mw| mw.invalidate(key, t.pd).is_ok())
    } else {
        tdev.mr_by_key(key)
            .filter(|mr| mr.pd == t.pd)
            .is_some_and(|mr| mr.invalidate(key).is_ok())
    }
}

/// Writes the receive completion of a message.
fn recv_complete(
    tdev: &Device,
    t: &Qp,
    port: &CqPort,
    m: &Msg<'_>,
    w: &RecvWqe,
    byte_len: u64,
    flags: u32,
) {
    let mut flags = flags;
    let mut imm = 0;
    match m.op {
        WrOpcode::SendWithImm | WrOpcode::RdmaWriteWithImm => {
            flags |= wc_flags::WITH_IMM;
            imm = m.imm_or_inv;
        }
        WrOpcode::SendWithInv => {
            flags |= wc_flags::WITH_INV;
            imm = m.imm_or_inv;
        }
        _ => {}
    }
    let wc = WorkCompletion {
        wr_id: w.wr_id,
        opcode: if m.op == WrOpcode::RdmaWriteWithImm {
            WcOpcode::RecvRdmaWithImm
        } else {
            WcOpcode::Recv
        },
        byte_len: byte_len as u32,
        imm_data: imm,
        wc_flags: flags,
        qp_num: t.qpn,
        src_qp: m.src_qpn,
        slid: m.slid,
        ..WorkCompletion::default()
    };
    port.post(tdev, &wc, m.solicited);
}

/// The GRH a UD receive buffer starts with (IBTA vol. 1, ch. 8): IP version 6, traffic class, flow
/// label, payload length (the packet after the GRH: BTH, DETH, immediate data, payload,
/// ICRC), next header 0x1B (BTH), hop limit, SGID, DGID.
fn grh_bytes(g: &Grh, m: &Msg<'_>) -> [u8; GRH_BYTES] {
    let mut b = [0u8; GRH_BYTES];
    let word0 = (6u32 << 28) | (u32::from(g.traffic_class) << 20) | (g.flow_label & 0xF_FFFF);
    b[0..4].copy_from_slice(&word0.to_be_bytes());
    let imm = if m.op == WrOpcode::SendWithImm { 4 } else { 0 };
    let paylen = 12 + 8 + imm + m.len + 4;
    b[4..6].copy_from_slice(&(paylen as u16).to_be_bytes());
    b[6] = 0x1B;
    b[7] = g.hop_limit;
    b[8..24].copy_from_slice(&g.sgid);
    b[24..40].copy_from_slice(&g.dgid);
    b
}

fn ud_receive(tdev: &Device, t: &Qp, rs: &RespCtx, mrs: &MrCache, m: &Msg<'_>, after: &mut After) {
    let port = &rs.cq;
    let Some((w, from_srq)) = next_recv(tdev, t) else {
        return; // Class D: no receive, no message.
    };
    let mut dst = SegList::new();
    if resolve_recv(&mut dst, tdev, mrs, t, &w).is_err() {
        return bad_recv_wqe(tdev, t, port, &w, from_srq, after);
    }
    let need = GRH_BYTES as u64 + m.len;
    if need > dst.total {
        // Too small: dropped (the WQE stays); a WQE taken from an SRQ completes in error.
        if from_srq {
            recv_complete_error(tdev, t, port, &w, WcStatus::RemInvReqErr);
        }
        return;
    }
    let mut flags = 0;
    if let Some(g) = &m.grh {
        // Only a sender's global route puts a GRH in the buffer; without one its first 40
        // bytes are left as they were.
        if Cursor::at(&dst, 0)
            .put(Some(&grh_bytes(g, m)), None, GRH_BYTES as u64)
            .is_err()
        {
            return bad_recv_wqe(tdev, t, port, &w, from_srq, after);
        }
        flags |= wc_flags::GRH;
    }
    if Cursor::at(&dst, GRH_BYTES as u64)
        .put_src(&m.src, 0, m.len)
        .is_err()
    {
        return bad_recv_wqe(tdev, t, port, &w, from_srq, after);
    }
    retire_recv(t, from_srq);
    recv_complete(tdev, t, port, m, &w, need, flags);
}

/// A UC message in progress is abandoned (a packet of it was lost): its receive stays for the
/// next message, or, taken from an SRQ, completes in error (rxe's classes D1 and E).
fn uc_abandon(tdev: &Device, t: &Qp, rs: &mut RespCtx) {
    if let InMsg::Send {
        wqe,
        from_srq: true,
        ..
    } = core::mem::replace(&mut rs.msg, InMsg::None)
    {
        recv_complete_error(tdev, t, &rs.cq, &wqe, WcStatus::RemInvReqErr);
    }
}

#[allow(clippy::too_many_arguments)]
fn uc_receive(
    tdev: &Device,
    t: &Qp,
    rs: &mut RespCtx,
    mrs: &MrCache,
    m: &Msg<'_>,
    i0: u32,
    n: u32,
    after: &mut After,
) {
    let psn = psn_add(m.first_psn, i0);
    if psn != rs.epsn || i0 == 0 {
        // A gap in the PSNs loses the message in progress; a first packet starts a new one
        // (UC resynchronises on it), a later one is dropped with the rest of its message.
        uc_abandon(tdev, t, rs);
        if i0 != 0 {
            rs.msg = InMsg::Drop;
        }
    }
    rs.epsn = psn_add(psn, n);
    let last = i0 + n == m.npkts;
    if i0 == 0 {
        match m.op {
            WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => {
                let Some((w, from_srq)) = next_recv(tdev, t) else {
                    rs.msg = InMsg::Drop;
                    return;
                };
                let mut dst = SegList::new();
                if resolve_recv(&mut dst, tdev, mrs, t, &w).is_err() {
                    return bad_recv_wqe(tdev, t, &rs.cq, &w, from_srq, after);
                }
                if m.len > dst.total {
                    rs.msg = InMsg::Drop;
                    if from_srq {
                        recv_complete_error(tdev, t, &rs.cq, &w, WcStatus::RemInvReqErr);
                    }
                    return;
                }
                rs.msg = InMsg::Send {
                    wqe: w,
                    from_srq,
                    dst: dst.into_owned(),
                };
            }
            WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => {
                let seg = if m.len == 0 {
                    None
                } else {
                    match remote_range(
                        tdev,
                        t,
                        mrs,
                        rs.access,
                        m.rkey,
                        m.remote_addr,
                        m.len,
                        Want::RemoteWrite,
                    ) {
                        Some(s) => Some(s.into_owned()),
                        None => {
                            rs.msg = InMsg::Drop;
                            return;
                        }
                    }
                };
                rs.msg = InMsg::Write { seg };
            }
            _ => {
                rs.msg = InMsg::Drop;
                return;
            }
        }
    }
    let (from, len) = m.payload(i0, n);
    let placed = match &rs.msg {
        InMsg::Send { dst, .. } => Cursor::at(dst, from).put_src(&m.src, from, len),
        InMsg::Write { seg } => Cursor::over(seg.as_slice(), from).put_src(&m.src, from, len),
        InMsg::None | InMsg::Drop => return,
    };
    if placed.is_err() {
        uc_abandon(tdev, t, rs);
        rs.msg = InMsg::Drop;
        return;
    }
    if !last {
        return;
    }
    match core::mem::replace(&mut rs.msg, InMsg::None) {
        InMsg::Send { wqe, from_srq, .. } => {
            if m.op == WrOpcode::SendWithInv && !invalidate_remote(tdev, t, m.imm_or_inv) {
                retire_recv(t, from_srq);
                recv_complete_error(tdev, t, &rs.cq, &wqe, WcStatus::RemInvReqErr);
                return;
            }
            retire_recv(t, from_srq);
            recv_complete(tdev, t, &rs.cq, m, &wqe, m.len, 0);
        }
        InMsg::Write { .. } if m.op == WrOpcode::RdmaWriteWithImm => {
            // The immediate data needs a receive; without one the message is dropped (its
            // bytes are in place, as on hardware).
            if let Some((w, from_srq)) = next_recv(tdev, t) {
                retire_recv(t, from_srq);
                recv_complete(tdev, t, &rs.cq, m, &w, m.len, 0);
            }
        }
        _ => {}
    }
}

/// The last packet of a send arrived: its receive completes (after the invalidation a
/// `SEND_WITH_INV` asks for).
#[allow(clippy::too_many_arguments)]
fn send_done(
    tdev: &Device,
    t: &Qp,
    port: &CqPort,
    m: &Msg<'_>,
    w: &RecvWqe,
    from_srq: bool,
    last_psn: u32,
    after: &mut After,
) -> Reply {
    retire_recv(t, from_srq);
    if m.op == WrOpcode::SendWithInv && !invalidate_remote(tdev, t, m.imm_or_inv) {
        // Class J: the receive completes in error, the responder goes to ERR.
        recv_complete_error(tdev, t, port, w, WcStatus::RemInvReqErr);
        after.errored = true;
        return Reply::Nak(last_psn, WcStatus::RemInvReqErr);
    }
    recv_complete(tdev, t, port, m, w, m.len, 0);
    Reply::Ack(last_psn)
}

/// Records a read or atomic in the responder resources (the oldest is recycled).
fn record_resource(rs: &mut RespCtx, first_psn: u32, last_psn: u32, kind: ResKind) {
    let cap = (rs.max_dest_rd_atomic as usize).clamp(1, rs.res.len());
    // A ring of `cap` entries, stepped without a division (this runs for every read); a
    // modify may have shrunk `cap` below the next index.
    let at = if rs.res_next < cap { rs.res_next } else { 0 };
    rs.res[at] = Some(RdRes {
        first_psn,
        last_psn,
        kind,
    });
    rs.res_next = if at + 1 < cap { at + 1 } else { 0 };
}

fn find_resource(rs: &RespCtx, psn: u32) -> Option<RdRes> {
    let cap = (rs.max_dest_rd_atomic as usize).clamp(1, rs.res.len());
    rs.res[..cap]
        .iter()
        .flatten()
        .copied()
        .find(|r| psn_diff(psn, r.first_psn) >= 0 && psn_diff(psn, r.last_psn) <= 0)
}

/// Executes an RDMA read: the data goes straight into the requester's buffers.
fn do_read(tdev: &Device, t: &Qp, mrs: &MrCache, access: u32, m: &Msg<'_>) -> Result<(), WcStatus> {
    let Some(dst) = m.read_dst else {
        return Err(WcStatus::RemInvReqErr);
    };
    if m.len == 0 {
        return Ok(());
    }
    let seg = remote_range(
        tdev,
        t,
        mrs,
        access,
        m.rkey,
        m.remote_addr,
        m.len,
        Want::RemoteRead,
    )
    .ok_or(WcStatus::RemAccessErr)?;
    Cursor::at(dst, 0)
        .put(None, Some((&seg.mr.range, seg.off)), m.len)
        .map_err(|()| WcStatus::RemOpErr)
}

#[allow(clippy::too_many_arguments)]
fn rc_receive(
    tdev: &Device,
    t: &Qp,
    rs: &mut RespCtx,
    mrs: &MrCache,
    m: &Msg<'_>,
    i0: u32,
    n: u32,
    st: QpState,
    after: &mut After,
) -> Reply {
    let psn = psn_add(m.first_psn, i0);
    let d = psn_diff(psn, rs.epsn);
    if d > 0 {
        // Out of sequence (a packet before it was lost): one NAK per error, then silence
        // until the expected PSN arrives.
        if rs.nak_sent {
            return Reply::Lost;
        }
        rs.nak_sent = true;
        return Reply::NakSeq(rs.epsn);
    }
    let (mut i0, mut n) = (i0, n);
    if d < 0 {
        // A duplicate (its answer was lost), possibly running into new packets.
        let dup = d.unsigned_abs();
        if m.op.is_read_or_atomic() {
            return match find_resource(rs, psn).map(|r| r.kind) {
                Some(ResKind::Read) => match do_read(tdev, t, mrs, rs.access, m) {
                    Ok(()) => Reply::ReadResp(psn_add(psn, m.psns - 1)),
                    Err(_) => Reply::Lost,
                },
                Some(ResKind::Atomic(orig)) => Reply::AtomicResp(psn, orig),
                // Not in the resources any more (class D): dropped.
                None => Reply::Lost,
            };
        }
        if dup >= n {
            return Reply::Ack(psn_add(rs.epsn, PSN_MASK));
        }
        i0 += dup;
        n -= dup;
    }
    rs.nak_sent = false;
    if st == QpState::Rtr && !rs.comm_est {
        rs.comm_est = true;
        after.comm_est = true;
    }
    let psn = psn_add(m.first_psn, i0);
    let last_psn = psn_add(psn, n - 1);
    // Class C: a fatal NAK, and the responder goes to ERR.
    let fatal = |after: &mut After, status: WcStatus, at: u32| {
        after.errored = true;
        Reply::Nak(at, status)
    };
    match m.op {
        WrOpcode::RdmaRead | WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
            if rs.max_dest_rd_atomic == 0 {
                // No responder resources (rxe's "too many RDMA READ/ATOMIC requests").
                return fatal(after, WcStatus::RemInvReqErr, psn);
            }
            if m.op == WrOpcode::RdmaRead {
                if let Err(s) = do_read(tdev, t, mrs, rs.access, m) {
                    return fatal(after, s, psn);
                }
                let last = psn_add(psn, m.psns - 1);
                record_resource(rs, psn, last, ResKind::Read);
                rs.epsn = psn_add(psn, m.psns);
                return Reply::ReadResp(last);
            }
            let Some(seg) = remote_range(
                tdev,
                t,
                mrs,
                rs.access,
                m.rkey,
                m.remote_addr,
                8,
                Want::RemoteAtomic,
            ) else {
                return fatal(after, WcStatus::RemAccessErr, psn);
            };
            let a = m.atomic;
            let r = if m.op == WrOpcode::AtomicCmpAndSwp {
                seg.mr.range.compare_swap(seg.off, a.compare_add, a.swap)
            } else {
                seg.mr.range.fetch_add(seg.off, a.compare_add)
            };
            let orig = match r {
                Ok(v) => v,
                // A misaligned atomic is an invalid request (rxe's class C).
                Err(AtomicFault::Misaligned) => return fatal(after, WcStatus::RemInvReqErr, psn),
                Err(AtomicFault::OutOfBounds) => return fatal(after, WcStatus::RemAccessErr, psn),
            };
            record_resource(rs, psn, psn, ResKind::Atomic(orig));
            rs.epsn = psn_add(psn, 1);
            Reply::AtomicResp(psn, orig)
        }
        WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => {
            let last = i0 + n == m.npkts;
            let (from, len) = m.payload(i0, n);
            if i0 == 0 {
                // The first packet takes the receive and resolves its buffers (in place; kept
                // in the context only while the message spans several bursts).
                let Some((w, from_srq)) = next_recv(tdev, t) else {
                    return Reply::Rnr(psn, rnr_delay_ns(rs.min_rnr_timer));
                };
                let mut dst = SegList::new();
                if resolve_recv(&mut dst, tdev, mrs, t, &w).is_err() {
                    bad_recv_wqe(tdev, t, &rs.cq, &w, from_srq, after);
                    return Reply::Nak(psn, WcStatus::RemOpErr);
                }
                if m.len > dst.total {
                    recv_complete_error(tdev, t, &rs.cq, &w, WcStatus::LocLenErr);
                    retire_recv(t, from_srq);
                    return fatal(after, WcStatus::RemInvReqErr, psn);
                }
                if Cursor::at(&dst, from).put_src(&m.src, from, len).is_err() {
                    bad_recv_wqe(tdev, t, &rs.cq, &w, from_srq, after);
                    return Reply::Nak(psn, WcStatus::RemOpErr);
                }
                rs.epsn = psn_add(psn, n);
                if !last {
                    rs.msg = InMsg::Send {
                        wqe: w,
                        from_srq,
                        dst: dst.into_owned(),
                    };
                    return Reply::Ack(last_psn);
                }
                return send_done(tdev, t, &rs.cq, m, &w, from_srq, last_psn, after);
            }
            let InMsg::Send { wqe, from_srq, dst } = &rs.msg else {
                // A later packet without its first (cannot happen in sequence).
                return fatal(after, WcStatus::RemInvReqErr, psn);
            };
            if Cursor::at(dst, from).put_src(&m.src, from, len).is_err() {
                let (w, srq) = (*wqe, *from_srq);
                rs.msg = InMsg::None;
                bad_recv_wqe(tdev, t, &rs.cq, &w, srq, after);
                return Reply::Nak(psn, WcStatus::RemOpErr);
            }
            rs.epsn = psn_add(psn, n);
            if !last {
                return Reply::Ack(last_psn);
            }
            let (w, srq) = (*wqe, *from_srq);
            rs.msg = InMsg::None;
            send_done(tdev, t, &rs.cq, m, &w, srq, last_psn, after)
        }
        WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => {
            let last = i0 + n == m.npkts;
            // The remote range is checked at the first packet (its RETH carries the whole
            // length) and kept in the context while the message spans several bursts.
            let seg = if i0 == 0 {
                if m.len == 0 {
                    None
                } else {
                    match remote_range(
                        tdev,
                        t,
                        mrs,
                        rs.access,
                        m.rkey,
                        m.remote_addr,
                        m.len,
                        Want::RemoteWrite,
                    ) {
                        Some(s) => Some(s),
                        None => return fatal(after, WcStatus::RemAccessErr, psn),
                    }
                }
            } else {
                match core::mem::replace(&mut rs.msg, InMsg::None) {
                    InMsg::Write { seg } => seg,
                    _ => return fatal(after, WcStatus::RemInvReqErr, psn),
                }
            };
            // With immediate data the last packet needs a receive: without one, everything
            // before it is taken and it gets an RNR NAK.
            let mut n = n;
            let mut recv = None;
            if last && m.op == WrOpcode::RdmaWriteWithImm {
                match next_recv(tdev, t) {
                    Some(w) => recv = Some(w),
                    None => n -= 1,
                }
            }
            let (from, len) = m.payload(i0, n);
            if len > 0
                && Cursor::over(seg.as_slice(), from)
                    .put_src(&m.src, from, len)
                    .is_err()
            {
                return fatal(after, WcStatus::RemOpErr, psn);
            }
            rs.epsn = psn_add(psn, n);
            if !last || recv.is_none() && m.op == WrOpcode::RdmaWriteWithImm {
                rs.msg = InMsg::Write {
                    seg: seg.map(Seg::into_owned),
                };
                if last {
                    return Reply::Rnr(psn_add(psn, n), rnr_delay_ns(rs.min_rnr_timer));
                }
                return Reply::Ack(last_psn);
            }
            if let Some((w, from_srq)) = recv {
                retire_recv(t, from_srq);
                recv_complete(tdev, t, &rs.cq, m, &w, m.len, 0);
            }
            Reply::Ack(last_psn)
        }
        _ => fatal(after, WcStatus::RemInvReqErr, psn),
    }
}
