//! WdfRequestForwardToIoQueue(Request, DestinationQueue) with the two handles swapped. This is
//! a type error only because STRICT makes every WDF handle a distinct pointer type; without it
//! both are HANDLE and the swap would compile (and fail at run time on Windows).
//!
//! Expected: `mismatched types`, `WDFREQUEST__` expected where `WDFQUEUE__` was passed.

use wdk_sys::{NTSTATUS, WDFQUEUE, WDFREQUEST, call_unsafe_wdf_function_binding};

/// Parks `request` in `queue`.
///
/// # Safety
///
/// `request` must be owned by the driver and not cancelable, and `queue` must be another queue
/// of the same device.
#[cfg(not(feature = "fixed"))]
pub unsafe fn park(request: WDFREQUEST, queue: WDFQUEUE) -> NTSTATUS {
    // SAFETY: forwarded from the caller.
    unsafe { call_unsafe_wdf_function_binding!(WdfRequestForwardToIoQueue, queue, request) }
}

/// Parks `request` in `queue`.
///
/// # Safety
///
/// `request` must be owned by the driver and not cancelable, and `queue` must be another queue
/// of the same device.
#[cfg(feature = "fixed")]
pub unsafe fn park(request: WDFREQUEST, queue: WDFQUEUE) -> NTSTATUS {
    // SAFETY: forwarded from the caller.
    unsafe { call_unsafe_wdf_function_binding!(WdfRequestForwardToIoQueue, request, queue) }
}
