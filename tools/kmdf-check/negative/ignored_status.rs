//! NTSTATUS results dropped on the floor: a WDF call (the macro marks every non-void DDI
//! `#[must_use]`) and a WDM call (bindgen marks every routine returning NTSTATUS). With
//! `-D warnings` both are errors.
//!
//! Expected: `unused return value of` ... `that must be used`, once per call.

use wdk_sys::{
    _KWAIT_REASON, _MODE, NTSTATUS, PRKEVENT, WDFQUEUE, WDFREQUEST,
    call_unsafe_wdf_function_binding, ntddk::KeWaitForSingleObject,
};

/// Parks `request` in `queue`, then waits for `event`.
///
/// # Safety
///
/// `request` must be owned by the driver and not cancelable, `queue` another queue of the same
/// device, `event` an initialised event, and the caller at PASSIVE_LEVEL.
#[cfg(not(feature = "fixed"))]
pub unsafe fn park_and_wait(request: WDFREQUEST, queue: WDFQUEUE, event: PRKEVENT) -> NTSTATUS {
    // SAFETY: forwarded from the caller.
    unsafe {
        call_unsafe_wdf_function_binding!(WdfRequestForwardToIoQueue, request, queue);
    }
    // SAFETY: forwarded from the caller; no timeout.
    unsafe {
        KeWaitForSingleObject(
            event.cast(),
            _KWAIT_REASON::Executive,
            _MODE::KernelMode as i8,
            0,
            core::ptr::null_mut(),
        );
    }
    wdk_sys::STATUS_SUCCESS
}

/// Parks `request` in `queue`, then waits for `event`.
///
/// # Safety
///
/// `request` must be owned by the driver and not cancelable, `queue` another queue of the same
/// device, `event` an initialised event, and the caller at PASSIVE_LEVEL.
#[cfg(feature = "fixed")]
pub unsafe fn park_and_wait(request: WDFREQUEST, queue: WDFQUEUE, event: PRKEVENT) -> NTSTATUS {
    // SAFETY: forwarded from the caller.
    let status =
        unsafe { call_unsafe_wdf_function_binding!(WdfRequestForwardToIoQueue, request, queue) };
    if !wdk::nt_success(status) {
        return status;
    }
    // SAFETY: forwarded from the caller; no timeout.
    unsafe {
        KeWaitForSingleObject(
            event.cast(),
            _KWAIT_REASON::Executive,
            _MODE::KernelMode as i8,
            0,
            core::ptr::null_mut(),
        )
    }
}
