//! A QP's attributes as `query_qp` reports them: what `create_qp` answered, what each
//! modification set, and nothing a modification did not name (as `ibv_modify_qp` changes only
//! the attributes its mask names, an OFW RTS → RTS carries only what its options name). Values
//! beyond what the device advertises, or wider than their field on the wire, are refused and
//! change nothing (rxe's `rxe_qp_chk_attr`).

use crate::common::*;
use wv_abi::consts::*;
use wv_hal::*;

fn query(node: &Node, qp: &Qp) -> QpAttributes {
    node.hca.query_qp(&qp.soft).unwrap()
}

#[test]
fn query_reports_what_each_transition_set_and_keeps_what_a_later_one_did_not_name() {
    let (p, node) = deterministic_node();
    let ca = node.hca.query_ca().unwrap();
    let cq = node.cq(64);
    let qp = node.qp(QpType::Rc, &cq);

    // INIT with a P_Key index other than a new QP's 0.
    let mut a = loopback_attrs(&node, &qp, INIT_RC);
    assert!(ca.max_pkeys > 5);
    a.pkey_index = 3;
    assert_eq!(moved(&node, &qp, &a, QpState::Init).pkey_index, 3);

    // RTR with the widest destination QPN a BTH carries, as many responder resources as the
    // device advertises, a path MTU other than a new QP's and an alternate path on the
    // device's last port. The P_Key index it carries is not applied: the PKEY option is off.
    a.options = RTR_RC | WV_IO_QP_ATTR_ALTERNATE_AV;
    a.dest_qpn = 0xFF_FFFF;
    a.responder_resources = u8::try_from(ca.max_qp_responder_resources).unwrap();
    a.path_mtu = Some(Mtu::Mtu4096);
    a.local_ack_timeout = 12;
    let alternate = AddressVector {
        dlid: 0x77,
        service_level: 3,
        port: ca.port_count,
        ..a.av
    };
    a.alternate_av = alternate;
    a.pkey_index = 5;
    let q = moved(&node, &qp, &a, QpState::Rtr);
    assert_eq!(
        (q.dest_qpn, q.responder_resources, q.path_mtu, q.pkey_index),
        (0xFF_FFFF, ca.max_qp_responder_resources, Mtu::Mtu4096, 3)
    );
    assert_eq!(
        (q.alternate_av, q.alternate_local_ack_timeout),
        (alternate, 12)
    );

    // RTS with as many reads and atomics in flight as the device advertises, the largest
    // 3-bit retry counts and a path-migration state. The alternate path it carries is not
    // loaded: the ALTERNATE_AV option is off.
    a.options = RTS_RC | WV_IO_QP_ATTR_PATH_MIG_STATE;
    a.initiator_depth = u8::try_from(ca.max_qp_initiator_depth).unwrap();
    a.local_ack_timeout = 14;
    a.retry = 7;
    a.rnr_retry = 7;
    a.apm_state = 2;
    a.alternate_av = AddressVector::default();
    let q = moved(&node, &qp, &a, QpState::Rts);
    assert_eq!(
        (
            q.initiator_depth,
            q.local_ack_timeout,
            q.retry_count,
            q.rnr_retry_count,
            q.apm_state
        ),
        (ca.max_qp_initiator_depth, 14, 7, 7, 2)
    );
    assert_eq!(
        (q.alternate_av, q.alternate_local_ack_timeout, q.pkey_index),
        (alternate, 12, 3)
    );

    // RTS → RTS naming nothing: whatever else the modification carries, in range or not,
    // changes nothing.
    let before = query(&node, &qp);
    for (depth, timeout, retry, rnr_retry) in [(1, 20, 3, 2), (255, 31, 8, 9)] {
        let mut b = a;
        b.options = WV_IO_QP_ATTR_STATE;
        b.initiator_depth = depth;
        b.local_ack_timeout = timeout;
        b.retry = retry;
        b.rnr_retry = rnr_retry;
        b.apm_state = 0;
        b.alternate_av = AddressVector {
            dlid: 0x99,
            ..AddressVector::default()
        };
        node.modify(&qp, &b.to(QpState::Rts)).unwrap();
        assert_eq!(
            query(&node, &qp),
            before,
            "{depth} {timeout} {retry} {rnr_retry}"
        );
    }
    settle(&p);
}

/// A change to a transition's attributes, the error it must be refused with, and what it is.
type Refused<'a> = (&'a dyn Fn(&mut Attrs), VerbsError, &'a str);

#[test]
fn values_beyond_the_device_or_the_wire_are_refused_and_change_nothing() {
    let (p, node) = deterministic_node();
    let ca = node.hca.query_ca().unwrap();
    let cq = node.cq(64);
    let qp = qp_in_state(&node, &cq, QpType::Rc, QpState::Init);
    let modify = |next: QpState, options: u32, f: &dyn Fn(&mut Attrs)| {
        let mut a = loopback_attrs(&node, &qp, options);
        f(&mut a);
        node.modify(&qp, &a.to(next))
    };
    // Each change alone is refused with its error, the QP keeps every attribute it had, and
    // the same transition without a change then goes through.
    let refused_then_taken = |next: QpState, options: u32, changes: &[Refused]| {
        let before = query(&node, &qp);
        for (change, error, what) in changes {
            assert_eq!(modify(next, options, *change), Err(*error), "{what}");
        }
        assert_eq!(query(&node, &qp), before);
        modify(next, options, &|_| {}).unwrap();
    };
    let too_many = u8::try_from(ca.max_qp_responder_resources + 1).unwrap();
    refused_then_taken(
        QpState::Rtr,
        RTR_RC | WV_IO_QP_ATTR_ALTERNATE_AV,
        &[
            (
                &|a| a.responder_resources = too_many,
                VerbsError::InvalidSetting,
                "more responder resources than the device has",
            ),
            (
                &|a| a.dest_qpn = 1 << 24,
                VerbsError::InvalidParameter,
                "a QPN wider than 24 bits",
            ),
            (
                &|a| a.alternate_av.port = ca.port_count + 1,
                VerbsError::InvalidParameter,
                "an alternate path from a port the device does not have",
            ),
        ],
    );
    let too_deep = u8::try_from(ca.max_qp_initiator_depth + 1).unwrap();
    refused_then_taken(
        QpState::Rts,
        RTS_RC,
        &[
            (
                &|a| a.initiator_depth = too_deep,
                VerbsError::InvalidSetting,
                "more reads and atomics in flight than the device allows",
            ),
            (
                &|a| a.retry = 8,
                VerbsError::InvalidParameter,
                "a retry count wider than 3 bits",
            ),
            (
                &|a| a.rnr_retry = 8,
                VerbsError::InvalidParameter,
                "an RNR retry count wider than 3 bits",
            ),
        ],
    );
    assert_eq!(node.state(&qp), QpState::Rts);
    settle(&p);
}

#[test]
fn a_new_qp_reports_the_queues_create_answered() {
    let (p, node, cq) = deterministic_node_with_cq(64);
    let (qp, created) = node.create_qp(&QpCreate {
        qp_type: QpType::Rc,
        sq_depth: 5,
        rq_depth: 3,
        sq_sge: 1,
        rq_sge: 2,
        sq_max_inline: 64,
        sq_signaled: false,
        send_cq: &cq.soft,
        recv_cq: &cq.soft,
        srq: None,
    });
    assert!(created.sq_depth >= 5 && created.rq_depth >= 3);
    assert!(created.sq_sge >= 1 && created.rq_sge >= 2);
    assert!(created.sq_max_inline >= 64, "{created:?}");
    let q = query(&node, &qp);
    assert_eq!(
        (
            q.qpn,
            q.sq_depth,
            q.rq_depth,
            q.sq_sge,
            q.rq_sge,
            q.sq_max_inline
        ),
        (
            created.qpn,
            created.sq_depth,
            created.rq_depth,
            created.sq_sge,
            created.rq_sge,
            created.sq_max_inline
        )
    );
    assert_eq!((q.qp_type, q.state), (QpType::Rc, QpState::Reset));
    assert_eq!(qp.uvp.qpn(), created.qpn);
    settle(&p);
}
