//! What the glue's scenarios share: loading the WinVerbs glue (driver/, linked from the mirror
//! package) on an emulated machine, and soft HCAs below it. tools/sys-loader compiles the same
//! scenarios against a library of the same shape that loads the linked winverbs.sys instead.

use wdk_sys::{NTSTATUS, PCUNICODE_STRING, PDRIVER_OBJECT};

mod rig;
pub use rig::{Rig, boot};

/// What the scenarios run: the glue's sources compiled for the host.
pub const DRIVER: &str = "the KMDF glue (driver/ compiled for the host, C convention)";
/// The runner's name in summary lines.
pub const RUNNER: &str = "wdf-emu";

// The glue is linked for its exported `DriverEntry`; nothing else of it is named here.
use winverbs as _;

unsafe extern "C" {
    /// The glue's entry point (`driver/entry.rs`, exported as `DriverEntry`).
    fn DriverEntry(driver: PDRIVER_OBJECT, registry_path: PCUNICODE_STRING) -> NTSTATUS;
}

/// `DriverEntry` as the machine calls it.
pub fn winverbs_entry() -> wdf_emu::DriverEntry {
    wdf_emu::DriverEntry::host(|driver, path| {
        // SAFETY: the machine passes its driver object and registry path, once per load, at
        // PASSIVE_LEVEL: DriverEntry's contract.
        unsafe { DriverEntry(driver, path) }
    })
}
