//! Queue pairs: rings, state, attributes, and the modify command that moves them through the
//! state table.

use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use spin::Mutex;
use wv_abi::consts::{WV_IO_QP_ATTR_FLAGS, WV_IO_QP_SIGNAL_SENDS};
use wv_hal::{
    AddressVector, Mtu, QpAttributes, QpEvent, QpEventSink, QpModify, QpState, QpType, VerbsError,
};

use crate::cq::Cq;
use crate::device::{Device, Rundown};
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
    pub sink: Arc<dyn QpEventSink>,
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

    /// The `modify_qp` command. Validates the whole request against the state table and the
    /// device before changing anything ("none of the attributes will be modified").
    pub(crate) fn modify(
        self: &Arc<Self>,
        dev: &Arc<Device>,
        m: &QpModify,
    ) -> Result<(), VerbsError> {
        use wv_abi::consts::WV_IO_QP_ATTR_STATE;
        let mut attrs = self.attrs.lock();
        let cur_actual = self.state();
        let mask = state_table::ib_mask_from_wv(m.mask, m.path_mtu.is_some());
        let cur = if mask & ib::CUR_STATE != 0 {
            m.current_state
        } else {
            cur_actual
        };
        if cur != cur_actual {
            return Err(VerbsError::InvalidState);
        }
        let next = if m.mask & WV_IO_QP_ATTR_STATE != 0 {
            m.state
        } else {
            cur
        };
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
        if mask & ib::PORT != 0 && (m.port == 0 || m.port > dev.port_count()) {
            return Err(VerbsError::InvalidParameter);
        }
        if mask & ib::PKEY_INDEX != 0 && u32::from(m.pkey_index) >= lim.max_pkeys {
            return Err(VerbsError::InvalidParameter);
        }
        if mask & ib::ACCESS_FLAGS != 0 && m.access_flags & !crate::mr::ACCESS_ALL != 0 {
            return Err(VerbsError::InvalidParameter);
        }
        if mask & ib::MAX_QP_RD_ATOMIC != 0 && m.initiator_depth > lim.max_qp_rd_atom {
            return Err(VerbsError::InvalidSetting);
        }
        if mask & ib::MAX_DEST_RD_ATOMIC != 0 && m.responder_resources > lim.max_qp_rd_atom {
            return Err(VerbsError::InvalidSetting);
        }
        if mask & ib::AV != 0 && (m.primary_av.port > dev.port_count()) {
            return Err(VerbsError::InvalidParameter);
        }
        if mask & (ib::RETRY_CNT | ib::RNR_RETRY) != 0
            && (m.retry_count > 7 || m.rnr_retry_count > 7)
        {
            return Err(VerbsError::InvalidParameter);
        }
        if mask & ib::DEST_QPN != 0 && m.dest_qpn > 0xFF_FFFF {
            return Err(VerbsError::InvalidParameter);
        }

        // Apply.
        {
            let mut sq = self.sq_ctx.lock();
            let mut rs = self.resp.lock();
            if mask & ib::PORT != 0 {
                attrs.primary_av.port = m.port;
                sq.av.port = m.port;
            }
            if mask & ib::PKEY_INDEX != 0 {
                attrs.pkey_index = m.pkey_index;
            }
            if mask & ib::ACCESS_FLAGS != 0 {
                attrs.access_flags = m.access_flags;
                rs.access = m.access_flags;
            }
            if mask & ib::QKEY != 0 {
                attrs.qkey = m.qkey;
                rs.qkey = m.qkey;
                sq.qkey = m.qkey;
            }
            if mask & ib::AV != 0 {
                let port = if m.primary_av.port == 0 {
                    attrs.primary_av.port
                } else {
                    m.primary_av.port
                };
                attrs.primary_av = m.primary_av;
                attrs.primary_av.port = port;
                sq.av = attrs.primary_av;
                sq.peer = None;
            }
            if mask & ib::PATH_MTU != 0
                && let Some(mtu) = m.path_mtu
            {
                attrs.path_mtu = mtu;
                sq.mtu = mtu;
            }
            if mask & ib::ALT_PATH != 0 {
                attrs.alternate_av = m.alternate_av;
                if let Some(mtu) = m.alternate_path_mtu {
                    attrs.alternate_path_mtu = mtu;
                }
            }
            if mask & ib::DEST_QPN != 0 {
                attrs.dest_qpn = m.dest_qpn;
                sq.dest_qpn = m.dest_qpn;
                rs.dest_qpn = m.dest_qpn;
                sq.peer = None;
            }
            if mask & ib::RQ_PSN != 0 {
                attrs.rq_psn = m.rq_psn & 0xFF_FFFF;
                rs.epsn = attrs.rq_psn;
            }
            if mask & ib::SQ_PSN != 0 {
                attrs.sq_psn = m.sq_psn & 0xFF_FFFF;
                sq.psn = attrs.sq_psn;
            }
            if mask & ib::TIMEOUT != 0 {
                attrs.local_ack_timeout = m.local_ack_timeout;
            }
            if mask & ib::RETRY_CNT != 0 {
                attrs.retry_count = m.retry_count;
                sq.retry_cnt = m.retry_count;
            }
            if mask & ib::RNR_RETRY != 0 {
                attrs.rnr_retry_count = m.rnr_retry_count;
                sq.rnr_retry = m.rnr_retry_count;
            }
            if mask & ib::MIN_RNR_TIMER != 0 {
                attrs.rnr_nak_timeout = m.rnr_nak_timeout;
            }
            if mask & ib::MAX_QP_RD_ATOMIC != 0 {
                attrs.initiator_depth = m.initiator_depth;
            }
            if mask & ib::MAX_DEST_RD_ATOMIC != 0 {
                attrs.responder_resources = m.responder_resources;
            }
            if mask & ib::PATH_MIG_STATE != 0 {
                attrs.apm_state = m.apm_state;
            }
            if m.mask & WV_IO_QP_ATTR_FLAGS != 0 {
                let all = u32::from(m.qp_flags) & WV_IO_QP_SIGNAL_SENDS != 0;
                attrs.sq_signaled = all;
                self.sq_sig_all.store(all, Ordering::Release);
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
