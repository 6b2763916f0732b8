//! The user-mode side of WinVerbs.
//!
//! [`raw`] is the interface a conformance suite drives: open a file on the driver, send IOCTL
//! bytes, see whether the request pended, wait for its status, cancel it, close the file. It has
//! the same shape on every transport:
//!
//! * `windows` (Windows only): the real `\\.\WinVerbs` device, through overlapped I/O;
//! * `service` (Linux): `\\.\WinVerbs` as the device service `wvd` hosts it for every process
//!   of the machine, over a Unix socket, with the data path in memory shared with the service;
//! * the in-process stack — the real driver core on the host model of KMDF above soft HCAs —
//!   is the `wv-inproc` crate, so this library carries neither the driver core nor the host
//!   model.
//!
//! [`verbs`] is the verbs API (provider, device, PD, MR, CQ, SRQ, QP, AH, MW) over any of them.
#![deny(unsafe_code)]

pub mod raw;
pub mod verbs;

#[cfg(windows)]
#[allow(
    unsafe_code,
    reason = "the Windows transport calls the Win32 and NT APIs"
)]
pub mod windows;

/// The memory of "this process" as the soft HCA's user-mode provider and every in-process soft
/// HCA see it: buffers allocated here ([`verbs::Device::alloc_buffer`]) can be registered
/// (MEMORY_REGISTER) with any device of any in-process stack that validates against this pool;
/// other addresses are refused, as the kernel's probe refuses unmapped memory.
pub fn process_memory() -> &'static wv_softhca::BufferPool {
    static POOL: std::sync::OnceLock<wv_softhca::BufferPool> = std::sync::OnceLock::new();
    POOL.get_or_init(wv_softhca::BufferPool::new)
}

#[cfg(target_os = "linux")]
pub mod service;
