//! [`ManualQueue`]: a manual `WDFQUEUE` of the control device where requests wait, as
//! `wv_hal::RequestQueue`. It has no `EvtIoCanceledOnQueue`: a request cancelled while it waits
//! is completed by the framework with `STATUS_CANCELLED`, and a request taken out with
//! `WdfIoQueueRetrieveNextRequest` is no longer cancellable — so the driver never owns a
//! cancellable request (the pattern of spec §3.7).

use core::ptr::null_mut;

use wdk::nt_success;
use wdk_sys::{
    _WDF_IO_QUEUE_DISPATCH_TYPE, _WDF_TRI_STATE, WDF_NO_OBJECT_ATTRIBUTES, WDFDEVICE, WDFQUEUE,
    call_unsafe_wdf_function_binding,
};
use wv_abi::NtStatus;
use wv_hal::RequestQueue;

use super::request::Request;
use super::wdf_init::wdf_io_queue_config_init;

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
    /// of a filter's stack. IRQL <= DISPATCH_LEVEL.
    ///
    /// # Errors
    /// The framework's status when it cannot create the queue.
    pub fn new(device: WDFDEVICE) -> Result<ManualQueue, NtStatus> {
        let mut config =
            wdf_io_queue_config_init(_WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchManual);
        config.PowerManaged = _WDF_TRI_STATE::WdfFalse;
        let mut handle: WDFQUEUE = null_mut();
        // SAFETY: `device` is the live control device; `config` and `handle` outlive the call.
        let status = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfIoQueueCreate,
                device,
                &mut config,
                WDF_NO_OBJECT_ATTRIBUTES,
                &mut handle,
            )
        };
        if nt_success(status) {
            Ok(ManualQueue { handle })
        } else {
            Err(NtStatus(status as u32))
        }
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
        // SAFETY: the queue this value created, deleted once; the core purges it before it
        // drops it, so no request is left in it.
        unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, self.handle.cast()) };
    }
}
