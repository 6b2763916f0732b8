//! `get_qp_attr`: the attributes that move a connection's QP to INIT, RTR and RTS, from the
//! REQ and REP the two sides exchanged (IBA 12.7 and Linux's `cm_init_qp_*_attr`).
//!
//! Each side's own values come from the message it sent, the peer's from the one it
//! received: the RTR's destination QP and receive PSN are the peer's QP and starting PSN, the
//! RTS's send PSN is this side's. The REQ's retry count serves both sides; its RNR retry count
//! is what the passive side's QP uses, and the REP's is what the active side's uses. The path
//! is the REQ's primary path as this side sees it.

use wv_abi::consts::{
    WV_ACCESS_LOCAL_WRITE, WV_ACCESS_REMOTE_ATOMIC, WV_ACCESS_REMOTE_READ, WV_ACCESS_REMOTE_WRITE,
};
use wv_abi::{IB_PATH_REC, NtStatus};
use wv_hal::{AddressVector, CmReqEvent, Mtu, QpInit, QpModify, QpPath, QpRtr, QpRts, QpState};

use super::cep::{Cep, State};

/// The RNR NAK timer the responder advertises (12: 0.64 ms, rdma_cm's default).
const MIN_RNR_TIMER: u8 = 12;

/// The path MTU enumeration of a path record's MTU field (its selector in the top two bits).
fn mtu(field: u8) -> Option<Mtu> {
    Mtu::from_ib(field & 0x3F)
}

/// The QP's local ACK timeout: twice the packet lifetime (one more power of two).
pub(crate) fn ack_timeout(path: &IB_PATH_REC) -> u8 {
    ((path.pkt_life & 0x3F) + 1).min(31)
}

/// The connection's path as the QP carries it.
fn qp_path(path: &IB_PATH_REC, port: u8, req: &CmReqEvent, rnr_retry: u8) -> QpPath {
    let hop_flow = u32::from_be(path.hop_flow_raw);
    QpPath {
        av: AddressVector {
            grh_valid: path.dgid != [0u8; 16],
            hop_limit: (hop_flow & 0xFF) as u8,
            traffic_class: path.tclass,
            flow_label: (hop_flow >> 8) & 0xF_FFFF,
            sgid: path.sgid,
            dgid: path.dgid,
            dlid: u16::from_be(path.dlid),
            service_level: (u16::from_be(path.qos_class_sl) & 0xF) as u8,
            path_bits: 0,
            static_rate: path.rate & 0x3F,
            port,
        },
        path_mtu: mtu(path.mtu),
        local_ack_timeout: ack_timeout(path),
        seq_err_retry_cnt: req.params.retry_count,
        rnr_retry_cnt: rnr_retry,
    }
}

/// The attributes for `state` of `cep`'s connection.
pub(crate) fn qp_attr(cep: &Cep, state: QpState) -> Result<QpModify, NtStatus> {
    if !matches!(state, QpState::Init | QpState::Rtr | QpState::Rts) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if matches!(cep.state, State::Idle | State::Listen) {
        return Err(NtStatus::INVALID_DEVICE_STATE);
    }
    let req = cep.req.as_ref().ok_or(NtStatus::INVALID_DEVICE_STATE)?;
    if state == QpState::Init {
        return Ok(QpModify::Init(QpInit {
            port: cep.port,
            qkey: 0,
            pkey_index: req.pkey_index,
            access: WV_ACCESS_LOCAL_WRITE
                | WV_ACCESS_REMOTE_READ
                | WV_ACCESS_REMOTE_WRITE
                | WV_ACCESS_REMOTE_ATOMIC,
        }));
    }
    // Each side's own values come from its own message (the passive side's REP may not be
    // sent yet: its RTR and RTS come first, and until then the REQ says what it asks of it);
    // the peer's from the message it received.
    struct Sides {
        peer_qpn: u32,
        peer_psn: u32,
        own_psn: u32,
        rnr_retry: u8,
        responder: u8,
        initiator: u8,
    }
    let s = if cep.passive {
        let own = cep.rep;
        Sides {
            peer_qpn: req.remote_qpn,
            peer_psn: req.params.starting_psn,
            own_psn: own.map_or(0, |r| r.starting_psn),
            rnr_retry: req.params.rnr_retry_count,
            responder: own.map_or(req.params.initiator_depth, |r| r.responder_resources),
            initiator: own.map_or(req.params.responder_resources, |r| r.initiator_depth),
        }
    } else {
        let rep = cep.rep.ok_or(NtStatus::INVALID_DEVICE_STATE)?;
        Sides {
            peer_qpn: rep.remote_qpn,
            peer_psn: rep.starting_psn,
            own_psn: req.params.starting_psn,
            rnr_retry: rep.rnr_retry_count,
            responder: req.params.responder_resources,
            initiator: req.params.initiator_depth,
        }
    };
    let path = qp_path(&req.primary_path, cep.port, req, s.rnr_retry);
    Ok(match state {
        QpState::Rtr => QpModify::Rtr(QpRtr {
            rq_psn: s.peer_psn,
            dest_qpn: s.peer_qpn,
            primary: path,
            responder_resources: s.responder,
            rnr_nak_timeout: MIN_RNR_TIMER,
            ..QpRtr::default()
        }),
        _ => QpModify::Rts(QpRts {
            sq_psn: s.own_psn,
            retry_cnt: req.params.retry_count,
            rnr_retry_cnt: s.rnr_retry,
            local_ack_timeout: ack_timeout(&req.primary_path),
            initiator_depth: s.initiator,
            primary: path,
            port: cep.port,
            pkey_index: req.pkey_index,
            ..QpRts::default()
        }),
    })
}
