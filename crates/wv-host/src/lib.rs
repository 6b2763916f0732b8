//! A host model of the parts of KMDF and the Windows I/O manager that the WinVerbs driver core
//! uses, so the real core runs, and is checked, on any machine.
//!
//! * [`HostPlatform`] implements [`wv_hal::Platform`]: requests, manual queues, spin locks,
//!   events, work items, DPCs, interrupts, the IRQL, the clock, and the device models' timers.
//!   Deterministic (one thread, explicit `run_until_idle`, injected clock that fires timers as
//!   it moves) or threaded (worker pool, per-thread DPCs, a timer thread).
//! * [`IoManager`], [`File`] and [`Io`] play the I/O manager: PnP arrival/removal,
//!   CreateFile/CloseHandle, DeviceIoControl with OVERLAPPED semantics, CancelIoEx.
//! * The [`Verifier`] is always on: IRQL rules, double/never completion, leaked requests,
//!   queues, files and lower-device objects fail the run with a message naming the rule.
//! * [`fake_verbs::FakeVerbs`] is a scriptable lower device for the core's tests, and
//!   [`fake_cm::FakeCm`] a scriptable connection manager beside it.
//! * [`LowResources`] is Driver Verifier's low-resources simulation: a global allocator that
//!   refuses the driver's N-th allocation, or a random fraction of them.
//! * [`kernel`] is the per-thread IRQL and DPC state, for an emulated kernel built on this
//!   model (`tools/wdf-emu` runs the KMDF glue on it).
#![deny(unsafe_code)]

mod deferred;
mod event;
pub mod fake_cm;
pub mod fake_verbs;
mod io_manager;
mod irql;
pub mod kernel;
#[cfg(loom)]
pub mod loom_model;
#[cfg(loom)]
pub mod loom_platform;
pub mod low_resources;
mod platform;
mod precise_sleep;
pub mod probe;
mod queue;
mod request;
mod spin_lock;
mod sync;
mod timer;
mod verifier;
pub mod wait_word;

pub use event::HostEvent;
pub use io_manager::{File, FileRef, Io, IoManager};
pub use low_resources::LowResources;
pub use platform::HostPlatform;
pub use queue::HostQueue;
pub use request::{HostRequest, IoStatus, RawIrp};
pub use spin_lock::{HostSpinLock, HostSpinLockGuard};
pub use verifier::Verifier;
