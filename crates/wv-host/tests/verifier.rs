//! Every verifier check, shown firing.

mod common;

use std::sync::Arc;

use common::{PARK, TestDriver, TestFile, manager, manager_with, open_one};
use wv_abi::NtStatus;
use wv_hal::{
    CqEventSink, Event, IoRequest, Platform, RequestQueue, SpinLock, Umv, Verbs, WorkItem,
};
use wv_hal::{DeviceModelPlatform, InterruptService};
use wv_host::HostPlatform;
use wv_host::fake_verbs::{FakeCa, FakeVerbs};

/// One IOCTL (`code`, no input, `out_len` bytes of output) on a file of a driver whose
/// dispatch is `handler`; the file and the driver go when it returns.
fn issue_with(
    p: &HostPlatform,
    code: u32,
    out_len: usize,
    handler: impl Fn(&TestDriver, &TestFile, wv_host::HostRequest) + Send + Sync + 'static,
) {
    let mgr = manager_with(p, handler);
    let file = mgr.open().unwrap();
    let _ = file.device_io_control(code, &[], out_len);
}

/// A deterministic platform with a fake device open on it (its events ignored).
fn fake_ca() -> (HostPlatform, Arc<FakeVerbs>, FakeCa) {
    let p = HostPlatform::deterministic();
    let fake = FakeVerbs::with_defaults(&p);
    let ca = fake
        .open_ca(&mut Umv::none(), wv_hal::KArc::new(NoCa).into())
        .unwrap();
    (p, fake, ca)
}

#[test]
#[should_panic(expected = "completed twice")]
fn double_completion_through_the_raw_irp() {
    let p = HostPlatform::deterministic();
    issue_with(&p, 9, 0, |_, _, request| {
        let raw = request.into_raw_irp();
        raw.complete(NtStatus::SUCCESS, 0);
        raw.complete(NtStatus::CANCELLED, 0);
    });
}

#[test]
fn double_completion_message_names_the_request() {
    let p = HostPlatform::deterministic();
    let mgr = manager_with(&p, |_, _, request| {
        let raw = request.into_raw_irp();
        raw.complete(NtStatus::SUCCESS, 0);
        let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            raw.complete(NtStatus::SUCCESS, 0)
        }));
        assert!(again.is_err());
    });
    let file = mgr.open().unwrap();
    let io = file.device_io_control(9, &[], 0);
    let v = p.verifier().take_violations();
    assert_eq!(
        v,
        vec![format!("verifier: request {:#x} completed twice", io.id())]
    );
    assert_eq!(io.wait().status, 0, "the first completion stands");
}

#[test]
#[should_panic(expected = "verifier: wait at DISPATCH_LEVEL")]
fn wait_at_dispatch() {
    let p = HostPlatform::deterministic();
    let lock = p.spin_lock(());
    let event = p.event().unwrap();
    let _g = lock.lock();
    event.wait();
}

#[test]
#[should_panic(expected = "verifier: PAGED_CODE at DISPATCH_LEVEL")]
fn paged_code_at_dispatch() {
    let p = HostPlatform::deterministic();
    let lock = p.spin_lock(());
    let _g = lock.lock();
    p.paged_code();
}

#[test]
#[should_panic(
    expected = "verifier: spin lock held across return to PASSIVE_LEVEL (in device_io_control)"
)]
fn spin_lock_held_across_ioctl_return() {
    let p = HostPlatform::deterministic();
    let lock = Arc::new(p.spin_lock(0u32));
    issue_with(&p, 1, 0, move |_, _, request| {
        request.complete(NtStatus::SUCCESS, 0);
        std::mem::forget(lock.lock());
    });
}

struct LeakLock(wv_host::HostSpinLock<()>);
impl WorkItem for LeakLock {
    fn run(&self) {
        std::mem::forget(self.0.lock());
    }
}

#[test]
#[should_panic(expected = "verifier: spin lock held across return to PASSIVE_LEVEL (in work item)")]
fn spin_lock_held_across_work_item_return() {
    let p = HostPlatform::deterministic();
    p.queue_work(wv_hal::KArc::new(LeakLock(p.spin_lock(()))).into())
        .unwrap();
    p.run_until_idle();
}

#[test]
fn irql_restored_after_the_violation() {
    let p = HostPlatform::deterministic();
    p.queue_work(wv_hal::KArc::new(LeakLock(p.spin_lock(()))).into())
        .unwrap();
    assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.run_until_idle())).is_err());
    assert_eq!(p.irql(), wv_hal::Irql::Passive);
    assert_eq!(p.verifier().take_violations().len(), 1);
    p.shutdown();
}

#[test]
#[should_panic(expected = "never completed (dropped)")]
fn request_dropped_without_completion() {
    let p = HostPlatform::deterministic();
    issue_with(&p, 1, 0, |_, _, request| drop(request));
}

#[test]
#[should_panic(expected = "verifier: Information 9 > output length 8")]
fn information_beyond_the_output_buffer() {
    let p = HostPlatform::deterministic();
    issue_with(&p, 1, 8, |_, _, request| {
        request.complete(NtStatus::SUCCESS, 9)
    });
}

#[test]
#[should_panic(expected = "verifier: queue dropped with 1 requests parked")]
fn queue_dropped_with_parked_requests() {
    let p = HostPlatform::deterministic();
    let queue = Arc::new(std::sync::Mutex::new(Some(p.create_queue().unwrap())));
    let q = Arc::clone(&queue);
    let mgr = manager_with(&p, move |_, _, request| {
        let _ = q.lock().unwrap().as_ref().unwrap().park(request);
    });
    let file = mgr.open().unwrap();
    let io = file.device_io_control(1, &[], 0);
    assert!(io.pending());
    drop(queue.lock().unwrap().take());
}

#[test]
#[should_panic(expected = "verifier: 0 requests / 1 queues / 1 files alive at teardown")]
fn file_leaked_at_teardown() {
    let p = HostPlatform::deterministic();
    let mgr = manager(&p);
    std::mem::forget(mgr.open().unwrap());
    drop(mgr);
}

#[test]
#[should_panic(expected = "verifier: 1 requests / 1 queues / 1 files alive at teardown")]
fn parked_request_leaked_at_teardown() {
    let (_p, mgr, file) = open_one();
    let io = file.device_io_control(PARK, &[], 0);
    assert!(io.pending());
    std::mem::forget(file);
    drop(mgr);
}

struct NoSink;
impl CqEventSink for NoSink {
    fn on_completion(&self) {}
    fn on_error(&self) {}
}
struct NoCa;
impl wv_hal::CaEventSink for NoCa {
    fn on_event(&self, _: wv_hal::CaEvent) {}
}

#[test]
#[should_panic(expected = "FakeVerbs: 1 CQ alive at teardown")]
fn lower_object_leaked_at_teardown() {
    let (p, fake, ca) = fake_ca();
    let (cq, _) = fake
        .create_cq(&ca, 16, wv_hal::KArc::new(NoSink).into(), &mut Umv::none())
        .unwrap();
    let _leaked = cq; // never destroyed
    fake.close_ca(ca);
    p.shutdown();
}

struct QueueWorkIsr(HostPlatform);
struct Nothing;
impl WorkItem for Nothing {
    fn run(&self) {}
}
impl InterruptService for QueueWorkIsr {
    fn service(&self) -> bool {
        let _ = self.0.queue_work(wv_hal::KArc::new(Nothing).into());
        true
    }
}

#[test]
#[should_panic(expected = "verifier: queue_work at DIRQL")]
fn queue_work_above_dispatch() {
    let p = HostPlatform::deterministic();
    p.interrupt(&QueueWorkIsr(p.clone()));
}

struct EventIsr<E>(E, bool);
impl<E: wv_hal::Event> InterruptService for EventIsr<E> {
    fn service(&self) -> bool {
        if self.1 {
            self.0.set();
        } else {
            let _ = self.0.is_set();
        }
        true
    }
}

#[test]
#[should_panic(expected = "verifier: KeSetEvent at DIRQL")]
fn event_set_above_dispatch() {
    let p = HostPlatform::deterministic();
    p.interrupt(&EventIsr(p.event().unwrap(), true));
}

#[test]
#[should_panic(expected = "verifier: KeReadStateEvent at DIRQL")]
fn event_read_above_dispatch() {
    let p = HostPlatform::deterministic();
    p.interrupt(&EventIsr(p.event().unwrap(), false));
}

struct LockIsr(HostPlatform, wv_host::HostSpinLock<()>);
impl InterruptService for LockIsr {
    fn service(&self) -> bool {
        let _g = self.1.lock();
        let _ = &self.0;
        true
    }
}

#[test]
#[should_panic(expected = "verifier: spin lock acquired at DIRQL")]
fn spin_lock_above_dispatch() {
    let p = HostPlatform::deterministic();
    p.interrupt(&LockIsr(p.clone(), p.spin_lock(())));
}

#[test]
#[should_panic(expected = "verifier: spin lock acquired recursively")]
fn recursive_spin_lock() {
    let p = HostPlatform::deterministic();
    let lock = p.spin_lock(());
    let _a = lock.lock();
    let _b = lock.lock();
}

struct CompleteIsr(std::sync::Mutex<Option<wv_host::HostRequest>>);
impl InterruptService for CompleteIsr {
    fn service(&self) -> bool {
        if let Some(r) = self.0.lock().unwrap().take() {
            r.complete(NtStatus::SUCCESS, 0);
        }
        true
    }
}

#[test]
#[should_panic(expected = "completed at DIRQL")]
fn completion_above_dispatch() {
    let p = HostPlatform::deterministic();
    let pp = p.clone();
    let mgr = manager_with(&p, move |_, _, request| {
        pp.interrupt(&CompleteIsr(std::sync::Mutex::new(Some(request))));
    });
    let file = mgr.open().unwrap();
    let _ = file.device_io_control(1, &[], 0);
}

struct CreateCqInDpc(Arc<FakeVerbs>, wv_host::fake_verbs::FakeCa);
impl wv_hal::Dpc for CreateCqInDpc {
    fn run(&self) {
        let _ = self.0.create_cq(
            &self.1,
            4,
            wv_hal::KArc::new(NoSink).into(),
            &mut Umv::none(),
        );
    }
}

#[test]
#[should_panic(expected = "verifier: FakeVerbs::CreateCq at DISPATCH_LEVEL")]
fn lower_verb_called_at_dispatch() {
    let (p, fake, ca) = fake_ca();
    let dpc: wv_hal::KArc<dyn wv_hal::Dpc> =
        wv_hal::KArc::new(CreateCqInDpc(Arc::clone(&fake), ca)).into();
    p.queue_dpc(&dpc);
    p.run_until_idle();
}

#[test]
#[should_panic(expected = "verifier: wait on an event that nothing queued can set")]
fn deterministic_wait_that_can_never_end() {
    let p = HostPlatform::deterministic();
    p.event().unwrap().wait();
}

#[test]
fn threaded_violations_are_recorded_and_fail_teardown() {
    let p = HostPlatform::threaded(2);
    p.queue_work(wv_hal::KArc::new(LeakLock(p.spin_lock(()))).into())
        .unwrap();
    p.run_until_idle();
    assert_eq!(
        p.verifier().violations(),
        vec!["verifier: spin lock held across return to PASSIVE_LEVEL (in work item)".to_owned()]
    );
    let teardown =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.shutdown())).unwrap_err();
    let message = teardown.downcast_ref::<String>().unwrap();
    assert!(message.contains("1 violation(s)"), "{message}");
    assert!(message.contains("(in work item)"), "{message}");
}

struct Panics;
impl WorkItem for Panics {
    fn run(&self) {
        panic!("boom");
    }
}

#[test]
fn a_panic_on_a_worker_is_recorded() {
    let p = HostPlatform::threaded(1);
    p.queue_work(wv_hal::KArc::new(Panics).into()).unwrap();
    p.run_until_idle();
    assert_eq!(
        p.verifier().take_violations(),
        vec!["panic on a worker thread: boom".to_owned()]
    );
    p.shutdown();
}
