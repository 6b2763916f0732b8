//! The threaded mode: per-thread DPCs, the worker pool, cross-thread completion.

mod common;

use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;

use common::{HANG_GUARD, PARK, manager, manager_with};
use wv_abi::NtStatus;
use wv_hal::{DeviceModelPlatform, InterruptService};
use wv_hal::{Dpc, Irql, KArc, Platform, RequestQueue, SpinLock, WorkItem};
use wv_host::HostPlatform;

struct SeeThread {
    platform: HostPlatform,
    seen: Mutex<Vec<(ThreadId, Irql)>>,
}

impl Dpc for SeeThread {
    fn run(&self) {
        self.seen
            .lock()
            .unwrap()
            .push((std::thread::current().id(), self.platform.irql()));
    }
}

/// A DPC that records where it ran, and the same DPC as the platform queues it.
fn see_thread(p: &HostPlatform) -> (KArc<SeeThread>, KArc<dyn Dpc>) {
    let see = KArc::new(SeeThread {
        platform: p.clone(),
        seen: Mutex::new(Vec::new()),
    });
    let dpc: KArc<dyn Dpc> = see.clone().into();
    (see, dpc)
}

struct QueueIt(HostPlatform, KArc<dyn Dpc>);
impl InterruptService for QueueIt {
    fn service(&self) -> bool {
        assert!(self.0.queue_dpc(&self.1));
        true
    }
}

#[test]
fn a_dpc_queued_by_an_isr_runs_on_the_interrupted_thread_when_the_isr_returns() {
    let p = HostPlatform::threaded(2);
    let (see, dpc) = see_thread(&p);
    assert!(p.interrupt(&QueueIt(p.clone(), dpc)));
    assert_eq!(
        *see.seen.lock().unwrap(),
        vec![(std::thread::current().id(), Irql::Dispatch)]
    );
    p.shutdown();
}

#[test]
fn a_dpc_queued_under_a_spin_lock_runs_when_the_last_lock_is_released() {
    let p = HostPlatform::threaded(1);
    let (see, dpc) = see_thread(&p);
    let a = p.spin_lock(());
    let b = p.spin_lock(());
    {
        let _ga = a.lock();
        {
            let _gb = b.lock();
            assert!(p.queue_dpc(&dpc));
            assert!(!p.queue_dpc(&dpc), "queued and not started");
        }
        assert!(
            see.seen.lock().unwrap().is_empty(),
            "still at DISPATCH_LEVEL"
        );
    }
    assert_eq!(
        *see.seen.lock().unwrap(),
        vec![(std::thread::current().id(), Irql::Dispatch)]
    );
    assert_eq!(p.irql(), Irql::Passive);
    p.shutdown();
}

/// (arrived, met everyone, threads seen) and its condition variable.
type RendezvousState = Arc<(Mutex<(usize, usize, Vec<ThreadId>)>, Condvar)>;

/// Each item waits until all of them are running at once: only a pool of at least `n`
/// parallel workers gets them all through.
struct Rendezvous {
    platform: HostPlatform,
    n: usize,
    state: RendezvousState,
}

impl WorkItem for Rendezvous {
    fn run(&self) {
        assert_eq!(self.platform.irql(), Irql::Passive);
        let (lock, cv) = &*self.state;
        let mut s = lock.lock().unwrap();
        s.0 += 1;
        s.2.push(std::thread::current().id());
        cv.notify_all();
        let (mut s, _) = cv
            .wait_timeout_while(s, HANG_GUARD, |s| s.0 < self.n)
            .unwrap();
        if s.0 >= self.n {
            s.1 += 1; // met everyone
        }
    }
}

#[test]
fn work_items_run_in_parallel_on_the_pool() {
    let n = 4;
    let p = HostPlatform::threaded(n);
    let state = Arc::new((Mutex::new((0, 0, Vec::new())), Condvar::new()));
    for _ in 0..n {
        p.queue_work(
            wv_hal::KArc::new(Rendezvous {
                platform: p.clone(),
                n,
                state: Arc::clone(&state),
            })
            .into(),
        )
        .unwrap();
    }
    p.run_until_idle();
    let s = state.0.lock().unwrap();
    assert_eq!(s.1, n, "every item saw all {n} running at once");
    let mut threads = s.2.clone();
    threads.sort_by_key(|t| format!("{t:?}"));
    threads.dedup();
    assert_eq!(threads.len(), n);
    assert!(!threads.contains(&std::thread::current().id()));
    drop(s);
    p.shutdown();
}

struct CompleteAll {
    platform: HostPlatform,
    queue: Arc<wv_host::HostQueue>,
    seen: Mutex<Vec<ThreadId>>,
}

impl Dpc for CompleteAll {
    fn run(&self) {
        assert_eq!(self.platform.irql(), Irql::Dispatch);
        self.seen.lock().unwrap().push(std::thread::current().id());
        while let Some(r) = self.queue.retrieve_next() {
            wv_hal::IoRequest::complete(r, NtStatus::SUCCESS, 0);
        }
    }
}

#[test]
fn interrupt_to_completion_happens_on_the_interrupting_thread_and_wakes_the_waiter() {
    let p = HostPlatform::threaded(2);
    let queue = Arc::new(p.create_queue().unwrap());
    let q = Arc::downgrade(&queue);
    let mgr = manager_with(&p, move |_, _, request| {
        q.upgrade().unwrap().park(request).map_err(|_| ()).unwrap();
    });
    let file = mgr.open().unwrap();
    let io = file.device_io_control(1, &[], 0);
    assert!(io.pending());
    let dpc = KArc::new(CompleteAll {
        platform: p.clone(),
        queue: Arc::clone(&queue),
        seen: Mutex::new(Vec::new()),
    });
    let waiter = std::thread::spawn(move || io.wait_timeout(HANG_GUARD));
    let device = {
        let p = p.clone();
        let dpc: KArc<dyn Dpc> = dpc.clone().into();
        std::thread::spawn(move || {
            p.interrupt(&QueueIt(p.clone(), dpc));
            std::thread::current().id()
        })
    };
    let device_thread = device.join().unwrap();
    let status = waiter.join().unwrap().expect("completed");
    assert_eq!(status.status, 0);
    assert_eq!(*dpc.seen.lock().unwrap(), vec![device_thread]);
    drop(file);
    drop(queue);
    drop(dpc);
}

#[test]
fn cancel_racing_fire_completes_every_request_exactly_once() {
    let p = HostPlatform::threaded(2);
    let mgr = manager(&p);
    let file = Arc::new(mgr.open().unwrap());
    for _ in 0..50 {
        let ios: Vec<_> = (0..8)
            .map(|_| file.device_io_control(PARK, &[], 0))
            .collect();
        let ios = Arc::new(ios);
        let canceller = {
            let (file, ios) = (Arc::clone(&file), Arc::clone(&ios));
            std::thread::spawn(move || ios.iter().filter(|io| file.cancel_io_ex(io)).count())
        };
        let _ = file.device_io_control(common::FIRE, &[], 0);
        let cancelled = canceller.join().unwrap();
        let mut n_cancelled = 0;
        for io in ios.iter() {
            let s = io.wait_timeout(HANG_GUARD).expect("completed");
            if s.status == NtStatus::CANCELLED.0 {
                n_cancelled += 1;
            } else {
                assert_eq!(s.status, 0);
            }
        }
        assert_eq!(n_cancelled, cancelled);
    }
    assert!(p.verifier().violations().is_empty());
    drop(Arc::try_unwrap(file).unwrap());
}

#[test]
fn close_runs_on_a_worker_after_the_last_irp_completes() {
    let p = HostPlatform::threaded(1);
    let held = Arc::new(Mutex::new(None));
    let h = Arc::clone(&held);
    let mgr = manager_with(&p, move |_, _, request| *h.lock().unwrap() = Some(request));
    let file = mgr.open().unwrap();
    let io = file.device_io_control(1, &[], 0);
    drop(file);
    p.run_until_idle();
    assert_eq!(mgr.driver().log(), vec!["create 1", "cleanup 1"]);
    wv_hal::IoRequest::complete(held.lock().unwrap().take().unwrap(), NtStatus::SUCCESS, 0);
    p.run_until_idle();
    assert_eq!(mgr.driver().log(), vec!["create 1", "cleanup 1", "close 1"]);
    assert_eq!(io.wait().status, 0);
}
