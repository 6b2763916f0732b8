//! [`ManualQueue`]: a manual `WDFQUEUE` of the control device where requests wait, as
//! `wv_hal::RequestQueue`. It has no `EvtIoCanceledOnQueue`: a request cancelled while it waits
//! is completed by the framework with `STATUS_CANCELLED`, and a request taken out with
//! `WdfIoQueueRetrieveNextRequest` is no longer cancellable — so the driver never owns a
//! cancellable request (the pattern of spec §3.7).
//!
//! The queue's parent is the control device, which may be deleted (its last handle closed, its
//! last controller gone) while a work item still holds the object that owns the queue: the
//! framework then disposes of the queue with its parent. So the value holds a reference on the
//! queue object; its own `WdfObjectDelete` after the parent's disposal is the race the
//! framework allows, and the memory stays until the value lets go of its reference.

use core::ptr::null_mut;

use wdk::nt_success;
use wdk_sys::{
    _WDF_EXECUTION_LEVEL, _WDF_IO_QUEUE_DISPATCH_TYPE, _WDF_TRI_STATE, PVOID, WDFDEVICE, WDFQUEUE,
    call_unsafe_wdf_function_binding,
};
use wv_abi::NtStatus;
use wv_hal::RequestQueue;

use super::request::Request;
use super::wdf_init::{wdf_io_queue_config_init, wdf_object_attributes_init};

/// The tag of the value's reference on its queue (shown by the framework's verifier).
const TAG: PVOID = b"WvMq".as_ptr().cast_mut().cast();
/// The file name the framework records with a tagged reference.
const FILE: &[u8] = b"driver/wdf/queue.rs\0";

/// A manual queue, deleted when dropped.
pub struct ManualQueue {
    handle: WDFQUEUE,
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
    pub fn new(device: WDFDEVICE) -> Result<ManualQueue, NtStatus> {
        let mut config =
            wdf_io_queue_config_init(_WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchManual);
        config.PowerManaged = _WDF_TRI_STATE::WdfFalse;
        let mut attributes = wdf_object_attributes_init();
        attributes.ExecutionLevel = _WDF_EXECUTION_LEVEL::WdfExecutionLevelDispatch;
        let mut handle: WDFQUEUE = null_mut();
        // SAFETY: `device` is the live control device; `config`, `attributes` and `handle`
        // outlive the call.
        let status = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfIoQueueCreate,
                device,
                &mut config,
                &mut attributes,
                &mut handle,
            )
        };
        if !nt_success(status) {
            return Err(NtStatus(status as u32));
        }
        // SAFETY: the queue just created, alive (its parent cannot be deleted while this
        // thread runs a request of it); the reference is released in `drop`.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfObjectReferenceActual,
                handle.cast(),
                TAG,
                line!() as i32,
                FILE.as_ptr().cast(),
            )
        };
        Ok(ManualQueue { handle })
    }
}

impl RequestQueue<Request> for ManualQueue {
    fn park(&self, request: Request) -> Result<(), (Request, NtStatus)> {
        // SAFETY: a request the driver owns (delivered by the control device's queue) and a
        // live queue of the same device.
        let status = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfRequestForwardToIoQueue,
                request.handle(),
                self.handle,
            )
        };
        if nt_success(status) {
            // The queue owns it now.
            let _ = request.into_handle();
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
        // SAFETY: on success the framework handed over a request nobody else owns.
        (nt_success(status) && !handle.is_null()).then(|| unsafe { Request::from_handle(handle) })
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
        // SAFETY: the queue this value created, still in memory through the value's
        // reference; deleted by the value once (a deletion after the parent disposed of it is
        // ignored by the framework). The core purges it before it drops it, so no request is
        // left in it.
        unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, self.handle.cast()) };
        // SAFETY: the reference `new` took, released once, after the last use of the handle.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfObjectDereferenceActual,
                self.handle.cast(),
                TAG,
                line!() as i32,
                FILE.as_ptr().cast(),
            )
        };
    }
}
