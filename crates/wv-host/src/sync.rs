//! The synchronisation primitives the host model is built from, in one place.
//!
//! Everything that decides ownership between threads (who completes an IRP, who takes a request
//! out of a queue, which worker runs a task) goes through these aliases. `parking_lot` is used
//! because it does not poison: the verifier deliberately panics while the model's own locks may
//! be held, and later checks (teardown) must still be able to look at the state.
//!
//! The loom build (`--cfg loom`) does not model-check this host model (its verifier, IRQL
//! bookkeeping and worker pool would multiply the states beyond reach); it checks the driver
//! core on [`crate::loom_platform`], a platform with the same ownership rules built on loom's
//! primitives. The host model keeps these types in that build, except the two lock-free
//! hand-offs of its event path, which are small enough to check on their own: the IRP wait word
//! ([`crate::wait_word`]) and a DPC's inserted flag (`wv_hal::DpcInserted`) are built on loom's
//! primitives there, and `tests/loom.rs` models them.

pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub(crate) use std::sync::{Arc, Weak};
