//! The NTSTATUS values the WinVerbs driver produces.
//!
//! Pended requests hand the raw NTSTATUS to user mode (`GetOverlappedResult` returns
//! `OVERLAPPED.Internal`, and `wvstatus.h` defines `WV_*` as NTSTATUS values), so these exact
//! numbers are ABI, not just diagnostics.

use core::fmt;

/// An NTSTATUS as the 32-bit pattern Windows stores; compare by value, print by name.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct NtStatus(pub u32);

macro_rules! statuses {
    ($( $name:ident = $value:literal, $doc:literal; )*) => {
        impl NtStatus {
            $(
                #[doc = $doc]
                pub const $name: NtStatus = NtStatus($value);
            )*

            /// The `STATUS_*` C name, if this is one of the statuses this crate knows.
            pub const fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(concat!("STATUS_", stringify!($name))),)*
                    _ => None,
                }
            }
        }

        /// Every status this crate names, for tables and exhaustive tests.
        pub const ALL_KNOWN: &[NtStatus] = &[$(NtStatus::$name),*];
    };
}

statuses! {
    SUCCESS = 0x0000_0000, "Normal completion.";
    ALERTED = 0x0000_0101, "SRQ_NOTIFY: the SRQ limit was reached (a success code).";
    TIMEOUT = 0x0000_0102, "EP_CONNECT REQ timeout; EP_DISCONNECT when the DREQ times out (a success code).";
    PENDING = 0x0000_0103, "The request was parked; completion comes later.";
    MORE_ENTRIES = 0x0000_0105, "GID/PKEY query: the table is larger than the output buffer (success).";
    NOTIFY_CLEANUP = 0x0000_010B, "SRQ_NOTIFY: last WQE reached on a QP attached to the SRQ (success).";
    NO_MORE_ENTRIES = 0x8000_001A, "CM get_request: no connection request is queued (a warning).";
    UNSUCCESSFUL = 0xC000_0001, "Any failure reported by the HCA verbs.";
    NOT_IMPLEMENTED = 0xC000_0002, "EP_LOOKUP / EP_MULTICAST_*; an unknown CM event.";
    INVALID_HANDLE = 0xC000_0008, "A handle that does not name a live object.";
    INVALID_PARAMETER = 0xC000_000D, "EP_MODIFY with an option other than `WV_IO_EP_OPTION_ROUTE`.";
    NO_SUCH_DEVICE = 0xC000_000E, "Unknown device GUID or device id (open, query, PD/CQ create).";
    INVALID_DEVICE_REQUEST = 0xC000_0010, "The request type is not valid for this device or state.";
    NO_MEMORY = 0xC000_0017, "Allocation failed or an id table is full.";
    ACCESS_DENIED = 0xC000_0022, "Destroy while children or in-flight operations still hold the object.";
    BUFFER_TOO_SMALL = 0xC000_0023, "Input or output buffer shorter than the handler's minimum.";
    OBJECT_NAME_NOT_FOUND = 0xC000_0034, "A named object (e.g. a lower interface) does not exist.";
    INVALID_PORT_HANDLE = 0xC000_0042, "Port number out of range (it is 1-based).";
    PROCEDURE_NOT_FOUND = 0xC000_007A, "Unknown IOCTL code.";
    INSUFFICIENT_RESOURCES = 0xC000_009A, "Out of system resources (framework or pool).";
    DEVICE_NOT_READY = 0xC000_00A3, "The RDMA device is not (yet, or no longer) started.";
    IO_TIMEOUT = 0xC000_00B5, "Passive EP_ACCEPT: the REP timed out.";
    NOT_SUPPORTED = 0xC000_00BB, "Endpoint operation in the wrong state.";
    TOO_MANY_COMMANDS = 0xC000_00C1, "A second asynchronous EP operation while one is in flight.";
    UNEXPECTED_IO_ERROR = 0xC000_00E9, "CQ/SRQ asynchronous error event.";
    CONNECTION_IN_USE = 0xC000_0108, "EP_GET_REQUEST with a new endpoint that is not idle.";
    CANCELLED = 0xC000_0120, "`*_CANCEL`, purge on destroy, or framework cancellation.";
    FILE_CLOSED = 0xC000_0128, "IOCTL issued after the file handle was cleaned up.";
    INVALID_DEVICE_STATE = 0xC000_0184, "EP_DISCONNECT in a state that has no connection.";
    INVALID_BUFFER_SIZE = 0xC000_0206, "EP_CONNECT/EP_ACCEPT private data length above 56.";
    NOT_FOUND = 0xC000_0225, "Unknown object id (most object types).";
    CONNECTION_REFUSED = 0xC000_0236, "The peer rejected the connection (REJ).";
    DEVICE_REMOVED = 0xC000_02B6, "The RDMA device was removed under the open handle.";
}

impl NtStatus {
    /// The top two bits: 0 success, 1 informational, 2 warning, 3 error.
    pub const fn severity(self) -> u32 {
        self.0 >> 30
    }

    /// `NT_SUCCESS`: success and informational codes (the I/O manager copies output back).
    pub const fn is_success(self) -> bool {
        (self.0 as i32) >= 0
    }

    /// Severity 2: not success, yet the I/O manager still copies output back.
    pub const fn is_warning(self) -> bool {
        self.severity() == 2
    }

    /// Severity 3: no output reaches user mode.
    pub const fn is_error(self) -> bool {
        self.severity() == 3
    }
}

impl fmt::Debug for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "NtStatus({:#010X})", self.0),
        }
    }
}

impl fmt::Display for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} (0x{:08X})", self.0),
            None => write!(f, "NTSTATUS 0x{:08X}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert!(NtStatus::SUCCESS.is_success());
        assert!(NtStatus::TIMEOUT.is_success());
        assert!(NtStatus::PENDING.is_success());
        assert!(!NtStatus::NOT_FOUND.is_success());
        assert!(NtStatus::NOT_FOUND.is_error());
        assert!(NtStatus(0x8000_0005).is_warning());
        assert!(!NtStatus(0x8000_0005).is_success());
        assert!(!NtStatus(0x8000_0005).is_error());
    }

    #[test]
    fn names_are_unique_and_prefixed() {
        for (i, a) in ALL_KNOWN.iter().enumerate() {
            assert!(a.name().unwrap().starts_with("STATUS_"));
            for b in &ALL_KNOWN[i + 1..] {
                assert_ne!(a.0, b.0);
            }
        }
        assert_eq!(NtStatus::NOT_FOUND.name(), Some("STATUS_NOT_FOUND"));
        assert_eq!(NtStatus(0x1234).name(), None);
    }
}
