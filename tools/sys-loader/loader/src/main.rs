//! `sys-loader [IMAGE]`: maps a linked winverbs.sys (by default the one `tools/kmdf-link/build`
//! wrote, or `$WINVERBS_SYS`), boots an emulated machine, runs FxDriverEntry → DriverEntry,
//! unloads, and prints what happened: the mapping, the bind, the status, the unbind and the
//! verifier's findings. Exit status 0 when the image loaded, bound, ran and unloaded clean; 1
//! when it did not; 2 when it was refused before mapping. A fault ends the process with the
//! signal after one line that places it in the image.

use std::path::PathBuf;
use std::process::ExitCode;

use sys_loader::wdfldr::{self, Event};
use sys_loader::{LoadedImage, image_path};
use wdf_emu::{Machine, MachineConfig};

fn main() -> ExitCode {
    let path = std::env::args_os()
        .nth(1)
        .map_or_else(image_path, PathBuf::from);
    let image = match LoadedImage::load(&path) {
        Ok(image) => image,
        Err(e) => {
            eprintln!("sys-loader: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "mapped {} at {:#x} ({} KiB, linked for {:#x}): {} DIR64 relocations applied, {} imports bound ({})",
        image.name(),
        image.base(),
        image.size() / 1024,
        image.preferred_base(),
        image.relocations(),
        image.imports().len(),
        image.imports().join(", ")
    );
    let machine = Machine::boot(MachineConfig::deterministic());
    let status = machine.load(image.entry());
    for event in wdfldr::events() {
        match event {
            Event::Bound {
                component,
                version,
                functions,
                ..
            } => println!(
                "WdfVersionBind: {component} {}.{}.{}, {functions} functions → the emulated KMDF's \
                 Windows x64 table and the driver's globals",
                version.0, version.1, version.2
            ),
            other => println!("{other:?}"),
        }
    }
    println!("FxDriverEntry → DriverEntry: {status:#010x}");
    if !wdk_sys::NT_SUCCESS(status) {
        for v in machine.violations() {
            println!("  {v}");
        }
        return ExitCode::FAILURE;
    }
    println!(
        "DriverUnload is {} (the stub's, in front of the framework's)",
        // SAFETY: the machine's driver object; nothing runs the driver now.
        if unsafe { (*machine.driver_object()).DriverUnload }.is_some() {
            "set"
        } else {
            "NOT set"
        }
    );
    let report = machine.unload();
    for event in wdfldr::events() {
        if let Event::Unbound { .. } = event {
            println!("WdfVersionUnbind: after the framework's unload");
        }
    }
    println!("{report}");
    if report.is_clean() {
        println!(
            "sys-loader: {} bound, ran DriverEntry and unloaded clean",
            image.name()
        );
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
