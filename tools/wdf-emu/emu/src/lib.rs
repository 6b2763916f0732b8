//! An emulated KMDF 1.31 and the Windows kernel routines a KMDF driver imports, so that a
//! driver's WDF glue — compiled for the Linux host from the same sources as the Windows image —
//! executes on Linux under a verifier.
//!
//! What a driver links against:
//! * [`table`]: `WdfFunctions_01031` (458 entries: the DDIs the emulation implements, and a
//!   trap naming its index everywhere else), `WdfFunctionCount` and `WdfDriverGlobals`, the
//!   three symbols `call_unsafe_wdf_function_binding!` uses;
//! * [`wdm`]: the kernel routines (`ExAllocatePool2`, `IoQueueWorkItem`,
//!   `KeAcquireSpinLockRaiseToDpc`, `KeWaitForSingleObject`, `DbgPrint`, …).
//!
//! Every DDI and kernel routine is one ordinary Rust function; [`abi`] generates its exported
//! entry point for the C convention (what a host build of the driver calls) and for the
//! Windows x64 convention (for a loader that maps a linked `winverbs.sys`), and every callback
//! into the driver goes through one caller per callback type (`wv_ci::callbacks!`) that calls
//! it with the driver's [`Convention`].
//!
//! What the driver runs on: a [`Machine`], one per process at a time (the driver has statics),
//! built on `wv-host`: one IRQL per thread shared with the soft HCAs' ISRs and DPCs, one
//! verifier, real threads (or one thread, deterministically). It plays the framework's object
//! tree ([`objects`]), devices, queues and requests ([`io`]), the PnP manager ([`pnp`]) and the
//! I/O manager's clients ([`file`]), and checks what KMDF Verifier and Driver Verifier check
//! ([`verifier`]). A violation is recorded and fails the test that caused it; it never
//! unwinds through the driver (a panic cannot cross its `extern "C"` frames).
#![allow(unsafe_code)]

/// Defines `fn $name(fx, handle)`: the data of the framework object `handle` when it is an
/// object of kind `$kind`, else `None` (each object kind's code looks its own data up).
macro_rules! kind_data {
    ($(#[$doc:meta])* $vis:vis fn $name:ident -> $kind:ident($data:ty)) => {
        $(#[$doc])*
        $vis fn $name(
            fx: &mut $crate::objects::Fx,
            handle: $crate::objects::Handle,
        ) -> Option<&mut $data> {
            match fx.get_mut(handle) {
                Some($crate::objects::Object {
                    kind: $crate::objects::Kind::$kind(data),
                    ..
                }) => Some(data),
                _ => None,
            }
        }
    };
}

pub mod abi;
mod callbacks;
pub mod controller;
pub mod devices;
pub mod faults;
pub mod file;
pub mod io;
pub mod machine;
pub mod objects;
pub mod pnp;
mod requests;
mod sized;
pub mod stack;
pub mod table;
pub mod verifier;
pub mod wdm;

pub use controller::SoftController;
pub use faults::{FaultPlan, Faults};
pub use file::{EmuFile, EmuIo};
pub use machine::{DriverEntry, Machine, MachineConfig};
pub use pnp::{ControllerId, InterfaceQuery, LowerStack};
pub use stack::{EmuStack, EmuStackConfig};
pub use verifier::Report;
pub use wv_ci::Convention;
