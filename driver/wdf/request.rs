//! Requests the driver owns. [`OwnedRequest`] is any `WDFREQUEST` delivered to the driver and
//! not yet completed or handed on; [`Request`] is an IOCTL with its buffer, as
//! `wv_hal::IoRequest`. Completing consumes the value, so a request cannot be completed twice
//! from safe code, and dropping one that was neither completed nor handed on completes it, so
//! no IRP can be left pending for ever by a forgotten value.
//!
//! The status of a dropped request is `STATUS_INTERNAL_ERROR`: nothing in the driver drops a
//! request on purpose (the host model's verifier fails any test that does), so a drop is a bug,
//! and the status says so. `STATUS_CANCELLED` would have looked like an ordinary cancellation
//! to the application (winverbs.dll expects it on every close) and hidden the bug; the debugger
//! log names the request too.

use core::mem::forget;
use core::ptr::null_mut;

use wdk::nt_success;
use wdk_sys::{
    _MODE, _WDF_REQUEST_TYPE, KPROCESSOR_MODE, NTSTATUS, PVOID, STATUS_INTERNAL_ERROR,
    WDFFILEOBJECT, WDFREQUEST, call_unsafe_wdf_function_binding,
};
use wv_abi::NtStatus;
use wv_core::control::{RequestBuffer, Requestor, request_buffer};
use wv_hal::IoRequest;

use super::wdf_init::wdf_request_parameters_init;

/// A request the driver owns: delivered to it, not completed, not forwarded or enqueued.
pub struct OwnedRequest {
    handle: WDFREQUEST,
}

// SAFETY: a WDFREQUEST the driver owns may be completed, forwarded or enqueued from any thread
// at IRQL <= DISPATCH_LEVEL.
unsafe impl Send for OwnedRequest {}

/// The IOCTL parameters of a request.
#[derive(Clone, Copy, Debug)]
pub struct IoctlParameters {
    /// `IoControlCode`.
    pub code: u32,
    /// `InputBufferLength`.
    pub input_len: usize,
    /// `OutputBufferLength`.
    pub output_len: usize,
}

/// Which retrieval call [`OwnedRequest::buffer`] makes.
#[derive(Clone, Copy)]
enum Direction {
    Input,
    Output,
}

impl OwnedRequest {
    /// Takes ownership of `handle`. IRQL <= DISPATCH_LEVEL.
    ///
    /// # Safety
    /// `handle` is a live request the driver owns: the framework delivered it to a callback of
    /// this driver (or a manual queue handed it out), and it was not completed, forwarded,
    /// enqueued or taken by another `OwnedRequest` since.
    pub unsafe fn from_raw(handle: WDFREQUEST) -> OwnedRequest {
        OwnedRequest { handle }
    }

    /// The framework handle, for a call that hands the request on; the caller keeps ownership
    /// until that call succeeds and then gives it up with [`OwnedRequest::into_raw`].
    pub fn raw(&self) -> WDFREQUEST {
        self.handle
    }

    /// Gives up ownership without completing: the request was handed to a queue, which owns it
    /// now.
    pub fn into_raw(self) -> WDFREQUEST {
        let handle = self.handle;
        forget(self);
        handle
    }

    /// Completes the request with `status` and `information` (the bytes of output, or 0).
    /// IRQL <= DISPATCH_LEVEL.
    pub fn complete(self, status: NTSTATUS, information: usize) {
        let handle = self.into_raw();
        // SAFETY: a request this value owned, completed once (the value is gone).
        unsafe { complete_raw(handle, status, information) };
    }

    /// Its IOCTL parameters, or `None` if it is no IOCTL. IRQL <= DISPATCH_LEVEL.
    pub fn ioctl(&self) -> Option<IoctlParameters> {
        let mut parameters = wdf_request_parameters_init();
        // SAFETY: a live request; `parameters` is an initialised structure of the right size.
        unsafe {
            call_unsafe_wdf_function_binding!(WdfRequestGetParameters, self.handle, &mut parameters)
        };
        if parameters.Type != _WDF_REQUEST_TYPE::WdfRequestTypeDeviceControl {
            return None;
        }
        // SAFETY: for an IOCTL the DeviceIoControl member of the union is the one the
        // framework filled.
        let io = unsafe { parameters.Parameters.DeviceIoControl };
        Some(IoctlParameters {
            code: io.IoControlCode,
            input_len: io.InputBufferLength,
            output_len: io.OutputBufferLength,
        })
    }

    /// The file object the request was sent on (the control device's: one per handle), or
    /// `None` for a request without one (a kernel-mode `IoBuildDeviceIoControlRequest`).
    pub fn file_object(&self) -> Option<WDFFILEOBJECT> {
        // SAFETY: a live request; its file object lives at least as long as the request.
        let file =
            unsafe { call_unsafe_wdf_function_binding!(WdfRequestGetFileObject, self.handle) };
        (!file.is_null()).then_some(file)
    }

    /// Who sent the request (`WdfRequestGetRequestorMode`). IRQL <= DISPATCH_LEVEL.
    pub fn requestor(&self) -> Requestor {
        // SAFETY: a live request.
        let mode =
            unsafe { call_unsafe_wdf_function_binding!(WdfRequestGetRequestorMode, self.handle) };
        if mode == _MODE::UserMode as KPROCESSOR_MODE {
            Requestor::User
        } else {
            Requestor::Kernel
        }
    }

    /// The buffer one of the retrieval calls returns, or null when it fails.
    fn buffer(&self, direction: Direction) -> *mut u8 {
        let mut buffer: PVOID = null_mut();
        let mut len = 0usize;
        let status = match direction {
            // SAFETY: a live request; the outputs are locals; no minimum length.
            Direction::Input => unsafe {
                call_unsafe_wdf_function_binding!(
                    WdfRequestRetrieveInputBuffer,
                    self.handle,
                    0,
                    &mut buffer,
                    &mut len,
                )
            },
            // SAFETY: as above.
            Direction::Output => unsafe {
                call_unsafe_wdf_function_binding!(
                    WdfRequestRetrieveOutputBuffer,
                    self.handle,
                    0,
                    &mut buffer,
                    &mut len,
                )
            },
        };
        if nt_success(status) {
            buffer.cast()
        } else {
            null_mut()
        }
    }
}

impl Drop for OwnedRequest {
    fn drop(&mut self) {
        wdk::println!(
            "WinVerbs: request {:p} dropped without completion; completed with STATUS_INTERNAL_ERROR",
            self.handle
        );
        // SAFETY: a request this value owns and nobody completed (completing or handing it on
        // consumes the value without running this); completed once, here.
        unsafe { complete_raw(self.handle, STATUS_INTERNAL_ERROR, 0) };
    }
}

/// `WdfRequestCompleteWithInformation`. IRQL <= DISPATCH_LEVEL.
///
/// # Safety
/// `handle` is a live request the driver owns; it is invalid after the call.
unsafe fn complete_raw(handle: WDFREQUEST, status: NTSTATUS, information: usize) {
    // SAFETY: the caller's promise. `Information` is a ULONG_PTR.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestCompleteWithInformation,
            handle,
            status,
            information as u64,
        )
    };
}

/// An IOCTL request the driver owns, with its system buffer.
pub struct Request {
    owned: OwnedRequest,
    parameters: IoctlParameters,
    /// The bytes the core sees (`wv_core::control::request_buffer`), or null.
    buffer: *mut u8,
    buffer_len: usize,
}

// SAFETY: as `OwnedRequest`; the system buffer is nonpaged and belongs to the request.
unsafe impl Send for Request {}

impl Request {
    /// The IOCTL view of `owned`, whose parameters are `parameters` ([`OwnedRequest::ioctl`]).
    /// IRQL <= DISPATCH_LEVEL.
    pub fn new(owned: OwnedRequest, parameters: IoctlParameters) -> Request {
        let IoctlParameters {
            code,
            input_len,
            output_len,
        } = parameters;
        let (buffer, buffer_len) = match request_buffer(code, input_len, output_len) {
            RequestBuffer::None => (null_mut(), 0),
            RequestBuffer::Input { len } => (owned.buffer(Direction::Input), len),
            RequestBuffer::Output { len } => (owned.buffer(Direction::Output), len),
        };
        Request {
            owned,
            parameters,
            buffer,
            buffer_len: if buffer.is_null() { 0 } else { buffer_len },
        }
    }

    /// The request, for handing it on. The caller keeps ownership until the hand-over succeeds.
    pub fn owned(&self) -> &OwnedRequest {
        &self.owned
    }

    /// Gives up ownership (the request was handed to a queue, which owns it now).
    pub fn into_raw(self) -> WDFREQUEST {
        self.owned.into_raw()
    }
}

impl IoRequest for Request {
    fn ioctl_code(&self) -> u32 {
        self.parameters.code
    }

    fn input_len(&self) -> usize {
        self.parameters.input_len
    }

    fn output_len(&self) -> usize {
        self.parameters.output_len
    }

    fn buffer(&self) -> &[u8] {
        if self.buffer.is_null() {
            return &[];
        }
        // SAFETY: the system buffer of a request this value owns: `buffer_len` nonpaged bytes
        // (the METHOD_BUFFERED buffer of the larger length), valid until the request is
        // completed (which consumes `self`).
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
        // The NTSTATUS bit pattern.
        self.owned.complete(status.0 as NTSTATUS, information);
    }
}
