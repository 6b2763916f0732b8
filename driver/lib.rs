//! winverbs.sys: the KMDF upper filter driver, a thin WDF glue over the portable driver core.
//!
//! * [`entry`]: `DriverEntry`, `EvtDriverUnload`, the driver-wide state;
//! * [`filter`]: the filter device on each RDMA controller's stack, which takes the
//!   controller's verbs table (`GUID_RDMA_INTERFACE_VERBS`) and CM interface whenever its
//!   self-managed I/O starts, hands them to the core through `wv-ci`'s `CiVerbs` and `CiCm`,
//!   and gives them back whenever it stops (before every power-down and at removal);
//! * [`control`]: the control device `\Device\WinVerbs`, its file objects and IOCTLs;
//! * [`platform`]: `wv_hal::Platform` with WDF and WDM;
//! * [`wdf`]: small safe wrappers over the framework calls; the callback files (`entry`,
//!   `filter`, `control`) make no framework call of their own, and each WDF call is written
//!   once (`tools/kmdf-check` checks that, and that docs/WINDOWS.md lists every call).
//!
//! Everything the driver decides is in `wv-core` (`control`: the control device's lifetime,
//! caller context, request buffers; `filter`: attach, pass through, let go) and `wv-ci` (the
//! lower interfaces); this crate only moves framework objects to and from it.
//!
//! Status: type-checked and clippy-clean on Linux for `x86_64-pc-windows-msvc` against our
//! WDF bindings (`tools/kmdf-check`), and executed on Linux on an emulated KMDF 1.31 with its
//! verifier (`tools/wdf-emu`, which compiles these sources unchanged for the host under
//! `cfg(wdf_emu)`); linked on Linux into `winverbs.sys` (`tools/kmdf-link`, with the project's
//! own `FxDriverEntry` stub there; a Windows build links the WDK's) and that image run on the
//! same emulation with the Windows x64 convention (`tools/sys-loader`); never loaded on Windows.
// The glue is compiled for Windows, and for the Linux host in the KMDF emulation
// (`tools/wdf-emu` sets `cfg(wdf_emu)`); a plain host build of the package is empty.
#![cfg_attr(any(windows, wdf_emu), no_std)]

#[cfg(any(windows, wdf_emu))]
extern crate alloc;
// The kernel's panic handler (a bug check) and pool allocator exist only in a Windows image;
// the emulation's host process has its own.
#[cfg(windows)]
extern crate wdk_panic;

#[cfg(any(windows, wdf_emu))]
mod control;
#[cfg(any(windows, wdf_emu))]
mod entry;
#[cfg(any(windows, wdf_emu))]
mod filter;
#[cfg(any(windows, wdf_emu))]
mod platform;
#[cfg(any(windows, wdf_emu))]
mod wdf;

/// Pool allocations of Rust code: `ExAllocatePool2` from nonpaged pool with one tag. It
/// returns null when pool runs out. The core and the adapters only allocate through fallible
/// paths (`KArc::try_new`, `try_reserve`, `wdf::pool`), which turn that null into a failed
/// request; an infallible one (`Arc::new`, `Box::new`, a growing `Vec`) would turn it into a
/// bug check, which is why `wv-core`'s clippy configuration forbids them.
#[cfg(windows)]
#[global_allocator]
static GLOBAL_ALLOCATOR: wdk_alloc::WdkAllocator = wdk_alloc::WdkAllocator;
