//! The control device `\Device\WinVerbs` (`\\.\WinVerbs` for applications): its creation and
//! deletion (when, decided by `wv_core::control::ControlDevice`), its file objects (one WinVerbs
//! provider each, in the file object's context) and its IOCTLs, which go to the driver core —
//! from `EvtIoInCallerContext` for those that run in the caller's process
//! (`wv_core::control::runs_in_caller_context`), from the parallel default queue for the rest.

use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::mem::MaybeUninit;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use wdk::{nt_success, paged_code};
use wdk_sys::ntddk::{IoAllocateWorkItem, IoFreeWorkItem, IoQueueWorkItem};
use wdk_sys::{
    _WDF_DEVICE_IO_TYPE, _WDF_EXECUTION_LEVEL, _WDF_IO_QUEUE_DISPATCH_TYPE, _WDF_REQUEST_TYPE,
    _WDF_TRI_STATE, _WORK_QUEUE_TYPE, DEVICE_OBJECT, NTSTATUS, PDEVICE_OBJECT, PVOID,
    PWDFDEVICE_INIT, STATUS_DEVICE_NOT_READY, STATUS_INSUFFICIENT_RESOURCES, STATUS_SUCCESS,
    WDF_NO_OBJECT_ATTRIBUTES, WDFDEVICE, WDFDEVICE__, WDFDRIVER, WDFFILEOBJECT, WDFQUEUE,
    WDFREQUEST, call_unsafe_wdf_function_binding,
};
use wv_ci::CiVerbs;
use wv_core::FileContext;
use wv_core::control::{ControlAction, runs_in_caller_context};
use wv_hal::FilterDriver;

use crate::entry::{Globals, globals};
use crate::platform::WdfPlatform;
use crate::wdf::context::ContextType;
use crate::wdf::request::Request;
use crate::wdf::string::{ascii_to_utf16, unicode_string};
use crate::wdf::wdf_init;

/// `\Device\WinVerbs` and `\DosDevices\WinVerbs` (spec §3.3).
static DEVICE_NAME: [u16; 16] = ascii_to_utf16(r"\Device\WinVerbs");
static SYMBOLIC_LINK: [u16; 20] = ascii_to_utf16(r"\DosDevices\WinVerbs");
/// OFW's `SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RW_RES_R`, written out: the `SDDL_DEVOBJ_*`
/// constants live in wdmsec.lib, which wdk-build does not link. System all, administrators
/// read/write/execute, everyone read/write, restricted code read.
static SDDL: [u16; 57] =
    ascii_to_utf16("D:P(A;;GA;;;SY)(A;;GRGWGX;;;BA)(A;;GRGW;;;WD)(A;;GR;;;RC)");

/// The control device while it exists, and its WDM device object (work items are queued on
/// it).
static DEVICE: AtomicPtr<WDFDEVICE__> = AtomicPtr::new(null_mut());
static WDM_DEVICE: AtomicPtr<DEVICE_OBJECT> = AtomicPtr::new(null_mut());
/// The system work item that deletes the control device later, allocated with the device so
/// that a deletion never depends on pool at the moment it is decided. Null while it is queued
/// or its routine runs (the routine then owns it), and when there is no device. Changed only
/// under the globals' lock.
static DELETE_ITEM: AtomicPtr<c_void> = AtomicPtr::new(null_mut());

/// The control device, if it exists.
pub fn device() -> Option<WDFDEVICE> {
    let d = DEVICE.load(Ordering::Acquire);
    (!d.is_null()).then_some(d)
}

/// The control device's WDM device object, or null.
pub fn wdm_device() -> PDEVICE_OBJECT {
    WDM_DEVICE.load(Ordering::Acquire)
}

/// One open handle: the driver core's provider for it. WDF zero-fills and frees the context
/// without dropping it: `present` says whether `file` holds a value, and `EvtFileClose` moves
/// it out.
struct FileSlot {
    present: AtomicBool,
    file: UnsafeCell<MaybeUninit<FileContext<WdfPlatform, CiVerbs>>>,
}

static FILE_SLOT: ContextType<FileSlot> = ContextType::new(c"WinVerbsFile", &raw const FILE_SLOT);

/// The provider of an open handle, if its create succeeded and it has not closed.
///
/// # Safety
/// `file` is a live file object of the control device, and the reference is not used after
/// its `EvtFileClose`.
unsafe fn provider<'a>(file: WDFFILEOBJECT) -> Option<&'a FileContext<WdfPlatform, CiVerbs>> {
    // SAFETY: the caller's promise; the control device's file objects have this context.
    let slot = unsafe { FILE_SLOT.get(file.cast()) };
    if !slot.present.load(Ordering::Acquire) {
        return None;
    }
    // SAFETY: `present` says the value was written by `evt_file_create` and not yet moved
    // out (that happens only in `evt_file_close`, after every request of the file ended).
    Some(unsafe { &*slot.file.get().cast::<FileContext<WdfPlatform, CiVerbs>>() })
}

/// Creates the control device (PASSIVE_LEVEL, with the globals' lock held).
pub fn create(driver: WDFDRIVER) -> NTSTATUS {
    paged_code!();
    let sddl = unicode_string(&SDDL);
    // SAFETY: the live driver object; the SDDL string outlives the call.
    let init: PWDFDEVICE_INIT =
        unsafe { call_unsafe_wdf_function_binding!(WdfControlDeviceInitAllocate, driver, &sddl) };
    if init.is_null() {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    let device = match create_device(init) {
        Ok(device) => device,
        Err(status) => {
            // SAFETY: WdfDeviceCreate did not take `init` over; for a control device the
            // driver then frees it.
            unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitFree, init) };
            return status;
        }
    };
    let status = link_and_queue(device);
    if !nt_success(status) {
        // SAFETY: created above and not published: nobody else holds it.
        unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, device.cast()) };
        return status;
    }
    // SAFETY: the live control device.
    let wdm = unsafe { call_unsafe_wdf_function_binding!(WdfDeviceWdmGetDeviceObject, device) };
    // SAFETY: the control device's live WDM device object.
    let item = unsafe { IoAllocateWorkItem(wdm) };
    if item.is_null() {
        // SAFETY: created above and not published: nobody else holds it.
        unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, device.cast()) };
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    DELETE_ITEM.store(item.cast(), Ordering::Release);
    // Published before the device takes requests: the first IOCTL may create queues and work
    // items on it at once.
    WDM_DEVICE.store(wdm, Ordering::Release);
    DEVICE.store(device, Ordering::Release);
    // SAFETY: the live control device, fully set up; this ends its initialisation (from here
    // CreateFile reaches it).
    unsafe { call_unsafe_wdf_function_binding!(WdfControlFinishInitializing, device) };
    STATUS_SUCCESS
}

/// Everything from the init structure to `WdfDeviceCreate`. `Err` leaves `init` the caller's.
fn create_device(init: PWDFDEVICE_INIT) -> Result<WDFDEVICE, NTSTATUS> {
    let mut init = init;
    // SAFETY: (this and each setter below) the init structure is the driver's until
    // WdfDeviceCreate succeeds; PASSIVE_LEVEL. Not exclusive: many processes open WinVerbs.
    unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitSetExclusive, init, 0) };
    // SAFETY: see above.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceInitSetIoType,
            init,
            _WDF_DEVICE_IO_TYPE::WdfDeviceIoBuffered,
        )
    };
    let name = unicode_string(&DEVICE_NAME);
    // SAFETY: see above; the framework copies the name.
    let status = unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitAssignName, init, &name) };
    if !nt_success(status) {
        return Err(status);
    }
    let mut file_config = wdf_init::wdf_fileobject_config_init(
        Some(evt_file_create),
        Some(evt_file_close),
        Some(evt_file_cleanup),
    );
    let mut file_attributes = wdf_init::wdf_object_attributes_init_context_type(FILE_SLOT.info());
    // SAFETY: see above; both structures are copied.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceInitSetFileObjectConfig,
            init,
            &mut file_config,
            &mut file_attributes,
        )
    };
    // SAFETY: see above.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceInitSetIoInCallerContextCallback,
            init,
            Some(evt_io_in_caller_context),
        )
    };
    // PASSIVE_LEVEL callbacks for the device's queues: the core's handlers may wait.
    let mut attributes = wdf_init::wdf_object_attributes_init();
    attributes.ExecutionLevel = _WDF_EXECUTION_LEVEL::WdfExecutionLevelPassive;
    let mut device: WDFDEVICE = null_mut();
    // SAFETY: see above; on success the framework takes `init` over.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceCreate, &mut init, &mut attributes, &mut device)
    };
    if nt_success(status) {
        Ok(device)
    } else {
        Err(status)
    }
}

/// The symbolic link and the default queue.
fn link_and_queue(device: WDFDEVICE) -> NTSTATUS {
    let link = unicode_string(&SYMBOLIC_LINK);
    // SAFETY: the live, not yet published control device; the name is copied.
    let status =
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceCreateSymbolicLink, device, &link) };
    if !nt_success(status) {
        return status;
    }
    let mut config = wdf_init::wdf_io_queue_config_init_default_queue(
        _WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchParallel,
    );
    // A control device's queues cannot be power-managed.
    config.PowerManaged = _WDF_TRI_STATE::WdfFalse;
    config.EvtIoDeviceControl = Some(evt_io_device_control);
    // SAFETY: as above; the queue is parented to the device and deleted with it.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfIoQueueCreate,
            device,
            &mut config,
            WDF_NO_OBJECT_ATTRIBUTES,
            null_mut(),
        )
    }
}

/// Deletes the control device if it is still unused (PASSIVE_LEVEL, outside its callbacks).
pub fn delete_if_unused(g: &Globals) {
    paged_code!();
    let _serialised = g.lock.lock();
    delete_locked(g);
}

/// [`delete_if_unused`] with the globals' lock held. The deletion work item goes with the
/// device when it is in its slot; a queued or running one is freed by its routine, which
/// finds its device gone.
fn delete_locked(g: &Globals) {
    if !g.control.delete_now() {
        return;
    }
    let device = DEVICE.swap(null_mut(), Ordering::AcqRel);
    WDM_DEVICE.store(null_mut(), Ordering::Release);
    let item = DELETE_ITEM.swap(null_mut(), Ordering::AcqRel);
    if !item.is_null() {
        // SAFETY: the slot held it, so it is neither queued nor running: nobody else has it.
        unsafe { IoFreeWorkItem(item.cast()) };
    }
    if !device.is_null() {
        // SAFETY: the control device this driver created, deleted once (the swap took it).
        unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, device.cast()) };
    }
}

/// Queues [`delete_if_unused`] on the deletion work item: the decision was taken inside one of
/// the control device's own callbacks, where it must not be deleted. When the item is already
/// queued or its routine waits for the lock, that run decides (after this decision, since both
/// take the lock). PASSIVE_LEVEL.
fn delete_later(g: &Globals) {
    paged_code!();
    let _serialised = g.lock.lock();
    let item = DELETE_ITEM.swap(null_mut(), Ordering::AcqRel);
    if item.is_null() {
        return;
    }
    // SAFETY: the control device's deletion work item, taken out of its slot, so not queued;
    // the routine receives it as its context and owns it until it gives it back or frees it.
    // The queued item keeps the device object referenced until the routine returns.
    unsafe {
        IoQueueWorkItem(
            item.cast(),
            Some(delete_routine),
            _WORK_QUEUE_TYPE::DelayedWorkQueue,
            item,
        )
    };
}

/// `IO_WORKITEM_ROUTINE` of [`delete_later`]: deletes the device if it is still unused, then
/// puts the work item back in its slot if its device is still there, or frees it.
unsafe extern "C" fn delete_routine(device: PDEVICE_OBJECT, item: PVOID) {
    let Some(g) = globals() else {
        // No globals means no device either (they outlive every device).
        // SAFETY: this routine's own work item, no longer queued.
        unsafe { IoFreeWorkItem(item.cast()) };
        return;
    };
    let _serialised = g.lock.lock();
    delete_locked(g);
    if WDM_DEVICE.load(Ordering::Acquire) == device {
        // Kept for the next close that decides a deletion (the routine has started, so the
        // item may be queued again).
        DELETE_ITEM.store(item, Ordering::Release);
    } else {
        // SAFETY: this routine's own work item; its device is gone and nothing else refers to
        // it (the slot does not hold it).
        unsafe { IoFreeWorkItem(item.cast()) };
    }
}

/// `EvtDeviceFileCreate`: a new WinVerbs provider for the handle (caller's context).
extern "C" fn evt_file_create(_device: WDFDEVICE, request: WDFREQUEST, file: WDFFILEOBJECT) {
    paged_code!();
    let status = match globals() {
        None => STATUS_DEVICE_NOT_READY,
        Some(g) => match g.core.file_create() {
            Ok(provider) => {
                // SAFETY: a live file object of the control device with the FILE_SLOT context,
                // not yet visible to any other callback.
                let slot = unsafe { FILE_SLOT.get(file.cast()) };
                // SAFETY: the slot is empty (WDF zero-filled it) and only this callback writes.
                unsafe {
                    slot.file
                        .get()
                        .cast::<FileContext<WdfPlatform, CiVerbs>>()
                        .write(provider)
                };
                slot.present.store(true, Ordering::Release);
                g.control.file_opened();
                STATUS_SUCCESS
            }
            Err(status) => status.0 as NTSTATUS,
        },
    };
    // SAFETY: the create request the framework handed over, completed once.
    unsafe { call_unsafe_wdf_function_binding!(WdfRequestComplete, request, status) };
}

/// `EvtFileCleanup`: the last handle closed; the core destroys the provider's objects and ends
/// its parked requests (in the closing thread's context).
extern "C" fn evt_file_cleanup(file: WDFFILEOBJECT) {
    paged_code!();
    // SAFETY: a live file object; the reference is used only in this callback.
    if let (Some(g), Some(provider)) = (globals(), unsafe { provider(file) }) {
        g.core.file_cleanup(provider);
    }
}

/// `EvtFileClose`: every request of the file has ended; the provider goes.
extern "C" fn evt_file_close(file: WDFFILEOBJECT) {
    paged_code!();
    let Some(g) = globals() else {
        return;
    };
    // SAFETY: a live file object of the control device with the FILE_SLOT context.
    let slot = unsafe { FILE_SLOT.get(file.cast()) };
    if !slot.present.swap(false, Ordering::AcqRel) {
        return;
    }
    // SAFETY: `present` was true: the value is initialised, and clearing it means nobody
    // reads it again; it is moved out exactly once.
    let provider = unsafe {
        slot.file
            .get()
            .cast::<FileContext<WdfPlatform, CiVerbs>>()
            .read()
    };
    g.core.file_close(provider);
    if g.control.file_closed() == ControlAction::Delete {
        delete_later(g);
    }
}

/// The driver core's dispatch of one IOCTL.
fn dispatch(handle: WDFREQUEST) {
    // SAFETY: a request the framework delivered; the driver owns it from here.
    let request = unsafe { Request::from_handle(handle) };
    // SAFETY: the request's file object, live while the request is.
    let file = unsafe { call_unsafe_wdf_function_binding!(WdfRequestGetFileObject, handle) };
    // SAFETY: a file object of the control device, alive while its request is pending.
    match (globals(), unsafe { provider(file) }) {
        (Some(g), Some(provider)) => g.core.device_io_control(provider, request),
        _ => wv_hal::IoRequest::complete(request, wv_abi::NtStatus::DEVICE_NOT_READY, 0),
    }
}

/// `EvtIoInCallerContext` (PASSIVE_LEVEL, the calling process's thread): the IOCTLs that always
/// complete inline run here, so the verbs that pin or map the caller's memory (device open, MR
/// registration, CQ/QP/SRQ creation) run in its process (spec §7.1-l); the others are queued.
extern "C" fn evt_io_in_caller_context(device: WDFDEVICE, request: WDFREQUEST) {
    let mut parameters = wdf_init::wdf_request_parameters_init();
    // SAFETY: a live request; `parameters` is initialised.
    unsafe { call_unsafe_wdf_function_binding!(WdfRequestGetParameters, request, &mut parameters) };
    let inline = parameters.Type == _WDF_REQUEST_TYPE::WdfRequestTypeDeviceControl && {
        // SAFETY: for an IOCTL the DeviceIoControl member is the one the framework filled.
        let code = unsafe { parameters.Parameters.DeviceIoControl }.IoControlCode;
        runs_in_caller_context(code)
    };
    if inline {
        dispatch(request);
        return;
    }
    // SAFETY: the live control device and a request it received.
    let status =
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceEnqueueRequest, device, request) };
    if !nt_success(status) {
        // SAFETY: not enqueued: the request is still the driver's, completed once.
        unsafe { call_unsafe_wdf_function_binding!(WdfRequestComplete, request, status) };
    }
}

/// `EvtIoDeviceControl` of the parallel default queue (PASSIVE_LEVEL: the device's execution
/// level): requests that may park.
extern "C" fn evt_io_device_control(
    _queue: WDFQUEUE,
    request: WDFREQUEST,
    _output_buffer_length: usize,
    _input_buffer_length: usize,
    _io_control_code: u32,
) {
    dispatch(request);
}
