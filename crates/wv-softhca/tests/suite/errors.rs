//! Error paths: post-time failures with rdma-core's expectations, error completions that move
//! the QP to ERR, flush semantics, transport retry exceeded, MR registration checks, limits.
//! (RNR and the timers themselves: `timers.rs`.) The tests of traffic run twice: between two
//! QPs of one device (loopback) and across two devices.

use crate::common::*;
use wv_abi::consts::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

#[test]
fn posting_in_the_wrong_state_too_many_sges_or_a_full_queue() {
    let (p, a) = deterministic_node();
    let cq = a.cq(64);
    let q = a.qp_with(QpType::Rc, &cq, &cq, None, 4, 2, 0, true);
    let m = a.mem(64, ALL_ACCESS);
    let sg = [m.sge(0, 8)];
    // RESET: neither send nor receive.
    let e = q
        .uvp
        .post_send(&send_wr(1, WrOpcode::Send, &sg))
        .unwrap_err();
    assert_eq!((e, e.errno()), (PostError::WrongState, 22));
    assert_eq!(
        q.uvp.post_recv(&recv_wr(1, &sg)),
        Err(PostError::WrongState)
    );
    // INIT: receives yes, sends no.
    a.modify(&q, &qpm(QpState::Init, INIT_RC)).unwrap();
    q.uvp.post_recv(&recv_wr(1, &sg)).unwrap();
    assert_eq!(
        q.uvp.post_send(&send_wr(1, WrOpcode::Send, &sg)),
        Err(PostError::WrongState)
    );
    // Too many SGEs.
    let three = [m.sge(0, 1), m.sge(1, 1), m.sge(2, 1)];
    assert_eq!(
        q.uvp.post_recv(&recv_wr(2, &three)).unwrap_err().errno(),
        22
    );
    // Full receive queue (depth 4): ENOMEM, with bad_wr pointing at the first refused.
    let wrs: Vec<_> = (0..5).map(|i| recv_wr(i, &sg)).collect();
    let (bad, e) = q.uvp.post_recv_list(&wrs[..4]).unwrap_err();
    assert_eq!((bad, e, e.errno()), (3, PostError::QueueFull, 12));
    // A full send queue: park sends behind an RNR wait on an RTS QP.
    let b = Node::simple(&p);
    let _f = fabric_of(&a, &b);
    let cb = b.cq(8);
    let qs = a.qp_with(QpType::Rc, &cq, &cq, None, 4, 2, 0, true);
    let qr = b.qp(QpType::Rc, &cb);
    connect(&a, &qs, &b, &qr, Conn::default());
    let wrs: Vec<_> = (0..5).map(|i| send_wr(i, WrOpcode::Send, &sg)).collect();
    let (bad, e) = qs.uvp.post_send_list(&wrs).unwrap_err();
    assert_eq!((bad, e), (4, PostError::QueueFull));
    assert!(poll_all(&cq).is_empty());
    settle(&p);
}

on_both_topologies! {
    fn moving_to_err_flushes_every_outstanding_wr(topology) {
        let (p, _f, a, b, ca, _cb, qa, qb) = deterministic_rc_pair_on(topology, Conn::default());
        let m = a.mem(64, ALL_ACCESS);
        let sg = [m.sge(0, 8)];
        // Receives wait on A; sends from A wait on B's empty receive queue (RNR, infinite retry),
        // one of them unsignaled.
        for i in 0..3 {
            qa.uvp.post_recv(&recv_wr(100 + i, &sg)).unwrap();
        }
        let mut wrs: Vec<_> = (0..3).map(|i| send_wr(i, WrOpcode::Send, &sg)).collect();
        wrs[1].send_flags = 0;
        qa.uvp.post_send_list(&wrs).unwrap();
        assert!(poll_all(&ca).is_empty());
        a.modify(&qa, &qpm(QpState::Error, WV_IO_QP_ATTR_STATE))
            .unwrap();
        let wcs = poll_all(&ca);
        assert_eq!(wcs.len(), 6);
        assert!(
            wcs.iter()
                .all(|w| w.status == WcStatus::WrFlushErr && w.qp_num == qa.uvp.qpn())
        );
        let mut ids = wr_ids(&wcs);
        ids.sort();
        assert_eq!(ids, vec![0, 1, 2, 100, 101, 102]);
        // Posting in ERR is accepted and flushed at once.
        qa.uvp.post_send(&send_wr(7, WrOpcode::Send, &sg)).unwrap();
        qa.uvp.post_recv(&recv_wr(8, &sg)).unwrap();
        let wcs = poll_all(&ca);
        assert_eq!(
            statuses(&wcs),
            vec![(7, WcStatus::WrFlushErr), (8, WcStatus::WrFlushErr)]
        );
        // RESET discards silently; the QP can be brought up again.
        a.modify(&qa, &qpm(QpState::Reset, WV_IO_QP_ATTR_STATE))
            .unwrap();
        let _ = qb;
        let _ = b;
        settle(&p);
    }
}

on_both_topologies! {
    fn bad_lkey_rkey_access_and_bounds_give_error_completions_and_err_state(topology) {
                // Bad lkey: LOC_PROT_ERR, QP to ERR, later WRs flushed.
        let (p, _f, a, b, ca, _cb, qa, _qb) = deterministic_rc_pair_on(topology, Conn::default());
        let m = a.mem(64, ALL_ACCESS);
        let rb = b.mem(64, WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_READ);
        let bad = [Sge {
            addr: m.addr(0),
            length: 8,
            lkey: m.lkey ^ 0x100,
        }];
        let wr = rdma_wr(1, WrOpcode::RdmaWrite, &bad, &rb, 0);
        let ok = [m.sge(0, 8)];
        let mut wr2 = wr;
        wr2.wr_id = 2;
        wr2.sg_list = &ok;
        qa.uvp.post_send_list(&[wr, wr2]).unwrap();
        let w = poll_all(&ca);
        assert_eq!(
            statuses(&w),
            vec![(1, WcStatus::LocProtErr), (2, WcStatus::WrFlushErr)]
        );
        assert_eq!(a.state(&qa), QpState::Error);

        // Out of the region's bounds locally: LOC_PROT_ERR.
        let (_f, a, b, ca, _cb, qa, _qb) = rc_pair_on(&p, topology, Conn::default());
        let (m, rb) = mems(&a, 64, &b, 64);
        let oob = [m.sge(60, 8)];
        let wr = rdma_wr(1, WrOpcode::RdmaWrite, &oob, &rb, 0);
        qa.uvp.post_send(&wr).unwrap();
        assert_eq!(poll_all(&ca)[0].status, WcStatus::LocProtErr);

        // Remote: bad rkey, region without remote write, out of bounds, QP without remote write.
        for case in 0..4 {
            let c = if case == 3 {
                Conn {
                    access: WV_ACCESS_REMOTE_READ,
                    ..Conn::default()
                }
            } else {
                Conn::default()
            };
            let (_f, a, b, ca, cb, qa, qb) = rc_pair_on(&p, topology, c);
            let m = a.mem(64, ALL_ACCESS);
            let rb = b.mem(
                64,
                if case == 1 {
                    WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_READ
                } else {
                    ALL_ACCESS
                },
            );
            let sg = [m.sge(0, 16)];
            let mut wr = send_wr(1, WrOpcode::RdmaWrite, &sg);
            wr.remote_addr = rb.addr(if case == 2 { 56 } else { 0 });
            wr.rkey = if case == 0 { rb.rkey + 1 } else { rb.rkey };
            qa.uvp.post_send(&wr).unwrap();
            assert_eq!(
                poll_all(&ca)[0].status,
                WcStatus::RemAccessErr,
                "case {case}"
            );
            assert_eq!(a.state(&qa), QpState::Error);
            // The responder goes to ERR too (class C error).
            assert_eq!(b.state(&qb), QpState::Error);
            assert!(rb.buf.to_vec().iter().all(|&x| x == 0));
            let _ = cb;
        }

        // RDMA read of a region without remote read.
        let (_f, a, b, ca, _cb, qa, _qb) = rc_pair_on(&p, topology, Conn::default());
        let m = a.mem(64, ALL_ACCESS);
        let rb = b.mem(64, WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_WRITE);
        let sg = [m.sge(0, 16)];
        let wr = rdma_wr(1, WrOpcode::RdmaRead, &sg, &rb, 0);
        qa.uvp.post_send(&wr).unwrap();
        assert_eq!(poll_all(&ca)[0].status, WcStatus::RemAccessErr);

        // A read into a region without local write: LOC_PROT_ERR.
        let (_f, a, b, ca, _cb, qa, _qb) = rc_pair_on(&p, topology, Conn::default());
        let ro = a.mem(64, WV_ACCESS_REMOTE_READ);
        let rb = b.mem(64, ALL_ACCESS);
        let sg = [ro.sge(0, 16)];
        let wr = rdma_wr(1, WrOpcode::RdmaRead, &sg, &rb, 0);
        qa.uvp.post_send(&wr).unwrap();
        assert_eq!(poll_all(&ca)[0].status, WcStatus::LocProtErr);
        settle(&p);
    }
}

on_both_topologies! {
    fn receive_too_small_and_bad_receive_key(topology) {
        let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_on(topology, Conn::default());
        let (m, rb) = mems(&a, 64, &b, 64);
        post_recv(&qb, 9, rb.sge(0, 4));
        post_recv(&qb, 10, rb.sge(0, 4));
        post_send(&qa, 1, m.sge(0, 16));
        assert_eq!(poll_all(&ca)[0].status, WcStatus::RemInvReqErr);
        let r = poll_all(&cb);
        assert_eq!(
            statuses(&r),
            vec![(9, WcStatus::LocLenErr), (10, WcStatus::WrFlushErr)]
        );

        let (_f, a, b, ca, cb, qa, qb) = rc_pair_on(&p, topology, Conn::default());
        let (m, rb) = mems(&a, 64, &b, 64);
        qb.uvp
            .post_recv(&recv_wr(
                9,
                &[Sge {
                    addr: rb.addr(0),
                    length: 32,
                    lkey: 0xFFFF_FF00,
                }],
            ))
            .unwrap();
        post_send(&qa, 1, m.sge(0, 16));
        assert_eq!(poll_all(&ca)[0].status, WcStatus::RemOpErr);
        assert_eq!(poll_all(&cb)[0].status, WcStatus::LocProtErr);
        settle(&p);
    }
}

on_both_topologies! {
    fn transport_retry_exceeded_when_the_peer_is_gone_or_the_port_is_down(topology) {
        let (p, _f, a, b, ca, _cb, qa, qb) = deterministic_rc_pair_on(topology, Conn::with_retry(3));
        let m = a.mem(64, ALL_ACCESS);
        // The receiving port is down: every retry is lost.
        b.hca.set_port_state(1, false).unwrap();
        qb.uvp.post_recv(&recv_wr(1, &[])).unwrap();
        post_send(&qa, 1, m.sge(0, 8));
        assert_eq!(
            run_timers(&p, 100),
            4,
            "the first try and three retries time out"
        );
        assert_eq!(poll_all(&ca)[0].status, WcStatus::RetryExcErr);
        b.hca.set_port_state(1, true).unwrap();
        // Our own port is down.
        let (_f2, a2, _b2, ca2, _cb2, qa2, _qb2) = rc_pair_on(
            &p,
            topology,
            Conn::with_retry(0),
        );
        let m2 = a2.mem(64, ALL_ACCESS);
        a2.hca.set_port_state(1, false).unwrap();
        post_send(&qa2, 1, m2.sge(0, 8));
        assert_eq!(run_timers(&p, 100), 1);
        assert_eq!(poll_all(&ca2)[0].status, WcStatus::RetryExcErr);
        // A destination QP that does not exist.
        let (c, q) = qp_up(&a, QpType::Rc, 8, b.hca.gid(), 0xABCD, Conn::with_retry(1));
        post_send(&q, 5, m.sge(0, 8));
        assert_eq!(run_timers(&p, 100), 2);
        assert_eq!(poll_all(&c)[0].status, WcStatus::RetryExcErr);
        settle(&p);
    }
}

#[test]
fn mr_registration_checks_access_and_bounds() {
    let (p, a) = deterministic_node();
    let buf = a.pool.alloc(4096);
    let reg = |addr, length, access| {
        a.hca.register_mr(
            &a.pd,
            &MemoryRegion {
                address: addr,
                length,
                access,
            },
        )
    };
    // Remote write / atomic without local write.
    assert_eq!(
        reg(buf.addr(), 64, 0x2).unwrap_err(),
        VerbsError::InvalidPermission
    );
    assert_eq!(
        reg(buf.addr(), 64, WV_ACCESS_REMOTE_ATOMIC).unwrap_err(),
        VerbsError::InvalidPermission
    );
    // Unknown bits.
    assert_eq!(
        reg(buf.addr(), 64, 0x100).unwrap_err(),
        VerbsError::InvalidParameter
    );
    // Outside the client's memory, zero length, overflow.
    assert_eq!(
        reg(buf.addr() + 4000, 200, 0).unwrap_err(),
        VerbsError::InvalidParameter
    );
    assert_eq!(
        reg(0x1000, 16, 0).unwrap_err(),
        VerbsError::InvalidParameter
    );
    assert_eq!(
        reg(buf.addr(), 0, 0).unwrap_err(),
        VerbsError::InvalidParameter
    );
    assert_eq!(
        reg(u64::MAX - 4, 16, 0).unwrap_err(),
        VerbsError::InvalidParameter
    );
    // Fine.
    let (mr, keys) = reg(buf.addr(), 4096, ALL_ACCESS).unwrap();
    assert_eq!(keys.lkey, u32::from_be(keys.rkey));
    // Keys are checked against the region they name after deregistration.
    assert!(a.hca.deregister_mr(mr).is_ok());
    settle(&p);
}

#[test]
fn limits_are_advertised_and_enforced() {
    let (p, a) = deterministic_configured("small", |c| {
        c.limits.max_qp = 2;
        c.limits.max_cq = 2;
        c.limits.max_mr = 1;
        c.limits.max_qp_wr = 8;
        c.limits.max_cqe = 16;
        c.limits.max_sge = 2;
        c.limits.max_pd = 1;
    });
    let attr = a.hca.query_ca().unwrap();
    assert_eq!(
        (
            attr.max_qp,
            attr.max_qp_wr,
            attr.max_sge,
            attr.max_cq,
            attr.max_cqe,
            attr.max_mr
        ),
        (2, 8, 2, 2, 16, 1)
    );
    assert_eq!(attr.node_guid, a.hca.guid());
    assert_eq!(
        a.hca.allocate_pd(&a.ca, &mut Umv::none()).unwrap_err(),
        VerbsError::InsufficientResources
    );
    let sink = wv_hal::KArc::new(CqSink::default());
    assert_eq!(
        a.hca
            .create_cq(&a.ca, 17, sink.clone().into(), &mut Umv::none())
            .unwrap_err(),
        VerbsError::InvalidSetting
    );
    let c1 = a.cq(16);
    let _c2 = a.cq(1);
    assert_eq!(
        a.hca
            .create_cq(&a.ca, 1, sink.into(), &mut Umv::none())
            .unwrap_err(),
        VerbsError::InsufficientResources
    );
    let _m = a.mem(16, 0);
    let b2 = a.pool.alloc(16);
    let r = MemoryRegion {
        address: b2.addr(),
        length: 16,
        access: 0,
    };
    assert_eq!(
        a.hca.register_mr(&a.pd, &r).unwrap_err(),
        VerbsError::InsufficientResources
    );
    let events = wv_hal::KArc::new(Log::default());
    let mk = |depth, sge| QpCreate {
        qp_type: QpType::Rc,
        sq_depth: depth,
        rq_depth: depth,
        sq_sge: sge,
        rq_sge: sge,
        sq_max_inline: 0,
        sq_signaled: true,
        send_cq: &c1.soft,
        recv_cq: &c1.soft,
        srq: None,
    };
    let create = |depth, sge| {
        a.hca.create_qp(
            &a.pd,
            &mk(depth, sge),
            events.clone().into(),
            &mut Umv::none(),
        )
    };
    assert_eq!(create(9, 1).unwrap_err(), VerbsError::InvalidSetting);
    assert_eq!(create(8, 3).unwrap_err(), VerbsError::InvalidSetting);
    let (q1, created) = create(5, 2).unwrap();
    assert_eq!(
        (created.sq_depth, created.rq_depth, created.sq_sge),
        (8, 8, 2)
    );
    let _q2 = create(1, 1).unwrap();
    assert_eq!(create(1, 1).unwrap_err(), VerbsError::InsufficientResources);
    // Destroying frees the slot; handles are reused.
    a.hca.destroy_qp(q1);
    assert!(create(1, 1).is_ok());
    settle(&p);
}

#[test]
fn vendor_bytes_are_validated_never_trusted() {
    let (p, a) = deterministic_node();
    let c = a.cq(4);
    let events = wv_hal::KArc::new(Log::default());
    let create = QpCreate {
        sq_signaled: true,
        ..QpCreate::new(QpType::Rc, &c.soft, 4)
    };
    let create_with =
        |umv: &mut Umv<'_>| a.hca.create_qp(&a.pd, &create, events.clone().into(), umv);
    // A command with a bad magic.
    let mut buf = [0xAAu8; 64];
    let mut umv = Umv::new(0, 8, 64, &mut buf);
    assert_eq!(
        create_with(&mut umv).unwrap_err(),
        VerbsError::InvalidParameter
    );
    // Lengths larger than the buffer.
    let mut small = [0u8; 4];
    let mut umv = Umv {
        command: 0,
        status: 0,
        input_len: 100,
        output_len: 0,
        buf: &mut small,
    };
    assert_eq!(
        create_with(&mut umv).unwrap_err(),
        VerbsError::InvalidParameter
    );
    // Output too small for the response: refused, and nothing is leaked.
    let mut small = [0u8; 8];
    let mut umv = Umv::new(0, 0, 8, &mut small);
    assert_eq!(
        create_with(&mut umv).unwrap_err(),
        VerbsError::InvalidParameter
    );
    let mut small = [0u8; 8];
    let mut umv = Umv::new(0, 0, 8, &mut small);
    let sink = wv_hal::KArc::new(CqSink::default());
    assert!(
        a.hca
            .create_cq(&a.ca, 4, sink.clone().into(), &mut umv)
            .is_err()
    );
    // No vendor bytes at all: a kernel consumer; the rings are allocated all the same.
    let (_q, created) = create_with(&mut Umv::none()).unwrap();
    assert!(created.qpn >= 2);
    assert!(
        a.hca
            .create_cq(&a.ca, 4, sink.into(), &mut Umv::none())
            .is_ok()
    );
    // Mapping with a response that does not match the device's allocation.
    let mut out = [0u8; 64];
    let mut umv = Umv::new(0, 0, 64, &mut out);
    let (_c, _) = a
        .hca
        .create_cq(
            &a.ca,
            4,
            wv_hal::KArc::new(CqSink::default()).into(),
            &mut umv,
        )
        .unwrap();
    let mut r: abi::CqResp = abi::parse(&out).unwrap();
    r.ring_addr += 8;
    assert!(a.uvp.map_cq(&r).is_err());
    r.cq_handle = 999;
    assert!(a.uvp.map_cq(&r).is_err());
    assert!(UvpContext::open(a.hca.guid(), 0xdead).is_err());
    assert!(UvpContext::from_open_resp(&[1, 2, 3]).is_err());
    settle(&p);
}

#[test]
fn cq_size_and_multicast_limits_hold_at_their_exact_boundaries() {
    let (p, a) = deterministic_configured("edges", |c| {
        c.limits.max_cqe = 16;
        c.limits.max_mcast_qp_attach = 2;
        c.limits.max_total_mcast_qp_attach = 3;
    });

    // A CQ resizes to exactly max_cqe; one entry more is refused.
    let cq = a.cq(4);
    assert_eq!(a.hca.resize_cq(&cq.soft, 16, &mut Umv::none()), Ok(16));
    assert_eq!(
        a.hca.resize_cq(&cq.soft, 17, &mut Umv::none()),
        Err(VerbsError::InvalidSetting)
    );

    // A group takes max_mcast_qp_attach QPs, the device max_total_mcast_qp_attach
    // attachments, each limit on its own.
    let qps = ready_ud_qps(&a, &cq, 3);
    let _m1 = attach(&a, &qps[0], 1).unwrap();
    let _m2 = attach(&a, &qps[1], 1).unwrap();
    assert_eq!(
        attach(&a, &qps[2], 1).unwrap_err(),
        VerbsError::InsufficientResources,
        "a third QP in a group of two"
    );
    let _m3 = attach(&a, &qps[2], 2).unwrap();
    assert_eq!(
        attach(&a, &qps[0], 3).unwrap_err(),
        VerbsError::InsufficientResources,
        "a fourth attachment of a device that takes three"
    );
    settle(&p);
}

/// `n` UD QPs of `node` on `cq`, each in RTS.
fn ready_ud_qps(node: &Node, cq: &Cq, n: usize) -> Vec<Qp> {
    let qps: Vec<Qp> = (0..n).map(|_| node.qp(QpType::Ud, cq)).collect();
    for q in &qps {
        bring_up(node, q, [0; 16], 0, Conn::default());
    }
    qps
}

/// Attaches `qp` to multicast group `n`: GID ff0e::n, MLID 0xC000 + n.
fn attach(node: &Node, qp: &Qp, n: u8) -> Result<SoftMcast, VerbsError> {
    let mut gid = [0u8; 16];
    gid[0] = 0xFF;
    gid[1] = 0x0E;
    gid[15] = n;
    node.hca.attach_mcast(&qp.soft, &gid, 0xC000 + u16::from(n))
}

#[test]
fn the_group_limit_counts_distinct_groups_not_attachments() {
    let (p, a) = deterministic_configured("groups", |c| c.limits.max_mcast_grp = 2);
    let cq = a.cq(4);
    let qps = ready_ud_qps(&a, &cq, 3);
    // Two groups, three attachments: a second QP in a group adds no group.
    let _m1 = attach(&a, &qps[0], 1).unwrap();
    let _m2 = attach(&a, &qps[1], 1).unwrap();
    let _m3 = attach(&a, &qps[2], 2).unwrap();
    assert_eq!(
        attach(&a, &qps[0], 3).unwrap_err(),
        VerbsError::InsufficientResources,
        "a third group of a device that takes two"
    );
    settle(&p);
}

#[test]
fn the_device_counts_the_objects_it_holds() {
    let p = HostPlatform::deterministic();
    let a = Node::new(&p, DeviceConfig::new("counts", mac()));
    let cq = a.cq(4);
    let _qp = a.qp(QpType::Rc, &cq);
    let held = a.hca.objects();
    assert_eq!((held.cqs, held.qps, held.srqs), (1, 1, 0));
    assert!(held.contexts >= 1 && held.pds >= 1, "{held:?}");
    settle(&p);
}

#[test]
fn a_modify_from_rts_to_rts_does_not_renew_the_retry_budget_of_a_request_in_flight() {
    let (p, _f, a, b, ca, _cb, qa, _qb) = deterministic_rc_pair_with(Conn::with_retry(3));
    let m = a.mem(64, ALL_ACCESS);
    b.hca.set_port_state(1, false).unwrap();
    post_send(&qa, 1, m.sge(0, 8));
    // The first try times out: one retry of three spent.
    assert!(p.run_next_timer());
    // RTS -> RTS (a new RNR NAK timer, say) leaves the send queue as it was: the budget is
    // what was left of it, not a fresh one.
    let mut again = attrs(WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_RNR_NAK_TIMEOUT);
    again.current_state = QpState::Rts;
    a.modify(&qa, &again.to(QpState::Rts)).unwrap();
    assert_eq!(a.state(&qa), QpState::Rts);
    assert_eq!(
        run_timers(&p, 100),
        3,
        "the second try and the two retries left time out"
    );
    assert_eq!(poll_all(&ca)[0].status, WcStatus::RetryExcErr);
    b.hca.set_port_state(1, true).unwrap();
    settle(&p);
}

#[test]
fn a_send_error_that_moves_an_rc_qp_to_err_flushes_its_receives_and_ends_its_srq_use() {
    let (p, _f, a, b) = deterministic_pair();
    // A remote access error: the send fails, the QP is in ERR and, as IBTA has it for a QP
    // entering ERR, its outstanding receives complete with WR_FLUSH_ERR, at once.
    let (ca, _cb, qa, qb) = two_qps(&a, &b, QpType::Rc, 16);
    connect(&a, &qa, &b, &qb, Conn::default());
    let (m, rb) = mems(&a, 64, &b, 64);
    for i in 0..2 {
        post_recv(&qa, 10 + i, m.sge(32, 32));
    }
    let sg = [m.sge(0, 8)];
    let mut wr = send_wr(1, WrOpcode::RdmaWrite, &sg);
    wr.remote_addr = rb.addr(0);
    wr.rkey = rb.rkey ^ 0x100;
    qa.uvp.post_send(&wr).unwrap();
    expect_statuses(
        &ca,
        &[
            (1, WcStatus::RemAccessErr),
            (10, WcStatus::WrFlushErr),
            (11, WcStatus::WrFlushErr),
        ],
    );
    assert_eq!(a.state(&qa), QpState::Error);
    // A QP on an SRQ whose local operation fails: ERR, and LAST_WQE_REACHED (the SRQ's
    // receives are the SRQ's, not flushed).
    let srq = a.srq(8, 0);
    post_srq_recv(&srq, 20, m.sge(32, 32));
    let cs = a.cq(16);
    let qs = a.qp_with(QpType::Rc, &cs, &cs, Some(&srq), 16, 2, 0, true);
    let (_cp, _qp) = connected_peer(&a, &qs, &b, 16, Conn::default());
    let mut inv = send_wr(2, WrOpcode::LocalInv, &[]);
    inv.imm_or_inv = m.lkey ^ 0x100;
    qs.uvp.post_send(&inv).unwrap();
    settle(&p);
    expect_statuses(&cs, &[(2, WcStatus::LocQpOpErr)]);
    assert_eq!(a.state(&qs), QpState::Error);
    assert_eq!(qs.events.take(), vec![QpEvent::LastWqeReached]);
    settle(&p);
}
