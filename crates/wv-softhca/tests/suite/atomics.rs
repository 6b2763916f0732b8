//! Remote atomics: compare-and-swap and fetch-and-add on 8 aligned bytes of a region with
//! remote atomic access, the original value returned, `ATOMIC_HCA` advertised, the responder
//! resources, exactly-once execution under retransmission, and the error completions for
//! misalignment, access and bounds. Each test of traffic runs twice: between two QPs of one
//! device (loopback) and across two devices.

use std::sync::Arc;

use crate::common::*;
use wv_abi::consts::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

const ATOMIC: u32 = WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_ATOMIC;

fn atomic_conn() -> Conn {
    Conn {
        access: WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ | WV_ACCESS_REMOTE_ATOMIC,
        ..Conn::default()
    }
}

fn word(m: &Mem, off: usize) -> u64 {
    let mut w = [0u8; 8];
    m.buf.read(off, &mut w).unwrap();
    u64::from_ne_bytes(w)
}

fn set_word(m: &Mem, off: usize, v: u64) {
    m.buf.write(off, &v.to_ne_bytes()).unwrap();
}

fn atomic_wr<'a>(
    id: u64,
    op: WrOpcode,
    result: &'a [Sge],
    remote: &Mem,
    off: usize,
    args: AtomicArgs,
) -> SendWr<'a> {
    let mut wr = send_wr(id, op, result);
    wr.remote_addr = remote.addr(off);
    wr.rkey = remote.rkey;
    wr.atomic = Some(args);
    wr
}

fn cas(compare: u64, swap: u64) -> AtomicArgs {
    AtomicArgs {
        compare_add: compare,
        swap,
    }
}

fn add(n: u64) -> AtomicArgs {
    AtomicArgs {
        compare_add: n,
        swap: 0,
    }
}

#[test]
fn atomic_hca_is_advertised() {
    let (p, a) = deterministic_node();
    let attr = a.hca.query_ca().unwrap();
    assert_eq!(attr.atomic_capability, WV_IO_ATOMIC_HCA);
    assert!(attr.max_qp_responder_resources >= 1 && attr.max_qp_initiator_depth >= 1);
    settle(&p);
}

on_both_topologies! {
    fn compare_and_swap_and_fetch_and_add_return_the_original_value(topology) {
        let (p, _f, a, b, ca, cb, qa, _qb) = deterministic_rc_pair_on(topology, atomic_conn());
        let local = a.mem(64, ALL_ACCESS);
        let remote = b.mem(64, ATOMIC);
        set_word(&remote, 8, 41);
        // Fetch-and-add: the original value comes back, the sum stays.
        let r0 = [local.sge(0, 8)];
        qa.uvp
            .post_send(&atomic_wr(
                1,
                WrOpcode::AtomicFetchAndAdd,
                &r0,
                &remote,
                8,
                add(1),
            ))
            .unwrap();
        let w = poll_all(&ca);
        assert_eq!(
            (w[0].wr_id, w[0].status, w[0].opcode, w[0].byte_len),
            (1, WcStatus::Success, WcOpcode::FetchAdd, 8)
        );
        assert_eq!((word(&local, 0), word(&remote, 8)), (41, 42));
        // Compare-and-swap that matches: swapped.
        let r1 = [local.sge(8, 8)];
        qa.uvp
            .post_send(&atomic_wr(
                2,
                WrOpcode::AtomicCmpAndSwp,
                &r1,
                &remote,
                8,
                cas(42, 0xDEAD_BEEF),
            ))
            .unwrap();
        // Compare-and-swap that does not: unchanged, and still the original value returned.
        let r2 = [local.sge(16, 8)];
        qa.uvp
            .post_send(&atomic_wr(
                3,
                WrOpcode::AtomicCmpAndSwp,
                &r2,
                &remote,
                8,
                cas(42, 7),
            ))
            .unwrap();
        assert_eq!(
            completions(&ca),
            vec![
                (2, WcStatus::Success, WcOpcode::CompSwap),
                (3, WcStatus::Success, WcOpcode::CompSwap)
            ]
        );
        assert_eq!(word(&local, 8), 42);
        assert_eq!(word(&local, 16), 0xDEAD_BEEF);
        assert_eq!(word(&remote, 8), 0xDEAD_BEEF);
        // Fetch-and-add wraps modulo 2^64.
        set_word(&remote, 0, u64::MAX);
        qa.uvp
            .post_send(&atomic_wr(
                4,
                WrOpcode::AtomicFetchAndAdd,
                &r0,
                &remote,
                0,
                add(3),
            ))
            .unwrap();
        assert_eq!(poll_all(&ca)[0].status, WcStatus::Success);
        assert_eq!((word(&local, 0), word(&remote, 0)), (u64::MAX, 2));
        // One-sided: the target sees nothing.
        assert!(poll_all(&cb).is_empty());
        settle(&p);
    }

    fn atomic_error_completions(topology) {
        let p = HostPlatform::deterministic();
        let check = |what: &str,
                     conn: Conn,
                     mr_access: u32,
                     remote_off: usize,
                     bad_lkey: bool,
                     want: WcStatus,
                     responder_errs: bool| {
            let (_f, a, b, ca, _cb, qa, qb) = rc_pair_on(&p, topology, conn);
            let local = a.mem(64, ALL_ACCESS);
            let remote = b.mem(32, mr_access);
            set_word(&remote, 0, 5);
            let mut r = [local.sge(0, 8)];
            if bad_lkey {
                r[0].lkey ^= 0x100;
            }
            qa.uvp
                .post_send(&atomic_wr(
                    1,
                    WrOpcode::AtomicFetchAndAdd,
                    &r,
                    &remote,
                    remote_off,
                    add(1),
                ))
                .unwrap();
            // A later request is flushed: the error moved the QP to ERR.
            post_send(&qa, 2, local.sge(0, 4));
            assert_eq!(
                statuses(&poll_all(&ca)),
                vec![(1, want), (2, WcStatus::WrFlushErr)],
                "{what}"
            );
            assert_eq!(a.state(&qa), QpState::Error, "{what}");
            let expect = if responder_errs {
                QpState::Error
            } else {
                QpState::Rts
            };
            assert_eq!(b.state(&qb), expect, "{what}: responder");
            assert_eq!(word(&remote, 0), 5, "{what}: nothing executed");
        };
        check(
            "misaligned",
            atomic_conn(),
            ATOMIC,
            4,
            false,
            WcStatus::RemInvReqErr,
            true,
        );
        check(
            "region without remote atomic",
            atomic_conn(),
            ALL_ACCESS,
            0,
            false,
            WcStatus::RemAccessErr,
            true,
        );
        check(
            "QP without remote atomic",
            Conn::default(),
            ATOMIC,
            0,
            false,
            WcStatus::RemAccessErr,
            true,
        );
        check(
            "out of the region",
            atomic_conn(),
            ATOMIC,
            32,
            false,
            WcStatus::RemAccessErr,
            true,
        );
        check(
            "no responder resources",
            Conn {
                resources: 0,
                ..atomic_conn()
            },
            ATOMIC,
            0,
            false,
            WcStatus::RemInvReqErr,
            true,
        );
        check(
            "bad local key",
            atomic_conn(),
            ATOMIC,
            0,
            true,
            WcStatus::LocProtErr,
            false,
        );
        settle(&p);
    }

    fn atomics_are_refused_at_post_time_where_they_cannot_be(topology) {
        let (p, _f, a, b, _ca, _cb, qa, _qb) = deterministic_rc_pair_on(topology, atomic_conn());
        let local = a.mem(64, ALL_ACCESS);
        let remote = b.mem(64, ATOMIC);
        // The local buffer is 8 bytes, or the request is not posted (EINVAL).
        for sg in [
            vec![local.sge(0, 4)],
            vec![local.sge(0, 4), local.sge(8, 8)],
        ] {
            let e = qa
                .uvp
                .post_send(&atomic_wr(
                    1,
                    WrOpcode::AtomicFetchAndAdd,
                    &sg,
                    &remote,
                    0,
                    add(1),
                ))
                .unwrap_err();
            assert_eq!((e, e.errno()), (PostError::AtomicLength, 22));
        }
        // RC only.
        let c = a.cq(8);
        for t in [QpType::Uc, QpType::Ud] {
            let q = a.qp(t, &c);
            bring_up(&a, &q, b.hca.gid(), 1, atomic_conn());
            let r = [local.sge(0, 8)];
            let mut wr = atomic_wr(1, WrOpcode::AtomicCmpAndSwp, &r, &remote, 0, cas(0, 1));
            wr.ud = Some(UdAddress::default());
            assert_eq!(q.uvp.post_send(&wr), Err(PostError::BadOpcode), "{t:?}");
        }
        settle(&p);
    }

    fn an_atomic_whose_response_is_lost_is_not_executed_twice(topology) {
        let (p, f, a, b, ca, _cb, qa, _qb) = deterministic_rc_pair_on(topology, atomic_conn());
        let local = a.mem(64, ALL_ACCESS);
        let remote = b.mem(64, ATOMIC);
        set_word(&remote, 0, 100);
        // The request arrives and is executed; its response is late: the requester resends after
        // the local ACK timeout and gets the original value from the responder's resources.
        f.script(&[PacketFate::Delay]);
        let r = [local.sge(0, 8)];
        qa.uvp
            .post_send(&atomic_wr(
                1,
                WrOpcode::AtomicFetchAndAdd,
                &r,
                &remote,
                0,
                add(1),
            ))
            .unwrap();
        assert!(poll_all(&ca).is_empty());
        assert_eq!(word(&remote, 0), 101, "executed once already");
        assert_eq!(run_timers(&p, 10), 1);
        assert_eq!(poll_all(&ca)[0].status, WcStatus::Success);
        assert_eq!(word(&remote, 0), 101, "the duplicate was not executed");
        assert_eq!(word(&local, 0), 100, "the first execution's original value");
        assert_eq!(f.stats().delayed, 1);
        settle(&p);
    }

    fn atomics_from_two_threads_lose_no_update(topology) {
        let p = HostPlatform::threaded(2);
        let (_f, a, b) = pair_on(&p, topology);
        let counter = Arc::new(b.mem(64, ATOMIC));
        let mut workers = Vec::new();
        const N: u64 = 300;
        for _ in 0..2 {
            let ca = a.cq(N as u32 * 2);
            let cb = b.cq(4);
            let qa = a.qp_with(QpType::Rc, &ca, &ca, None, 64, 1, 0, true);
            let qb = b.qp(QpType::Rc, &cb);
            connect(&a, &qa, &b, &qb, atomic_conn());
            let local = a.mem(8 * N as usize, ALL_ACCESS);
            let (uq, ucq, counter) = (qa.uvp.clone(), ca.uvp.clone(), counter.clone());
            workers.push((
                std::thread::spawn(move || {
                    let mut done = 0;
                    let mut wc = [WorkCompletion::default(); 16];
                    for i in 0..N {
                        let r = [local.sge(i as usize * 8, 8)];
                        let wr = atomic_wr(i, WrOpcode::AtomicFetchAndAdd, &r, &counter, 0, add(1));
                        while uq.post_send(&wr) == Err(PostError::QueueFull) {
                            done += ucq.poll(&mut wc);
                        }
                    }
                    while done < N as usize {
                        let n = ucq.poll(&mut wc);
                        assert!(wc[..n].iter().all(|w| w.status == WcStatus::Success));
                        done += n;
                    }
                    local
                }),
                qa,
                qb,
                ca,
                cb,
            ));
        }
        let mut seen = Vec::new();
        for (t, ..) in workers {
            let local = t.join().unwrap();
            seen.extend((0..N as usize).map(|i| word(&local, i * 8)));
        }
        assert_eq!(word(&counter, 0), 2 * N);
        // Every original value 0..2N came back exactly once.
        seen.sort_unstable();
        assert_eq!(seen, (0..2 * N).collect::<Vec<_>>());
        settle(&p);
    }
}
