//! Interrupt paths: CQ arm (next / solicited, one-shot), CQ overrun, SRQ limit and last-WQE
//! events, COMM_EST, port state and GID events, ports and GID tables, surprise removal. Every
//! callback arrives through ISR → DPC on the host model, whose verifier must stay clean.

use crate::common::*;
use wv_abi::consts::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

#[test]
fn cq_arm_is_one_shot_and_needs_a_dpc() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    let (m, rb) = mems(&a, 64, &b, 64);
    let sg = [m.sge(0, 4)];
    // Not armed: no callback.
    post_recv(&qb, 1, rb.sge(0, 8));
    qa.uvp.post_send(&send_wr(1, WrOpcode::Send, &sg)).unwrap();
    settle(&p);
    assert_eq!(cb.sink.completions(), 0);
    // Armed with completions already waiting: the arm reports them.
    assert!(cb.uvp.arm(false));
    poll_all(&cb);
    assert!(!cb.uvp.arm(false));
    post_recv(&qb, 2, rb.sge(0, 8));
    post_recv(&qb, 3, rb.sge(0, 8));
    qa.uvp.post_send(&send_wr(2, WrOpcode::Send, &sg)).unwrap();
    // The interrupt fired and queued the DPC; the sink runs only in the DPC.
    assert_eq!(cb.sink.completions(), 0);
    assert!(p.queued() > 0);
    settle(&p);
    assert_eq!(cb.sink.completions(), 1);
    // One-shot: the next completion does not call again until re-armed.
    qa.uvp.post_send(&send_wr(3, WrOpcode::Send, &sg)).unwrap();
    settle(&p);
    assert_eq!(cb.sink.completions(), 1);
    assert_eq!(poll_all(&cb).len(), 2);
    let _ = ca;
}

#[test]
fn a_cq_never_armed_raises_no_event_for_a_solicited_completion() {
    let (p, _f, a, b, _ca, cb, qa, qb) = deterministic_rc_pair();
    let (m, rb) = mems(&a, 64, &b, 64);
    let sg = [m.sge(0, 4)];
    let mut wr = send_wr(1, WrOpcode::Send, &sg);
    wr.send_flags |= send_flags::SOLICITED;
    // A CQ event follows a request for one (ibv_req_notify_cq), solicited or not.
    for i in 0..2 {
        post_recv(&qb, i, rb.sge(0, 8));
        qa.uvp.post_send(&wr).unwrap();
        settle(&p);
        assert_eq!(cb.sink.completions(), 0);
    }
    assert_eq!(poll_all(&cb).len(), 2);
    // Armed for solicited completions, the next one fires.
    assert!(!cb.uvp.arm(true));
    post_recv(&qb, 2, rb.sge(0, 8));
    qa.uvp.post_send(&wr).unwrap();
    settle(&p);
    assert_eq!(cb.sink.completions(), 1);
}

#[test]
fn solicited_arm_fires_on_se_receives_and_on_errors_only() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    let (m, rb) = mems(&a, 64, &b, 64);
    let sg = [m.sge(0, 4)];
    for i in 0..3 {
        post_recv(&qb, i, rb.sge(0, 8));
    }
    assert!(!cb.uvp.arm(true));
    qa.uvp.post_send(&send_wr(1, WrOpcode::Send, &sg)).unwrap();
    settle(&p);
    assert_eq!(
        cb.sink.completions(),
        0,
        "a receive without SE does not fire a solicited arm"
    );
    let mut wr = send_wr(2, WrOpcode::Send, &sg);
    wr.send_flags |= send_flags::SOLICITED;
    qa.uvp.post_send(&wr).unwrap();
    settle(&p);
    assert_eq!(cb.sink.completions(), 1);
    // Send completions are never solicited; error completions always are.
    assert!(!ca.uvp.arm(true) || !poll_all(&ca).is_empty());
    poll_all(&ca);
    assert!(!ca.uvp.arm(true));
    qa.uvp.post_send(&send_wr(3, WrOpcode::Send, &sg)).unwrap();
    settle(&p);
    assert_eq!(ca.sink.completions(), 0);
    let bad = [Sge {
        addr: m.addr(0),
        length: 4,
        lkey: 0,
    }];
    qa.uvp.post_send(&send_wr(4, WrOpcode::Send, &bad)).unwrap();
    settle(&p);
    assert_eq!(ca.sink.completions(), 1);
    // A NEXT arm is not downgraded by a later SOLICITED arm.
    poll_all(&cb);
    cb.uvp.arm(false);
    cb.uvp.arm(true);
    a.modify(&qa, &qpm(QpState::Reset, WV_IO_QP_ATTR_STATE))
        .unwrap();
    let _ = qb;
}

#[test]
fn cq_overrun_raises_the_cq_error_event_and_is_sticky() {
    let (p, _f, a, b) = deterministic_pair();
    let small = a.cq(2);
    let cb = b.cq(8);
    let qa = a.qp_with(QpType::Rc, &small, &small, None, 8, 1, 0, true);
    let qb = b.qp(QpType::Rc, &cb);
    connect(&a, &qa, &b, &qb, Conn::default());
    let (m, rb) = mems(&a, 64, &b, 64);
    for i in 0..3 {
        let sg = [m.sge(0, 4)];
        let wr = rdma_wr(i, WrOpcode::RdmaWrite, &sg, &rb, 0);
        qa.uvp.post_send(&wr).unwrap();
    }
    settle(&p);
    assert_eq!(small.sink.errors(), 1);
    assert!(small.uvp.overrun());
    assert_eq!(poll_all(&small).len(), 2);
}

#[test]
fn srq_shared_by_two_qps_with_limit_and_last_wqe_events() {
    let (p, _f, a, b) = deterministic_pair();
    let (ca, cb) = two_cqs(&a, &b, 32);
    let srq = b.srq(8, 0);
    let qa1 = a.qp(QpType::Rc, &ca);
    let qa2 = a.qp(QpType::Rc, &ca);
    let qb1 = b.qp_with(QpType::Rc, &cb, &cb, Some(&srq), 8, 2, 0, true);
    let qb2 = b.qp_with(QpType::Rc, &cb, &cb, Some(&srq), 8, 2, 0, true);
    connect(&a, &qa1, &b, &qb1, Conn::default());
    connect(&a, &qa2, &b, &qb2, Conn::default());
    assert_eq!(qb1.uvp.post_recv(&recv_wr(0, &[])), Err(PostError::UsesSrq));
    let (m, rb) = mems(&a, 64, &b, 256);
    for i in 0..4 {
        post_srq_recv(&srq, i, rb.sge(i as usize * 16, 16));
    }
    // Arm the limit at 3: the event fires once when fewer than 3 remain.
    b.hca
        .modify_srq(
            &srq.soft,
            &SrqAttributes {
                max_wr: 0,
                max_sge: 0,
                srq_limit: 3,
            },
            SrqModifyMask {
                max_wr: false,
                limit: true,
            },
            &mut Umv::none(),
        )
        .unwrap();
    let sg = [m.sge(0, 4)];
    qa1.uvp.post_send(&send_wr(1, WrOpcode::Send, &sg)).unwrap();
    settle(&p);
    assert!(srq.events.take().is_empty());
    qa2.uvp.post_send(&send_wr(2, WrOpcode::Send, &sg)).unwrap();
    settle(&p);
    assert_eq!(srq.events.take(), vec![SrqEvent::LimitReached]);
    qa2.uvp.post_send(&send_wr(3, WrOpcode::Send, &sg)).unwrap();
    settle(&p);
    assert!(srq.events.take().is_empty(), "the limit is one-shot");
    let r = poll_all(&cb);
    assert_eq!(
        r.iter().map(|w| (w.wr_id, w.qp_num)).collect::<Vec<_>>(),
        vec![(0, qb1.uvp.qpn()), (1, qb2.uvp.qpn()), (2, qb2.uvp.qpn())]
    );
    assert_eq!(
        b.hca
            .query_srq(&srq.soft, &mut Umv::none())
            .unwrap()
            .srq_limit,
        0
    );
    // A QP of the SRQ entering ERR: last WQE reached; the SRQ's WQEs are not flushed.
    b.modify(&qb1, &qpm(QpState::Error, WV_IO_QP_ATTR_STATE))
        .unwrap();
    settle(&p);
    assert_eq!(qb1.events.take(), vec![QpEvent::LastWqeReached]);
    assert!(poll_all(&cb).is_empty());
    // RNR on an SRQ: the sender retries when its RNR timer expires and finds the receive
    // posted to the SRQ meanwhile.
    qa2.uvp.post_send(&send_wr(4, WrOpcode::Send, &sg)).unwrap();
    qa2.uvp.post_send(&send_wr(5, WrOpcode::Send, &sg)).unwrap();
    assert_eq!(wr_ids(&poll_all(&ca)), vec![1, 2, 3, 4]);
    post_srq_recv(&srq, 9, rb.sge(0, 16));
    assert!(poll_all(&ca).is_empty());
    assert_eq!(run_timers(&p, 10), 1);
    assert_eq!(wr_ids(&poll_all(&ca)), vec![5]);
    settle(&p);
}

#[test]
fn comm_established_on_the_first_packet_in_rtr() {
    let (p, _f, a, b) = deterministic_pair();
    let (_ca, cb, qa, qb) = two_qps(&a, &b, QpType::Rc, 8);
    bring_up(&a, &qa, b.hca.gid(), qb.uvp.qpn(), Conn::default());
    // B only to RTR.
    b.modify(&qb, &qpm(QpState::Init, INIT_RC)).unwrap();
    b.modify(&qb, &rc_rtr_towards(&a, &qa)).unwrap();
    let (mem, rb) = mems(&a, 16, &b, 16);
    post_recv(&qb, 1, rb.sge(0, 16));
    post_recv(&qb, 2, rb.sge(0, 16));
    post_send(&qa, 1, mem.sge(0, 4));
    post_send(&qa, 2, mem.sge(0, 4));
    settle(&p);
    assert_eq!(qb.events.take(), vec![QpEvent::CommEstablished]);
    assert_eq!(poll_all(&cb).len(), 2);
}

#[test]
fn ports_gids_pkeys_and_port_events() {
    let p = HostPlatform::deterministic();
    let a = Node::new(
        &p,
        DeviceConfig::new("p", [0x00, 0x11, 0x22, 0x33, 0x44, 0x55]),
    );
    // Node GUID = EUI-64 of the MAC, network order as stored.
    assert_eq!(
        a.hca.guid().to_ne_bytes(),
        [0x02, 0x11, 0x22, 0xFF, 0xFE, 0x33, 0x44, 0x55]
    );
    let g0 = a.hca.query_gid(1, 0).unwrap();
    assert_eq!(
        g0,
        [
            0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xFF, 0xFE, 0x33, 0x44, 0x55
        ]
    );
    let i = a.hca.add_ipv4_gid(1, [192, 168, 1, 7]).unwrap();
    assert_eq!(i, 1);
    assert_eq!(
        a.hca.query_gid(1, 1).unwrap(),
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 168, 1, 7]
    );
    assert_eq!(a.hca.query_gid(2, 0), Err(VerbsError::InvalidParameter));
    assert_eq!(a.hca.query_gid(1, 999), Err(VerbsError::InvalidParameter));
    assert_eq!(a.hca.query_pkey(1, 0), Ok(0xFFFF));
    assert_eq!(a.hca.query_pkey(0, 0), Err(VerbsError::InvalidParameter));
    let attr = a.hca.query_port(1).unwrap();
    assert_eq!(attr.state, PortState::Active);
    assert_eq!(attr.transport, 2);
    settle(&p);
    assert_eq!(
        a.ca_events.take(),
        vec![CaEvent {
            kind: CaEventKind::GidChange,
            port: 1
        }]
    );
    a.hca.set_port_state(1, false).unwrap();
    assert_eq!(a.hca.query_port(1).unwrap().state, PortState::Down);
    a.hca.set_port_state(1, true).unwrap();
    settle(&p);
    assert_eq!(
        a.ca_events.take(),
        vec![
            CaEvent {
                kind: CaEventKind::PortDown,
                port: 1
            },
            CaEvent {
                kind: CaEventKind::PortActive,
                port: 1
            }
        ]
    );
    assert_eq!(
        a.hca.set_port_state(3, true),
        Err(VerbsError::InvalidParameter)
    );
    // The UD address of another device through an IPv4 GID.
    let (_f, x, y) = pair(&p);
    y.hca.add_ipv4_gid(1, [10, 0, 0, 2]).unwrap();
    let (_cx, cy, qx, qy) = ud_qps(&x, &y, 4);
    let ry = y.mem(128, ALL_ACCESS);
    post_recv(&qy, 1, ry.sge(0, 128));
    let mut wr = send_wr(1, WrOpcode::Send, &[]);
    let data = *b"v4";
    wr.inline_data = Some(&data);
    wr.ud = Some(ud_to(
        wv_softhca::device::ipv4_gid([10, 0, 0, 2]),
        qy.uvp.qpn(),
    ));
    qx.uvp.post_send(&wr).unwrap();
    assert_eq!(poll_all(&cy).len(), 1);
    settle(&p);
}

/// A send of 4 bytes from `qa` of `a` to `qb` of `b`, whose CQ `cb` is armed: the receive's
/// completion and the DPC of its notification under way. The two regions are returned, to
/// live as long as the test.
fn send_to_an_armed_cq(a: &Node, b: &Node, qa: &Qp, qb: &Qp, cb: &Cq) -> (Mem, Mem) {
    let (m, rb) = mems(a, 64, b, 64);
    post_recv(qb, 1, rb.sge(0, 8));
    cb.uvp.arm(false);
    post_send(qa, 1, m.sge(0, 4));
    (m, rb)
}

#[test]
fn surprise_removal_fails_every_verb_and_stops_callbacks() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    let (m, _rb) = send_to_an_armed_cq(&a, &b, &qa, &qb, &cb);
    // The DPC is queued but B is removed before it runs: no callback after removal.
    assert!(p.queued() > 0);
    b.hca.surprise_remove();
    settle(&p);
    assert_eq!(cb.sink.completions(), 0);
    assert_eq!(b.hca.query_ca(), Err(VerbsError::DeviceRemoved));
    assert_eq!(b.hca.query_port(1).unwrap_err(), VerbsError::DeviceRemoved);
    assert_eq!(
        b.hca.allocate_pd(&b.ca, &mut Umv::none()).unwrap_err(),
        VerbsError::DeviceRemoved
    );
    assert_eq!(
        b.hca.set_port_state(1, false),
        Err(VerbsError::DeviceRemoved)
    );
    assert_eq!(
        qb.uvp.post_recv(&recv_wr(2, &[])),
        Err(PostError::DeviceRemoved)
    );
    assert_eq!(
        qb.uvp
            .post_send(&send_wr(2, WrOpcode::Send, &[]))
            .unwrap_err()
            .errno(),
        19
    );
    // The peer sees a dead link.
    a.modify(&qa, &{
        let mut m = attrs(WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_CURRENT_STATE);
        m.current_state = QpState::Rts;
        m.to(QpState::Rts)
    })
    .unwrap();
    post_send(&qa, 3, m.sge(0, 4));
    assert_eq!(
        run_timers(&p, 100),
        8,
        "the first try and seven retries time out"
    );
    let s = poll_all(&ca);
    assert_eq!(s.last().unwrap().status, WcStatus::RetryExcErr);
    // Destroys still succeed.
    b.hca.destroy_qp(qb.soft);
    b.hca.destroy_cq(cb.soft);
    b.hca.deallocate_pd(b.pd);
    b.hca.close_ca(b.ca);
    settle(&p);
}

#[test]
fn destroy_stops_callbacks_for_the_object() {
    let (p, _f, a, b, _ca, cb, qa, qb) = deterministic_rc_pair();
    let (_m, _rb) = send_to_an_armed_cq(&a, &b, &qa, &qb, &cb);
    let sink = cb.sink.clone();
    b.hca.destroy_qp(qb.soft);
    b.hca.destroy_cq(cb.soft);
    settle(&p);
    assert_eq!(sink.completions(), 0);
}

#[test]
fn threaded_platform_runs_the_dpc_in_the_posting_thread() {
    let p = HostPlatform::threaded(2);
    let (_f, a, b, _ca, cb, qa, qb) = rc_pair(&p);
    let (m, rb) = mems(&a, 64, &b, 64);
    let qa = std::sync::Arc::new(qa);
    let mbuf = m.sge(0, 4);
    for round in 0..50u64 {
        post_recv(&qb, round, rb.sge(0, 8));
        cb.uvp.arm(false);
        let q = qa.clone();
        std::thread::spawn(move || {
            q.uvp
                .post_send(&send_wr(round, WrOpcode::Send, &[mbuf]))
                .unwrap()
        })
        .join()
        .unwrap();
        // The sender's thread ran send → CQE → interrupt → ISR → DPC → sink before returning.
        assert_eq!(cb.sink.completions() as u64, round + 1);
        assert_eq!(poll_all(&cb).len(), 1);
    }
    settle(&p);
}

/// A CQ sink whose completion callback takes a while, saying when it starts and ends.
#[derive(Default)]
struct SlowSink {
    entered: std::sync::atomic::AtomicBool,
    left: std::sync::atomic::AtomicBool,
}

impl CqEventSink for SlowSink {
    fn on_completion(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        self.entered.store(true, SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(200));
        self.left.store(true, SeqCst);
    }
    fn on_error(&self) {}
}

#[test]
fn destroy_waits_for_a_callback_already_running() {
    use std::sync::atomic::Ordering::SeqCst;
    let (p, _f, a, b) = deterministic_pair();
    let ca = a.cq(16);
    let slow = wv_hal::KArc::new(SlowSink::default());
    let mut out = [0u8; 64];
    let (soft, _) = b
        .hca
        .create_cq(
            &b.ca,
            16,
            slow.clone().into(),
            &mut Umv::new(0, 0, 64, &mut out),
        )
        .unwrap();
    let uvp = b
        .uvp
        .map_cq(&wv_softhca::abi::parse(&out).unwrap())
        .unwrap();
    let cb = Cq {
        soft,
        uvp,
        sink: wv_hal::KArc::new(CqSink::default()),
    };
    let qa = a.qp(QpType::Rc, &ca);
    let qb = b.qp(QpType::Rc, &cb);
    connect(&a, &qa, &b, &qb, Conn::default());
    let (m, rb) = mems(&a, 64, &b, 64);
    post_recv(&qb, 1, rb.sge(0, 8));
    cb.uvp.arm(false);
    post_send(&qa, 1, m.sge(0, 4));
    b.hca.destroy_qp(qb.soft);
    // The DPC runs on another processor and is inside the CQ's callback when the CQ is
    // destroyed: the destroy returns only once the callback has.
    let dpc = {
        let p = p.clone();
        std::thread::spawn(move || p.run_until_idle())
    };
    while !slow.entered.load(SeqCst) {
        std::thread::yield_now();
    }
    b.hca.destroy_cq(cb.soft);
    assert!(
        slow.left.load(SeqCst),
        "destroy_cq returned while its callback was running"
    );
    dpc.join().unwrap();
    settle(&p);
}

#[test]
fn async_events_beyond_the_ring_are_counted_as_lost() {
    let (p, a) = deterministic_node();
    // No DPC runs until the platform settles: every port change waits in the async ring,
    // which holds 1024.
    for i in 0..1100 {
        a.hca.set_port_state(1, i % 2 == 1).unwrap();
    }
    assert!(a.hca.async_overflows() > 0);
    settle(&p);
}
