//! WdfRequestCompleteWithInformation(Request, Status, Information) called without its
//! Information argument.
//!
//! Expected: `this function takes 3 arguments but 2 arguments were supplied`.

use wdk_sys::{STATUS_SUCCESS, ULONG_PTR, WDFREQUEST, call_unsafe_wdf_function_binding};

/// Completes `request` successfully with `bytes` of output.
///
/// # Safety
///
/// `request` must be owned by the driver and not yet completed.
#[cfg(not(feature = "fixed"))]
pub unsafe fn complete(request: WDFREQUEST, bytes: ULONG_PTR) {
    let _ = bytes;
    // SAFETY: forwarded from the caller.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestCompleteWithInformation,
            request,
            STATUS_SUCCESS
        );
    }
}

/// Completes `request` successfully with `bytes` of output.
///
/// # Safety
///
/// `request` must be owned by the driver and not yet completed.
#[cfg(feature = "fixed")]
pub unsafe fn complete(request: WDFREQUEST, bytes: ULONG_PTR) {
    // SAFETY: forwarded from the caller.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestCompleteWithInformation,
            request,
            STATUS_SUCCESS,
            bytes,
        );
    }
}
