//! The three symbols a KMDF 1.31 driver binds to — `WdfFunctions_01031`, `WdfFunctionCount`,
//! `WdfDriverGlobals` — and the list of DDIs the emulation implements.
//!
//! `call_unsafe_wdf_function_binding!(WdfXxx, args…)` reads `WdfFunctions_01031` (a pointer to
//! the table), bounds-checks the index against `WdfFunctionCount`, casts the entry to the
//! DDI's `PFN_WDFXXX` type and calls it with `WdfDriverGlobals` first. Every entry the
//! emulation does not implement is a trap that records which index was called (the machine is
//! dead from then on: the driver called something this emulation cannot vouch for).

#![allow(non_upper_case_globals)]

use std::sync::atomic::{AtomicUsize, Ordering};

use wdk_sys::{
    BOOLEAN, KPROCESSOR_MODE, LONG, LPCGUID, NTSTATUS, PCCH, PCUNICODE_STRING,
    PCWDF_OBJECT_CONTEXT_TYPE_INFO, PDEVICE_OBJECT, PDRIVER_OBJECT, PFN_WDF_IO_IN_CALLER_CONTEXT,
    PFN_WDF_IO_QUEUE_STATE, PINTERFACE, PULONG, PVOID, PWDF_DRIVER_CONFIG, PWDF_DRIVER_GLOBALS,
    PWDF_FILEOBJECT_CONFIG, PWDF_IO_QUEUE_CONFIG, PWDF_OBJECT_ATTRIBUTES,
    PWDF_PNPPOWER_EVENT_CALLBACKS, PWDF_REQUEST_PARAMETERS, PWDFDEVICE_INIT, ULONG_PTR,
    UNICODE_STRING, USHORT, WDF_DEVICE_IO_TYPE, WDF_DRIVER_GLOBALS, WDF_IO_QUEUE_STATE, WDFCONTEXT,
    WDFDEVICE, WDFDRIVER, WDFFILEOBJECT, WDFFUNC, WDFOBJECT, WDFQUEUE, WDFREQUEST, WDFWAITLOCK,
};

use crate::{devices, io, objects, requests};

/// Entries in KMDF 1.31's function table (`WdfFunctionTableNumEntries`, the count
/// `fxlibrarycommon.cpp` accepts for a 1.31 client).
pub const ENTRIES: usize = 458;

crate::ddis! {
    WdfDriverCreate [WdfDriverCreateTableIndex, PFN_WDFDRIVERCREATE, Passive,
        fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (driver_object: PDRIVER_OBJECT, registry_path: PCUNICODE_STRING,
         attributes: PWDF_OBJECT_ATTRIBUTES, config: PWDF_DRIVER_CONFIG, driver: *mut WDFDRIVER)
        -> NTSTATUS => objects::driver_create;
    WdfObjectDelete [WdfObjectDeleteTableIndex, PFN_WDFOBJECTDELETE, Dispatch, fail = ()]
        (object: WDFOBJECT) => objects::object_delete;
    WdfObjectReferenceActual [WdfObjectReferenceActualTableIndex, PFN_WDFOBJECTREFERENCEACTUAL,
        Dispatch, fail = ()]
        (object: WDFOBJECT, tag: PVOID, line: LONG, file: PCCH) => objects::reference;
    WdfObjectDereferenceActual [WdfObjectDereferenceActualTableIndex,
        PFN_WDFOBJECTDEREFERENCEACTUAL, Dispatch, fail = ()]
        (object: WDFOBJECT, tag: PVOID, line: LONG, file: PCCH) => objects::dereference;
    WdfObjectGetTypedContextWorker [WdfObjectGetTypedContextWorkerTableIndex,
        PFN_WDFOBJECTGETTYPEDCONTEXTWORKER, Device, fail = objects::inert_context()]
        (object: WDFOBJECT, type_info: PCWDF_OBJECT_CONTEXT_TYPE_INFO) -> PVOID
        => objects::typed_context;

    WdfFdoInitSetFilter [WdfFdoInitSetFilterTableIndex, PFN_WDFFDOINITSETFILTER, Passive,
        fail = ()] (init: PWDFDEVICE_INIT) => devices::fdo_init_set_filter;
    WdfDeviceInitSetPnpPowerEventCallbacks [WdfDeviceInitSetPnpPowerEventCallbacksTableIndex,
        PFN_WDFDEVICEINITSETPNPPOWEREVENTCALLBACKS, Passive, fail = ()]
        (init: PWDFDEVICE_INIT, callbacks: PWDF_PNPPOWER_EVENT_CALLBACKS)
        => devices::init_set_pnp_power_callbacks;
    WdfControlDeviceInitAllocate [WdfControlDeviceInitAllocateTableIndex,
        PFN_WDFCONTROLDEVICEINITALLOCATE, Passive, fail = std::ptr::null_mut()]
        (driver: WDFDRIVER, sddl: *const UNICODE_STRING) -> PWDFDEVICE_INIT
        => devices::control_device_init_allocate;
    WdfDeviceInitFree [WdfDeviceInitFreeTableIndex, PFN_WDFDEVICEINITFREE, Passive, fail = ()]
        (init: PWDFDEVICE_INIT) => devices::init_free;
    WdfDeviceInitSetExclusive [WdfDeviceInitSetExclusiveTableIndex,
        PFN_WDFDEVICEINITSETEXCLUSIVE, Passive, fail = ()]
        (init: PWDFDEVICE_INIT, exclusive: BOOLEAN) => devices::init_set_exclusive;
    WdfDeviceInitSetIoType [WdfDeviceInitSetIoTypeTableIndex, PFN_WDFDEVICEINITSETIOTYPE,
        Passive, fail = ()]
        (init: PWDFDEVICE_INIT, io_type: WDF_DEVICE_IO_TYPE) => devices::init_set_io_type;
    WdfDeviceInitAssignName [WdfDeviceInitAssignNameTableIndex, PFN_WDFDEVICEINITASSIGNNAME,
        Passive, fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (init: PWDFDEVICE_INIT, name: PCUNICODE_STRING) -> NTSTATUS => devices::init_assign_name;
    WdfDeviceInitSetFileObjectConfig [WdfDeviceInitSetFileObjectConfigTableIndex,
        PFN_WDFDEVICEINITSETFILEOBJECTCONFIG, Passive, fail = ()]
        (init: PWDFDEVICE_INIT, config: PWDF_FILEOBJECT_CONFIG,
         attributes: PWDF_OBJECT_ATTRIBUTES) => devices::init_set_file_object_config;
    WdfDeviceInitSetIoInCallerContextCallback [WdfDeviceInitSetIoInCallerContextCallbackTableIndex,
        PFN_WDFDEVICEINITSETIOINCALLERCONTEXTCALLBACK, Passive, fail = ()]
        (init: PWDFDEVICE_INIT, callback: PFN_WDF_IO_IN_CALLER_CONTEXT)
        => devices::init_set_io_in_caller_context;
    WdfDeviceCreate [WdfDeviceCreateTableIndex, PFN_WDFDEVICECREATE, Passive,
        fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (init: *mut PWDFDEVICE_INIT, attributes: PWDF_OBJECT_ATTRIBUTES, device: *mut WDFDEVICE)
        -> NTSTATUS => devices::device_create;
    WdfDeviceCreateSymbolicLink [WdfDeviceCreateSymbolicLinkTableIndex,
        PFN_WDFDEVICECREATESYMBOLICLINK, Passive, fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (device: WDFDEVICE, name: PCUNICODE_STRING) -> NTSTATUS => devices::create_symbolic_link;
    WdfDeviceWdmGetDeviceObject [WdfDeviceWdmGetDeviceObjectTableIndex,
        PFN_WDFDEVICEWDMGETDEVICEOBJECT, Dispatch, fail = std::ptr::null_mut()]
        (device: WDFDEVICE) -> PDEVICE_OBJECT => devices::wdm_get_device_object;
    WdfControlFinishInitializing [WdfControlFinishInitializingTableIndex,
        PFN_WDFCONTROLFINISHINITIALIZING, Passive, fail = ()]
        (device: WDFDEVICE) => devices::control_finish_initializing;
    WdfFdoQueryForInterface [WdfFdoQueryForInterfaceTableIndex, PFN_WDFFDOQUERYFORINTERFACE,
        Passive, fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (fdo: WDFDEVICE, interface_type: LPCGUID, interface: PINTERFACE, size: USHORT,
         version: USHORT, specific: PVOID) -> NTSTATUS => devices::fdo_query_for_interface;
    WdfDeviceEnqueueRequest [WdfDeviceEnqueueRequestTableIndex, PFN_WDFDEVICEENQUEUEREQUEST,
        Dispatch, fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (device: WDFDEVICE, request: WDFREQUEST) -> NTSTATUS => io::device_enqueue_request;

    WdfIoQueueCreate [WdfIoQueueCreateTableIndex, PFN_WDFIOQUEUECREATE, Dispatch,
        fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (device: WDFDEVICE, config: PWDF_IO_QUEUE_CONFIG, attributes: PWDF_OBJECT_ATTRIBUTES,
         queue: *mut WDFQUEUE) -> NTSTATUS => io::queue_create;
    WdfIoQueueRetrieveNextRequest [WdfIoQueueRetrieveNextRequestTableIndex,
        PFN_WDFIOQUEUERETRIEVENEXTREQUEST, Dispatch, fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (queue: WDFQUEUE, out_request: *mut WDFREQUEST) -> NTSTATUS => io::queue_retrieve_next;
    WdfIoQueuePurge [WdfIoQueuePurgeTableIndex, PFN_WDFIOQUEUEPURGE, Dispatch, fail = ()]
        (queue: WDFQUEUE, purge_complete: PFN_WDF_IO_QUEUE_STATE, context: WDFCONTEXT)
        => io::queue_purge;
    WdfIoQueueGetState [WdfIoQueueGetStateTableIndex, PFN_WDFIOQUEUEGETSTATE, Dispatch,
        fail = 0]
        (queue: WDFQUEUE, queued: PULONG, driver: PULONG) -> WDF_IO_QUEUE_STATE
        => io::queue_get_state;
    WdfRequestForwardToIoQueue [WdfRequestForwardToIoQueueTableIndex,
        PFN_WDFREQUESTFORWARDTOIOQUEUE, Dispatch, fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (request: WDFREQUEST, queue: WDFQUEUE) -> NTSTATUS => io::request_forward_to_queue;

    WdfRequestCompleteWithInformation [WdfRequestCompleteWithInformationTableIndex,
        PFN_WDFREQUESTCOMPLETEWITHINFORMATION, Dispatch, fail = ()]
        (request: WDFREQUEST, status: NTSTATUS, information: ULONG_PTR)
        => requests::complete_with_information;
    WdfRequestComplete [WdfRequestCompleteTableIndex, PFN_WDFREQUESTCOMPLETE, Dispatch,
        fail = ()] (request: WDFREQUEST, status: NTSTATUS) => requests::complete;
    WdfRequestGetParameters [WdfRequestGetParametersTableIndex, PFN_WDFREQUESTGETPARAMETERS,
        Dispatch, fail = ()]
        (request: WDFREQUEST, parameters: PWDF_REQUEST_PARAMETERS) => requests::get_parameters;
    WdfRequestRetrieveInputBuffer [WdfRequestRetrieveInputBufferTableIndex,
        PFN_WDFREQUESTRETRIEVEINPUTBUFFER, Dispatch, fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (request: WDFREQUEST, minimum: usize, buffer: *mut PVOID, length: *mut usize) -> NTSTATUS
        => requests::retrieve_buffer::<false>;
    WdfRequestRetrieveOutputBuffer [WdfRequestRetrieveOutputBufferTableIndex,
        PFN_WDFREQUESTRETRIEVEOUTPUTBUFFER, Dispatch, fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (request: WDFREQUEST, minimum: usize, buffer: *mut PVOID, length: *mut usize) -> NTSTATUS
        => requests::retrieve_buffer::<true>;
    WdfRequestGetFileObject [WdfRequestGetFileObjectTableIndex, PFN_WDFREQUESTGETFILEOBJECT,
        Dispatch, fail = std::ptr::null_mut()]
        (request: WDFREQUEST) -> WDFFILEOBJECT => requests::get_file_object;
    WdfRequestGetRequestorMode [WdfRequestGetRequestorModeTableIndex,
        PFN_WDFREQUESTGETREQUESTORMODE, Dispatch, fail = 0]
        (request: WDFREQUEST) -> KPROCESSOR_MODE => requests::get_requestor_mode;

    WdfWaitLockCreate [WdfWaitLockCreateTableIndex, PFN_WDFWAITLOCKCREATE, Dispatch,
        fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (attributes: PWDF_OBJECT_ATTRIBUTES, lock: *mut WDFWAITLOCK) -> NTSTATUS
        => objects::wait_lock_create;
    WdfWaitLockAcquire [WdfWaitLockAcquireTableIndex, PFN_WDFWAITLOCKACQUIRE, Dispatch,
        fail = wdk_sys::STATUS_INVALID_DEVICE_REQUEST]
        (lock: WDFWAITLOCK, timeout: *mut i64) -> NTSTATUS => objects::wait_lock_acquire;
    WdfWaitLockRelease [WdfWaitLockReleaseTableIndex, PFN_WDFWAITLOCKRELEASE, Dispatch,
        fail = ()] (lock: WDFWAITLOCK) => objects::wait_lock_release;
}

include!(concat!(env!("OUT_DIR"), "/traps.rs"));

/// A call through an entry the emulation does not implement.
fn trap(index: usize) {
    if let Some(machine) = crate::machine::current() {
        machine.bug_check(
            crate::verifier::WDF_VIOLATION,
            format!(
                "WdfFunctions_01031[{index}]: the driver called a DDI this emulation does not \
                 implement (table index {index})"
            ),
        );
    } else {
        eprintln!("wdf-emu: unimplemented DDI {index} called with no machine running");
    }
}

/// The trap of entry `N`, C convention. Returns nothing useful: the caller's result register
/// holds 0 (a null handle or pointer, `STATUS_SUCCESS`), and the run has already failed.
unsafe extern "C" fn trap_c<const N: usize>() {
    trap(N);
}

/// The trap of entry `N`, Windows x64 convention.
unsafe extern "win64" fn trap_win64<const N: usize>() {
    trap(N);
}

/// A Windows-convention trap as a table entry (the table's type is the bindings' `WDFFUNC`).
const fn erase_win64(f: unsafe extern "win64" fn()) -> WDFFUNC {
    // SAFETY: a table entry is a type-erased function pointer; a loader calls it back with the
    // Windows convention.
    Some(unsafe { std::mem::transmute::<unsafe extern "win64" fn(), unsafe extern "C" fn()>(f) })
}

const TABLES: ([WDFFUNC; ENTRIES], [WDFFUNC; ENTRIES]) = install(C_TRAPS, WIN64_TRAPS);

/// The function table with the C convention: what a host build of the driver calls.
pub static C_TABLE: [WDFFUNC; ENTRIES] = TABLES.0;

/// The function table with the Windows x64 convention, for a loader to hand to a linked image
/// (its `WdfVersionBind` answer).
pub static WIN64_TABLE: [WDFFUNC; ENTRIES] = TABLES.1;

/// `WdfFunctions_01031`: the pointer to the table the driver's calls index.
#[unsafe(no_mangle)]
pub static mut WdfFunctions_01031: *const WDFFUNC = C_TABLE.as_ptr();

/// `WdfFunctionCount`: the table's length, which the driver's calls bound-check against.
#[unsafe(no_mangle)]
pub static mut WdfFunctionCount: u32 = ENTRIES as u32;

/// The driver's globals, which every DDI receives first.
static mut GLOBALS: WDF_DRIVER_GLOBALS = {
    // SAFETY: WDF_DRIVER_GLOBALS is a handle, integers and a character array: all-zero bytes
    // are a valid value (no driver yet).
    unsafe { std::mem::zeroed() }
};

/// `WdfDriverGlobals`: the pointer the driver passes as every DDI's first argument.
#[unsafe(no_mangle)]
pub static mut WdfDriverGlobals: PWDF_DRIVER_GLOBALS = &raw mut GLOBALS;

/// The globals pointer this emulation hands out (a loader's `WdfVersionBind` answer).
pub fn driver_globals() -> PWDF_DRIVER_GLOBALS {
    &raw mut GLOBALS
}

/// The framework driver handle recorded in the globals by `WdfDriverCreate`.
static DRIVER_HANDLE: AtomicUsize = AtomicUsize::new(0);

/// Records the framework driver object in the globals (`WdfDriverCreate`), or clears it.
pub(crate) fn set_driver(handle: usize) {
    DRIVER_HANDLE.store(handle, Ordering::SeqCst);
    let globals = driver_globals();
    // SAFETY: the machine is the only writer of the globals, and no DDI is running while it
    // boots or while DriverEntry creates the driver (the driver reads only the pointer to
    // them, never the fields).
    unsafe { (*globals).Driver = handle as WDFDRIVER };
}

/// `WDF_DRIVER_GLOBALS::DisplaceDriverUnload`: whether the FxDriverEntry stub is to put its
/// unload routine in front of the framework's (set by `WdfDriverCreate`).
pub(crate) fn set_displace_driver_unload(displace: bool) {
    let globals = driver_globals();
    // SAFETY: as in `set_driver`: DriverEntry is running, the stub reads the field after it.
    unsafe { (*globals).DisplaceDriverUnload = u8::from(displace) };
}

/// Back to no driver, and the table pointer and count to their values (a test may have
/// changed them to provoke a failure).
pub(crate) fn reset_globals() {
    set_driver(0);
    set_displace_driver_unload(false);
    let globals = driver_globals();
    // SAFETY: as in `set_driver`; the name is informational.
    unsafe {
        let name = b"WinVerbs\0";
        for (i, b) in name.iter().enumerate() {
            (*globals).DriverName[i] = *b as i8;
        }
    }
    // SAFETY: no machine is running a driver while it boots or after it is torn down.
    unsafe { WdfFunctions_01031 = C_TABLE.as_ptr() };
    // SAFETY: as above.
    unsafe { WdfFunctionCount = ENTRIES as u32 };
}

/// Which table indices the driver may call without trapping.
pub fn is_implemented(index: usize) -> bool {
    IMPLEMENTED.iter().any(|(_, i)| *i == index)
}

/// The type-erased `WDFFILEOBJECT` of a file handle value (for tests).
pub fn file_handle(value: usize) -> WDFFILEOBJECT {
    value as WDFFILEOBJECT
}

/// The type-erased handle of a device (for tests).
pub fn device_handle(value: usize) -> WDFDEVICE {
    value as WDFDEVICE
}

/// The type-erased handle of a queue (for tests).
pub fn queue_handle(value: usize) -> WDFQUEUE {
    value as WDFQUEUE
}

/// The type-erased handle of a request (for tests).
pub fn request_handle(value: usize) -> WDFREQUEST {
    value as WDFREQUEST
}
