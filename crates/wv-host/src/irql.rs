//! Per-thread IRQL tracking and the frame every driver callback runs in.
//!
//! A Windows processor has one current IRQL; here each thread stands for a processor, so the
//! IRQL (and the number of spin locks the thread holds) lives in a thread-local. Spin-lock
//! guards raise it to DISPATCH_LEVEL, DPCs run at DISPATCH_LEVEL, ISRs at DIRQL, and every
//! driver callback is wrapped by [`run_callback`], which checks that the driver returns at the
//! level it was called at with no spin lock held.

use std::cell::Cell;

use wv_hal::Irql;

use crate::low_resources;
use crate::sync::{AtomicU64, Ordering};
use crate::verifier::Verifier;

/// The IRQL state of the current thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ThreadIrql {
    /// The current level.
    pub irql: Irql,
    /// Spin locks held by this thread in the current callback frame.
    pub locks: u32,
}

impl ThreadIrql {
    const PASSIVE: ThreadIrql = ThreadIrql {
        irql: Irql::Passive,
        locks: 0,
    };
}

thread_local! {
    static STATE: Cell<ThreadIrql> = const { Cell::new(ThreadIrql::PASSIVE) };
    /// Driver callbacks ([`run_callback`]) this thread is inside, nested.
    static CALLBACKS: Cell<u32> = const { Cell::new(0) };
    static THREAD_NUMBER: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

/// The current thread's IRQL state.
pub(crate) fn get() -> ThreadIrql {
    STATE.with(Cell::get)
}

/// Sets the current thread's IRQL state (no DPC draining: callers decide).
pub(crate) fn set(state: ThreadIrql) {
    STATE.with(|s| s.set(state));
}

/// The current thread's IRQL state, or `None` while its thread-locals are torn down (for the
/// allocator, which may run at any time).
pub(crate) fn get_raw() -> Option<ThreadIrql> {
    STATE.try_with(Cell::get).ok()
}

/// The current IRQL.
pub(crate) fn current() -> Irql {
    get().irql
}

/// Whether the current thread is inside a driver callback of this model (a work item, a DPC,
/// an IOCTL's dispatch, …): such a frame lowers the thread's IRQL again when it returns, so a
/// DPC queued on the thread for later is sure to run ([`run_callback`] drains on the way out).
pub(crate) fn in_callback() -> bool {
    CALLBACKS.with(Cell::get) > 0
}

/// A small number naming the current thread (never 0), for spin-lock ownership.
pub(crate) fn thread_number() -> u64 {
    THREAD_NUMBER.with(|n| *n)
}

/// Resets the thread to PASSIVE_LEVEL with no locks (a worker after a caught panic).
pub(crate) fn reset() {
    set(ThreadIrql::PASSIVE);
}

/// Restores a saved IRQL state when dropped, so a panicking callback does not leave the thread
/// at the callback's level (nor counted inside the callback).
struct Restore(ThreadIrql);

impl Drop for Restore {
    fn drop(&mut self) {
        set(self.0);
        CALLBACKS.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// Runs driver callback `name` at `at` with no spin locks held, then checks that it returned
/// at `at` with no spin lock held. The thread's previous state is restored in every case; when
/// that is below DISPATCH_LEVEL, the DPCs queued on the thread meanwhile and not run yet (an
/// expired device-model timer's, see `HostPlatform::set_timer`) run then, as the DISPATCH
/// software interrupt fires when a processor lowers its IRQL.
///
/// Violations: "verifier: spin lock held across return to <level> (in <name>)" and
/// "verifier: IRQL <level> not restored to <level> on return from <name>".
pub(crate) fn run_callback<R>(
    verifier: &Verifier,
    name: &str,
    at: Irql,
    f: impl FnOnce() -> R,
) -> R {
    let restore = Restore(get());
    CALLBACKS.with(|c| c.set(c.get() + 1));
    set(ThreadIrql { irql: at, locks: 0 });
    let result = {
        let _driver = low_resources::driver_scope();
        f()
    };
    let after = get();
    drop(restore);
    if after.locks != 0 {
        verifier.fail(format!(
            "verifier: spin lock held across return to {} (in {name})",
            at.name()
        ));
    }
    if after.irql != at {
        verifier.fail(format!(
            "verifier: IRQL {} not restored to {} on return from {name}",
            after.irql.name(),
            at.name()
        ));
    }
    crate::deferred::drain_thread_dpcs();
    result
}
