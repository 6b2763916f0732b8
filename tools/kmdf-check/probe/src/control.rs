//! The control device: the named sideband channel user mode opens (`\\.\KmdfCheckProbe`),
//! with a parallel default queue for IOCTLs and a manual queue where requests wait until an
//! event completes them. One request at a time may also be held outside any queue, marked
//! cancelable, for the DPC to complete (the pattern the glue needs for requests it passes to
//! hardware).

use core::{
    cell::UnsafeCell,
    ptr::null_mut,
    sync::atomic::{AtomicPtr, AtomicU32, Ordering},
};

use wdk::nt_success;
use wdk_sys::{
    _MODE, _WDF_DEVICE_IO_TYPE, _WDF_DEVICE_SHUTDOWN_FLAGS, _WDF_IO_QUEUE_DISPATCH_TYPE,
    _WDF_IO_QUEUE_STATE, _WDF_TRI_STATE, FILE_ANY_ACCESS, FILE_DEVICE_UNKNOWN, METHOD_BUFFERED,
    METHOD_NEITHER, NTSTATUS, PVOID, PWDFDEVICE_INIT, STATUS_BUFFER_TOO_SMALL, STATUS_CANCELLED,
    STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_DEVICE_REQUEST, STATUS_SUCCESS, ULONG, ULONG_PTR,
    WDF_IO_QUEUE_CONFIG, WDFCONTEXT, WDFDEVICE, WDFDRIVER, WDFFILEOBJECT, WDFMEMORY, WDFQUEUE,
    WDFQUEUE__, WDFREQUEST, WDFREQUEST__, WDFSPINLOCK, WDFSPINLOCK__,
    call_unsafe_wdf_function_binding,
};

use crate::string::{ascii_to_utf16, unicode_string};
use crate::{CONTROL_DEVICE, context::ContextType, wdf_init};

/// `\Device\KmdfCheckProbe` and `\DosDevices\KmdfCheckProbe`, UTF-16, not NUL-terminated.
static DEVICE_NAME: [u16; 22] = ascii_to_utf16(r"\Device\KmdfCheckProbe");
static SYMBOLIC_LINK_NAME: [u16; 26] = ascii_to_utf16(r"\DosDevices\KmdfCheckProbe");
/// SDDL_DEVOBJ_SYS_ALL_ADM_ALL, spelled out: the `SDDL_DEVOBJ_*` constants live in wdmsec.lib,
/// which wdk-build does not link.
static SDDL: [u16; 27] = ascii_to_utf16("D:P(A;;GA;;;SY)(A;;GA;;;BA)");

/// IOCTLs of the probe, `CTL_CODE(FILE_DEVICE_UNKNOWN, 0x800 + n, method, FILE_ANY_ACCESS)`.
const IOCTL_PROBE_ECHO: ULONG = ctl_code(0x800, METHOD_BUFFERED);
const IOCTL_PROBE_WAIT: ULONG = ctl_code(0x801, METHOD_BUFFERED);
const IOCTL_PROBE_SIGNAL: ULONG = ctl_code(0x802, METHOD_BUFFERED);
const IOCTL_PROBE_HOLD: ULONG = ctl_code(0x803, METHOD_BUFFERED);
const IOCTL_PROBE_STATE: ULONG = ctl_code(0x804, METHOD_BUFFERED);
/// Direct user buffers, probed and locked in the caller's context.
const IOCTL_PROBE_USER_BUFFERS: ULONG = ctl_code(0x805, METHOD_NEITHER);

/// `CTL_CODE` (a C macro, so not in the bindings).
const fn ctl_code(function: ULONG, method: ULONG) -> ULONG {
    (FILE_DEVICE_UNKNOWN << 16) | (FILE_ANY_ACCESS << 14) | (function << 2) | method
}

/// State of the control device (its WDF context).
struct ControlContext {
    /// Requests waiting for `IOCTL_PROBE_SIGNAL`.
    manual_queue: AtomicPtr<WDFQUEUE__>,
    /// Guards `held_request`.
    lock: AtomicPtr<WDFSPINLOCK__>,
    /// The request held outside any queue, marked cancelable; null when none. Written only
    /// under `lock`.
    held_request: UnsafeCell<*mut WDFREQUEST__>,
}

static CONTROL_CONTEXT: ContextType<ControlContext> =
    ContextType::new(c"ControlContext", &raw const CONTROL_CONTEXT);

/// Per open handle (the file object's context).
struct FileContext {
    ioctls: AtomicU32,
}

static FILE_CONTEXT: ContextType<FileContext> =
    ContextType::new(c"FileContext", &raw const FILE_CONTEXT);

/// Counters allocated on the control device after creation (`WdfObjectAllocateContext`).
struct Statistics {
    completed: AtomicU32,
}

static STATISTICS: ContextType<Statistics> = ContextType::new(c"Statistics", &raw const STATISTICS);

/// The control device's context.
///
/// # Safety
///
/// `device` must be the live control device, and the reference must not be used after the
/// device's cleanup.
unsafe fn control_context<'device>(device: WDFDEVICE) -> &'device ControlContext {
    // SAFETY: forwarded from the caller; the control device is created with CONTROL_CONTEXT.
    let context = unsafe { CONTROL_CONTEXT.get(device.cast()) };
    // The device is created with this context: no answer is a bug of this driver.
    context.expect("the control device has its context")
}

/// Creates the control device, its queues and its symbolic link (PASSIVE_LEVEL).
pub fn create_control_device(driver: WDFDRIVER) -> NTSTATUS {
    let sddl = unicode_string(&SDDL);
    // SAFETY: `driver` is the live driver object; the SDDL string outlives the call.
    let device_init: PWDFDEVICE_INIT =
        unsafe { call_unsafe_wdf_function_binding!(WdfControlDeviceInitAllocate, driver, &sddl) };
    if device_init.is_null() {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    let device = match create_device(device_init) {
        Ok(device) => device,
        Err(status) => {
            // SAFETY: WdfDeviceCreate did not take `device_init` over (it failed or was not
            // reached); for a control device the driver then frees it.
            unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitFree, device_init) };
            return status;
        }
    };
    let status = finish_control_device(device);
    if !nt_success(status) {
        // SAFETY: created above and not yet published in CONTROL_DEVICE, so no one else holds
        // it; deleting it also frees the init structure WdfDeviceCreate took.
        unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, device.cast()) };
        return status;
    }
    CONTROL_DEVICE.store(device, Ordering::Release);
    STATUS_SUCCESS
}

/// Everything between `WdfControlDeviceInitAllocate` and `WdfDeviceCreate`. `Err` means the
/// init structure is still the caller's to free.
fn create_device(device_init: PWDFDEVICE_INIT) -> Result<WDFDEVICE, NTSTATUS> {
    let mut device_init = device_init;
    // SAFETY: the init structure is the driver's until WdfDeviceCreate succeeds, and this and
    // the setters below run before it, at PASSIVE_LEVEL.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfControlDeviceInitSetShutdownNotification,
            device_init,
            Some(evt_control_device_shutdown),
            _WDF_DEVICE_SHUTDOWN_FLAGS::WdfDeviceShutdown as u8,
        );
    };
    // SAFETY: see above.
    unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitSetExclusive, device_init, 0) };
    // SAFETY: see above.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceInitSetIoType,
            device_init,
            _WDF_DEVICE_IO_TYPE::WdfDeviceIoBuffered,
        );
    };
    let name = unicode_string(&DEVICE_NAME);
    // SAFETY: see above; the framework copies the name.
    let status =
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitAssignName, device_init, &name) };
    if !nt_success(status) {
        return Err(status);
    }

    let mut file_config = wdf_init::wdf_fileobject_config_init(
        Some(evt_device_file_create),
        Some(evt_file_close),
        Some(evt_file_cleanup),
    );
    let mut file_attributes =
        wdf_init::wdf_object_attributes_init_context_type(FILE_CONTEXT.info());
    // SAFETY: see above; both structures are copied by the framework.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceInitSetFileObjectConfig,
            device_init,
            &mut file_config,
            &mut file_attributes,
        );
    };
    // SAFETY: see above.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceInitSetIoInCallerContextCallback,
            device_init,
            Some(evt_io_in_caller_context),
        );
    };

    let mut attributes = wdf_init::wdf_object_attributes_init_context_type(CONTROL_CONTEXT.info());
    attributes.EvtCleanupCallback = Some(evt_control_device_cleanup);
    attributes.EvtDestroyCallback = Some(evt_control_device_destroy);
    // SAFETY: see above; on failure `device_init` stays the caller's to free.
    unsafe { crate::wdf_device_create(&mut device_init, &mut attributes) }
}

/// `WdfIoQueueCreate`: a queue of the live `device` with `config` and no attributes, or the
/// framework's status.
fn create_queue(device: WDFDEVICE, config: &mut WDF_IO_QUEUE_CONFIG) -> Result<WDFQUEUE, NTSTATUS> {
    let mut queue: WDFQUEUE = null_mut();
    // SAFETY: `device` is live; the configuration is copied.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfIoQueueCreate,
            device,
            config,
            wdk_sys::WDF_NO_OBJECT_ATTRIBUTES,
            &mut queue,
        )
    };
    if nt_success(status) {
        Ok(queue)
    } else {
        Err(status)
    }
}

/// Symbolic link, queues, lock and extra context of a created control device.
fn finish_control_device(device: WDFDEVICE) -> NTSTATUS {
    let link = unicode_string(&SYMBOLIC_LINK_NAME);
    // SAFETY: `device` is live; the framework copies the name.
    let status =
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceCreateSymbolicLink, device, &link) };
    if !nt_success(status) {
        return status;
    }

    // Control devices are not power managed, so neither are their queues.
    let mut default_queue_config = wdf_init::wdf_io_queue_config_init_default_queue(
        _WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchParallel,
    );
    default_queue_config.PowerManaged = _WDF_TRI_STATE::WdfFalse;
    default_queue_config.EvtIoDeviceControl = Some(evt_io_device_control);
    let default_queue = match create_queue(device, &mut default_queue_config) {
        Ok(queue) => queue,
        Err(status) => return status,
    };
    // SAFETY: `device` is live and now has a default queue.
    let queried = unsafe { call_unsafe_wdf_function_binding!(WdfDeviceGetDefaultQueue, device) };
    debug_assert_eq!(queried, default_queue);

    let mut manual_queue_config =
        wdf_init::wdf_io_queue_config_init(_WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchManual);
    manual_queue_config.PowerManaged = _WDF_TRI_STATE::WdfFalse;
    manual_queue_config.EvtIoCanceledOnQueue = Some(evt_io_canceled_on_queue);
    let manual_queue = match create_queue(device, &mut manual_queue_config) {
        Ok(queue) => queue,
        Err(status) => return status,
    };

    let mut lock_attributes = wdf_init::wdf_object_attributes_init();
    lock_attributes.ParentObject = device.cast();
    let mut lock: WDFSPINLOCK = null_mut();
    // SAFETY: the parent is live; `lock` receives the handle.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(WdfSpinLockCreate, &mut lock_attributes, &mut lock)
    };
    if !nt_success(status) {
        return status;
    }

    // SAFETY: `device` was created with CONTROL_CONTEXT and lives past this function.
    let context = unsafe { control_context(device) };
    context.manual_queue.store(manual_queue, Ordering::Release);
    context.lock.store(lock, Ordering::Release);

    let mut statistics_attributes =
        wdf_init::wdf_object_attributes_init_context_type(STATISTICS.info());
    let mut statistics: PVOID = null_mut();
    // SAFETY: `device` is live and has no Statistics context yet.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfObjectAllocateContext,
            device.cast(),
            &mut statistics_attributes,
            &mut statistics,
        )
    };
    if !nt_success(status) {
        return status;
    }

    // SAFETY: `device` is a fully set-up control device; I/O may flow from now on.
    unsafe { call_unsafe_wdf_function_binding!(WdfControlFinishInitializing, device) };
    STATUS_SUCCESS
}

/// Deletes the control device after failing whatever still waits in its manual queue.
pub fn delete_control_device() {
    let device = CONTROL_DEVICE.swap(null_mut(), Ordering::AcqRel);
    if device.is_null() {
        return;
    }
    // SAFETY: the device is live until the WdfObjectDelete below.
    let context = unsafe { control_context(device) };
    let manual_queue = context.manual_queue.load(Ordering::Acquire);
    // SAFETY: the queue belongs to the live device; purging cancels the waiting requests
    // (EvtIoCanceledOnQueue completes them) and returns when they are gone.
    unsafe { call_unsafe_wdf_function_binding!(WdfIoQueuePurgeSynchronously, manual_queue) };
    // SAFETY: taken out of CONTROL_DEVICE above, so no one else deletes it or uses it anew.
    unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, device.cast()) };
}

/// `EvtCleanupCallback` of the control device: the handle may still be referenced, so only
/// drop what other code could still reach through CONTROL_DEVICE.
extern "C" fn evt_control_device_cleanup(object: wdk_sys::WDFOBJECT) {
    let _ = CONTROL_DEVICE.compare_exchange(
        object.cast(),
        null_mut(),
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}

/// `EvtDestroyCallback` of the control device: the last reference is gone; the context memory
/// is freed after this returns.
extern "C" fn evt_control_device_destroy(_object: wdk_sys::WDFOBJECT) {}

/// Shutdown notification: stop accepting waiters (asynchronous purge; PASSIVE_LEVEL).
extern "C" fn evt_control_device_shutdown(device: WDFDEVICE) {
    // SAFETY: the framework passes the live control device.
    let context = unsafe { control_context(device) };
    let manual_queue = context.manual_queue.load(Ordering::Acquire);
    // SAFETY: the queue belongs to the live device; the callback gets no context.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfIoQueuePurge,
            manual_queue,
            Some(evt_purge_complete),
            wdk_sys::WDF_NO_CONTEXT,
        );
    };
}

/// Purge completion of the shutdown path.
extern "C" fn evt_purge_complete(_queue: WDFQUEUE, _context: WDFCONTEXT) {}

/// `EvtDeviceFileCreate`: every open succeeds.
extern "C" fn evt_device_file_create(
    _device: WDFDEVICE,
    request: WDFREQUEST,
    _file_object: WDFFILEOBJECT,
) {
    // SAFETY: the framework hands over the create request; it is completed once, here.
    unsafe { call_unsafe_wdf_function_binding!(WdfRequestComplete, request, STATUS_SUCCESS) };
}

/// `EvtFileCleanup`: the handle is closing; requests of this file on the manual queue are
/// cancelled by the framework.
extern "C" fn evt_file_cleanup(file_object: WDFFILEOBJECT) {
    // SAFETY: the framework passes a live file object of the control device.
    let device = unsafe { call_unsafe_wdf_function_binding!(WdfFileObjectGetDevice, file_object) };
    debug_assert_eq!(device, CONTROL_DEVICE.load(Ordering::Acquire));
}

/// `EvtFileClose`.
extern "C" fn evt_file_close(_file_object: WDFFILEOBJECT) {}

/// `EvtIoInCallerContext`: probe and lock METHOD_NEITHER buffers while still in the caller's
/// process, then hand the request to the queues.
extern "C" fn evt_io_in_caller_context(device: WDFDEVICE, request: WDFREQUEST) {
    let mut parameters = wdf_init::wdf_request_parameters_init();
    // SAFETY: the framework passes a live request; `parameters` has its Size set.
    unsafe { call_unsafe_wdf_function_binding!(WdfRequestGetParameters, request, &mut parameters) };
    let status = if parameters.Type == wdk_sys::_WDF_REQUEST_TYPE::WdfRequestTypeDeviceControl {
        // SAFETY: for a device-control request the DeviceIoControl member is the live one.
        let ioctl = unsafe { parameters.Parameters.DeviceIoControl };
        if ioctl.IoControlCode == IOCTL_PROBE_USER_BUFFERS {
            lock_user_buffers(request, ioctl.Type3InputBuffer, ioctl.InputBufferLength)
        } else {
            STATUS_SUCCESS
        }
    } else {
        STATUS_SUCCESS
    };
    if !nt_success(status) {
        // SAFETY: the request is still ours and not completed.
        unsafe { call_unsafe_wdf_function_binding!(WdfRequestComplete, request, status) };
        return;
    }
    // SAFETY: the request is ours; on success the framework queues it.
    let status =
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceEnqueueRequest, device, request) };
    if !nt_success(status) {
        // SAFETY: enqueueing failed, so the request is still ours to complete.
        unsafe { call_unsafe_wdf_function_binding!(WdfRequestComplete, request, status) };
    }
}

/// Probes a user input buffer for reading and the same range for writing, and maps both.
fn lock_user_buffers(request: WDFREQUEST, user_buffer: PVOID, length: usize) -> NTSTATUS {
    if user_buffer.is_null() || length == 0 {
        return STATUS_SUCCESS;
    }
    let mut read_memory: WDFMEMORY = null_mut();
    // SAFETY: in the caller's context (EvtIoInCallerContext), as the DDI requires; the
    // framework probes the range and ties the memory object to the request.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestProbeAndLockUserBufferForRead,
            request,
            user_buffer,
            length,
            &mut read_memory,
        )
    };
    if !nt_success(status) {
        return status;
    }
    let mut write_memory: WDFMEMORY = null_mut();
    // SAFETY: as above.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestProbeAndLockUserBufferForWrite,
            request,
            user_buffer,
            length,
            &mut write_memory,
        )
    };
    if !nt_success(status) {
        return status;
    }
    let mut mapped_length = 0usize;
    // SAFETY: `read_memory` is live for the request's lifetime.
    let mapped = unsafe {
        call_unsafe_wdf_function_binding!(WdfMemoryGetBuffer, read_memory, &mut mapped_length)
    };
    debug_assert!(!mapped.is_null() && mapped_length == length);
    STATUS_SUCCESS
}

/// `EvtIoDeviceControl` of the parallel default queue.
extern "C" fn evt_io_device_control(
    _queue: WDFQUEUE,
    request: WDFREQUEST,
    output_buffer_length: usize,
    input_buffer_length: usize,
    io_control_code: ULONG,
) {
    let device = CONTROL_DEVICE.load(Ordering::Acquire);
    // SAFETY: requests only arrive while the control device exists.
    let context = unsafe { control_context(device) };

    // SAFETY: the framework passes a live request of an open file.
    let file_object =
        unsafe { call_unsafe_wdf_function_binding!(WdfRequestGetFileObject, request) };
    // SAFETY: every file object of the control device has a FileContext; a request without
    // a file object (a kernel-mode sender's) has none and is refused.
    let Some(file_context) = (unsafe { FILE_CONTEXT.get::<'_>(file_object.cast()) }) else {
        // SAFETY: the presented request, completed once.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfRequestComplete,
                request,
                wdk_sys::STATUS_INVALID_DEVICE_REQUEST
            )
        };
        return;
    };
    file_context.ioctls.fetch_add(1, Ordering::Relaxed);

    // SAFETY: as above.
    let requestor_mode =
        unsafe { call_unsafe_wdf_function_binding!(WdfRequestGetRequestorMode, request) };
    let from_user_mode = requestor_mode == _MODE::UserMode as i8;

    match io_control_code {
        IOCTL_PROBE_ECHO => echo(request, input_buffer_length.min(output_buffer_length)),
        // A waiter blocks until signalled; only user mode may do that to itself.
        IOCTL_PROBE_WAIT if !from_user_mode => {
            complete_counted(device, request, STATUS_INVALID_DEVICE_REQUEST, 0);
        }
        IOCTL_PROBE_WAIT => {
            let manual_queue = context.manual_queue.load(Ordering::Acquire);
            // SAFETY: the request is ours and not cancelable; the destination is another queue
            // of the same device, as the DDI requires.
            let status = unsafe {
                call_unsafe_wdf_function_binding!(WdfRequestForwardToIoQueue, request, manual_queue)
            };
            if !nt_success(status) {
                // SAFETY: forwarding failed, so the request is still ours.
                unsafe { call_unsafe_wdf_function_binding!(WdfRequestComplete, request, status) };
            }
        }
        IOCTL_PROBE_SIGNAL => {
            let manual_queue = context.manual_queue.load(Ordering::Acquire);
            let mut waiter: WDFREQUEST = null_mut();
            // SAFETY: a manual queue of the live device; on success `waiter` is ours.
            let status = unsafe {
                call_unsafe_wdf_function_binding!(
                    WdfIoQueueRetrieveNextRequest,
                    manual_queue,
                    &mut waiter
                )
            };
            if nt_success(status) {
                complete_counted(device, waiter, STATUS_SUCCESS, 0);
            }
            complete_counted(device, request, STATUS_SUCCESS, 0);
        }
        IOCTL_PROBE_HOLD => hold(context, request),
        IOCTL_PROBE_STATE => {
            let manual_queue = context.manual_queue.load(Ordering::Acquire);
            let (mut queued, mut with_driver): (ULONG, ULONG) = (0, 0);
            // SAFETY: a queue of the live device; both counters are writable.
            let state = unsafe {
                call_unsafe_wdf_function_binding!(
                    WdfIoQueueGetState,
                    manual_queue,
                    &mut queued,
                    &mut with_driver,
                )
            };
            // Information: the number of waiters, or 0 when the queue reports none.
            let waiters = if state & _WDF_IO_QUEUE_STATE::WdfIoQueueNoRequests != 0 {
                0
            } else {
                ULONG_PTR::from(queued)
            };
            complete_counted(device, request, STATUS_SUCCESS, waiters);
        }
        // The user buffers were probed, locked and mapped in the caller's context.
        IOCTL_PROBE_USER_BUFFERS => complete_counted(device, request, STATUS_SUCCESS, 0),
        _ => complete_counted(device, request, STATUS_INVALID_DEVICE_REQUEST, 0),
    }
}

/// Copies the input buffer to the output buffer (METHOD_BUFFERED: the same system buffer, but
/// the glue must not rely on that).
fn echo(request: WDFREQUEST, length: usize) {
    // The input and the output buffer are fetched alike: a buffer of at least `length` bytes
    // through the DDI named, or the request completes with STATUS_BUFFER_TOO_SMALL.
    macro_rules! buffer_or_complete {
        ($retrieve:ident) => {{
            let (mut buffer, mut buffer_length): (PVOID, usize) = (null_mut(), 0);
            // SAFETY: a live request we own; on success the framework returns its system buffer.
            let status = unsafe {
                call_unsafe_wdf_function_binding!(
                    $retrieve,
                    request,
                    length,
                    &mut buffer,
                    &mut buffer_length,
                )
            };
            if !nt_success(status) {
                // SAFETY: not completed yet.
                unsafe {
                    call_unsafe_wdf_function_binding!(
                        WdfRequestComplete,
                        request,
                        STATUS_BUFFER_TOO_SMALL
                    )
                };
                return;
            }
            (buffer, buffer_length)
        }};
    }
    let (input, input_length) = buffer_or_complete!(WdfRequestRetrieveInputBuffer);
    let (output, output_length) = buffer_or_complete!(WdfRequestRetrieveOutputBuffer);
    let copied = length.min(input_length).min(output_length);
    // SAFETY: both buffers are valid for at least `copied` bytes; `copy` allows them to be
    // the same system buffer.
    unsafe { core::ptr::copy(input.cast::<u8>(), output.cast::<u8>(), copied) };
    // SAFETY: not completed yet.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestCompleteWithInformation,
            request,
            STATUS_SUCCESS,
            copied as ULONG_PTR,
        );
    };
}

/// Completes `request` with `status` and `information`, and counts it.
fn complete_counted(
    device: WDFDEVICE,
    request: WDFREQUEST,
    status: NTSTATUS,
    information: ULONG_PTR,
) {
    // SAFETY: the control device is live while requests arrive and has a Statistics context.
    if let Some(statistics) = unsafe { STATISTICS.get::<'_>(device.cast()) } {
        statistics.completed.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: the caller owns the request and completes it exactly once, here.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestCompleteWithInformation,
            request,
            status,
            information,
        );
    };
}

/// Holds `request` outside any queue, cancelable, until the DPC completes it. Marking it
/// cancelable under the lock keeps the cancel routine from running before it is recorded.
fn hold(context: &ControlContext, request: WDFREQUEST) {
    let lock = context.lock.load(Ordering::Acquire);
    // SAFETY: the lock belongs to the live control device.
    unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockAcquire, lock) };
    // SAFETY: read under `lock`, the field's guard.
    let busy = unsafe { !(*context.held_request.get()).is_null() };
    let status = if busy {
        wdk_sys::STATUS_DEVICE_BUSY
    } else {
        // SAFETY: the request is ours, not in a queue and not yet cancelable.
        let status = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfRequestMarkCancelableEx,
                request,
                Some(evt_request_cancel)
            )
        };
        if nt_success(status) {
            // SAFETY: written under `lock`, the field's guard.
            unsafe { *context.held_request.get() = request };
        }
        status
    };
    // SAFETY: acquired above.
    unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockRelease, lock) };
    if !nt_success(status) {
        // SAFETY: not marked cancelable (or already cancelled: STATUS_CANCELLED), so ours.
        unsafe { call_unsafe_wdf_function_binding!(WdfRequestComplete, request, status) };
    }
}

/// Called by the DPC: completes the held request unless its cancel routine got there first.
pub fn complete_held_request() {
    let device = CONTROL_DEVICE.load(Ordering::Acquire);
    if device.is_null() {
        return;
    }
    // SAFETY: the control device is live (non-null in CONTROL_DEVICE).
    let context = unsafe { control_context(device) };
    let lock = context.lock.load(Ordering::Acquire);
    // SAFETY: the lock belongs to the live control device.
    unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockAcquire, lock) };
    // SAFETY: taken under `lock`, the field's guard.
    let request = unsafe { core::ptr::replace(context.held_request.get(), null_mut()) };
    // SAFETY: acquired above.
    unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockRelease, lock) };
    if request.is_null() {
        return;
    }
    // SAFETY: the request was marked cancelable by `hold` and not yet completed.
    let status = unsafe { call_unsafe_wdf_function_binding!(WdfRequestUnmarkCancelable, request) };
    if status == STATUS_CANCELLED {
        // The cancel routine runs (or ran) and completes it; it will find the slot empty.
        return;
    }
    complete_counted(device, request, STATUS_SUCCESS, 0);
}

/// `EvtRequestCancel` of the held request.
extern "C" fn evt_request_cancel(request: WDFREQUEST) {
    let device = CONTROL_DEVICE.load(Ordering::Acquire);
    // SAFETY: a cancelable request of the control device exists, so the device is live.
    let context = unsafe { control_context(device) };
    let lock = context.lock.load(Ordering::Acquire);
    // SAFETY: the lock belongs to the live control device.
    unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockAcquire, lock) };
    // SAFETY: under `lock`, the field's guard.
    let held = unsafe { *context.held_request.get() };
    if held == request {
        // SAFETY: under `lock`, the field's guard.
        unsafe { *context.held_request.get() = null_mut() };
    }
    // SAFETY: acquired above.
    unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockRelease, lock) };
    // Whoever empties the slot does not complete a cancelled request; the cancel routine does.
    complete_counted(device, request, STATUS_CANCELLED, 0);
}

/// `EvtIoCanceledOnQueue` of the manual queue: a waiter's handle closed or it was purged.
extern "C" fn evt_io_canceled_on_queue(_queue: WDFQUEUE, request: WDFREQUEST) {
    // SAFETY: the framework hands the cancelled request back to the driver to complete.
    unsafe { call_unsafe_wdf_function_binding!(WdfRequestComplete, request, STATUS_CANCELLED) };
}
