//! The full QP state table through `modify_qp`, with OFW's modification semantics: every valid
//! transition of RC, UC and UD succeeds with the target state's fixed attributes alone and
//! with every option it allows; options it does not allow, invalid transitions and values the
//! device refuses fail and change nothing.

use crate::common::*;
use crate::qp_state_table::{self as kernel, kernel_cell};
use wv_abi::consts::*;
use wv_hal::*;
use wv_softhca::WcStatus;

const ALL: [QpState; 6] = [
    QpState::Reset,
    QpState::Init,
    QpState::Rtr,
    QpState::Rts,
    QpState::Sqd,
    QpState::Error,
];

/// Every `WV_IO_QP_ATTR_*` option that has an `IB_MOD_QP_*` bit, except CAPABILITIES (a
/// resize, which OFW's HCA drivers refuse in RTR/RTS).
const OPTIONS: [u32; 14] = [
    WV_IO_QP_ATTR_INITIATOR_DEPTH,
    WV_IO_QP_ATTR_RESPONDER_RESOURCES,
    WV_IO_QP_ATTR_CURRENT_STATE,
    WV_IO_QP_ATTR_PATH_MIG_STATE,
    WV_IO_QP_ATTR_QKEY,
    WV_IO_QP_ATTR_ACCESS_FLAGS,
    WV_IO_QP_ATTR_AV,
    WV_IO_QP_ATTR_ALTERNATE_AV,
    WV_IO_QP_ATTR_PORT_NUMBER,
    WV_IO_QP_ATTR_PKEY_INDEX,
    WV_IO_QP_ATTR_ACK_TIMEOUT,
    WV_IO_QP_ATTR_RNR_NAK_TIMEOUT,
    WV_IO_QP_ATTR_ERROR_RETRY_COUNT,
    WV_IO_QP_ATTR_RNR_RETRY_COUNT,
];

/// The `IB_QP_*` attributes `option` adds to a move to `next` of a QP of type `t`, as OFW's HCA
/// drivers read an `ib_qp_mod_t` (mlx4's `to_qp_attr`): RTR's access flags, alternate path and
/// P_Key index (Q_Key for UD); RTS's RNR NAK timer (RC), responder resources, path-migration
/// state, access flags and alternate path (Q_Key for UD). The others add nothing: a move to
/// INIT, SQD, RESET or ERROR carries its fixed set whatever the options say, and the values
/// an RTR or RTS always carries (path, port, retry counts, ACK timeout, depth) are no option.
fn option_attrs(next: QpState, t: QpType, option: u32) -> u32 {
    let rc_uc = t != QpType::Ud;
    match (next, option) {
        (QpState::Rtr, WV_IO_QP_ATTR_ACCESS_FLAGS) if rc_uc => kernel::ACCESS_FLAGS,
        (QpState::Rtr, WV_IO_QP_ATTR_ALTERNATE_AV) if rc_uc => kernel::ALT_PATH,
        (QpState::Rtr, WV_IO_QP_ATTR_PKEY_INDEX) => kernel::PKEY_INDEX,
        (QpState::Rtr | QpState::Rts, WV_IO_QP_ATTR_QKEY) if !rc_uc => kernel::QKEY,
        (QpState::Rts, WV_IO_QP_ATTR_RNR_NAK_TIMEOUT) if t == QpType::Rc => kernel::MIN_RNR_TIMER,
        (QpState::Rts, WV_IO_QP_ATTR_RESPONDER_RESOURCES) if rc_uc => kernel::MAX_DEST_RD_ATOMIC,
        (QpState::Rts, WV_IO_QP_ATTR_PATH_MIG_STATE) if rc_uc => kernel::PATH_MIG_STATE,
        (QpState::Rts, WV_IO_QP_ATTR_ACCESS_FLAGS) if rc_uc => kernel::ACCESS_FLAGS,
        (QpState::Rts, WV_IO_QP_ATTR_ALTERNATE_AV) if rc_uc => kernel::ALT_PATH,
        _ => 0,
    }
}

fn modify_with(node: &Node, qp: &Qp, next: QpState, options: u32) -> Result<(), VerbsError> {
    node.modify(qp, &loopback_attrs(node, qp, options).to(next))
}

/// Calls `check` with every QP type and every pair of states whose cell the kernel's table has
/// (`valid`) or has not (`!valid`).
fn each_transition(valid: bool, mut check: impl FnMut(QpType, QpState, QpState)) {
    for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
        for cur in ALL {
            for next in ALL {
                if kernel_cell(cur, next, t).is_some() == valid {
                    check(t, cur, next);
                }
            }
        }
    }
}

#[test]
fn every_valid_transition_with_its_fixed_set_and_with_each_option() {
    let (p, node, cq) = deterministic_node_with_cq(1024);
    let (mut checked, mut accepted_options, mut refused_options) = (0, 0, 0);
    each_transition(true, |t, cur, next| {
        // The target state alone, as ND's Flush and `Options = 0` send it.
        let qp = qp_in_state(&node, &cq, t, cur);
        modify_with(&node, &qp, next, 0)
            .unwrap_or_else(|e| panic!("{t:?} {cur:?}->{next:?}: {e:?}"));
        assert_eq!(node.state(&qp), next, "{t:?} {cur:?}->{next:?}");
        // Each option: accepted when the kernel's cell allows what it adds, else
        // refused as an invalid parameter with nothing changed.
        let (req, opt) = kernel_cell(cur, next, t).unwrap();
        for option in OPTIONS {
            let qp = qp_in_state(&node, &cq, t, cur);
            let result = modify_with(&node, &qp, next, WV_IO_QP_ATTR_STATE | option);
            let what = format!("{t:?} {cur:?}->{next:?} option {option:#x}");
            if option_attrs(next, t, option) & !(req | opt) == 0 {
                assert_eq!(result, Ok(()), "{what}");
                assert_eq!(node.state(&qp), next, "{what}");
                accepted_options += 1;
            } else {
                assert_eq!(result, Err(VerbsError::InvalidParameter), "{what}");
                assert_eq!(node.state(&qp), cur, "{what}");
                refused_options += 1;
            }
        }
        checked += 1;
        // Keep the device's tables small.
        p.run_until_idle();
    });
    // 22 valid pairs per type, less the three that start in SQE (not reachable by modify).
    assert_eq!(checked, 3 * 19);
    assert!(accepted_options > 0 && refused_options > 0);
    settle(&p);
}

#[test]
fn options_a_transition_does_not_allow_are_refused() {
    let (p, node, cq) = deterministic_node_with_cq(64);
    // UC has no responder resources: RESP_RES on RTR → RTS is not in the table. Resizing the
    // work queues in RTR/RTS is something OFW's HCA drivers refuse.
    let uc_rtr = qp_in_state(&node, &cq, QpType::Uc, QpState::Rtr);
    let uc_init = qp_in_state(&node, &cq, QpType::Uc, QpState::Init);
    for (qp, next, option, error) in [
        (
            &uc_rtr,
            QpState::Rts,
            WV_IO_QP_ATTR_RESPONDER_RESOURCES,
            VerbsError::InvalidParameter,
        ),
        (
            &uc_init,
            QpState::Rtr,
            WV_IO_QP_ATTR_CAPABILITIES,
            VerbsError::Unsupported,
        ),
        (
            &uc_rtr,
            QpState::Rts,
            WV_IO_QP_ATTR_CAPABILITIES,
            VerbsError::Unsupported,
        ),
    ] {
        let options = WV_IO_QP_ATTR_STATE | option;
        let before = node.state(qp);
        assert_eq!(
            modify_with(&node, qp, next, options),
            Err(error),
            "{options:#x}"
        );
        assert_eq!(node.state(qp), before, "{options:#x}");
    }
    assert_eq!(node.state(&uc_rtr), QpState::Rtr);
    assert_eq!(node.state(&uc_init), QpState::Init);
    // An RTR path without a valid MTU.
    let qp = qp_in_state(&node, &cq, QpType::Rc, QpState::Init);
    let mut a = loopback_attrs(&node, &qp, WV_IO_QP_ATTR_STATE);
    a.path_mtu = None;
    assert_eq!(
        node.modify(&qp, &a.to(QpState::Rtr)),
        Err(VerbsError::InvalidParameter)
    );
    assert_eq!(node.state(&qp), QpState::Init);
    settle(&p);
}

#[test]
fn invalid_transitions_are_refused_and_change_nothing() {
    let (p, node, cq) = deterministic_node_with_cq(1024);
    each_transition(false, |t, cur, next| {
        let qp = qp_in_state(&node, &cq, t, cur);
        let result = modify_with(&node, &qp, next, 0);
        if (cur, next) == (QpState::Reset, QpState::Error) {
            // OFW's HCA drivers accept it and leave the QP in RESET.
            assert_eq!(result, Ok(()), "{t:?} RESET->ERROR");
        } else {
            assert_eq!(
                result,
                Err(VerbsError::InvalidState),
                "{t:?} {cur:?}->{next:?}"
            );
        }
        assert_eq!(node.state(&qp), cur);
    });
    // Values the device refuses: port 2 of a one-port device, a P_Key index past the table.
    let qp = node.qp(QpType::Rc, &cq);
    let refused_init = |change: fn(&mut Attrs)| {
        let mut a = attrs(INIT_RC);
        change(&mut a);
        assert_eq!(
            node.modify(&qp, &a.to(QpState::Init)),
            Err(VerbsError::InvalidParameter)
        );
        assert_eq!(node.state(&qp), QpState::Reset);
    };
    refused_init(|a| a.port = 2);
    refused_init(|a| a.pkey_index = 16);
    // query_qp reports what modify set.
    let qp = qp_in_state(&node, &cq, QpType::Rc, QpState::Rts);
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
    node.hca
        .modify_qp(&qp.soft, &QpModify::Error, &mut out)
        .unwrap();
    assert_eq!(out[0], QpState::Error as u8);
    settle(&p);
}

/// What the options a transition allows set is what `query_qp` reports afterwards: RTR's
/// access flags, alternate path and P_Key index (Q_Key and P_Key index for UD), RTS's
/// path-migration state, access flags, RNR NAK timer and alternate path, and on RTS → RTS the
/// access flags alone.
#[test]
fn the_options_a_transition_allows_take_effect() {
    let (p, node, cq) = deterministic_node_with_cq(64);
    let alternate = |hop_limit: u8| AddressVector {
        grh_valid: true,
        dgid: node.hca.gid(),
        hop_limit,
        port: 1,
        ..AddressVector::default()
    };

    let qp = qp_in_state(&node, &cq, QpType::Rc, QpState::Init);
    let mut a = loopback_attrs(
        &node,
        &qp,
        WV_IO_QP_ATTR_STATE
            | WV_IO_QP_ATTR_ACCESS_FLAGS
            | WV_IO_QP_ATTR_ALTERNATE_AV
            | WV_IO_QP_ATTR_PKEY_INDEX,
    );
    a.access = WV_ACCESS_REMOTE_READ | WV_ACCESS_REMOTE_ATOMIC;
    a.alternate_av = alternate(7);
    a.local_ack_timeout = 17;
    a.pkey_index = 1;
    let q = moved(&node, &qp, &a, QpState::Rtr);
    assert_eq!(
        q.access_flags,
        WV_ACCESS_REMOTE_READ | WV_ACCESS_REMOTE_ATOMIC
    );
    assert_eq!(q.alternate_av, alternate(7));
    assert_eq!(q.alternate_local_ack_timeout, 17);
    assert_eq!(q.pkey_index, 1);

    a.options = RTS_RC
        | WV_IO_QP_ATTR_PATH_MIG_STATE
        | WV_IO_QP_ATTR_ACCESS_FLAGS
        | WV_IO_QP_ATTR_ALTERNATE_AV
        | WV_IO_QP_ATTR_RNR_NAK_TIMEOUT;
    a.apm_state = 1;
    a.access = WV_ACCESS_REMOTE_WRITE;
    a.alternate_av = alternate(9);
    a.local_ack_timeout = 18;
    a.rnr_nak_timeout = 20;
    let q = moved(&node, &qp, &a, QpState::Rts);
    assert_eq!(q.apm_state, 1);
    assert_eq!(q.access_flags, WV_ACCESS_REMOTE_WRITE);
    assert_eq!(q.alternate_av, alternate(9));
    assert_eq!(q.alternate_local_ack_timeout, 18);
    assert_eq!(q.rnr_nak_timeout, 20);
    assert_eq!(q.local_ack_timeout, 18, "RTS's ACK timeout always travels");

    a.options = WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_ACCESS_FLAGS;
    a.access = WV_ACCESS_REMOTE_READ;
    let q = moved(&node, &qp, &a, QpState::Rts);
    assert_eq!(q.access_flags, WV_ACCESS_REMOTE_READ);
    assert_eq!(q.apm_state, 1, "what no option names stays");

    let qp = qp_in_state(&node, &cq, QpType::Ud, QpState::Init);
    let mut a = loopback_attrs(&node, &qp, WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_PKEY_INDEX);
    a.pkey_index = 2;
    assert_eq!(moved(&node, &qp, &a, QpState::Rtr).pkey_index, 2);
    let qp = qp_in_state(&node, &cq, QpType::Ud, QpState::Init);
    let mut a = loopback_attrs(&node, &qp, WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_QKEY);
    a.qkey = 0x2222_2222;
    assert_eq!(moved(&node, &qp, &a, QpState::Rtr).qkey, 0x2222_2222);
    settle(&p);
}

/// B of a pair to RTR only (towards A's `qa`), A's `qa` to RTS: B's first packet arrives in RTR.
fn connect_with_b_in_rtr(a: &Node, qa: &Qp, b: &Node, qb: &Qp, receives: &[u64], rb: &Mem) {
    bring_up(a, qa, b.hca.gid(), qb.uvp.qpn(), Conn::default());
    b.modify(qb, &qpm(QpState::Init, INIT_RC)).unwrap();
    for &id in receives {
        post_recv(qb, id, rb.sge(0, 16));
    }
    b.modify(qb, &rc_rtr_towards(a, qa)).unwrap();
}

#[test]
fn reset_discards_posted_receives_silently_and_the_next_connection_starts_afresh() {
    let (p, _f, a, b) = deterministic_pair();
    let (ca, cb, qa, qb) = two_qps(&a, &b, QpType::Rc, 8);
    let (mem, rb) = mems(&a, 16, &b, 16);
    // Receives posted in INIT; the first message takes one and establishes the connection.
    connect_with_b_in_rtr(&a, &qa, &b, &qb, &[100, 101], &rb);
    post_send(&qa, 1, mem.sge(0, 4));
    settle(&p);
    assert_eq!(qb.events.take(), vec![QpEvent::CommEstablished]);
    assert_eq!(wr_ids(&poll_all(&cb)), vec![100]);
    assert_eq!(poll_all(&ca).len(), 1);

    // RESET: the receive still posted is removed without a completion (IBA: the work queues
    // are emptied, nothing is completed).
    for (node, qp) in [(&a, &qa), (&b, &qb)] {
        node.modify(qp, &qpm(QpState::Reset, WV_IO_QP_ATTR_STATE))
            .unwrap();
    }
    settle(&p);
    assert!(poll_all(&cb).is_empty());

    // Connected again: the next message takes the receive posted now, and it is again the
    // first packet of a connection.
    connect_with_b_in_rtr(&a, &qa, &b, &qb, &[200], &rb);
    post_send(&qa, 2, mem.sge(0, 4));
    settle(&p);
    let r = poll_all(&cb);
    assert_eq!(statuses(&r), vec![(200, WcStatus::Success)]);
    assert_eq!(qb.events.take(), vec![QpEvent::CommEstablished]);
    assert_eq!(poll_all(&ca).len(), 1);
    settle(&p);
}
