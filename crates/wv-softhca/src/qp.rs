//! Queue pairs: rings, state, attributes, and the modify command that moves them through the
//! state table.

use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use spin::Mutex;
use wv_hal::{
    AddressVector, Mtu, QpAttributes, QpEvent, QpEventSink, QpModify, QpState, QpType, VerbsError,
};

use crate::cq::Cq;
use crate::device::{Device, Rundown};
use crate::modify_attr::{self, Translated};
use crate::ring::{Padded, Ring};
use crate::srq::Srq;
use crate::state_table::{self, ib};
use crate::wr::{RQ_HDR_WORDS, Sge, recv_header, sge_at};

/// Most SGEs a WQE can carry (the advertised `max_sge`).
pub const MAX_SGE: usize = 16;

/// A receive WQE copied out of its ring.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecvWqe {
    pub wr_id: u64,
    pub n: usize,
    pub sges: [Sge; MAX_SGE],
}

impl RecvWqe {
    pub(crate) fn read(slot: &[AtomicU64], max_sge: usize) -> Self {
        let (wr_id, n) = recv_header(slot);
        let n = n.min(max_sge).min(MAX_SGE);
        let mut sges = [Sge::default(); MAX_SGE];
        for (i, s) in sges.iter_mut().enumerate().take(n) {
            *s = sge_at(slot, RQ_HDR_WORDS, i);
        }
        RecvWqe { wr_id, n, sges }
    }
}

/// The requester's context (held while the send queue is processed).
#[derive(Debug)]
pub(crate) struct SqCtx {
    pub psn: u32,
    pub dest_qpn: u32,
    pub av: AddressVector,
    pub mtu: Mtu,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub qkey: u32,
    /// The connected peer, resolved at the first send after RTR.
    pub peer: Option<(Weak<Device>, Weak<Qp>, u8)>,
}

/// The responder's context.
#[derive(Debug)]
pub(crate) struct RespCtx {
    pub epsn: u32,
    pub access: u32,
    pub qkey: u32,
    pub dest_qpn: u32,
    pub comm_est: bool,
}

/// A queue pair. Aligned so that the `Arc` counts do not share a line with the fields, and
/// the fields other threads write (locks, flags) are padded apart from those they only read.
#[repr(align(64))]
pub(crate) struct Qp {
    pub handle: u32,
    pub qpn: u32,
    pub qp_type: QpType,
    pub pd: u32,
    pub dev: Weak<Device>,
    pub send_cq: Arc<Cq>,
    pub recv_cq: Arc<Cq>,
    pub srq: Option<Arc<Srq>>,
    pub sq: Ring,
    pub rq: Ring,
    pub sq_max_sge: u32,
    pub rq_max_sge: u32,
    pub max_inline: u32,
    pub sq_sig_all: AtomicBool,
    pub state: AtomicU8,
    /// Work for the send queue is pending (see `engine::run_sq`).
    pub sq_pending: Padded<AtomicBool>,
    pub sq_ctx: Padded<Mutex<SqCtx>>,
    pub resp: Padded<Mutex<RespCtx>>,
    /// Everything `query_qp` reports; modify holds it across the whole command.
    pub attrs: Mutex<QpAttributes>,
    /// Requesters waiting after an RNR NAK for a receive to be posted here.
    pub rnr_waiters: Padded<Mutex<Vec<Weak<Qp>>>>,
    pub sink: wv_hal::KArc<dyn QpEventSink>,
    pub rundown: Rundown,
}

pub(crate) fn state_from_u8(v: u8) -> QpState {
    QpState::from_abi(v).unwrap_or(QpState::Error)
}

impl Qp {
    pub(crate) fn state(&self) -> QpState {
        state_from_u8(self.state.load(Ordering::Acquire))
    }

    /// Moves the QP to ERR from the data path (an error completion, a NAK). Returns whether
    /// this call made the transition.
    pub(crate) fn set_error(&self) -> bool {
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            let s = state_from_u8(cur);
            if matches!(s, QpState::Error | QpState::Reset) {
                return false;
            }
            match self.state.compare_exchange(
                cur,
                QpState::Error as u8,
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
        self: &Arc<Self>,
        dev: &Arc<Device>,
        m: &QpModify,
    ) -> Result<(), VerbsError> {
        let mut attrs = self.attrs.lock();
        let cur = self.state();
        let (mask, a) = match modify_attr::to_ib_attr(self.qp_type, cur, m)? {
            Translated::Skip => return Ok(()),
            Translated::Apply(mask, a) => (mask, a),
        };
        let next = a.state;
        if !state_table::modify_is_ok(cur, next, self.qp_type, mask) {
            return Err(
                if state_table::transition(cur, next, self.qp_type).is_none() {
                    VerbsError::InvalidState
                } else {
                    VerbsError::InvalidParameter
                },
            );
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
            let mut sq = self.sq_ctx.lock();
            let mut rs = self.resp.lock();
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
                sq.peer = None;
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
                sq.peer = None;
            }
            if mask & ib::RQ_PSN != 0 {
                attrs.rq_psn = a.rq_psn & 0xFF_FFFF;
                rs.epsn = attrs.rq_psn;
            }
            if mask & ib::SQ_PSN != 0 {
                attrs.sq_psn = a.sq_psn & 0xFF_FFFF;
                sq.psn = attrs.sq_psn;
            }
            if mask & ib::TIMEOUT != 0 {
                attrs.local_ack_timeout = a.timeout;
            }
            if mask & ib::RETRY_CNT != 0 {
                attrs.retry_count = a.retry_cnt;
                sq.retry_cnt = a.retry_cnt;
            }
            if mask & ib::RNR_RETRY != 0 {
                attrs.rnr_retry_count = a.rnr_retry;
                sq.rnr_retry = a.rnr_retry;
            }
            if mask & ib::MIN_RNR_TIMER != 0 {
                attrs.rnr_nak_timeout = a.min_rnr_timer;
            }
            if mask & ib::MAX_QP_RD_ATOMIC != 0 {
                attrs.initiator_depth = a.max_rd_atomic;
            }
            if mask & ib::MAX_DEST_RD_ATOMIC != 0 {
                attrs.responder_resources = a.max_dest_rd_atomic;
            }
            if mask & ib::PATH_MIG_STATE != 0 {
                attrs.apm_state = a.path_mig_state;
            }
            if next == QpState::Reset && cur != QpState::Reset {
                // RESET discards outstanding work silently and rewinds the rings.
                self.sq.reset();
                if self.srq.is_none() {
                    self.rq.reset();
                }
                rs.comm_est = false;
                sq.peer = None;
            }
            attrs.state = next;
            self.state.store(next as u8, Ordering::Release);
        }
        drop(attrs);

        if next == QpState::Error && cur != QpState::Error {
            crate::engine::flush_rq(dev, self);
            if self.srq.is_some() {
                dev.post_qp_event(self, QpEvent::LastWqeReached);
            }
        }
        // Always: ERR flushes, RTS resumes, and a doorbell rung while this command held the
        // send queue's lock left its work pending for whoever holds it next — us.
        crate::engine::run_sq(dev, self);
        Ok(())
    }
}
