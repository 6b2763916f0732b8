//! Validation and parsing of IOCTL requests, before any object lookup.
//!
//! [`decode`] applies exactly the buffer rules of the OFW handlers (the minimums they pass to
//! `WdfRequestRetrieveInputBuffer` / `WdfRequestRetrieveOutputBuffer`, plus the few checks they
//! make on the input alone before touching any object) and returns the fixed structs by value.
//! It never assumes the input slice is aligned.
//!
//! # Ordering relative to OFW
//!
//! The decoder runs every check up front. In the OFW handlers every buffer minimum is also
//! checked before the first object lookup, so for every IOCTL the status a caller sees is the
//! same as OFW's, even when both the id and the buffer are bad. The only length checks OFW makes
//! after a lookup depend on object state, so the decoder cannot make them; the handler does:
//!
//! | IOCTL | late check in OFW | where it lives here |
//! |---|---|---|
//! | LIBRARY_QUERY | output shorter than the library name → `BUFFER_TOO_SMALL` (after the GUID lookup, so `NO_SUCH_DEVICE` wins) | handler, via [`crate::encode::write_library_name`] |
//! | DEVICE_GID_QUERY / DEVICE_PKEY_QUERY | table larger than the output → `MORE_ENTRIES` (success) | handler, via [`crate::encode::write_array`] |
//! | EP_ACCEPT | output retrieved again on the work item with minimum 0 (an empty buffer is accepted) | no check needed |
//!
//! The provider gate (`STATUS_FILE_CLOSED` once the handle has been cleaned up) comes before
//! decoding and belongs to the driver.
//!
//! Where OFW accepts an empty output buffer (QP_MODIFY, EP_ACCEPT, EP_DISCONNECT: it tolerates
//! `STATUS_BUFFER_TOO_SMALL` from a minimum-0 retrieve), so does the decoder.

use core::mem::size_of;

use zerocopy::FromBytes;

use crate::consts::WV_IO_EP_OPTION_ROUTE;
use crate::io::{
    IB_PATH_REC, WV_IO_AH_CREATE, WV_IO_CONNECT_PARAM, WV_IO_DEVICE_PORT_QUERY, WV_IO_EP_ACCEPT,
    WV_IO_EP_BIND, WV_IO_EP_CONNECT, WV_IO_EP_DISCONNECT, WV_IO_EP_GET_REQUEST, WV_IO_EP_LISTEN,
    WV_IO_ID, WV_IO_MEMORY_REGISTER, WV_IO_QP_ATTRIBUTES, WV_IO_QP_CREATE, WV_IO_QP_MULTICAST,
    WV_IO_SRQ_ATTRIBUTES,
};
use crate::ioctl::Ioctl;
use crate::status::NtStatus;

/// Vendor (UMV) data of a verbs call: its lengths. The bytes stay in the request's system
/// buffer after the fixed struct, where the HCA reads and writes them in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vendor {
    /// Input bytes after the fixed struct (`ci_umv_buf_t.input_size`).
    pub input_len: usize,
    /// `nOutBufferSize - sizeof(fixed)` (`ci_umv_buf_t.output_size`). OFW rejects outputs
    /// shorter than the fixed struct first, so this never underflows.
    pub output_len: usize,
}

/// A decoded, size-checked request. Ids are not validated (that needs the object tables).
/// It owns what it holds: variable-length bytes (vendor data, private data) and the QP_MODIFY
/// attributes stay in the request's system buffer, and the request gives their lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// List node GUIDs; `output_len` ≥ 16 sets how many fit.
    GuidQuery {
        /// Output buffer length.
        output_len: usize,
    },
    /// Name of the UVP library of one device.
    LibraryQuery {
        /// Device GUID (NET64 as stored in memory, i.e. `u64::from_ne_bytes`).
        guid: u64,
        /// Output buffer length (≥ 1).
        output_len: usize,
    },
    /// Open a device: `id.Id` is the GUID, `id.VerbInfo` the UVP command.
    DeviceOpen {
        /// Header.
        id: WV_IO_ID,
        /// UMV data.
        vendor: Vendor,
    },
    /// Close a device.
    DeviceClose {
        /// Device id.
        id: u64,
    },
    /// Device attributes.
    DeviceQuery {
        /// Device id.
        id: u64,
        /// Output buffer length (≥ 152).
        output_len: usize,
    },
    /// Port attributes.
    DevicePortQuery {
        /// Device id and 1-based port.
        query: WV_IO_DEVICE_PORT_QUERY,
        /// Output buffer length (≥ 52).
        output_len: usize,
    },
    /// GID table of a port.
    DeviceGidQuery {
        /// Device id and 1-based port.
        query: WV_IO_DEVICE_PORT_QUERY,
        /// Output buffer length (≥ 16); `output_len / 16` GIDs fit.
        output_len: usize,
    },
    /// Pkey table of a port.
    DevicePkeyQuery {
        /// Device id and 1-based port.
        query: WV_IO_DEVICE_PORT_QUERY,
        /// Output buffer length (≥ 2); `output_len / 2` pkeys fit.
        output_len: usize,
    },
    /// Wait for port events (output ≥ 4 checked).
    DeviceNotify {
        /// `Id` = device, `Data` = 1-based port.
        id: WV_IO_ID,
    },
    /// Cancel pending DEVICE_NOTIFYs.
    DeviceCancel {
        /// Device id.
        id: u64,
    },
    /// Allocate a PD.
    PdAllocate {
        /// `Id` = device.
        id: WV_IO_ID,
        /// UMV data.
        vendor: Vendor,
    },
    /// Free a PD.
    PdDeallocate {
        /// PD id.
        id: u64,
    },
    /// Register memory (output ≥ 8 checked).
    MemoryRegister {
        /// Registration parameters.
        reg: WV_IO_MEMORY_REGISTER,
    },
    /// Deregister memory.
    MemoryDeregister {
        /// `Id` = PD, `Data` = lkey.
        id: WV_IO_ID,
    },
    /// Allocate a memory window.
    MwAllocate {
        /// `Id` = PD.
        id: WV_IO_ID,
        /// UMV data.
        vendor: Vendor,
    },
    /// Free a memory window.
    MwDeallocate {
        /// MW id.
        id: u64,
    },
    /// Create an address handle.
    AhCreate {
        /// `Id.Id` = PD, plus the address vector.
        ah: WV_IO_AH_CREATE,
        /// UMV data.
        vendor: Vendor,
    },
    /// Destroy an address handle.
    AhDestroy {
        /// AH id.
        id: u64,
    },
    /// Create a CQ.
    CqCreate {
        /// `Id` = device, `Data` = entries.
        id: WV_IO_ID,
        /// UMV data.
        vendor: Vendor,
    },
    /// Destroy a CQ.
    CqDestroy {
        /// CQ id.
        id: u64,
    },
    /// Resize a CQ.
    CqResize {
        /// `Id` = CQ, `Data` = entries.
        id: WV_IO_ID,
        /// UMV data.
        vendor: Vendor,
    },
    /// Wait for a CQ event. The input must be a full `WV_IO_ID` (16 bytes).
    ///
    /// Bug 7.1-a: `IWVCompletionQueue::BatchNotify` sends only the 8-byte id. OFW answers
    /// `STATUS_BUFFER_TOO_SMALL`, and so does this decoder: accepting 8 bytes as
    /// NEXT_COMPLETION would make BatchNotify start working, which is a product decision rather
    /// than an ABI one, and no OFW-era caller can rely on it.
    CqNotify {
        /// `Id` = CQ, `Data` = `WV_CQ_*` type.
        id: WV_IO_ID,
    },
    /// Cancel pending CQ_NOTIFYs.
    CqCancel {
        /// CQ id.
        id: u64,
    },
    /// Create an SRQ.
    SrqCreate {
        /// `Id.Id` = PD, plus the limits.
        attr: WV_IO_SRQ_ATTRIBUTES,
        /// UMV data.
        vendor: Vendor,
    },
    /// Destroy an SRQ.
    SrqDestroy {
        /// SRQ id.
        id: u64,
    },
    /// Query an SRQ.
    SrqQuery {
        /// `Id.Id` = SRQ.
        attr: WV_IO_SRQ_ATTRIBUTES,
        /// UMV data.
        vendor: Vendor,
    },
    /// Modify an SRQ (MaxWr and SrqLimit; MaxSge is ignored).
    SrqModify {
        /// `Id.Id` = SRQ, plus the new limits.
        attr: WV_IO_SRQ_ATTRIBUTES,
        /// UMV data.
        vendor: Vendor,
    },
    /// Wait for an SRQ event.
    SrqNotify {
        /// SRQ id.
        id: u64,
    },
    /// Cancel pending SRQ_NOTIFYs.
    SrqCancel {
        /// SRQ id.
        id: u64,
    },
    /// Create a QP.
    QpCreate {
        /// `Id.Id` = PD, plus CQs, SRQ and capacities.
        create: WV_IO_QP_CREATE,
        /// UMV data.
        vendor: Vendor,
    },
    /// Destroy a QP.
    QpDestroy {
        /// QP id.
        id: u64,
    },
    /// Query a QP (output ≥ 192 checked).
    QpQuery {
        /// QP id.
        id: u64,
    },
    /// Modify a QP; the output is the UVP's opaque QP-state buffer and may be empty. The
    /// attributes (a whole `WV_IO_QP_ATTRIBUTES`, checked) stay in the system buffer: the modify
    /// may wait in a queue where only the request travels, so they are read once, by whoever
    /// hands them to the controller.
    QpModify {
        /// QP id (`Id.Id` of the attributes).
        id: u64,
        /// Output buffer length (any).
        output_len: usize,
    },
    /// Attach a QP to a multicast group.
    QpAttach {
        /// QP, LID and MGID.
        mc: WV_IO_QP_MULTICAST,
    },
    /// Detach a QP from a multicast group.
    QpDetach {
        /// QP, LID and MGID.
        mc: WV_IO_QP_MULTICAST,
    },
    /// Cancel QP operations (none are asynchronous in OFW).
    QpCancel {
        /// QP id.
        id: u64,
    },
    /// Create an endpoint (output ≥ 8 checked).
    EpCreate {
        /// `WV_IO_EP_TYPE_*`, not validated (stored as 16 bits).
        ep_type: u64,
    },
    /// Destroy an endpoint.
    EpDestroy {
        /// EP id.
        id: u64,
    },
    /// Set an endpoint option: `id.Data` is `WV_IO_EP_OPTION_ROUTE` (checked), the only one,
    /// and an `ib_path_rec_t` follows the header (checked; bytes after it are ignored).
    EpModify {
        /// `Id` = EP, `Data` = option.
        id: WV_IO_ID,
        /// The route.
        route: IB_PATH_REC,
    },
    /// Bind an endpoint to a local address (output ≥ 56 checked).
    EpBind {
        /// EP id, address and device.
        bind: WV_IO_EP_BIND,
    },
    /// Reject a connection request.
    EpReject {
        /// `Id` = EP.
        id: WV_IO_ID,
        /// Input bytes after the header: the private data, in the system buffer. OFW passes
        /// the length to the CM truncated to 8 bits.
        private_data_len: usize,
    },
    /// Connect (active side). `Param.DataLength` ≤ 56 is checked.
    EpConnect {
        /// EP, QP, peer and parameters.
        connect: WV_IO_EP_CONNECT,
    },
    /// Accept (either side). `Param.DataLength` ≤ 56 is checked.
    EpAccept {
        /// EP, QP and parameters.
        accept: WV_IO_EP_ACCEPT,
        /// Length of the opaque QP-state output buffer (any).
        output_len: usize,
    },
    /// Disconnect.
    EpDisconnect {
        /// EP and QP (0 = no QP).
        disconnect: WV_IO_EP_DISCONNECT,
        /// Length of the opaque QP-state output buffer (any).
        output_len: usize,
    },
    /// Wait for the connection to go down.
    EpDisconnectNotify {
        /// EP id.
        id: u64,
    },
    /// Endpoint attributes (output ≥ 160 checked).
    EpQuery {
        /// EP id.
        id: u64,
    },
    /// Reserved; the driver answers `STATUS_NOT_IMPLEMENTED` whatever the buffers.
    EpLookup,
    /// Reserved; the driver answers `STATUS_NOT_IMPLEMENTED` whatever the buffers.
    EpMulticastJoin,
    /// Reserved; the driver answers `STATUS_NOT_IMPLEMENTED` whatever the buffers.
    EpMulticastLeave,
    /// Cancel pending endpoint requests.
    EpCancel {
        /// EP id.
        id: u64,
    },
    /// Listen on a bound endpoint.
    EpListen {
        /// EP id and backlog.
        listen: WV_IO_EP_LISTEN,
    },
    /// Wait for a connection request on a listening endpoint.
    EpGetRequest {
        /// Listener and the idle EP to receive the connection.
        req: WV_IO_EP_GET_REQUEST,
    },
    /// Cancel PD operations (none are asynchronous in OFW).
    PdCancel {
        /// PD id.
        id: u64,
    },
}

/// Reads a fixed struct from the start of `input` (any alignment); a short input is
/// `STATUS_BUFFER_TOO_SMALL`, as from `WdfRequestRetrieveInputBuffer`.
pub fn read_prefix<T: FromBytes>(input: &[u8]) -> Result<T, NtStatus> {
    T::read_from_prefix(input)
        .map(|(value, _)| value)
        .map_err(|_| NtStatus::BUFFER_TOO_SMALL)
}

/// Reads the `UINT64` id most destroy/cancel/notify calls take.
pub fn read_u64_id(input: &[u8]) -> Result<u64, NtStatus> {
    read_prefix::<u64>(input)
}

/// Splits a UMV request into its fixed struct and the vendor part.
fn with_vendor<T: FromBytes>(input: &[u8], output_len: usize) -> Result<(T, Vendor), NtStatus> {
    let (fixed, rest) = T::read_from_prefix(input).map_err(|_| NtStatus::BUFFER_TOO_SMALL)?;
    let vendor = Vendor {
        input_len: rest.len(),
        output_len: output_len.saturating_sub(size_of::<T>()),
    };
    Ok((fixed, vendor))
}

/// `DataLength` above the 56-byte `Data` array: OFW rejects it before any lookup.
fn check_private_data(param: &WV_IO_CONNECT_PARAM) -> Result<(), NtStatus> {
    if usize::from(param.DataLength) > param.Data.len() {
        Err(NtStatus::INVALID_BUFFER_SIZE)
    } else {
        Ok(())
    }
}

/// Validates and parses one request. `input` is the caller's input bytes (`nInBufferSize` of
/// them) and `output_len` is `nOutBufferSize`.
///
/// Errors are the statuses OFW completes the request with before looking at any object:
/// `PROCEDURE_NOT_FOUND` for an unknown code (including the MIN/MAX sentinels),
/// `BUFFER_TOO_SMALL` for a short input or output, `INVALID_PARAMETER` for an EP_MODIFY option
/// other than ROUTE, and `INVALID_BUFFER_SIZE` for connect/accept private data above 56 bytes.
pub fn decode(code: u32, input: &[u8], output_len: usize) -> Result<Request, NtStatus> {
    let ioctl = Ioctl::from_code(code).ok_or(NtStatus::PROCEDURE_NOT_FOUND)?;
    // OFW retrieves the input first and the output second; both fail the same way, so one
    // combined check gives the same status.
    if input.len() < ioctl.min_input() || output_len < ioctl.min_output() {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }

    decode_fields(ioctl, input, output_len)
}

/// The IOCTL table: one row per IOCTL, naming how its request's fields are read. It defines
/// `decode_fields` (the per-IOCTL part of [`decode`], after the buffer minimums) and
/// [`Request::ioctl`], so the two cannot disagree on the IOCTL a variant stands for. A field's
/// reader is `u64_id` ([`read_u64_id`]), `prefix` ([`read_prefix`]) or `out_len` (the output
/// length); `vendor(FIELD)` splits a UMV request ([`with_vendor`]); `custom` is an arm of its
/// own, for the IOCTLs with checks on the input.
macro_rules! ioctl_table {
    ($input:ident, $output_len:ident; $($name:ident => $how:ident $args:tt;)*) => {
        fn decode_fields(
            ioctl: Ioctl,
            $input: &[u8],
            $output_len: usize,
        ) -> Result<Request, NtStatus> {
            Ok(match ioctl {
                $(Ioctl::$name => ioctl_table!(@arm $name $how $args $input $output_len),)*
            })
        }

        impl Request {
            /// The IOCTL this request came from.
            pub fn ioctl(&self) -> Ioctl {
                match self {
                    $(Request::$name { .. } => Ioctl::$name,)*
                }
            }
        }
    };
    (@arm $name:ident fields { $($field:ident: $read:ident),* } $input:ident $output_len:ident) => {
        Request::$name { $($field: ioctl_table!(@read $read $input $output_len)),* }
    };
    (@arm $name:ident vendor ($field:ident) $input:ident $output_len:ident) => {{
        let ($field, vendor) = with_vendor($input, $output_len)?;
        Request::$name { $field, vendor }
    }};
    (@arm $name:ident unit () $input:ident $output_len:ident) => {
        Request::$name
    };
    (@arm $name:ident custom $body:block $input:ident $output_len:ident) => {
        $body
    };
    (@read u64_id $input:ident $output_len:ident) => { read_u64_id($input)? };
    (@read prefix $input:ident $output_len:ident) => { read_prefix($input)? };
    (@read out_len $input:ident $output_len:ident) => { $output_len };
}

ioctl_table! {
    input, output_len;
    GuidQuery => fields { output_len: out_len };
    LibraryQuery => fields { guid: u64_id, output_len: out_len };
    DeviceOpen => vendor(id);
    DeviceClose => fields { id: u64_id };
    DeviceQuery => fields { id: u64_id, output_len: out_len };
    DevicePortQuery => fields { query: prefix, output_len: out_len };
    DeviceGidQuery => fields { query: prefix, output_len: out_len };
    DevicePkeyQuery => fields { query: prefix, output_len: out_len };
    DeviceNotify => fields { id: prefix };
    DeviceCancel => fields { id: u64_id };
    PdAllocate => vendor(id);
    PdDeallocate => fields { id: u64_id };
    MemoryRegister => fields { reg: prefix };
    MemoryDeregister => fields { id: prefix };
    MwAllocate => vendor(id);
    MwDeallocate => fields { id: u64_id };
    AhCreate => vendor(ah);
    AhDestroy => fields { id: u64_id };
    CqCreate => vendor(id);
    CqDestroy => fields { id: u64_id };
    CqResize => vendor(id);
    CqNotify => fields { id: prefix };
    CqCancel => fields { id: u64_id };
    SrqCreate => vendor(attr);
    SrqDestroy => fields { id: u64_id };
    SrqQuery => vendor(attr);
    SrqModify => vendor(attr);
    SrqNotify => fields { id: u64_id };
    SrqCancel => fields { id: u64_id };
    QpCreate => vendor(create);
    QpDestroy => fields { id: u64_id };
    QpQuery => fields { id: u64_id };
    QpModify => custom {
        let id = read_prefix::<WV_IO_QP_ATTRIBUTES>(input)?.Id.Id;
        Request::QpModify { id, output_len }
    };
    QpAttach => fields { mc: prefix };
    QpDetach => fields { mc: prefix };
    QpCancel => fields { id: u64_id };
    EpCreate => fields { ep_type: u64_id };
    EpDestroy => fields { id: u64_id };
    EpModify => custom {
        let id: WV_IO_ID = read_prefix(input)?;
        // OFW order: the option is checked before the payload length.
        if id.Data != WV_IO_EP_OPTION_ROUTE {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let route = read_prefix(&input[size_of::<WV_IO_ID>()..])?;
        Request::EpModify { id, route }
    };
    EpBind => fields { bind: prefix };
    EpReject => custom {
        let private_data_len = input.len().saturating_sub(size_of::<WV_IO_ID>());
        Request::EpReject { id: read_prefix(input)?, private_data_len }
    };
    EpConnect => custom {
        let connect: WV_IO_EP_CONNECT = read_prefix(input)?;
        check_private_data(&connect.Param)?;
        Request::EpConnect { connect }
    };
    EpAccept => custom {
        let accept: WV_IO_EP_ACCEPT = read_prefix(input)?;
        check_private_data(&accept.Param)?;
        Request::EpAccept { accept, output_len }
    };
    EpDisconnect => fields { disconnect: prefix, output_len: out_len };
    EpDisconnectNotify => fields { id: u64_id };
    EpQuery => fields { id: u64_id };
    EpLookup => unit ();
    EpMulticastJoin => unit ();
    EpMulticastLeave => unit ();
    EpCancel => fields { id: u64_id };
    EpListen => fields { listen: prefix };
    EpGetRequest => fields { req: prefix };
    PdCancel => fields { id: u64_id };
}
