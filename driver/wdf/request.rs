//! [`Request`]: a `WDFREQUEST` of an IOCTL as `wv_hal::IoRequest`. Completing consumes it, so
//! a request cannot be completed twice from safe code.

use core::ptr::null_mut;

use wdk::nt_success;
use wdk_sys::{NTSTATUS, PVOID, WDFREQUEST, call_unsafe_wdf_function_binding};
use wv_abi::NtStatus;
use wv_abi::ioctl::METHOD_BUFFERED;
use wv_hal::IoRequest;

use super::wdf_init::wdf_request_parameters_init;

/// An IOCTL request the driver owns: delivered by the framework and not completed yet.
pub struct Request {
    handle: WDFREQUEST,
    code: u32,
    input_len: usize,
    output_len: usize,
    /// The METHOD_BUFFERED system buffer (`max(input_len, output_len)` bytes), the input or
    /// output buffer of another method (its own length), or null.
    buffer: *mut u8,
    buffer_len: usize,
}

// SAFETY: a WDFREQUEST the driver owns may be completed or forwarded from any thread at
// IRQL <= DISPATCH_LEVEL; the system buffer is nonpaged and belongs to the request.
unsafe impl Send for Request {}

impl Request {
    /// Takes ownership of `handle`, reading its IOCTL parameters and system buffer.
    /// IRQL <= DISPATCH_LEVEL.
    ///
    /// # Safety
    /// `handle` is a live IOCTL request the driver owns (delivered to it and not completed,
    /// forwarded or owned by a `Request` already).
    pub unsafe fn from_handle(handle: WDFREQUEST) -> Request {
        let mut parameters = wdf_request_parameters_init();
        // SAFETY: a live request; `parameters` is an initialised structure of the right size.
        unsafe {
            call_unsafe_wdf_function_binding!(WdfRequestGetParameters, handle, &mut parameters)
        };
        // SAFETY: the request is an IOCTL (the control device's queue only presents those),
        // so the DeviceIoControl member of the union is the one the framework filled.
        let io = unsafe { parameters.Parameters.DeviceIoControl };
        let (input_len, output_len) = (io.InputBufferLength, io.OutputBufferLength);
        let mut buffer: PVOID = null_mut();
        let mut len = 0usize;
        let status: NTSTATUS = if input_len > 0 {
            // SAFETY: a live buffered IOCTL with input; the outputs are locals.
            unsafe {
                call_unsafe_wdf_function_binding!(
                    WdfRequestRetrieveInputBuffer,
                    handle,
                    0,
                    &mut buffer,
                    &mut len,
                )
            }
        } else if output_len > 0 {
            // SAFETY: as above, for a request with output only.
            unsafe {
                call_unsafe_wdf_function_binding!(
                    WdfRequestRetrieveOutputBuffer,
                    handle,
                    0,
                    &mut buffer,
                    &mut len,
                )
            }
        } else {
            0
        };
        let usable = nt_success(status) && !buffer.is_null();
        Request {
            handle,
            code: io.IoControlCode,
            input_len,
            output_len,
            buffer: if usable { buffer.cast() } else { null_mut() },
            buffer_len: match (usable, io.IoControlCode & 3) {
                (false, _) => 0,
                // METHOD_BUFFERED: one system buffer of the larger length serves both
                // directions.
                (true, METHOD_BUFFERED) => input_len.max(output_len),
                // A direct code (every WinVerbs code is buffered; any caller may send others):
                // the buffer the framework returned, of the length it returned.
                (true, _) => len,
            },
        }
    }

    /// The framework handle, for forwarding to a queue. The caller keeps ownership.
    pub fn handle(&self) -> WDFREQUEST {
        self.handle
    }

    /// Gives up ownership without completing (the request was forwarded to a queue, which
    /// owns it now).
    pub fn into_handle(self) -> WDFREQUEST {
        self.handle
    }
}

impl IoRequest for Request {
    fn ioctl_code(&self) -> u32 {
        self.code
    }

    fn input_len(&self) -> usize {
        self.input_len
    }

    fn output_len(&self) -> usize {
        self.output_len
    }

    fn buffer(&self) -> &[u8] {
        if self.buffer.is_null() {
            return &[];
        }
        // SAFETY: the system buffer of a request this value owns: `buffer_len` nonpaged bytes,
        // valid until the request is completed (which consumes `self`).
        unsafe { core::slice::from_raw_parts(self.buffer, self.buffer_len) }
    }

    fn buffer_mut(&mut self) -> &mut [u8] {
        if self.buffer.is_null() {
            return &mut [];
        }
        // SAFETY: as above; `&mut self` makes this the only reference.
        unsafe { core::slice::from_raw_parts_mut(self.buffer, self.buffer_len) }
    }

    fn complete(self, status: NtStatus, information: usize) {
        // SAFETY: a request this value owns, completed once (the value is consumed). The
        // status is the NTSTATUS bit pattern; `Information` is a ULONG_PTR.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfRequestCompleteWithInformation,
                self.handle,
                status.0 as NTSTATUS,
                information as u64,
            )
        };
    }
}
