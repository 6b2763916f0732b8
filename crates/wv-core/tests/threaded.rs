//! Races on the threaded host model: QP modify ordering and parallelism, QP_CANCEL / destroy /
//! cleanup / removal racing running modifies, IOCTLs racing the last close.
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use wv_abi::ioctl::*;
use wv_abi::*;
use wv_hal::QpState;
use wv_host::Io;
use wv_host::fake_verbs::FakeCall;

const HANG_GUARD: Duration = Duration::from_secs(20);

/// Creates `n` QPs in RESET on one device; returns their ids and the fake's ids.
fn qps(fx: &Fx, f: &WvFile, n: usize) -> Vec<(u64, u64)> {
    let dev = open_device(fx, f);
    let pd = alloc_pd(f, dev);
    let c = cq(f, dev, 256);
    (0..n)
        .map(|_| (qp(f, pd, c, c, 0), fx.last_created(FakeCall::CreateQp)))
        .collect()
}

fn issue(f: &WvFile, qp: u64, to: QpState) -> Io {
    pend(f, WV_IOCTL_QP_MODIFY, &modify_in(qp, to), 8)
}

#[test]
fn modifies_are_fifo_per_qp_and_parallel_across_qps() {
    let fx = Fx::threaded();
    let f = fx.open();
    let qps = qps(&fx, &f, 4);
    let gates: Vec<_> = qps
        .iter()
        .map(|&(_, fake)| fx.hca.hold_modify(fake))
        .collect();
    let ios: Vec<Vec<Io>> = qps
        .iter()
        .map(|&(qp, _)| {
            [QpState::Init, QpState::Rtr, QpState::Rts]
                .map(|to| issue(&f, qp, to))
                .into()
        })
        .collect();
    // Every QP has a modify running at the same time: four work items in parallel.
    for gate in &gates {
        assert!(gate.wait_blocked(HANG_GUARD), "a QP's modify never started");
    }
    for gate in &gates {
        assert_eq!(gate.blocked(), 1, "one modify at a time per QP");
        gate.release();
    }
    for io in ios.iter().flatten() {
        expect(&done(io), NtStatus::SUCCESS);
    }
    let log = fx.hca.modify_log();
    for &(_, fake) in &qps {
        let steps: Vec<_> = log
            .iter()
            .filter(|m| m.qp == fake)
            .map(|m| (m.from, m.to))
            .collect();
        assert_eq!(
            steps,
            [
                (QpState::Reset, QpState::Init),
                (QpState::Init, QpState::Rtr),
                (QpState::Rtr, QpState::Rts)
            ]
        );
        assert_eq!(fx.hca.qp_state(fake), Some(QpState::Rts));
    }
}

#[test]
fn qp_cancel_ends_queued_modifies_and_the_running_one_finishes() {
    let fx = Fx::threaded();
    let f = fx.open();
    let (qp, fake) = qps(&fx, &f, 1)[0];
    let gate = fx.hca.hold_modify(fake);
    let first = issue(&f, qp, QpState::Init);
    assert!(gate.wait_blocked(HANG_GUARD));
    let queued: Vec<Io> = (0..8).map(|_| issue(&f, qp, QpState::Init)).collect();
    expect(
        &ioctl(&f, WV_IOCTL_QP_CANCEL, &u64_in(qp), 0),
        NtStatus::SUCCESS,
    );
    for io in &queued {
        expect(&done(io), NtStatus::CANCELLED);
    }
    assert!(!first.is_complete(), "the running modify is not cancelled");
    gate.release();
    expect(&done(&first), NtStatus::SUCCESS);
    // The queue keeps working after a cancel.
    expect(&modify(&f, qp, QpState::Rtr), NtStatus::SUCCESS);
}

#[test]
fn qp_destroy_waits_for_the_running_modify() {
    let fx = Fx::threaded();
    let f = Arc::new(fx.open());
    let (qp, fake) = qps(&fx, &f, 1)[0];
    let gate = fx.hca.hold_modify(fake);
    let running = issue(&f, qp, QpState::Init);
    assert!(gate.wait_blocked(HANG_GUARD));
    let queued: Vec<Io> = (0..4).map(|_| issue(&f, qp, QpState::Init)).collect();
    let destroyer = {
        let f = Arc::clone(&f);
        std::thread::spawn(move || ioctl(&f, WV_IOCTL_QP_DESTROY, &u64_in(qp), 0))
    };
    for io in &queued {
        expect(&done(io), NtStatus::CANCELLED);
    }
    gate.release();
    expect(&destroyer.join().unwrap(), NtStatus::SUCCESS);
    expect(&done(&running), NtStatus::SUCCESS);
    // Destroy came after the modify: the fake saw them in that order.
    let calls: Vec<_> = fx
        .hca
        .calls()
        .iter()
        .map(|c| c.call)
        .filter(|c| matches!(c, FakeCall::ModifyQp | FakeCall::DestroyQp))
        .collect();
    assert_eq!(calls.last(), Some(&FakeCall::DestroyQp));
}

#[test]
fn cleanup_racing_modifies_ends_every_request_once() {
    for round in 0..8 {
        let fx = Fx::threaded();
        let f = fx.open();
        let qps = qps(&fx, &f, 3);
        let gate = fx.hca.hold_modify(qps[0].1);
        let mut ios = Vec::new();
        for &(qp, _) in &qps {
            for to in [QpState::Init, QpState::Rtr, QpState::Rts, QpState::Rts] {
                ios.push(issue(&f, qp, to));
            }
        }
        if round % 2 == 0 {
            assert!(gate.wait_blocked(HANG_GUARD));
        }
        let closer = std::thread::spawn(move || drop(f));
        gate.release();
        closer.join().unwrap();
        for io in &ios {
            let st = done(io);
            let s = status(&st);
            assert!(
                s == NtStatus::SUCCESS || s == NtStatus::CANCELLED || s == NtStatus::UNSUCCESSFUL,
                "{st:?}"
            );
        }
        fx.run();
        assert!(fx.hca.live_objects().is_empty());
    }
}

#[test]
fn removal_racing_a_running_modify() {
    let fx = Fx::threaded();
    let f = fx.open();
    let (qp, fake) = qps(&fx, &f, 1)[0];
    let gate = fx.hca.hold_modify(fake);
    let running = issue(&f, qp, QpState::Init);
    assert!(gate.wait_blocked(HANG_GUARD));
    let queued: Vec<Io> = (0..4).map(|_| issue(&f, qp, QpState::Init)).collect();
    let guid = fx.guid();
    let remover = {
        let driver = Arc::clone(fx.driver());
        std::thread::spawn(move || wv_hal::FilterDriver::device_removal(&*driver, guid))
    };
    // Removal waits for the running modify; release it.
    gate.release();
    remover.join().unwrap();
    expect(&done(&running), NtStatus::SUCCESS);
    // The release may beat the removal to the queue: in FIFO order, some modifies succeed,
    // then every later one ends with STATUS_DEVICE_REMOVED, each exactly once.
    let statuses: Vec<_> = queued.iter().map(|io| status(&done(io))).collect();
    let removed_from = statuses
        .iter()
        .position(|s| *s != NtStatus::SUCCESS)
        .unwrap_or(statuses.len());
    assert!(
        statuses[removed_from..]
            .iter()
            .all(|s| *s == NtStatus::DEVICE_REMOVED),
        "{statuses:?}"
    );
    assert!(fx.hca.live_objects().is_empty());
    expect(
        &ioctl(&f, WV_IOCTL_QP_DESTROY, &u64_in(qp), 0),
        NtStatus::SUCCESS,
    );
}

#[test]
fn ioctls_racing_each_other_and_the_last_close() {
    for _ in 0..20 {
        let fx = Fx::threaded();
        let f = Arc::new(fx.open());
        let s = qp_rts(&fx, &f);
        let workers: Vec<_> = (0..4)
            .map(|i| {
                let f = Arc::clone(&f);
                std::thread::spawn(move || {
                    let mut statuses = Vec::new();
                    for _ in 0..50 {
                        let io = match i {
                            0 => f.device_io_control(WV_IOCTL_DEVICE_QUERY, &u64_in(s.dev), 152),
                            1 => f.device_io_control(WV_IOCTL_CQ_NOTIFY, &id(s.cq, 0, 1), 0),
                            2 => f.device_io_control(
                                WV_IOCTL_QP_MODIFY,
                                &modify_in(s.qp, QpState::Rts),
                                8,
                            ),
                            _ => f.device_io_control(WV_IOCTL_PD_ALLOCATE, &id(s.dev, 0, 0), 16),
                        };
                        if i == 1 {
                            f.cancel_io_ex(&io);
                        }
                        statuses.push(status(&done(&io)));
                    }
                    statuses
                })
            })
            .collect();
        let f = Arc::try_unwrap(f);
        // Whoever holds the last reference closes the handle; the threads keep issuing.
        drop(f);
        for w in workers {
            for s in w.join().unwrap() {
                assert!(
                    // UNSUCCESSFUL: the fake's PD limit.
                    [
                        NtStatus::SUCCESS,
                        NtStatus::CANCELLED,
                        NtStatus::FILE_CLOSED,
                        NtStatus::UNSUCCESSFUL
                    ]
                    .contains(&s),
                    "{s:?}"
                );
            }
        }
        fx.run();
        assert!(fx.hca.live_objects().is_empty());
    }
}

#[test]
fn cq_events_from_the_dpc_in_threaded_mode() {
    let fx = Fx::threaded();
    let f = fx.open();
    let dev = open_device(&fx, &f);
    let cq = cq(&f, dev, 16);
    let fake = fx.last_created(FakeCall::CreateCq);
    for _ in 0..100 {
        let io = pend(&f, WV_IOCTL_CQ_NOTIFY, &id(cq, 0, 1), 0);
        fx.hca.cq_completion(fake);
        expect(&done(&io), NtStatus::SUCCESS);
    }
}

#[test]
fn removal_ends_parked_notifies_in_threaded_mode() {
    let fx = Fx::threaded();
    let f = fx.open();
    let s = qp_rts(&fx, &f);
    let srq = srq(&f, s.pd);
    let parked = [
        pend(&f, WV_IOCTL_DEVICE_NOTIFY, &id(s.dev, 0, 1), 4),
        pend(&f, WV_IOCTL_CQ_NOTIFY, &id(s.cq, 0, 1), 0),
        pend(&f, WV_IOCTL_CQ_NOTIFY, &id(s.cq, 0, 0), 0),
        pend(&f, WV_IOCTL_SRQ_NOTIFY, &u64_in(srq), 0),
    ];
    fx.io.remove(fx.guid());
    for io in &parked {
        expect(&done(io), NtStatus::DEVICE_REMOVED);
    }
    assert!(fx.hca.live_objects().is_empty());
}

#[test]
fn removal_racing_opens_and_creates() {
    for _ in 0..10 {
        let fx = Fx::threaded();
        let files: Vec<_> = (0..3).map(|_| Arc::new(fx.open())).collect();
        let guid = fx.guid();
        // Removal starts once every worker is under way.
        let started = Arc::new(std::sync::Barrier::new(files.len() + 1));
        let workers: Vec<_> = files
            .iter()
            .map(|f| {
                let f = Arc::clone(f);
                let started = Arc::clone(&started);
                std::thread::spawn(move || {
                    for round in 0..30 {
                        if round == 1 {
                            started.wait();
                        }
                        let st =
                            done(&f.device_io_control(WV_IOCTL_DEVICE_OPEN, &id(guid, 0, 0), 16));
                        if status(&st) != NtStatus::SUCCESS {
                            assert_eq!(status(&st), NtStatus::NO_SUCH_DEVICE);
                            continue;
                        }
                        let dev = out::<WV_IO_ID>(&st).Id;
                        let st = done(&f.device_io_control(WV_IOCTL_CQ_CREATE, &id(dev, 0, 4), 16));
                        let s = status(&st);
                        assert!(
                            [
                                NtStatus::SUCCESS,
                                NtStatus::NO_SUCH_DEVICE,
                                NtStatus::UNSUCCESSFUL
                            ]
                            .contains(&s),
                            "{s:?}"
                        );
                        if s == NtStatus::SUCCESS {
                            let cq = out::<WV_IO_ID>(&st).Id;
                            let io = f.device_io_control(WV_IOCTL_CQ_NOTIFY, &id(cq, 0, 1), 0);
                            if io.pending() {
                                f.cancel_io_ex(&io);
                            }
                            let s = status(&done(&io));
                            assert!(
                                [
                                    NtStatus::CANCELLED,
                                    NtStatus::DEVICE_REMOVED,
                                    NtStatus::NOT_FOUND
                                ]
                                .contains(&s),
                                "{s:?}"
                            );
                            let st =
                                done(&f.device_io_control(WV_IOCTL_CQ_DESTROY, &u64_in(cq), 0));
                            expect(&st, NtStatus::SUCCESS);
                        }
                        let st = done(&f.device_io_control(WV_IOCTL_DEVICE_CLOSE, &u64_in(dev), 0));
                        expect(&st, NtStatus::SUCCESS);
                    }
                })
            })
            .collect();
        started.wait();
        fx.io.remove(guid);
        for w in workers {
            w.join().unwrap();
        }
        assert!(
            fx.hca.live_objects().is_empty(),
            "{:?}",
            fx.hca.live_objects()
        );
        drop(files);
    }
}

#[test]
fn qp_cancel_racing_the_drainer_cancels_a_tail_of_the_queue() {
    // QP_CANCEL and the drainer both take requests out of the modify queue. What QP_CANCEL
    // ends must be the whole tail: never a modify queued before one that then runs (the
    // harness's `qp-modify-cancel` check caught that interleaving about 1 run in 20).
    let fx = Fx::threaded();
    let f = Arc::new(fx.open());
    let (qp, fake) = qps(&fx, &f, 1)[0];
    for round in 0..40 {
        let gate = fx.hca.hold_modify(fake);
        let first = issue(&f, qp, QpState::Init);
        assert!(gate.wait_blocked(HANG_GUARD));
        let queued: Vec<Io> = (0..6).map(|_| issue(&f, qp, QpState::Init)).collect();
        let canceller = {
            let f = Arc::clone(&f);
            std::thread::spawn(move || ioctl(&f, WV_IOCTL_QP_CANCEL, &u64_in(qp), 0))
        };
        // Let the drainer go while QP_CANCEL runs.
        gate.release();
        expect(&canceller.join().unwrap(), NtStatus::SUCCESS);
        expect(&done(&first), NtStatus::SUCCESS);
        let statuses: Vec<NtStatus> = queued.iter().map(|io| status(&done(io))).collect();
        let first_cancelled = statuses
            .iter()
            .position(|s| *s == NtStatus::CANCELLED)
            .unwrap_or(statuses.len());
        assert!(
            statuses[..first_cancelled]
                .iter()
                .all(|s| *s == NtStatus::SUCCESS)
                && statuses[first_cancelled..]
                    .iter()
                    .all(|s| *s == NtStatus::CANCELLED),
            "round {round}: not a cancelled tail: {statuses:?}"
        );
    }
}
