//! The control device `\Device\WinVerbs` (`\\.\WinVerbs` for applications): its creation and
//! deletion (when, decided by `wv_core::control::ControlDevice`), its file objects (one WinVerbs
//! provider each, in the file object's context) and its IOCTLs, which go to the driver core —
//! from `EvtIoInCallerContext` for those that run in the caller's thread at PASSIVE_LEVEL
//! (`wv_core::control::in_caller_context`), from the parallel default queue for the rest.

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use wdk::{nt_success, paged_code};
use wdk_sys::{
    _WDF_DEVICE_IO_TYPE, _WDF_EXECUTION_LEVEL, _WDF_FILEOBJECT_CLASS, _WDF_IO_QUEUE_DISPATCH_TYPE,
    _WDF_TRI_STATE, DEVICE_OBJECT, NTSTATUS, PDEVICE_OBJECT, STATUS_DEVICE_NOT_READY,
    STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_DEVICE_REQUEST, STATUS_SUCCESS, WDFDEVICE,
    WDFDEVICE__, WDFDRIVER, WDFFILEOBJECT, WDFQUEUE, WDFREQUEST,
};
use wv_ci::CiVerbs;
use wv_core::FileContext;
use wv_core::control::{CallerContext, ControlAction, in_caller_context};
use wv_hal::{FilterDriver, IoRequest, Platform};

use crate::entry::{Globals, globals};
use crate::platform::WdfPlatform;
use crate::wdf::context::ContextType;
use crate::wdf::device::Device;
use crate::wdf::device_init::ControlDeviceInit;
use crate::wdf::queue::create_default_queue;
use crate::wdf::request::{OwnedRequest, Request};
use crate::wdf::string::{ascii_to_utf16, unicode_string};
use crate::wdf::wdf_init;
use crate::wdf::work::{IoWorkItem, ItemRoutine, WorkItemSlot};

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
/// that a deletion never depends on pool at the moment it is decided. Empty while it is queued
/// or its routine runs (the routine then owns it), and when there is no device. Changed only
/// under the globals' lock.
static DELETE_ITEM: WorkItemSlot = WorkItemSlot::new();

/// The control device, if it exists.
pub fn device() -> Option<Device> {
    let d = DEVICE.load(Ordering::Acquire);
    // SAFETY: published by `create` once set up and cleared before its deletion; its users (the
    // core's queue creations) run for open handles, which keep it.
    (!d.is_null()).then(|| unsafe { Device::from_raw(d) })
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
    let slot = unsafe { FILE_SLOT.get(file.cast()) }?;
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
    let Some(init) = ControlDeviceInit::allocate(driver, &sddl) else {
        return STATUS_INSUFFICIENT_RESOURCES;
    };
    let device = match create_device(init) {
        Ok(device) => device,
        Err(status) => return status,
    };
    let status = link_and_queue(device);
    if !nt_success(status) {
        // SAFETY: created above and not published: nobody else holds it.
        unsafe { device.delete() };
        return status;
    }
    let wdm = device.wdm_device_object();
    // SAFETY: the control device's live WDM device object.
    let Some(item) = (unsafe { IoWorkItem::allocate(wdm) }) else {
        // SAFETY: as above.
        unsafe { device.delete() };
        return STATUS_INSUFFICIENT_RESOURCES;
    };
    DELETE_ITEM.put(item);
    // Published before the device takes requests: the first IOCTL may create queues and work
    // items on it at once.
    WDM_DEVICE.store(wdm, Ordering::Release);
    DEVICE.store(device.raw(), Ordering::Release);
    device.finish_control_initializing();
    STATUS_SUCCESS
}

/// Everything from the init structure to `WdfDeviceCreate`; the structure is freed on failure.
fn create_device(mut init: ControlDeviceInit) -> Result<Device, NTSTATUS> {
    // Not exclusive: many processes open WinVerbs.
    init.set_exclusive(false);
    init.set_io_type(_WDF_DEVICE_IO_TYPE::WdfDeviceIoBuffered);
    let name = unicode_string(&DEVICE_NAME);
    let status = init.assign_name(&name);
    if !nt_success(status) {
        return Err(status);
    }
    let mut file_config = wdf_init::wdf_fileobject_config_init(
        Some(evt_file_create),
        Some(evt_file_close),
        Some(evt_file_cleanup),
    );
    // The framework keeps its file object in the FILE_OBJECT's FsContext (the driver does not
    // use it), so finding it for a request is one read, not a search of every open handle
    // under the device's lock (what the helper's default class makes it do).
    file_config.FileObjectClass = _WDF_FILEOBJECT_CLASS::WdfFileObjectWdfCanUseFsContext;
    let mut file_attributes = wdf_init::wdf_object_attributes_init_context_type(FILE_SLOT.info());
    init.set_file_object_config(&mut file_config, &mut file_attributes);
    init.set_io_in_caller_context_callback(Some(evt_io_in_caller_context));
    // PASSIVE_LEVEL callbacks for the device's queues: the core's handlers may wait.
    let mut attributes = wdf_init::wdf_object_attributes_init();
    attributes.ExecutionLevel = _WDF_EXECUTION_LEVEL::WdfExecutionLevelPassive;
    init.create(&mut attributes)
}

/// The symbolic link and the default queue.
fn link_and_queue(device: Device) -> NTSTATUS {
    let link = unicode_string(&SYMBOLIC_LINK);
    let status = device.create_symbolic_link(&link);
    if !nt_success(status) {
        return status;
    }
    let mut config = wdf_init::wdf_io_queue_config_init_default_queue(
        _WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchParallel,
    );
    // A control device's queues cannot be power-managed.
    config.PowerManaged = _WDF_TRI_STATE::WdfFalse;
    config.EvtIoDeviceControl = Some(evt_io_device_control);
    create_default_queue(device, &mut config)
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
    drop(DELETE_ITEM.take());
    if !device.is_null() {
        // SAFETY: the control device this driver created and has not deleted (the swap took it,
        // and nothing reaches it through `device()` any more).
        let device = unsafe { Device::from_raw(device) };
        // SAFETY: as above: deleted once, and the value is not used again.
        unsafe { device.delete() };
    }
}

/// Queues [`delete_if_unused`] on the deletion work item: the decision was taken inside one of
/// the control device's own callbacks, where it must not be deleted. When the item is already
/// queued or its routine waits for the lock, that run decides (after this decision, since both
/// take the lock). PASSIVE_LEVEL.
fn delete_later(g: &Globals) {
    paged_code!();
    let _serialised = g.lock.lock();
    if let Some(item) = DELETE_ITEM.take() {
        // The queued item keeps the device object referenced until the routine returns.
        item.queue::<DeleteRoutine>();
    }
}

/// The routine of [`delete_later`]: deletes the device if it is still unused, then puts the
/// work item back in its slot if its device is still there, or frees it.
struct DeleteRoutine;

impl ItemRoutine for DeleteRoutine {
    fn run(device: PDEVICE_OBJECT, item: IoWorkItem) {
        // No globals means no device either (they outlive every device): the item is freed.
        let Some(g) = globals() else { return };
        let _serialised = g.lock.lock();
        delete_locked(g);
        if WDM_DEVICE.load(Ordering::Acquire) == device {
            // Kept for the next close that decides a deletion (the routine has started, so the
            // item may be queued again).
            DELETE_ITEM.put(item);
        }
        // Otherwise its device is gone: dropping the item frees it.
    }
}

/// `EvtDeviceFileCreate` (PASSIVE_LEVEL, the caller's thread): a new WinVerbs provider for the
/// handle. The open counts before the provider is made (`ControlDevice::open_file`), so a
/// deletion decided meanwhile by the last controller's cleanup keeps the device.
extern "C" fn evt_file_create(_device: WDFDEVICE, request: WDFREQUEST, file: WDFFILEOBJECT) {
    paged_code!();
    // SAFETY: the create request the framework handed to this callback.
    let request = unsafe { OwnedRequest::from_raw(request) };
    let Some(g) = globals() else {
        request.complete(STATUS_DEVICE_NOT_READY, 0);
        return;
    };
    // SAFETY: a live file object of the control device with the FILE_SLOT context, not yet
    // visible to any other callback.
    let Some(slot) = (unsafe { FILE_SLOT.get(file.cast()) }) else {
        request.complete(STATUS_INVALID_DEVICE_REQUEST, 0);
        return;
    };
    let (opened, then) = g.control.open_file(|| g.core.file_create());
    let status = match opened {
        Ok(provider) => {
            // SAFETY: the slot is empty (WDF zero-filled it) and only this callback writes.
            unsafe {
                slot.file
                    .get()
                    .cast::<FileContext<WdfPlatform, CiVerbs>>()
                    .write(provider)
            };
            slot.present.store(true, Ordering::Release);
            STATUS_SUCCESS
        }
        Err(status) => status.0 as NTSTATUS,
    };
    request.complete(status, 0);
    if then == ControlAction::Delete {
        delete_later(g);
    }
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
    let Some(slot) = (unsafe { FILE_SLOT.get(file.cast()) }) else {
        return;
    };
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

/// The driver core's dispatch of one IOCTL sent on `file` (the request's file object, which
/// each caller has asked the framework for already).
fn dispatch(request: Request, file: Option<WDFFILEOBJECT>) {
    // No file object (a kernel-mode `IoBuildDeviceIoControlRequest`): no provider to run it
    // for. `EvtIoInCallerContext` already refused it; this keeps the context lookup from ever
    // seeing a NULL handle (a bug check).
    let Some(file) = file else {
        return request.complete(wv_abi::NtStatus::INVALID_DEVICE_REQUEST, 0);
    };
    // SAFETY: a file object of the control device, alive while its request is pending.
    match (globals(), unsafe { provider(file) }) {
        (Some(g), Some(provider)) => g.core.device_io_control(provider, request),
        _ => request.complete(wv_abi::NtStatus::DEVICE_NOT_READY, 0),
    }
}

/// `EvtIoInCallerContext` (the sender's thread, at its IRQL: PASSIVE_LEVEL for user mode, up
/// to DISPATCH_LEVEL for a kernel-mode sender), as `wv_core::control::in_caller_context`
/// decides: the IOCTLs that always complete inline run here for an application at
/// PASSIVE_LEVEL, so the verbs that pin or map the caller's memory (device open, MR
/// registration, CQ/QP/SRQ creation) run in its process (spec §7.1-l); the same IOCTLs from a
/// kernel-mode sender or at a raised IRQL, and any request without a file object, are refused;
/// the others are queued.
extern "C" fn evt_io_in_caller_context(device: WDFDEVICE, request: WDFREQUEST) {
    // SAFETY: the request the framework handed to this callback, owned by the driver now.
    let request = unsafe { OwnedRequest::from_raw(request) };
    if let Some(parameters) = request.ioctl() {
        let file = request.file_object();
        let route = in_caller_context(
            parameters.code,
            WdfPlatform.irql(),
            request.requestor(),
            file.is_some(),
        );
        match route {
            CallerContext::Dispatch => return dispatch(Request::new(request, parameters), file),
            CallerContext::Refuse(status) => return request.complete(status.0 as NTSTATUS, 0),
            CallerContext::Enqueue => {}
        }
    }
    // SAFETY: the framework passes its live control device to the callback.
    let device = unsafe { Device::from_raw(device) };
    if let Err((request, status)) = device.enqueue(request) {
        // Not enqueued: the request is still the driver's.
        request.complete(status, 0);
    }
}

/// `EvtIoDeviceControl` of the parallel default queue (PASSIVE_LEVEL: the device's execution
/// level): requests that may park, and inline ones sent at a raised IRQL.
extern "C" fn evt_io_device_control(
    _queue: WDFQUEUE,
    request: WDFREQUEST,
    output_buffer_length: usize,
    input_buffer_length: usize,
    io_control_code: u32,
) {
    // SAFETY: the request the framework presented to this callback, owned by the driver now.
    let request = unsafe { OwnedRequest::from_raw(request) };
    let parameters = crate::wdf::request::IoctlParameters {
        code: io_control_code,
        input_len: input_buffer_length,
        output_len: output_buffer_length,
    };
    let file = request.file_object();
    dispatch(Request::new(request, parameters), file);
}
