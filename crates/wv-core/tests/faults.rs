//! Deliberately broken cores: the host verifier must fail the run. Each test would pass
//! silently on a platform without the check.

mod common;

use common::*;
use wv_abi::ioctl::*;
use wv_abi::*;
use wv_core::{DebugFaults, DriverConfig};
use wv_host::HostPlatform;
use wv_host::fake_verbs::FakeCall;

fn faulty(faults: DebugFaults) -> Fx {
    Fx::with(
        HostPlatform::deterministic(),
        DriverConfig {
            debug_faults: faults,
            ..Default::default()
        },
    )
}

#[test]
#[should_panic(expected = "FakeVerbs: 1 CQ alive at teardown")]
fn leaking_a_cq_fails_the_teardown_check() {
    let fx = faulty(DebugFaults {
        leak_cq_on_destroy: true,
        ..Default::default()
    });
    let f = fx.open();
    let dev = open_device(&fx, &f);
    let cq = cq(&f, dev, 4);
    expect(
        &ioctl(&f, WV_IOCTL_CQ_DESTROY, &u64_in(cq), 0),
        NtStatus::SUCCESS,
    );
    drop(f);
    drop(fx); // driver unload: the teardown check runs
}

#[test]
#[should_panic(expected = "verifier: wait at DISPATCH_LEVEL")]
fn blocking_in_the_cq_callback_is_caught() {
    let fx = faulty(DebugFaults {
        block_in_cq_callback: true,
        ..Default::default()
    });
    let f = fx.open();
    let dev = open_device(&fx, &f);
    let cq = cq(&f, dev, 4);
    let io = pend(&f, WV_IOCTL_CQ_NOTIFY, &id(cq, 0, 1), 0);
    fx.hca.cq_completion(fx.last_created(FakeCall::CreateCq));
    // The DPC runs here, at DISPATCH_LEVEL, and the verifier fails the wait.
    fx.run();
    drop((io, f, fx));
}

#[test]
#[should_panic(expected = "completed twice")]
fn completing_twice_is_caught() {
    let fx = faulty(DebugFaults {
        complete_twice: true,
        ..Default::default()
    });
    fx.driver().set_raw_completer(raw_completer);
    let f = fx.open();
    let dev = open_device(&fx, &f);
    let cq = cq(&f, dev, 4);
    let _ = f.device_io_control(WV_IOCTL_CQ_CANCEL, &u64_in(cq), 0);
}

#[test]
fn the_same_scenarios_pass_without_the_faults() {
    let fx = faulty(DebugFaults::default());
    fx.driver().set_raw_completer(raw_completer);
    let f = fx.open();
    let dev = open_device(&fx, &f);
    let cq = cq(&f, dev, 4);
    let io = pend(&f, WV_IOCTL_CQ_NOTIFY, &id(cq, 0, 1), 0);
    fx.hca.cq_completion(fx.last_created(FakeCall::CreateCq));
    fx.run();
    expect(&done(&io), NtStatus::SUCCESS);
    expect(
        &ioctl(&f, WV_IOCTL_CQ_CANCEL, &u64_in(cq), 0),
        NtStatus::SUCCESS,
    );
    expect(
        &ioctl(&f, WV_IOCTL_CQ_DESTROY, &u64_in(cq), 0),
        NtStatus::SUCCESS,
    );
}
