//! The RC transport on the platform's clock, in the host's deterministic mode (the clock moves
//! only when a test moves it): RNR NAK waits and `rnr_retry`, the local ACK timeout and
//! `retry_cnt`, packets of the path MTU with a PSN each and resending from the lost one,
//! `max_rd_atomic`, and SQD's drain with `SQ_DRAINED`. Each test runs twice: between two QPs of
//! one device (loopback: the fabric's fault injection decides a loopback packet's fate too) and
//! across two devices.

use crate::common::*;
use wv_abi::consts::WV_IO_QP_ATTR_STATE;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

on_both_topologies! {
    fn a_receive_posted_late_within_the_rnr_budget_is_waited_for(topology) {
        let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_on(topology, Conn::with_rnr_retry(2));
        let (m, rb) = mems(&a, 64, &b, 64);
        m.buf.write(0, b"late").unwrap();
        let t0 = p.now_ns();
        post_send(&qa, 1, m.sge(0, 4));
        // RNR NAK: the sender waits the responder's RNR timer (12: 0.64 ms).
        assert!(poll_all(&ca).is_empty());
        assert_eq!(p.next_timer_ns(), Some(t0 + RNR_DELAY_NS));
        // The receive comes 1 µs later; nothing happens before the timer.
        p.advance_clock(1_000);
        post_recv(&qb, 7, rb.sge(0, 64));
        assert!(poll_all(&ca).is_empty());
        p.advance_clock(RNR_DELAY_NS - 1_001);
        p.run_until_idle();
        assert!(poll_all(&ca).is_empty(), "no retry before the RNR timer");
        p.advance_clock(1);
        p.run_until_idle();
        expect_statuses(&ca, &[(1, WcStatus::Success)]);
        expect_statuses(&cb, &[(7, WcStatus::Success)]);
        assert_eq!(&rb.buf.to_vec()[..4], b"late");
        assert_eq!(f.stats().delivered, 2, "the first try and one retry");
        assert_eq!(p.pending_timers(), 0);
        settle(&p);
    }

    fn a_post_that_writes_nothing_leaves_a_due_retry_to_its_timer(topology) {
        let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_on(topology, Conn::with_rnr_retry(2));
        let (m, rb) = mems(&a, 64, &b, 64);
        m.buf.write(0, b"late").unwrap();
        let t0 = p.now_ns();
        post_send(&qa, 1, m.sge(0, 4));
        post_recv(&qb, 7, rb.sge(0, 64));
        // The RNR wait is over: the timer's DPC is queued, not run yet.
        p.advance_clock(RNR_DELAY_NS);
        assert_eq!(p.now_ns(), t0 + RNR_DELAY_NS);
        // A post that writes nothing (an empty list, a refused request) rings no doorbell, so
        // the send queue does not run in the poster's thread in the DPC's stead.
        assert_eq!(qa.uvp.post_send_list(&[]), Ok(()));
        assert!(poll_all(&ca).is_empty(), "an empty list runs nothing");
        let short = [m.sge(0, 4)];
        let wr = rdma_wr(2, WrOpcode::AtomicFetchAndAdd, &short, &rb, 8);
        assert_eq!(
            qa.uvp.post_send_list(&[wr]),
            Err((0, PostError::AtomicLength))
        );
        assert!(poll_all(&ca).is_empty(), "a refused request runs nothing");
        assert!(poll_all(&cb).is_empty());
        assert_eq!(f.stats().delivered, 1, "only the first try");
        // The DPC retries.
        p.run_until_idle();
        expect_statuses(&ca, &[(1, WcStatus::Success)]);
        expect_statuses(&cb, &[(7, WcStatus::Success)]);
        assert_eq!(&rb.buf.to_vec()[..4], b"late");
        assert_eq!(f.stats().delivered, 2);
        settle(&p);
    }

    fn a_receive_later_than_the_rnr_budget_fails_with_rnr_retry_exceeded(topology) {
        let (p, f, a, b, ca, _cb, qa, qb) = deterministic_rc_pair_on(topology, Conn::with_rnr_retry(2));
        let m = a.mem(64, ALL_ACCESS);
        let t0 = p.now_ns();
        post_send(&qa, 1, m.sge(0, 4));
        // The first try and two retries, each answered by an RNR NAK; the third NAK ends it.
        assert_eq!(run_timers_for(&p, 2 * RNR_DELAY_NS - 1), 1);
        assert!(poll_all(&ca).is_empty());
        assert_eq!(run_timers_for(&p, RNR_DELAY_NS), 1);
        assert_eq!(p.now_ns(), t0 + 2 * RNR_DELAY_NS);
        expect_statuses(&ca, &[(1, WcStatus::RnrRetryExcErr)]);
        assert_eq!(a.state(&qa), QpState::Error);
        assert_eq!(f.stats().delivered, 3);
        // The responder did nothing wrong: it stays as it was.
        assert_eq!(b.state(&qb), QpState::Rts);
        settle(&p);
    }

    fn rnr_retry_seven_retries_for_ever(topology) {
        let (p, f, a, b, ca, _cb, qa, qb) = deterministic_rc_pair_on(topology, Conn::default());
        let (m, rb) = mems(&a, 64, &b, 64);
        post_send(&qa, 1, m.sge(0, 4));
        assert_eq!(run_timers(&p, 50), 50, "still waiting after 50 RNR NAKs");
        assert!(poll_all(&ca).is_empty());
        assert_eq!(f.stats().delivered, 51);
        post_recv(&qb, 2, rb.sge(0, 64));
        assert_eq!(run_timers(&p, 50), 1);
        expect_statuses(&ca, &[(1, WcStatus::Success)]);
        settle(&p);
    }

    fn a_dropped_packet_is_resent_after_the_local_ack_timeout(topology) {
        let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_on(topology, Conn::default());
        let (m, rb) = mems(&a, 64, &b, 64);
        m.buf.write(0, b"again").unwrap();
        post_recv(&qb, 3, rb.sge(0, 64));
        f.script(&[PacketFate::Drop]);
        let t0 = p.now_ns();
        post_send(&qa, 1, m.sge(0, 5));
        assert!(poll_all(&ca).is_empty());
        assert_eq!(p.next_timer_ns(), Some(t0 + ACK_TIMEOUT_NS));
        p.advance_clock(ACK_TIMEOUT_NS - 1);
        p.run_until_idle();
        assert!(poll_all(&ca).is_empty() && poll_all(&cb).is_empty());
        p.advance_clock(1);
        p.run_until_idle();
        expect_statuses(&ca, &[(1, WcStatus::Success)]);
        expect_statuses(&cb, &[(3, WcStatus::Success)]);
        assert_eq!(&rb.buf.to_vec()[..5], b"again");
        let s = f.stats();
        assert_eq!((s.dropped, s.delivered), (1, 1));
        settle(&p);
    }

    fn retry_exceeded_after_retry_cnt_timeouts_and_no_timeout_waits_for_ever(topology) {
        let (p, _f, a, b, ca, _cb, qa, qb) = deterministic_rc_pair_on(topology, Conn::with_retry(3));
        let m = a.mem(64, ALL_ACCESS);
        b.hca.set_port_state(1, false).unwrap();
        qb.uvp.post_recv(&recv_wr(1, &[])).unwrap();
        let t0 = p.now_ns();
        post_send(&qa, 1, m.sge(0, 8));
        // The first try and three retries, one local ACK timeout apart; the fourth timeout ends it.
        assert_eq!(run_timers_for(&p, 4 * ACK_TIMEOUT_NS - 1), 3);
        assert!(poll_all(&ca).is_empty());
        assert_eq!(run_timers(&p, 10), 1);
        assert_eq!(p.now_ns(), t0 + 4 * ACK_TIMEOUT_NS);
        expect_statuses(&ca, &[(1, WcStatus::RetryExcErr)]);
        assert_eq!(a.state(&qa), QpState::Error);
        b.hca.set_port_state(1, true).unwrap();

        // timeout = 0: no local ACK timer at all; the request waits.
        let (_f, a, b, ca, _cb, qa, _qb) = rc_pair_on(
            &p,
            topology,
            Conn {
                timeout: 0,
                ..Conn::default()
            },
        );
        let m = a.mem(64, ALL_ACCESS);
        b.hca.set_port_state(1, false).unwrap();
        post_send(&qa, 2, m.sge(0, 8));
        assert_eq!(p.pending_timers(), 0);
        p.advance_clock(10_000_000_000);
        p.run_until_idle();
        assert!(poll_all(&ca).is_empty());
        assert_eq!(a.state(&qa), QpState::Rts);
        settle(&p);
    }

    fn messages_travel_as_mtu_packets_and_a_lost_one_is_resent_from_where_it_was_lost(topology) {
        let p = HostPlatform::deterministic();
        let (f, a, b, ca, cb, qa, qb) = rc_pair_on(&p, topology, Conn::default()); // path MTU 1024
        let (m, rb) = mems(&a, 8192, &b, 8192);
        let data = write_pattern(&m, 4096, |i| (i * 7 + i / 251) as u8);
        // Four packets, lossless.
        post_recv(&qb, 1, rb.sge(0, 4096));
        post_send(&qa, 1, m.sge(0, 4096));
        expect_statuses(&ca, &[(1, WcStatus::Success)]);
        assert_eq!(f.stats().delivered, 4, "one packet per 1024 bytes");
        // The second packet is lost: the third arrives out of sequence, the responder NAKs it and
        // the requester resends from the second at once (no timer).
        post_recv(&qb, 2, rb.sge(4096, 4096));
        f.script(&[PacketFate::Deliver, PacketFate::Drop]);
        post_send(&qa, 2, m.sge(0, 4096));
        expect_statuses(&ca, &[(2, WcStatus::Success)]);
        let s = f.stats();
        // p0, p1 (lost), p2 and p3 (sent before the NAK of p2 comes back; out of sequence, so
        // NAKed, then ignored), then p1, p2, p3 again.
        assert_eq!((s.dropped, s.delivered), (1, 4 + 6));
        assert_eq!(&rb.buf.to_vec()[4096..], &data[..]);
        // The last packet is lost: only it is resent, after the local ACK timeout.
        post_recv(&qb, 3, rb.sge(0, 4096));
        rb.buf.write(0, &[0u8; 4096]).unwrap();
        f.script(&[
            PacketFate::Deliver,
            PacketFate::Deliver,
            PacketFate::Deliver,
            PacketFate::Drop,
        ]);
        post_send(&qa, 3, m.sge(0, 4096));
        assert!(poll_all(&ca).is_empty());
        assert_eq!(run_timers(&p, 10), 1);
        expect_statuses(&ca, &[(3, WcStatus::Success)]);
        let s = f.stats();
        assert_eq!((s.dropped, s.delivered), (2, 10 + 3 + 1));
        assert_eq!(&rb.buf.to_vec()[..4096], &data[..]);
        assert_eq!(
            poll_all(&cb)
                .iter()
                .map(|w| (w.wr_id, w.byte_len))
                .collect::<Vec<_>>(),
            vec![(1, 4096), (2, 4096), (3, 4096)]
        );
        // An RDMA write of 3 packets whose first is delayed (acted on, ACK late) and second
        // dropped: resent from the second; the bytes land once, in place.
        let sg = [m.sge(0, 3000)];
        let wr = rdma_wr(4, WrOpcode::RdmaWrite, &sg, &rb, 5000);
        f.script(&[PacketFate::Delay, PacketFate::Drop]);
        qa.uvp.post_send(&wr).unwrap();
        expect_statuses(&ca, &[(4, WcStatus::Success)]);
        assert_eq!(&rb.buf.to_vec()[5000..8000], &data[..3000]);
        settle(&p);
    }

    fn reads_in_flight_are_limited_by_max_rd_atomic(topology) {
        for depth in [1u8, 2] {
            let (p, f, a, b, ca, _cb, qa, _qb) = deterministic_rc_pair_on(topology, Conn {
                    depth,
                    resources: depth,
                    ..Conn::default()
                });
            let (la, rb) = mems(&a, 64, &b, 64);
            rb.buf.write(0, b"abcdefghijklmnopqrstuvwx").unwrap();
            // The first read's response is lost (the request arrives late).
            f.script(&[PacketFate::Delay]);
            let wrs: Vec<_> = (0..3)
                .map(|i| {
                    let mut wr = send_wr(i, WrOpcode::RdmaRead, &[]);
                    wr.remote_addr = rb.addr(i as usize * 8);
                    wr.rkey = rb.rkey;
                    wr
                })
                .collect();
            let sgs: Vec<_> = (0..3).map(|i| [la.sge(i * 8, 8)]).collect();
            let wrs: Vec<_> = wrs
                .iter()
                .zip(&sgs)
                .map(|(w, s)| SendWr { sg_list: s, ..*w })
                .collect();
            qa.uvp.post_send_list(&wrs).unwrap();
            let s = f.stats();
            if depth == 1 {
                // One read in flight at most: the second waits for the first's response, which
                // only the local ACK timeout brings back.
                assert_eq!((s.delayed, s.delivered), (1, 0));
                assert!(poll_all(&ca).is_empty());
                assert_eq!(run_timers(&p, 10), 1);
            } else {
                // Two in flight: the second read's response implies the first one's was lost, and
                // the first is asked again at once.
                assert_eq!((s.delayed, s.delivered), (1, 3));
            }
            expect_statuses(&ca, &[(0, WcStatus::Success), (1, WcStatus::Success), (2, WcStatus::Success)]);
            assert_eq!(&la.buf.to_vec()[..24], b"abcdefghijklmnopqrstuvwx");
            settle(&p);
        }
    }

    fn sqd_raises_sq_drained_once_what_was_in_flight_has_completed(topology) {
        let (p, f, a, b, ca, _cb, qa, qb) = deterministic_rc_pair_on(topology, Conn::default());
        let (m, rb) = mems(&a, 64, &b, 64);
        for i in 0..3 {
            post_recv(&qb, i, rb.sge(0, 64));
        }
        // Nothing in flight: drained at once.
        a.modify(&qa, &qpm(QpState::Sqd, WV_IO_QP_ATTR_STATE))
            .unwrap();
        settle(&p);
        assert_eq!(qa.events.take(), vec![QpEvent::SqDrained]);
        a.modify(&qa, &qpm(QpState::Rts, WV_IO_QP_ATTR_STATE))
            .unwrap();
        // A send whose packet is lost is in flight when SQD is asked for: the drain waits for it,
        // a later send waits for RTS, and SQD cannot be left for RTS while draining.
        f.script(&[PacketFate::Drop]);
        post_send(&qa, 1, m.sge(0, 4));
        a.modify(&qa, &qpm(QpState::Sqd, WV_IO_QP_ATTR_STATE))
            .unwrap();
        post_send(&qa, 2, m.sge(0, 4));
        settle(&p);
        assert!(qa.events.take().is_empty());
        assert_eq!(
            a.modify(&qa, &qpm(QpState::Rts, WV_IO_QP_ATTR_STATE)),
            Err(VerbsError::InvalidState)
        );
        assert_eq!(run_timers(&p, 10), 1);
        expect_statuses(&ca, &[(1, WcStatus::Success)]);
        assert_eq!(qa.events.take(), vec![QpEvent::SqDrained]);
        // Drained: RTS again sends what waited.
        a.modify(&qa, &qpm(QpState::Rts, WV_IO_QP_ATTR_STATE))
            .unwrap();
        expect_statuses(&ca, &[(2, WcStatus::Success)]);
        // Without the notify option there is no event.
        let mut sqd = attrs(WV_IO_QP_ATTR_STATE).to(QpState::Sqd);
        if let QpModify::Sqd { notify } = &mut sqd {
            *notify = false;
        }
        a.modify(&qa, &sqd).unwrap();
        settle(&p);
        assert!(qa.events.take().is_empty());
        settle(&p);
    }

    fn a_send_queue_restarted_from_sqd_has_its_whole_retry_budget(topology) {
        let (p, f, a, b, ca, _cb, qa, _qb) = deterministic_rc_pair_on(topology, Conn::with_retry(2));
        let (la, rb) = mems(&a, 64, &b, 64);
        // A read whose response is lost, then a write: the write's ACK says the read was
        // answered out of turn (an implied NAK), so the read is asked again, a retry spent.
        f.script(&[PacketFate::Delay]);
        let sg = [la.sge(0, 8)];
        let read = rdma_wr(1, WrOpcode::RdmaRead, &sg, &rb, 0);
        let write = rdma_wr(2, WrOpcode::RdmaWrite, &sg, &rb, 8);
        qa.uvp.post_send_list(&[read, write]).unwrap();
        expect_statuses(&ca, &[(1, WcStatus::Success), (2, WcStatus::Success)]);
        assert_eq!(f.stats().delayed, 1);
        // Drained and restarted: the send queue starts with retry_cnt retries again.
        a.modify(&qa, &qpm(QpState::Sqd, WV_IO_QP_ATTR_STATE))
            .unwrap();
        a.modify(&qa, &qpm(QpState::Rts, WV_IO_QP_ATTR_STATE))
            .unwrap();
        b.hca.set_port_state(1, false).unwrap();
        post_send(&qa, 3, la.sge(0, 8));
        // The first try and two retries, one local ACK timeout apart; the third timeout ends it.
        assert_eq!(run_timers_for(&p, 3 * ACK_TIMEOUT_NS - 1), 2);
        assert!(poll_all(&ca).is_empty());
        assert_eq!(run_timers(&p, 10), 1);
        expect_statuses(&ca, &[(3, WcStatus::RetryExcErr)]);
        b.hca.set_port_state(1, true).unwrap();
        settle(&p);
    }
}

#[test]
fn a_qp_reset_or_destroyed_with_a_request_outstanding_leaves_no_timer_behind() {
    let p = HostPlatform::deterministic();
    for destroy in [false, true] {
        let (_f, a, b, _ca, _cb, qa, _qb) = rc_pair(&p);
        let m = a.mem(16, ALL_ACCESS);
        // Nobody answers: the local ACK timer runs.
        b.hca.set_port_state(1, false).unwrap();
        post_send(&qa, 1, m.sge(0, 8));
        assert_eq!(p.pending_timers(), 1);
        // RESET discards the work and its timer; so does a destroy.
        if destroy {
            a.hca.destroy_qp(qa.soft);
        } else {
            a.modify(&qa, &qpm(QpState::Reset, WV_IO_QP_ATTR_STATE))
                .unwrap();
        }
        assert_eq!(p.pending_timers(), 0, "destroyed: {destroy}");
        p.advance_clock(10 * ACK_TIMEOUT_NS);
        p.run_until_idle();
    }
    settle(&p);
}
