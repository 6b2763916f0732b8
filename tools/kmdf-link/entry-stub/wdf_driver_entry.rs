//! `FxDriverEntry` for the Linux link of `winverbs.sys`: what the WDK's `WdfDriverEntry.lib`
//! puts into every KMDF driver, written for this project from the publicly described behaviour
//! (`fxldr.h`, `fxlibrarycommon.cpp` in microsoft/Windows-Driver-Frameworks; the loader
//! contract of `WdfVersionBind`). Nothing of Microsoft's stub is in it.
//!
//! A Windows build never contains this file: wdk-build links the WDK's `WdfDriverEntry.lib`,
//! and only `tools/kmdf-link/build.rs` compiles this one, for a link on a machine that has no
//! WDK. It is the image's entry point (`/ENTRY:FxDriverEntry`):
//!
//! 1. keeps a copy of the registry path (the I/O manager's buffer is only valid during the
//!    call, and the unbind at unload needs it);
//! 2. binds to the framework: `WDFLDR.SYS!WdfVersionBind` with a `WDF_BIND_INFO` naming
//!    `KmdfLibrary` 1.31 and 458 functions, which points the driver's `WdfFunctions_01031` at
//!    the framework's table and `WdfDriverGlobals` at the driver's globals;
//! 3. calls the driver's `DriverEntry`; if it fails, unbinds and returns its status;
//! 4. if the framework asks for it (`WdfDriverGlobals->DisplaceDriverUnload`, set by
//!    `WdfDriverCreate`), puts its own unload routine in front of the one the framework
//!    installed, so that the framework unloads the driver first and the stub unbinds last.
//!
//! It also defines the symbols the driver's WDF calls read: `WdfFunctions_01031`,
//! `WdfDriverGlobals`, `WdfFunctionCount` (458: the table the driver was compiled against),
//! `WdfStructures` and `WdfMinimumVersionRequired`.
//!
//! Compiled on its own into one object file (`--emit=obj`), so it must not call anything from
//! `core` that is not inlined (no panics, no bounds checks): the driver's `core` is inside its
//! LTO unit, invisible to this object. The link fails on any such reference.
#![no_std]
// The C names, as the WDK spells them.
#![allow(non_snake_case, non_upper_case_globals, non_camel_case_types)]
#![allow(clippy::upper_case_acronyms)]

use core::ffi::c_void;
use core::ptr::{null, null_mut};

type NTSTATUS = i32;

/// `UNICODE_STRING`.
#[repr(C)]
pub struct UNICODE_STRING {
    Length: u16,
    MaximumLength: u16,
    Buffer: *mut u16,
}

/// `WDF_VERSION` (`fxldr.h`).
#[repr(C)]
pub struct WDF_VERSION {
    Major: u32,
    Minor: u32,
    Build: u32,
}

/// `WDF_BIND_INFO` (`fxldr.h`), the version-1 layout: 48 bytes on x64.
#[repr(C)]
pub struct WDF_BIND_INFO {
    Size: u32,
    Component: *const u16,
    Version: WDF_VERSION,
    FuncCount: u32,
    /// The address of `WdfFunctions_01031`: the framework stores its table's address there.
    FuncTable: *mut *const c_void,
    Module: *mut c_void,
}

/// The start of `WDF_DRIVER_GLOBALS` (wdfglobals.h): the stub reads `DisplaceDriverUnload`.
#[repr(C)]
pub struct WDF_DRIVER_GLOBALS {
    Driver: *mut c_void,
    DriverFlags: u32,
    DriverTag: u32,
    DriverName: [u8; 32],
    DisplaceDriverUnload: u8,
}

/// `DRIVER_UNLOAD`.
type DriverUnload = unsafe extern "system" fn(*mut c_void);

/// The offset of `DRIVER_OBJECT::DriverUnload` on x64 (`tools/sys-loader` asserts it against
/// the bindings' `DRIVER_OBJECT`).
const DRIVER_OBJECT_DRIVER_UNLOAD: usize = 0x68;

/// `WdfFunctionTableNumEntries` of KMDF 1.31: the table the driver was compiled against.
const KMDF_1_31_FUNCTION_COUNT: u32 = 458;

/// The registry path copy's capacity, in UTF-16 units (a service key path is far shorter).
const REGISTRY_PATH_CAPACITY: usize = 260;

const STATUS_SUCCESS: NTSTATUS = 0;

unsafe extern "system" {
    fn WdfVersionBind(
        DriverObject: *mut c_void,
        RegistryPath: *mut UNICODE_STRING,
        BindInfo: *mut WDF_BIND_INFO,
        ComponentGlobals: *mut *mut WDF_DRIVER_GLOBALS,
    ) -> NTSTATUS;
    fn WdfVersionUnbind(
        RegistryPath: *mut UNICODE_STRING,
        BindInfo: *mut WDF_BIND_INFO,
        ComponentGlobals: *mut WDF_DRIVER_GLOBALS,
    ) -> NTSTATUS;
    fn DriverEntry(DriverObject: *mut c_void, RegistryPath: *mut UNICODE_STRING) -> NTSTATUS;
}

/// `KmdfLibrary`, NUL-terminated UTF-16: the framework the driver binds to.
static COMPONENT: [u16; 12] = [
    b'K' as u16,
    b'm' as u16,
    b'd' as u16,
    b'f' as u16,
    b'L' as u16,
    b'i' as u16,
    b'b' as u16,
    b'r' as u16,
    b'a' as u16,
    b'r' as u16,
    b'y' as u16,
    0,
];

/// `WdfFunctions_01031`: null until the bind stores the framework's table address here.
#[unsafe(no_mangle)]
pub static mut WdfFunctions_01031: *const c_void = null();

/// `WdfDriverGlobals`: null until the bind stores the driver's globals here.
#[unsafe(no_mangle)]
pub static mut WdfDriverGlobals: *mut WDF_DRIVER_GLOBALS = null_mut();

/// `WdfFunctionCount`: the length of the table the driver indexes.
#[unsafe(no_mangle)]
pub static mut WdfFunctionCount: u32 = KMDF_1_31_FUNCTION_COUNT;

/// `WdfStructures`: the structure-size table of bind-info version 2; this stub binds with
/// version 1, so it stays null.
#[unsafe(no_mangle)]
pub static mut WdfStructures: *const c_void = null();

/// `WdfMinimumVersionRequired`: the oldest KMDF minor version the driver runs on.
#[unsafe(no_mangle)]
pub static mut WdfMinimumVersionRequired: u32 = 31;

static mut BIND_INFO: WDF_BIND_INFO = WDF_BIND_INFO {
    Size: size_of::<WDF_BIND_INFO>() as u32,
    Component: (&raw const COMPONENT).cast(),
    Version: WDF_VERSION {
        Major: 1,
        Minor: 31,
        Build: 0,
    },
    FuncCount: KMDF_1_31_FUNCTION_COUNT,
    FuncTable: &raw mut WdfFunctions_01031,
    Module: null_mut(),
};

static mut REGISTRY_PATH_BUFFER: [u16; REGISTRY_PATH_CAPACITY] = [0; REGISTRY_PATH_CAPACITY];

static mut REGISTRY_PATH: UNICODE_STRING = UNICODE_STRING {
    Length: 0,
    MaximumLength: (REGISTRY_PATH_CAPACITY * 2) as u16,
    Buffer: (&raw mut REGISTRY_PATH_BUFFER).cast(),
};

/// The unload routine the framework had installed when the stub displaced it.
static mut DISPLACED_UNLOAD: Option<DriverUnload> = None;

/// The `DriverUnload` slot of a driver object (the address only: nothing is read).
fn unload_slot(driver_object: *mut c_void) -> *mut Option<DriverUnload> {
    driver_object
        .cast::<u8>()
        .wrapping_add(DRIVER_OBJECT_DRIVER_UNLOAD)
        .cast()
}

/// Copies `source` into the stub's registry path (truncated to its capacity, as
/// `RtlCopyUnicodeString` does).
///
/// # Safety
/// `source` is null or a valid `UNICODE_STRING`; no other thread runs the stub (the system
/// calls the entry point once).
unsafe fn keep_registry_path(source: *const UNICODE_STRING) {
    // SAFETY: the caller's promise.
    let Some(source) = (unsafe { source.as_ref() }) else {
        return;
    };
    let units = (source.Length as usize / 2).min(REGISTRY_PATH_CAPACITY);
    let target = (&raw mut REGISTRY_PATH_BUFFER).cast::<u16>();
    let mut i = 0;
    while i < units {
        // SAFETY: `i` is below the source's length.
        let unit = unsafe { source.Buffer.wrapping_add(i).read() };
        // SAFETY: `i` is below the buffer's capacity; only this thread runs the stub.
        unsafe { target.wrapping_add(i).write(unit) };
        i += 1;
    }
    let path = &raw mut REGISTRY_PATH;
    // SAFETY: the stub's own string; only this thread runs the stub.
    unsafe { (*path).Length = (units * 2) as u16 };
}

/// Unbinds from the framework.
///
/// # Safety
/// The bind succeeded and has not been undone.
unsafe fn unbind() {
    let (path, info, slot) = (
        &raw mut REGISTRY_PATH,
        &raw mut BIND_INFO,
        &raw const WdfDriverGlobals,
    );
    // SAFETY: the bind stored the globals; nothing writes them after it.
    let globals = unsafe { slot.read() };
    // SAFETY: the bind's own registry path, bind info and globals.
    let _ = unsafe { WdfVersionUnbind(path, info, globals) };
}

/// The unload routine the stub installs: the framework's unload first, then the unbind.
///
/// # Safety
/// Called once by the I/O manager with the driver's object, after `FxDriverEntry` succeeded.
unsafe extern "system" fn FxStubDriverUnload(driver_object: *mut c_void) {
    let slot = &raw const DISPLACED_UNLOAD;
    // SAFETY: written once in FxDriverEntry, before the I/O manager could call this.
    let displaced = unsafe { slot.read() };
    if let Some(displaced) = displaced {
        // SAFETY: the framework's unload routine, with its driver object.
        unsafe { displaced(driver_object) };
    }
    // SAFETY: the bind FxDriverEntry made.
    unsafe { unbind() };
}

/// The image's entry point.
///
/// # Safety
/// Called once by the system, at PASSIVE_LEVEL, with a valid driver object and registry path.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn FxDriverEntry(
    driver_object: *mut c_void,
    registry_path: *mut UNICODE_STRING,
) -> NTSTATUS {
    // SAFETY: the system's registry path for this call.
    unsafe { keep_registry_path(registry_path) };
    let (path, info, globals_slot) = (
        &raw mut REGISTRY_PATH,
        &raw mut BIND_INFO,
        &raw mut WdfDriverGlobals,
    );
    // SAFETY: the system's driver object; the bind info and the two symbols it writes are
    // this stub's statics.
    let status = unsafe { WdfVersionBind(driver_object, path, info, globals_slot) };
    if status < STATUS_SUCCESS {
        return status;
    }
    // SAFETY: the system's arguments, passed on to the driver's entry point.
    let status = unsafe { DriverEntry(driver_object, registry_path) };
    if status < STATUS_SUCCESS {
        // SAFETY: the bind above succeeded.
        unsafe { unbind() };
        return status;
    }
    // SAFETY: a successful bind stored the driver's globals; nothing writes them now.
    let globals = unsafe { globals_slot.read() };
    // SAFETY: the framework's globals for this driver, or null.
    let displace = unsafe { globals.as_ref() }.is_some_and(|g| g.DisplaceDriverUnload != 0);
    if displace {
        let slot = unload_slot(driver_object);
        // SAFETY: the system's driver object; DriverEntry has returned and nothing else runs
        // yet: the slot holds the framework's unload routine (or none).
        let framework = unsafe { slot.read() };
        let displaced = &raw mut DISPLACED_UNLOAD;
        // SAFETY: written once, here, before any unload can run.
        unsafe { displaced.write(framework) };
        // SAFETY: as above.
        unsafe { slot.write(Some(FxStubDriverUnload)) };
    }
    status
}
