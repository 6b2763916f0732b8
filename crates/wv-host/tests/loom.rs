//! loom models of the host model's two lock-free hand-offs on the event path: the IRP wait word
//! (`wv_host::wait_word`, which replaced a mutex and a condition variable per IRP) and a DPC's
//! inserted flag (`wv_hal::DpcInserted`, which replaced a locked set of queued DPCs). With
//! `--cfg loom` both are built on loom's atomics (and the wait word on loom's mutex and
//! parking), so these models run the shipped code in every interleaving up to the preemption
//! bound, with loom's model of relaxed and acquire/release atomics.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p wv-host --test loom --release`.
//!
//! What each model shows, and what fails with a weaker ordering (checked by hand when the
//! models were written; see docs/VERIFICATION.md):
//! * `wait_word_*`: a waiter that returns from `wait` sees what the completer wrote before
//!   `set_done` (a loom `UnsafeCell`, so a missing happens-before is a reported data race),
//!   and no waiter sleeps for ever (loom reports a deadlock). With the completer's swap
//!   `Relaxed`, or the waiter's load of the word `Relaxed`, loom reports the race on the
//!   result.
//! * `dpc_inserted_*`: an event written before a `queue_dpc` that found the DPC already queued
//!   is seen by the pending run of that DPC. With either swap of `DpcInserted` `Relaxed` the
//!   run can miss it, and the model's final check fails.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use wv_hal::DpcInserted;
use wv_host::loom_model::model;
use wv_host::wait_word::{WaitWord, Waited};

/// Runs `f` on a new model thread with its own clone of `shared`.
fn spawn_on<T, R>(
    shared: &Arc<T>,
    f: impl FnOnce(Arc<T>) -> R + 'static,
) -> loom::thread::JoinHandle<R>
where
    T: 'static,
    R: 'static,
{
    let shared = Arc::clone(shared);
    loom::thread::spawn(move || f(shared))
}

/// An IRP as far as the wait word is concerned: a result written once by the completer, read
/// by the waiters after their wait.
struct Request {
    word: WaitWord,
    result: UnsafeCell<u32>,
}

// SAFETY: (test only) the cell is written by the completer before `set_done` and read by
// waiters after `wait` returned `Done`; loom checks that this happens-before holds.
unsafe impl Sync for Request {}

impl Request {
    fn new() -> Arc<Request> {
        Arc::new(Request {
            word: WaitWord::new(),
            result: UnsafeCell::new(0),
        })
    }

    fn complete(&self, status: u32) {
        // SAFETY: only the completer writes, and only before `set_done`.
        self.result.with_mut(|r| unsafe { *r = status });
        self.word.set_done();
    }

    fn wait(&self) -> u32 {
        assert!(matches!(self.word.wait(None), Waited::Done { .. }));
        // SAFETY: `wait` returned Done, so `complete`'s write happened before (loom checks).
        self.result.with(|r| unsafe { *r })
    }
}

// The waiters are spawned threads and the completer is the main thread, which joins them:
// loom's `unpark` of a thread blocked in `join` (a late wake-up of a waiter that had already
// returned) trips loom's own bookkeeping, so no waiter ever joins.

#[test]
fn wait_word_one_waiter_sees_the_result_and_is_woken() {
    model("wait_word_one_waiter", 3, || {
        let req = Request::new();
        let waiter = spawn_on(&req, |req| req.wait());
        req.complete(0xC000_0120);
        assert_eq!(waiter.join().unwrap(), 0xC000_0120);
    });
}

#[test]
fn wait_word_two_waiters_are_both_woken() {
    model("wait_word_two_waiters", 2, || {
        let req = Request::new();
        let waiters: Vec<_> = (0..2).map(|_| spawn_on(&req, |req| req.wait())).collect();
        req.complete(7);
        for w in waiters {
            assert_eq!(w.join().unwrap(), 7);
        }
    });
}

/// A device whose events a DPC handles: each producer writes its event, then queues the DPC;
/// whoever queued it runs it (the host model's threaded mode runs a DPC on the queueing
/// thread), and a run handles every event it sees.
struct Device {
    dpc: DpcInserted,
    events: [AtomicBool; 2],
    handled: [AtomicBool; 2],
}

impl Device {
    fn new() -> Arc<Device> {
        Arc::new(Device {
            dpc: DpcInserted::new(),
            events: [AtomicBool::new(false), AtomicBool::new(false)],
            handled: [AtomicBool::new(false), AtomicBool::new(false)],
        })
    }

    /// Raises event `i`: writes it (relaxed: the DPC flag must carry it), queues the DPC and,
    /// when this call queued it, runs it.
    fn raise(&self, i: usize) {
        self.events[i].store(true, Ordering::Relaxed);
        if self.dpc.insert() {
            self.run_dpc();
        }
    }

    fn run_dpc(&self) {
        self.dpc.started();
        for (event, handled) in self.events.iter().zip(&self.handled) {
            if event.load(Ordering::Relaxed) {
                handled.store(true, Ordering::Relaxed);
            }
        }
    }
}

#[test]
fn dpc_inserted_no_event_is_missed() {
    model("dpc_inserted_two_producers", 3, || {
        let dev = Device::new();
        let other = spawn_on(&dev, |dev| dev.raise(1));
        dev.raise(0);
        other.join().unwrap();
        for i in 0..2 {
            assert!(
                dev.handled[i].load(Ordering::Relaxed),
                "event {i} was written before a queue_dpc that found the DPC queued, \
                 and the pending run missed it"
            );
        }
    });
}

#[test]
fn dpc_inserted_queue_again_after_start() {
    // A DPC that has started may be queued again: a producer racing the start either finds
    // it still queued (and the run sees its event) or queues it afresh.
    model("dpc_inserted_requeue", 3, || {
        let dev = Device::new();
        assert!(dev.dpc.insert());
        let runner = spawn_on(&dev, |dev| dev.run_dpc());
        dev.raise(1);
        runner.join().unwrap();
        assert!(dev.handled[1].load(Ordering::Relaxed));
    });
}
