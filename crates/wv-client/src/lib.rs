//! The user-mode side of WinVerbs.
//!
//! [`raw`] is the interface a conformance suite drives: open a file on the driver, send IOCTL
//! bytes, see whether the request pended, wait for its status, cancel it, close the file. It has
//! the same shape on every transport:
//!
//! * [`windows`] (Windows only): the real `\\.\WinVerbs` device, through overlapped I/O.
#![deny(unsafe_code)]

pub mod raw;

#[cfg(windows)]
#[allow(
    unsafe_code,
    reason = "the Windows transport calls the Win32 and NT APIs"
)]
pub mod windows;
