//! WinVerbs' NTSTATUS → the errno each verb reports, and the three ways verbs report it
//! (rdma-core's man pages): the returned errno ("0 on success, or the value of errno on
//! failure"), -1 with `errno`, or NULL with `errno`.

use wv_abi::NtStatus;
use wv_client::verbs::VerbsError;

pub use libc::{
    EACCES, EAGAIN, EBADF, EBUSY, ECANCELED, EFAULT, EINVAL, EIO, ENODATA, ENODEV, ENOENT, ENOMEM,
    ENOSYS, EOPNOTSUPP, EPERM,
};

/// `extern "C"` functions of no arguments for entry points this library does not implement:
/// each sets `errno` to `EOPNOTSUPP` and returns `$ret` (typed `$ty`), documented by `$doc`.
/// With `()` for the type they do nothing at all, `errno` untouched.
macro_rules! unsupported_fns {
    ($doc:literal, () $(, $name:ident)* $(,)?) => {$(
        #[doc = $doc]
        pub extern "C" fn $name() {}
    )*};
    ($doc:literal, $ty:ty = $ret:expr $(, $name:ident)* $(,)?) => {$(
        #[doc = $doc]
        pub extern "C" fn $name() -> $ty {
            $crate::errno::set($crate::errno::EOPNOTSUPP);
            $ret
        }
    )*};
}
pub(crate) use unsupported_fns;

/// The errno for a driver status. WinVerbs reports any failure of the HCA's verbs as
/// `STATUS_UNSUCCESSFUL` (OFW's convention), which is an invalid request in every case the
/// library has not already refused itself, so it is `EINVAL`, as the kernel answers.
pub fn from_status(status: NtStatus) -> i32 {
    match status {
        NtStatus::SUCCESS => 0,
        NtStatus::INVALID_PARAMETER
        | NtStatus::UNSUCCESSFUL
        | NtStatus::INVALID_PORT_HANDLE
        | NtStatus::BUFFER_TOO_SMALL
        | NtStatus::INVALID_BUFFER_SIZE
        | NtStatus::INVALID_DEVICE_REQUEST
        | NtStatus::INVALID_DEVICE_STATE => EINVAL,
        NtStatus::INVALID_HANDLE | NtStatus::NOT_FOUND | NtStatus::OBJECT_NAME_NOT_FOUND => ENOENT,
        NtStatus::NO_MEMORY | NtStatus::INSUFFICIENT_RESOURCES => ENOMEM,
        NtStatus::NOT_IMPLEMENTED | NtStatus::NOT_SUPPORTED | NtStatus::PROCEDURE_NOT_FOUND => {
            EOPNOTSUPP
        }
        NtStatus::NO_SUCH_DEVICE | NtStatus::DEVICE_REMOVED | NtStatus::DEVICE_NOT_READY => ENODEV,
        NtStatus::ACCESS_DENIED => EBUSY,
        NtStatus::CANCELLED => ECANCELED,
        NtStatus::FILE_CLOSED => ENODEV,
        _ => EIO,
    }
}

/// The errno of a failed driver call.
pub fn of(e: &VerbsError) -> i32 {
    from_status(e.status)
}

/// Sets the calling thread's `errno`.
#[cfg(target_os = "linux")]
pub fn set(e: i32) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, valid for writes for
    // the thread's lifetime.
    let slot = unsafe { libc::__errno_location() };
    // SAFETY: the slot above, the calling thread's own.
    unsafe { *slot = e };
}

/// The calling thread's `errno`.
#[cfg(target_os = "linux")]
pub fn get() -> i32 {
    // SAFETY: as in `set`: the thread's own errno slot.
    let slot = unsafe { libc::__errno_location() };
    // SAFETY: the slot above, the calling thread's own.
    unsafe { *slot }
}

/// Sets the calling thread's `errno` (the library's own copy off Linux).
#[cfg(not(target_os = "linux"))]
pub fn set(e: i32) {
    LAST.with(|l| l.set(e));
}

/// The calling thread's `errno` (the library's own copy off Linux).
#[cfg(not(target_os = "linux"))]
pub fn get() -> i32 {
    LAST.with(|l| l.get())
}

#[cfg(not(target_os = "linux"))]
thread_local! {
    static LAST: core::cell::Cell<i32> = const { core::cell::Cell::new(0) };
}

/// "0 on success, or the value of errno on failure": sets `errno` too, as rdma-core does.
pub fn ret(r: Result<(), i32>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            set(e);
            e
        }
    }
}

/// "0 on success, -1 on error" with `errno`.
pub fn ret_minus1(r: Result<(), i32>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            set(e);
            -1
        }
    }
}

/// A pointer, or NULL with `errno`.
pub fn ret_ptr<T>(r: Result<*mut T, i32>) -> *mut T {
    match r {
        Ok(p) => p,
        Err(e) => {
            set(e);
            core::ptr::null_mut()
        }
    }
}

/// The shape of every `create_*` entry point that takes an attribute struct: `body` runs on
/// the caller's struct, a null one is `EINVAL`, and the result is a pointer or NULL with
/// `errno` ([`ret_ptr`]).
///
/// # Safety
/// `attr` is null, or readable and writable and not aliased for the call.
pub unsafe fn create_with<A, T>(
    attr: *mut A,
    body: impl FnOnce(&mut A) -> Result<*mut T, i32>,
) -> *mut T {
    // SAFETY: null or readable and writable by the contract.
    let attr = unsafe { attr.as_mut() };
    ret_ptr(attr.ok_or(EINVAL).and_then(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_the_errno_the_kernel_would_return() {
        assert_eq!(from_status(NtStatus::INVALID_PARAMETER), EINVAL);
        assert_eq!(from_status(NtStatus::UNSUCCESSFUL), EINVAL);
        assert_eq!(from_status(NtStatus::NO_MEMORY), ENOMEM);
        assert_eq!(from_status(NtStatus::INSUFFICIENT_RESOURCES), ENOMEM);
        assert_eq!(from_status(NtStatus::NOT_SUPPORTED), EOPNOTSUPP);
        assert_eq!(from_status(NtStatus::DEVICE_REMOVED), ENODEV);
        assert_eq!(from_status(NtStatus::ACCESS_DENIED), EBUSY);
        assert_eq!(from_status(NtStatus::CANCELLED), ECANCELED);
        assert_eq!(from_status(NtStatus(0xC000_FFFF)), EIO);
    }

    #[test]
    fn the_three_conventions() {
        assert_eq!(ret(Err(EINVAL)), EINVAL);
        assert_eq!(get(), EINVAL);
        assert_eq!(ret_minus1(Err(EAGAIN)), -1);
        assert_eq!(get(), EAGAIN);
        assert!(ret_ptr::<u8>(Err(ENOMEM)).is_null());
        assert_eq!(get(), ENOMEM);
        assert_eq!(ret(Ok(())), 0);
    }
}
