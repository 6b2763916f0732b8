//! The two link layers: a RoCE (Ethernet) port has no LID and wants a global route on every
//! path; an InfiniBand port has the LID the fabric gave it and carries paths by LID alone, as
//! the applications of an IB subnet (WinOFED's examples among them) address their peers.

use crate::common::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

fn node(p: &HostPlatform, link_layer: LinkLayer) -> Node {
    Node::configured(p, "soft", |c| c.link_layer = link_layer)
}

fn ib_pair(p: &HostPlatform) -> (std::sync::Arc<Fabric>, Node, Node) {
    let a = node(p, LinkLayer::InfiniBand);
    let b = node(p, LinkLayer::InfiniBand);
    (fabric_of(&a, &b), a, b)
}

/// A path to `dlid` without a GRH.
fn by_lid(dlid: u16) -> AddressVector {
    AddressVector {
        dlid,
        port: 1,
        ..AddressVector::default()
    }
}

#[test]
fn ports_report_their_link_layer_and_lid() {
    let p = HostPlatform::deterministic();
    let roce = node(&p, LinkLayer::Ethernet);
    let ib = node(&p, LinkLayer::InfiniBand);
    let _fabric = fabric_of(&roce, &ib);
    let r = roce.hca.query_port(1).unwrap();
    let i = ib.hca.query_port(1).unwrap();
    assert_eq!((r.transport, r.lid), (2, 0), "RoCE: transport 2, no LID");
    assert_eq!(i.transport, 0, "InfiniBand: transport 0");
    assert_ne!(i.lid, 0);
    assert_eq!(i.lid, ib.hca.lid(1), "the LID the fabric assigned");
    settle(&p);
}

#[test]
fn an_address_by_lid_alone_is_refused_on_roce_and_taken_on_infiniband() {
    let p = HostPlatform::deterministic();
    let (_f, a, b) = ib_pair(&p);
    let roce = node(&p, LinkLayer::Ethernet);
    let lid = b.hca.lid(1);
    assert_eq!(
        roce.hca
            .create_ah(&roce.pd, &by_lid(lid), &mut Umv::none())
            .err(),
        Some(VerbsError::InvalidParameter)
    );
    let ah = a
        .hca
        .create_ah(&a.pd, &by_lid(lid), &mut Umv::none())
        .unwrap();
    a.hca.destroy_ah(ah);
    // LID 0 and multicast LIDs name no unicast destination without a GRH.
    for bad in [0, 0xC000, 0xFFFF] {
        assert_eq!(
            a.hca.create_ah(&a.pd, &by_lid(bad), &mut Umv::none()).err(),
            Some(VerbsError::InvalidParameter),
            "LID {bad:#x}"
        );
    }
    settle(&p);
}

#[test]
fn rc_qps_connected_by_lid_move_data_on_infiniband_and_are_refused_on_roce() {
    let p = HostPlatform::deterministic();
    let (_f, a, b) = ib_pair(&p);
    let (ca, cb, qa, qb) = two_qps(&a, &b, QpType::Rc, 16);
    let rtr = |n: &Node, q: &Qp, peer: &Node, peer_qp: &Qp| {
        let mut m = attrs(INIT_RC);
        n.modify(q, &m.to(QpState::Init)).unwrap();
        m.options = RTR_RC;
        m.av = by_lid(peer.hca.lid(1));
        m.dest_qpn = peer_qp.uvp.qpn();
        m.rq_psn = 7;
        m.path_mtu = Some(Mtu::Mtu1024);
        m.responder_resources = 1;
        let r = n.modify(q, &m.to(QpState::Rtr));
        m.options = RTS_RC;
        m.sq_psn = 7;
        m.initiator_depth = 1;
        m.retry = 7;
        m.rnr_retry = 7;
        m.local_ack_timeout = 14;
        r.and_then(|()| n.modify(q, &m.to(QpState::Rts)))
    };
    rtr(&a, &qa, &b, &qb).unwrap();
    rtr(&b, &qb, &a, &qa).unwrap();
    let (src, dst) = mems(&a, 4096, &b, 4096);
    src.buf.write(0, &[0x5A; 4096]).unwrap();
    post_recv(&qb, 1, dst.sge(0, 4096));
    let sg = [src.sge(0, 4096)];
    qa.uvp.post_send(&send_wr(2, WrOpcode::Send, &sg)).unwrap();
    let r = poll_all(&cb);
    assert_eq!(
        (r.len(), r[0].status, r[0].byte_len),
        (1, WcStatus::Success, 4096)
    );
    // No GRH between RC peers routed by LID.
    assert_eq!(r[0].wc_flags & wc_flags::GRH, 0);
    assert_eq!(dst.buf.to_vec(), vec![0x5A; 4096]);
    assert_eq!(poll_all(&ca)[0].status, WcStatus::Success);

    // The same RTR on RoCE ports: refused, the QP stays in INIT.
    let roce_a = node(&p, LinkLayer::Ethernet);
    let cr = roce_a.cq(4);
    let qr = roce_a.qp(QpType::Rc, &cr);
    assert_eq!(
        rtr(&roce_a, &qr, &b, &qb).err(),
        Some(VerbsError::InvalidParameter)
    );
    assert_eq!(roce_a.state(&qr), QpState::Init);
    settle(&p);
}

#[test]
fn ip_addresses_on_infiniband_resolve_to_the_port_gid_without_adding_gids() {
    let p = HostPlatform::deterministic();
    let (f, a, b) = ib_pair(&p);
    let ip_a = "10.9.0.1".parse().unwrap();
    let ip_b = "10.9.0.2".parse().unwrap();
    f.assign_address(&a.hca, 1, ip_a).unwrap();
    f.assign_address(&b.hca, 1, ip_b).unwrap();
    // GID 1 stays empty: the address is the port's GID 0, as with IPoIB.
    assert_eq!(a.hca.query_gid(1, 1).unwrap(), [0u8; 16]);
    let path = f.resolve_path(ip_a, ip_b).unwrap();
    assert_eq!(path.sgid, a.hca.gid());
    assert_eq!(path.dgid, b.hca.gid());
    assert_eq!(u16::from_be(path.dlid), b.hca.lid(1));
    assert_eq!(u16::from_be(path.slid), a.hca.lid(1));
    settle(&p);
}
