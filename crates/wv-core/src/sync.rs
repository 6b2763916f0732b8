//! The few synchronisation types the core is built on, kept small and separate so that a loom
//! model can exercise them (their spin locks come from the [`Platform`], their counters from
//! `core::sync::atomic`).
//!
//! * [`Gate`]: a counter of users that can be closed and drained. The provider gate counts
//!   IOCTLs in flight on a file (cleanup closes it: later IOCTLs get `STATUS_FILE_CLOSED`); a
//!   device gate counts users of one opened lower device (removal closes it before destroying
//!   verbs handles). Closing and counting happen under one lock, which is the fix of OFW's
//!   `WvProviderGet` race (spec §7.1-i).
//! * [`RefCount`]: children and in-flight users of an object; destroy refuses while it is not 0.
//! * [`Handle`]: a verbs handle that users borrow (as a [`KArc`]) for the length of one call and
//!   that teardown takes exactly once.
//! * [`ModifySched`]: the "one drainer per QP" flag of the QP-modify queue.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU32, Ordering};

#[cfg(not(loom))]
use core::sync::atomic::{AtomicU32, Ordering};

use wv_abi::NtStatus;
use wv_hal::{Event, KArc, Platform, SpinLock};

/// State of a [`Gate`].
struct GateState {
    closed: bool,
    active: u32,
}

/// A closable counter of users. `enter` fails once the gate is closed; `wait_drained` blocks
/// (PASSIVE_LEVEL) until every user that entered before the close has left.
///
/// A closed gate never opens again, so one notification event, allocated with the gate, is
/// enough for every drainer: it is set once the gate is closed and empty, and stays set.
pub struct Gate<P: Platform> {
    state: P::SpinLock<GateState>,
    /// Shared so that the setter keeps it alive: a drainer woken by `set` may free the gate
    /// before `set` has returned.
    drained: KArc<P::Event>,
}

impl<P: Platform> Gate<P> {
    /// An open gate with no users.
    ///
    /// # Errors
    /// The platform's status when its event cannot be allocated, `STATUS_NO_MEMORY` when its
    /// shared cell cannot.
    pub fn new(platform: &P) -> Result<Self, NtStatus> {
        Ok(Gate {
            state: platform.spin_lock(GateState {
                closed: false,
                active: 0,
            }),
            drained: KArc::try_new(platform.event()?)?,
        })
    }

    /// Becomes a user unless the gate is closed. IRQL <= DISPATCH_LEVEL.
    #[must_use]
    pub fn enter(&self) -> bool {
        let mut state = self.state.lock();
        if state.closed {
            false
        } else {
            state.active += 1;
            true
        }
    }

    /// [`Gate::enter`] as a guard that leaves on drop, so a panic unwinding through the user
    /// (host tests; the kernel aborts instead) cannot leave the gate undrainable.
    pub fn share(&self) -> Option<GateShare<'_, P>> {
        self.enter().then(|| GateShare { gate: self })
    }

    /// Stops being a user; wakes the drainers when the last user of a closed gate leaves.
    /// IRQL <= DISPATCH_LEVEL.
    pub fn leave(&self) {
        let drained = {
            let mut state = self.state.lock();
            debug_assert!(state.active > 0, "gate left more often than entered");
            state.active -= 1;
            (state.active == 0 && state.closed).then(|| KArc::clone(&self.drained))
        };
        // Set outside the lock, on our own reference: a woken drainer may free the gate's
        // owner at once.
        if let Some(event) = drained {
            event.set();
        }
    }

    /// Closes the gate; returns whether this call closed it (false: it was closed already).
    /// IRQL <= DISPATCH_LEVEL.
    pub fn close(&self) -> bool {
        let (closed_now, drained) = {
            let mut state = self.state.lock();
            let closed_now = !core::mem::replace(&mut state.closed, true);
            (closed_now, closed_now && state.active == 0)
        };
        if drained {
            self.drained.set();
        }
        closed_now
    }

    /// Whether the gate is closed.
    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    /// Waits until a closed gate has no users. PASSIVE_LEVEL (it may block).
    pub fn wait_drained(&self) {
        debug_assert!(
            self.state.lock().closed,
            "draining an open gate could wait for ever"
        );
        self.drained.wait();
    }
}

/// A share of a [`Gate`], left on drop.
pub struct GateShare<'a, P: Platform> {
    gate: &'a Gate<P>,
}

impl<P: Platform> Drop for GateShare<'_, P> {
    fn drop(&mut self) {
        self.gate.leave();
    }
}

/// References on an object other than its id-table entry: child objects and IOCTLs in flight
/// (OFW's `Ref - 1`). Increments happen under the provider lock, so once destroy has seen 0 and
/// removed the object from its table nobody can take a new reference.
#[derive(Debug)]
pub struct RefCount(AtomicU32);

impl Default for RefCount {
    fn default() -> Self {
        RefCount(AtomicU32::new(0))
    }
}

impl RefCount {
    /// Takes a reference.
    pub fn get(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
    /// Drops a reference.
    pub fn put(&self) {
        let old = self.0.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(old > 0, "reference count underflow");
    }
    /// Whether anybody holds a reference.
    pub fn is_held(&self) -> bool {
        self.0.load(Ordering::Acquire) != 0
    }
}

/// A verbs handle shared by the calls that use it and destroyed exactly once.
///
/// Users clone the `KArc` for the duration of one verb (never holding the lock across it);
/// teardown takes it out. Teardown runs only once every user has left the device gate, so by
/// then the taken `KArc` is the last one.
pub struct Handle<P: Platform, H: Send + Sync> {
    slot: P::SpinLock<Option<KArc<H>>>,
}

impl<P: Platform, H: Send + Sync> Handle<P, H> {
    /// A live handle. The caller allocated its shared cell before it created the lower
    /// object (`KArc::try_reserve`), so that nothing can fail once the object exists.
    pub fn new(platform: &P, handle: KArc<H>) -> Self {
        Handle {
            slot: platform.spin_lock(Some(handle)),
        }
    }
    /// The handle for one call, or `None` after teardown.
    pub fn get(&self) -> Option<KArc<H>> {
        self.slot.lock().clone()
    }
    /// Takes the handle for destruction; `None` if it was taken already (device removal got
    /// there first). A handle still borrowed is a bug in the gate protocol; it is then leaked
    /// rather than destroyed under a user.
    pub fn take(&self) -> Option<H> {
        let taken = self.slot.lock().take()?;
        match KArc::try_unwrap(taken) {
            Ok(handle) => Some(handle),
            Err(_still_borrowed) => {
                debug_assert!(false, "verbs handle destroyed while still in use");
                None
            }
        }
    }
}

/// State of a [`ModifySched`].
struct SchedState {
    /// A drainer (work item) is queued or running.
    running: bool,
    /// A request was parked while the drainer was running: it must look again before it stops.
    rerun: bool,
    /// Someone waits for the drainer to stop (QP destroy, cleanup).
    waited: bool,
    /// When the drainer now queued was asked for (`now_ns`), until it starts.
    queued_at: Option<u64>,
}

/// The scheduler flag of a QP's modify queue: at most one drainer per QP, so modifies of one
/// QP run in arrival order while different QPs' drainers run in parallel.
///
/// Waiting for the drainer happens only after the modify queue was purged, when no new
/// drainer can start; so one event, allocated with the scheduler, serves every wait.
pub struct ModifySched<P: Platform> {
    state: P::SpinLock<SchedState>,
    stopped: KArc<P::Event>,
}

impl<P: Platform> ModifySched<P> {
    /// No drainer.
    ///
    /// # Errors
    /// The platform's status when its event cannot be allocated.
    pub fn new(platform: &P) -> Result<Self, NtStatus> {
        Ok(ModifySched {
            state: platform.spin_lock(SchedState {
                running: false,
                rerun: false,
                waited: false,
                queued_at: None,
            }),
            stopped: KArc::try_new(platform.event()?)?,
        })
    }

    /// Called after parking a request, at `now_ns`. Returns true when the caller must start a
    /// drainer.
    pub fn kick(&self, now_ns: u64) -> bool {
        let mut state = self.state.lock();
        if state.running {
            state.rerun = true;
            false
        } else {
            state.running = true;
            state.queued_at = Some(now_ns);
            true
        }
    }

    /// Takes the drainer's place for a modify the caller runs itself: true when no drainer runs
    /// (nothing of this QP is queued or running), and then the caller must end with
    /// [`ModifySched::finish`] as a drainer would. A QP destroy waits for it like for one.
    pub fn claim(&self) -> bool {
        let mut state = self.state.lock();
        if state.running {
            false
        } else {
            state.running = true;
            true
        }
    }

    /// Called by the drainer as it starts, at `now_ns`: how long it waited since the kick that
    /// queued it (once per queueing; `None` for a run no kick queued).
    pub fn started(&self, now_ns: u64) -> Option<u64> {
        let queued_at = self.state.lock().queued_at.take()?;
        Some(now_ns.saturating_sub(queued_at))
    }

    /// Called by the drainer when the queue looked empty. Returns true when it may stop; false
    /// when a request was parked meanwhile and it must look again.
    pub fn finish(&self) -> bool {
        let wake = {
            let mut state = self.state.lock();
            if core::mem::take(&mut state.rerun) {
                return false;
            }
            state.running = false;
            state.waited.then(|| KArc::clone(&self.stopped))
        };
        // On our own reference: the woken waiter may free the QP at once.
        if let Some(event) = wake {
            event.set();
        }
        true
    }

    /// [`ModifySched::finish`] that forgets to wake the waiter: the hang of a fault-injection
    /// build, which the host verifier must catch.
    #[cfg(feature = "fault-injection")]
    pub fn finish_silently(&self) -> bool {
        let mut state = self.state.lock();
        if core::mem::take(&mut state.rerun) {
            return false;
        }
        state.running = false;
        true
    }

    /// Waits until no drainer runs. PASSIVE_LEVEL. The caller has stopped new requests from
    /// being parked (purged the queue), so the drainer finds the queue empty and stops.
    pub fn wait_idle(&self) {
        {
            let mut state = self.state.lock();
            if !state.running {
                return;
            }
            state.waited = true;
        }
        self.stopped.wait();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use wv_host::HostPlatform;

    #[test]
    fn gate_refuses_after_close_and_drains() {
        let platform = HostPlatform::deterministic();
        let gate = Gate::new(&platform).unwrap();
        assert!(gate.enter());
        let share = gate.share().expect("open gate");
        assert!(gate.close());
        assert!(!gate.close(), "closed once");
        assert!(!gate.enter());
        assert!(gate.share().is_none());
        drop(share);
        gate.leave();
        gate.wait_drained(); // nobody left: returns at once
        assert!(gate.is_closed());
    }

    #[test]
    fn sched_times_each_queued_drainer_once() {
        let platform = HostPlatform::deterministic();
        let sched = ModifySched::new(&platform).unwrap();
        assert_eq!(sched.started(5), None, "nothing was queued");
        assert!(sched.kick(100));
        assert!(
            !sched.kick(150),
            "a kick that queues nothing does not restart the clock"
        );
        assert_eq!(sched.started(130), Some(30));
        assert_eq!(sched.started(200), None, "once per queueing");
        assert!(!sched.finish());
        assert!(sched.finish());
        assert!(sched.kick(300));
        assert_eq!(sched.started(310), Some(10));
        assert!(sched.finish());
    }

    #[test]
    fn sched_has_one_drainer_and_never_loses_a_kick() {
        let platform = HostPlatform::deterministic();
        let sched = ModifySched::new(&platform).unwrap();
        assert!(sched.kick(0), "first kick starts a drainer");
        assert!(!sched.kick(0), "a running drainer is told to look again");
        assert!(!sched.finish(), "so it may not stop yet");
        assert!(sched.finish());
        sched.wait_idle();
        assert!(sched.kick(0));
        assert!(sched.finish());
    }

    #[test]
    fn a_claim_stands_for_a_drainer() {
        let platform = HostPlatform::deterministic();
        let sched = ModifySched::new(&platform).unwrap();
        assert!(sched.claim(), "nothing runs: the caller may run its modify");
        assert!(!sched.claim(), "one at a time");
        assert!(
            !sched.kick(0),
            "a modify parked meanwhile waits for the claimer"
        );
        assert!(!sched.finish(), "which must then see that it was parked");
        assert!(sched.finish());
        assert!(sched.kick(0));
        assert!(!sched.claim(), "a drainer runs");
        assert!(sched.finish());
    }

    #[test]
    fn handle_is_taken_once() {
        let platform = HostPlatform::deterministic();
        let handle = Handle::new(&platform, KArc::try_new(7u32).unwrap());
        let borrowed = handle.get().unwrap();
        assert_eq!(*borrowed, 7);
        drop(borrowed);
        assert_eq!(handle.take(), Some(7));
        assert_eq!(handle.take(), None);
        assert!(handle.get().is_none());
    }

    #[test]
    fn refcount() {
        let refs = RefCount::default();
        assert!(!refs.is_held());
        refs.get();
        assert!(refs.is_held());
        refs.put();
        assert!(!refs.is_held());
    }
}
