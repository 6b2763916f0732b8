//! The RC requester as IBTA vol. 1 ch. 9 has it, at its edges: the PSNs a request takes (an
//! RDMA read as many as its response has packets, modulo 2^24), acknowledgements of PSNs never
//! sent (ghost ACKs, ignored), what `retry_cnt` counts (local ACK timeouts and sequence-error
//! NAKs) and when the local ACK timer restarts (on forward progress), a responder that answers
//! nothing, fences and local operations waiting for what precedes them, SQD finishing the
//! message in flight as RTS does, and going on from the first packet not yet acknowledged.

use std::sync::Arc;

use crate::common::*;
use wv_abi::consts::WV_IO_QP_ATTR_STATE;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

/// Two devices with an RC QP each, `a`'s QP sending from PSN `a_psn` with `c`'s attributes and
/// `b`'s expecting PSN `b_psn`: what two ends agree on out of band (the CM's REQ and REP).
/// They stand on a deterministic platform of their own.
fn rc_pair_psns(
    c: Conn,
    a_psn: u32,
    b_psn: u32,
) -> (HostPlatform, Arc<Fabric>, Node, Node, Cq, Cq, Qp, Qp) {
    let (p, f, a, b) = deterministic_pair();
    let (ca, cb, qa, qb) = two_qps(&a, &b, QpType::Rc, 64);
    bring_up(&a, &qa, b.hca.gid(), qb.uvp.qpn(), Conn { psn: a_psn, ..c });
    bring_up(&b, &qb, a.hca.gid(), qa.uvp.qpn(), Conn { psn: b_psn, ..c });
    (p, f, a, b, ca, cb, qa, qb)
}

/// A's request `id` ran out of retries: RETRY_EXC_ERR, A's QP in ERR, and B took nothing.
fn retries_ran_out(a: &Node, qa: &Qp, ca: &Cq, cb: &Cq, id: u64) {
    expect_statuses(ca, &[(id, WcStatus::RetryExcErr)]);
    assert_eq!(a.state(qa), QpState::Error);
    assert!(poll_all(cb).is_empty(), "B took nothing");
}

#[test]
fn an_rdma_read_takes_one_psn_per_response_packet_and_psns_wrap_at_24_bits() {
    // The read starts two PSNs before the wrap: 3000 bytes at MTU 1024 are three response
    // packets, PSNs 0xFFFFFE, 0xFFFFFF and 0; the request after it has PSN 1.
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_with(Conn {
        psn: 0xFF_FFFE,
        ..Conn::default()
    });
    let (la, rb) = mems(&a, 4096, &b, 4096);
    let data = write_pattern(&rb, 3000, |i| (i % 253) as u8);
    let sg = [la.sge(0, 3000)];
    let read = rdma_wr(1, WrOpcode::RdmaRead, &sg, &rb, 0);
    qa.uvp.post_send(&read).unwrap();
    expect_statuses(&ca, &[(1, WcStatus::Success)]);
    assert_eq!(&la.buf.to_vec()[..3000], &data[..]);
    // B's QP starts again expecting PSN 1, the one A sends next: A's send is in sequence and
    // lands.
    b.modify(&qb, &qpm(QpState::Reset, WV_IO_QP_ATTR_STATE))
        .unwrap();
    bring_up(
        &b,
        &qb,
        a.hca.gid(),
        qa.uvp.qpn(),
        Conn {
            psn: 1,
            ..Conn::default()
        },
    );
    // Two packets, PSNs 1 and 2.
    la.buf.write(0, &data[..2048]).unwrap();
    rb.buf.write(0, &[0u8; 4096]).unwrap();
    post_recv(&qb, 7, rb.sge(0, 4096));
    post_send(&qa, 2, la.sge(0, 2048));
    expect_statuses(&ca, &[(2, WcStatus::Success)]);
    expect_statuses(&cb, &[(7, WcStatus::Success)]);
    assert_eq!(&rb.buf.to_vec()[..2048], &data[..2048]);
    settle(&p);
}

#[test]
fn an_ack_of_a_psn_never_sent_is_ignored() {
    // A sends one packet, PSN 0xFFFFFF; B expects PSN 1 or 2, so A's packet is an old
    // duplicate to B, which acknowledges its last PSN, 0 or 1: PSNs A has never sent (0 is the
    // one it would send next). A ghost ACK acknowledges nothing: A's send waits for its local
    // ACK timer, and with retry_cnt 0 the timeout fails it. (The link loses whatever A sends
    // after the first packet.)
    for b_psn in [1, 2] {
        let (p, f, a, b, ca, cb, qa, qb) = rc_pair_psns(Conn::with_retry(0), 0xFF_FFFF, b_psn);
        let (la, rb) = mems(&a, 64, &b, 64);
        post_recv(&qb, 7, rb.sge(0, 64));
        f.script(&[PacketFate::Deliver, PacketFate::Drop]);
        post_send(&qa, 1, la.sge(0, 8));
        assert!(poll_all(&ca).is_empty(), "not acknowledged ({b_psn})");
        assert_eq!(run_timers(&p, 10), 1);
        retries_ran_out(&a, &qa, &ca, &cb, 1);
        settle(&p);
    }
}

#[test]
fn an_ack_short_of_a_burst_that_arrived_whole_sends_nothing_again_before_the_timer() {
    // A sends a two-packet message from PSN 0x100; B expects 0x105, so both packets are old
    // duplicates to it and it acknowledges 0x104, a PSN A has never sent (a ghost ACK,
    // ignored). The packets were sent all the same: nothing goes again before the local ACK
    // timer, each timeout resends them and spends a retry, and with retry_cnt 2 the third
    // fails the request. The link delivers six packets and then loses every one, so a
    // requester that resent at once would spend all six inside post_send.
    let (p, f, a, b, ca, cb, qa, qb) = rc_pair_psns(Conn::with_retry(2), 0x100, 0x105);
    let (la, rb) = mems(&a, 2048, &b, 2048);
    post_recv(&qb, 7, rb.sge(0, 2048));
    f.script(&[PacketFate::Deliver; 6]);
    f.set_faults(Some(FaultConfig {
        drop_ppm: 1_000_000,
        ..FaultConfig::default()
    }));
    post_send(&qa, 1, la.sge(0, 2048));
    let sent = |f: &Fabric| {
        let s = f.stats();
        (s.delivered, s.dropped)
    };
    assert_eq!(sent(&f), (2, 0), "the burst went once");
    for delivered in [4, 6] {
        assert!(poll_all(&ca).is_empty());
        assert_eq!(run_timers(&p, 1), 1);
        assert_eq!(sent(&f), (delivered, 0), "resent on the timeout, once");
    }
    assert_eq!(run_timers(&p, 1), 1);
    retries_ran_out(&a, &qa, &ca, &cb, 1);
    assert_eq!(sent(&f), (6, 0));
    assert_eq!(b.state(&qb), QpState::Rts);
    f.set_faults(None);
    settle(&p);
}

#[test]
fn a_sequence_nak_for_a_psn_before_every_one_outstanding_resends_nothing_before_the_timer() {
    // A sends one packet, PSN 0x105; B expects 0x100, so A's packet is out of sequence to it
    // and it NAKs, naming 0x100: a PSN before every one A has outstanding. Nothing is resent
    // for it (there is nothing from 0x100 on to go back to); the local ACK timer resends the
    // packet, B stays silent (one NAK per sequence error), and the retries run out.
    let (p, f, a, b, ca, cb, qa, qb) = rc_pair_psns(Conn::with_retry(2), 0x105, 0x100);
    let (la, rb) = mems(&a, 64, &b, 64);
    post_recv(&qb, 7, rb.sge(0, 64));
    post_send(&qa, 1, la.sge(0, 8));
    assert_eq!(f.stats().delivered, 1, "sent once");
    assert!(poll_all(&ca).is_empty());
    assert!(run_timers(&p, 10) >= 1);
    retries_ran_out(&a, &qa, &ca, &cb, 1);
    settle(&p);
}

/// Posts an RDMA read of `len` bytes of `remote` at 0 into `local` at 0.
fn post_read(qa: &Qp, id: u64, local: &Mem, remote: &Mem, len: u32) {
    let sg = [local.sge(0, len)];
    let mut read = send_wr(id, WrOpcode::RdmaRead, &sg);
    read.remote_addr = remote.addr(0);
    read.rkey = remote.rkey;
    qa.uvp.post_send(&read).unwrap();
}

#[test]
fn a_timeout_asks_again_for_an_unanswered_read_that_a_later_ack_went_past() {
    // A reads 64 bytes of B, then sends 8. The read's response comes too late (B has executed
    // the read) and the send is acknowledged: an implied NAK, so the read is asked again, and
    // that request and the send's resend are lost. Every PSN A sent is now acknowledged, yet
    // the read is outstanding: the local ACK timeout asks for it again, B answers it from its
    // responder resources, and both requests complete.
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_with(Conn {
        retry: 2,
        ..Conn::default()
    });
    let (la, rb) = mems(&a, 128, &b, 128);
    rb.buf.write(0, &[0x5a; 64]).unwrap();
    post_recv(&qb, 7, rb.sge(64, 64));
    f.script(&[
        PacketFate::Delay,
        PacketFate::Deliver,
        PacketFate::Drop,
        PacketFate::Drop,
    ]);
    post_read(&qa, 1, &la, &rb, 64);
    post_send(&qa, 2, la.sge(64, 8));
    assert!(poll_all(&ca).is_empty());
    let s = f.stats();
    assert_eq!((s.delayed, s.delivered, s.dropped), (1, 1, 2));
    let fired = run_timers(&p, 10);
    expect_statuses(&ca, &[(1, WcStatus::Success), (2, WcStatus::Success)]);
    // The first expiry found progress since the timer was armed (the send's ACK) and restarted
    // it; the second asked for the read.
    assert_eq!(fired, 2);
    assert_eq!(&la.buf.to_vec()[..64], &[0x5a; 64]);
    expect_statuses(&cb, &[(7, WcStatus::Success)]);
    assert_eq!(a.state(&qa), QpState::Rts);
    settle(&p);
}

#[test]
fn a_fate_decided_while_an_ack_retired_earlier_requests_is_drawn_again() {
    // A sends 8 bytes, then 2048 (two packets). The first send's packet arrives late (B acts
    // on it, its ACK is too late), the second send's first packet arrives and B's ACK of it
    // also covers the first send, which retires. The link had already decided the next
    // packet's fate (lost), but the ACK moved the position, so that fate is not applied: the
    // packet goes on the wire with a fresh fate and both sends complete inside the post,
    // without waiting for the local ACK timer.
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_with(Conn {
        retry: 2,
        ..Conn::default()
    });
    let (la, rb) = mems(&a, 4096, &b, 4096);
    post_recv(&qb, 7, rb.sge(0, 64));
    post_recv(&qb, 8, rb.sge(64, 2048));
    f.script(&[PacketFate::Delay, PacketFate::Deliver, PacketFate::Drop]);
    post_send(&qa, 1, la.sge(0, 8));
    post_send(&qa, 2, la.sge(64, 2048));
    expect_statuses(&ca, &[(1, WcStatus::Success), (2, WcStatus::Success)]);
    expect_statuses(&cb, &[(7, WcStatus::Success), (8, WcStatus::Success)]);
    let s = f.stats();
    assert_eq!((s.delayed, s.delivered, s.dropped), (1, 2, 1));
    assert_eq!(a.state(&qa), QpState::Rts);
    settle(&p);
}

#[test]
fn a_read_answered_after_it_was_asked_again_restores_the_retry_budget() {
    // retry_cnt 1. The read's response comes too late and the send after it is acknowledged:
    // the implied NAK spends the one retry and the read, asked again, is answered. That answer
    // is forward progress (though the send's ACK had already gone past the read's PSN), so
    // the budget is whole again: a later send whose packet is lost is resent on its local ACK
    // timeout and completes.
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_with(Conn {
        retry: 1,
        ..Conn::default()
    });
    let (la, rb) = mems(&a, 128, &b, 128);
    rb.buf.write(0, &[0x5a; 64]).unwrap();
    post_recv(&qb, 7, rb.sge(64, 32));
    post_recv(&qb, 8, rb.sge(96, 32));
    f.script(&[PacketFate::Delay]);
    post_read(&qa, 1, &la, &rb, 64);
    post_send(&qa, 2, la.sge(64, 8));
    expect_statuses(&ca, &[(1, WcStatus::Success), (2, WcStatus::Success)]);
    assert_eq!(&la.buf.to_vec()[..64], &[0x5a; 64]);
    f.script(&[PacketFate::Drop]);
    post_send(&qa, 3, la.sge(64, 8));
    assert!(poll_all(&ca).is_empty());
    assert_eq!(run_timers(&p, 10), 1);
    expect_statuses(&ca, &[(3, WcStatus::Success)]);
    expect_statuses(&cb, &[(7, WcStatus::Success), (8, WcStatus::Success)]);
    assert_eq!(a.state(&qa), QpState::Rts);
    settle(&p);
}

#[test]
fn a_sequence_error_nak_spends_a_retry_and_with_none_left_fails_the_request() {
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_with(Conn::with_retry(0));
    let (la, rb) = mems(&a, 2048, &b, 2048);
    post_recv(&qb, 7, rb.sge(0, 2048));
    // Two packets, the first lost: the second arrives out of sequence and is NAKed. With
    // retry_cnt 0 there is no resend: RETRY_EXC_ERR at once, without a timer.
    f.script(&[PacketFate::Drop, PacketFate::Deliver]);
    post_send(&qa, 1, la.sge(0, 2048));
    // B flushes nothing: its receive waits for a message that never came.
    retries_ran_out(&a, &qa, &ca, &cb, 1);
    assert_eq!(p.pending_timers(), 0);
    let s = f.stats();
    assert_eq!((s.dropped, s.delivered), (1, 1));
    assert_eq!(b.state(&qb), QpState::Rts);
    settle(&p);
}

#[test]
fn the_local_ack_timer_restarts_on_progress_so_an_rnr_wait_spends_no_transport_retry() {
    // No transport retries at all; a local ACK timeout (8.192 µs) far shorter than the RNR
    // wait (0.64 ms).
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_with(Conn {
        retry: 0,
        timeout: 1,
        ..Conn::default()
    });
    let (la, rb) = mems(&a, 64, &b, 64);
    la.buf.write(0, b"written").unwrap();
    // A write whose ACK comes late: B has it, A waits for its ACK on the local ACK timer.
    f.script(&[PacketFate::Delay]);
    let sg = [la.sge(0, 7)];
    let write = rdma_wr(1, WrOpcode::RdmaWrite, &sg, &rb, 32);
    qa.uvp.post_send(&write).unwrap();
    let t0 = p.now_ns();
    assert_eq!(p.next_timer_ns(), Some(t0 + (4096 << 1)));
    // A send B has no receive for: the RNR NAK acknowledges the write (forward progress) and
    // A waits the RNR timer before sending again.
    post_send(&qa, 2, la.sge(0, 7));
    expect_statuses(&ca, &[(1, WcStatus::Success)]);
    assert_eq!(p.next_timer_ns(), Some(t0 + RNR_DELAY_NS));
    post_recv(&qb, 7, rb.sge(0, 16));
    // When the wait ends the local ACK timer armed for the write has run out too, but the
    // progress since restarted it: no timeout is counted, the send goes again and lands.
    assert_eq!(run_timers(&p, 10), 1);
    expect_statuses(&ca, &[(2, WcStatus::Success)]);
    expect_statuses(&cb, &[(7, WcStatus::Success)]);
    assert_eq!(&rb.buf.to_vec()[..7], b"written");
    assert_eq!(&rb.buf.to_vec()[32..39], b"written");
    assert_eq!(a.state(&qa), QpState::Rts);
    settle(&p);
}

#[test]
fn a_peer_in_err_answers_nothing_and_the_request_waits_for_its_local_ack_timer() {
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_with(Conn::with_retry(1));
    let la = a.mem(64, ALL_ACCESS);
    b.modify(&qb, &qpm(QpState::Error, WV_IO_QP_ATTR_STATE))
        .unwrap();
    // The packet arrives and is silently dropped (a QP in ERR takes nothing). The link would
    // lose the next one: the requester sends nothing more before its timer.
    f.script(&[PacketFate::Deliver, PacketFate::Drop]);
    post_send(&qa, 1, la.sge(0, 8));
    let s = f.stats();
    assert_eq!((s.delivered, s.dropped), (1, 0), "one packet, sent once");
    assert!(poll_all(&ca).is_empty());
    // The timeout resends it (lost), the next one fails the request.
    assert_eq!(run_timers(&p, 10), 2);
    expect_statuses(&ca, &[(1, WcStatus::RetryExcErr)]);
    let s = f.stats();
    assert_eq!((s.delivered, s.dropped), (1, 1));
    assert!(poll_all(&cb).is_empty());
    settle(&p);
}

#[test]
fn a_fenced_request_waits_for_the_reads_before_it_and_for_nothing_else() {
    let (p, f, a, b, ca, _cb, qa, _qb) = deterministic_rc_pair();
    let (la, rb) = mems(&a, 64, &b, 64);
    rb.buf.write(0, b"old!").unwrap();
    la.buf.write(32, b"new!").unwrap();
    // Nothing before it: a fenced write goes at once.
    let sg = [la.sge(32, 4)];
    let mut write = send_wr(1, WrOpcode::RdmaWrite, &sg);
    write.send_flags |= send_flags::FENCE;
    write.remote_addr = rb.addr(16);
    write.rkey = rb.rkey;
    qa.uvp.post_send(&write).unwrap();
    expect_statuses(&ca, &[(1, WcStatus::Success)]);
    // A read of 4 bytes whose response is lost (B executed it; A asks again after its local
    // ACK timeout, and B reads again), then a fenced write of the same 4 bytes: the write waits
    // until the read has completed, so the read returns what was there before the write.
    f.script(&[PacketFate::Delay]);
    let rsg = [la.sge(0, 4)];
    let read = rdma_wr(2, WrOpcode::RdmaRead, &rsg, &rb, 0);
    qa.uvp.post_send(&read).unwrap();
    write.wr_id = 3;
    write.remote_addr = rb.addr(0);
    qa.uvp.post_send(&write).unwrap();
    assert!(poll_all(&ca).is_empty());
    assert_eq!(&rb.buf.to_vec()[..4], b"old!", "the fenced write waits");
    assert_eq!(run_timers(&p, 10), 1);
    expect_statuses(&ca, &[(2, WcStatus::Success), (3, WcStatus::Success)]);
    assert_eq!(&la.buf.to_vec()[..4], b"old!");
    assert_eq!(&rb.buf.to_vec()[..4], b"new!");
    settle(&p);
}

#[test]
fn a_local_operation_waits_for_the_requests_before_it_and_completions_come_in_order() {
    let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    let la = a.mem(64, ALL_ACCESS);
    let (other, rb) = mems(&a, 64, &b, 64);
    post_recv(&qb, 7, rb.sge(0, 64));
    // A send whose packet is lost, then a local invalidation: the invalidation runs only once
    // the send has completed (after the local ACK timeout brings its resend).
    f.script(&[PacketFate::Drop]);
    post_send(&qa, 1, la.sge(0, 8));
    let mut inv = send_wr(2, WrOpcode::LocalInv, &[]);
    inv.imm_or_inv = other.lkey;
    qa.uvp.post_send(&inv).unwrap();
    assert!(poll_all(&ca).is_empty());
    assert_eq!(run_timers(&p, 10), 1);
    let r = poll_all(&ca);
    assert_eq!(
        r.iter()
            .map(|w| (w.wr_id, w.status, w.opcode, w.qp_num))
            .collect::<Vec<_>>(),
        vec![
            (1, WcStatus::Success, WcOpcode::Send, qa.uvp.qpn()),
            (2, WcStatus::Success, WcOpcode::LocalInv, qa.uvp.qpn())
        ]
    );
    expect_statuses(&cb, &[(7, WcStatus::Success)]);
    // The region's key is invalid now: a send from it fails locally.
    post_send(&qa, 3, other.sge(0, 8));
    expect_statuses(&ca, &[(3, WcStatus::LocProtErr)]);
    settle(&p);
}

#[test]
fn in_sqd_the_message_in_flight_goes_on_as_in_rts() {
    // The same losses on the same four-packet send, once in RTS and once after SQD was asked
    // for while the send was in flight: the link carries the same packets.
    let run = |sqd: bool| {
        let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair(); // path MTU 1024
        let (la, data, rb) = patterned(&a, 4096, &b, 4096, |i| (i * 13 % 251) as u8);
        post_recv(&qb, 7, rb.sge(0, 4096));
        // p0 arrives; p1, p2 and p3 are lost: the send waits for its local ACK timer.
        f.script(&[
            PacketFate::Deliver,
            PacketFate::Drop,
            PacketFate::Drop,
            PacketFate::Drop,
        ]);
        post_send(&qa, 1, la.sge(0, 4096));
        if sqd {
            a.modify(&qa, &qpm(QpState::Sqd, WV_IO_QP_ATTR_STATE))
                .unwrap();
        }
        // The resend from p1: p1 arrives, p2 is lost, p3 arrives out of sequence and is
        // NAKed; p2 and p3 again.
        f.script(&[PacketFate::Deliver, PacketFate::Drop, PacketFate::Deliver]);
        assert_eq!(run_timers(&p, 10), 1);
        expect_statuses(&ca, &[(1, WcStatus::Success)]);
        expect_statuses(&cb, &[(7, WcStatus::Success)]);
        assert_eq!(&rb.buf.to_vec()[..], &data[..]);
        if sqd {
            assert_eq!(qa.events.take(), vec![QpEvent::SqDrained]);
        }
        settle(&p);
        let s = f.stats();
        (s.delivered, s.dropped)
    };
    assert_eq!(run(false), (1 + 4, 3 + 1));
    assert_eq!(run(true), run(false));
}

#[test]
fn a_resend_acknowledged_beyond_the_packet_after_it_skips_every_packet_the_responder_has() {
    let p = HostPlatform::deterministic();
    let (f, a, b, ca, _cb, qa, _qb) = rc_pair(&p); // path MTU 1024
    let (la, rb) = mems(&a, 5120, &b, 5120);
    let data: Vec<u8> = (0..5120u32).map(|i| (i * 29 % 251) as u8).collect();
    la.buf.write(0, &data).unwrap();
    // An RDMA write of five packets: p0 acknowledged, p1 to p3 taken by B with their ACKs
    // late, p4 lost. A has p1 as its oldest unacknowledged packet.
    f.script(&[
        PacketFate::Deliver,
        PacketFate::Delay,
        PacketFate::Delay,
        PacketFate::Delay,
        PacketFate::Drop,
    ]);
    let sg = [la.sge(0, 5120)];
    let mut write = send_wr(1, WrOpcode::RdmaWrite, &sg);
    write.remote_addr = rb.addr(0);
    write.rkey = rb.rkey;
    qa.uvp.post_send(&write).unwrap();
    assert!(poll_all(&ca).is_empty());
    // The local ACK timeout resends p1, and the link loses the packet after it (what A sends
    // next is decided with it). B acknowledges p1 with p3: A has nothing left to send but p4,
    // which the link delivers. Two packets delivered on the resend, none of p2 and p3 again.
    f.script(&[PacketFate::Deliver, PacketFate::Drop]);
    assert_eq!(run_timers(&p, 1), 1);
    expect_statuses(&ca, &[(1, WcStatus::Success)]);
    let s = f.stats();
    assert_eq!((s.delivered, s.delayed, s.dropped), (1 + 2, 3, 1 + 1));
    assert_eq!(p.pending_timers(), 0);
    assert_eq!(&rb.buf.to_vec()[..], &data[..]);
    settle(&p);
}

#[test]
fn a_resend_answered_beyond_its_first_packet_goes_on_from_the_first_unacknowledged_one() {
    let (p, f, a, b, ca, _cb, qa, _qb) = deterministic_rc_pair(); // path MTU 1024
    let (la, data, rb) = patterned(&a, 5120, &b, 5120, |i| (i * 31 % 249) as u8);
    // An RDMA write of five packets: p0 and p1 acknowledged, p2 and p3 taken by B with their
    // ACKs late, p4 lost. A has p2 as its oldest unacknowledged packet.
    f.script(&[
        PacketFate::Deliver,
        PacketFate::Deliver,
        PacketFate::Delay,
        PacketFate::Delay,
        PacketFate::Drop,
    ]);
    let sg = [la.sge(0, 5120)];
    let write = rdma_wr(1, WrOpcode::RdmaWrite, &sg, &rb, 0);
    qa.uvp.post_send(&write).unwrap();
    assert!(poll_all(&ca).is_empty());
    // The local ACK timeout resends from p2; B acknowledges it with p3, which it has too. The
    // link would lose the next packet A sends, but p3 needs no resend: A goes on with p4,
    // and the write completes with no further timeout.
    f.script(&[PacketFate::Deliver, PacketFate::Drop]);
    assert_eq!(run_timers(&p, 1), 1);
    expect_statuses(&ca, &[(1, WcStatus::Success)]);
    assert_eq!(p.pending_timers(), 0);
    assert_eq!(&rb.buf.to_vec()[..], &data[..]);
    settle(&p);
}
