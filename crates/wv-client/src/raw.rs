//! The raw IOCTL interface, identical on every transport.

use core::time::Duration;

/// How a request ended, as `GetOverlappedResult` and the OVERLAPPED's `Internal` /
/// `InternalHigh` fields report it: the HAL's type, the same on every transport.
pub use wv_hal::IoStatus;

/// An open handle to the driver's control device (`CreateFile` on `\\.\WinVerbs`). Dropping it
/// is `CloseHandle`: the driver cleans up every object created through it, and requests still
/// pending on it end (an [`RawIo`] outlives its file, as an OVERLAPPED outlives CloseHandle).
pub trait RawFile {
    /// A request in flight. `Send + 'static` so that a waitable result can be handed to another
    /// thread and outlive the call that issued it, as an OVERLAPPED can.
    type Io: RawIo + Send + 'static;
    /// Sends an IOCTL: `input` is the input buffer, `output_len` the output buffer's size.
    fn device_io_control(&self, code: u32, input: &[u8], output_len: usize) -> Self::Io;
    /// `CancelIoEx` for one request: returns whether a cancellable request was found.
    fn cancel_io_ex(&self, io: &Self::Io) -> bool;

    /// The device memory this handle's process shares with the driver's devices, when their
    /// user-mode providers reach the rings there (the device service's transport); `None`
    /// when the providers find their devices themselves (the in-process stack).
    #[cfg(target_os = "linux")]
    fn shared_device(&self) -> Option<std::sync::Arc<dyn wv_softhca::uvp::MappedDevice>> {
        None
    }
}

/// One IOCTL in flight (an OVERLAPPED).
pub trait RawIo {
    /// `true` when the driver pended the request (DeviceIoControl returned ERROR_IO_PENDING),
    /// `false` when it completed it inline.
    fn pending(&self) -> bool;
    /// Waits for the request to end.
    fn wait(self) -> IoStatus;
    /// Waits at most `timeout` (`GetOverlappedResultEx` with a timeout); `None` while the
    /// request is still pending. A zero timeout polls.
    fn wait_timeout(&self, timeout: Duration) -> Option<IoStatus>;
    /// Whether the request has ended (`HasOverlappedIoCompleted`).
    fn is_complete(&self) -> bool {
        self.wait_timeout(Duration::ZERO).is_some()
    }
}

/// Implements [`RawFile`] and [`RawIo`] for a transport whose file type `$file` and request type
/// `$io` already have inherent methods of the traits' names and signatures; `$extra` goes into
/// the `RawFile` impl as it stands (an override of a provided method).
#[macro_export]
macro_rules! raw_by_inherent {
    ($file:ty, $io:ty $(, { $($extra:tt)* })?) => {
        impl $crate::raw::RawFile for $file {
            type Io = $io;

            fn device_io_control(&self, code: u32, input: &[u8], output_len: usize) -> $io {
                <$file>::device_io_control(self, code, input, output_len)
            }

            fn cancel_io_ex(&self, io: &$io) -> bool {
                <$file>::cancel_io_ex(self, io)
            }

            $($($extra)*)?
        }

        impl $crate::raw::RawIo for $io {
            fn pending(&self) -> bool {
                <$io>::pending(self)
            }

            fn wait(self) -> $crate::raw::IoStatus {
                <$io>::wait(self)
            }

            fn wait_timeout(
                &self,
                timeout: ::core::time::Duration,
            ) -> Option<$crate::raw::IoStatus> {
                <$io>::wait_timeout(self, timeout)
            }

            fn is_complete(&self) -> bool {
                <$io>::is_complete(self)
            }
        }
    };
}
