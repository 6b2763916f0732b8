//! The filter device's hold on its controller (`wv_core::filter::Controller`), driven as the
//! glue's self-managed I/O callbacks drive it: start at the first start and at every return to
//! D0, stop before every power-down and at removal. A sleep ends everything on the controller
//! (so the controller's driver can power down) and the wake opens it again; a start that cannot
//! attach passes through and succeeds.
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use wv_abi::NtStatus;
use wv_abi::consts::WV_CQ_NEXT_COMPLETION;
use wv_abi::ioctl::*;
use wv_core::filter::{Controller, PassThrough, Start};
use wv_core::{Driver, DriverConfig};
use wv_host::fake_cm::FakeCm;
use wv_host::fake_verbs::{FakeConfig, FakeVerbs};
use wv_host::{HostPlatform, IoManager, IoStatus};

/// A driver with a controller below its filter that the core does not have yet.
struct Rig {
    io: IoManager<Drv>,
    hca: Arc<FakeVerbs>,
    cm: Arc<FakeCm>,
    controller: Controller,
}

impl Rig {
    fn new() -> Rig {
        let platform = HostPlatform::deterministic();
        let hca = FakeVerbs::new(&platform, FakeConfig::default());
        let cm = FakeCm::new(&platform);
        let driver = Arc::new(Driver::new(platform.clone(), DriverConfig::default()));
        Rig {
            io: IoManager::new(platform, driver),
            hca,
            cm,
            controller: Controller::new(),
        }
    }

    fn guid(&self) -> u64 {
        wv_hal::Verbs::guid(&*self.hca)
    }

    /// `EvtDeviceSelfManagedIoInit` / `Restart` of a controller that answers the queries.
    fn start(&self) -> Start<&'static str> {
        self.controller.start(
            self.io.driver(),
            || Ok(Arc::clone(&self.hca)),
            || Some(Arc::clone(&self.cm)),
        )
    }

    /// `EvtDeviceSelfManagedIoSuspend` (and the removal callbacks after it).
    fn stop(&self) -> bool {
        self.controller.stop(self.io.driver())
    }

    fn open_device(&self, file: &WvFile) -> IoStatus {
        ioctl(file, WV_IOCTL_DEVICE_OPEN, &id(self.guid(), 0, 0), 16)
    }
}

#[test]
fn a_sleep_ends_everything_on_the_controller_and_the_wake_opens_it_again() {
    let rig = Rig::new();
    assert_eq!(rig.start(), Start::Attached);
    let f = rig.io.open().expect("CreateFile");
    let st = rig.open_device(&f);
    expect(&st, NtStatus::SUCCESS);
    let dev = out::<wv_abi::WV_IO_ID>(&st).Id;
    let pd = alloc_pd(&f, dev);
    let cq = cq(&f, dev, 16);
    let parked = park_cq_notify(&f, cq, WV_CQ_NEXT_COMPLETION);
    let refs_attached = Arc::strong_count(&rig.hca);

    // Suspend before the power-down: the parked request ends, every verbs handle goes, and
    // the core no longer holds the interface (what mlx4_bus's D0Exit waits for).
    assert!(rig.stop());
    expect(&done(&parked), NtStatus::DEVICE_REMOVED);
    assert_lower_released(&rig.hca, refs_attached, "across the sleep");
    assert!(!rig.controller.is_attached());
    // The old handles fail the way they do after a removal; destroys still succeed.
    device_query(&f, dev, NtStatus::NO_SUCH_DEVICE);
    id_ioctl(&f, WV_IOCTL_PD_DEALLOCATE, pd, NtStatus::SUCCESS);
    // While the controller sleeps its GUID does not open.
    expect(&rig.open_device(&f), NtStatus::NO_SUCH_DEVICE);
    // A removal after the suspend (cleanup, surprise removal) finds nothing more to do.
    assert!(!rig.stop());

    // Restart after the wake: the same GUID opens again, on the same file and on a new one.
    assert_eq!(rig.start(), Start::Attached);
    let st = rig.open_device(&f);
    expect(&st, NtStatus::SUCCESS);
    let fresh = out::<wv_abi::WV_IO_ID>(&st).Id;
    assert_ne!(fresh, dev);
    alloc_pd(&f, fresh);
    let g = rig.io.open().expect("CreateFile");
    let other = out::<wv_abi::WV_IO_ID>(&rig.open_device(&g)).Id;
    alloc_pd(&g, other);
    drop((f, g));
    assert!(rig.stop());
    assert!(rig.hca.live_objects().is_empty());
}

#[test]
fn a_start_that_cannot_attach_passes_through_and_succeeds() {
    let rig = Rig::new();
    for reason in [
        PassThrough::query_failed(NtStatus::NOT_SUPPORTED),
        PassThrough::query_failed(NtStatus::UNSUCCESSFUL),
        PassThrough::Refused("the verbs table has no create_qp"),
    ] {
        let start = rig.controller.start(
            rig.io.driver(),
            || Err(reason),
            || -> Option<Arc<FakeCm>> { panic!("CM queried for a controller without verbs") },
        );
        assert_eq!(start, Start::PassThrough(reason));
        // The start callback still succeeds: the controller's stack stays up.
        assert_eq!(start.status(), NtStatus::SUCCESS, "{reason}");
        assert!(!rig.controller.is_attached());
        let f = rig.io.open().expect("CreateFile");
        expect(&rig.open_device(&f), NtStatus::NO_SUCH_DEVICE);
        // Nothing to give back at the power-down or the removal.
        assert!(!rig.stop());
    }
    // A later start that can attach does.
    assert_eq!(rig.start(), Start::Attached);
    assert!(rig.stop());
}

#[test]
fn the_query_status_names_the_reason() {
    assert_eq!(
        PassThrough::<()>::query_failed(NtStatus::NOT_SUPPORTED),
        PassThrough::NoVerbs
    );
    assert_eq!(
        PassThrough::<()>::query_failed(NtStatus::INSUFFICIENT_RESOURCES),
        PassThrough::QueryFailed(NtStatus::INSUFFICIENT_RESOURCES)
    );
    let logged = PassThrough::<&str>::QueryFailed(NtStatus::UNSUCCESSFUL).to_string();
    assert!(logged.contains("0xc0000001"), "{logged}");
    assert!(
        PassThrough::Refused("version 0x0206")
            .to_string()
            .contains("version 0x0206")
    );
}

#[test]
fn a_started_controller_is_not_queried_or_handed_over_twice() {
    let rig = Rig::new();
    assert_eq!(rig.start(), Start::Attached);
    let queries = AtomicUsize::new(0);
    let again = rig.controller.start(
        rig.io.driver(),
        || -> Result<Arc<FakeVerbs>, PassThrough<&str>> {
            queries.fetch_add(1, Ordering::Relaxed);
            Ok(Arc::clone(&rig.hca))
        },
        || None,
    );
    assert_eq!(again, Start::Attached);
    assert_eq!(queries.load(Ordering::Relaxed), 0);
    // One stop gives it back; the GUID is gone from the core.
    assert!(rig.stop());
    let f = rig.io.open().expect("CreateFile");
    expect(&rig.open_device(&f), NtStatus::NO_SUCH_DEVICE);
}

#[test]
fn a_controller_without_a_cm_attaches_for_the_verbs() {
    let rig = Rig::new();
    let start = rig.controller.start(
        rig.io.driver(),
        || -> Result<_, PassThrough<&str>> { Ok(Arc::clone(&rig.hca)) },
        || None,
    );
    assert_eq!(start, Start::Attached);
    let f = rig.io.open().expect("CreateFile");
    expect(&rig.open_device(&f), NtStatus::SUCCESS);
    drop(f);
    assert!(rig.stop());
}
