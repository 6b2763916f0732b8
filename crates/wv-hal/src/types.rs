//! Shared value types of the verbs contract, in host byte order unless a field says otherwise.
//!
//! These mirror the parts of OFW's `ib_types.h` that WinVerbs passes through `ci_interface_t`,
//! in Rust form. The driver core converts them to and from the `WV_IO_*` wire structs.

use crate::wire_enum;

/// A 128-bit GID, in network byte order as on the wire.
pub type Gid = [u8; 16];

wire_enum! {
    /// Queue-pair transport type; the values are `WV_IO_QP_CREATE.QpType`'s (0 RC, 1 UC, 3 UD).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum QpType: u8 {
        /// Reliable connected.
        Rc = 0,
        /// Unreliable connected.
        Uc = 1,
        /// Unreliable datagram.
        Ud = 3,
    }
    /// The type for a `QpType` byte of the ABI, if it names one.
    fn from_abi;
}

wire_enum! {
    /// Queue-pair state; the values are the ABI's `WV_IO_QP_STATE_*` (RESET 0 … ERROR 6).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum QpState: u8 {
        /// RESET.
        Reset = 0,
        /// INIT.
        Init = 1,
        /// Ready to receive.
        Rtr = 2,
        /// Ready to send.
        Rts = 3,
        /// Send queue drained.
        Sqd = 4,
        /// Send queue error.
        SqError = 5,
        /// ERROR.
        Error = 6,
    }
    /// The state for a state byte of the ABI, if it names one.
    fn from_abi;
}

/// Path MTU as the IB enumeration (1 = 256 … 5 = 4096).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl Mtu {
    /// Bytes, as the ABI reports them (`0x80 << enum`).
    pub const fn bytes(self) -> u32 {
        0x80 << (self as u32)
    }
    /// The enumeration for a byte count of 256..4096 (a power of two), as QP_MODIFY's
    /// `PathMtu` carries it.
    pub const fn from_bytes(bytes: u32) -> Option<Self> {
        match bytes {
            256 => Some(Mtu::Mtu256),
            512 => Some(Mtu::Mtu512),
            1024 => Some(Mtu::Mtu1024),
            2048 => Some(Mtu::Mtu2048),
            4096 => Some(Mtu::Mtu4096),
            _ => None,
        }
    }
    /// The enumeration for its IB value 1..5, as a path record's MTU field and
    /// `ib_av_attr_t.conn.path_mtu` carry it (the inverse of `self as u8`).
    pub const fn from_ib(value: u8) -> Option<Self> {
        match value {
            1..=5 => Mtu::from_bytes(0x80u32 << value),
            _ => None,
        }
    }
}

/// An address vector (`ib_av_attr_t`), host byte order except the GIDs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddressVector {
    /// Whether the GRH fields are valid (a global route).
    pub grh_valid: bool,
    /// GRH hop limit.
    pub hop_limit: u8,
    /// GRH traffic class.
    pub traffic_class: u8,
    /// GRH flow label (20 bits).
    pub flow_label: u32,
    /// Source GID.
    pub sgid: Gid,
    /// Destination GID.
    pub dgid: Gid,
    /// Destination LID.
    pub dlid: u16,
    /// Service level.
    pub service_level: u8,
    /// Source path bits.
    pub path_bits: u8,
    /// Static rate.
    pub static_rate: u8,
    /// Port number, 1-based.
    pub port: u8,
}

/// Device attributes (`ib_ca_attr_t`, the part WinVerbs reports).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaAttributes {
    /// Firmware version.
    pub fw_version: u64,
    /// Node GUID, network byte order as stored (NET64).
    pub node_guid: u64,
    /// System image GUID, NET64.
    pub system_image_guid: u64,
    /// Vendor id.
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_version: u32,
    /// `WV_IO_*` device capability flags the device supports.
    pub capability_flags: u32,
    /// Atomic capability (0 none, 1 HCA, 2 node).
    pub atomic_capability: u32,
    /// Supported page sizes, as a bit mask of sizes (bit n = 2^n bytes).
    pub page_size_capability: u32,
    /// Largest memory region.
    pub max_mr_size: u64,
    /// Queue pairs.
    pub max_qp: u32,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// Scatter/gather entries per work request.
    pub max_sge: u32,
    /// Completion queues.
    pub max_cq: u32,
    /// Entries per completion queue.
    pub max_cqe: u32,
    /// Memory regions.
    pub max_mr: u32,
    /// Protection domains.
    pub max_pd: u32,
    /// Incoming RDMA reads/atomics per QP.
    pub max_qp_responder_resources: u32,
    /// Incoming RDMA reads/atomics per device.
    pub max_responder_resources: u32,
    /// Outgoing RDMA reads/atomics per QP.
    pub max_qp_initiator_depth: u32,
    /// Largest inline send.
    pub max_inline_send: u32,
    /// Memory windows.
    pub max_mw: u32,
    /// Multicast groups.
    pub max_multicast: u32,
    /// QPs per multicast group.
    pub max_qp_attach: u32,
    /// Multicast QPs in all.
    pub max_multicast_qp: u32,
    /// Address handles.
    pub max_ah: u32,
    /// Fast memory regions.
    pub max_fmr: u32,
    /// Maps per FMR.
    pub max_map_per_fmr: u32,
    /// Shared receive queues.
    pub max_srq: u32,
    /// Work requests per SRQ.
    pub max_srq_wr: u32,
    /// SGEs per SRQ work request.
    pub max_srq_sge: u32,
    /// Partition keys per port.
    pub max_pkeys: u32,
    /// Local CA ack delay.
    pub local_ack_delay: u8,
    /// Number of physical ports.
    pub port_count: u8,
}

/// Logical port state; the values are the ABI's (`NOP 0, DOWN 1, INIT 2, ARMED 3, ACTIVE 4`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PortState {
    /// No state change.
    #[default]
    Nop = 0,
    /// Link down.
    Down = 1,
    /// Initialised.
    Init = 2,
    /// Armed.
    Armed = 3,
    /// Active.
    Active = 4,
}

/// Port attributes (`ib_port_attr_t`, the part WinVerbs reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortAttributes {
    /// Port capability flags.
    pub capability_flags: u32,
    /// Logical state.
    pub state: PortState,
    /// MTU (WinVerbs reports it as both max and active MTU).
    pub mtu: Mtu,
    /// GID table length.
    pub gid_table_len: u32,
    /// Largest message.
    pub max_message_size: u32,
    /// Bad P_Key counter.
    pub bad_pkey_counter: u32,
    /// Q_Key violation counter.
    pub qkey_violation_counter: u32,
    /// P_Key table length.
    pub pkey_table_len: u16,
    /// Base LID, host order.
    pub lid: u16,
    /// Subnet manager LID, host order.
    pub sm_lid: u16,
    /// LID mask control.
    pub lmc: u8,
    /// Virtual lanes.
    pub max_vls: u8,
    /// Subnet manager SL.
    pub sm_sl: u8,
    /// Subnet timeout.
    pub subnet_timeout: u8,
    /// Init type reply.
    pub init_type_reply: u8,
    /// Active width.
    pub active_width: u8,
    /// Active speed.
    pub active_speed: u8,
    /// Physical state.
    pub physical_state: u8,
    /// Transport (0 IB, 1 iWARP, 2 RoCE in OFW's numbering).
    pub transport: u8,
    /// Extended active speed (`ext_active_speed`, before WinVerbs shifts it).
    pub ext_active_speed: u8,
    /// Link encoding.
    pub link_encoding: u8,
}

/// Memory to register: a user virtual address range in the caller's process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryRegion {
    /// Start address.
    pub address: u64,
    /// Length in bytes.
    pub length: u64,
    /// `WV_ACCESS_*` / `IB_AC_*` flags, raw.
    pub access: u32,
}

/// Keys of a registered region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryKeys {
    /// Local key (host order, as `WV_IO_MEMORY_KEYS.Lkey`).
    pub lkey: u32,
    /// Remote key, network order as stored (NET32).
    pub rkey: u32,
}

/// Shared receive queue attributes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqAttributes {
    /// Work requests.
    pub max_wr: u32,
    /// SGEs per work request.
    pub max_sge: u32,
    /// Limit below which the SRQ limit event fires (0 = disarmed).
    pub srq_limit: u32,
}

/// Which SRQ attributes a modify changes (`IB_SRQ_MAX_WR`, `IB_SRQ_LIMIT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqModifyMask {
    /// Resize to `max_wr`.
    pub max_wr: bool,
    /// Arm the limit at `srq_limit`.
    pub limit: bool,
}

/// Queue-pair creation parameters (`ib_qp_create_t`), with the CQ/SRQ handles borrowed.
#[derive(Debug)]
pub struct QpCreate<'a, Cq, Srq> {
    /// Transport type.
    pub qp_type: QpType,
    /// Send queue depth.
    pub sq_depth: u32,
    /// Receive queue depth.
    pub rq_depth: u32,
    /// SGEs per send WR.
    pub sq_sge: u32,
    /// SGEs per receive WR.
    pub rq_sge: u32,
    /// Largest inline send.
    pub sq_max_inline: u32,
    /// Every send generates a completion (`sq_sig_all`).
    pub sq_signaled: bool,
    /// The send CQ.
    pub send_cq: &'a Cq,
    /// The receive CQ.
    pub recv_cq: &'a Cq,
    /// The SRQ, if receives come from one.
    pub srq: Option<&'a Srq>,
}

impl<'a, Cq, Srq> QpCreate<'a, Cq, Srq> {
    /// A QP of `qp_type` with `cq` for both queues, each `depth` entries of one SGE, no inline
    /// data, no SRQ, and completions only for the sends that ask for one.
    pub fn new(qp_type: QpType, cq: &'a Cq, depth: u32) -> Self {
        QpCreate {
            qp_type,
            sq_depth: depth,
            rq_depth: depth,
            sq_sge: 1,
            rq_sge: 1,
            sq_max_inline: 0,
            sq_signaled: false,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
        }
    }
}

/// What the device made of a queue-pair creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCreated {
    /// QP number (24 bits, host order).
    pub qpn: u32,
    /// Actual send depth.
    pub sq_depth: u32,
    /// Actual receive depth.
    pub rq_depth: u32,
    /// Actual send SGEs.
    pub sq_sge: u32,
    /// Actual receive SGEs.
    pub rq_sge: u32,
    /// Actual inline size.
    pub sq_max_inline: u32,
}

/// Queue-pair attributes as `query_qp` reports them (host order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttributes {
    /// Transport type.
    pub qp_type: QpType,
    /// Current state.
    pub state: QpState,
    /// Send queue depth.
    pub sq_depth: u32,
    /// Receive queue depth.
    pub rq_depth: u32,
    /// SGEs per send WR.
    pub sq_sge: u32,
    /// SGEs per receive WR.
    pub rq_sge: u32,
    /// Largest inline send.
    pub sq_max_inline: u32,
    /// Outgoing RDMA reads/atomics.
    pub initiator_depth: u32,
    /// Incoming RDMA reads/atomics.
    pub responder_resources: u32,
    /// Path migration state.
    pub apm_state: u8,
    /// QP number.
    pub qpn: u32,
    /// Destination QP number.
    pub dest_qpn: u32,
    /// Q_Key.
    pub qkey: u32,
    /// Send PSN.
    pub sq_psn: u32,
    /// Receive PSN.
    pub rq_psn: u32,
    /// Primary path.
    pub primary_av: AddressVector,
    /// Alternate path.
    pub alternate_av: AddressVector,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Alternate path MTU.
    pub alternate_path_mtu: Mtu,
    /// P_Key index.
    pub pkey_index: u16,
    /// Alternate P_Key index.
    pub alternate_pkey_index: u16,
    /// Local ack timeout.
    pub local_ack_timeout: u8,
    /// Alternate local ack timeout.
    pub alternate_local_ack_timeout: u8,
    /// RNR NAK timer.
    pub rnr_nak_timeout: u8,
    /// Retry count.
    pub retry_count: u8,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// Remote access flags (`WV_ACCESS_*`).
    pub access_flags: u32,
    /// Every send generates a completion.
    pub sq_signaled: bool,
}

impl QpAttributes {
    /// A new QP's attributes: in RESET, with the queues `created` reports and every path and
    /// transport attribute zero until a modify sets it.
    pub fn new_qp(qp_type: QpType, created: &QpCreated, sq_signaled: bool) -> Self {
        QpAttributes {
            qp_type,
            state: QpState::Reset,
            sq_depth: created.sq_depth,
            rq_depth: created.rq_depth,
            sq_sge: created.sq_sge,
            rq_sge: created.rq_sge,
            sq_max_inline: created.sq_max_inline,
            initiator_depth: 0,
            responder_resources: 0,
            apm_state: 0,
            qpn: created.qpn,
            dest_qpn: 0,
            qkey: 0,
            sq_psn: 0,
            rq_psn: 0,
            primary_av: AddressVector::default(),
            alternate_av: AddressVector::default(),
            path_mtu: Mtu::Mtu1024,
            alternate_path_mtu: Mtu::Mtu1024,
            pkey_index: 0,
            alternate_pkey_index: 0,
            local_ack_timeout: 0,
            alternate_local_ack_timeout: 0,
            rnr_nak_timeout: 0,
            retry_count: 0,
            rnr_retry_count: 0,
            access_flags: 0,
            sq_signaled,
        }
    }
}

/// The `ib_qp_opts_t` bits of an RTR or RTS modification (`IB_MOD_QP_*`): which optional
/// attributes the caller asked for. The values are OFW's (`inc/iba/ib_types.h`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QpModifyOptions(pub u32);

impl QpModifyOptions {
    /// `IB_MOD_QP_ALTERNATE_AV`: load the alternate path.
    pub const ALTERNATE_AV: u32 = 0x0000_0001;
    /// `IB_MOD_QP_PKEY`: change the P_Key index.
    pub const PKEY: u32 = 0x0000_0002;
    /// `IB_MOD_QP_APM_STATE`: change the path-migration state.
    pub const APM_STATE: u32 = 0x0000_0004;
    /// `IB_MOD_QP_PRIMARY_AV`: change the primary path (RTS).
    pub const PRIMARY_AV: u32 = 0x0000_0008;
    /// `IB_MOD_QP_RNR_NAK_TIMEOUT`: change the RNR NAK timer.
    pub const RNR_NAK_TIMEOUT: u32 = 0x0000_0010;
    /// `IB_MOD_QP_RESP_RES`: change the responder resources.
    pub const RESP_RES: u32 = 0x0000_0020;
    /// `IB_MOD_QP_INIT_DEPTH`: change the initiator depth.
    pub const INIT_DEPTH: u32 = 0x0000_0040;
    /// `IB_MOD_QP_PRIMARY_PORT`: change the port.
    pub const PRIMARY_PORT: u32 = 0x0000_0080;
    /// `IB_MOD_QP_ACCESS_CTRL`: change the remote access rights.
    pub const ACCESS_CTRL: u32 = 0x0000_0100;
    /// `IB_MOD_QP_QKEY`: change the Q_Key.
    pub const QKEY: u32 = 0x0000_0200;
    /// `IB_MOD_QP_SQ_DEPTH`: resize the send queue.
    pub const SQ_DEPTH: u32 = 0x0000_0400;
    /// `IB_MOD_QP_RQ_DEPTH`: resize the receive queue.
    pub const RQ_DEPTH: u32 = 0x0000_0800;
    /// `IB_MOD_QP_CURRENT_STATE`: the caller states the current state.
    pub const CURRENT_STATE: u32 = 0x0000_1000;
    /// `IB_MOD_QP_RETRY_CNT`: change the retry count.
    pub const RETRY_CNT: u32 = 0x0000_2000;
    /// `IB_MOD_QP_LOCAL_ACK_TIMEOUT`: change the local ACK timeout.
    pub const LOCAL_ACK_TIMEOUT: u32 = 0x0000_4000;
    /// `IB_MOD_QP_RNR_RETRY_CNT`: change the RNR retry count.
    pub const RNR_RETRY_CNT: u32 = 0x0000_8000;

    /// Whether every bit of `bits` is set.
    pub const fn has(self, bits: u32) -> bool {
        self.0 & bits == bits
    }
}

/// An address vector as a connected QP carries it (`ib_av_attr_t` with its `conn` part): the
/// path, and the transport parameters that travel with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpPath {
    /// The path.
    pub av: AddressVector,
    /// `conn.path_mtu`; `None` where OFW passes 0 (a `PathMtu` that is not 256..4096).
    pub path_mtu: Option<Mtu>,
    /// `conn.local_ack_timeout`.
    pub local_ack_timeout: u8,
    /// `conn.seq_err_retry_cnt`.
    pub seq_err_retry_cnt: u8,
    /// `conn.rnr_retry_cnt`.
    pub rnr_retry_cnt: u8,
}

/// The attributes of a move to INIT (`ib_qp_mod_t.state.init`): all of them always travel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpInit {
    /// `primary_port`, 1-based.
    pub port: u8,
    /// `qkey`, host order.
    pub qkey: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `access_ctrl` (`IB_AC_*` = `WV_ACCESS_*` bits).
    pub access: u32,
}

/// The attributes of a move to RTR (`ib_qp_mod_t.state.rtr`). The destination, PSN, primary
/// path, responder resources and RNR timer always travel; `opts` says which of the others the
/// caller asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpRtr {
    /// `rq_psn`, host order (24 bits).
    pub rq_psn: u32,
    /// `dest_qp`, host order (24 bits).
    pub dest_qpn: u32,
    /// `primary_av`.
    pub primary: QpPath,
    /// `resp_res`.
    pub responder_resources: u8,
    /// `rnr_nak_timeout`.
    pub rnr_nak_timeout: u8,
    /// `opts`.
    pub opts: QpModifyOptions,
    /// `alternate_av`.
    pub alternate: QpPath,
    /// `qkey`, host order.
    pub qkey: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `access_ctrl`.
    pub access: u32,
    /// `sq_depth`.
    pub sq_depth: u32,
    /// `rq_depth`.
    pub rq_depth: u32,
}

/// The attributes of a move to RTS (`ib_qp_mod_t.state.rts`). The send PSN, retry counts, ACK
/// timeout and initiator depth always travel; `opts` says which of the others the caller
/// asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpRts {
    /// `sq_psn`, host order (24 bits).
    pub sq_psn: u32,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry_cnt`.
    pub rnr_retry_cnt: u8,
    /// `local_ack_timeout`.
    pub local_ack_timeout: u8,
    /// `init_depth`.
    pub initiator_depth: u8,
    /// `opts`.
    pub opts: QpModifyOptions,
    /// `rnr_nak_timeout`.
    pub rnr_nak_timeout: u8,
    /// `current_state`.
    pub current_state: QpState,
    /// `qkey`, host order.
    pub qkey: u32,
    /// `access_ctrl`.
    pub access: u32,
    /// `resp_res`.
    pub responder_resources: u8,
    /// `primary_av`.
    pub primary: QpPath,
    /// `alternate_av`.
    pub alternate: QpPath,
    /// `sq_depth`.
    pub sq_depth: u32,
    /// `rq_depth`.
    pub rq_depth: u32,
    /// `apm_state` (`ib_apm_state_t`: 1 migrated, 2 rearm, 3 armed).
    pub apm_state: u8,
    /// `primary_port`.
    pub port: u8,
    /// `pkey_index`.
    pub pkey_index: u16,
}

/// Every attribute zero or absent, on port 1, moving from RTR (the move to RTS a connection
/// makes); as with [`QpRtr`], a caller names only what it sets.
impl Default for QpRts {
    fn default() -> Self {
        QpRts {
            sq_psn: 0,
            retry_cnt: 0,
            rnr_retry_cnt: 0,
            local_ack_timeout: 0,
            initiator_depth: 0,
            opts: QpModifyOptions::default(),
            rnr_nak_timeout: 0,
            current_state: QpState::Rtr,
            qkey: 0,
            access: 0,
            responder_resources: 0,
            primary: QpPath::default(),
            alternate: QpPath::default(),
            sq_depth: 0,
            rq_depth: 0,
            apm_state: 0,
            port: 1,
            pkey_index: 0,
        }
    }
}

/// A queue-pair modification with OFW's meaning (`ib_qp_mod_t`): the target state is always
/// requested, and each target state carries its own fixed set of attributes. This is what
/// OFW's WinVerbs hands its controller (`ndi_modify_qp`) and what a Windows HCA driver below
/// the filter expects; the `WV_IO_QP_ATTR_*` mask of QP_MODIFY survives only as the RTR/RTS
/// [`QpModifyOptions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpModify {
    /// `IB_QPS_RESET`: nothing else.
    Reset,
    /// `IB_QPS_INIT`.
    Init(QpInit),
    /// `IB_QPS_RTR`.
    Rtr(QpRtr),
    /// `IB_QPS_RTS`.
    Rts(QpRts),
    /// `IB_QPS_SQD`; `notify` is `sqd_event` (OFW always asks for the SQ_DRAINED event).
    Sqd {
        /// Raise `SQ_DRAINED` once the send queue has drained.
        notify: bool,
    },
    /// `IB_QPS_SQERR`.
    SqError,
    /// `IB_QPS_ERROR`.
    Error,
}

impl QpModify {
    /// The state this modification requests.
    pub const fn target(&self) -> QpState {
        match self {
            QpModify::Reset => QpState::Reset,
            QpModify::Init(_) => QpState::Init,
            QpModify::Rtr(_) => QpState::Rtr,
            QpModify::Rts(_) => QpState::Rts,
            QpModify::Sqd { .. } => QpState::Sqd,
            QpModify::SqError => QpState::SqError,
            QpModify::Error => QpState::Error,
        }
    }
}

/// Asynchronous events of a device or port (`ib_async_event_t`, the kinds WinVerbs maps).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaEventKind {
    /// Catastrophic device error (`IB_AE_LOCAL_FATAL`): sent to every port.
    LocalFatal,
    /// Port became active.
    PortActive,
    /// Port went down.
    PortDown,
    /// GID table changed.
    GidChange,
    /// LID changed.
    LidChange,
    /// P_Key table changed.
    PkeyChange,
    /// Client re-register request.
    ClientReregister,
    /// Subnet manager changed.
    SmChange,
    /// Any other event WinVerbs ignores.
    Other,
}

/// A device or port event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaEvent {
    /// What happened.
    pub kind: CaEventKind,
    /// The port, 1-based (0 for device-wide events).
    pub port: u8,
}

/// Asynchronous events of a shared receive queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SrqEvent {
    /// The number of posted receives fell below the armed limit (`IB_AE_SRQ_LIMIT_REACHED`).
    LimitReached,
    /// A QP attached to the SRQ in error state has no more WQEs (`IB_AE_SRQ_QP_LAST_WQE_REACHED`).
    LastWqeReached,
    /// The SRQ is in error (`IB_AE_SRQ_CATAS_ERROR` and the like).
    Error,
}

/// Asynchronous events of a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpEvent {
    /// Communication established.
    CommEstablished,
    /// The send queue drained (SQD).
    SqDrained,
    /// The QP entered the error state because of a local or remote error.
    Fatal,
    /// Path migrated.
    PathMigrated,
    /// The last WQE of a QP on an SRQ was reached.
    LastWqeReached,
}

#[cfg(test)]
mod tests {
    use super::Mtu;

    #[test]
    fn mtu_from_ib_is_the_inverse_of_its_value() {
        for mtu in [
            Mtu::Mtu256,
            Mtu::Mtu512,
            Mtu::Mtu1024,
            Mtu::Mtu2048,
            Mtu::Mtu4096,
        ] {
            assert_eq!(Mtu::from_ib(mtu as u8), Some(mtu));
        }
        for value in [0, 6, 0x3F, 0xFF] {
            assert_eq!(Mtu::from_ib(value), None);
        }
    }
}
