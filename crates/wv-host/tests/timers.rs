//! Device-model timers (`DeviceModelPlatform::set_timer`): on the injected clock in the
//! deterministic mode, on the real clock and a timer thread in the threaded mode.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wv_hal::{DeviceModelPlatform, Dpc, Irql, KArc, Platform, SpinLock, WorkItem};
use wv_host::HostPlatform;

type Seen = Arc<Mutex<Vec<(&'static str, u64, Irql)>>>;

/// Records the clock and the IRQL each time it runs.
struct Stamp {
    platform: HostPlatform,
    name: &'static str,
    seen: Seen,
}

impl Dpc for Stamp {
    fn run(&self) {
        self.seen
            .lock()
            .unwrap()
            .push((self.name, self.platform.now_ns(), self.platform.irql()));
    }
}

fn stamp(p: &HostPlatform, name: &'static str, seen: &Seen) -> KArc<dyn Dpc> {
    KArc::new(Stamp {
        platform: p.clone(),
        name,
        seen: seen.clone(),
    })
    .into()
}

#[test]
fn deterministic_timers_fire_when_the_clock_reaches_them_in_due_order() {
    let p = HostPlatform::deterministic();
    let seen: Seen = Arc::default();
    let a = stamp(&p, "a", &seen);
    let b = stamp(&p, "b", &seen);
    p.set_timer(&a, 2_000);
    p.set_timer(&b, 1_000);
    assert_eq!(p.pending_timers(), 2);
    assert_eq!(p.next_timer_ns(), Some(1_000));
    // Not due yet: nothing queued, nothing runs.
    p.advance_clock(999);
    p.run_until_idle();
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(p.queued(), 0);
    // Both due: queued earliest first, run at DISPATCH_LEVEL by run_until_idle.
    p.advance_clock(5_000);
    assert_eq!(p.queued(), 2);
    assert!(seen.lock().unwrap().is_empty(), "queued, not run");
    p.run_until_idle();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![("b", 5_999, Irql::Dispatch), ("a", 5_999, Irql::Dispatch)]
    );
    assert_eq!(p.pending_timers(), 0);
    p.shutdown();
}

#[test]
fn setting_again_replaces_the_due_time_and_cancel_removes_it() {
    let p = HostPlatform::deterministic();
    let seen: Seen = Arc::default();
    let a = stamp(&p, "a", &seen);
    p.set_timer(&a, 100);
    p.set_timer(&a, 300);
    assert_eq!(p.pending_timers(), 1, "one timer per DPC object");
    p.advance_clock(200);
    p.run_until_idle();
    assert!(
        seen.lock().unwrap().is_empty(),
        "the first due time is gone"
    );
    assert!(p.run_next_timer());
    assert_eq!(*seen.lock().unwrap(), vec![("a", 300, Irql::Dispatch)]);
    assert!(!p.run_next_timer(), "one-shot");
    p.set_timer(&a, 1_000);
    assert!(p.cancel_timer(&a));
    assert!(!p.cancel_timer(&a));
    p.advance_clock(10_000);
    p.run_until_idle();
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "a cancelled timer never fires"
    );
    // A due time in the past queues the DPC at once (it still runs only when asked).
    p.set_timer(&a, 5);
    assert_eq!(p.queued(), 1);
    p.run_until_idle();
    assert_eq!(seen.lock().unwrap().len(), 2);
    p.shutdown();
}

#[test]
fn threaded_timers_fire_on_the_real_clock_on_the_timer_thread() {
    let p = HostPlatform::threaded(1);
    let seen: Seen = Arc::default();
    let a = stamp(&p, "a", &seen);
    let b = stamp(&p, "b", &seen);
    let t0 = Instant::now();
    let now = p.now_ns();
    p.set_timer(&a, now + 20_000_000);
    p.set_timer(&b, now + 5_000_000);
    let c = stamp(&p, "c", &seen);
    p.set_timer(&c, now + 1_000_000);
    assert!(p.cancel_timer(&c));
    while seen.lock().unwrap().len() < 2 {
        assert!(t0.elapsed() < Duration::from_secs(10), "timers never fired");
        std::thread::sleep(Duration::from_millis(1));
    }
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.iter().map(|s| s.0).collect::<Vec<_>>(), vec!["b", "a"]);
    assert!(got[0].1 >= now + 5_000_000, "never early");
    assert!(got[1].1 >= now + 20_000_000, "never early");
    assert!(got.iter().all(|s| s.2 == Irql::Dispatch));
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(
        seen.lock().unwrap().len(),
        2,
        "the cancelled timer never fired"
    );
    p.shutdown();
}

/// Records the thread each run is on, and how many runs the work item had seen when it asked.
struct OnThread(Mutex<Vec<std::thread::ThreadId>>);

impl Dpc for OnThread {
    fn run(&self) {
        self.0.lock().unwrap().push(std::thread::current().id());
    }
}

/// A work item that sets a timer for a time already passed, twice: once followed by a spin
/// lock's release, once at its end. It records its thread and the runs the DPC had made
/// right after each `set_timer` and right after the release.
struct SetsAPassedTimer {
    platform: HostPlatform,
    runs: KArc<OnThread>,
    timer: KArc<dyn Dpc>,
    saw: Mutex<Option<(std::thread::ThreadId, [usize; 3])>>,
}

impl WorkItem for SetsAPassedTimer {
    fn run(&self) {
        let runs = || self.runs.0.lock().unwrap().len();
        self.platform.set_timer(&self.timer, self.platform.now_ns());
        let after_set = runs();
        drop(self.platform.spin_lock(()).lock());
        let after_release = runs();
        self.platform.set_timer(&self.timer, self.platform.now_ns());
        let after_second_set = runs();
        *self.saw.lock().unwrap() = Some((
            std::thread::current().id(),
            [after_set, after_release, after_second_set],
        ));
    }
}

/// Threaded mode: a timer a driver callback sets for a time already passed fires on that
/// callback's own thread (the processor whose clock expired it), never inside `set_timer`, at
/// the thread's next IRQL drop (here a spin lock's release, then the callback's end); it never
/// reaches the timer thread's table. Set from a thread outside any callback it still fires on
/// the timer thread.
#[test]
fn threaded_a_passed_timer_a_callback_sets_fires_on_its_thread_after_the_call() {
    let p = HostPlatform::threaded(1);
    let runs = KArc::new(OnThread(Mutex::new(Vec::new())));
    let timer: KArc<dyn Dpc> = runs.clone().into();
    let work = KArc::new(SetsAPassedTimer {
        platform: p.clone(),
        runs: runs.clone(),
        timer: timer.clone(),
        saw: Mutex::new(None),
    });
    p.queue_work(work.clone().into()).unwrap();
    p.run_until_idle();
    let saw = *work.saw.lock().unwrap();
    let (worker, counts) = saw.expect("the work item ran");
    assert_eq!(
        counts,
        [0, 1, 1],
        "not inside set_timer; at the release; the second one after the callback"
    );
    assert_eq!(*runs.0.lock().unwrap(), vec![worker, worker]);
    assert_eq!(p.pending_timers(), 0, "nothing went to the timer thread");

    p.set_timer(&timer, p.now_ns());
    let t0 = Instant::now();
    while runs.0.lock().unwrap().len() < 3 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the timer never fired"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let third = runs.0.lock().unwrap()[2];
    assert_ne!(
        third,
        std::thread::current().id(),
        "not inside the test's call"
    );
    assert_ne!(third, worker, "on the timer thread");
    p.shutdown();
}
