//! The I/O manager: inline vs pending, output copy-back, cancel, cleanup and close.

mod common;

use common::{COMPLETE_INLINE, FIRE, PARK, STATUS_FROM_INPUT, manager, manager_with, open_one};
use wv_abi::NtStatus;
use wv_hal::{IoRequest, RequestQueue};
use wv_host::HostPlatform;

#[test]
fn inline_completion_is_not_pending_and_copies_back_information_bytes() {
    let (_p, _mgr, file) = open_one();
    let io = file.device_io_control(COMPLETE_INLINE, &[1, 2, 3], 5);
    assert!(!io.pending());
    assert!(io.is_complete());
    let status = io.wait();
    assert_eq!(status.status, 0);
    assert_eq!(status.information, 5);
    // The system buffer started as the input, zero-filled to max(in, out); the handler
    // added one to every output byte.
    assert_eq!(status.output, vec![2, 3, 4, 1, 1]);
}

#[test]
fn the_system_buffer_is_max_of_input_and_output() {
    let p = HostPlatform::deterministic();
    let mgr = manager_with(&p, |_, _, request| {
        assert_eq!(request.input_len(), 6);
        assert_eq!(request.output_len(), 2);
        assert_eq!(request.buffer(), &[9, 8, 7, 6, 5, 4]);
        request.complete(NtStatus::SUCCESS, 2);
    });
    let file = mgr.open().unwrap();
    assert_eq!(
        file.device_io_control(1, &[9, 8, 7, 6, 5, 4], 2)
            .wait()
            .output,
        vec![9, 8]
    );
}

#[test]
fn output_is_copied_back_on_success_and_warning_only() {
    let (_p, _mgr, file) = open_one();
    let run = |status: u32| {
        let io = file.device_io_control(STATUS_FROM_INPUT, &status.to_le_bytes(), 8);
        assert!(!io.pending());
        io.wait()
    };
    let ok = run(NtStatus::SUCCESS.0);
    assert_eq!(ok.output, vec![0xAB; 8]);
    let more = run(NtStatus::MORE_ENTRIES.0);
    assert_eq!(
        more.output,
        vec![0xAB; 8],
        "informational statuses are success"
    );
    let warning = run(0x8000_0005); // STATUS_BUFFER_OVERFLOW
    assert_eq!(warning.output, vec![0xAB; 8], "warnings copy back too");
    let error = run(NtStatus::BUFFER_TOO_SMALL.0);
    assert_eq!(error.status, NtStatus::BUFFER_TOO_SMALL.0);
    assert_eq!(error.information, 8, "Information is reported as set");
    assert!(
        error.output.is_empty(),
        "no output reaches the caller on error"
    );
}

#[test]
fn a_parked_request_is_pending_until_fired() {
    let (_p, _mgr, file) = open_one();
    let a = file.device_io_control(PARK, &[], 0);
    let b = file.device_io_control(PARK, &[], 0);
    assert!(a.pending() && b.pending());
    assert!(a.try_result().is_none());
    let fire = file.device_io_control(FIRE, &[], 0);
    assert!(!fire.pending());
    assert_eq!(a.wait().status, 0);
    assert_eq!(b.wait().status, 0);
}

#[test]
fn a_request_completed_by_a_work_item_is_pending() {
    use std::sync::Mutex;
    use wv_hal::{Platform, WorkItem};
    struct Later(Mutex<Option<wv_host::HostRequest>>);
    impl WorkItem for Later {
        fn run(&self) {
            self.0
                .lock()
                .unwrap()
                .take()
                .unwrap()
                .complete(NtStatus::SUCCESS, 0);
        }
    }
    let p = HostPlatform::deterministic();
    let pp = p.clone();
    let mgr = manager_with(&p, move |_, _, request| {
        pp.queue_work(wv_hal::KArc::new(Later(Mutex::new(Some(request)))).into())
            .unwrap();
    });
    let file = mgr.open().unwrap();
    let io = file.device_io_control(1, &[], 0);
    assert!(io.pending());
    assert!(!io.is_complete());
    assert_eq!(io.wait().status, 0);
}

#[test]
#[should_panic(expected = "still pending after run_until_idle")]
fn a_deterministic_wait_on_a_request_nobody_completes_panics() {
    let (_p, _mgr, file) = open_one();
    file.device_io_control(PARK, &[], 0).wait();
}

#[test]
fn cancel_io_ex_cancels_a_parked_request_exactly_once() {
    let (_p, _mgr, file) = open_one();
    let a = file.device_io_control(PARK, &[], 0);
    let b = file.device_io_control(PARK, &[], 0);
    assert!(file.cancel_io_ex(&a));
    assert!(!file.cancel_io_ex(&a), "already completed");
    assert_eq!(a.try_result().unwrap().status, NtStatus::CANCELLED.0);
    // FIRE retrieves what is parked: only b; a is never handed to the driver again.
    let _ = file.device_io_control(FIRE, &[], 0);
    assert_eq!(b.wait().status, 0);
    assert_eq!(a.wait().status, NtStatus::CANCELLED.0);
}

#[test]
fn cancel_io_ex_of_a_driver_owned_request_marks_it_and_park_completes_it() {
    use std::sync::Mutex;
    let held = std::sync::Arc::new(Mutex::new(None));
    let h = std::sync::Arc::clone(&held);
    let p = HostPlatform::deterministic();
    let mgr = manager_with(&p, move |_, file, request| {
        if request.ioctl_code() == 1 {
            *h.lock().unwrap() = Some(request);
        } else {
            let parked = h.lock().unwrap().take().unwrap();
            assert!(parked.is_cancelled());
            assert!(file.queue.park(parked).is_ok());
            assert_eq!(
                file.queue.parked(),
                0,
                "completed with STATUS_CANCELLED at once"
            );
            request.complete(NtStatus::SUCCESS, 0);
        }
    });
    let file = mgr.open().unwrap();
    let io = file.device_io_control(1, &[], 0);
    assert!(
        !file.cancel_io_ex(&io),
        "not cancellable while the driver owns it"
    );
    let _ = file.device_io_control(2, &[], 0);
    assert_eq!(io.wait().status, NtStatus::CANCELLED.0);
}

#[test]
fn cancel_io_ex_only_finds_requests_of_its_own_file() {
    let p = HostPlatform::deterministic();
    let mgr = manager(&p);
    let f1 = mgr.open().unwrap();
    let f2 = mgr.open().unwrap();
    let io = f1.device_io_control(PARK, &[], 0);
    assert!(!f2.cancel_io_ex(&io));
    assert!(f1.cancel_io_ex(&io));
}

#[test]
fn close_cancels_parked_requests_runs_cleanup_at_once_and_close_after_the_last_irp() {
    use std::sync::{Arc, Mutex};
    let held = Arc::new(Mutex::new(None));
    let h = Arc::clone(&held);
    let p = HostPlatform::deterministic();
    let mgr = manager_with(&p, move |d, f, request| {
        if request.ioctl_code() == 1 {
            *h.lock().unwrap() = Some(request); // driver-owned, not cancellable
        } else {
            common::standard(d, f, request);
        }
    });
    let file = mgr.open().unwrap();
    let parked = file.device_io_control(PARK, &[], 0);
    let owned = file.device_io_control(1, &[], 0);
    drop(file);
    assert_eq!(parked.try_result().unwrap().status, NtStatus::CANCELLED.0);
    p.run_until_idle();
    assert_eq!(
        mgr.driver().log(),
        vec!["create 1", "cleanup 1"],
        "close waits for the IRP"
    );
    held.lock()
        .unwrap()
        .take()
        .unwrap()
        .complete(NtStatus::SUCCESS, 0);
    assert_eq!(
        mgr.driver().log(),
        vec!["create 1", "cleanup 1"],
        "close runs at PASSIVE later"
    );
    p.run_until_idle();
    assert_eq!(mgr.driver().log(), vec!["create 1", "cleanup 1", "close 1"]);
    assert_eq!(owned.wait().status, 0, "an Io outlives its File");
}

#[test]
fn close_of_an_idle_file_runs_cleanup_then_close_inline() {
    let p = HostPlatform::deterministic();
    let mgr = manager(&p);
    drop(mgr.open().unwrap());
    assert_eq!(mgr.driver().log(), vec!["create 1", "cleanup 1", "close 1"]);
    assert_eq!(p.verifier().live_files(), 0);
}

#[test]
fn park_after_purge_returns_the_request_with_status_cancelled() {
    let p = HostPlatform::deterministic();
    let mgr = manager_with(&p, |_, file, request| {
        file.queue.purge();
        match file.queue.park(request) {
            Ok(()) => panic!("park after purge must fail"),
            Err((request, status)) => {
                assert_eq!(status, NtStatus::CANCELLED);
                request.complete(status, 0);
            }
        }
    });
    let file = mgr.open().unwrap();
    let io = file.device_io_control(1, &[], 0);
    assert!(!io.pending());
    assert_eq!(io.wait().status, NtStatus::CANCELLED.0);
}

#[test]
fn retrieve_next_is_fifo_and_purge_cancels_the_rest() {
    use std::sync::{Arc, Mutex};
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = Arc::clone(&order);
    let p = HostPlatform::deterministic();
    let mgr = manager_with(&p, move |_, file, request| match request.ioctl_code() {
        10 => {
            let first = file.queue.retrieve_next().unwrap();
            o.lock().unwrap().push(first.buffer()[0]);
            first.complete(NtStatus::SUCCESS, 0);
            assert_eq!(file.queue.parked(), 2);
            file.queue.purge();
            assert_eq!(file.queue.parked(), 0);
            assert!(file.queue.retrieve_next().is_none());
            request.complete(NtStatus::SUCCESS, 0);
        }
        _ => file.queue.park(request).map_err(|_| ()).unwrap(),
    });
    let file = mgr.open().unwrap();
    let ios: Vec<_> = (1..=3u8)
        .map(|n| file.device_io_control(2, &[n], 0))
        .collect();
    let _ = file.device_io_control(10, &[], 0);
    assert_eq!(*order.lock().unwrap(), vec![1]);
    let statuses: Vec<u32> = ios.into_iter().map(|io| io.wait().status).collect();
    assert_eq!(
        statuses,
        vec![0, NtStatus::CANCELLED.0, NtStatus::CANCELLED.0]
    );
}

#[test]
fn arrival_and_removal_reach_the_driver_and_unload_removes_what_is_left() {
    use wv_host::fake_verbs::FakeVerbs;
    let p = HostPlatform::deterministic();
    let mgr = manager(&p);
    let fake = FakeVerbs::with_defaults(&p);
    mgr.arrive(fake).unwrap();
    assert_eq!(mgr.driver().log(), vec!["arrival"]);
    let driver = std::sync::Arc::clone(mgr.driver());
    drop(mgr);
    assert_eq!(driver.log(), vec!["arrival", "removal"]);
}

#[test]
fn an_ioctl_racing_the_last_close_reaches_the_driver_after_cleanup() {
    let platform = HostPlatform::deterministic();
    let manager = manager(&platform);
    let file = manager.open().unwrap();
    let io = file.close_racing_ioctl(COMPLETE_INLINE, &[1, 2], 2);
    // Cleanup ran before the IRP was dispatched; close comes once that IRP has completed (here
    // inline, so the last reference went with the caller's).
    assert_eq!(manager.driver().log()[..2], ["create 1", "cleanup 1"]);
    assert!(!io.pending());
    assert_eq!(io.wait().output, vec![2, 3]);
    assert_eq!(manager.driver().log(), ["create 1", "cleanup 1", "close 1"]);
}
