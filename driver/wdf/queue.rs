//! The control device's queues: its parallel default queue ([`create_default_queue`]) and
//! [`ManualQueue`], a manual `WDFQUEUE` where requests wait, as `wv_hal::RequestQueue`. A
//! manual queue has no `EvtIoCanceledOnQueue`: a request cancelled while it waits is completed
//! by the framework with `STATUS_CANCELLED`, and a request taken out with
//! `WdfIoQueueRetrieveNextRequest` is no longer cancellable — so the driver never owns a
//! cancellable request (the pattern of spec §3.7).
//!
//! A manual queue's parent is the control device, which may be deleted (its last handle
//! closed, its last controller gone) while a work item still holds the object that owns the
//! queue: the framework then disposes of the queue with its parent. So the value holds a
//! reference on the queue object; its own `WdfObjectDelete` after the parent's disposal is the
//! race the framework allows, and the memory stays until the value lets go of its reference.

use core::ptr::null_mut;

use wdk::nt_success;
use wdk_sys::{
    _WDF_EXECUTION_LEVEL, _WDF_IO_QUEUE_DISPATCH_TYPE, _WDF_TRI_STATE, NTSTATUS,
    PWDF_OBJECT_ATTRIBUTES, WDF_IO_QUEUE_CONFIG, WDF_NO_OBJECT_ATTRIBUTES, WDFQUEUE,
    call_unsafe_wdf_function_binding,
};
use wv_abi::NtStatus;
use wv_hal::RequestQueue;

use super::device::Device;
use super::object::{self, TaggedReference};
use super::request::{OwnedRequest, Request};
use super::wdf_init::{wdf_io_queue_config_init, wdf_object_attributes_init};

/// `WdfIoQueueCreate`: a queue of `device` with `config` and `attributes` (or none), its handle
/// in `queue` if asked for. Parented to the device and deleted with it.
fn create(
    device: Device,
    config: &mut WDF_IO_QUEUE_CONFIG,
    attributes: PWDF_OBJECT_ATTRIBUTES,
    queue: *mut WDFQUEUE,
) -> NTSTATUS {
    // SAFETY: a live device of this driver (the `Device` contract); `config` is an initialised
    // configuration, `attributes` null or an initialised structure, `queue` null or writable;
    // all outlive the call, which copies what it keeps.
    unsafe {
        call_unsafe_wdf_function_binding!(WdfIoQueueCreate, device.raw(), config, attributes, queue)
    }
}

/// The default queue of `device` with `config` (`DefaultQueue = TRUE`). PASSIVE_LEVEL.
pub fn create_default_queue(device: Device, config: &mut WDF_IO_QUEUE_CONFIG) -> NTSTATUS {
    create(device, config, WDF_NO_OBJECT_ATTRIBUTES, null_mut())
}

/// A manual queue, deleted when dropped.
pub struct ManualQueue {
    handle: WDFQUEUE,
    /// Keeps the handle valid for the late delete (see the module documentation).
    reference: TaggedReference,
}

// SAFETY: queue DDIs may be called from any thread at IRQL <= DISPATCH_LEVEL.
unsafe impl Send for ManualQueue {}
// SAFETY: as above; the framework serialises access to the queue itself.
unsafe impl Sync for ManualQueue {}

impl ManualQueue {
    /// A new manual queue of `device` (the control device), not power-managed like every queue
    /// of a filter's stack. It has no callbacks, so it needs none of the passive-level machinery
    /// the control device's attributes would give it (a system work item per queue, disposal
    /// deferred to a worker): its execution level is DISPATCH_LEVEL. IRQL <= DISPATCH_LEVEL.
    ///
    /// # Errors
    /// The framework's status when it cannot create the queue.
    pub fn new(device: Device) -> Result<ManualQueue, NtStatus> {
        let mut config =
            wdf_io_queue_config_init(_WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchManual);
        config.PowerManaged = _WDF_TRI_STATE::WdfFalse;
        let mut attributes = wdf_object_attributes_init();
        attributes.ExecutionLevel = _WDF_EXECUTION_LEVEL::WdfExecutionLevelDispatch;
        let mut handle: WDFQUEUE = null_mut();
        let status = create(device, &mut config, &mut attributes, &mut handle);
        if !nt_success(status) {
            return Err(NtStatus(status as u32));
        }
        // SAFETY: the queue just created, alive (its parent cannot be deleted while this
        // thread runs a request of it).
        let reference = unsafe { TaggedReference::new(handle.cast(), b"WvMq") };
        Ok(ManualQueue { handle, reference })
    }
}

impl RequestQueue<Request> for ManualQueue {
    fn park(&self, request: Request) -> Result<(), (Request, NtStatus)> {
        // SAFETY: a request the driver owns (delivered by the control device's queue) and a
        // live queue of the same device.
        let status = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfRequestForwardToIoQueue,
                request.owned().raw(),
                self.handle,
            )
        };
        if nt_success(status) {
            // The queue owns it now.
            let _ = request.into_raw();
            Ok(())
        } else {
            // A purged queue refuses new requests: the object is being torn down.
            Err((request, NtStatus::CANCELLED))
        }
    }

    fn retrieve_next(&self) -> Option<Request> {
        let mut handle = null_mut();
        // SAFETY: a live queue; `handle` receives a request the driver then owns.
        let status = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfIoQueueRetrieveNextRequest,
                self.handle,
                &mut handle
            )
        };
        if !nt_success(status) || handle.is_null() {
            return None;
        }
        // SAFETY: on success the framework handed over a request nobody else owns.
        let owned = unsafe { OwnedRequest::from_raw(handle) };
        // Only the core's parked IOCTLs are in these queues; anything else would be a bug, and
        // dropping it completes it.
        let parameters = owned.ioctl()?;
        Some(Request::new(owned, parameters))
    }

    fn purge(&self) {
        // SAFETY: a live queue; no callback and no context (IRQL <= DISPATCH_LEVEL form).
        unsafe {
            call_unsafe_wdf_function_binding!(WdfIoQueuePurge, self.handle, None, null_mut())
        };
    }

    fn parked(&self) -> usize {
        let mut queued = 0;
        // SAFETY: a live queue; the count goes to a local, the driver count is not asked for.
        let _state = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfIoQueueGetState,
                self.handle,
                &mut queued,
                null_mut(),
            )
        };
        queued as usize
    }
}

impl Drop for ManualQueue {
    fn drop(&mut self) {
        // SAFETY: the queue this value created, still in memory through the value's reference
        // (released after this, when the field drops); deleted by the value once (a deletion
        // after the parent disposed of it is ignored by the framework). The core purges it
        // before it drops it, so no request is left in it.
        unsafe { object::delete(self.reference.object()) };
    }
}
