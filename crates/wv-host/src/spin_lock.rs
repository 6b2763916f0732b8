//! [`HostSpinLock`]: a spin lock that raises the thread's IRQL to DISPATCH_LEVEL.

use std::ops::{Deref, DerefMut};

use wv_hal::{Irql, SpinLock};

use crate::deferred;
use crate::irql::{self, ThreadIrql};
use crate::low_resources;
use crate::sync::{AtomicU64, Mutex, MutexGuard, Ordering};
use crate::verifier::Verifier;

/// A `KSPIN_LOCK` around a `T`. Acquiring raises the thread to DISPATCH_LEVEL (so waits and
/// `PAGED_CODE` under it are caught); releasing restores the previous level and, if that is
/// below DISPATCH_LEVEL, runs the DPCs the thread queued meanwhile (threaded mode).
///
/// Verifier: acquiring above DISPATCH_LEVEL ("verifier: spin lock acquired at DIRQL") and
/// acquiring a lock the thread already holds ("verifier: spin lock acquired recursively"),
/// which would spin for ever on Windows.
pub struct HostSpinLock<T> {
    verifier: Verifier,
    owner: AtomicU64,
    value: Mutex<T>,
}

impl<T> HostSpinLock<T> {
    pub(crate) fn new(verifier: Verifier, value: T) -> Self {
        HostSpinLock {
            verifier,
            owner: AtomicU64::new(0),
            value: Mutex::new(value),
        }
    }
}

/// The held lock; dropping it releases the lock and restores the IRQL.
pub struct HostSpinLockGuard<'a, T> {
    lock: &'a HostSpinLock<T>,
    guard: Option<MutexGuard<'a, T>>,
    previous: Irql,
}

impl<T: Send> SpinLock<T> for HostSpinLock<T> {
    type Guard<'a>
        = HostSpinLockGuard<'a, T>
    where
        Self: 'a,
        T: 'a;

    fn lock(&self) -> HostSpinLockGuard<'_, T> {
        let _host = low_resources::host_scope();
        let state = irql::get();
        if state.irql > Irql::Dispatch {
            self.verifier.fail(format!(
                "verifier: spin lock acquired at {}",
                state.irql.name()
            ));
        }
        let me = irql::thread_number();
        if self.owner.load(Ordering::SeqCst) == me {
            self.verifier
                .fail("verifier: spin lock acquired recursively (deadlock)");
        }
        let guard = self.value.lock();
        self.owner.store(me, Ordering::SeqCst);
        irql::set(ThreadIrql {
            irql: Irql::Dispatch,
            locks: state.locks + 1,
        });
        HostSpinLockGuard {
            lock: self,
            guard: Some(guard),
            previous: state.irql,
        }
    }
}

impl<T> Deref for HostSpinLockGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.guard.as_ref().expect("guard present until drop")
    }
}

impl<T> DerefMut for HostSpinLockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.guard.as_mut().expect("guard present until drop")
    }
}

impl<T> Drop for HostSpinLockGuard<'_, T> {
    fn drop(&mut self) {
        let _host = low_resources::host_scope();
        self.lock.owner.store(0, Ordering::SeqCst);
        drop(self.guard.take());
        let now = irql::get();
        let locks = now.locks.saturating_sub(1);
        let level = if locks > 0 {
            self.previous.max(Irql::Dispatch)
        } else {
            self.previous
        };
        irql::set(ThreadIrql { irql: level, locks });
        if level < Irql::Dispatch {
            deferred::drain_thread_dpcs();
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for HostSpinLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostSpinLock")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}
