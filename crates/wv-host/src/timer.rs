//! Timers of device models (`DeviceModelPlatform::set_timer`): DPC objects ordered by due time.
//!
//! A timer is named by its DPC object, as a `KTIMER` is bound to one `KDPC` in a real device
//! driver. When the clock reaches its due time the DPC is queued like any other DPC:
//! * deterministic mode: by [`crate::HostPlatform::advance_clock`] (the clock moves only there),
//!   into the one FIFO that `run_until_idle` drains;
//! * threaded mode: by a timer thread that sleeps until the earliest due time of the real
//!   clock and queues the DPC on itself, so the DPC runs there at DISPATCH_LEVEL, as a timer
//!   DPC runs on the processor whose clock interrupt expired it. The thread starts with the
//!   first timer and ends with the platform. Setting a timer wakes it only when the new due
//!   time is earlier than the one it sleeps for (a later one is found when it wakes), so
//!   re-arming a retry deadline costs no thread switch. A timer set from a driver callback for
//!   a time already passed never reaches this table (`HostPlatform::set_timer`).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use wv_hal::{Dpc, KArc};

use crate::platform::Shared;
use crate::sync::{Arc, Condvar, Mutex, Weak};

/// The key of a timer: the address of its DPC object.
pub(crate) fn key(dpc: &KArc<dyn Dpc>) -> usize {
    KArc::as_ptr(dpc).cast::<()>() as usize
}

#[derive(Default)]
struct State {
    /// Pending timers by key: (due, sequence number).
    by_key: HashMap<usize, (u64, u64)>,
    /// Pending timers in firing order.
    order: BTreeMap<(u64, u64), KArc<dyn Dpc>>,
    next_seq: u64,
    /// Threaded mode: the timer thread is running.
    thread: bool,
    /// The due time the timer thread sleeps until (`u64::MAX`: until a timer is set); 0 while
    /// it is awake, when it looks at the table again before it sleeps.
    sleeping_until: u64,
    shutdown: bool,
}

/// The pending timers of one platform.
#[derive(Default)]
pub(crate) struct Timers {
    state: Mutex<State>,
    changed: Condvar,
}

impl Timers {
    /// Sets (or re-sets) the timer of `dpc` to `due`. Returns whether the timer thread must be
    /// started (threaded mode, first timer).
    pub(crate) fn set(&self, dpc: &KArc<dyn Dpc>, due: u64, threaded: bool) -> bool {
        let k = key(dpc);
        let mut st = self.state.lock();
        if let Some(old) = st.by_key.remove(&k) {
            st.order.remove(&old);
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        st.by_key.insert(k, (due, seq));
        st.order.insert((due, seq), KArc::clone(dpc));
        let start = threaded && !st.thread && !st.shutdown;
        if start {
            st.thread = true;
        }
        // The thread would sleep past this due time: wake it to sleep less.
        let wake = due < st.sleeping_until;
        drop(st);
        if wake {
            self.changed.notify_all();
        }
        start
    }

    /// Cancels the timer of `dpc`; returns whether it was pending.
    pub(crate) fn cancel(&self, dpc: &KArc<dyn Dpc>) -> bool {
        let mut st = self.state.lock();
        match st.by_key.remove(&key(dpc)) {
            Some(old) => {
                st.order.remove(&old);
                true
            }
            None => false,
        }
    }

    /// Removes and returns the timers due at `now`, earliest first.
    pub(crate) fn take_due(&self, now: u64) -> Vec<KArc<dyn Dpc>> {
        let mut st = self.state.lock();
        Self::take_due_locked(&mut st, now)
    }

    fn take_due_locked(st: &mut State, now: u64) -> Vec<KArc<dyn Dpc>> {
        let mut due = Vec::new();
        while let Some(entry) = st.order.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let dpc = entry.remove();
            st.by_key.remove(&key(&dpc));
            due.push(dpc);
        }
        due
    }

    /// The earliest due time, if any timer is pending.
    pub(crate) fn next_due(&self) -> Option<u64> {
        self.state.lock().order.keys().next().map(|k| k.0)
    }

    /// How many timers are pending.
    pub(crate) fn pending(&self) -> usize {
        self.state.lock().by_key.len()
    }

    /// Stops the timer thread (the platform is going away).
    pub(crate) fn shutdown(&self) {
        self.state.lock().shutdown = true;
        self.changed.notify_all();
    }

    /// Starts the threaded mode's timer thread for `shared`, whose clock started at `start`.
    pub(crate) fn start_thread(self: &Arc<Self>, shared: Weak<Shared>, start: Instant) {
        let timers = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("wv-host-timer".into())
            .spawn(move || timers.run(&shared, start));
        if spawned.is_err() {
            // No thread: timers of this platform never fire, which the device models see as a
            // lost timer (their retries stop); let a later `set` try again.
            self.state.lock().thread = false;
        }
    }

    fn run(&self, shared: &Weak<Shared>, start: Instant) {
        let now = || u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut st = self.state.lock();
        loop {
            if st.shutdown {
                return;
            }
            let due = Self::take_due_locked(&mut st, now());
            if !due.is_empty() {
                drop(st);
                // Queue them on this thread, where they run at once at DISPATCH_LEVEL. Holding
                // the platform only while firing lets it drop (and stop this thread) otherwise.
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                for dpc in due {
                    shared.queue_dpc(&dpc);
                }
                drop(shared);
                st = self.state.lock();
                continue;
            }
            match st.order.keys().next().map(|k| k.0) {
                Some(next) => {
                    let wait = Duration::from_nanos(next.saturating_sub(now()));
                    st.sleeping_until = next;
                    self.changed.wait_for(&mut st, wait);
                }
                None => {
                    st.sleeping_until = u64::MAX;
                    self.changed.wait(&mut st);
                }
            }
            st.sleeping_until = 0;
        }
    }
}
