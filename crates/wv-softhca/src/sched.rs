//! Who runs a send queue: the doorbell scheduling protocol of `engine::run_sq`, apart so that
//! `tests/loom.rs` can check it (under `--cfg loom` its flag is loom's).
//!
//! The queue's lock decides who runs it. A doorbell that finds it taken announces its work in
//! the pending flag and tries once more (the runner may have been leaving); a runner, once it
//! has let go of the lock, takes any announcement and runs again. The announcement and the
//! runner's look after unlocking are both read-modify-writes of the flag, so one of them reads
//! the other: either the runner sees the announcement, or the announcer's second try comes
//! after the unlock and finds the lock free (or a newer runner, which in turn looks after
//! unlocking). A plain load after unlocking would be a store followed by a load, which may read
//! a stale flag while the announcer's try still sees the lock taken: a doorbell lost until the
//! next one (the protocol this replaced had that window).
//!
//! An uncontended doorbell costs the lock's compare-and-swap and one swap.

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, Ordering};

#[cfg(not(loom))]
use core::sync::atomic::{AtomicBool, Ordering};

/// Work was announced to whoever runs the queue.
#[derive(Debug)]
pub(crate) struct Pending(AtomicBool);

impl Pending {
    pub(crate) fn new() -> Self {
        Pending(AtomicBool::new(false))
    }
}

/// Runs the queue in this thread or leaves the work to its runner: `run` tries to take the
/// queue's lock, does the work and lets go (`None`: the lock was taken).
pub(crate) fn schedule(pending: &Pending, mut run: impl FnMut() -> Option<()>) {
    let mut announced = false;
    loop {
        if run().is_some() {
            // Work announced while we held the queue? (A read-modify-write: see above.)
            if !pending.0.swap(false, Ordering::AcqRel) {
                return;
            }
            announced = false;
        } else if !announced {
            pending.0.swap(true, Ordering::AcqRel);
            announced = true;
        } else {
            return;
        }
    }
}
