//! What the device says about itself and its objects: its attributes and ports' state as
//! `ibv_query_device`/`ibv_query_port` report them, its identity, and the handles and QP
//! numbers of the objects it made, which must be the ones its vendor output names.

use crate::common::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::abi::{self, PdResp};
use wv_softhca::*;

#[test]
fn the_device_reports_its_identity_and_device_wide_responder_resources() {
    let p = HostPlatform::deterministic();
    let m = mac();
    let mut cfg = DeviceConfig::new("attributes", m);
    cfg.limits.max_qp = 100;
    cfg.limits.max_qp_rd_atom = 8;
    let a = Node::new(&p, cfg);
    assert_eq!(a.hca.mac(), m);
    // The user-mode provider the client library loads for the device (wv-client's
    // `SOFT_HCA_UVP`).
    assert_eq!(a.hca.library_name(), "softhcau");
    let attr = a.hca.query_ca().unwrap();
    assert_eq!(attr.max_qp_responder_resources, 8);
    assert_eq!(attr.max_qp_initiator_depth, 8);
    // Responder resources of the whole device: every QP's (`max_res_rd_atom` is
    // `max_qp_rd_atom * max_qp`, as mlx4 reports it).
    assert_eq!(attr.max_responder_resources, 800);
    // No async event was lost yet.
    assert_eq!(a.hca.async_overflows(), 0);
    settle(&p);
}

#[test]
fn a_port_is_link_up_while_active_and_disabled_while_down() {
    let p = HostPlatform::deterministic();
    let a = Node::simple(&p);
    // PortPhysicalState (IB spec 14.2.5.6): 5 LinkUp, 3 Disabled.
    let port = a.hca.query_port(1).unwrap();
    assert_eq!(port.state, PortState::Active);
    assert_eq!(port.physical_state, 5);
    a.hca.set_port_state(1, false).unwrap();
    settle(&p);
    let port = a.hca.query_port(1).unwrap();
    assert_ne!(port.state, PortState::Active);
    assert_eq!(port.physical_state, 3);
    a.hca.set_port_state(1, true).unwrap();
    settle(&p);
    assert_eq!(a.hca.query_port(1).unwrap().physical_state, 5);
    settle(&p);
}

#[test]
fn object_handles_and_qp_numbers_are_the_ones_the_vendor_output_names() {
    let p = HostPlatform::deterministic();
    let a = Node::simple(&p);
    // Second objects of each kind, so that no handle is the first one.
    let pd = |a: &Node| {
        let mut out = [0u8; 8];
        let pd = a
            .hca
            .allocate_pd(&a.ca, &mut Umv::new(0, 0, 8, &mut out))
            .unwrap();
        let r: PdResp = abi::parse(&out).unwrap();
        assert_eq!(pd.handle(), r.pd_handle);
        pd
    };
    let pd2 = pd(&a);
    let pd3 = pd(&a);
    assert_ne!(pd2.handle(), pd3.handle());
    assert_ne!(pd2.handle(), a.pd.handle());

    let c1 = a.cq(4);
    let c2 = a.cq(4);
    assert_ne!(c1.soft.handle(), c2.soft.handle());
    for c in [&c1, &c2] {
        // What the CQ's doorbell names: the handle in the creation response, which the
        // provider mapped.
        let (_, r) = resize_cq_command(&a, c, 4).unwrap();
        assert_eq!(c.soft.handle(), r.cq_handle);
    }

    let srq = |a: &Node| {
        let attr = SrqAttributes {
            max_wr: 4,
            max_sge: 1,
            srq_limit: 0,
        };
        let (srq, r) = create_srq(&*a.hca, &a.pd, &attr, wv_hal::KArc::new(Log::default()));
        assert_eq!(srq.handle(), r.srq_handle);
        srq
    };
    let s1 = srq(&a);
    let s2 = srq(&a);
    assert_ne!(s1.handle(), s2.handle());

    let qp = |a: &Node| {
        let events = wv_hal::KArc::new(Log::<QpEvent>::default());
        let create = qp_create(QpType::Rc, &c1.soft, &c1.soft, None, 4, 1, 0, true);
        let (qp, created, r) = create_qp(&*a.hca, &a.pd, &create, events);
        assert_eq!((qp.qpn(), qp.handle()), (created.qpn, r.qp_handle));
        assert_eq!(r.qpn, created.qpn);
        qp
    };
    let q1 = qp(&a);
    let q2 = qp(&a);
    assert_ne!(q1.qpn(), q2.qpn());
    assert_ne!(q1.handle(), q2.handle());
    // QP numbers 0 and 1 are the special QPs (SMI, GSI): no QP the verbs make has them.
    assert!(q1.qpn() >= 2 && q2.qpn() >= 2);
    a.hca.destroy_qp(q1);
    a.hca.destroy_qp(q2);
    a.hca.destroy_srq(s1);
    a.hca.destroy_srq(s2);
    a.hca.deallocate_pd(pd2);
    a.hca.deallocate_pd(pd3);
    settle(&p);
}
