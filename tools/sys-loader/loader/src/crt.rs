//! The ntoskrnl.exe exports only a linked image imports, with the Windows x64 convention: the C
//! runtime routines the compiler emits calls to (`memcpy`, `memmove`, `memset`, `memcmp`) and
//! `KeBugCheckEx`, which wdk-panic's panic handler calls. A host build of the driver gets the
//! first from the host's C library and has the host's panic handler instead of the second.

#![allow(non_snake_case)]

use std::ffi::c_void;

/// `memcpy`.
///
/// # Safety
/// The C contract: `count` bytes readable at `source`, writable at `destination`, apart.
pub unsafe extern "win64" fn memcpy(
    destination: *mut c_void,
    source: *const c_void,
    count: usize,
) -> *mut c_void {
    // SAFETY: the caller's promise.
    unsafe { std::ptr::copy_nonoverlapping(source.cast::<u8>(), destination.cast::<u8>(), count) };
    destination
}

/// `memmove`.
///
/// # Safety
/// The C contract: `count` bytes readable at `source`, writable at `destination`.
pub unsafe extern "win64" fn memmove(
    destination: *mut c_void,
    source: *const c_void,
    count: usize,
) -> *mut c_void {
    // SAFETY: the caller's promise; `copy` allows overlap.
    unsafe { std::ptr::copy(source.cast::<u8>(), destination.cast::<u8>(), count) };
    destination
}

/// `memset`.
///
/// # Safety
/// The C contract: `count` bytes writable at `destination`.
pub unsafe extern "win64" fn memset(
    destination: *mut c_void,
    value: i32,
    count: usize,
) -> *mut c_void {
    // SAFETY: the caller's promise.
    unsafe { std::ptr::write_bytes(destination.cast::<u8>(), value as u8, count) };
    destination
}

/// `memcmp`.
///
/// # Safety
/// The C contract: `count` bytes readable at each.
pub unsafe extern "win64" fn memcmp(a: *const c_void, b: *const c_void, count: usize) -> i32 {
    // SAFETY: the caller's promise.
    let a = unsafe { std::slice::from_raw_parts(a.cast::<u8>(), count) };
    // SAFETY: as above.
    let b = unsafe { std::slice::from_raw_parts(b.cast::<u8>(), count) };
    a.iter()
        .zip(b)
        .find(|(x, y)| x != y)
        .map_or(0, |(x, y)| i32::from(*x) - i32::from(*y))
}

/// wdk-panic's bug check code: "RPNC", a Rust panic in the driver.
const RUST_PANIC: u32 = u32::from_be_bytes(*b"RPNC");

/// What a bug check's code and parameters say.
///
/// # Safety
/// For `RPNC`, `p1`/`p2` are the panic location's file name (address, length), as wdk-panic
/// passes them: readable memory of the image.
unsafe fn describe(code: u32, p1: usize, p2: usize, p3: usize, p4: usize) -> String {
    if code == RUST_PANIC {
        let file = if p1 == 0 || p2 > 4096 {
            "?".to_owned()
        } else {
            // SAFETY: the caller's promise: the panic location's file name.
            String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(p1 as *const u8, p2) })
                .into_owned()
        };
        return format!("RPNC: the driver panicked at {file}:{p3}:{p4}");
    }
    format!(
        "{} ({p1:#x}, {p2:#x}, {p3:#x}, {p4:#x})",
        wdf_emu::verifier::bug_check_name(code)
    )
}

/// `KeBugCheckEx`: the machine halts. Nothing may return into the driver or unwind through its
/// frames, so the process prints the bug check and every finding of the machine so far, and
/// ends with exit status 3 — run an image in a process of its own (the runner does).
///
/// # Safety
/// As for [`describe`].
pub unsafe extern "win64" fn KeBugCheckEx(
    code: u32,
    p1: usize,
    p2: usize,
    p3: usize,
    p4: usize,
) -> ! {
    // SAFETY: the caller's promise.
    let what = unsafe { describe(code, p1, p2, p3, p4) };
    let mut message = format!("sys-loader: bug check {code:#010x} in the loaded driver ({what})");
    if let Some(machine) = wdf_emu::machine::current() {
        machine.bug_check(code, &what);
        for finding in machine.violations() {
            message.push_str(&format!("\n  {finding}"));
        }
    }
    eprintln!("{message}\nsys-loader: the emulated machine halted; this process ends here");
    std::process::exit(3)
}
