//! The verbs API: provider → device → PD, MR, CQ, SRQ, QP, AH, MW, over any transport, with
//! the data path of libibverbs: sends, receives, RDMA, atomics (compare-and-swap,
//! fetch-and-add), memory-window binding (type 1 and 2) and invalidation, CQ and SRQ resize;
//! and connection endpoints ([`Endpoint`]: bind, listen, connect, accept, reject, disconnect,
//! with private data) over an [`AddressService`].
//!
//! It mirrors winverbs.dll (and the libibverbs semantics its users expect):
//!
//! * the control path is IOCTL bytes on one handle ([`RawFile`]), shared by every object of a
//!   [`Provider`] through an `Arc`, so the same code runs in process (`wv-inproc`) and on
//!   Windows (`crate::windows`, compiled for Windows only);
//! * the data path (post, poll, arm) never enters the driver: it goes through the user-mode
//!   provider (UVP) that LIBRARY_QUERY names. The soft HCA's (`softhcau`) is built in; any
//!   other name fails [`Provider::open_device`] with an error naming the missing library;
//! * every object holds its parents (a QP its PD, CQs and SRQ; a PD its device), as
//!   winverbs.dll's reference counting does, and destroys itself on drop with the matching
//!   DESTROY/CLOSE IOCTL: children always go before parents;
//! * failures are [`VerbsError`]s carrying the operation and the exact NTSTATUS; data-path
//!   failures are the UVP's [`PostError`] (errno-style, as `ibv_post_send`'s).
//!
//! Overlapped calls (port/CQ/SRQ notify, QP modify) return a [`Pending`]. CQ notify follows the
//! spec's order (§3.7): the CQ_NOTIFY IOCTL is issued first, then the CQ is armed through the
//! UVP, so a completion between the two still wakes the waiter.

mod buffer;
mod endpoint;
mod error;
mod handle;
mod objects;
mod pending;
mod qp_attr;

use std::sync::Arc;

use wv_abi::consts::WV_MAX_LIB_NAME;
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_DEVICE_PORT_QUERY, WV_IO_ID, read_prefix};
use wv_softhca::UvpContext;
use wv_softhca::abi::OpenCaResp;
use zerocopy::{FromBytes, IntoBytes};

use crate::raw::{IoStatus, RawFile, RawIo};

pub use buffer::{Buffer, OutOfBounds};
pub use endpoint::{
    AF_INET, AF_INET6, AddressService, ConnectAttributes, ConnectParam, DeviceAddress, Endpoint,
    EpParts, MAX_PRIVATE_DATA, OnFabric, PortError, PortReservation, sockaddr, socket_addr,
};
pub use error::{
    Result, STATUS_ADDRESS_ALREADY_EXISTS, STATUS_DLL_NOT_FOUND, STATUS_HOST_UNREACHABLE,
    STATUS_INVALID_ADDRESS, VerbsError,
};
pub use handle::{Handle, Kind};
pub use objects::{
    Ah, AhParts, Cq, CqParts, Mr, Mw, MwParts, Pd, PdParts, Qp, QpInit, QpParts, Srq, SrqParts,
};
pub use pending::Pending;
pub use qp_attr::QpAttr;

pub use wv_abi::consts::{
    WV_ACCESS_LOCAL_WRITE, WV_ACCESS_MW_BIND, WV_ACCESS_REMOTE_ATOMIC, WV_ACCESS_REMOTE_READ,
    WV_ACCESS_REMOTE_WRITE, WV_IO_EVENT_ADDRESS, WV_IO_EVENT_ERROR, WV_IO_EVENT_LINK_ADDRESS,
    WV_IO_EVENT_MANAGEMENT, WV_IO_EVENT_PARTITION, WV_IO_EVENT_STATE,
};
pub use wv_abi::{
    WV_IO_DEVICE_ATTRIBUTES, WV_IO_PORT_ATTRIBUTES, WV_IO_QP_ATTRIBUTES, WV_IO_SRQ_ATTRIBUTES,
};
pub use wv_hal::{AddressVector, Gid, Mtu, QpState, QpType};
pub use wv_softhca::{
    AtomicArgs, FastReg, GRH_BYTES, MwBind, MwBindInfo, MwType, PostError, RecvWr, SendWr, Sge,
    UdAddress, WcOpcode, WcStatus, WorkCompletion, WrOpcode, inc_rkey, send_flags, wc_flags,
};

/// The name LIBRARY_QUERY returns for the soft HCA: its user-mode provider is built in.
pub const SOFT_HCA_UVP: &str = "softhcau";

/// Sends one IOCTL and waits for it (winverbs.dll's synchronous use: DeviceIoControl, then
/// `GetOverlappedResult(bWait = TRUE)`); any status but a success is the error.
pub(crate) fn ioctl<F: RawFile>(
    file: &F,
    op: &'static str,
    code: u32,
    input: &[u8],
    output_len: usize,
) -> Result<IoStatus> {
    let st = file.device_io_control(code, input, output_len).wait();
    pending::check(op, &st)?;
    Ok(st)
}

/// Sends a destroy/close IOCTL for `id` from a `Drop`: nothing can report its failure, and
/// the driver frees the object at CloseHandle anyway.
pub(crate) fn destroy<F: RawFile>(file: &F, code: u32, id: u64) {
    let _ = file.device_io_control(code, &id.to_ne_bytes(), 0).wait();
}

/// Reads a fixed struct from the start of `bytes` (an IOCTL's output).
pub(crate) fn parse<T: FromBytes>(op: &'static str, bytes: &[u8]) -> Result<T> {
    read_prefix::<T>(bytes).map_err(|_| VerbsError::new(op, NtStatus::BUFFER_TOO_SMALL))
}

/// A node GUID as ibv_devinfo and sysfs print it (`0257:5600:0000:0001`): every tool that
/// names a device by its GUID writes it this one way.
pub fn format_guid(g: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        g >> 48,
        (g >> 32) & 0xffff,
        (g >> 16) & 0xffff,
        g & 0xffff
    )
}

/// A `WV_IO_ID` as input bytes: the input of every request that names one object (destroy,
/// query, notify, ...). Public so that tools speaking the raw interface build it the same way.
pub fn id_bytes(id: u64, verb_info: u32, data: u32) -> Vec<u8> {
    WV_IO_ID {
        Id: id,
        VerbInfo: verb_info,
        Data: data,
    }
    .as_bytes()
    .to_vec()
}

/// An open handle to the driver: the WinVerbs provider (`IWVProvider`). Cloning shares it.
pub struct Provider<F> {
    file: Arc<F>,
}

impl<F> Clone for Provider<F> {
    fn clone(&self) -> Self {
        Provider {
            file: Arc::clone(&self.file),
        }
    }
}

impl<F> core::fmt::Debug for Provider<F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Provider").finish_non_exhaustive()
    }
}

impl<F: RawFile + Send + Sync + 'static> Provider<F> {
    /// A provider over an open handle. The handle closes when the provider and every object
    /// opened through it are gone.
    pub fn new(file: F) -> Self {
        Provider {
            file: Arc::new(file),
        }
    }

    /// A provider over a handle shared with other code (e.g. a conformance suite sending raw
    /// IOCTLs on the same file).
    pub fn from_shared(file: Arc<F>) -> Self {
        Provider { file }
    }

    /// The handle, for raw IOCTLs on the same file (ids from `id()` of the objects name
    /// objects of this handle).
    pub fn file(&self) -> &Arc<F> {
        &self.file
    }

    /// The node GUIDs of every RDMA device below the driver (GUID_QUERY), re-asking with a
    /// larger buffer while the list does not fit, as winverbs.dll does.
    ///
    /// # Errors
    /// The status of GUID_QUERY.
    pub fn device_guids(&self) -> Result<Vec<u64>> {
        const OP: &str = "GUID_QUERY";
        // The list can grow between calls (a device arriving); stop asking after a few rounds
        // and return what the last answer held.
        let mut capacity = 4usize;
        for _ in 0..8 {
            let out_len = size_of::<u64>() * (1 + capacity);
            let st = ioctl(&*self.file, OP, WV_IOCTL_GUID_QUERY, &[], out_len)?;
            // The count alone (8 bytes) is the whole answer when there is no device: the
            // list's first GUID is not there to parse.
            let count: u64 = parse(OP, &st.output)?;
            let total = usize::try_from(count).unwrap_or(usize::MAX);
            let guids: Vec<u64> = st.output[8..]
                .chunks_exact(8)
                .filter_map(|c| c.try_into().ok().map(u64::from_ne_bytes))
                .collect();
            if guids.len() >= total || total > 1 << 16 {
                return Ok(guids);
            }
            capacity = total;
        }
        Err(VerbsError::new(OP, NtStatus::MORE_ENTRIES))
    }

    /// The user-mode provider library of device `guid` (LIBRARY_QUERY), without ".dll".
    ///
    /// # Errors
    /// `STATUS_NO_SUCH_DEVICE` for an unknown GUID.
    pub fn library_name(&self, guid: u64) -> Result<String> {
        let st = ioctl(
            &*self.file,
            "LIBRARY_QUERY",
            WV_IOCTL_LIBRARY_QUERY,
            &guid.to_ne_bytes(),
            WV_MAX_LIB_NAME - ".dll".len(),
        )?;
        let name = st.output.split(|&b| b == 0).next().unwrap_or_default();
        Ok(String::from_utf8_lossy(name).into_owned())
    }

    /// Opens device `guid` (`IWVProvider::OpenDevice`): LIBRARY_QUERY picks the user-mode
    /// provider by name, then DEVICE_OPEN with its vendor bytes, then DEVICE_QUERY for the
    /// port count.
    ///
    /// # Errors
    /// `STATUS_NO_SUCH_DEVICE` for an unknown GUID; `STATUS_DLL_NOT_FOUND` with the op
    /// `LoadLibrary(<name>.dll)` when the device needs a user-mode provider this library does
    /// not have (only the soft HCA's is built in, so every real HCA on Windows ends here);
    /// `UVP_OPEN(softhcau)` with `STATUS_NO_SUCH_DEVICE` when the soft HCA's provider cannot
    /// reach the device's rings (a soft HCA in another process, e.g. a kernel driver).
    pub fn open_device(&self, guid: u64) -> Result<Device<F>> {
        let lib = self.library_name(guid)?;
        if lib != SOFT_HCA_UVP {
            return Err(VerbsError::new(
                error::static_op(format!("LoadLibrary({lib}.dll)")),
                STATUS_DLL_NOT_FOUND,
            ));
        }
        const OP: &str = "DEVICE_OPEN";
        // The soft UVP sends no vendor command; it gets back where the device's data path is.
        let st = ioctl(
            &*self.file,
            OP,
            WV_IOCTL_DEVICE_OPEN,
            &id_bytes(guid, 0, 0),
            size_of::<WV_IO_ID>() + size_of::<OpenCaResp>(),
        )?;
        let id = parse::<WV_IO_ID>(OP, &st.output)?.Id;
        let vendor = st.output.get(size_of::<WV_IO_ID>()..).unwrap_or(&[]);
        // Through a device service the rings are in the memory it shares with this process.
        #[cfg(target_os = "linux")]
        let uvp = match self.file.shared_device() {
            Some(shared) => UvpContext::mapped(vendor, shared),
            None => UvpContext::from_open_resp(vendor),
        };
        #[cfg(not(target_os = "linux"))]
        let uvp = UvpContext::from_open_resp(vendor);
        let parts = uvp
            .map(|uvp| DeviceParts {
                guid,
                uvp,
                ports: 0,
            })
            .map_err(|_| VerbsError::new("UVP_OPEN(softhcau)", NtStatus::NO_SUCH_DEVICE));
        let mut device = Handle::adopt(&self.file, id, parts)?;
        let attr = device.query()?;
        // The port count never changes for an open device; keep it for port-range checks.
        if let Some(parts) = device.parts_mut() {
            parts.ports = attr.PhysPortCount;
        }
        Ok(device)
    }
}

/// [`Provider`] over a new handle to the real `\\.\WinVerbs`.
///
/// # Errors
/// The Win32 error of `CreateFileW` (e.g. the driver is not installed).
#[cfg(windows)]
pub fn open_windows() -> std::io::Result<Provider<crate::windows::File>> {
    crate::windows::File::open().map(Provider::new)
}

/// An open RDMA device (`IWVDevice`). Cloning shares it; DEVICE_CLOSE runs when the last clone
/// and the last object created from it are gone.
pub type Device<F> = Handle<F, DeviceParts>;

/// What the library keeps with an open device.
pub struct DeviceParts {
    guid: u64,
    pub(crate) uvp: UvpContext,
    ports: u8,
}

impl Kind for DeviceParts {
    const NAME: &'static str = "Device";
    const DESTROY: u32 = WV_IOCTL_DEVICE_CLOSE;
    fn debug_fields(&self, out: &mut core::fmt::DebugStruct<'_, '_>) {
        out.field("guid", &format_args!("{:#018x}", self.guid));
    }
}

impl<F: RawFile + Send + Sync + 'static> Device<F> {
    /// The node GUID it was opened by.
    pub fn guid(&self) -> u64 {
        self.parts().guid
    }

    /// Physical ports (1-based numbering).
    pub fn port_count(&self) -> u8 {
        self.parts().ports
    }

    /// DEVICE_QUERY.
    ///
    /// # Errors
    /// The status of DEVICE_QUERY (e.g. `STATUS_DEVICE_REMOVED`).
    pub fn query(&self) -> Result<WV_IO_DEVICE_ATTRIBUTES> {
        self.query_as("DEVICE_QUERY", WV_IOCTL_DEVICE_QUERY)
    }

    fn port_query(&self, port: u8) -> Vec<u8> {
        WV_IO_DEVICE_PORT_QUERY {
            Id: self.id(),
            PortNumber: port,
            Reserved: [0; 7],
        }
        .as_bytes()
        .to_vec()
    }

    /// DEVICE_PORT_QUERY (`Lid`/`SmLid` stay network order, as in the ABI struct).
    ///
    /// # Errors
    /// `STATUS_INVALID_PORT_HANDLE` for a bad port, or the query's status.
    pub fn query_port(&self, port: u8) -> Result<WV_IO_PORT_ATTRIBUTES> {
        const OP: &str = "DEVICE_PORT_QUERY";
        let st = ioctl(
            &**self.file(),
            OP,
            WV_IOCTL_DEVICE_PORT_QUERY,
            &self.port_query(port),
            size_of::<WV_IO_PORT_ATTRIBUTES>(),
        )?;
        parse(OP, &st.output)
    }

    /// A GID or P_Key table: asks again with a larger buffer while the driver answers
    /// `STATUS_MORE_ENTRIES`.
    fn table(&self, op: &'static str, code: u32, port: u8, item: usize) -> Result<Vec<u8>> {
        let mut entries = 16usize;
        loop {
            let st = ioctl(
                &**self.file(),
                op,
                code,
                &self.port_query(port),
                entries * item,
            )?;
            if st.status != NtStatus::MORE_ENTRIES.0 || entries >= 1 << 16 {
                return Ok(st.output);
            }
            entries *= 4;
        }
    }

    /// DEVICE_GID_QUERY: the port's whole GID table.
    ///
    /// # Errors
    /// `STATUS_INVALID_PORT_HANDLE` for a bad port, or the query's status.
    pub fn query_gids(&self, port: u8) -> Result<Vec<[u8; 16]>> {
        let bytes = self.table("DEVICE_GID_QUERY", WV_IOCTL_DEVICE_GID_QUERY, port, 16)?;
        Ok(bytes
            .chunks_exact(16)
            .filter_map(|c| c.try_into().ok())
            .collect())
    }

    /// DEVICE_PKEY_QUERY: the port's whole P_Key table, in host byte order.
    ///
    /// # Errors
    /// `STATUS_INVALID_PORT_HANDLE` for a bad port, or the query's status.
    pub fn query_pkeys(&self, port: u8) -> Result<Vec<u16>> {
        let bytes = self.table("DEVICE_PKEY_QUERY", WV_IOCTL_DEVICE_PKEY_QUERY, port, 2)?;
        Ok(bytes
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect())
    }

    /// DEVICE_NOTIFY for `port`: completes with the accumulated `WV_IO_EVENT_*` flags, at once
    /// if events arrived since the last notify, else at the next port event.
    ///
    /// # Errors
    /// An inline failure: `STATUS_NOT_FOUND`, `STATUS_INVALID_PORT_HANDLE`, ...
    pub fn port_notify(&self, port: u8) -> Result<Pending<u32>> {
        let input = id_bytes(self.id(), 0, u32::from(port));
        let out_len = size_of::<u32>();
        let finish = pending::finish_u32_output;
        self.issue(
            "DEVICE_NOTIFY",
            WV_IOCTL_DEVICE_NOTIFY,
            &input,
            out_len,
            finish,
        )
    }

    /// DEVICE_CANCEL: completes this device's pending port notifies with `STATUS_CANCELLED`.
    ///
    /// # Errors
    /// The status of DEVICE_CANCEL.
    pub fn cancel_notify(&self) -> Result<()> {
        self.command("DEVICE_CANCEL", WV_IOCTL_DEVICE_CANCEL)
    }

    /// PD_ALLOCATE.
    ///
    /// # Errors
    /// The status of PD_ALLOCATE.
    pub fn alloc_pd(&self) -> Result<Pd<F>> {
        Pd::allocate(self)
    }

    /// CQ_CREATE with at least `entries` entries (the device may round up: see
    /// [`Cq::entries`]).
    ///
    /// # Errors
    /// The status of CQ_CREATE.
    pub fn create_cq(&self, entries: u32) -> Result<Cq<F>> {
        Cq::create(self, entries)
    }

    /// Memory this device can register: a zeroed buffer of `len` bytes from the process's
    /// memory as the soft HCA sees it (the same pool for every device, so a buffer can be
    /// registered with any of them).
    pub fn alloc_buffer(&self, len: usize) -> Buffer {
        Buffer {
            dma: crate::process_memory().alloc(len),
        }
    }
}

/// Issues nothing more: turns an issued overlapped IOCTL into a [`Pending`], or into its error
/// when the driver failed it inline.
pub(crate) fn pending_or_error<F: RawFile + Send + Sync + 'static, T>(
    file: &Arc<F>,
    io: F::Io,
    op: &'static str,
    finish: fn(&'static str, &IoStatus) -> Result<T>,
) -> Result<Pending<T>> {
    if !io.pending() {
        // Inline: the status is already there; an error ends the call like DeviceIoControl's
        // FALSE return (winverbs.dll arms nothing then).
        let st = io.wait_timeout(core::time::Duration::ZERO);
        if let Some(st) = st
            && let Err(e) = pending::check(op, &st)
        {
            return Err(e);
        }
    }
    Ok(Pending::new(file, io, op, finish))
}
