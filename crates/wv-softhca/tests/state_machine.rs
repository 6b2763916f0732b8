//! The full QP state table through `modify_qp`: every valid transition of RC, UC and UD with
//! exactly its required attributes, each required attribute missing, a disallowed attribute
//! added, and the invalid transitions; a refused modify changes nothing.

mod common;

use common::*;
use wv_abi::consts::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::state_table::{self, ib};

const ALL: [QpState; 6] = [
    QpState::Reset,
    QpState::Init,
    QpState::Rtr,
    QpState::Rts,
    QpState::Sqd,
    QpState::Error,
];

/// IB attribute bit → the WV bit that carries it (PATH_MTU rides on AV).
fn wv_of(ib_bit: u32) -> Option<u32> {
    Some(match ib_bit {
        ib::STATE => WV_IO_QP_ATTR_STATE,
        ib::CUR_STATE => WV_IO_QP_ATTR_CURRENT_STATE,
        ib::ACCESS_FLAGS => WV_IO_QP_ATTR_ACCESS_FLAGS,
        ib::PKEY_INDEX => WV_IO_QP_ATTR_PKEY_INDEX,
        ib::PORT => WV_IO_QP_ATTR_PORT_NUMBER,
        ib::QKEY => WV_IO_QP_ATTR_QKEY,
        ib::AV | ib::PATH_MTU => WV_IO_QP_ATTR_AV,
        ib::TIMEOUT => WV_IO_QP_ATTR_ACK_TIMEOUT,
        ib::RETRY_CNT => WV_IO_QP_ATTR_ERROR_RETRY_COUNT,
        ib::RNR_RETRY => WV_IO_QP_ATTR_RNR_RETRY_COUNT,
        ib::RQ_PSN => WV_IO_QP_ATTR_RECEIVE_PSN,
        ib::MAX_QP_RD_ATOMIC => WV_IO_QP_ATTR_INITIATOR_DEPTH,
        ib::ALT_PATH => WV_IO_QP_ATTR_ALTERNATE_AV,
        ib::MIN_RNR_TIMER => WV_IO_QP_ATTR_RNR_NAK_TIMEOUT,
        ib::SQ_PSN => WV_IO_QP_ATTR_SEND_PSN,
        ib::MAX_DEST_RD_ATOMIC => WV_IO_QP_ATTR_RESPONDER_RESOURCES,
        ib::PATH_MIG_STATE => WV_IO_QP_ATTR_PATH_MIG_STATE,
        ib::DEST_QPN => WV_IO_QP_ATTR_DESTINATION_QPN,
        _ => return None,
    })
}

fn wv_mask(ib_mask: u32) -> u32 {
    (0..32)
        .filter(|b| ib_mask & (1 << b) != 0)
        .filter_map(|b| wv_of(1 << b))
        .fold(0, |a, b| a | b)
}

fn modify_with(
    node: &Node,
    qp: &Qp,
    cur: QpState,
    next: QpState,
    ib_mask: u32,
) -> Result<(), VerbsError> {
    let mut m = qpm(next, wv_mask(ib_mask | ib::STATE));
    m.current_state = cur;
    m.primary_av = AddressVector {
        grh_valid: true,
        dgid: node.hca.gid(),
        port: 1,
        ..AddressVector::default()
    };
    m.dest_qpn = qp.uvp.qpn();
    node.modify(qp, &m)
}

/// A fresh QP driven to `target` through required masks only.
fn qp_in(node: &Node, cq: &Cq, t: QpType, target: QpState) -> Qp {
    let qp = node.qp(t, cq);
    let path: &[QpState] = match target {
        QpState::Reset => &[],
        QpState::Init => &[QpState::Init],
        QpState::Rtr => &[QpState::Init, QpState::Rtr],
        QpState::Rts => &[QpState::Init, QpState::Rtr, QpState::Rts],
        QpState::Sqd => &[QpState::Init, QpState::Rtr, QpState::Rts, QpState::Sqd],
        QpState::Error => &[QpState::Init, QpState::Error],
        QpState::SqError => unreachable!(),
    };
    let mut cur = QpState::Reset;
    for &n in path {
        let (req, _) = state_table::transition(cur, n, t).unwrap();
        modify_with(node, &qp, cur, n, req).unwrap();
        cur = n;
    }
    assert_eq!(node.state(&qp), target);
    qp
}

#[test]
fn every_valid_transition_with_required_and_optional_masks() {
    let p = HostPlatform::deterministic();
    let node = Node::simple(&p);
    let cq = node.cq(1024);
    let mut checked = 0;
    for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
        for cur in ALL {
            for next in ALL {
                let Some((req, opt)) = state_table::transition(cur, next, t) else {
                    continue;
                };
                // Exactly the required attributes.
                let qp = qp_in(&node, &cq, t, cur);
                modify_with(&node, &qp, cur, next, req)
                    .unwrap_or_else(|e| panic!("{t:?} {cur:?}->{next:?}: {e:?}"));
                assert_eq!(node.state(&qp), next, "{t:?} {cur:?}->{next:?}");
                // Required plus every optional one (EN_SQD_ASYNC_NOTIFY has no WinVerbs bit).
                let qp = qp_in(&node, &cq, t, cur);
                modify_with(
                    &node,
                    &qp,
                    cur,
                    next,
                    req | (opt & !ib::EN_SQD_ASYNC_NOTIFY),
                )
                .unwrap_or_else(|e| panic!("{t:?} {cur:?}->{next:?} +opt: {e:?}"));
                assert_eq!(node.state(&qp), next);
                // Each required attribute missing: refused, state unchanged.
                for b in (0..32)
                    .map(|b| 1u32 << b)
                    .filter(|b| req & b != 0 && *b != ib::PATH_MTU)
                {
                    let qp = qp_in(&node, &cq, t, cur);
                    let drop = if b == ib::AV {
                        ib::AV | ib::PATH_MTU
                    } else {
                        b
                    };
                    assert!(
                        modify_with(&node, &qp, cur, next, req & !drop).is_err(),
                        "{t:?} {cur:?}->{next:?} without {b:#x}"
                    );
                    assert_eq!(node.state(&qp), cur);
                }
                // PATH_MTU missing while AV is there (an invalid MTU).
                if req & ib::PATH_MTU != 0 {
                    let qp = qp_in(&node, &cq, t, cur);
                    let mut m = qpm(next, wv_mask(req | ib::STATE));
                    m.path_mtu = None;
                    m.dest_qpn = qp.uvp.qpn();
                    assert!(node.modify(&qp, &m).is_err());
                    assert_eq!(node.state(&qp), cur);
                }
                // An attribute the transition does not allow.
                let extra = [
                    ib::QKEY,
                    ib::ACCESS_FLAGS,
                    ib::SQ_PSN,
                    ib::DEST_QPN,
                    ib::TIMEOUT,
                ]
                .into_iter()
                .find(|b| (req | opt) & b == 0);
                if let Some(b) = extra {
                    let qp = qp_in(&node, &cq, t, cur);
                    assert_eq!(
                        modify_with(&node, &qp, cur, next, req | b),
                        Err(VerbsError::InvalidParameter),
                        "{t:?} {cur:?}->{next:?} with {b:#x}"
                    );
                    assert_eq!(node.state(&qp), cur);
                }
                checked += 1;
                // Keep the device's tables small.
                p.run_until_idle();
            }
        }
    }
    // 22 valid pairs per type, less the three that start in SQE (not reachable by modify).
    assert_eq!(checked, 3 * 19);
    settle(&p);
}

#[test]
fn invalid_transitions_are_refused_and_change_nothing() {
    let p = HostPlatform::deterministic();
    let node = Node::simple(&p);
    let cq = node.cq(1024);
    for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
        for cur in ALL {
            for next in ALL {
                if state_table::transition(cur, next, t).is_some() {
                    continue;
                }
                let qp = qp_in(&node, &cq, t, cur);
                assert_eq!(
                    modify_with(&node, &qp, cur, next, 0),
                    Err(VerbsError::InvalidState),
                    "{t:?} {cur:?}->{next:?}"
                );
                assert_eq!(node.state(&qp), cur);
            }
        }
    }
    // CUR_STATE that is not the QP's state.
    let qp = qp_in(&node, &cq, QpType::Rc, QpState::Rts);
    let mut m = qpm(
        QpState::Rts,
        WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_CURRENT_STATE,
    );
    m.current_state = QpState::Rtr;
    assert_eq!(node.modify(&qp, &m), Err(VerbsError::InvalidState));
    // A modify without STATE is a self-transition: INIT→INIT with an optional attribute.
    let qp = qp_in(&node, &cq, QpType::Rc, QpState::Init);
    node.modify(&qp, &qpm(QpState::Reset, WV_IO_QP_ATTR_PKEY_INDEX))
        .unwrap();
    assert_eq!(node.state(&qp), QpState::Init);
    // Values the device refuses: port 2 of a one-port device, a P_Key index past the table.
    let qp = node.qp(QpType::Rc, &cq);
    let mut m = qpm(QpState::Init, INIT_RC);
    m.port = 2;
    assert_eq!(node.modify(&qp, &m), Err(VerbsError::InvalidParameter));
    let mut m = qpm(QpState::Init, INIT_RC);
    m.pkey_index = 16;
    assert_eq!(node.modify(&qp, &m), Err(VerbsError::InvalidParameter));
    assert_eq!(node.state(&qp), QpState::Reset);
    // query_qp reports what modify set.
    let qp = qp_in(&node, &cq, QpType::Rc, QpState::Rts);
    let a = node.hca.query_qp(&qp.soft).unwrap();
    assert_eq!(
        (
            a.state,
            a.retry_count,
            a.rnr_retry_count,
            a.path_mtu,
            a.dest_qpn
        ),
        (QpState::Rts, 7, 7, Mtu::Mtu1024, qp.uvp.qpn())
    );
    // The QP-state bytes for user mode.
    let mut out = [0u8; 8];
    let mut m = qpm(QpState::Error, WV_IO_QP_ATTR_STATE);
    m.current_state = QpState::Rts;
    node.hca.modify_qp(&qp.soft, &m, &mut out).unwrap();
    assert_eq!(out[0], QpState::Error as u8);
    settle(&p);
}
