//! [`Pending`]: the waitable result of an overlapped IOCTL (CQ/SRQ/port notify, QP modify).

use core::fmt;
use core::time::Duration;
use std::sync::{Arc, Weak};

use wv_abi::NtStatus;

use crate::raw::{IoStatus, RawFile, RawIo};
use crate::verbs::error::{Result, VerbsError};

/// One request in flight with the handle it was issued on, so it can be cancelled. The handle
/// is held weakly: an OVERLAPPED does not keep its handle open, and CancelIoEx on a closed
/// handle finds nothing.
pub(crate) trait ErasedIo: Send {
    fn pended(&self) -> bool;
    fn wait(self: Box<Self>) -> IoStatus;
    fn wait_timeout(&self, timeout: Duration) -> Option<IoStatus>;
    fn is_complete(&self) -> bool;
    fn cancel(&self) -> bool;
}

pub(crate) struct Issued<F: RawFile> {
    pub(crate) file: Weak<F>,
    pub(crate) io: F::Io,
}

impl<F: RawFile + Send + Sync + 'static> ErasedIo for Issued<F> {
    fn pended(&self) -> bool {
        self.io.pending()
    }
    fn wait(self: Box<Self>) -> IoStatus {
        self.io.wait()
    }
    fn wait_timeout(&self, timeout: Duration) -> Option<IoStatus> {
        self.io.wait_timeout(timeout)
    }
    fn is_complete(&self) -> bool {
        self.io.is_complete()
    }
    fn cancel(&self) -> bool {
        self.file
            .upgrade()
            .is_some_and(|file| file.cancel_io_ex(&self.io))
    }
}

/// How a completed request becomes the caller's value.
pub(crate) type Finish<T> = fn(&'static str, &IoStatus) -> Result<T>;

/// The waitable result of a pended IOCTL (an OVERLAPPED and its `GetOverlappedResult`).
///
/// It holds neither the object it was issued for nor the handle: destroying that object,
/// cancelling, closing the handle or removing the device completes it (with `STATUS_CANCELLED` or
/// `STATUS_DEVICE_REMOVED`), as in WinVerbs. Dropping a `Pending` that has not completed
/// cancels it (CancelIoEx), so no request is left parked behind.
pub struct Pending<T> {
    io: Option<Box<dyn ErasedIo>>,
    op: &'static str,
    finish: Finish<T>,
}

impl<T> fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pending")
            .field("op", &self.op)
            .field("complete", &self.is_complete())
            .finish()
    }
}

impl<T> Pending<T> {
    pub(crate) fn new<F: RawFile + Send + Sync + 'static>(
        file: &Arc<F>,
        io: F::Io,
        op: &'static str,
        finish: Finish<T>,
    ) -> Self {
        Pending {
            io: Some(Box::new(Issued {
                file: Arc::downgrade(file),
                io,
            })),
            op,
            finish,
        }
    }

    fn io(&self) -> Option<&dyn ErasedIo> {
        self.io.as_deref()
    }

    /// The operation, e.g. `"CQ_NOTIFY"`.
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// Whether the driver pended the request (`ERROR_IO_PENDING`) rather than completing it
    /// inline.
    pub fn pended(&self) -> bool {
        self.io().is_some_and(|io| io.pended())
    }

    /// Whether the request has ended (`HasOverlappedIoCompleted`).
    pub fn is_complete(&self) -> bool {
        self.io().is_none_or(|io| io.is_complete())
    }

    /// Waits for the request to end and converts its status.
    ///
    /// # Errors
    /// The NTSTATUS it ended with, when that is not a success for this operation.
    pub fn wait(mut self) -> Result<T> {
        let op = self.op;
        match self.io.take() {
            Some(io) => (self.finish)(op, &io.wait()),
            None => Err(VerbsError::new(op, NtStatus::INVALID_HANDLE)),
        }
    }

    /// Waits at most `timeout`; `None` while the request is still pending. May be called again.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<T>> {
        let st = self.io()?.wait_timeout(timeout)?;
        Some((self.finish)(self.op, &st))
    }

    /// CancelIoEx for this request: returns whether a cancellable request was found. A parked
    /// request then completes with `STATUS_CANCELLED`.
    pub fn cancel(&self) -> bool {
        self.io().is_some_and(|io| io.cancel())
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        if let Some(io) = self.io.take()
            && !io.is_complete()
        {
            // An abandoned OVERLAPPED: end the request rather than leave it parked. A request
            // the driver is working on (a running QP modify) is only marked and ends by itself.
            io.cancel();
        }
    }
}

/// Success → `()`.
pub(crate) fn finish_unit(op: &'static str, st: &IoStatus) -> Result<()> {
    check(op, st).map(|_| ())
}

/// Success → the first four output bytes as a `u32` (DEVICE_NOTIFY's event flags).
pub(crate) fn finish_u32_output(op: &'static str, st: &IoStatus) -> Result<u32> {
    check(op, st)?;
    let bytes: [u8; 4] = st
        .output
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or(VerbsError::new(op, NtStatus::BUFFER_TOO_SMALL))?;
    Ok(u32::from_ne_bytes(bytes))
}

/// Any success code → the code itself (SRQ_NOTIFY: `ALERTED`, `NOTIFY_CLEANUP`).
pub(crate) fn finish_status(op: &'static str, st: &IoStatus) -> Result<u32> {
    check(op, st).map(|s| s.0)
}

/// `NT_SUCCESS` or the error.
pub(crate) fn check(op: &'static str, st: &IoStatus) -> Result<NtStatus> {
    let status = NtStatus(st.status);
    if status.is_success() {
        Ok(status)
    } else {
        Err(VerbsError::new(op, status))
    }
}
