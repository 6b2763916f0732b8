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

    use Ioctl as I;
    let request = match ioctl {
        I::GuidQuery => Request::GuidQuery { output_len },
        I::LibraryQuery => Request::LibraryQuery {
            guid: read_u64_id(input)?,
            output_len,
        },
        I::DeviceOpen => {
            let (id, vendor) = with_vendor(input, output_len)?;
            Request::DeviceOpen { id, vendor }
        }
        I::DeviceClose => Request::DeviceClose {
            id: read_u64_id(input)?,
        },
        I::DeviceQuery => Request::DeviceQuery {
            id: read_u64_id(input)?,
            output_len,
        },
        I::DevicePortQuery => Request::DevicePortQuery {
            query: read_prefix(input)?,
            output_len,
        },
        I::DeviceGidQuery => Request::DeviceGidQuery {
            query: read_prefix(input)?,
            output_len,
        },
        I::DevicePkeyQuery => Request::DevicePkeyQuery {
            query: read_prefix(input)?,
            output_len,
        },
        I::DeviceNotify => Request::DeviceNotify {
            id: read_prefix(input)?,
        },
        I::DeviceCancel => Request::DeviceCancel {
            id: read_u64_id(input)?,
        },
        I::PdAllocate => {
            let (id, vendor) = with_vendor(input, output_len)?;
            Request::PdAllocate { id, vendor }
        }
        I::PdDeallocate => Request::PdDeallocate {
            id: read_u64_id(input)?,
        },
        I::MemoryRegister => Request::MemoryRegister {
            reg: read_prefix(input)?,
        },
        I::MemoryDeregister => Request::MemoryDeregister {
            id: read_prefix(input)?,
        },
        I::MwAllocate => {
            let (id, vendor) = with_vendor(input, output_len)?;
            Request::MwAllocate { id, vendor }
        }
        I::MwDeallocate => Request::MwDeallocate {
            id: read_u64_id(input)?,
        },
        I::AhCreate => {
            let (ah, vendor) = with_vendor(input, output_len)?;
            Request::AhCreate { ah, vendor }
        }
        I::AhDestroy => Request::AhDestroy {
            id: read_u64_id(input)?,
        },
        I::CqCreate => {
            let (id, vendor) = with_vendor(input, output_len)?;
            Request::CqCreate { id, vendor }
        }
        I::CqDestroy => Request::CqDestroy {
            id: read_u64_id(input)?,
        },
        I::CqResize => {
            let (id, vendor) = with_vendor(input, output_len)?;
            Request::CqResize { id, vendor }
        }
        I::CqNotify => Request::CqNotify {
            id: read_prefix(input)?,
        },
        I::CqCancel => Request::CqCancel {
            id: read_u64_id(input)?,
        },
        I::SrqCreate => {
            let (attr, vendor) = with_vendor(input, output_len)?;
            Request::SrqCreate { attr, vendor }
        }
        I::SrqDestroy => Request::SrqDestroy {
            id: read_u64_id(input)?,
        },
        I::SrqQuery => {
            let (attr, vendor) = with_vendor(input, output_len)?;
            Request::SrqQuery { attr, vendor }
        }
        I::SrqModify => {
            let (attr, vendor) = with_vendor(input, output_len)?;
            Request::SrqModify { attr, vendor }
        }
        I::SrqNotify => Request::SrqNotify {
            id: read_u64_id(input)?,
        },
        I::SrqCancel => Request::SrqCancel {
            id: read_u64_id(input)?,
        },
        I::QpCreate => {
            let (create, vendor) = with_vendor(input, output_len)?;
            Request::QpCreate { create, vendor }
        }
        I::QpDestroy => Request::QpDestroy {
            id: read_u64_id(input)?,
        },
        I::QpQuery => Request::QpQuery {
            id: read_u64_id(input)?,
        },
        I::QpModify => Request::QpModify {
            id: read_prefix::<WV_IO_QP_ATTRIBUTES>(input)?.Id.Id,
            output_len,
        },
        I::QpAttach => Request::QpAttach {
            mc: read_prefix(input)?,
        },
        I::QpDetach => Request::QpDetach {
            mc: read_prefix(input)?,
        },
        I::QpCancel => Request::QpCancel {
            id: read_u64_id(input)?,
        },
        I::EpCreate => Request::EpCreate {
            ep_type: read_u64_id(input)?,
        },
        I::EpDestroy => Request::EpDestroy {
            id: read_u64_id(input)?,
        },
        I::EpModify => {
            let id: WV_IO_ID = read_prefix(input)?;
            // OFW order: the option is checked before the payload length.
            if id.Data != WV_IO_EP_OPTION_ROUTE {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            let route = read_prefix(&input[size_of::<WV_IO_ID>()..])?;
            Request::EpModify { id, route }
        }
        I::EpBind => Request::EpBind {
            bind: read_prefix(input)?,
        },
        I::EpReject => Request::EpReject {
            id: read_prefix(input)?,
            private_data_len: input.len().saturating_sub(size_of::<WV_IO_ID>()),
        },
        I::EpConnect => {
            let connect: WV_IO_EP_CONNECT = read_prefix(input)?;
            check_private_data(&connect.Param)?;
            Request::EpConnect { connect }
        }
        I::EpAccept => {
            let accept: WV_IO_EP_ACCEPT = read_prefix(input)?;
            check_private_data(&accept.Param)?;
            Request::EpAccept { accept, output_len }
        }
        I::EpDisconnect => Request::EpDisconnect {
            disconnect: read_prefix(input)?,
            output_len,
        },
        I::EpDisconnectNotify => Request::EpDisconnectNotify {
            id: read_u64_id(input)?,
        },
        I::EpQuery => Request::EpQuery {
            id: read_u64_id(input)?,
        },
        I::EpLookup => Request::EpLookup,
        I::EpMulticastJoin => Request::EpMulticastJoin,
        I::EpMulticastLeave => Request::EpMulticastLeave,
        I::EpCancel => Request::EpCancel {
            id: read_u64_id(input)?,
        },
        I::EpListen => Request::EpListen {
            listen: read_prefix(input)?,
        },
        I::EpGetRequest => Request::EpGetRequest {
            req: read_prefix(input)?,
        },
        I::PdCancel => Request::PdCancel {
            id: read_u64_id(input)?,
        },
    };
    Ok(request)
}

impl Request {
    /// The IOCTL this request came from.
    pub fn ioctl(&self) -> Ioctl {
        match self {
            Request::GuidQuery { .. } => Ioctl::GuidQuery,
            Request::LibraryQuery { .. } => Ioctl::LibraryQuery,
            Request::DeviceOpen { .. } => Ioctl::DeviceOpen,
            Request::DeviceClose { .. } => Ioctl::DeviceClose,
            Request::DeviceQuery { .. } => Ioctl::DeviceQuery,
            Request::DevicePortQuery { .. } => Ioctl::DevicePortQuery,
            Request::DeviceGidQuery { .. } => Ioctl::DeviceGidQuery,
            Request::DevicePkeyQuery { .. } => Ioctl::DevicePkeyQuery,
            Request::DeviceNotify { .. } => Ioctl::DeviceNotify,
            Request::DeviceCancel { .. } => Ioctl::DeviceCancel,
            Request::PdAllocate { .. } => Ioctl::PdAllocate,
            Request::PdDeallocate { .. } => Ioctl::PdDeallocate,
            Request::MemoryRegister { .. } => Ioctl::MemoryRegister,
            Request::MemoryDeregister { .. } => Ioctl::MemoryDeregister,
            Request::MwAllocate { .. } => Ioctl::MwAllocate,
            Request::MwDeallocate { .. } => Ioctl::MwDeallocate,
            Request::AhCreate { .. } => Ioctl::AhCreate,
            Request::AhDestroy { .. } => Ioctl::AhDestroy,
            Request::CqCreate { .. } => Ioctl::CqCreate,
            Request::CqDestroy { .. } => Ioctl::CqDestroy,
            Request::CqResize { .. } => Ioctl::CqResize,
            Request::CqNotify { .. } => Ioctl::CqNotify,
            Request::CqCancel { .. } => Ioctl::CqCancel,
            Request::SrqCreate { .. } => Ioctl::SrqCreate,
            Request::SrqDestroy { .. } => Ioctl::SrqDestroy,
            Request::SrqQuery { .. } => Ioctl::SrqQuery,
            Request::SrqModify { .. } => Ioctl::SrqModify,
            Request::SrqNotify { .. } => Ioctl::SrqNotify,
            Request::SrqCancel { .. } => Ioctl::SrqCancel,
            Request::QpCreate { .. } => Ioctl::QpCreate,
            Request::QpDestroy { .. } => Ioctl::QpDestroy,
            Request::QpQuery { .. } => Ioctl::QpQuery,
            Request::QpModify { .. } => Ioctl::QpModify,
            Request::QpAttach { .. } => Ioctl::QpAttach,
            Request::QpDetach { .. } => Ioctl::QpDetach,
            Request::QpCancel { .. } => Ioctl::QpCancel,
            Request::EpCreate { .. } => Ioctl::EpCreate,
            Request::EpDestroy { .. } => Ioctl::EpDestroy,
            Request::EpModify { .. } => Ioctl::EpModify,
            Request::EpBind { .. } => Ioctl::EpBind,
            Request::EpReject { .. } => Ioctl::EpReject,
            Request::EpConnect { .. } => Ioctl::EpConnect,
            Request::EpAccept { .. } => Ioctl::EpAccept,
            Request::EpDisconnect { .. } => Ioctl::EpDisconnect,
            Request::EpDisconnectNotify { .. } => Ioctl::EpDisconnectNotify,
            Request::EpQuery { .. } => Ioctl::EpQuery,
            Request::EpLookup => Ioctl::EpLookup,
            Request::EpMulticastJoin => Ioctl::EpMulticastJoin,
            Request::EpMulticastLeave => Ioctl::EpMulticastLeave,
            Request::EpCancel { .. } => Ioctl::EpCancel,
            Request::EpListen { .. } => Ioctl::EpListen,
            Request::EpGetRequest { .. } => Ioctl::EpGetRequest,
            Request::PdCancel { .. } => Ioctl::PdCancel,
        }
    }
}
