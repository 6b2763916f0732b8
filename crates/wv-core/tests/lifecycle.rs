//! File cleanup, lower-device removal and re-arrival, the provider gate (deterministic mode).
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

mod common;

use std::sync::Arc;

use common::*;
use wv_abi::ioctl::*;
use wv_abi::*;
use wv_hal::{FilterDriver, QpState};
use wv_host::Io;
use wv_host::fake_verbs::{FakeCall, FakeConfig, FakeVerbs, ObjectKind};

/// Everything a file can own, with a parked request of every kind.
fn populate(fx: &Fx, f: &WvFile) -> (Stack, u64) {
    let s = qp_rts(fx, f);
    let srq = srq(f, s.pd);
    mw_allocate(f, s.pd, NtStatus::SUCCESS);
    ah_create(f, s.pd, NtStatus::SUCCESS);
    expect_ioctl(
        f,
        WV_IOCTL_MEMORY_REGISTER,
        &mr_reg_in(s.pd),
        8,
        NtStatus::SUCCESS,
    );
    (s, srq)
}

/// A [`populate`]d file with [`park_notifies`]'s four notifies parked and a modify to RTS
/// queued, its work item not yet run.
struct Parked {
    s: Stack,
    srq: u64,
    notifies: [Io; 4],
    modify: Io,
}

impl Parked {
    fn new(fx: &Fx, f: &WvFile) -> Parked {
        let (s, srq) = populate(fx, f);
        let notifies = park_notifies(f, &s, srq);
        let modify = pend(f, WV_IOCTL_QP_MODIFY, &modify_in(s.qp, QpState::Rts), 8);
        Parked {
            s,
            srq,
            notifies,
            modify,
        }
    }

    /// Every parked request ended with `want` and no output, the modify too unless a worker
    /// thread ran it before (then it ran to the end).
    #[track_caller]
    fn ended(&self, fx: &Fx, want: NtStatus) {
        for io in &self.notifies {
            let st = done(io);
            expect(&st, want);
            assert_eq!(st.information, 0);
        }
        let modified = done(&self.modify);
        if fx.platform().is_deterministic() || status(&modified) != NtStatus::SUCCESS {
            expect(&modified, want);
            assert_eq!(modified.information, 0);
        }
    }
}

#[test]
fn cleanup_destroys_everything_in_ofw_order() {
    let (fx, f) = file_fixture();
    let parked = Parked::new(&fx, &f);
    let before = fx.hca.calls().len();
    drop(f);
    fx.run();
    parked.ended(&fx, NtStatus::CANCELLED);
    assert!(
        fx.hca.live_objects().is_empty(),
        "{:?}",
        fx.hca.live_objects()
    );
    // (A modify a worker ran before the close is not part of the teardown.)
    let order: Vec<FakeCall> = fx.hca.calls()[before..]
        .iter()
        .map(|c| c.call)
        .filter(|c| *c != FakeCall::ModifyQp)
        .collect();
    let want = [
        FakeCall::DestroyAh,
        FakeCall::DestroyMw,
        FakeCall::DestroyQp,
        FakeCall::DestroySrq,
        FakeCall::DeregisterMr,
        FakeCall::DeallocatePd,
        FakeCall::DestroyCq,
        FakeCall::CloseCa,
    ];
    assert_eq!(order, want);
}

#[test]
fn ioctl_after_cleanup_is_file_closed() {
    // §7.1-i: the gate is one counter and one closed flag under one lock.
    let (_fx, f, dev) = device_fixture();
    let io = f.close_racing_ioctl(WV_IOCTL_DEVICE_QUERY, &u64_in(dev), 152);
    assert!(!io.pending());
    expect(&io.wait(), NtStatus::FILE_CLOSED);
}

#[test]
fn cleanup_runs_once_and_close_after_it_is_harmless() {
    let fx = Fx::new();
    let driver = Arc::clone(fx.driver());
    let file = driver.file_create().unwrap();
    driver.file_cleanup(&file);
    driver.file_cleanup(&file);
    driver.file_close(file);
}

#[test]
fn removal_completes_parked_requests_and_invalidates_handles() {
    // §7.1-e: OFW left every notify parked until the application cancelled or closed.
    let (fx, f) = file_fixture();
    let parked = Parked::new(&fx, &f);
    let (s, srq) = (&parked.s, parked.srq);
    let refs_before = Arc::strong_count(&fx.hca);
    fx.io.remove(fx.guid());
    parked.ended(&fx, NtStatus::DEVICE_REMOVED);
    assert_lower_released(&fx.hca, refs_before, "after the removal");
    fx.run();

    // Other calls fail as OFW's Acquire would.
    device_query(&f, s.dev, NtStatus::NO_SUCH_DEVICE);
    id_ioctl(&f, WV_IOCTL_SRQ_NOTIFY, srq, NtStatus::NOT_FOUND);
    let (gone, no_device) = (NtStatus::NOT_FOUND, NtStatus::NO_SUCH_DEVICE);
    let refused = [
        (WV_IOCTL_DEVICE_NOTIFY, id(s.dev, 0, 1), 4, gone),
        (WV_IOCTL_PD_ALLOCATE, id(s.dev, 0, 0), 16, no_device),
        (WV_IOCTL_CQ_CREATE, id(s.dev, 0, 4), 16, no_device),
        (WV_IOCTL_CQ_NOTIFY, id(s.cq, 0, 1), 0, gone),
        (WV_IOCTL_QP_MODIFY, modify_in(s.qp, QpState::Rts), 8, gone),
        (WV_IOCTL_QP_QUERY, u64_in(s.qp), 192, gone),
        (WV_IOCTL_MEMORY_REGISTER, mr_reg_in(s.pd), 8, gone),
        (WV_IOCTL_LIBRARY_QUERY, u64_in(fx.guid()), 28, no_device),
    ];
    for (code, input, out_len, want) in refused {
        let st = ioctl(&f, code, &input, out_len);
        assert_eq!(status(&st), want, "IOCTL {code:#x}: {st:?}");
    }
    let st = ioctl(&f, WV_IOCTL_GUID_QUERY, &[], 16);
    assert_eq!(&st.output[..8], &0u64.to_ne_bytes());
    // ... while destroys still succeed, in the usual order.
    id_ioctl(&f, WV_IOCTL_AH_DESTROY, 1, NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_MW_DEALLOCATE, 1, NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_PD_DEALLOCATE, s.pd, NtStatus::ACCESS_DENIED);
    id_ioctl(&f, WV_IOCTL_QP_DESTROY, s.qp, NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_SRQ_DESTROY, srq, NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_PD_DEALLOCATE, s.pd, NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_CQ_DESTROY, s.cq, NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_DEVICE_CLOSE, s.dev, NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_DEVICE_CLOSE, s.dev, NtStatus::NO_SUCH_DEVICE);
}

#[test]
fn removal_then_cleanup_and_rearrival() {
    let fx = Fx::new();
    let old = fx.open();
    let (s, _srq) = populate(&fx, &old);
    let other = fx.open();
    fx.io.remove(fx.guid());
    // Same GUID comes back: new opens work, old handles stay dead.
    fx.io.arrive(Arc::clone(&fx.hca)).unwrap();
    let dev = open_device(&fx, &other);
    let pd = alloc_pd(&other, dev);
    assert_eq!(pd, 1);
    device_query(&old, s.dev, NtStatus::NO_SUCH_DEVICE);
    let fresh = open_device(&fx, &old);
    assert_ne!(fresh, s.dev);
    device_query(&old, fresh, NtStatus::SUCCESS);
    // Cleanup of a file with removed and live objects.
    drop(old);
    assert_eq!(
        fx.hca.live_count(ObjectKind::Ca),
        1,
        "only the other file's open is left"
    );
    drop(other);
    assert!(fx.hca.live_objects().is_empty());
}

#[test]
fn removal_of_an_unknown_guid_is_harmless() {
    let (fx, f, dev) = device_fixture();
    fx.io.remove(0xDEAD);
    device_query(&f, dev, NtStatus::SUCCESS);
}

#[test]
fn creation_runs_in_the_callers_thread() {
    // §7.1-l: MR registration, CQ/QP creation and device open pin or map the caller's memory,
    // so they must run in the caller's context, never on a worker.
    let fx = Fx::threaded();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    fx.hca.set_failure_hook(Some(Box::new(move |call, _| {
        log.lock()
            .unwrap()
            .push((call, std::thread::current().id()));
        None
    })));
    let f = fx.open();
    let s = qp_rts(&fx, &f);
    expect_ioctl(
        &f,
        WV_IOCTL_MEMORY_REGISTER,
        &mr_reg_in(s.pd),
        8,
        NtStatus::SUCCESS,
    );
    let me = std::thread::current().id();
    let seen = seen.lock().unwrap().clone();
    for call in [
        FakeCall::OpenCa,
        FakeCall::AllocatePd,
        FakeCall::CreateCq,
        FakeCall::CreateQp,
        FakeCall::RegisterMr,
    ] {
        let threads: Vec<_> = seen
            .iter()
            .filter(|(c, _)| *c == call)
            .map(|(_, t)| *t)
            .collect();
        assert!(!threads.is_empty(), "{call:?} not called");
        assert!(
            threads.iter().all(|t| *t == me),
            "{call:?} ran on another thread"
        );
    }
    // QP modifies, by design, do not.
    assert!(
        seen.iter()
            .any(|(c, t)| *c == FakeCall::ModifyQp && *t != me)
    );
    fx.hca.set_failure_hook(None);
}

#[test]
fn removal_lets_go_of_the_lower_device_at_passive_level() {
    // The driver holds the only reference to a second controller, with a device opened and a
    // request parked on it, so its removal drops the last reference: FakeVerbs reports a drop
    // at DISPATCH_LEVEL or under a spin lock.
    let fx = Fx::new();
    let guid = 0x0002_c903_0000_5678u64.to_be();
    let second = FakeVerbs::new(
        fx.platform(),
        FakeConfig {
            guid,
            ..FakeConfig::default()
        },
    );
    fx.io.arrive(second).unwrap();
    let f = fx.open();
    let open = ioctl(&f, WV_IOCTL_DEVICE_OPEN, &id(guid, 0, 0), 16);
    expect(&open, NtStatus::SUCCESS);
    let dev = u64::from_ne_bytes(open.output[..8].try_into().unwrap());
    let notify = pend(&f, WV_IOCTL_DEVICE_NOTIFY, &id(dev, 0, 1), 4);
    fx.io.remove(guid);
    expect(&notify.wait(), NtStatus::DEVICE_REMOVED);
    fx.run();
    assert_eq!(fx.platform().verifier().violations(), Vec::<String>::new());
}
