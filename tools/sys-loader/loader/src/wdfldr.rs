//! `WDFLDR.SYS` as a linked image sees it: `WdfVersionBind` and `WdfVersionUnbind`
//! (prototypes in `fxldr.h`, behaviour in `fxlibrarycommon.cpp` of
//! microsoft/Windows-Driver-Frameworks), with the Windows x64 convention, answered by the
//! emulated KMDF 1.31.
//!
//! The bind checks the `WDF_BIND_INFO` the image's `FxDriverEntry` stub passes as the framework
//! does — a known component (`KmdfLibrary`), major version 1, a minor version the library is
//! not older than, and for a client newer than 1.15 exactly the library's table size — then
//! stores the Windows-convention function table's address through `FuncTable` (the image's
//! `WdfFunctions_01031`) and the driver's globals through `ComponentGlobals` (its
//! `WdfDriverGlobals`). The unbind must name the same bind info, globals and registry path.
//! Every bind, refusal and unbind is recorded ([`events`]); after an unload the image must have
//! bound and unbound exactly once ([`unload_findings`]).

#![allow(non_snake_case)]

use std::ffi::c_void;
use std::sync::Mutex;

use wdk_sys::{NTSTATUS, PDRIVER_OBJECT, PWDF_DRIVER_GLOBALS, UNICODE_STRING};

/// `WDF_VERSION`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WDF_VERSION {
    /// `Major`.
    pub Major: u32,
    /// `Minor`.
    pub Minor: u32,
    /// `Build`.
    pub Build: u32,
}

/// `WDF_BIND_INFO` (version 1).
#[repr(C)]
#[derive(Debug)]
pub struct WDF_BIND_INFO {
    /// `Size`.
    pub Size: u32,
    /// `Component`: the framework's name, NUL-terminated UTF-16.
    pub Component: *const u16,
    /// `Version`.
    pub Version: WDF_VERSION,
    /// `FuncCount`: the client's table size.
    pub FuncCount: u32,
    /// `FuncTable`: where the framework stores its table's address.
    pub FuncTable: *mut *const c_void,
    /// `Module`.
    pub Module: *mut c_void,
}

const _: () = assert!(size_of::<WDF_BIND_INFO>() == 48);

/// The framework's component name.
pub const KMDF_COMPONENT: &str = "KmdfLibrary";
/// The emulated framework's version.
pub const KMDF_MAJOR: u32 = 1;
/// The emulated framework's minor version.
pub const KMDF_MINOR: u32 = 31;
/// `WdfFunctionTableNumEntries_V1_15`: from here on a client's count must equal the library's.
const FUNCTION_COUNT_1_15: u32 = 444;

const STATUS_SUCCESS: NTSTATUS = 0;
const STATUS_UNSUCCESSFUL: NTSTATUS = 0xC000_0001_u32 as NTSTATUS;
const STATUS_INVALID_PARAMETER: NTSTATUS = 0xC000_000D_u32 as NTSTATUS;
const STATUS_OBJECT_TYPE_MISMATCH: NTSTATUS = 0xC000_0024_u32 as NTSTATUS;
const STATUS_OBJECT_NAME_NOT_FOUND: NTSTATUS = 0xC000_0034_u32 as NTSTATUS;

/// What the framework loader saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A bind that succeeded.
    Bound {
        /// The component named.
        component: String,
        /// The client's version.
        version: (u32, u32, u32),
        /// The client's table size.
        functions: u32,
        /// The bind info's address.
        info: usize,
        /// The registry path passed.
        registry_path: String,
    },
    /// A bind that was refused, and why.
    Refused(String),
    /// An unbind.
    Unbound {
        /// The bind info's address.
        info: usize,
        /// The registry path passed.
        registry_path: String,
    },
}

static EVENTS: Mutex<Vec<Event>> = Mutex::new(Vec::new());

/// Everything recorded since the last load began.
pub fn events() -> Vec<Event> {
    EVENTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

fn record(event: Event) {
    EVENTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(event);
}

/// Clears the record (a new load begins).
pub(crate) fn forget() {
    EVENTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clear();
}

/// After an unload: the image bound once and unbound once, with the same bind info.
pub fn unload_findings() -> Vec<String> {
    let events = events();
    // The bind infos of the binds (`unbind` false) or of the unbinds, in order.
    let infos = |unbind: bool| -> Vec<usize> {
        events
            .iter()
            .filter_map(|e| match (e, unbind) {
                (Event::Bound { info, .. }, false) | (Event::Unbound { info, .. }, true) => {
                    Some(*info)
                }
                _ => None,
            })
            .collect()
    };
    let (bound, unbound) = (infos(false), infos(true));
    if bound.len() == 1 && unbound == bound {
        return Vec::new();
    }
    vec![format!(
        "sys-loader: the image bound to the framework {} time(s) and unbound {} time(s) \
         (WdfVersionBind, WdfVersionUnbind: once each, with the same bind info): {events:?}",
        bound.len(),
        unbound.len()
    )]
}

/// The text of a counted UTF-16 string (at most 32 KiB).
///
/// # Safety
/// `s` is null or a valid `UNICODE_STRING`.
unsafe fn text(s: *const UNICODE_STRING) -> Option<String> {
    // SAFETY: the caller's promise.
    let s = unsafe { s.as_ref() }?;
    if s.Buffer.is_null() {
        return Some(String::new());
    }
    let units = usize::from(s.Length / 2);
    // SAFETY: `Length` bytes at `Buffer` (the caller's promise).
    let buffer = unsafe { std::slice::from_raw_parts(s.Buffer, units) };
    Some(String::from_utf16_lossy(buffer))
}

/// The NUL-terminated UTF-16 name at `p` (at most 64 units).
///
/// # Safety
/// `p` is null or points at a NUL-terminated UTF-16 string, or at 64 readable units.
unsafe fn component(p: *const u16) -> Option<String> {
    if p.is_null() {
        return None;
    }
    let mut units = Vec::new();
    for i in 0..64 {
        // SAFETY: the caller's promise; stops at the NUL.
        let unit = unsafe { p.wrapping_add(i).read() };
        if unit == 0 {
            break;
        }
        units.push(unit);
    }
    Some(String::from_utf16_lossy(&units))
}

/// Refuses a bind: recorded, and a violation on the machine (the image must bind).
fn refuse(machine: Option<&wdf_emu::machine::Inner>, status: NTSTATUS, why: String) -> NTSTATUS {
    let message = format!("WdfVersionBind refused the image ({status:#010x}): {why}");
    if let Some(m) = machine {
        m.violation(format!("sys-loader: {message}"));
    }
    record(Event::Refused(message));
    status
}

/// `WDFLDR.SYS!WdfVersionBind`.
///
/// # Safety
/// The loader's contract with the stub: `registry_path` is null or a valid string, `info` null
/// or a valid `WDF_BIND_INFO` whose `FuncTable` is null or writable, `globals` null or
/// writable.
pub unsafe extern "win64" fn WdfVersionBind(
    driver_object: PDRIVER_OBJECT,
    registry_path: *mut UNICODE_STRING,
    info: *mut WDF_BIND_INFO,
    globals: *mut PWDF_DRIVER_GLOBALS,
) -> NTSTATUS {
    let _host = wv_host::kernel::host_scope();
    let machine = wdf_emu::machine::current();
    let m = machine.as_deref();
    // SAFETY: the caller's promise.
    let Some(bind) = (unsafe { info.as_ref() }) else {
        return refuse(m, STATUS_INVALID_PARAMETER, "BindInfo is NULL".into());
    };
    if globals.is_null() || bind.FuncTable.is_null() {
        return refuse(
            m,
            STATUS_INVALID_PARAMETER,
            "ComponentGlobals or FuncTable is NULL".into(),
        );
    }
    if (bind.Size as usize) < size_of::<WDF_BIND_INFO>() {
        return refuse(
            m,
            STATUS_INVALID_PARAMETER,
            format!("BindInfo.Size {}", bind.Size),
        );
    }
    // SAFETY: the stub's component name.
    let name = unsafe { component(bind.Component) }.unwrap_or_default();
    if name != KMDF_COMPONENT {
        return refuse(
            m,
            STATUS_OBJECT_NAME_NOT_FOUND,
            format!("no framework named {name:?} (KMDF is {KMDF_COMPONENT:?})"),
        );
    }
    let WDF_VERSION {
        Major,
        Minor,
        Build,
    } = bind.Version;
    if Major != KMDF_MAJOR || Minor > KMDF_MINOR {
        return refuse(
            m,
            STATUS_OBJECT_TYPE_MISMATCH,
            format!(
                "the client wants KMDF {Major}.{Minor}; the library is {KMDF_MAJOR}.{KMDF_MINOR}"
            ),
        );
    }
    let count = wdf_emu::table::ENTRIES as u32;
    if bind.FuncCount > count || (bind.FuncCount > FUNCTION_COUNT_1_15 && bind.FuncCount != count) {
        return refuse(
            m,
            STATUS_INVALID_PARAMETER,
            format!(
                "function table count {} does not match the library's {count}",
                bind.FuncCount
            ),
        );
    }
    if bind.FuncCount <= FUNCTION_COUNT_1_15 {
        return refuse(
            m,
            STATUS_INVALID_PARAMETER,
            format!(
                "a KMDF {Major}.{Minor} client (table size {}): the emulation serves 1.31 clients",
                bind.FuncCount
            ),
        );
    }
    // SAFETY: the caller's promise.
    let path = unsafe { text(registry_path) }.unwrap_or_default();
    let Some(m) = m else {
        eprintln!("sys-loader: WdfVersionBind called with no machine running");
        return STATUS_UNSUCCESSFUL;
    };
    if driver_object != m.driver_object() {
        m.violation(format!(
            "sys-loader: WdfVersionBind with driver object {driver_object:p}, not the one \
             DriverEntry received"
        ));
    }
    // SAFETY: the image's `WdfFunctions_01031` (FuncTable, checked non-null): from 1.15 on the
    // framework stores its table's address there.
    unsafe {
        bind.FuncTable
            .write(wdf_emu::table::WIN64_TABLE.as_ptr().cast())
    };
    // SAFETY: the image's `WdfDriverGlobals` (checked non-null).
    unsafe { globals.write(wdf_emu::table::driver_globals()) };
    record(Event::Bound {
        component: name,
        version: (Major, Minor, Build),
        functions: bind.FuncCount,
        info: info as usize,
        registry_path: path,
    });
    STATUS_SUCCESS
}

/// `WDFLDR.SYS!WdfVersionUnbind`.
///
/// # Safety
/// As for [`WdfVersionBind`]; `globals` is what the bind stored.
pub unsafe extern "win64" fn WdfVersionUnbind(
    registry_path: *mut UNICODE_STRING,
    info: *mut WDF_BIND_INFO,
    globals: PWDF_DRIVER_GLOBALS,
) -> NTSTATUS {
    let _host = wv_host::kernel::host_scope();
    // SAFETY: the caller's promise.
    let path = unsafe { text(registry_path) }.unwrap_or_default();
    let bound = events().iter().rev().find_map(|e| match e {
        Event::Bound {
            info,
            registry_path,
            ..
        } => Some((*info, registry_path.clone())),
        _ => None,
    });
    let mut problems = Vec::new();
    match &bound {
        None => problems.push("no bind to undo".to_owned()),
        Some((bound_info, bound_path)) => {
            if *bound_info != info as usize {
                problems.push(format!(
                    "BindInfo {info:p} is not the one bound ({bound_info:#x})"
                ));
            }
            if *bound_path != path {
                problems.push(format!(
                    "registry path {path:?} is not the one bound ({bound_path:?})"
                ));
            }
        }
    }
    if globals != wdf_emu::table::driver_globals() {
        problems.push(format!(
            "ComponentGlobals {globals:p} are not the ones the bind gave"
        ));
    }
    if !problems.is_empty()
        && let Some(m) = wdf_emu::machine::current()
    {
        m.violation(format!(
            "sys-loader: WdfVersionUnbind: {}",
            problems.join("; ")
        ));
    }
    record(Event::Unbound {
        info: info as usize,
        registry_path: path,
    });
    if problems.is_empty() {
        STATUS_SUCCESS
    } else {
        STATUS_INVALID_PARAMETER
    }
}
