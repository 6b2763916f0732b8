//! Build script of the link mirror of the driver package: configures the Linux link of
//! `winverbs.sys` where the root's build script calls `wdk_build::configure_wdk_binary_build()`
//! on a Windows host.
//!
//! It emits the same KMDF link arguments wdk-build 0.6 emits (`/DRIVER /NODEFAULTLIB
//! /SUBSYSTEM:NATIVE /KERNEL /ENTRY:FxDriverEntry /IGNORE:4257 /NXCOMPAT /DYNAMICBASE /MAP
//! /MAPINFO:EXPORTS /OPT:REF,ICF /INTEGRITYCHECK /MANIFEST:NO`) plus `/RELEASE` (lld-link
//! writes a zero checksum without it; Microsoft's linker fills it in for native images), and in
//! place of the WDK's libraries:
//!
//! * `ntoskrnl.lib` and `WdfLdr.lib`: import libraries made with `llvm-dlltool` from the
//!   project's own lists (`def/ntoskrnl.def`, `def/WDFLDR.def`);
//! * `WdfDriverEntry.lib`: the project's `FxDriverEntry` stub (`entry-stub/`), compiled here
//!   with the same `rustc` for the same target.
//!
//! wdk-sys names the WDK's other KMDF libraries in its bindings (`#[link]` to
//! `BufferOverflowFastFailK`, `hal`, `wmilib`): nothing in a Rust driver references the `/GS`
//! failure routine, the HAL's routines or WMI's, so they are empty archives here. A symbol that
//! needed one of them fails the link as undefined, and the import audit allows only
//! ntoskrnl.exe and WDFLDR.SYS.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let here =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target = env::var("TARGET").expect("cargo sets TARGET");
    for input in [
        "build.rs",
        "def/ntoskrnl.def",
        "def/WDFLDR.def",
        "entry-stub/wdf_driver_entry.rs",
    ] {
        println!("cargo::rerun-if-changed={}", here.join(input).display());
    }
    println!("cargo::rerun-if-env-changed=LLVM_DLLTOOL");
    println!("cargo::rerun-if-env-changed=LLVM_AR");
    if target != "x86_64-pc-windows-msvc" {
        // Only the Windows image is linked here; a host build of the package is empty.
        return;
    }
    // wdk-build refuses to configure a driver without the static C runtime; so does this.
    let features = env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    if !features.split(',').any(|f| f == "crt-static") {
        panic!(
            "the driver must be built with -C target-feature=+crt-static (the repository's \
             .cargo/config.toml sets it; an environment RUSTFLAGS replaces it)"
        );
    }

    let dlltool = env::var("LLVM_DLLTOOL").unwrap_or_else(|_| "llvm-dlltool".to_owned());
    import_library(
        &dlltool,
        &here.join("def/ntoskrnl.def"),
        &out.join("ntoskrnl.lib"),
    );
    import_library(
        &dlltool,
        &here.join("def/WDFLDR.def"),
        &out.join("WdfLdr.lib"),
    );
    entry_stub(&here.join("entry-stub/wdf_driver_entry.rs"), &out, &target);
    for empty in ["BufferOverflowFastFailK", "hal", "wmilib"] {
        archive(&out.join(format!("{empty}.lib")), &[]);
    }

    println!("cargo::rustc-link-search=native={}", out.display());
    for lib in ["ntoskrnl", "WdfLdr", "WdfDriverEntry"] {
        println!("cargo::rustc-link-lib=static={lib}");
    }
    // wdk-build 0.6's arguments for a KMDF driver (WindowsDriver.KernelMode.props,
    // WindowsDriver.KernelMode.KMDF.props and Microsoft.Link.Common.props of the WDK).
    for arg in [
        "/DRIVER",
        "/NODEFAULTLIB",
        "/SUBSYSTEM:NATIVE",
        "/KERNEL",
        "/ENTRY:FxDriverEntry",
        "/IGNORE:4257",
        "/NXCOMPAT",
        "/DYNAMICBASE",
        "/MAP",
        "/MAPINFO:EXPORTS",
        "/OPT:REF,ICF",
        "/INTEGRITYCHECK",
        "/MANIFEST:NO",
        // The one addition: the PE checksum (the kernel's loader checks it for drivers).
        "/RELEASE",
    ] {
        println!("cargo::rustc-cdylib-link-arg={arg}");
    }
}

/// `llvm-dlltool -m i386:x86-64 -d DEF -l LIB`.
fn import_library(dlltool: &str, def: &Path, lib: &Path) {
    let status = Command::new(dlltool)
        .args(["-m", "i386:x86-64", "-d"])
        .arg(def)
        .arg("-l")
        .arg(lib)
        .status()
        .unwrap_or_else(|e| {
            panic!("cannot run {dlltool} (Debian package `llvm`; or set LLVM_DLLTOOL): {e}")
        });
    assert!(status.success(), "{dlltool} failed on {}", def.display());
}

/// Compiles the `FxDriverEntry` stub into one object and archives it as
/// `WdfDriverEntry.lib`, the name of the WDK library it stands in for.
fn entry_stub(source: &Path, out: &Path, target: &str) {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let object = out.join("wdf_driver_entry.obj");
    let status = Command::new(&rustc)
        .args([
            "--edition",
            "2024",
            "--crate-type",
            "lib",
            "--crate-name",
            "wdf_driver_entry",
        ])
        .args(["--target", target, "--emit"])
        .arg(format!("obj={}", object.display()))
        .args([
            "-C",
            "opt-level=2",
            "-C",
            "panic=abort",
            "-C",
            "codegen-units=1",
        ])
        .args(["-C", "target-feature=+crt-static", "-C", "debuginfo=0"])
        .args(["-D", "warnings", "-D", "unsafe_op_in_unsafe_fn"])
        .arg(source)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {rustc}: {e}"));
    assert!(status.success(), "the FxDriverEntry stub does not compile");
    archive(&out.join("WdfDriverEntry.lib"), &[&object]);
}

/// `llvm-ar rcs LIB OBJECTS…` (a fresh archive; none for an empty one).
fn archive(lib: &Path, objects: &[&Path]) {
    let _ = std::fs::remove_file(lib);
    let ar = env::var("LLVM_AR").unwrap_or_else(|_| "llvm-ar".to_owned());
    let status = Command::new(&ar)
        .arg("rcs")
        .arg(lib)
        .args(objects)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {ar} (Debian package `llvm`; or set LLVM_AR): {e}"));
    assert!(status.success(), "{ar} failed on {}", lib.display());
}
