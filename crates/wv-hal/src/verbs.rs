//! The lower RDMA controller: [`Verbs`], modelled on OFW's `ci_interface_t`, and the sinks its
//! callbacks land in.
//!
//! Control path only: the data path (post, poll, arm) runs in user mode through the
//! controller's user-mode provider and never reaches this trait.

use crate::KArc;

use crate::cm::ConnectionManager;
use crate::types::{
    AddressVector, CaAttributes, CaEvent, Gid, MemoryKeys, MemoryRegion, PortAttributes,
    QpAttributes, QpCreate, QpCreated, QpEvent, QpModify, SrqAttributes, SrqEvent, SrqModifyMask,
};

/// Vendor ("UMV") data of one call, in place in the request's system buffer.
///
/// The layout is OFW's `ci_umv_buf_t`: the controller reads `input_len` bytes of `buf`, may
/// write up to `output_len` bytes over them, and reports a vendor status that the driver returns
/// to user mode in `WV_IO_ID.VerbInfo`. `buf.len() >= max(input_len, output_len)`.
#[derive(Debug)]
pub struct Umv<'a> {
    /// The user-mode provider's command (`WV_IO_ID.VerbInfo` on input).
    pub command: u32,
    /// The controller's vendor status (returned in `WV_IO_ID.VerbInfo`).
    pub status: u32,
    /// Vendor input bytes at the start of `buf`.
    pub input_len: usize,
    /// Vendor output bytes the caller can take.
    pub output_len: usize,
    /// The bytes after the fixed struct in the system buffer.
    pub buf: &'a mut [u8],
}

impl<'a> Umv<'a> {
    /// Vendor data over `buf` with the given lengths.
    pub fn new(command: u32, input_len: usize, output_len: usize, buf: &'a mut [u8]) -> Self {
        debug_assert!(buf.len() >= input_len.max(output_len));
        Umv {
            command,
            status: 0,
            input_len,
            output_len,
            buf,
        }
    }
    /// No vendor data (a kernel consumer, or a creation IOCTL that carried none).
    pub fn none() -> Umv<'static> {
        Umv {
            command: 0,
            status: 0,
            input_len: 0,
            output_len: 0,
            buf: &mut [],
        }
    }
    /// The vendor input bytes.
    pub fn input(&self) -> &[u8] {
        &self.buf[..self.input_len]
    }
    /// Where vendor output goes.
    pub fn output(&mut self) -> &mut [u8] {
        &mut self.buf[..self.output_len]
    }
}

/// Why a verb failed (OFW's `ib_api_status_t`, the distinctions the driver acts on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VerbsError {
    /// Out of memory (`IB_INSUFFICIENT_MEMORY`).
    InsufficientMemory,
    /// A device limit was reached (`IB_INSUFFICIENT_RESOURCES`).
    InsufficientResources,
    /// A parameter is invalid (`IB_INVALID_PARAMETER` and the specific `IB_INVALID_*`).
    InvalidParameter,
    /// A setting exceeds what the device supports (`IB_INVALID_SETTING`, `IB_INVALID_MAX_WRS` …).
    InvalidSetting,
    /// The object is not in a state that allows the call (`IB_INVALID_STATE`).
    InvalidState,
    /// Access rights refused (`IB_INVALID_PERMISSION`).
    InvalidPermission,
    /// The object is in use (`IB_RESOURCE_BUSY`).
    ResourceBusy,
    /// The device does not implement the call (`IB_UNSUPPORTED`).
    Unsupported,
    /// The device is gone or dead (`IB_INVALID_CA_HANDLE` after removal).
    DeviceRemoved,
    /// Anything else (`IB_ERROR`).
    Other,
}

/// Receives a device's asynchronous events.
pub trait CaEventSink: Send + Sync {
    /// A device or port event. Called at DISPATCH_LEVEL from the controller's DPC.
    fn on_event(&self, event: CaEvent);
}

/// Receives a completion queue's notifications.
pub trait CqEventSink: Send + Sync {
    /// The armed CQ got a qualifying completion. Called at DISPATCH_LEVEL from the
    /// controller's DPC. Must not block.
    fn on_completion(&self);
    /// The CQ is in error (overrun or catastrophic error). Called at DISPATCH_LEVEL.
    fn on_error(&self);
}

/// Receives a shared receive queue's events.
pub trait SrqEventSink: Send + Sync {
    /// An SRQ event. Called at DISPATCH_LEVEL.
    fn on_event(&self, event: SrqEvent);
}

/// Receives a queue pair's events.
pub trait QpEventSink: Send + Sync {
    /// A QP event. Called at DISPATCH_LEVEL.
    fn on_event(&self, event: QpEvent);
}

/// A sink for every kind of event that ignores them all: for a caller that has no use for a
/// device's callbacks (a benchmark, an allocation-failure walk) but must hand it one.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoEvents;

impl CaEventSink for NoEvents {
    fn on_event(&self, _: CaEvent) {}
}
impl CqEventSink for NoEvents {
    fn on_completion(&self) {}
    fn on_error(&self) {}
}
impl SrqEventSink for NoEvents {
    fn on_event(&self, _: SrqEvent) {}
}
impl QpEventSink for NoEvents {
    fn on_event(&self, _: QpEvent) {}
}

/// The lower RDMA controller, as WinVerbs uses it.
///
/// # IRQL and context
/// Every method is called at PASSIVE_LEVEL in the context of the process that issued the IOCTL
/// (so the controller can pin that process's memory), unless it says otherwise. Handles are
/// consumed by the destroy calls, which cannot fail: teardown always succeeds.
///
/// The sinks given at creation are called at DISPATCH_LEVEL from the controller's DPC until
/// the object is destroyed; after its destroy call returns, no callback for it runs.
pub trait Verbs: Send + Sync + 'static {
    /// A user-mode open of the device (`ib_ca_handle_t` of `um_open_ca`).
    type Ca: Send + Sync;
    /// A protection domain.
    type Pd: Send + Sync;
    /// A registered memory region.
    type Mr: Send + Sync;
    /// A memory window.
    type Mw: Send + Sync;
    /// An address handle (`ib_av_handle_t`).
    type Ah: Send + Sync;
    /// A completion queue.
    type Cq: Send + Sync;
    /// A shared receive queue.
    type Srq: Send + Sync;
    /// A queue pair.
    type Qp: Send + Sync;
    /// A multicast attachment.
    type Mcast: Send + Sync;
    /// The connection manager that serves this kind of controller's ports: on Windows the
    /// `iba_cm_interface` the filter queries from the same device stack (answered by ibbus),
    /// [`crate::NoCm`] for a controller with none. The platform hands it to the driver beside
    /// the verbs ([`crate::FilterDriver::device_arrival`]); it is a separate interface, named
    /// here only so the driver knows its type.
    type Cm: ConnectionManager;

    /// Node GUID in network byte order as stored (`ci_interface_t.guid`). Any IRQL.
    fn guid(&self) -> u64;
    /// The user-mode provider's library name without ".dll" (`ci_interface_t.libname`), at most
    /// 31 bytes. Any IRQL.
    fn library_name(&self) -> &str;

    /// Opens the device for a user-mode client and registers `events` for its asynchronous
    /// events (`um_open_ca` + `register_event_handler`).
    ///
    /// # Errors
    /// Any [`VerbsError`]; the driver answers `STATUS_UNSUCCESSFUL`.
    fn open_ca(
        &self,
        umv: &mut Umv<'_>,
        events: KArc<dyn CaEventSink>,
    ) -> Result<Self::Ca, VerbsError>;
    /// Unregisters the events and closes the user-mode open (`unregister_event_handler` +
    /// `um_close_ca`).
    fn close_ca(&self, ca: Self::Ca);
    /// Device attributes (`query_ca`).
    ///
    /// # Errors
    /// Any [`VerbsError`].
    fn query_ca(&self) -> Result<CaAttributes, VerbsError>;
    /// Attributes of port `port` (1-based).
    ///
    /// # Errors
    /// `InvalidParameter` for a port the device does not have.
    fn query_port(&self, port: u8) -> Result<PortAttributes, VerbsError>;
    /// GID `index` of port `port`.
    ///
    /// # Errors
    /// `InvalidParameter` for a port or index out of range.
    fn query_gid(&self, port: u8, index: u32) -> Result<Gid, VerbsError>;
    /// P_Key `index` of port `port`, network byte order as stored.
    ///
    /// # Errors
    /// `InvalidParameter` for a port or index out of range.
    fn query_pkey(&self, port: u8, index: u16) -> Result<u16, VerbsError>;

    /// Allocates a protection domain (`allocate_pd`, `IB_PDT_NORMAL`).
    ///
    /// # Errors
    /// Any [`VerbsError`].
    fn allocate_pd(&self, ca: &Self::Ca, umv: &mut Umv<'_>) -> Result<Self::Pd, VerbsError>;
    /// Frees a protection domain (`deallocate_pd`). Its MRs, MWs, AHs, SRQs and QPs are gone.
    fn deallocate_pd(&self, pd: Self::Pd);

    /// Registers user memory of the calling process (`register_mr`, `um_call = TRUE`).
    ///
    /// # Errors
    /// `InvalidPermission` for a bad access combination, `InvalidParameter` for a bad range,
    /// `InsufficientResources` when out of MRs.
    fn register_mr(
        &self,
        pd: &Self::Pd,
        region: &MemoryRegion,
    ) -> Result<(Self::Mr, MemoryKeys), VerbsError>;
    /// Deregisters memory (`deregister_mr`). On failure the region stays registered and comes
    /// back.
    ///
    /// # Errors
    /// `ResourceBusy` when windows are still bound to it.
    fn deregister_mr(&self, mr: Self::Mr) -> Result<(), (Self::Mr, VerbsError)>;

    /// Creates a memory window (`create_mw`); returns it and its rkey (NET32 as stored).
    ///
    /// # Errors
    /// Any [`VerbsError`].
    fn create_mw(&self, pd: &Self::Pd, umv: &mut Umv<'_>) -> Result<(Self::Mw, u32), VerbsError>;
    /// Destroys a memory window (`destroy_mw`).
    fn destroy_mw(&self, mw: Self::Mw);

    /// Creates an address handle (`create_av`).
    ///
    /// # Errors
    /// `InvalidParameter` for a bad port or GID.
    fn create_ah(
        &self,
        pd: &Self::Pd,
        av: &AddressVector,
        umv: &mut Umv<'_>,
    ) -> Result<Self::Ah, VerbsError>;
    /// Destroys an address handle (`destroy_av`).
    fn destroy_ah(&self, ah: Self::Ah);

    /// Creates a completion queue of at least `entries` entries (`create_cq`); returns it and
    /// its actual size. `events` receives its completion and error callbacks.
    ///
    /// # Errors
    /// `InvalidSetting` when `entries` exceeds the device limit.
    fn create_cq(
        &self,
        ca: &Self::Ca,
        entries: u32,
        events: KArc<dyn CqEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<(Self::Cq, u32), VerbsError>;
    /// Resizes a completion queue (`resize_cq`); returns the actual size.
    ///
    /// # Errors
    /// `InvalidSetting` when too large, `InvalidParameter` when smaller than its contents.
    fn resize_cq(&self, cq: &Self::Cq, entries: u32, umv: &mut Umv<'_>) -> Result<u32, VerbsError>;
    /// Destroys a completion queue (`destroy_cq`).
    fn destroy_cq(&self, cq: Self::Cq);

    /// Creates a shared receive queue (`create_srq`).
    ///
    /// # Errors
    /// `InvalidSetting` when beyond the device limits.
    fn create_srq(
        &self,
        pd: &Self::Pd,
        attr: &SrqAttributes,
        events: KArc<dyn SrqEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<Self::Srq, VerbsError>;
    /// Modifies a shared receive queue (`modify_srq`).
    ///
    /// # Errors
    /// `InvalidSetting` / `InvalidParameter` for values the device refuses.
    fn modify_srq(
        &self,
        srq: &Self::Srq,
        attr: &SrqAttributes,
        mask: SrqModifyMask,
        umv: &mut Umv<'_>,
    ) -> Result<(), VerbsError>;
    /// Queries a shared receive queue (`query_srq`).
    ///
    /// # Errors
    /// Any [`VerbsError`].
    fn query_srq(&self, srq: &Self::Srq, umv: &mut Umv<'_>) -> Result<SrqAttributes, VerbsError>;
    /// Destroys a shared receive queue (`destroy_srq`).
    fn destroy_srq(&self, srq: Self::Srq);

    /// Creates a queue pair (`create_qp`).
    ///
    /// # Errors
    /// `InvalidSetting` when beyond the device limits, `InsufficientResources` when out of QPs.
    fn create_qp(
        &self,
        pd: &Self::Pd,
        create: &QpCreate<'_, Self::Cq, Self::Srq>,
        events: KArc<dyn QpEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<(Self::Qp, QpCreated), VerbsError>;
    /// Queries a queue pair (`query_qp`).
    ///
    /// # Errors
    /// Any [`VerbsError`].
    fn query_qp(&self, qp: &Self::Qp) -> Result<QpAttributes, VerbsError>;
    /// Modifies a queue pair and writes the user-mode provider's QP-state bytes to `out`
    /// (`ndi_modify_qp(h_qp, &ib_qp_mod_t, NULL, out.len(), out)`). `modify` has OFW's meaning:
    /// the target state is always requested and each target state carries its fixed attribute
    /// set (see [`QpModify`]); the controller decides, per QP type and current state, which of
    /// them the transition uses, as OFW's HCA drivers do. May take time (a command round trip
    /// to the device): the driver calls it from a work item or the caller's thread at
    /// PASSIVE_LEVEL, never at DISPATCH_LEVEL.
    ///
    /// # Errors
    /// `InvalidState` when the transition is not valid from the QP's state,
    /// `InvalidParameter` / `InvalidSetting` for attributes the device refuses, `Unsupported`
    /// for a resize of the work queues in RTR/RTS options.
    fn modify_qp(&self, qp: &Self::Qp, modify: &QpModify, out: &mut [u8])
    -> Result<(), VerbsError>;
    /// Destroys a queue pair (`destroy_qp`).
    fn destroy_qp(&self, qp: Self::Qp);

    /// Attaches a QP to a multicast group (`attach_mcast`); `lid` is host order.
    ///
    /// # Errors
    /// `InvalidParameter` for a non-UD QP or a bad GID.
    fn attach_mcast(&self, qp: &Self::Qp, gid: &Gid, lid: u16) -> Result<Self::Mcast, VerbsError>;
    /// Detaches a multicast attachment (`detach_mcast`).
    fn detach_mcast(&self, mcast: Self::Mcast);
}
