//! UD and UC as InfiniBand specifies them: a send error is a send queue error (SQE: the send
//! queue flushes, receives go on, SQE → RTS recovers); a UC responder drops a message it
//! cannot take, silently, and stays as it was; a UD receiver finds a GRH only when the sender's
//! address vector carries one, with the sender's SGID and the destination GID; multicast
//! reaches members on any port.

use crate::common::*;
use wv_abi::consts::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

/// SQE → RTS, as a client asks for it.
fn recover(n: &Node, q: &Qp) {
    let mut m = attrs(WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_CURRENT_STATE);
    m.current_state = QpState::SqError;
    n.modify(q, &m.to(QpState::Rts)).unwrap();
}

#[test]
fn a_ud_send_error_is_a_send_queue_error_and_receives_go_on() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_ud_pair(16);
    let big = a.mem(8192, ALL_ACCESS);
    let (ra, mb) = mems(&a, 256, &b, 64);
    post_recv(&qa, 100, ra.sge(0, 128));
    post_recv(&qa, 101, ra.sge(128, 128));
    // Larger than the port MTU: LOC_LEN_ERR, the QP goes to SQE (not ERR); the next send is
    // flushed.
    let sg = [big.sge(0, 8192)];
    let mut wr = send_wr(1, WrOpcode::Send, &sg);
    wr.ud = Some(ud_to(b.hca.gid(), qb.uvp.qpn()));
    qa.uvp.post_send(&wr).unwrap();
    let sg2 = [big.sge(0, 16)];
    let mut ok = send_wr(2, WrOpcode::Send, &sg2);
    ok.ud = wr.ud;
    qa.uvp.post_send(&ok).unwrap();
    expect_statuses(&ca, &[(1, WcStatus::LocLenErr), (2, WcStatus::WrFlushErr)]);
    assert_eq!(a.state(&qa), QpState::SqError);
    assert_eq!(qa.uvp.state(), QpState::SqError);
    // Its receive queue still works: nothing was flushed, and B's datagram lands.
    let sgb = [mb.sge(0, 8)];
    let mut back = send_wr(3, WrOpcode::Send, &sgb);
    back.ud = Some(ud_to(a.hca.gid(), qa.uvp.qpn()));
    qb.uvp.post_send(&back).unwrap();
    expect_statuses(&ca, &[(100, WcStatus::Success)]);
    // SQE → RTS: sending works again.
    recover(&a, &qa);
    assert_eq!(a.state(&qa), QpState::Rts);
    post_recv(&qb, 200, mb.sge(0, 64));
    qa.uvp.post_send(&ok).unwrap();
    expect_statuses(&ca, &[(2, WcStatus::Success)]);
    expect_statuses(&cb, &[(3, WcStatus::Success), (200, WcStatus::Success)]);
    settle(&p);
}

#[test]
fn a_uc_send_error_is_a_send_queue_error_too() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_connected(QpType::Uc, 16, Conn::default());
    let (la, mb) = mems(&a, 64, &b, 64);
    post_recv(&qa, 100, la.sge(0, 64));
    let bad = [Sge {
        lkey: la.lkey ^ 0x100,
        ..la.sge(0, 8)
    }];
    qa.uvp.post_send(&send_wr(1, WrOpcode::Send, &bad)).unwrap();
    expect_statuses(&ca, &[(1, WcStatus::LocProtErr)]);
    assert_eq!(a.state(&qa), QpState::SqError);
    post_send(&qb, 2, mb.sge(0, 8));
    expect_statuses(&ca, &[(100, WcStatus::Success)]);
    recover(&a, &qa);
    post_recv(&qb, 200, mb.sge(0, 64));
    post_send(&qa, 3, la.sge(0, 8));
    expect_statuses(&ca, &[(3, WcStatus::Success)]);
    expect_statuses(&cb, &[(2, WcStatus::Success), (200, WcStatus::Success)]);
    settle(&p);
}

#[test]
fn a_uc_responder_drops_what_it_cannot_take_and_stays_as_it_was() {
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_connected(QpType::Uc, 32, Conn::default()); // path MTU 1024
    let (la, rb) = mems(&a, 8192, &b, 8192);
    la.buf.write(0, &[0x5A; 4096]).unwrap();
    // No receive posted: the send is dropped.
    post_send(&qa, 1, la.sge(0, 8));
    // An RDMA write under a bad rkey: dropped.
    let sg = [la.sge(0, 8)];
    let mut wr = send_wr(2, WrOpcode::RdmaWrite, &sg);
    wr.remote_addr = rb.addr(0);
    wr.rkey = rb.rkey ^ 0x100;
    qa.uvp.post_send(&wr).unwrap();
    // A receive too small for the message: dropped, and the receive stays for the next one.
    post_recv(&qb, 10, rb.sge(0, 16));
    post_send(&qa, 3, la.sge(0, 64));
    expect_statuses(
        &ca,
        &[
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success),
        ],
    );
    assert!(poll_all(&cb).is_empty());
    assert_eq!(b.state(&qb), QpState::Rts);
    assert!(rb.buf.to_vec()[..16].iter().all(|&x| x == 0));
    post_send(&qa, 4, la.sge(0, 16));
    let r = poll_all(&cb);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].byte_len),
        (10, WcStatus::Success, 16)
    );
    // A message of four packets whose second is lost: the rest of it is dropped, and the next
    // message (UC resynchronises on its first packet) arrives whole.
    post_recv(&qb, 11, rb.sge(0, 4096));
    f.script(&[PacketFate::Deliver, PacketFate::Drop]);
    post_send(&qa, 5, la.sge(0, 4096));
    assert!(poll_all(&cb).is_empty());
    post_send(&qa, 6, la.sge(0, 3000));
    let r = poll_all(&cb);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].byte_len),
        (11, WcStatus::Success, 3000)
    );
    assert_eq!(poll_all(&ca).len(), 3);
    assert_eq!(b.state(&qb), QpState::Rts);
    settle(&p);
}

#[test]
fn a_ud_receiver_gets_a_grh_only_when_the_sender_sends_one() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_ud_pair(16);
    // The sender's port has an IPv4-based GID at index 1: the GRH carries it as SGID.
    let idx = a.hca.add_ipv4_gid(1, [10, 0, 0, 7]).unwrap();
    assert_eq!(idx, 1);
    let sgid = a.hca.query_gid(1, 1).unwrap();
    let la = a.mem_holding(64, b"payload!");
    let rb = b.mem(256, ALL_ACCESS);
    rb.buf.write(0, &[0xEE; 256]).unwrap();
    post_recv(&qb, 1, rb.sge(0, 128));
    post_recv(&qb, 2, rb.sge(128, 128));
    let sg = [la.sge(0, 8)];
    let mut wr = send_wr(1, WrOpcode::SendWithImm, &sg);
    wr.imm_or_inv = 0x0102_0304;
    wr.ud = Some(UdAddress {
        sgid_index: 1,
        hop_limit: 9,
        traffic_class: 0xA4,
        flow_label: 0x1_2345,
        ..ud_to(b.hca.gid(), qb.uvp.qpn())
    });
    qa.uvp.post_send(&wr).unwrap();
    // Routed by LID, without a global route: no GRH.
    let mut plain = send_wr(2, WrOpcode::Send, &sg);
    plain.ud = Some(UdAddress {
        dlid: b.hca.lid(1),
        remote_qpn: qb.uvp.qpn(),
        remote_qkey: 0x1111_1111,
        ..UdAddress::default()
    });
    qa.uvp.post_send(&plain).unwrap();
    let r = poll_all(&cb);
    assert_eq!(r.len(), 2);
    // With: the flag, and a GRH made of the sender's address vector.
    assert_eq!(r[0].wc_flags, wc_flags::GRH | wc_flags::WITH_IMM);
    assert_eq!(r[0].byte_len, 8 + GRH_BYTES as u32);
    let v = rb.buf.to_vec();
    let grh = &v[..GRH_BYTES];
    let word0 = u32::from_be_bytes(grh[0..4].try_into().unwrap());
    assert_eq!(word0 >> 28, 6, "IP version 6");
    assert_eq!((word0 >> 20) & 0xFF, 0xA4, "traffic class");
    assert_eq!(word0 & 0xF_FFFF, 0x1_2345, "flow label");
    // Payload length: BTH 12 + DETH 8 + immediate 4 + payload 8 + ICRC 4.
    assert_eq!(u16::from_be_bytes([grh[4], grh[5]]), 36);
    assert_eq!((grh[6], grh[7]), (0x1B, 9), "next header BTH, hop limit");
    assert_eq!(&grh[8..24], &sgid, "SGID of the sender's GID index");
    assert_eq!(&grh[24..40], &b.hca.gid(), "DGID");
    assert_eq!(&v[40..48], b"payload!");
    // Without: no flag, and the first 40 bytes as they were.
    assert_eq!(r[1].wc_flags, 0);
    assert_eq!(r[1].byte_len, 8 + GRH_BYTES as u32);
    assert!(v[128..128 + GRH_BYTES].iter().all(|&x| x == 0xEE));
    assert_eq!(&v[168..176], b"payload!");
    // A GID index the sending port does not have: a local error, the QP to SQE.
    let mut bad = wr;
    bad.wr_id = 3;
    bad.ud = Some(UdAddress {
        sgid_index: 9,
        ..wr.ud.unwrap()
    });
    qa.uvp.post_send(&bad).unwrap();
    expect_statuses(
        &ca,
        &[
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::LocQpOpErr),
        ],
    );
    assert_eq!(a.state(&qa), QpState::SqError);
    settle(&p);
}

#[test]
fn multicast_reaches_members_on_any_port() {
    let p = HostPlatform::deterministic();
    let a = Node::configured(&p, "two", |c| c.ports = 2);
    let b = Node::configured(&p, "two", |c| c.ports = 2);
    let _f = fabric_of(&a, &b);
    let (ca, cb) = two_cqs(&a, &b, 16);
    let sender = a.qp(QpType::Ud, &ca);
    bring_up(&a, &sender, [0; 16], 0, Conn::default());
    // The member is bound to port 2.
    let member = b.qp(QpType::Ud, &cb);
    let mut at = attrs(INIT_UD);
    at.port = 2;
    b.modify(&member, &at.to(QpState::Init)).unwrap();
    b.modify(&member, &at.to(QpState::Rtr)).unwrap();
    at.options = RTS_UD;
    b.modify(&member, &at.to(QpState::Rts)).unwrap();
    let mut group = [0u8; 16];
    group[0] = 0xFF;
    group[1] = 0x0E;
    group[15] = 9;
    let _m = b.hca.attach_mcast(&member.soft, &group, 0xC009).unwrap();
    let rb = b.mem(512, ALL_ACCESS);
    for i in 0..3 {
        post_recv(&member, i, rb.sge(i as usize * 128, 128));
    }
    let data = *b"all ports";
    let mut wr = send_wr(9, WrOpcode::Send, &[]);
    wr.inline_data = Some(&data);
    wr.ud = Some(ud_to(group, 0xFF_FFFF));
    // Port 1 of the member's device down: the member on port 2 still gets its copy.
    b.hca.set_port_state(1, false).unwrap();
    sender.uvp.post_send(&wr).unwrap();
    let r = poll_all(&cb);
    assert_eq!(statuses(&r), vec![(0, WcStatus::Success)]);
    assert_ne!(r[0].wc_flags & wc_flags::GRH, 0);
    assert_eq!(
        &rb.buf.to_vec()[24..40],
        &group,
        "the GRH's DGID is the group"
    );
    assert_eq!(&rb.buf.to_vec()[40..49], b"all ports");
    // Its own port down: no copy.
    b.hca.set_port_state(1, true).unwrap();
    b.hca.set_port_state(2, false).unwrap();
    sender.uvp.post_send(&wr).unwrap();
    assert!(poll_all(&cb).is_empty());
    b.hca.set_port_state(2, true).unwrap();
    sender.uvp.post_send(&wr).unwrap();
    expect_statuses(&cb, &[(1, WcStatus::Success)]);
    settle(&p);
}

#[test]
fn uc_and_ud_messages_travel_as_mtu_packets_each_sent_once_whatever_its_fate() {
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_connected(QpType::Uc, 16, Conn::default()); // path MTU 1024
    let (la, data, rb) = patterned(&a, 4096, &b, 8192, |i| (i * 3 % 247) as u8);
    // Four packets, the second lost: the other three are sent all the same, nothing is sent
    // again, and the receiver drops the message.
    post_recv(&qb, 1, rb.sge(0, 4096));
    f.script(&[PacketFate::Deliver, PacketFate::Drop]);
    post_send(&qa, 1, la.sge(0, 4096));
    let s = f.stats();
    assert_eq!((s.delivered, s.dropped), (3, 1));
    assert!(poll_all(&cb).is_empty());
    // Three packets, the second late: a late packet is as good as a timely one; each arrives
    // once and the message lands whole.
    f.script(&[PacketFate::Deliver, PacketFate::Delay]);
    post_send(&qa, 2, la.sge(0, 3000));
    let s = f.stats();
    assert_eq!((s.delivered, s.dropped, s.delayed), (3 + 2, 1, 1));
    let r = poll_all(&cb);
    assert_eq!(
        r.iter()
            .map(|w| (w.wr_id, w.status, w.byte_len, w.qp_num))
            .collect::<Vec<_>>(),
        vec![(1, WcStatus::Success, 3000, qb.uvp.qpn())]
    );
    assert_eq!(&rb.buf.to_vec()[..3000], &data[..3000]);
    assert_eq!(
        poll_all(&ca)
            .iter()
            .map(|w| (w.wr_id, w.status, w.qp_num))
            .collect::<Vec<_>>(),
        vec![
            (1, WcStatus::Success, qa.uvp.qpn()),
            (2, WcStatus::Success, qa.uvp.qpn())
        ]
    );
    // A late datagram arrives once.
    let (cua, cub, ua, ub) = ud_qps(&a, &b, 16);
    for i in 0..2 {
        post_recv(&ub, 10 + i, rb.sge(4096 + i as usize * 128, 128));
    }
    let sg = [la.sge(0, 16)];
    let mut wr = send_wr(3, WrOpcode::Send, &sg);
    wr.ud = Some(ud_to(b.hca.gid(), ub.uvp.qpn()));
    f.script(&[PacketFate::Delay]);
    ua.uvp.post_send(&wr).unwrap();
    expect_statuses(&cub, &[(10, WcStatus::Success)]);
    expect_statuses(&cua, &[(3, WcStatus::Success)]);
    assert_eq!(f.stats().delayed, 2);
    settle(&p);
}

#[test]
fn a_message_may_be_max_msg_bytes_and_a_datagram_one_port_mtu() {
    let (p, _f, a, b) = deterministic_configured_pair("small", |c| c.limits.max_msg = 3000);
    let (la, rb) = mems(&a, 8192, &b, 8192);
    for qp_type in [QpType::Uc, QpType::Rc] {
        let (ca, cb, qa, qb) = two_qps(&a, &b, qp_type, 16);
        connect(&a, &qa, &b, &qb, Conn::default());
        post_recv(&qb, 7, rb.sge(0, 4096));
        post_send(&qa, 1, la.sge(0, 3000));
        expect_statuses(&ca, &[(1, WcStatus::Success)]);
        let r = poll_all(&cb);
        assert_eq!((r[0].wr_id, r[0].byte_len), (7, 3000), "{qp_type:?}");
        post_send(&qa, 2, la.sge(0, 3001));
        assert_eq!(
            statuses(&poll_all(&ca)),
            vec![(2, WcStatus::LocLenErr)],
            "{qp_type:?}"
        );
        assert!(poll_all(&cb).is_empty());
    }
    // UD: one packet of the port's MTU (4096), no more.
    let (ca, cb, qa, qb) = ud_qps(&b, &a, 16);
    let ra = a.mem(8192, ALL_ACCESS);
    post_recv(&qb, 7, ra.sge(0, 4096 + GRH_BYTES as u32));
    let sg = [rb.sge(0, 4096)];
    let mut wr = send_wr(1, WrOpcode::Send, &sg);
    wr.ud = Some(ud_to(a.hca.gid(), qb.uvp.qpn()));
    qa.uvp.post_send(&wr).unwrap();
    expect_statuses(&ca, &[(1, WcStatus::Success)]);
    let r = poll_all(&cb);
    assert_eq!((r[0].wr_id, r[0].byte_len), (7, 4096 + GRH_BYTES as u32));
    settle(&p);
}

#[test]
fn a_datagram_fires_a_solicited_arm_only_when_sent_solicited() {
    let (p, _f, a, b, _ca, cb, qa, qb) = deterministic_ud_pair(16);
    let (la, rb) = mems(&a, 64, &b, 512);
    for i in 0..2 {
        post_recv(&qb, i, rb.sge(i as usize * 128, 128));
    }
    assert!(!cb.uvp.arm(true));
    let sg = [la.sge(0, 8)];
    let mut wr = send_wr(1, WrOpcode::Send, &sg);
    wr.ud = Some(ud_to(b.hca.gid(), qb.uvp.qpn()));
    qa.uvp.post_send(&wr).unwrap();
    settle(&p);
    assert_eq!(cb.sink.completions(), 0, "not solicited");
    wr.send_flags |= send_flags::SOLICITED;
    qa.uvp.post_send(&wr).unwrap();
    settle(&p);
    assert_eq!(cb.sink.completions(), 1);
    expect_statuses(&cb, &[(0, WcStatus::Success), (1, WcStatus::Success)]);
}

#[test]
fn a_datagram_to_a_qp_number_reaches_the_qp_that_has_it_now() {
    let (p, _f, a, b, _ca, cb, qa, qb) = deterministic_ud_pair(16);
    let (la, rb) = mems(&a, 64, &b, 512);
    la.buf.write(0, b"first").unwrap();
    let qpn = qb.uvp.qpn();
    post_recv(&qb, 1, rb.sge(0, 128));
    let sg = [la.sge(0, 5)];
    let mut wr = send_wr(1, WrOpcode::Send, &sg);
    wr.ud = Some(ud_to(b.hca.gid(), qpn));
    qa.uvp.post_send(&wr).unwrap();
    expect_statuses(&cb, &[(1, WcStatus::Success)]);
    // The QP goes away and a new one takes its number: the same address now reaches it.
    b.hca.destroy_qp(qb.soft);
    let cb2 = b.cq(16);
    let qb2 = b.qp(QpType::Ud, &cb2);
    assert_eq!(qb2.uvp.qpn(), qpn, "the number is free again");
    bring_up(&b, &qb2, [0; 16], 0, Conn::default());
    post_recv(&qb2, 2, rb.sge(128, 128));
    la.buf.write(0, b"again").unwrap();
    qa.uvp.post_send(&wr).unwrap();
    expect_statuses(&cb2, &[(2, WcStatus::Success)]);
    assert_eq!(
        &rb.buf.to_vec()[128 + GRH_BYTES..128 + GRH_BYTES + 5],
        b"again"
    );
    assert!(poll_all(&cb).is_empty());
    settle(&p);
}
