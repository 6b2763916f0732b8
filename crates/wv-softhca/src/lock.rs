//! The soft HCA's locks, and how a waiter waits.
//!
//! In a kernel (the soft HCA is the model of a Windows soft-HCA driver) these are spin locks:
//! their holders run at DISPATCH_LEVEL and are never preempted, so a waiter spins for a few
//! hundred nanoseconds at most. On a host the holder is an ordinary thread the scheduler may
//! preempt, and a waiter that spins burns its whole time slice — milliseconds — before the
//! holder runs again (with every thread on one processor a connection took 4 ms instead of
//! 50 µs). With the `std` feature, which the host crates turn on, a waiter gives the processor
//! away instead of spinning.

#[cfg(feature = "std")]
type Relax = spin::relax::Yield;
#[cfg(not(feature = "std"))]
type Relax = spin::relax::Spin;

/// A spin lock (see the module's note on how it waits).
pub(crate) type Mutex<T> = spin::mutex::Mutex<T, Relax>;
/// Its guard.
pub(crate) type MutexGuard<'a, T> = spin::mutex::MutexGuard<'a, T>;
/// A reader-writer spin lock.
pub(crate) type RwLock<T> = spin::rwlock::RwLock<T, Relax>;

/// One step of a wait for another processor (a rundown, a command slot, a region's state
/// being written): a pause in a kernel, a yield of the processor on a host.
pub(crate) fn relax() {
    <Relax as spin::relax::RelaxStrategy>::relax();
}
