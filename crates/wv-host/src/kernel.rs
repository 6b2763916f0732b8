//! The per-thread kernel state, for an emulated kernel built on this model.
//!
//! `tools/wdf-emu` emulates KMDF and the kernel routines a KMDF driver imports
//! (`KeGetCurrentIrql`, `KeAcquireSpinLockRaiseToDpc`, …) on top of this crate, so that a driver
//! executed there and the device models below it (the soft HCA's ISRs and DPCs, run by
//! [`crate::HostPlatform`]) share one IRQL per thread, one DPC queue per thread and one
//! [`crate::Verifier`]. This module is that shared state, and nothing else: which routine may be
//! called at which level is the emulation's business.

use wv_hal::Irql;

use crate::deferred;
use crate::irql::{self, ThreadIrql};
use crate::low_resources::{self, ScopeGuard};
use crate::verifier::Verifier;

/// The current thread's IRQL (`KeGetCurrentIrql`).
pub fn irql() -> Irql {
    irql::current()
}

/// Spin locks the current thread holds in its current callback frame.
pub fn spin_locks_held() -> u32 {
    irql::get().locks
}

/// A spin lock was acquired (`KeAcquireSpinLockRaiseToDpc`): the thread goes to
/// DISPATCH_LEVEL (or stays above it) and holds one more lock. Returns the level to restore at
/// release.
pub fn spin_lock_acquired() -> Irql {
    let state = irql::get();
    irql::set(ThreadIrql {
        irql: state.irql.max(Irql::Dispatch),
        locks: state.locks + 1,
    });
    state.irql
}

/// A spin lock was released (`KeReleaseSpinLock(lock, old)`): one lock fewer, the IRQL back to
/// `old`; below DISPATCH_LEVEL the DPCs this thread queued meanwhile run, as the DISPATCH
/// software interrupt fires when a processor lowers its IRQL.
pub fn spin_lock_released(old: Irql) {
    let state = irql::get();
    irql::set(ThreadIrql {
        irql: old,
        locks: state.locks.saturating_sub(1),
    });
    if old < Irql::Dispatch {
        deferred::drain_thread_dpcs();
    }
}

/// `KeRaiseIrql`: sets the thread's IRQL to `new` (which must not be below the current one)
/// and returns the previous level.
pub fn raise_irql(new: Irql) -> Irql {
    let state = irql::get();
    irql::set(ThreadIrql {
        irql: new,
        locks: state.locks,
    });
    state.irql
}

/// `KeLowerIrql`: back to `old`; DPCs queued on this thread run once it is below
/// DISPATCH_LEVEL.
pub fn lower_irql(old: Irql) {
    let state = irql::get();
    irql::set(ThreadIrql {
        irql: old,
        locks: state.locks,
    });
    if old < Irql::Dispatch {
        deferred::drain_thread_dpcs();
    }
}

/// Runs driver callback `name` at `at` with no spin lock held, in the driver's allocation
/// scope (see [`crate::LowResources`]); then checks that it returned at `at` with no spin lock
/// held. Unlike the host platform's own frames this one never panics (the callback may have
/// been called by foreign code that cannot unwind): a violation is recorded in `verifier` and
/// returned for the caller to act on. The thread's previous state is restored in every case.
pub fn run_callback<R>(
    verifier: &Verifier,
    name: &str,
    at: Irql,
    f: impl FnOnce() -> R,
) -> (R, Option<String>) {
    let before = irql::get();
    irql::set(ThreadIrql { irql: at, locks: 0 });
    let result = {
        let _driver = low_resources::driver_scope();
        f()
    };
    let after = irql::get();
    irql::set(before);
    let problem = if after.locks != 0 {
        Some(format!(
            "verifier: spin lock held across return to {} (in {name})",
            at.name()
        ))
    } else if after.irql != at {
        Some(format!(
            "verifier: IRQL {} not restored to {} on return from {name}",
            after.irql.name(),
            at.name()
        ))
    } else {
        None
    };
    if let Some(message) = &problem {
        verifier.report(message.clone());
    }
    (result, problem)
}

/// Marks the emulated kernel's own code: the low-resources simulation never refuses its
/// allocations (they are the operating system's, not the driver's).
pub fn host_scope() -> ScopeGuard {
    low_resources::host_scope()
}

/// Marks driver code called back from the emulated kernel (when it is not entered through
/// [`run_callback`]).
pub fn driver_scope() -> ScopeGuard {
    low_resources::driver_scope()
}
