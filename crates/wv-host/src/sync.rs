//! The synchronisation primitives the host model is built from, in one place.
//!
//! Everything that decides ownership between threads (who completes an IRP, who takes a request
//! out of a queue, which worker runs a task) goes through these aliases, so that a later loom
//! build can swap them for loom's types without touching the model's logic. `parking_lot` is
//! used because it does not poison: the verifier deliberately panics while the model's own locks
//! may be held, and later checks (teardown) must still be able to look at the state.

#[cfg(not(loom))]
pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Weak};

#[cfg(loom)]
compile_error!("wv-host has no loom build yet: alias loom's Mutex/Condvar/atomics here");
