//! [`HostPlatform`]: the host model's implementation of [`wv_hal::Platform`].

use std::collections::{HashSet, VecDeque};
use std::time::Instant;

use wv_abi::NtStatus;
use wv_hal::InterruptService;
use wv_hal::{DeviceModelPlatform, Dpc, Irql, KArc, Platform, WorkItem};

use crate::deferred::{self, Pool, Task};
use crate::event::HostEvent;
use crate::irql;
use crate::low_resources;
use crate::queue::HostQueue;
use crate::request::HostRequest;
use crate::spin_lock::HostSpinLock;
use crate::sync::{Arc, AtomicU64, Mutex, Ordering};
use crate::timer::Timers;
use crate::verifier::Verifier;

/// The host model of the kernel services the driver core uses.
///
/// Two modes, chosen at construction:
/// * [`HostPlatform::deterministic`]: one thread. Work items and DPCs wait in one FIFO until
///   the test calls [`HostPlatform::run_until_idle`] or [`HostPlatform::run_one`]; the clock
///   only moves with [`HostPlatform::advance_clock`], which also queues the DPCs of the device
///   models' timers that came due. Unit tests get exact interleavings.
/// * [`HostPlatform::threaded`]: a pool of PASSIVE_LEVEL worker threads runs work items; a DPC
///   runs on the thread that queued it as soon as that thread's IRQL drops below
///   DISPATCH_LEVEL (like a DPC targeted at the current processor), so interrupt → ISR → DPC →
///   completion adds no thread hop. The clock is the real monotonic clock; a timer thread
///   queues (and so runs) the DPCs of timers as they come due, except a timer a driver
///   callback sets for a time already passed, whose DPC runs on that callback's thread once it
///   lowers its IRQL (see `set_timer`), again without a thread hop.
///
/// Cloning is cheap (an `Arc`); clones are the same platform.
#[derive(Clone)]
pub struct HostPlatform {
    pub(crate) shared: Arc<Shared>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Deterministic,
    Threaded,
}

/// The state behind every clone of a [`HostPlatform`].
pub(crate) struct Shared {
    pub(crate) verifier: Verifier,
    mode: Mode,
    clock_ns: AtomicU64,
    start: Instant,
    fifo: Mutex<VecDeque<Task>>,
    pool: Option<Arc<Pool>>,
    /// Queued, not started DPCs that carry no inserted flag of their own, by object address
    /// (`KDPC.Inserted`).
    dpc_queued: Mutex<HashSet<usize>>,
    /// The device models' pending timers.
    timers: Arc<Timers>,
    next_id: AtomicU64,
    /// `create_queue` calls still to let through before failing `fail_queues` of them.
    skip_queues: AtomicU64,
    /// `create_queue` calls still to fail (resource exhaustion injected by tests).
    fail_queues: AtomicU64,
    /// `queue_work` calls still to fail.
    fail_work: AtomicU64,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.timers.shutdown();
        if let Some(pool) = &self.pool {
            pool.shutdown();
        }
    }
}

fn dpc_key(dpc: &KArc<dyn Dpc>) -> usize {
    KArc::as_ptr(dpc).cast::<()>() as usize
}

impl Shared {
    /// A fresh id for an IRP, queue or file (never 0), shown in messages.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn is_deterministic(&self) -> bool {
        self.mode == Mode::Deterministic
    }

    pub(crate) fn push(&self, task: Task) {
        match &self.pool {
            Some(pool) => pool.push(task),
            None => self.fifo.lock().push_back(task),
        }
    }

    pub(crate) fn run_task(self: &Arc<Self>, task: Task) {
        match task {
            Task::Work(work) => {
                irql::run_callback(&self.verifier, "work item", Irql::Passive, || work.run());
            }
            Task::Dpc(dpc) => self.run_dpc(&dpc),
            Task::Internal(name, f) => irql::run_callback(&self.verifier, name, Irql::Passive, f),
        }
    }

    /// `KeInsertQueueDpc`: queues `dpc` unless it is queued already (see
    /// [`DeviceModelPlatform::queue_dpc`]).
    pub(crate) fn queue_dpc(self: &Arc<Self>, dpc: &KArc<dyn Dpc>) -> bool {
        if !self.insert_dpc(dpc) {
            return false;
        }
        crate::probe::stamp(1);
        if self.is_deterministic() {
            self.push(Task::Dpc(KArc::clone(dpc)));
        } else {
            deferred::push_thread_dpc(Arc::clone(self), KArc::clone(dpc));
            deferred::drain_thread_dpcs();
        }
        true
    }

    /// `KeInsertQueueDpc`'s test-and-set: whether this call queues `dpc` (it was not queued).
    fn insert_dpc(&self, dpc: &KArc<dyn Dpc>) -> bool {
        match dpc.inserted_flag() {
            // A queuer that finds the DPC still queued has its earlier writes seen by that
            // DPC's run (`DpcInserted`'s orderings).
            Some(inserted) => inserted.insert(),
            None => self.dpc_queued.lock().insert(dpc_key(dpc)),
        }
    }

    /// Threaded mode: queues `dpc` on the current thread without running it now. It runs when
    /// the thread next lowers its IRQL below DISPATCH_LEVEL: a spin lock's release, the end of
    /// the driver callback the thread is in, or a wait (see `HostPlatform::set_timer`).
    fn queue_dpc_on_next_drop(self: &Arc<Self>, dpc: &KArc<dyn Dpc>) {
        if self.insert_dpc(dpc) {
            crate::probe::stamp(1);
            deferred::push_thread_dpc(Arc::clone(self), KArc::clone(dpc));
        }
    }

    /// Deterministic mode: queues the DPCs of the timers due at the injected clock.
    fn fire_due_timers(self: &Arc<Self>) {
        let now = self.clock_ns.load(Ordering::SeqCst);
        for dpc in self.timers.take_due(now) {
            self.queue_dpc(&dpc);
        }
    }

    pub(crate) fn run_dpc(&self, dpc: &KArc<dyn Dpc>) {
        // Started: from here on the DPC may be queued again.
        match dpc.inserted_flag() {
            Some(inserted) => inserted.started(),
            None => {
                self.dpc_queued.lock().remove(&dpc_key(dpc));
            }
        }
        crate::probe::stamp(2);
        irql::run_callback(&self.verifier, "DPC", Irql::Dispatch, || dpc.run());
        crate::probe::end_chain();
    }

    /// Deterministic mode: runs the oldest queued task. Threaded mode: does nothing.
    pub(crate) fn run_one(self: &Arc<Self>) -> bool {
        let task = self.fifo.lock().pop_front();
        match task {
            Some(task) => {
                self.run_task(task);
                true
            }
            None => false,
        }
    }

    pub(crate) fn run_until_idle(self: &Arc<Self>) {
        match &self.pool {
            Some(pool) => pool.wait_idle(),
            None => while self.run_one() {},
        }
    }
}

impl HostPlatform {
    /// A single-threaded platform: deferred work runs only inside
    /// [`HostPlatform::run_until_idle`] / [`HostPlatform::run_one`], in FIFO order, and the
    /// clock starts at 0 and moves only with [`HostPlatform::advance_clock`].
    pub fn deterministic() -> Self {
        Self::new(Mode::Deterministic, None)
    }

    /// A platform with `workers` PASSIVE_LEVEL worker threads (at least one) for work items,
    /// per-thread DPCs and the real monotonic clock.
    pub fn threaded(workers: usize) -> Self {
        let pool = Pool::new();
        let platform = Self::new(Mode::Threaded, Some(Arc::clone(&pool)));
        pool.start(workers, Arc::downgrade(&platform.shared));
        platform
    }

    fn new(mode: Mode, pool: Option<Arc<Pool>>) -> Self {
        HostPlatform {
            shared: Arc::new(Shared {
                verifier: Verifier::default(),
                mode,
                clock_ns: AtomicU64::new(0),
                start: Instant::now(),
                fifo: Mutex::new(VecDeque::new()),
                pool,
                dpc_queued: Mutex::new(HashSet::new()),
                timers: Arc::new(Timers::default()),
                next_id: AtomicU64::new(1),
                skip_queues: AtomicU64::new(0),
                fail_queues: AtomicU64::new(0),
                fail_work: AtomicU64::new(0),
            }),
        }
    }

    /// Whether this is the single-threaded mode.
    pub fn is_deterministic(&self) -> bool {
        self.shared.is_deterministic()
    }

    /// The verifier of this platform: its violation log and live-object counters.
    pub fn verifier(&self) -> &Verifier {
        &self.shared.verifier
    }

    /// Deterministic mode: runs queued work items and DPCs, oldest first, until none is left
    /// (including those queued while running). Threaded mode: waits until the worker pool has
    /// nothing queued or running.
    pub fn run_until_idle(&self) {
        self.shared.run_until_idle();
    }

    /// Deterministic mode: runs the oldest queued work item or DPC; returns whether there was
    /// one. Threaded mode: returns `false` (the workers run everything).
    pub fn run_one(&self) -> bool {
        self.shared.run_one()
    }

    /// How many work items and DPCs wait in the deterministic FIFO (0 in threaded mode).
    pub fn queued(&self) -> usize {
        self.shared.fifo.lock().len()
    }

    /// Moves the injected clock forward and queues the DPCs of the device models' timers that
    /// are now due (earliest first); [`HostPlatform::run_until_idle`] runs them.
    ///
    /// # Panics
    /// In threaded mode, whose clock is the real one.
    pub fn advance_clock(&self, ns: u64) {
        assert!(
            self.is_deterministic(),
            "advance_clock: the threaded mode uses the real clock"
        );
        self.shared.clock_ns.fetch_add(ns, Ordering::SeqCst);
        self.shared.fire_due_timers();
    }

    /// The due time of the earliest pending device-model timer, on the platform's clock.
    pub fn next_timer_ns(&self) -> Option<u64> {
        self.shared.timers.next_due()
    }

    /// How many device-model timers are pending.
    pub fn pending_timers(&self) -> usize {
        self.shared.timers.pending()
    }

    /// Deterministic mode: moves the clock to the earliest pending timer (if it is in the
    /// future), queues its DPC and every other one due by then, and runs the deferred work
    /// until idle. Returns `false` when no timer was pending.
    ///
    /// # Panics
    /// In threaded mode.
    pub fn run_next_timer(&self) -> bool {
        let Some(due) = self.next_timer_ns() else {
            return false;
        };
        self.advance_clock(due.saturating_sub(self.now_ns()));
        self.run_until_idle();
        true
    }

    /// Lets the next `skip` `create_queue` calls succeed, then makes `count` of them fail with
    /// STATUS_INSUFFICIENT_RESOURCES, as `WdfIoQueueCreate` does when pool is exhausted, so
    /// tests reach the driver's failure paths (including "the second of two queues").
    pub fn fail_queues(&self, skip: u64, count: u64) {
        self.shared.skip_queues.store(skip, Ordering::SeqCst);
        self.shared.fail_queues.store(count, Ordering::SeqCst);
    }

    /// Makes the next `count` `queue_work` calls fail with STATUS_INSUFFICIENT_RESOURCES, as
    /// `IoAllocateWorkItem` does when pool is exhausted.
    pub fn fail_next_work_items(&self, count: u64) {
        self.shared.fail_work.store(count, Ordering::SeqCst);
    }

    /// The teardown check (driver unload under Driver Verifier): settles deferred work, then
    /// reports every request, queue and file still alive and every leak a registered check
    /// (e.g. `FakeVerbs`) finds. Runs once; [`crate::IoManager`]'s `Drop` calls it too.
    ///
    /// # Panics
    /// If any violation was recorded during the run (including ones that already panicked a
    /// worker thread) or is found now; the message lists them all.
    pub fn shutdown(&self) {
        self.run_until_idle();
        if let Some(all) = self.shared.verifier.teardown() {
            panic!("{}", Verifier::summary(&all));
        }
    }
}

impl std::fmt::Debug for HostPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostPlatform")
            .field("mode", &self.shared.mode)
            .field("verifier", &self.shared.verifier)
            .finish()
    }
}

impl Platform for HostPlatform {
    type Request = HostRequest;
    type Queue = HostQueue;
    type SpinLock<T: Send> = HostSpinLock<T>;
    type Event = HostEvent;

    fn create_queue(&self) -> Result<HostQueue, NtStatus> {
        let _host = low_resources::host_scope();
        if irql::current() > Irql::Dispatch {
            self.shared.verifier.fail("verifier: create_queue at DIRQL");
        }
        if !take_one(&self.shared.skip_queues) && take_one(&self.shared.fail_queues) {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        Ok(HostQueue::new(Arc::clone(&self.shared)))
    }

    fn spin_lock<T: Send>(&self, value: T) -> HostSpinLock<T> {
        let _host = low_resources::host_scope();
        HostSpinLock::new(self.shared.verifier.clone(), value)
    }

    fn event(&self) -> Result<HostEvent, NtStatus> {
        let _host = low_resources::host_scope();
        Ok(HostEvent::new(Arc::clone(&self.shared)))
    }

    fn queue_work(&self, work: wv_hal::KArc<dyn WorkItem>) -> Result<(), NtStatus> {
        let _host = low_resources::host_scope();
        self.irql_at_most("queue_work", Irql::Dispatch);
        if take_one(&self.shared.fail_work) {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        self.shared.push(Task::Work(work));
        Ok(())
    }

    fn irql(&self) -> Irql {
        irql::current()
    }

    fn paged_code(&self) {
        let _host = low_resources::host_scope();
        self.irql_at_most("PAGED_CODE", Irql::Apc);
    }

    fn now_ns(&self) -> u64 {
        match self.shared.mode {
            Mode::Deterministic => self.shared.clock_ns.load(Ordering::SeqCst),
            Mode::Threaded => {
                u64::try_from(self.shared.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
            }
        }
    }
}

impl HostPlatform {
    /// A fake device's `state`, shared, with a teardown check that reports what `leaks` finds
    /// in it then (its objects still alive).
    pub(crate) fn leak_checked<S: Send + 'static>(
        &self,
        state: S,
        leaks: fn(&S) -> Vec<String>,
    ) -> Arc<Mutex<S>> {
        let state = Arc::new(Mutex::new(state));
        let watched = Arc::clone(&state);
        self.verifier()
            .add_teardown_check(move || leaks(&watched.lock()));
        state
    }

    /// A verifier failure when `what` is called above `max`.
    fn irql_at_most(&self, what: &str, max: Irql) {
        let level = irql::current();
        if level > max {
            self.shared
                .verifier
                .fail(format!("verifier: {what} at {}", level.name()));
        }
    }
}

/// The host model is also the interrupt controller and DPC queue of the device models above
/// it (the soft HCA, `FakeVerbs`).
impl DeviceModelPlatform for HostPlatform {
    fn queue_dpc(&self, dpc: &KArc<dyn Dpc>) -> bool {
        // The platform's own bookkeeping, not the driver's allocation.
        let _host = low_resources::host_scope();
        self.shared.queue_dpc(dpc)
    }

    fn interrupt(&self, isr: &dyn InterruptService) -> bool {
        crate::probe::stamp(0);
        let serviced =
            irql::run_callback(&self.shared.verifier, "ISR", Irql::Device, || isr.service());
        if !self.is_deterministic() {
            deferred::drain_thread_dpcs();
        }
        serviced
    }

    /// Threaded mode: a due time already passed, set by a thread inside a driver callback,
    /// queues the DPC on that thread ("processor") for its next clock tick: it runs there once
    /// the thread next lowers its IRQL below DISPATCH_LEVEL (a spin lock's release, the end of
    /// the callback, a wait), never inside this call, and without waking another thread. A
    /// device model that arms a timer for "now" in a call its consumer makes (the soft CM,
    /// when a message reaches an agent) thus reacts on the sending processor, after that call
    /// returned, as a real controller's receive interrupt and DPC would. Other due times, and
    /// calls from a thread outside any driver callback (a test's own thread), go to the timer
    /// thread.
    fn set_timer(&self, timer: &KArc<dyn Dpc>, due_ns: u64) {
        let _host = low_resources::host_scope();
        self.irql_at_most("set_timer", Irql::Dispatch);
        let threaded = !self.is_deterministic();
        if threaded && irql::in_callback() && due_ns <= self.now_ns() {
            // Replaces a pending due time, as setting a set timer does.
            self.shared.timers.cancel(timer);
            self.shared.queue_dpc_on_next_drop(timer);
            return;
        }
        if self.shared.timers.set(timer, due_ns, threaded) {
            self.shared
                .timers
                .start_thread(Arc::downgrade(&self.shared), self.shared.start);
        }
        if !threaded {
            // A due time already passed fires now (into the FIFO), as `KeSetTimer` with an
            // expired due time queues the DPC at the next clock tick.
            self.shared.fire_due_timers();
        }
    }

    fn cancel_timer(&self, timer: &KArc<dyn Dpc>) -> bool {
        self.shared.timers.cancel(timer)
    }

    /// Threaded mode: sleeps (a sleeping thread leaves its CPU to others, as a driver waiting
    /// for its device's answer does), with the thread's timer slack at its minimum so that a
    /// short sleep is not stretched by tens of microseconds (`precise_sleep`); at
    /// DISPATCH_LEVEL it spins, as a stall does. Deterministic mode: returns at once (the clock moves only when a test moves
    /// it).
    fn delay(&self, ns: u64) {
        if self.is_deterministic() || ns == 0 {
            return;
        }
        // A processor that goes to sleep at PASSIVE_LEVEL has run its DPCs first.
        deferred::drain_thread_dpcs();
        if irql::current() >= Irql::Dispatch {
            let due = self.now_ns().saturating_add(ns);
            while self.now_ns() < due {
                std::hint::spin_loop();
            }
        } else {
            crate::precise_sleep::sleep_ns(ns);
        }
    }
}

/// Consumes one injected failure from `counter`, if any is left.
fn take_one(counter: &AtomicU64) -> bool {
    let mut n = counter.load(Ordering::SeqCst);
    while n > 0 {
        match counter.compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return true,
            Err(now) => n = now,
        }
    }
    false
}
