//! The user-mode side of WinVerbs.
//!
//! [`raw`] is the interface a conformance suite drives: open a file on the driver, send IOCTL
//! bytes, see whether the request pended, wait for its status, cancel it, close the file. It has
//! the same shape on every transport:
//!
//! * [`inproc`]: the in-process stack — the real driver core on the host model of KMDF above
//!   soft HCAs — with the admin actions a controller's owner has;
//! * `windows` (Windows only): the real `\\.\WinVerbs` device, through overlapped I/O;
//! * `service` (Linux): `\\.\WinVerbs` as the device service `wvd` hosts it for every process
//!   of the machine, over a Unix socket, with the data path in memory shared with the service.
//!
//! [`verbs`] is the verbs API (provider, device, PD, MR, CQ, SRQ, QP, AH, MW) over any of them.
#![deny(unsafe_code)]

pub mod inproc;
pub mod raw;
pub mod verbs;

#[cfg(windows)]
#[allow(
    unsafe_code,
    reason = "the Windows transport calls the Win32 and NT APIs"
)]
pub mod windows;

#[cfg(target_os = "linux")]
pub mod service;
