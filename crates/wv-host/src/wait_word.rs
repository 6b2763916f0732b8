//! The per-request wait word: how an IRP's completion wakes exactly the threads waiting for it.
//!
//! A completer that nobody waits on pays one atomic swap; a waiter announces itself in the
//! word before it parks, and the completer looks at the registered threads only when it finds
//! that announcement. It replaced a mutex and a condition variable per IRP, so its orderings
//! carry what the mutex used to:
//!
//! * the completer's swap to [`DONE`] releases, and the waiter's loads of the word acquire, so
//!   what the completer wrote before [`WaitWord::set_done`] (the IRP's result) is visible to a
//!   waiter that returns from [`WaitWord::wait`];
//! * the waiter's announcement is a compare-and-swap, never a store, so it cannot overwrite
//!   [`DONE`]; the completer's swap reads the announcement or the waiter's CAS reads [`DONE`],
//!   so either the completer unparks the waiter or the waiter never parks.
//!
//! `tests/loom.rs` checks both with loom (`--cfg loom`, under which this module is built on
//! loom's atomics, mutex and parking), and shows each failing with the ordering weakened.

#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(loom)]
use loom::sync::atomic::{AtomicU8, Ordering};
#[cfg(loom)]
use loom::thread::{self, Thread};

#[cfg(not(loom))]
use crate::sync::{Mutex, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::AtomicU8;
#[cfg(not(loom))]
use std::thread::{self, Thread};

use std::time::Instant;

/// No thread waits for the result yet.
const NOBODY_WAITS: u8 = 0;
/// At least one thread is (about to be) parked in [`WaitWord::wait`].
const WAITED_ON: u8 = 1;
/// The result is set.
const DONE: u8 = 2;

/// How a [`WaitWord::wait`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// The word is done; `slept` says whether this thread had to park for it.
    Done {
        /// The thread parked at least once.
        slept: bool,
    },
    /// The deadline passed first.
    TimedOut,
}

/// One request's wait word and the threads parked on it.
pub struct WaitWord {
    word: AtomicU8,
    /// The threads parked in [`WaitWord::wait`] (registered before they announce themselves).
    waiters: Mutex<Vec<Thread>>,
}

impl Default for WaitWord {
    fn default() -> Self {
        WaitWord::new()
    }
}

impl std::fmt::Debug for WaitWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitWord")
            .field("done", &self.is_done())
            .finish_non_exhaustive()
    }
}

impl WaitWord {
    /// A word nobody waits on yet.
    pub fn new() -> Self {
        WaitWord {
            word: AtomicU8::new(NOBODY_WAITS),
            waiters: Mutex::new(Vec::new()),
        }
    }

    /// Whether [`WaitWord::set_done`] has run (and what it published is visible).
    pub fn is_done(&self) -> bool {
        self.word.load(Ordering::Acquire) == DONE
    }

    /// Blocks the calling thread until the word is done or `deadline` passes. The thread
    /// registers itself, announces itself in the word, then parks until the word says done.
    /// Under loom there is no clock: `deadline` must be `None`.
    pub fn wait(&self, deadline: Option<Instant>) -> Waited {
        if self.is_done() {
            return Waited::Done { slept: false };
        }
        lock(&self.waiters).push(thread::current());
        // A CAS, not a store: it must not overwrite DONE. AcqRel: the registration above is
        // published to a completer that reads WAITED_ON; reading DONE acquires the result.
        let _ = self.word.compare_exchange(
            NOBODY_WAITS,
            WAITED_ON,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        let mut slept = false;
        while self.word.load(Ordering::Acquire) != DONE {
            slept = true;
            if !park_until(deadline) {
                return Waited::TimedOut;
            }
        }
        Waited::Done { slept }
    }

    /// Marks the word done and wakes the threads that announced themselves. Everything the
    /// caller wrote before is visible to them when their wait returns.
    pub fn set_done(&self) {
        // Release: publishes what the caller wrote before; Acquire: a waiter's registration.
        if self.word.swap(DONE, Ordering::AcqRel) == WAITED_ON {
            for waiter in lock(&self.waiters).drain(..) {
                waiter.unpark();
            }
        }
    }
}

#[cfg(not(loom))]
fn lock<T>(m: &Mutex<T>) -> crate::sync::MutexGuard<'_, T> {
    m.lock()
}

#[cfg(loom)]
fn lock<T>(m: &Mutex<T>) -> loom::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Parks until unparked (or spuriously), or until `deadline`; returns `false` once the
/// deadline has passed.
#[cfg(not(loom))]
fn park_until(deadline: Option<Instant>) -> bool {
    match deadline {
        None => thread::park(),
        Some(deadline) => {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            thread::park_timeout(deadline - now);
        }
    }
    true
}

#[cfg(loom)]
fn park_until(deadline: Option<Instant>) -> bool {
    assert!(deadline.is_none(), "loom models have no clock");
    thread::park();
    true
}
