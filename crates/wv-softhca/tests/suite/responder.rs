//! The responder's rules as InfiniBand (IBTA vol. 1 ch. 9 and 10) and rxe's `rxe_resp.c` have
//! them: a QP takes packets only from RTR on, and an RC or UC QP only from the QP it is
//! connected to; a UD receive buffer must hold the GRH and the payload, and the completion
//! names the sender; a UC message takes a receive only when it is a send or carries
//! immediate data, and one that loses a packet gives back (or, from an SRQ, completes in error)
//! the receive it took; an RC RDMA write with immediate data and no receive is taken up to its
//! last packet, which gets an RNR NAK; duplicates are answered from the responder resources (a
//! read executed again, an atomic from the value of its first execution), each from its own; a
//! resent send that runs from old packets into new ones lands in the receive its first packet
//! took.

use crate::common::*;
use wv_abi::consts::*;
use wv_hal::*;
use wv_softhca::*;

/// A deterministic pair with a QP of `qp_type` on each side, each on its own 16-entry CQ, B's
/// taking its receives from an SRQ of 8 (two SGEs each); connected with the defaults.
fn srq_connected(
    qp_type: QpType,
) -> (
    wv_host::HostPlatform,
    std::sync::Arc<Fabric>,
    Node,
    Node,
    Cq,
    Cq,
    Srq,
    Qp,
    Qp,
) {
    let (p, f, a, b) = deterministic_pair();
    let (ca, cb) = two_cqs(&a, &b, 16);
    let srq = b.srq(8, 0);
    let qa = a.qp(qp_type, &ca);
    let qb = b.qp_with(qp_type, &cb, &cb, Some(&srq), 16, 2, 0, true);
    connect(&a, &qa, &b, &qb, Conn::default());
    (p, f, a, b, ca, cb, srq, qa, qb)
}

#[test]
fn a_ud_qp_takes_datagrams_from_rtr_on_and_its_completion_names_the_sender() {
    let (p, _f, a, b) = deterministic_pair();
    let (ca, cb) = two_cqs(&a, &b, 16);
    let qa = a.qp(QpType::Ud, &ca);
    bring_up(&a, &qa, [0; 16], 0, Conn::default());
    let qb = b.qp(QpType::Ud, &cb);
    b.modify(&qb, &qpm(QpState::Init, INIT_UD)).unwrap();
    let la = a.mem_holding(64, b"datagram");
    let rb = b.mem(256, ALL_ACCESS);
    // A receive may be posted in INIT, but the QP processes no incoming packet before RTR.
    post_recv(&qb, 1, rb.sge(0, 128));
    let sg = [la.sge(0, 8)];
    let mut wr = send_wr(1, WrOpcode::Send, &sg);
    wr.ud = Some(ud_to(b.hca.gid(), qb.uvp.qpn()));
    qa.uvp.post_send(&wr).unwrap();
    expect_statuses(&ca, &[(1, WcStatus::Success)]);
    assert!(poll_all(&cb).is_empty(), "dropped in INIT");
    assert!(rb.buf.to_vec()[40..48].iter().all(|&x| x == 0));
    // In RTR the next datagram takes the receive that waited.
    b.modify(&qb, &qpm(QpState::Rtr, WV_IO_QP_ATTR_STATE))
        .unwrap();
    wr.wr_id = 2;
    qa.uvp.post_send(&wr).unwrap();
    expect_statuses(&ca, &[(2, WcStatus::Success)]);
    let r = poll_all(&cb);
    assert_eq!(statuses(&r), vec![(1, WcStatus::Success)]);
    // A UD receive completion names the sender: its QP and its port's LID.
    assert_eq!(r[0].src_qp, qa.uvp.qpn());
    assert_ne!(a.hca.lid(1), 0);
    assert_eq!(r[0].slid, a.hca.lid(1));
    assert_eq!(&rb.buf.to_vec()[40..48], b"datagram");
    settle(&p);
}

#[test]
fn a_ud_receive_must_hold_the_grh_and_the_payload() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_ud_pair(16);
    let la = a.mem_holding(64, b"0123456789abcdef");
    let rb = b.mem(256, ALL_ACCESS);
    let grh = GRH_BYTES as u32;
    // One byte short of GRH + 16: the datagram is dropped and the receive stays (class D).
    post_recv(&qb, 1, rb.sge(0, grh + 15));
    let sg16 = [la.sge(0, 16)];
    let mut wr = send_wr(1, WrOpcode::Send, &sg16);
    wr.ud = Some(ud_to(b.hca.gid(), qb.uvp.qpn()));
    qa.uvp.post_send(&wr).unwrap();
    assert!(poll_all(&cb).is_empty());
    assert_eq!(b.state(&qb), QpState::Rts);
    // The receive that stayed takes a datagram that fits it exactly.
    let sg15 = [la.sge(0, 15)];
    let mut fits = send_wr(2, WrOpcode::Send, &sg15);
    fits.ud = wr.ud;
    qa.uvp.post_send(&fits).unwrap();
    let r = poll_all(&cb);
    assert_eq!(statuses(&r), vec![(1, WcStatus::Success)]);
    assert_eq!(r[0].byte_len, grh + 15);
    assert_eq!(
        &rb.buf.to_vec()[GRH_BYTES..GRH_BYTES + 15],
        b"0123456789abcde"
    );
    // A receive of exactly GRH + 16 takes the 16 bytes.
    post_recv(&qb, 2, rb.sge(100, grh + 16));
    wr.wr_id = 3;
    qa.uvp.post_send(&wr).unwrap();
    let r = poll_all(&cb);
    assert_eq!(statuses(&r), vec![(2, WcStatus::Success)]);
    assert_eq!(r[0].byte_len, grh + 16);
    assert_eq!(
        &rb.buf.to_vec()[100 + GRH_BYTES..100 + GRH_BYTES + 16],
        b"0123456789abcdef"
    );
    assert_eq!(poll_all(&ca).len(), 3);
    assert_eq!(b.state(&qb), QpState::Rts);
    settle(&p);
}

#[test]
fn an_rc_qp_drops_packets_from_a_qp_it_is_not_connected_to() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_connected(QpType::Rc, 16, Conn::default());
    // A second QP of A sends to B's QP, with the PSN B's QP expects; B's QP is connected to the
    // first, so it drops the packets and the sender's retries run out.
    let (cx, stranger) = qp_up(
        &a,
        QpType::Rc,
        16,
        b.hca.gid(),
        qb.uvp.qpn(),
        Conn::with_retry(1),
    );
    let la = a.mem_holding(64, b"stranger");
    let rb = b.mem(64, ALL_ACCESS);
    post_recv(&qb, 1, rb.sge(0, 64));
    post_send(&stranger, 7, la.sge(0, 8));
    assert!(poll_all(&cx).is_empty());
    assert_eq!(run_timers(&p, 10), 2);
    expect_statuses(&cx, &[(7, WcStatus::RetryExcErr)]);
    assert!(poll_all(&cb).is_empty());
    assert_eq!(b.state(&qb), QpState::Rts);
    // The receive is still there for the connected peer.
    la.buf.write(0, b"the peer").unwrap();
    post_send(&qa, 1, la.sge(0, 8));
    expect_statuses(&ca, &[(1, WcStatus::Success)]);
    expect_statuses(&cb, &[(1, WcStatus::Success)]);
    assert_eq!(&rb.buf.to_vec()[..8], b"the peer");
    settle(&p);
}

#[test]
fn a_uc_rdma_write_takes_a_receive_only_with_immediate_data() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_connected(QpType::Uc, 16, Conn::default());
    let la = a.mem_holding(64, b"plain write, then");
    let rb = b.mem(128, ALL_ACCESS);
    let rr = b.mem(64, ALL_ACCESS);
    post_recv(&qb, 1, rr.sge(0, 64));
    // A plain RDMA write consumes no receive.
    let sg = [la.sge(0, 11)];
    let wr = rdma_wr(1, WrOpcode::RdmaWrite, &sg, &rb, 0);
    qa.uvp.post_send(&wr).unwrap();
    assert!(poll_all(&cb).is_empty());
    assert_eq!(&rb.buf.to_vec()[..11], b"plain write");
    // With immediate data it takes the receive, which completes as RECV_RDMA_WITH_IMM with
    // the write's length and the immediate data (its buffer untouched).
    let sg = [la.sge(0, 17)];
    let mut wr = rdma_wr(2, WrOpcode::RdmaWriteWithImm, &sg, &rb, 64);
    wr.imm_or_inv = 0x0A0B_0C0D;
    qa.uvp.post_send(&wr).unwrap();
    let r = poll_all(&cb);
    assert_eq!(statuses(&r), vec![(1, WcStatus::Success)]);
    assert_eq!(
        (r[0].opcode, r[0].byte_len, r[0].imm_data, r[0].wc_flags),
        (
            WcOpcode::RecvRdmaWithImm,
            17,
            0x0A0B_0C0D,
            wc_flags::WITH_IMM
        )
    );
    assert_eq!(&rb.buf.to_vec()[64..81], b"plain write, then");
    assert!(rr.buf.to_vec().iter().all(|&x| x == 0));
    expect_statuses(&ca, &[(1, WcStatus::Success), (2, WcStatus::Success)]);
    settle(&p);
}

#[test]
fn a_uc_send_with_invalidate_invalidates_the_key_it_names() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_connected(QpType::Uc, 16, Conn::default());
    let la = a.mem_holding(64, b"invalidate");
    let rb = b.mem(64, ALL_ACCESS);
    let victim = b.mem(16, ALL_ACCESS);
    post_recv(&qb, 1, rb.sge(0, 32));
    post_recv(&qb, 2, rb.sge(32, 32));
    let sg = [la.sge(0, 10)];
    let mut wr = send_wr(1, WrOpcode::SendWithInv, &sg);
    wr.imm_or_inv = victim.rkey;
    qa.uvp.post_send(&wr).unwrap();
    let r = poll_all(&cb);
    assert_eq!(statuses(&r), vec![(1, WcStatus::Success)]);
    assert_eq!(
        (r[0].byte_len, r[0].wc_flags, r[0].imm_data),
        (10, wc_flags::WITH_INV, victim.rkey)
    );
    assert_eq!(&rb.buf.to_vec()[..10], b"invalidate");
    // The key is invalid now: an RDMA write under it is dropped, and invalidating it again
    // fails, which completes the receive with REM_INV_REQ_ERR.
    let w = rdma_wr(2, WrOpcode::RdmaWrite, &sg, &victim, 0);
    qa.uvp.post_send(&w).unwrap();
    assert!(victim.buf.to_vec().iter().all(|&x| x == 0));
    wr.wr_id = 3;
    qa.uvp.post_send(&wr).unwrap();
    expect_statuses(&cb, &[(2, WcStatus::RemInvReqErr)]);
    assert_eq!(poll_all(&ca).len(), 3);
    settle(&p);
}

#[test]
fn a_uc_message_with_a_late_packet_arrives_whole() {
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_connected(QpType::Uc, 16, Conn::default()); // path MTU 1024
    let (la, data, rb) = patterned(&a, 4096, &b, 4096, |j| (j % 253) as u8);
    post_recv(&qb, 1, rb.sge(0, 4096));
    // Four packets, the second late: in order all the same, so nothing is lost.
    f.script(&[PacketFate::Deliver, PacketFate::Delay]);
    post_send(&qa, 1, la.sge(0, 4096));
    expect_statuses(&ca, &[(1, WcStatus::Success)]);
    let r = poll_all(&cb);
    assert_eq!(statuses(&r), vec![(1, WcStatus::Success)]);
    assert_eq!(r[0].byte_len, 4096);
    assert_eq!(rb.buf.to_vec(), data);
    assert_eq!(f.stats().delayed, 1);
    settle(&p);
}

#[test]
fn a_uc_message_that_loses_a_packet_completes_its_srq_receive_in_error() {
    let (p, f, a, b, ca, cb, srq, qa, qb) = srq_connected(QpType::Uc); // path MTU 1024
    let (la, data, rb) = patterned(&a, 4096, &b, 8192, |j| (j % 241) as u8);
    post_srq_recv(&srq, 1, rb.sge(0, 4096));
    post_srq_recv(&srq, 2, rb.sge(4096, 4096));
    // The first packet takes receive 1 from the SRQ; the second is lost, so the rest of the
    // message is dropped and receive 1 completes with REM_INV_REQ_ERR (rxe's class E); the QP
    // stays in RTS.
    f.script(&[PacketFate::Deliver, PacketFate::Drop]);
    post_send(&qa, 1, la.sge(0, 4096));
    expect_statuses(&cb, &[(1, WcStatus::RemInvReqErr)]);
    assert_eq!(b.state(&qb), QpState::Rts);
    // The next message takes the next receive.
    post_send(&qa, 2, la.sge(0, 3000));
    let r = poll_all(&cb);
    assert_eq!(statuses(&r), vec![(2, WcStatus::Success)]);
    assert_eq!(r[0].byte_len, 3000);
    assert_eq!(&rb.buf.to_vec()[4096..7096], &data[..3000]);
    assert_eq!(poll_all(&ca).len(), 2);
    settle(&p);
}

#[test]
fn a_read_whose_response_is_lost_is_executed_again_and_completes() {
    let (p, f, a, b) = deterministic_pair();
    let (ca, _cb, qa, _qb) = deep_rc_qps(&a, &b, 16, 16);
    let (la, rb) = mems(&a, 3000, &b, 3000);
    rb.buf.write(0, &[0x11; 3000]).unwrap();
    // A read of three response packets, the only request in flight: it is executed, its
    // response is late, and the local ACK timer asks again.
    f.script(&[PacketFate::Delay]);
    let sg = [la.sge(0, 3000)];
    let wr = rdma_wr(1, WrOpcode::RdmaRead, &sg, &rb, 0);
    qa.uvp.post_send(&wr).unwrap();
    assert!(poll_all(&ca).is_empty());
    assert_eq!(la.buf.to_vec(), vec![0x11; 3000], "executed once already");
    // A duplicate read is executed again (it reads the memory as it is now) and answered whole.
    rb.buf.write(0, &[0x22; 3000]).unwrap();
    assert_eq!(run_timers(&p, 10), 1);
    let s = poll_all(&ca);
    assert_eq!(statuses(&s), vec![(1, WcStatus::Success)]);
    assert_eq!(s[0].byte_len, 3000);
    assert_eq!(la.buf.to_vec(), vec![0x22; 3000]);
    assert_eq!(run_timers(&p, 10), 0);
    settle(&p);
}

#[test]
fn duplicates_of_an_atomic_and_a_read_are_each_answered_from_their_own_resource() {
    const ATOMIC: u32 = WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_ATOMIC | WV_ACCESS_REMOTE_READ;
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_connected(
        QpType::Rc,
        16,
        Conn {
            access: ALL_ACCESS | WV_ACCESS_REMOTE_ATOMIC,
            depth: 2,
            resources: 2,
            ..Conn::default()
        },
    );
    let la = a.mem(64, ALL_ACCESS);
    let counter = b.mem(8, ATOMIC);
    counter.buf.write(0, &100u64.to_ne_bytes()).unwrap();
    let rb = b.mem_holding(64, b"read me!");
    // Both are executed and both responses are late; after the local ACK timeout the requester
    // asks for both again.
    f.script(&[PacketFate::Delay, PacketFate::Delay]);
    let r0 = [la.sge(0, 8)];
    let mut fadd = rdma_wr(1, WrOpcode::AtomicFetchAndAdd, &r0, &counter, 0);
    fadd.atomic = Some(AtomicArgs {
        compare_add: 1,
        swap: 0,
    });
    let r1 = [la.sge(8, 8)];
    let read = rdma_wr(2, WrOpcode::RdmaRead, &r1, &rb, 0);
    qa.uvp.post_send_list(&[fadd, read]).unwrap();
    assert!(poll_all(&ca).is_empty());
    assert_eq!(f.stats().delayed, 2);
    assert_eq!(run_timers(&p, 10), 1);
    expect_statuses(&ca, &[(1, WcStatus::Success), (2, WcStatus::Success)]);
    let v = la.buf.to_vec();
    assert_eq!(
        u64::from_ne_bytes(v[..8].try_into().unwrap()),
        100,
        "the atomic's original value"
    );
    assert_eq!(&v[8..16], b"read me!", "the read's data");
    let mut w = [0u8; 8];
    counter.buf.read(0, &mut w).unwrap();
    assert_eq!(u64::from_ne_bytes(w), 101, "executed once");
    assert!(poll_all(&cb).is_empty());
    assert_eq!(b.state(&qb), QpState::Rts);
    settle(&p);
}

#[test]
fn a_resend_into_an_srq_receive_lands_in_the_receive_its_first_packet_took() {
    let (p, f, a, b, ca, cb, srq, qa, _qb) = srq_connected(QpType::Rc); // path MTU 1024
    let (la, data, rb) = patterned(&a, 3000, &b, 8000, |j| (j % 239) as u8);
    post_srq_recv(&srq, 1, rb.sge(0, 4000));
    post_srq_recv(&srq, 2, rb.sge(4000, 4000));
    // Three packets: the first is taken (with receive 1 from the SRQ) but its ACK is late, the
    // other two are lost. The local ACK timer resends all three: the first is a duplicate, the
    // other two continue the message in receive 1.
    f.script(&[PacketFate::Delay, PacketFate::Drop, PacketFate::Drop]);
    post_send(&qa, 1, la.sge(0, 3000));
    assert!(poll_all(&ca).is_empty());
    assert_eq!(run_timers(&p, 10), 1);
    expect_statuses(&ca, &[(1, WcStatus::Success)]);
    let r = poll_all(&cb);
    assert_eq!(statuses(&r), vec![(1, WcStatus::Success)]);
    assert_eq!(r[0].byte_len, 3000);
    assert_eq!(&rb.buf.to_vec()[..3000], &data[..]);
    // Receive 2 is still there for the next message.
    post_send(&qa, 2, la.sge(0, 100));
    expect_statuses(&cb, &[(2, WcStatus::Success)]);
    assert_eq!(&rb.buf.to_vec()[4000..4100], &data[..100]);
    settle(&p);
}

#[test]
fn an_rdma_write_with_immediate_data_and_no_receive_is_rnr_naked_at_its_last_packet() {
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_connected(QpType::Rc, 16, Conn::default()); // path MTU 1024
    let (la, data, rb) = patterned(&a, 3000, &b, 3000, |j| (j % 251) as u8);
    let rr = b.mem(64, ALL_ACCESS);
    // Three packets and no receive: the first two are written, the last (which carries the
    // immediate data and needs a receive) gets an RNR NAK, and the write is not complete.
    let sg = [la.sge(0, 3000)];
    let mut wr = rdma_wr(1, WrOpcode::RdmaWriteWithImm, &sg, &rb, 0);
    wr.imm_or_inv = 0x1234_5678;
    qa.uvp.post_send(&wr).unwrap();
    assert!(poll_all(&ca).is_empty());
    assert!(poll_all(&cb).is_empty());
    let v = rb.buf.to_vec();
    assert_eq!(&v[..2048], &data[..2048]);
    assert!(
        v[2048..].iter().all(|&x| x == 0),
        "the RNR NAKed packet is not taken"
    );
    assert_eq!(f.stats().delivered, 3);
    // A receive is posted; after the RNR timer only the last packet is sent again, and the
    // receive completes with the write's length and the immediate data.
    post_recv(&qb, 9, rr.sge(0, 64));
    assert_eq!(run_timers(&p, 10), 1);
    expect_statuses(&ca, &[(1, WcStatus::Success)]);
    let r = poll_all(&cb);
    assert_eq!(statuses(&r), vec![(9, WcStatus::Success)]);
    assert_eq!(
        (r[0].opcode, r[0].byte_len, r[0].imm_data),
        (WcOpcode::RecvRdmaWithImm, 3000, 0x1234_5678)
    );
    assert_eq!(rb.buf.to_vec(), data);
    assert_eq!(f.stats().delivered, 4);
    settle(&p);
}
