//! The correct call that `missing_argument.rs` and `misspelled_ddi.rs` each break in their own
//! way: the fixed twin of both cases.

use wdk_sys::{STATUS_SUCCESS, ULONG_PTR, WDFREQUEST, call_unsafe_wdf_function_binding};

/// Completes `request` successfully with `bytes` of output.
///
/// # Safety
///
/// `request` must be owned by the driver and not yet completed.
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
