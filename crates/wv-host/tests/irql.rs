//! IRQL tracking and deferred execution in deterministic mode.

mod common;

use std::sync::{Arc, Mutex};

use wv_hal::{DeviceModelPlatform, InterruptService};
use wv_hal::{Dpc, Irql, KArc, Platform, SpinLock, WorkItem};
use wv_host::HostPlatform;

struct Record {
    platform: HostPlatform,
    name: &'static str,
    seen: Arc<Mutex<Vec<(&'static str, Irql)>>>,
}

impl Record {
    /// Notes its name with the IRQL it runs at.
    fn note(&self) {
        self.seen
            .lock()
            .unwrap()
            .push((self.name, self.platform.irql()));
    }
}

impl WorkItem for Record {
    fn run(&self) {
        self.note();
    }
}

impl Dpc for Record {
    fn run(&self) {
        self.note();
    }
}

/// A [`Record`] of `name` into `seen`, as the DPC or work item the caller queues.
/// What [`record`]s push to.
type Seen = Arc<Mutex<Vec<(&'static str, Irql)>>>;

/// A deterministic platform and an empty record of what ran.
fn recorder() -> (HostPlatform, Seen) {
    (HostPlatform::deterministic(), Arc::default())
}

fn record<T: ?Sized>(p: &HostPlatform, name: &'static str, seen: &Seen) -> KArc<T>
where
    KArc<Record>: Into<KArc<T>>,
{
    KArc::new(Record {
        platform: p.clone(),
        name,
        seen: Arc::clone(seen),
    })
    .into()
}

#[test]
fn passive_by_default_and_spin_locks_raise_and_restore() {
    let p = HostPlatform::deterministic();
    assert_eq!(p.irql(), Irql::Passive);
    let a = p.spin_lock(1u32);
    let b = p.spin_lock(2u32);
    {
        let mut ga = a.lock();
        *ga += 1;
        assert_eq!(p.irql(), Irql::Dispatch);
        {
            let gb = b.lock();
            assert_eq!(*gb, 2);
            assert_eq!(p.irql(), Irql::Dispatch);
        }
        assert_eq!(p.irql(), Irql::Dispatch, "still holding a");
    }
    assert_eq!(p.irql(), Irql::Passive);
    assert_eq!(*a.lock(), 2);
    p.shutdown();
}

#[test]
fn deferred_work_runs_in_fifo_order_at_its_irql() {
    let (p, seen) = recorder();
    p.queue_work(record(&p, "w1", &seen)).unwrap();
    let dpc: KArc<dyn Dpc> = record(&p, "d1", &seen);
    assert!(p.queue_dpc(&dpc));
    p.queue_work(record(&p, "w2", &seen)).unwrap();
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing runs before run_until_idle"
    );
    assert_eq!(p.queued(), 3);
    p.run_until_idle();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            ("w1", Irql::Passive),
            ("d1", Irql::Dispatch),
            ("w2", Irql::Passive)
        ]
    );
    assert_eq!(p.irql(), Irql::Passive);
    p.shutdown();
}

#[test]
fn run_one_runs_a_single_item() {
    let (p, seen) = recorder();
    p.queue_work(record(&p, "a", &seen)).unwrap();
    p.queue_work(record(&p, "b", &seen)).unwrap();
    assert!(p.run_one());
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert!(p.run_one());
    assert!(!p.run_one());
    p.shutdown();
}

#[test]
fn a_queued_dpc_is_not_queued_twice_until_it_starts() {
    let (p, seen) = recorder();
    let dpc: KArc<dyn Dpc> = record(&p, "d", &seen);
    let other: KArc<dyn Dpc> = record(&p, "other", &seen);
    assert!(p.queue_dpc(&dpc));
    assert!(!p.queue_dpc(&dpc), "already queued");
    assert!(p.queue_dpc(&other), "identity is per object");
    p.run_until_idle();
    assert_eq!(seen.lock().unwrap().len(), 2, "ran once for both requests");
    assert!(p.queue_dpc(&dpc), "started: may be queued again");
    p.run_until_idle();
    p.shutdown();
}

struct Isr {
    platform: HostPlatform,
    dpc: KArc<dyn Dpc>,
    seen: Arc<Mutex<Vec<(&'static str, Irql)>>>,
}

impl InterruptService for Isr {
    fn service(&self) -> bool {
        self.seen
            .lock()
            .unwrap()
            .push(("isr", self.platform.irql()));
        self.platform.queue_dpc(&self.dpc);
        true
    }
}

#[test]
fn interrupt_runs_the_isr_at_dirql_and_its_dpc_at_dispatch() {
    let (p, seen) = recorder();
    let isr = Isr {
        platform: p.clone(),
        dpc: record(&p, "dpc", &seen),
        seen: Arc::clone(&seen),
    };
    assert!(p.interrupt(&isr));
    assert_eq!(p.irql(), Irql::Passive);
    p.run_until_idle();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![("isr", Irql::Device), ("dpc", Irql::Dispatch)]
    );
    p.shutdown();
}

#[test]
fn the_deterministic_clock_is_injected() {
    let p = HostPlatform::deterministic();
    assert_eq!(p.now_ns(), 0);
    p.advance_clock(1_500);
    assert_eq!(p.now_ns(), 1_500);
    p.shutdown();
}

#[test]
fn the_threaded_clock_is_monotonic() {
    let p = HostPlatform::threaded(1);
    let a = p.now_ns();
    let b = p.now_ns();
    assert!(b >= a);
    p.shutdown();
}

#[test]
fn paged_code_and_waits_are_fine_at_passive() {
    let p = HostPlatform::deterministic();
    p.paged_code();
    let e = p.event().unwrap();
    wv_hal::Event::set(&e);
    wv_hal::Event::wait(&e);
    assert!(wv_hal::Event::is_set(&e));
    p.shutdown();
}

struct SetLater(Arc<wv_host::HostEvent>);
impl WorkItem for SetLater {
    fn run(&self) {
        wv_hal::Event::set(&*self.0);
    }
}

#[test]
fn a_deterministic_wait_runs_queued_work_until_the_event_is_set() {
    let p = HostPlatform::deterministic();
    let e = Arc::new(p.event().unwrap());
    p.queue_work(wv_hal::KArc::new(SetLater(Arc::clone(&e))).into())
        .unwrap();
    wv_hal::Event::wait(&*e);
    assert!(wv_hal::Event::is_set(&*e));
    p.shutdown();
}
