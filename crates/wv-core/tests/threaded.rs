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
use wv_host::fake_verbs::{FakeCall, ModifyGate};

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

/// Holds the lower driver's modify of QP `ids` (driver id, fake id), issues one INIT modify
/// and waits until the drainer blocks in it, then queues `n` more behind it: the gate, the
/// running modify, the queued ones.
fn held_modifies(fx: &Fx, f: &WvFile, ids: (u64, u64), n: usize) -> (ModifyGate, Io, Vec<Io>) {
    let (qp, fake) = ids;
    let gate = fx.hca.hold_modify(fake);
    let running = issue(f, qp, QpState::Init);
    assert!(gate.wait_blocked(HANG_GUARD));
    let queued = (0..n).map(|_| issue(f, qp, QpState::Init)).collect();
    (gate, running, queued)
}

/// [`held_modifies`] on a new QP; its id first.
fn held_qp(fx: &Fx, f: &WvFile, n: usize) -> (u64, ModifyGate, Io, Vec<Io>) {
    let ids = qps(fx, f, 1)[0];
    let (gate, running, queued) = held_modifies(fx, f, ids, n);
    (ids.0, gate, running, queued)
}

/// Checks that from the first status `starts` picks, every status is `tail` (in order of
/// issue); returns where that tail starts.
#[track_caller]
fn ends_with_only(
    statuses: &[NtStatus],
    starts: impl Fn(NtStatus) -> bool,
    tail: NtStatus,
) -> usize {
    let from = statuses
        .iter()
        .position(|&s| starts(s))
        .unwrap_or(statuses.len());
    assert!(
        statuses[from..].iter().all(|&s| s == tail),
        "not only {tail:?} from #{from}: {statuses:?}"
    );
    from
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
    let (qp, gate, first, queued) = held_qp(&fx, &f, 8);
    id_ioctl(&f, WV_IOCTL_QP_CANCEL, qp, NtStatus::SUCCESS);
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
    let (qp, gate, running, queued) = held_qp(&fx, &f, 4);
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
    let (qp, gate, running, queued) = held_qp(&fx, &f, 4);
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
    ends_with_only(
        &statuses,
        |s| s != NtStatus::SUCCESS,
        NtStatus::DEVICE_REMOVED,
    );
    assert!(fx.hca.live_objects().is_empty());
    id_ioctl(&f, WV_IOCTL_QP_DESTROY, qp, NtStatus::SUCCESS);
}

/// §7.1-i, forced: an IOCTL is inside the driver (held in `query_ca`) when the last handle
/// closes. Cleanup must wait for it, and every IOCTL that reaches the driver after cleanup
/// began must get `STATUS_FILE_CLOSED`, even though one is still in flight. OFW's gate (a bare
/// reference count, "closed" only when it reads 0) admitted those, so this test fails on it:
/// its loop never sees `STATUS_FILE_CLOSED` while the held IOCTL keeps the count up.
#[test]
fn an_ioctl_arriving_during_cleanup_is_refused_while_another_is_in_flight() {
    use std::sync::mpsc;
    let fx = Fx::threaded();
    let f = fx.open();
    let dev = open_device(&fx, &f);
    let (entered, inside) = mpsc::channel::<()>();
    let release = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let gate = Arc::clone(&release);
    let once = std::sync::atomic::AtomicBool::new(false);
    fx.hca.set_failure_hook(Some(Box::new(move |call, _| {
        if call == FakeCall::QueryCa && !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
            entered.send(()).unwrap();
            let (lock, cv) = &*gate;
            let mut released = lock.lock().unwrap();
            while !*released {
                released = cv.wait(released).unwrap();
            }
        }
        None
    })));
    let (held, late) = (f.reference(), f.reference());
    let in_flight = std::thread::spawn(move || {
        held.device_io_control(WV_IOCTL_DEVICE_QUERY, &u64_in(dev), 152)
    });
    inside
        .recv_timeout(HANG_GUARD)
        .expect("the IOCTL never reached query_ca");
    let closer = std::thread::spawn(move || drop(f));
    // Until cleanup has closed the gate, requests are admitted (GUID_QUERY succeeds); from then
    // on every one is refused, while the held IOCTL is still in flight.
    let deadline = std::time::Instant::now() + HANG_GUARD;
    let mut admitted_before = 0;
    loop {
        let st = late.device_io_control(WV_IOCTL_GUID_QUERY, &[], 24).wait();
        match status(&st) {
            NtStatus::SUCCESS => admitted_before += 1,
            NtStatus::FILE_CLOSED => break,
            other => panic!("unexpected {other:?}"),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "an IOCTL that arrived after cleanup began was admitted {admitted_before} times \
             (the gate must refuse them while another is in flight)"
        );
        std::thread::yield_now();
    }
    assert!(
        !closer.is_finished(),
        "cleanup did not wait for the IOCTL in flight"
    );
    for _ in 0..10 {
        expect(
            &late
                .device_io_control(WV_IOCTL_DEVICE_QUERY, &u64_in(dev), 152)
                .wait(),
            NtStatus::FILE_CLOSED,
        );
    }
    *release.0.lock().unwrap() = true;
    release.1.notify_all();
    let io = in_flight.join().unwrap();
    expect(&done(&io), NtStatus::SUCCESS);
    closer.join().unwrap();
    expect(
        &late.device_io_control(WV_IOCTL_GUID_QUERY, &[], 24).wait(),
        NtStatus::FILE_CLOSED,
    );
    fx.hca.set_failure_hook(None);
    fx.run();
    assert!(fx.hca.live_objects().is_empty());
}

/// §7.1-i in practice: four threads issue IOCTLs through references on the file object while
/// the main thread closes the last handle in the middle of their runs. Every request ends
/// once with an expected status; each thread sees `STATUS_FILE_CLOSED` for every request
/// after its first one (a closed gate never admits again); and over the runs the closing
/// really lands in the middle (requests both before and after it).
#[test]
fn ioctls_racing_each_other_and_the_last_close() {
    let mut closed_total = 0;
    let mut admitted_total = 0;
    for _ in 0..20 {
        let fx = Fx::threaded();
        let f = fx.open();
        let s = qp_rts(&fx, &f);
        let started = Arc::new(std::sync::Barrier::new(5));
        let workers: Vec<_> = (0..4)
            .map(|i| {
                let f = f.reference();
                let started = Arc::clone(&started);
                std::thread::spawn(move || {
                    let mut statuses = Vec::new();
                    for n in 0..50 {
                        if n == 5 {
                            started.wait();
                        }
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
        // Every worker is under way: close the last handle now, while they keep issuing.
        started.wait();
        drop(f);
        for w in workers {
            let statuses = w.join().unwrap();
            // Nothing admitted after a FILE_CLOSED.
            let first_closed = ends_with_only(
                &statuses,
                |s| s == NtStatus::FILE_CLOSED,
                NtStatus::FILE_CLOSED,
            );
            for s in &statuses[..first_closed] {
                assert!(
                    // CANCELLED: the worker's own cancel, or cleanup ending a parked request;
                    // UNSUCCESSFUL: the fake's PD limit.
                    [
                        NtStatus::SUCCESS,
                        NtStatus::CANCELLED,
                        NtStatus::UNSUCCESSFUL
                    ]
                    .contains(s),
                    "{s:?}"
                );
            }
            closed_total += statuses.len() - first_closed;
            admitted_total += first_closed;
        }
        fx.run();
        assert!(fx.hca.live_objects().is_empty());
    }
    figures(
        "close_race",
        &[
            ("admitted", admitted_total as u64),
            ("file_closed", closed_total as u64),
        ],
    );
    assert!(
        closed_total > 0 && admitted_total > 0,
        "the close never raced the IOCTLs ({admitted_total} admitted, {closed_total} refused)"
    );
}

#[test]
fn cq_events_from_the_dpc_in_threaded_mode() {
    let fx = Fx::threaded();
    let f = fx.open();
    let dev = open_device(&fx, &f);
    let cq = cq(&f, dev, 16);
    let fake = fx.last_created(FakeCall::CreateCq);
    for _ in 0..100 {
        let io = park_cq_notify(&f, cq, 1);
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
    let parked = park_notifies(&f, &s, srq);
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
        let (gate, first, queued) = held_modifies(&fx, &f, (qp, fake), 6);
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
