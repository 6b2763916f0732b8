//! Errors of the verbs API: the operation and the NTSTATUS the driver (or the library, for
//! failures that never reach the driver) answered.

use core::fmt;
use std::sync::Mutex;

use wv_abi::NtStatus;

/// `STATUS_DLL_NOT_FOUND`: what `LoadLibrary` of a missing user-mode provider comes down to.
pub const STATUS_DLL_NOT_FOUND: NtStatus = NtStatus(0xC000_0135);

/// `STATUS_INVALID_ADDRESS`: an address no RDMA port owns (winverbs.dll's `TranslateAddress`
/// failing, `WV_INVALID_ADDRESS`).
pub const STATUS_INVALID_ADDRESS: NtStatus = NtStatus(0xC000_0141);
/// `STATUS_ADDRESS_ALREADY_EXISTS`: the port is taken (the socket bind's `WSAEADDRINUSE`).
pub const STATUS_ADDRESS_ALREADY_EXISTS: NtStatus = NtStatus(0xC000_020A);
/// `STATUS_HOST_UNREACHABLE`: no path to the destination (`WV_HOST_UNREACHABLE`).
pub const STATUS_HOST_UNREACHABLE: NtStatus = NtStatus(0xC000_023D);

/// Statuses the library itself produces (the driver never does, so wv-abi has no names).
const LIBRARY_STATUSES: &[(NtStatus, &str)] = &[
    (STATUS_DLL_NOT_FOUND, "STATUS_DLL_NOT_FOUND"),
    (STATUS_INVALID_ADDRESS, "STATUS_INVALID_ADDRESS"),
    (
        STATUS_ADDRESS_ALREADY_EXISTS,
        "STATUS_ADDRESS_ALREADY_EXISTS",
    ),
    (STATUS_HOST_UNREACHABLE, "STATUS_HOST_UNREACHABLE"),
];

/// A failed control-path call: which operation (named after its IOCTL, e.g. `"QP_CREATE"`) and
/// the NTSTATUS it ended with. Statuses are the raw NTSTATUS values (`WV_*` in `wvstatus.h`),
/// not the Win32 mapping, so they compare exactly with the spec's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VerbsError {
    /// The operation: an IOCTL name without the `WV_IOCTL_` prefix, or a library step such as
    /// `"LoadLibrary(mlx4u.dll)"`.
    pub op: &'static str,
    /// The status it failed with.
    pub status: NtStatus,
}

impl VerbsError {
    /// An error of `op` with `status`.
    pub const fn new(op: &'static str, status: NtStatus) -> Self {
        VerbsError { op, status }
    }
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((_, name)) = LIBRARY_STATUSES.iter().find(|(s, _)| *s == self.status) {
            return write!(f, "{} failed: {name} (0x{:08X})", self.op, self.status.0);
        }
        write!(f, "{} failed: {}", self.op, self.status)
    }
}

impl std::error::Error for VerbsError {}

/// The result of a verbs call.
pub type Result<T> = core::result::Result<T, VerbsError>;

/// A `'static` operation name built at run time (e.g. naming a missing library). Each distinct
/// text is leaked once and reused, so the memory is bounded by the set of names ever seen.
pub(crate) fn static_op(text: String) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(known) = names.iter().find(|n| **n == text) {
        return known;
    }
    let leaked: &'static str = Box::leak(text.into_boxed_str());
    names.push(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_op_and_status() {
        let e = VerbsError::new("QP_CREATE", NtStatus::NOT_FOUND);
        assert_eq!(
            e.to_string(),
            "QP_CREATE failed: STATUS_NOT_FOUND (0xC0000225)"
        );
        let e = VerbsError::new("LoadLibrary(x.dll)", STATUS_DLL_NOT_FOUND);
        assert_eq!(
            e.to_string(),
            "LoadLibrary(x.dll) failed: STATUS_DLL_NOT_FOUND (0xC0000135)"
        );
    }

    #[test]
    fn static_ops_are_reused() {
        let a = static_op("LoadLibrary(a.dll)".to_string());
        let b = static_op("LoadLibrary(a.dll)".to_string());
        assert!(core::ptr::eq(a, b));
    }
}
