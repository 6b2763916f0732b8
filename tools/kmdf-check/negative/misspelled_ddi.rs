//! A DDI name that does not exist (WdfRequestCompleteWithInfo): the macro finds no table index
//! and no PFN_ type for it in the generated bindings.
//!
//! Expected: `Failed to find function info for WdfRequestCompleteWithInfo`.

#[cfg(not(feature = "fixed"))]
use wdk_sys::{STATUS_SUCCESS, ULONG_PTR, WDFREQUEST, call_unsafe_wdf_function_binding};

/// Completes `request` successfully with `bytes` of output.
///
/// # Safety
///
/// `request` must be owned by the driver and not yet completed.
#[cfg(not(feature = "fixed"))]
pub unsafe fn complete(request: WDFREQUEST, bytes: ULONG_PTR) {
    // Outside the macro, so that the failed expansion leaves no unused import behind.
    let status = STATUS_SUCCESS;
    // SAFETY: forwarded from the caller.
    unsafe {
        call_unsafe_wdf_function_binding!(WdfRequestCompleteWithInfo, request, status, bytes);
    }
}

/// The fixed twin, shared with the other case that breaks this call.
#[cfg(feature = "fixed")]
pub use crate::complete_with_information::complete;
