//! IOCTL codes of the WinVerbs control device (`\\.\WinVerbs`) and what each one does with its
//! request.
//!
//! The order of the functions is ABI: user-mode `winverbs.dll` binaries have the codes compiled
//! in, so [`Ioctl`] discriminants and the `WV_IOCTL_*` values must never be renumbered.

/// `FILE_DEVICE_INFINIBAND`: the device type the HCA headers define for every IB control device.
pub const FILE_DEVICE_INFINIBAND: u32 = 0x3B;
/// `METHOD_BUFFERED`: input and output share one system buffer (the reason handlers can leave
/// echoed input standing in the output).
pub const METHOD_BUFFERED: u32 = 0;
/// `FILE_READ_DATA | FILE_WRITE_DATA`: the handle must be opened read/write to issue any IOCTL.
pub const FILE_READ_WRITE_ACCESS: u32 = 0x1 | 0x2;
/// First function number of the WinVerbs range; `function = WV_IO_FUNCTION_BASE + index`.
pub const WV_IO_FUNCTION_BASE: u32 = 0x800;
/// `WV_IOCTL_MIN` as the header defines it: a *function number* (0x800), not an IOCTL code.
/// The code built from it (0x003BE000) is not handled and gets `STATUS_PROCEDURE_NOT_FOUND`.
pub const WV_IOCTL_MIN: u32 = WV_IO_FUNCTION_BASE;
/// `WV_IOCTL_MAX` as the header defines it: a *function number* (0x836), one past PD_CANCEL.
pub const WV_IOCTL_MAX: u32 = WV_IO_FUNCTION_BASE + 54;

/// `CTL_CODE(FILE_DEVICE_INFINIBAND, function, METHOD_BUFFERED, FILE_READ_DATA|FILE_WRITE_DATA)`,
/// the `WV_IOCTL(f)` macro of `wv_ioctl.h`.
pub const fn wv_ioctl(function: u32) -> u32 {
    (FILE_DEVICE_INFINIBAND << 16)
        | (FILE_READ_WRITE_ACCESS << 14)
        | (function << 2)
        | METHOD_BUFFERED
}

/// How a request with a valid buffer completes, as seen by the overlapped caller. Callers that
/// use IOCP or `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS` depend on this, so it is part of the ABI.
/// Validation failures (bad buffer, unknown id) always complete inline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Completion {
    /// Completed before the dispatch routine returns.
    Inline,
    /// Parked in a queue or posted to a work item; the caller sees `ERROR_IO_PENDING`.
    Pends,
    /// Depends on object state: inline when the answer is already known, pending otherwise.
    Either,
}

macro_rules! ioctls {
    ($( $index:literal $variant:ident $cname:ident $completion:ident $doc:literal; )*) => {
        $(
            #[doc = $doc]
            pub const $cname: u32 = wv_ioctl(WV_IO_FUNCTION_BASE + $index);
        )*

        /// One WinVerbs IOCTL; the discriminant is its index in the header's function enum.
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Ioctl {
            $(
                #[doc = $doc]
                $variant = $index,
            )*
        }

        impl Ioctl {
            /// Every IOCTL in index order (1..=53), for tables and exhaustive tests.
            pub const ALL: [Ioctl; 53] = [$(Ioctl::$variant),*];

            /// The C macro name, e.g. `"WV_IOCTL_GUID_QUERY"`, for logs and the harness.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Ioctl::$variant => stringify!($cname),)*
                }
            }

            /// Inline / pending behaviour of a valid request (see [`Completion`]).
            pub const fn completion(self) -> Completion {
                match self {
                    $(Ioctl::$variant => Completion::$completion,)*
                }
            }
        }
    };
}

// Completion column: DEVICE_NOTIFY completes inline when port flags are already pending.
// EP_DISCONNECT completes inline from the ActiveDisconnect/PassiveDisconnect states.
// EP_DISCONNECT_NOTIFY completes inline (SUCCESS) when already (passively) disconnected.
// EP_GET_REQUEST is forwarded to the listener queue *before* the handler tries to satisfy it,
// so even an immediate match reaches the caller as a pended IRP.
// QP_MODIFY: OFW ran it synchronously ("CI does not yet support async operations"); this driver
// runs it on a work item so the HCA call happens at PASSIVE_LEVEL, so it pends.
ioctls! {
    1 GuidQuery WV_IOCTL_GUID_QUERY Inline "in: none; out: `WV_IO_GUID_LIST` (node GUIDs of all RDMA devices).";
    2 LibraryQuery WV_IOCTL_LIBRARY_QUERY Inline "in: `NET64` device GUID; out: NUL-terminated UVP library name.";
    3 DeviceOpen WV_IOCTL_DEVICE_OPEN Inline "in: `WV_IO_ID` (Id = GUID) + UMV; out: `WV_IO_ID` (Id = device id) + UMV.";
    4 DeviceClose WV_IOCTL_DEVICE_CLOSE Inline "in: `UINT64` device id; out: none.";
    5 DeviceQuery WV_IOCTL_DEVICE_QUERY Inline "in: `UINT64` device id; out: `WV_IO_DEVICE_ATTRIBUTES`.";
    6 DevicePortQuery WV_IOCTL_DEVICE_PORT_QUERY Inline "in: `WV_IO_DEVICE_PORT_QUERY`; out: `WV_IO_PORT_ATTRIBUTES`.";
    7 DeviceGidQuery WV_IOCTL_DEVICE_GID_QUERY Inline "in: `WV_IO_DEVICE_PORT_QUERY`; out: `WV_IO_GID[]`.";
    8 DevicePkeyQuery WV_IOCTL_DEVICE_PKEY_QUERY Inline "in: `WV_IO_DEVICE_PORT_QUERY`; out: `NET16[]` pkeys.";
    9 DeviceNotify WV_IOCTL_DEVICE_NOTIFY Either "in: `WV_IO_ID` (Id = device, Data = port); out: `UINT32` event flags.";
    10 DeviceCancel WV_IOCTL_DEVICE_CANCEL Inline "in: `UINT64` device id; out: none. Cancels pending DEVICE_NOTIFYs.";
    11 PdAllocate WV_IOCTL_PD_ALLOCATE Inline "in: `WV_IO_ID` (Id = device) + UMV; out: `WV_IO_ID` (Id = pd) + UMV.";
    12 PdDeallocate WV_IOCTL_PD_DEALLOCATE Inline "in: `UINT64` pd id; out: none.";
    13 MemoryRegister WV_IOCTL_MEMORY_REGISTER Inline "in: `WV_IO_MEMORY_REGISTER`; out: `WV_IO_MEMORY_KEYS`.";
    14 MemoryDeregister WV_IOCTL_MEMORY_DEREGISTER Inline "in: `WV_IO_ID` (Id = pd, Data = lkey); out: none.";
    15 MwAllocate WV_IOCTL_MW_ALLOCATE Inline "in: `WV_IO_ID` (Id = pd) + UMV; out: `WV_IO_ID` (Id = mw, Data = rkey) + UMV.";
    16 MwDeallocate WV_IOCTL_MW_DEALLOCATE Inline "in: `UINT64` mw id; out: none.";
    17 AhCreate WV_IOCTL_AH_CREATE Inline "in: `WV_IO_AH_CREATE` + UMV; out: `WV_IO_AH_CREATE` (Id.Id = ah) + UMV.";
    18 AhDestroy WV_IOCTL_AH_DESTROY Inline "in: `UINT64` ah id; out: none.";
    19 CqCreate WV_IOCTL_CQ_CREATE Inline "in: `WV_IO_ID` (Id = device, Data = entries) + UMV; out: `WV_IO_ID` (Id = cq, Data = actual) + UMV.";
    20 CqDestroy WV_IOCTL_CQ_DESTROY Inline "in: `UINT64` cq id; out: none.";
    21 CqResize WV_IOCTL_CQ_RESIZE Inline "in: `WV_IO_ID` (Id = cq, Data = entries) + UMV; out: `WV_IO_ID` (Data = actual) + UMV.";
    22 CqNotify WV_IOCTL_CQ_NOTIFY Pends "in: `WV_IO_ID` (Id = cq, Data = `WV_CQ_*` type); out: none.";
    23 CqCancel WV_IOCTL_CQ_CANCEL Inline "in: `UINT64` cq id; out: none. Cancels pending CQ_NOTIFYs.";
    24 SrqCreate WV_IOCTL_SRQ_CREATE Inline "in: `WV_IO_SRQ_ATTRIBUTES` (Id.Id = pd) + UMV; out: same (Id.Id = srq) + UMV.";
    25 SrqDestroy WV_IOCTL_SRQ_DESTROY Inline "in: `UINT64` srq id; out: none.";
    26 SrqQuery WV_IOCTL_SRQ_QUERY Inline "in: `WV_IO_SRQ_ATTRIBUTES` + UMV; out: same with MaxWr/MaxSge/SrqLimit.";
    27 SrqModify WV_IOCTL_SRQ_MODIFY Inline "in: `WV_IO_SRQ_ATTRIBUTES` + UMV; out: same + UMV.";
    28 SrqNotify WV_IOCTL_SRQ_NOTIFY Pends "in: `UINT64` srq id; out: none. Completes on an SRQ async event.";
    29 SrqCancel WV_IOCTL_SRQ_CANCEL Inline "in: `UINT64` srq id; out: none.";
    30 QpCreate WV_IOCTL_QP_CREATE Inline "in: `WV_IO_QP_CREATE` (Id.Id = pd) + UMV; out: same (Id.Id = qp) + UMV.";
    31 QpDestroy WV_IOCTL_QP_DESTROY Inline "in: `UINT64` qp id; out: none.";
    32 QpQuery WV_IOCTL_QP_QUERY Inline "in: `UINT64` qp id; out: `WV_IO_QP_ATTRIBUTES`.";
    33 QpModify WV_IOCTL_QP_MODIFY Pends "in: `WV_IO_QP_ATTRIBUTES`; out: opaque UVP QP-state buffer (may be empty). Pends here; OFW was synchronous.";
    34 QpAttach WV_IOCTL_QP_ATTACH Inline "in: `WV_IO_QP_MULTICAST`; out: none.";
    35 QpDetach WV_IOCTL_QP_DETACH Inline "in: `WV_IO_QP_MULTICAST`; out: none.";
    36 QpCancel WV_IOCTL_QP_CANCEL Inline "in: `UINT64` qp id; out: none (no-op after id check).";
    37 EpCreate WV_IOCTL_EP_CREATE Inline "in: `UINT64` EpType; out: `UINT64` ep id.";
    38 EpDestroy WV_IOCTL_EP_DESTROY Inline "in: `UINT64` ep id; out: none.";
    39 EpModify WV_IOCTL_EP_MODIFY Inline "in: `WV_IO_ID` (Id = ep, Data = option) + option data; out: none.";
    40 EpBind WV_IOCTL_EP_BIND Inline "in: `WV_IO_EP_BIND`; out: `WV_IO_EP_BIND`.";
    41 EpReject WV_IOCTL_EP_REJECT Inline "in: `WV_IO_ID` (Id = ep) + private data; out: none.";
    42 EpConnect WV_IOCTL_EP_CONNECT Pends "in: `WV_IO_EP_CONNECT`; out: none. Runs on the EP work item.";
    43 EpAccept WV_IOCTL_EP_ACCEPT Pends "in: `WV_IO_EP_ACCEPT`; out: opaque UVP QP-state buffer. Runs on the EP work item.";
    44 EpDisconnect WV_IOCTL_EP_DISCONNECT Either "in: `WV_IO_EP_DISCONNECT`; out: opaque UVP QP-state buffer.";
    45 EpDisconnectNotify WV_IOCTL_EP_DISCONNECT_NOTIFY Either "in: `UINT64` ep id; out: none. Completes when the connection goes down.";
    46 EpQuery WV_IOCTL_EP_QUERY Inline "in: `UINT64` ep id; out: `WV_IO_EP_ATTRIBUTES`.";
    47 EpLookup WV_IOCTL_EP_LOOKUP Inline "Reserved; always `STATUS_NOT_IMPLEMENTED`.";
    48 EpMulticastJoin WV_IOCTL_EP_MULTICAST_JOIN Inline "Reserved; always `STATUS_NOT_IMPLEMENTED`.";
    49 EpMulticastLeave WV_IOCTL_EP_MULTICAST_LEAVE Inline "Reserved; always `STATUS_NOT_IMPLEMENTED`.";
    50 EpCancel WV_IOCTL_EP_CANCEL Inline "in: `UINT64` ep id; out: none.";
    51 EpListen WV_IOCTL_EP_LISTEN Inline "in: `WV_IO_EP_LISTEN`; out: none (callers pass 16 bytes; ignored).";
    52 EpGetRequest WV_IOCTL_EP_GET_REQUEST Pends "in: `WV_IO_EP_GET_REQUEST`; out: none. Completes when a connection request arrives.";
    53 PdCancel WV_IOCTL_PD_CANCEL Inline "in: `UINT64` pd id; out: none (appended last in 2009; no-op after id check).";
}

/// First code of the table (GUID_QUERY) and the step between codes, used by [`Ioctl::from_code`].
const FIRST_CODE: u32 = wv_ioctl(WV_IO_FUNCTION_BASE + 1);

impl Ioctl {
    /// Position in the header's function enum (1 = GUID_QUERY … 53 = PD_CANCEL).
    pub const fn index(self) -> u32 {
        self as u32
    }

    /// The function number passed to `CTL_CODE` (0x801 … 0x835).
    pub const fn function(self) -> u32 {
        WV_IO_FUNCTION_BASE + self.index()
    }

    /// The IOCTL code user mode passes to `DeviceIoControl`.
    pub const fn code(self) -> u32 {
        wv_ioctl(self.function())
    }

    /// Maps a raw `IoControlCode` to its IOCTL. `None` for the MIN/MAX sentinels and for any code
    /// with another device type, access or method; the driver answers those with
    /// `STATUS_PROCEDURE_NOT_FOUND`.
    pub fn from_code(code: u32) -> Option<Ioctl> {
        // Every valid code is FIRST_CODE + 4*k with k < 53; anything else differs in the device
        // type, access, method or function bits.
        let delta = code.checked_sub(FIRST_CODE)?;
        if delta % 4 != 0 {
            return None;
        }
        Self::ALL.get((delta / 4) as usize).copied()
    }

    /// Minimum input length (`WdfRequestRetrieveInputBuffer` minimum of the OFW handler), or 0
    /// when the handler never looks at the input.
    pub const fn min_input(self) -> usize {
        use Ioctl::*;
        match self {
            GuidQuery | EpLookup | EpMulticastJoin | EpMulticastLeave => 0,
            LibraryQuery | DeviceClose | DeviceQuery | DeviceCancel | PdDeallocate
            | MwDeallocate | AhDestroy | CqDestroy | CqCancel | SrqDestroy | SrqNotify
            | SrqCancel | QpDestroy | QpQuery | QpCancel | EpCreate | EpDestroy
            | EpDisconnectNotify | EpQuery | EpCancel | PdCancel => 8,
            DeviceOpen | DeviceNotify | PdAllocate | MemoryDeregister | MwAllocate | CqCreate
            | CqResize | CqNotify | EpModify | EpReject => 16,
            DevicePortQuery | DeviceGidQuery | DevicePkeyQuery => 16,
            EpListen | EpGetRequest | EpDisconnect => 16,
            MemoryRegister | SrqCreate | SrqQuery | SrqModify | QpAttach | QpDetach => 32,
            EpBind => 56,
            AhCreate => 64,
            QpCreate => 72,
            EpAccept => 96,
            EpConnect => 128,
            QpModify => 192,
        }
    }

    /// Minimum output length (`WdfRequestRetrieveOutputBuffer` minimum of the OFW handler), or 0
    /// when the handler has no output or accepts an empty one.
    pub const fn min_output(self) -> usize {
        use Ioctl::*;
        match self {
            LibraryQuery => 1,
            DevicePkeyQuery => 2,
            DeviceNotify => 4,
            MemoryRegister | EpCreate => 8,
            GuidQuery | DeviceOpen | DeviceGidQuery | PdAllocate | MwAllocate | CqCreate
            | CqResize => 16,
            SrqCreate | SrqQuery | SrqModify => 32,
            DevicePortQuery => 52,
            EpBind => 56,
            AhCreate => 64,
            QpCreate => 72,
            DeviceQuery => 152,
            EpQuery => 160,
            QpQuery => 192,
            _ => 0,
        }
    }
}
