//! Deferred execution: the FIFO of the deterministic mode, the PASSIVE worker pool of the
//! threaded mode, and the per-thread ("per-CPU") DPC queues.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};

use wv_hal::{Dpc, KArc, WorkItem};

use crate::irql;
use crate::platform::Shared;
use crate::sync::{Arc, Condvar, Mutex, Weak};

/// Something queued for later.
pub(crate) enum Task {
    /// A driver work item (PASSIVE_LEVEL).
    Work(wv_hal::KArc<dyn WorkItem>),
    /// A DPC (DISPATCH_LEVEL); only the deterministic mode puts DPCs in the FIFO.
    Dpc(KArc<dyn Dpc>),
    /// Platform work at PASSIVE_LEVEL, such as dropping a file reference whose last release
    /// runs the driver's `file_close`.
    Internal(&'static str, Box<dyn FnOnce() + Send>),
}

/// The threaded mode's system worker pool.
pub(crate) struct Pool {
    state: Mutex<PoolState>,
    work: Condvar,
    idle: Condvar,
}

#[derive(Default)]
struct PoolState {
    tasks: VecDeque<Task>,
    running: usize,
    shutdown: bool,
}

impl Pool {
    pub(crate) fn new() -> Arc<Pool> {
        Arc::new(Pool {
            state: Mutex::new(PoolState::default()),
            work: Condvar::new(),
            idle: Condvar::new(),
        })
    }

    /// Starts `workers` threads that run tasks for `shared` until the pool shuts down.
    pub(crate) fn start(self: &Arc<Self>, workers: usize, shared: Weak<Shared>) {
        for n in 0..workers.max(1) {
            let pool = Arc::clone(self);
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("wv-host-worker-{n}"))
                .spawn(move || pool.worker(&shared))
                .expect("spawn a wv-host worker thread");
        }
    }

    pub(crate) fn push(&self, task: Task) {
        self.state.lock().tasks.push_back(task);
        self.work.notify_one();
    }

    /// Blocks until no task is queued or running.
    pub(crate) fn wait_idle(&self) {
        let mut state = self.state.lock();
        while !(state.tasks.is_empty() && state.running == 0) {
            self.idle.wait(&mut state);
        }
    }

    /// Tells the workers to exit once the queue is empty.
    pub(crate) fn shutdown(&self) {
        self.state.lock().shutdown = true;
        self.work.notify_all();
    }

    fn worker(&self, shared: &Weak<Shared>) {
        loop {
            let task = {
                let mut state = self.state.lock();
                loop {
                    if let Some(task) = state.tasks.pop_front() {
                        state.running += 1;
                        break task;
                    }
                    if state.shutdown {
                        return;
                    }
                    self.work.wait(&mut state);
                }
            };
            if let Some(shared) = shared.upgrade() {
                let outcome = catch_unwind(AssertUnwindSafe(|| shared.run_task(task)));
                if let Err(payload) = outcome {
                    irql::reset();
                    let message = panic_message(&*payload);
                    // Verifier violations are already in the log; record other panics.
                    if !message.starts_with("verifier:") {
                        shared
                            .verifier
                            .report(format!("panic on a worker thread: {message}"));
                    }
                }
            }
            let mut state = self.state.lock();
            state.running -= 1;
            if state.tasks.is_empty() && state.running == 0 {
                self.idle.notify_all();
            }
        }
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_owned()
    }
}

/// A DPC queued on a thread, with the platform that runs it.
type ThreadDpc = (Arc<Shared>, KArc<dyn Dpc>);

thread_local! {
    /// DPCs queued on this thread ("processor") in threaded mode, run when its IRQL drops
    /// below DISPATCH_LEVEL.
    static DPCS: RefCell<VecDeque<ThreadDpc>> = const { RefCell::new(VecDeque::new()) };
    static DRAINING: Cell<bool> = const { Cell::new(false) };
}

/// Queues a DPC on the current thread.
pub(crate) fn push_thread_dpc(shared: Arc<Shared>, dpc: KArc<dyn Dpc>) {
    DPCS.with(|q| q.borrow_mut().push_back((shared, dpc)));
}

/// Runs this thread's queued DPCs if its IRQL is below DISPATCH_LEVEL, the way the DISPATCH
/// software interrupt fires when a processor lowers its IRQL.
pub(crate) fn drain_thread_dpcs() {
    let state = irql::get();
    if state.irql >= wv_hal::Irql::Dispatch || state.locks != 0 || DRAINING.with(Cell::get) {
        return;
    }
    DRAINING.with(|d| d.set(true));
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            DRAINING.with(|d| d.set(false));
        }
    }
    let _clear = Clear;
    while let Some((shared, dpc)) = DPCS.with(|q| q.borrow_mut().pop_front()) {
        shared.run_dpc(&dpc);
    }
}
