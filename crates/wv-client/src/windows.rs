//! The Windows transport: the real `\\.\WinVerbs` device through overlapped I/O.
//!
//! Every request gets its own OVERLAPPED (with a manual-reset event) and its own heap buffer,
//! both at a fixed address until the request has ended. Requests are issued with
//! `NtDeviceIoControlFile`, which is what `DeviceIoControl` calls underneath, with the
//! OVERLAPPED as the I/O status block and as the completion-port context, exactly as
//! `DeviceIoControl` passes them. The reason for the NT call: when a driver fails an overlapped
//! request synchronously, the I/O manager writes neither the OVERLAPPED nor the event, and
//! `GetLastError` only has the lossy Win32 mapping of the NTSTATUS; the NT call returns the exact
//! NTSTATUS, which the conformance checks compare.
//!
//! NOT RUN HERE: this module is compiled for `x86_64-pc-windows-msvc` in CI but has never run
//! against a real driver.

use core::ffi::c_void;
use core::ptr;
use core::time::Duration;

use windows_sys::Wdk::System::IO::NtDeviceIoControlFile;
use windows_sys::Win32::Foundation::{
    CloseHandle, GENERIC_READ, GENERIC_WRITE, GetLastError, HANDLE, INVALID_HANDLE_VALUE,
    WAIT_OBJECT_0,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_FLAG_OVERLAPPED, FILE_SHARE_READ, FILE_SHARE_WRITE, OPEN_EXISTING,
};
use windows_sys::Win32::System::IO::{CancelIoEx, IO_STATUS_BLOCK, OVERLAPPED};
use windows_sys::Win32::System::Threading::{CreateEventW, INFINITE, WaitForSingleObject};

use crate::raw::{IoStatus, RawFile, RawIo};
use wv_abi::NtStatus;

/// The device path user mode opens (`\\.\WinVerbs`), NUL-terminated UTF-16.
const DEVICE_PATH: &str = "\\\\.\\WinVerbs";

/// An open handle to `\\.\WinVerbs`.
///
/// # Invariants
/// `handle` is a valid handle opened with `FILE_FLAG_OVERLAPPED`, owned by this value and closed
/// exactly once, by `Drop`.
#[derive(Debug)]
pub struct File {
    handle: HANDLE,
}

// SAFETY: a file handle may be used and closed from any thread; the value owns it.
unsafe impl Send for File {}
// SAFETY: every operation on the handle through `&File` (DeviceIoControl, CancelIoEx) is
// thread-safe in Win32.
unsafe impl Sync for File {}

impl File {
    /// Opens `\\.\WinVerbs` for overlapped I/O, as winverbs.dll does.
    ///
    /// # Errors
    /// The Win32 error of `CreateFileW` (for instance `ERROR_FILE_NOT_FOUND` when the driver
    /// is not installed or no RDMA controller has started).
    pub fn open() -> std::io::Result<File> {
        let path: Vec<u16> = DEVICE_PATH.encode_utf16().chain(Some(0)).collect();
        // SAFETY: `path` is NUL-terminated UTF-16 that outlives the call; the other arguments
        // are plain values or null pointers the API accepts.
        let handle = unsafe {
            CreateFileW(
                path.as_ptr(),
                GENERIC_READ | GENERIC_WRITE,
                FILE_SHARE_READ | FILE_SHARE_WRITE,
                ptr::null(),
                OPEN_EXISTING,
                FILE_FLAG_OVERLAPPED,
                ptr::null_mut(),
            )
        };
        if handle == INVALID_HANDLE_VALUE {
            return Err(std::io::Error::last_os_error());
        }
        // INVARIANT: a valid handle opened overlapped, owned from here on.
        Ok(File { handle })
    }
}

impl Drop for File {
    fn drop(&mut self) {
        // SAFETY: by the type invariant the handle is valid and this is the only close.
        unsafe { CloseHandle(self.handle) };
    }
}

/// The memory of one request, at a fixed heap address until the request has ended.
struct Block {
    overlapped: OVERLAPPED,
    buffer: Vec<u8>,
}

/// One IOCTL in flight.
///
/// # Invariants
/// While `done` is `None` the kernel may write `block.overlapped` and `block.buffer`; they are
/// not moved or freed until the request has ended (the event is signalled), which `Drop`
/// guarantees by cancelling and waiting.
pub struct Io {
    block: Box<Block>,
    event: HANDLE,
    handle: HANDLE,
    output_len: usize,
    pending: bool,
    done: Option<IoStatus>,
}

// SAFETY: the request's memory is owned by the value; events and handles are usable from any
// thread.
unsafe impl Send for Io {}

impl RawFile for File {
    type Io = Io;

    fn device_io_control(&self, code: u32, input: &[u8], output_len: usize) -> Io {
        let mut buffer = vec![0u8; input.len().max(output_len)];
        buffer[..input.len()].copy_from_slice(input);
        // SAFETY: creates an unnamed manual-reset event, initially not signalled.
        let event = unsafe { CreateEventW(ptr::null(), 1, 0, ptr::null()) };
        let mut block = Box::new(Block {
            // SAFETY: OVERLAPPED is plain data for which all-zero is the documented initial state.
            overlapped: unsafe { core::mem::zeroed() },
            buffer,
        });
        block.overlapped.hEvent = event;
        let (Ok(input_len), Ok(out_len)) = (u32::try_from(input.len()), u32::try_from(output_len))
        else {
            return Io::ended(
                block,
                event,
                self.handle,
                output_len,
                NtStatus::INVALID_PARAMETER,
            );
        };
        if event.is_null() {
            return Io::ended(block, event, self.handle, output_len, NtStatus::NO_MEMORY);
        }
        let overlapped: *mut OVERLAPPED = &mut block.overlapped;
        let data = block.buffer.as_mut_ptr().cast::<c_void>();
        // SAFETY: `self.handle` is valid (type invariant); the OVERLAPPED doubles as the I/O
        // status block (its first two fields have IO_STATUS_BLOCK's layout) and as the
        // completion context, as DeviceIoControl passes it; the buffer holds
        // max(input, output) bytes. Both stay at their heap address until the request ends
        // (the `Io` invariant).
        let status = unsafe {
            NtDeviceIoControlFile(
                self.handle,
                event,
                None,
                overlapped.cast::<c_void>(),
                overlapped.cast::<IO_STATUS_BLOCK>(),
                code,
                data,
                input_len,
                data,
                out_len,
            )
        } as u32;
        if status == NtStatus::PENDING.0 {
            return Io {
                block,
                event,
                handle: self.handle,
                output_len,
                pending: true,
                done: None,
            };
        }
        let mut io = Io {
            block,
            event,
            handle: self.handle,
            output_len,
            pending: false,
            done: None,
        };
        if NtStatus(status).is_error() {
            // The I/O manager wrote nothing back for a synchronous failure.
            io.done = Some(IoStatus {
                status,
                information: 0,
                output: Vec::new(),
            });
        } else {
            io.done = Some(io.collect(status));
        }
        io
    }

    fn cancel_io_ex(&self, io: &Io) -> bool {
        if io.done.is_some() {
            return false;
        }
        // SAFETY: the handle is valid and the OVERLAPPED is the one the request was issued
        // with, still at its address.
        unsafe { CancelIoEx(self.handle, &io.block.overlapped) != 0 }
    }
}

impl Io {
    fn ended(
        block: Box<Block>,
        event: HANDLE,
        handle: HANDLE,
        output_len: usize,
        status: NtStatus,
    ) -> Io {
        Io {
            block,
            event,
            handle,
            output_len,
            pending: false,
            done: Some(IoStatus {
                status: status.0,
                information: 0,
                output: Vec::new(),
            }),
        }
    }

    /// Reads the completed request's status block and output.
    fn collect(&self, status: u32) -> IoStatus {
        let information = self.block.overlapped.InternalHigh;
        let output = if NtStatus(status).is_error() {
            Vec::new()
        } else {
            let copied = information
                .min(self.output_len)
                .min(self.block.buffer.len());
            self.block.buffer[..copied].to_vec()
        };
        IoStatus {
            status,
            information,
            output,
        }
    }

    fn wait_event(&self) {
        // SAFETY: the event is valid until Drop closes it.
        let waited = unsafe { WaitForSingleObject(self.event, INFINITE) };
        assert_eq!(
            waited,
            WAIT_OBJECT_0,
            "waiting for a WinVerbs request failed: {}",
            {
                // SAFETY: reads the calling thread's last error.
                unsafe { GetLastError() }
            }
        );
    }
}

impl RawIo for Io {
    fn pending(&self) -> bool {
        self.pending
    }

    fn wait(mut self) -> IoStatus {
        if let Some(done) = self.done.take() {
            return done;
        }
        self.wait_event();
        // The kernel wrote the final status into the OVERLAPPED before signalling the event.
        let status = self.block.overlapped.Internal as u32;
        let result = self.collect(status);
        self.done = Some(result.clone());
        result
    }

    fn wait_timeout(&self, timeout: Duration) -> Option<IoStatus> {
        if let Some(done) = &self.done {
            return Some(done.clone());
        }
        // Whole milliseconds, rounded up so that a short non-zero wait does not become a poll;
        // INFINITE (u32::MAX) is never passed for a finite timeout.
        let ms = timeout
            .as_micros()
            .div_ceil(1000)
            .min(u128::from(INFINITE - 1)) as u32;
        // SAFETY: the event is valid until Drop closes it.
        let waited = unsafe { WaitForSingleObject(self.event, ms) };
        if waited != WAIT_OBJECT_0 {
            return None;
        }
        // The kernel wrote the final status into the OVERLAPPED before signalling the event;
        // it stays there, so reading it again later gives the same answer.
        let status = self.block.overlapped.Internal as u32;
        Some(self.collect(status))
    }
}

impl Drop for Io {
    fn drop(&mut self) {
        if self.done.is_none() && !self.event.is_null() {
            // The kernel still owns the block: cancel, then wait until it lets go. If the file
            // was closed, the driver's cleanup has ended the request already.
            // SAFETY: the OVERLAPPED is the one the request was issued with; a stale handle
            // makes CancelIoEx fail harmlessly.
            unsafe { CancelIoEx(self.handle, &self.block.overlapped) };
            self.wait_event();
        }
        if !self.event.is_null() {
            // SAFETY: the event was created for this request and is closed once, here.
            unsafe { CloseHandle(self.event) };
        }
    }
}
