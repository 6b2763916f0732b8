//! The detectors fire: each test runs a deliberately broken build of the core (the
//! `fault-injection` feature, which nothing shipped enables) and expects the host model to
//! fail the run with the rule it broke. Each would pass silently on a platform without the
//! check; the last test runs the same scenarios on the same build with the faults off.
//!
//! Run with `cargo test -p wv-core --features fault-injection --test detectors`.
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

mod common;

use common::*;
use wv_abi::ioctl::*;
use wv_abi::*;
use wv_core::{DriverConfig, Faults};
use wv_hal::QpState;
use wv_host::fake_verbs::FakeCall;
use wv_host::{HostPlatform, Io};

/// The faults with only the one `set` switches on.
fn only(set: impl FnOnce(&mut Faults)) -> Faults {
    let mut faults = Faults::default();
    set(&mut faults);
    faults
}

fn faulty(faults: Faults) -> Fx {
    faulty_with(faults, DriverConfig::default())
}

/// A faulty build with a file, its device open and a 4-entry CQ on it.
fn faulty_cq(faults: Faults) -> (Fx, WvFile, u64) {
    let fx = faulty(faults);
    let f = fx.open();
    let dev = open_device(&fx, &f);
    let cq = cq(&f, dev, 4);
    (fx, f, cq)
}

/// A next-completion notify parked on `cq`, then a completion on the CQ, its DPC run.
fn notify_then_completion(fx: &Fx, f: &WvFile, cq: u64) -> Io {
    let io = pend(f, WV_IOCTL_CQ_NOTIFY, &id(cq, 0, 1), 0);
    fx.hca.cq_completion(fx.last_created(FakeCall::CreateCq));
    fx.run();
    io
}

fn faulty_with(faults: Faults, config: DriverConfig) -> Fx {
    let fx = Fx::with(HostPlatform::deterministic(), config);
    fx.driver().inject(faults);
    fx.driver().set_raw_completer(raw_completer);
    fx
}

/// Double completion: the I/O manager's check on the IRP.
#[test]
#[should_panic(expected = "completed twice")]
fn double_completion_is_caught() {
    let (_fx, f, cq) = faulty_cq(only(|x| x.complete_twice = true));
    let _ = f.device_io_control(WV_IOCTL_CQ_CANCEL, &u64_in(cq), 0);
}

/// Missing completion: a request the driver forgot is still alive at unload.
#[test]
#[should_panic(expected = "1 requests")]
fn missing_completion_is_caught() {
    let (fx, f, cq) = faulty_cq(only(|x| x.lose_cq_cancel = true));
    let io = f.device_io_control(WV_IOCTL_CQ_CANCEL, &u64_in(cq), 0);
    assert!(
        io.pending(),
        "the forgotten request looks pending to the caller"
    );
    drop((io, f));
    drop(fx); // driver unload: the teardown check runs
}

/// Leak: a lower-device object the driver never destroyed is reported at unload.
#[test]
#[should_panic(expected = "FakeVerbs: 1 CQ alive at teardown")]
fn leak_is_caught() {
    let (fx, f, cq) = faulty_cq(only(|x| x.leak_cq_on_destroy = true));
    id_ioctl(&f, WV_IOCTL_CQ_DESTROY, cq, NtStatus::SUCCESS);
    drop(f);
    drop(fx);
}

/// IRQL misuse: a wait in the DPC callback.
#[test]
#[should_panic(expected = "verifier: wait at DISPATCH_LEVEL")]
fn irql_misuse_is_caught() {
    let (fx, f, cq) = faulty_cq(only(|x| x.block_in_cq_callback = true));
    // The DPC runs at DISPATCH_LEVEL, and the verifier fails the wait.
    let io = notify_then_completion(&fx, &f, cq);
    drop((io, f, fx));
}

/// Hang: QP_DESTROY waits for a drainer that stops without waking it.
#[test]
#[should_panic(expected = "wait on an event that nothing queued can set")]
fn hang_is_caught() {
    let fx = faulty(only(|x| x.lose_modify_wakeup = true));
    let f = fx.open();
    let q = qp_reset(&fx, &f, 4).qp;
    // Queued, drainer not run yet: destroy must wait for it.
    let _io = pend(&f, WV_IOCTL_QP_MODIFY, &modify_in(q, QpState::Init), 8);
    let _ = f.device_io_control(WV_IOCTL_QP_DESTROY, &u64_in(q), 0);
}

/// A lock kept on a failure path (OFW's §7.1-b): the callback returns holding it.
#[test]
#[should_panic(expected = "spin lock held across return to PASSIVE_LEVEL (in device_io_control)")]
fn lock_held_on_return_is_caught() {
    // After this violation the provider lock is held for ever (on Windows: a deadlock at the
    // next IOCTL or at cleanup), so the stack is leaked instead of torn down, and the IOCTL
    // runs on its own thread, whose failure is this test's.
    let fx: &'static Fx = Box::leak(Box::new(faulty_with(
        only(|x| x.keep_lock_on_full_table = true),
        DriverConfig {
            max_ids_per_type: 1,
            ..DriverConfig::default()
        },
    )));
    let f: &'static WvFile = Box::leak(Box::new(fx.open()));
    open_device(fx, f);
    let outcome = std::thread::spawn(move || {
        let _ = f.device_io_control(WV_IOCTL_DEVICE_OPEN, &id(fx.guid(), 0, 0), 16);
    })
    .join();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// The same scenarios on the same build, faults off: nothing fires.
#[test]
fn the_same_scenarios_pass_without_the_faults() {
    let fx = faulty_with(
        Faults::default(),
        DriverConfig {
            max_ids_per_type: 2,
            ..DriverConfig::default()
        },
    );
    let f = fx.open();
    let dev = open_device(&fx, &f);
    let cq = cq(&f, dev, 4);
    let io = notify_then_completion(&fx, &f, cq);
    expect(&done(&io), NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_CQ_CANCEL, cq, NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_CQ_DESTROY, cq, NtStatus::SUCCESS);
    let pd = alloc_pd(&f, dev);
    let c = cq_create_ok(&f, dev);
    let q = qp(&f, pd, c, c, 0);
    let io = pend(&f, WV_IOCTL_QP_MODIFY, &modify_in(q, QpState::Init), 8);
    id_ioctl(&f, WV_IOCTL_QP_DESTROY, q, NtStatus::SUCCESS);
    expect(&done(&io), NtStatus::CANCELLED);
    open_device(&fx, &f);
    expect(
        &ioctl(&f, WV_IOCTL_DEVICE_OPEN, &id(fx.guid(), 0, 0), 16),
        NtStatus::NO_MEMORY,
    );
}

fn cq_create_ok(f: &WvFile, dev: u64) -> u64 {
    cq(f, dev, 4)
}
