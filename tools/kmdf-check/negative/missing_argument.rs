//! WdfRequestCompleteWithInformation(Request, Status, Information) called without its
//! Information argument.
//!
//! Expected: `this function takes 3 arguments but 2 arguments were supplied`.

#[cfg(not(feature = "fixed"))]
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

/// The fixed twin, shared with the other case that breaks this call.
#[cfg(feature = "fixed")]
pub use crate::complete_with_information::complete;
