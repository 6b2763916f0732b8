//! Queue pairs: rings, state, attributes, and the modify command that moves them through the
//! state table.

use alloc::boxed::Box;
use alloc::sync::{Arc, Weak};
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::lock::Mutex;
use wv_hal::{
    AddressVector, AllocError, Dpc, KArc, KWeak, Mtu, QpAttributes, QpCreate, QpCreated, QpEvent,
    QpEventSink, QpModify, QpState, QpType, VerbsError,
};

use crate::cq::{Cq, CqPort, Side};
use crate::device::{Device, Rundown};
use crate::engine::{InMsg, RdRes, Target, UdDest};
use crate::fallible::{self, no_memory};
use crate::modify_attr::{self, Translated};
use crate::mr_cache::MrCache;
use crate::ring::{Padded, Ring};
use crate::srq::Srq;
use crate::state_table::{self, ib};
use crate::wr::{RQ_HDR_WORDS, SQ_HDR_WORDS, Sge, recv_header, sge_at};

/// Most SGEs a WQE can carry (the advertised `max_sge`).
pub const MAX_SGE: usize = 16;

/// A receive WQE copied out of its ring (an SRQ's, whose slot is released before its SGEs
/// are resolved; a QP's own RQ is read in place with [`recv_in_place`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecvWqe {
    pub wr_id: u64,
    pub n: usize,
    pub sges: [Sge; MAX_SGE],
}

impl RecvWqe {
    pub(crate) fn read(slot: &[crate::ring::Word], max_sge: usize) -> Self {
        let (wr_id, n) = recv_in_place(slot, max_sge);
        let mut sges = [Sge::default(); MAX_SGE];
        for (i, s) in sges.iter_mut().enumerate().take(n) {
            *s = recv_sge(slot, i);
        }
        RecvWqe { wr_id, n, sges }
    }
}

/// The `wr_id` of the receive WQE in `slot` and how many SGEs it has (at most `max_sge`), read
/// where it lies: its SGEs are read with [`recv_sge`] as they are needed.
#[inline]
pub(crate) fn recv_in_place(slot: &[crate::ring::Word], max_sge: usize) -> (u64, usize) {
    let (wr_id, n) = recv_header(slot);
    (wr_id, n.min(max_sge).min(MAX_SGE))
}

/// SGE `i` of the receive WQE in `slot`.
#[inline]
pub(crate) fn recv_sge(slot: &[crate::ring::Word], i: usize) -> Sge {
    sge_at(slot, RQ_HDR_WORDS, i)
}

/// What the RC requester remembers of a request it has started sending (per send-ring slot).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Track {
    /// PSN of its first packet.
    pub first_psn: u32,
    /// PSNs it takes (an RDMA read: as many as its response has packets).
    pub npkts: u32,
    /// Message length (for the completion of a read).
    pub len: u32,
    /// An RDMA read or atomic: complete only with its response.
    pub rd: bool,
    /// Its response arrived (reads and atomics).
    pub done: bool,
}

/// The RC requester's transport state: requests sent and not yet acknowledged, the position
/// of the next packet to (re)send, retry budgets and timers.
///
/// Requests are counted from the head of the send ring: `started` of them have had packets
/// sent; the next packet to send is packet `cur_pkt` of request `cur` (`cur <= started`; less
/// after a go-back). `una` is the oldest PSN not acknowledged.
#[derive(Debug)]
pub(crate) struct Tx {
    pub track: Box<[Track]>,
    pub started: u32,
    pub cur: u32,
    pub cur_pkt: u32,
    pub una: u32,
    /// Reads and atomics started and not answered.
    pub rd_out: u32,
    /// Transport retries left (`retry_cnt`), and RNR retries left (`rnr_retry`, 7 = for ever).
    pub retries: u8,
    pub rnrs: u8,
    /// After an RNR NAK: nothing is (re)sent before this time.
    pub rnr_until: Option<u64>,
    /// The transport (local ACK) timer, and `una` when it was armed.
    pub ack_due: Option<u64>,
    pub ack_una: u32,
    /// The due time the QP's platform timer is set to.
    pub timer_due: Option<u64>,
}

impl Tx {
    fn try_new(entries: u32) -> Result<Self, AllocError> {
        Ok(Tx {
            track: fallible::boxed_slice_of(entries as usize, Track::default())?,
            started: 0,
            cur: 0,
            cur_pkt: 0,
            una: 0,
            rd_out: 0,
            retries: 0,
            rnrs: 0,
            rnr_until: None,
            ack_due: None,
            ack_una: 0,
            timer_due: None,
        })
    }

    /// Forgets everything in flight (RESET, ERR: the requests are discarded or flushed).
    pub(crate) fn clear(&mut self, psn: u32) {
        self.started = 0;
        self.cur = 0;
        self.cur_pkt = 0;
        self.una = psn;
        self.rd_out = 0;
        self.rnr_until = None;
        self.ack_due = None;
    }
}

/// The requester's context (held while the send queue is processed).
#[derive(Debug)]
pub(crate) struct SqCtx {
    /// The PSN of the next new packet.
    pub psn: u32,
    pub dest_qpn: u32,
    pub av: AddressVector,
    pub mtu: Mtu,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    /// Local ACK timeout (4.096 µs × 2^timeout; 0: none).
    pub timeout: u8,
    /// Reads and atomics in flight at most (`max_rd_atomic`; 0 counts as 1).
    pub max_rd_atomic: u32,
    pub qkey: u32,
    /// Where send completions go.
    pub cq: CqPort,
    /// Packets sent intact on a lossless link (the fabric's count, kept here so that no
    /// shared counter is written per message).
    pub delivered: u64,
    /// In SQD until the requests in flight have completed.
    pub draining: bool,
    /// Raise `SQ_DRAINED` when the drain ends.
    pub drain_notify: bool,
    pub tx: Tx,
}

/// The send queue's half of the engine, under one lock: the requester's context and the
/// references it keeps between messages, side by side so that the requester borrows both at
/// once (moving the references out of the context and back cost every message dozens of
/// instructions).
#[derive(Debug)]
pub(crate) struct SqSide {
    pub ctx: SqCtx,
    pub refs: SqRefs,
}

/// What the requester keeps between messages instead of looking it up again: strong
/// references, each checked against its device's epoch before use.
#[derive(Debug, Default)]
pub(crate) struct SqRefs {
    /// The connected peer, resolved at the first send after RTR and kept while its device's
    /// QP epoch says it still exists.
    pub peer: Option<Target>,
    /// The last UD destination and where it leads (as `peer`).
    pub ud_peer: Option<(UdDest, Target)>,
    /// The regions this side's requests use.
    pub mrs: MrCache,
}

/// The responder's context.
#[derive(Debug)]
pub(crate) struct RespCtx {
    pub epsn: u32,
    pub access: u32,
    pub qkey: u32,
    pub dest_qpn: u32,
    pub comm_est: bool,
    /// The RNR NAK timer value this responder asks requesters to wait (`min_rnr_timer`).
    pub min_rnr_timer: u8,
    /// Incoming reads and atomics it keeps resources for (`max_dest_rd_atomic`).
    pub max_dest_rd_atomic: u32,
    /// A sequence-error NAK was sent: later out-of-sequence packets are dropped silently
    /// until the expected PSN arrives (one NAK per error).
    pub nak_sent: bool,
    /// The message being received across packets.
    pub msg: InMsg,
    /// The responder resources: the last reads and atomics, for duplicates (a duplicate atomic
    /// gets its original result again and is not executed twice).
    pub res: Box<[Option<RdRes>]>,
    pub res_next: usize,
    /// Where receive completions go.
    pub cq: CqPort,
}

/// The receive side of the engine, under one lock: the responder's context and the regions
/// incoming messages land in or read from, side by side for the reason [`SqSide`] gives.
#[derive(Debug)]
pub(crate) struct RespSide {
    pub ctx: RespCtx,
    pub mrs: MrCache,
}

impl RespCtx {
    fn try_new(resources: u32, cq: KArc<Cq>) -> Result<Self, AllocError> {
        Ok(RespCtx {
            epsn: 0,
            access: 0,
            qkey: 0,
            dest_qpn: 0,
            comm_est: false,
            min_rnr_timer: 0,
            max_dest_rd_atomic: 0,
            nak_sent: false,
            msg: InMsg::None,
            res: fallible::boxed_slice_of(resources.max(1) as usize, None)?,
            res_next: 0,
            cq: CqPort::new(cq),
        })
    }

    /// Forgets the messages and resources of the connection (RESET).
    pub(crate) fn clear(&mut self) {
        self.comm_est = false;
        self.nak_sent = false;
        self.msg = InMsg::None;
        self.res.iter_mut().for_each(|r| *r = None);
        self.res_next = 0;
    }
}

/// The QP's timer: its DPC runs the send queue, which looks at its deadlines.
pub(crate) struct QpTimer(pub KWeak<Qp>);

impl Dpc for QpTimer {
    fn run(&self) {
        if let Some(qp) = self.0.upgrade()
            && let Some(dev) = qp.dev.upgrade()
        {
            crate::engine::run_sq(&dev, &qp);
            dev.deliver_interrupts();
        }
    }
}

/// A queue pair. Aligned so that the `KArc` counts do not share a line with the fields, and
/// the fields other threads write (locks, flags) are padded apart from those they only read.
#[repr(align(64))]
pub(crate) struct Qp {
    pub handle: u32,
    pub qpn: u32,
    pub qp_type: QpType,
    pub pd: u32,
    pub dev: Weak<Device>,
    pub send_cq: KArc<Cq>,
    pub recv_cq: KArc<Cq>,
    pub srq: Option<KArc<Srq>>,
    pub sq: Ring,
    pub rq: Ring,
    pub sq_max_sge: u32,
    pub rq_max_sge: u32,
    pub max_inline: u32,
    pub sq_sig_all: AtomicBool,
    /// The port the QP is bound to (a lock-free copy of `attrs.primary_av.port`).
    pub port: AtomicU8,
    /// Work for the send queue is pending (see `engine::run_sq`).
    pub sq_pending: Padded<crate::sched::Pending>,
    pub sq_ctx: Padded<Mutex<SqSide>>,
    pub resp: Padded<Mutex<RespSide>>,
    /// Everything `query_qp` reports; modify holds it across the whole command.
    pub attrs: Mutex<QpAttributes>,
    /// The transport timer (RNR and local ACK timeouts): a DPC the platform queues when due.
    pub timer: KArc<dyn Dpc>,
    pub sink: KArc<dyn QpEventSink>,
    pub rundown: Rundown,
}

pub(crate) fn state_from_u32(v: u32) -> QpState {
    u8::try_from(v)
        .ok()
        .and_then(QpState::from_abi)
        .unwrap_or(QpState::Error)
}

/// The send ring of `entries` WQEs with room for `sge` SGEs or `inline` bytes each.
fn sq_ring(entries: u32, sge: u32, inline: u32) -> Result<Ring, AllocError> {
    let words = (sge as usize * 2).max((inline as usize).div_ceil(8));
    Ring::try_new(entries, SQ_HDR_WORDS + words)
}

impl Qp {
    /// QP `handle` of protection domain `pd`, built as `c` asks (already checked against the
    /// device's limits), with everything it will use: its rings, the requester's tracking and
    /// the responder's resources (sized by the queue depth and `max_qp_rd_atom`), its timer.
    /// Either all of it is allocated or nothing is.
    ///
    /// # Errors
    /// `InsufficientMemory`.
    pub(crate) fn try_new(
        handle: u32,
        pd: u32,
        dev: &Arc<Device>,
        c: &QpCreate<'_, KArc<Cq>, KArc<Srq>>,
        sink: KArc<dyn QpEventSink>,
    ) -> Result<KArc<Qp>, VerbsError> {
        let l = dev.limits();
        let srq = c.srq.cloned();
        let sq_sge = c.sq_sge.max(1);
        let rq_sge = if srq.is_some() { 0 } else { c.rq_sge.max(1) };
        let rq_entries = if srq.is_some() { 1 } else { c.rq_depth.max(1) };
        let sq = sq_ring(c.sq_depth.max(1), sq_sge, c.sq_max_inline).map_err(no_memory)?;
        let rq =
            Ring::try_new(rq_entries, RQ_HDR_WORDS + 2 * rq_sge as usize).map_err(no_memory)?;
        let tx = Tx::try_new(sq.entries()).map_err(no_memory)?;
        let resp = RespCtx::try_new(l.max_qp_rd_atom, c.recv_cq.clone()).map_err(no_memory)?;
        let timer = KArc::<QpTimer>::try_reserve().map_err(no_memory)?;
        let slot = KArc::<Qp>::try_reserve().map_err(no_memory)?;
        let inline_cap = ((sq.stride() - SQ_HDR_WORDS) * 8).min(l.max_inline as usize) as u32;
        let created = QpCreated {
            qpn: handle + 1,
            sq_depth: sq.entries(),
            rq_depth: if srq.is_some() { 0 } else { rq.entries() },
            sq_sge,
            rq_sge,
            sq_max_inline: inline_cap,
        };
        let mut attrs = QpAttributes::new_qp(c.qp_type, &created, c.sq_signaled);
        // A new QP reports port 1 until INIT names its port.
        attrs.primary_av.port = 1;
        // Everything is allocated: from here on nothing can fail.
        Ok(slot.write_cyclic(|me| Qp {
            handle,
            qpn: handle + 1,
            qp_type: c.qp_type,
            pd,
            dev: Arc::downgrade(dev),
            send_cq: c.send_cq.clone(),
            recv_cq: c.recv_cq.clone(),
            srq,
            sq,
            rq,
            sq_max_sge: sq_sge,
            rq_max_sge: rq_sge,
            max_inline: inline_cap,
            sq_sig_all: c.sq_signaled.into(),
            port: attrs.primary_av.port.into(),
            sq_pending: Padded(crate::sched::Pending::new()),
            sq_ctx: Padded(Mutex::new(SqSide {
                ctx: SqCtx {
                    psn: 0,
                    dest_qpn: 0,
                    av: attrs.primary_av,
                    mtu: attrs.path_mtu,
                    retry_cnt: 0,
                    rnr_retry: 0,
                    timeout: 0,
                    max_rd_atomic: 0,
                    qkey: 0,
                    cq: CqPort::new(c.send_cq.clone()),
                    delivered: 0,
                    draining: false,
                    drain_notify: false,
                    tx,
                },
                refs: SqRefs::default(),
            })),
            resp: Padded(Mutex::new(RespSide {
                ctx: resp,
                mrs: MrCache::default(),
            })),
            attrs: Mutex::new(attrs),
            timer: timer.write(QpTimer(me.clone())).into(),
            sink,
            rundown: Rundown::new(),
        }))
    }

    /// The QP state, kept in the send ring's header where the user-mode provider reads it
    /// (a new ring's zero is RESET).
    pub(crate) fn state(&self) -> QpState {
        state_from_u32(self.state_word().load(Ordering::Acquire))
    }

    /// The word the QP state lives in.
    pub(crate) fn state_word(&self) -> &crate::dma::HeaderWord {
        self.sq.owner_word(crate::ring::OWNER_QP_STATE)
    }

    /// The port the QP is bound to.
    pub(crate) fn port(&self) -> u8 {
        self.port.load(Ordering::Acquire)
    }

    /// Moves the QP to ERR from the data path (an error completion, a NAK). Returns whether
    /// this call made the transition.
    pub(crate) fn set_error(&self) -> bool {
        self.data_path_transition(QpState::Error, |s| {
            !matches!(s, QpState::Error | QpState::Reset)
        })
    }

    /// Moves a UD or UC QP to SQE after a send error: the send queue is in error (it flushes
    /// what it holds and what is posted until SQE → RTS), the receive queue goes on.
    pub(crate) fn set_sq_error(&self) -> bool {
        self.data_path_transition(QpState::SqError, |s| {
            matches!(s, QpState::Rts | QpState::Sqd)
        })
    }

    /// Runs `f` on the port through which `side` posts completions, with that side's lock
    /// held (so the side is not posting meanwhile). A doorbell rung while the send side was
    /// held is run afterwards.
    pub(crate) fn with_port<R>(
        this: &KArc<Self>,
        side: Side,
        f: impl FnOnce(&mut CqPort) -> R,
    ) -> R {
        match side {
            Side::Send => {
                let r = f(&mut this.sq_ctx.lock().ctx.cq);
                if let Some(dev) = this.dev.upgrade() {
                    crate::engine::run_sq(&dev, this);
                }
                r
            }
            Side::Recv => f(&mut this.resp.lock().ctx.cq),
        }
    }

    /// Destroy: waits for the engine to be done with the QP (its state is RESET already, so
    /// nothing new starts), then lets go of every reference its contexts keep (peers, regions,
    /// rings) and unbinds it from its CQs.
    pub(crate) fn shut_down(this: &KArc<Self>, dev: &Device) {
        {
            let mut side = this.sq_ctx.lock();
            side.refs = SqRefs::default();
            side.ctx.cq.detach();
            dev.tx_delivered
                .fetch_add(core::mem::take(&mut side.ctx.delivered), Ordering::Relaxed);
        }
        {
            let mut rs = this.resp.lock();
            rs.ctx.msg = InMsg::None;
            rs.mrs.clear();
            rs.ctx.cq.detach();
        }
        this.send_cq.unbind(this, Side::Send);
        this.recv_cq.unbind(this, Side::Recv);
    }

    fn data_path_transition(&self, to: QpState, from: impl Fn(QpState) -> bool) -> bool {
        let mut cur = self.state_word().load(Ordering::Acquire);
        loop {
            let s = state_from_u32(cur);
            if !from(s) {
                return false;
            }
            match self.state_word().compare_exchange(
                cur,
                to as u32,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                // `attrs.state` is refreshed from the atomic by `query_qp`: the data path never
                // takes `attrs` (modify holds it while it takes the data-path locks).
                Ok(_) => return true,
                Err(v) => cur = v,
            }
        }
    }

    /// The `modify_qp` command: the OFW modification becomes the IB core's attribute set
    /// ([`modify_attr`]), which is validated as a whole against the state table and the
    /// device before anything changes ("none of the attributes will be modified").
    pub(crate) fn modify(
        this: &KArc<Self>,
        dev: &Arc<Device>,
        m: &QpModify,
    ) -> Result<(), VerbsError> {
        let mut attrs = this.attrs.lock();
        let cur = this.state();
        let (mask, a) = match modify_attr::to_ib_attr(this.qp_type, cur, m)? {
            Translated::Skip => return Ok(()),
            Translated::Apply(mask, a) => (mask, a),
        };
        let next = a.state;
        if !state_table::modify_is_ok(cur, next, this.qp_type, mask) {
            return Err(
                if state_table::transition(cur, next, this.qp_type).is_none() {
                    VerbsError::InvalidState
                } else {
                    VerbsError::InvalidParameter
                },
            );
        }
        // While the send queue drains, SQD only leaves for ERR or RESET (as rxe: attributes
        // change, and RTS resumes, once SQ_DRAINED could be reported).
        if cur == QpState::Sqd
            && !matches!(next, QpState::Error | QpState::Reset)
            && this.sq_ctx.lock().ctx.draining
        {
            return Err(VerbsError::InvalidState);
        }
        // Values the device refuses.
        let lim = dev.limits();
        if mask & ib::PORT != 0 && (a.port == 0 || a.port > dev.port_count()) {
            return Err(VerbsError::InvalidParameter);
        }
        if mask & ib::PKEY_INDEX != 0 && u32::from(a.pkey_index) >= lim.max_pkeys {
            return Err(VerbsError::InvalidParameter);
        }
        if mask & ib::MAX_QP_RD_ATOMIC != 0 && a.max_rd_atomic > lim.max_qp_rd_atom {
            return Err(VerbsError::InvalidSetting);
        }
        if mask & ib::MAX_DEST_RD_ATOMIC != 0 && a.max_dest_rd_atomic > lim.max_qp_rd_atom {
            return Err(VerbsError::InvalidSetting);
        }
        if mask & ib::ALT_PATH != 0 && (a.alt_av.port > dev.port_count()) {
            return Err(VerbsError::InvalidParameter);
        }
        // On RoCE a connected QP's path needs a global route (the IB core's
        // rdma_check_ah_attr refuses an Ethernet port's address without a GRH); on
        // InfiniBand a path by LID alone is the common case.
        if mask & ib::AV != 0 && !a.av.grh_valid && dev.link_layer().needs_grh() {
            return Err(VerbsError::InvalidParameter);
        }
        if mask & ib::PATH_MTU != 0 && a.path_mtu.is_none() {
            return Err(VerbsError::InvalidParameter);
        }
        if mask & (ib::RETRY_CNT | ib::RNR_RETRY) != 0 && (a.retry_cnt > 7 || a.rnr_retry > 7) {
            return Err(VerbsError::InvalidParameter);
        }
        if mask & ib::DEST_QPN != 0 && a.dest_qpn > 0xFF_FFFF {
            return Err(VerbsError::InvalidParameter);
        }

        // Apply.
        {
            let mut side = this.sq_ctx.lock();
            let SqSide { ctx: sq, refs } = &mut *side;
            let mut resp = this.resp.lock();
            let rs = &mut resp.ctx;
            if mask & ib::PORT != 0 {
                attrs.primary_av.port = a.port;
                sq.av.port = a.port;
            }
            if mask & ib::PKEY_INDEX != 0 {
                attrs.pkey_index = a.pkey_index;
            }
            if mask & ib::ACCESS_FLAGS != 0 {
                attrs.access_flags = a.access;
                rs.access = a.access;
            }
            if mask & ib::QKEY != 0 {
                attrs.qkey = a.qkey;
                rs.qkey = a.qkey;
                sq.qkey = a.qkey;
            }
            if mask & ib::AV != 0 {
                // The primary path leaves from the QP's port (set with IB_QP_PORT); the port
                // inside an RTR/RTS address vector is ignored, as mlx4 ignores it. libibverbs
                // puts `attr.port_num` there, which rc_pingpong leaves uninitialised at RTR.
                let port = attrs.primary_av.port;
                attrs.primary_av = a.av;
                attrs.primary_av.port = port;
                sq.av = attrs.primary_av;
                refs.peer = None;
            }
            if mask & ib::PATH_MTU != 0
                && let Some(mtu) = a.path_mtu
            {
                attrs.path_mtu = mtu;
                sq.mtu = mtu;
            }
            if mask & ib::ALT_PATH != 0 {
                attrs.alternate_av = a.alt_av;
                attrs.alternate_local_ack_timeout = a.alt_timeout;
            }
            if mask & ib::DEST_QPN != 0 {
                attrs.dest_qpn = a.dest_qpn;
                sq.dest_qpn = a.dest_qpn;
                rs.dest_qpn = a.dest_qpn;
                refs.peer = None;
            }
            if mask & ib::RQ_PSN != 0 {
                attrs.rq_psn = a.rq_psn & 0xFF_FFFF;
                rs.epsn = attrs.rq_psn;
            }
            if mask & ib::SQ_PSN != 0 {
                attrs.sq_psn = a.sq_psn & 0xFF_FFFF;
                sq.psn = attrs.sq_psn;
                sq.tx.una = attrs.sq_psn;
            }
            if mask & ib::TIMEOUT != 0 {
                attrs.local_ack_timeout = a.timeout;
                sq.timeout = a.timeout;
            }
            if mask & ib::RETRY_CNT != 0 {
                attrs.retry_count = a.retry_cnt;
                sq.retry_cnt = a.retry_cnt;
                sq.tx.retries = a.retry_cnt;
            }
            if mask & ib::RNR_RETRY != 0 {
                attrs.rnr_retry_count = a.rnr_retry;
                sq.rnr_retry = a.rnr_retry;
                sq.tx.rnrs = a.rnr_retry;
            }
            if mask & ib::MIN_RNR_TIMER != 0 {
                attrs.rnr_nak_timeout = a.min_rnr_timer;
                rs.min_rnr_timer = a.min_rnr_timer;
            }
            if mask & ib::MAX_QP_RD_ATOMIC != 0 {
                attrs.initiator_depth = a.max_rd_atomic;
                sq.max_rd_atomic = a.max_rd_atomic;
            }
            if mask & ib::MAX_DEST_RD_ATOMIC != 0 {
                attrs.responder_resources = a.max_dest_rd_atomic;
                rs.max_dest_rd_atomic = a.max_dest_rd_atomic.min(rs.res.len() as u32);
            }
            if mask & ib::EN_SQD_ASYNC_NOTIFY != 0 {
                sq.drain_notify = a.en_sqd_async_notify;
            }
            if mask & ib::PATH_MIG_STATE != 0 {
                attrs.apm_state = a.path_mig_state;
            }
            if next == QpState::Reset && cur != QpState::Reset {
                // RESET discards outstanding work silently and rewinds the rings.
                this.sq.reset();
                if this.srq.is_none() {
                    this.rq.reset();
                }
                rs.clear();
                refs.peer = None;
                sq.draining = false;
                let psn = sq.psn;
                sq.tx.clear(psn);
                if sq.tx.timer_due.take().is_some() {
                    dev.cancel_timer(&this.timer);
                }
            }
            if next == QpState::Rts && cur != QpState::Rts {
                // Fresh retry budgets for the (re)started send queue.
                sq.tx.retries = sq.retry_cnt;
                sq.tx.rnrs = sq.rnr_retry;
            }
            if next == QpState::Sqd && cur == QpState::Rts {
                // Drain: no new request starts; SQ_DRAINED when those in flight are done.
                sq.draining = true;
                if mask & ib::EN_SQD_ASYNC_NOTIFY == 0 {
                    sq.drain_notify = false;
                }
            }
            if next != QpState::Sqd {
                sq.draining = false;
            }
            attrs.state = next;
            this.port.store(attrs.primary_av.port, Ordering::Release);
            this.state_word().store(next as u32, Ordering::Release);
        }
        drop(attrs);

        if next == QpState::Error && cur != QpState::Error {
            crate::engine::flush_rq(dev, this);
            if this.srq.is_some() {
                dev.post_qp_event(this, QpEvent::LastWqeReached);
            }
        }
        // Always: ERR flushes, RTS resumes, and a doorbell rung while this command held the
        // send queue's lock left its work pending for whoever holds it next — us.
        crate::engine::run_sq(dev, this);
        Ok(())
    }
}
