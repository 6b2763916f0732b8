//! The `WV_IO_*` structures of `wv_ioctl.h`, byte for byte.
//!
//! Type and field names are the C ones so the code reads against the header and the spec.
//! `NET16`/`NET32`/`NET64` fields hold big-endian values exactly as stored in memory; nothing
//! here swaps bytes. All structures use fixed-width integers with natural alignment, so x86,
//! x64 and WOW64 callers share one layout.
//!
//! Every struct derives the zerocopy traits, so it can be read from any (unaligned) input slice
//! with `read_from_prefix` and written with `as_bytes`, without `unsafe`. The C unions are byte
//! arrays of the union's size plus typed accessors. Each layout is checked at compile time
//! against the numbers of the spec (§2.5), and [`STRUCTS`] exposes the computed layouts.
#![allow(non_camel_case_types, non_snake_case)]

use core::mem::{align_of, offset_of, size_of};

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, transmute};

use crate::meta::{FieldInfo, StructInfo};

/// Big-endian 16-bit value as stored (`typedef UINT16 NET16`).
pub type NET16 = u16;
/// Big-endian 32-bit value as stored (`typedef UINT32 NET32`).
pub type NET32 = u32;
/// Big-endian 64-bit value as stored (`typedef UINT64 NET64`).
pub type NET64 = u64;

/// Declares an ABI struct, its computed [`StructInfo`], and compile-time checks of size,
/// alignment and every field offset against the C numbers written in brackets.
macro_rules! wv_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident [size $size:literal, align $align:literal] {
            $( $(#[$fmeta:meta])* [$off:literal] pub $field:ident : $ty:ty, )*
        }
        $( padding $(#[$pmeta:meta])* pub $pad:ident : $padty:ty; )?
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
            $( $(#[$pmeta])* pub $pad: $padty, )?
        }

        // Zero is the natural "empty" value of every ABI struct; arrays longer than 32 have no
        // `Default`, so go through zerocopy instead of a derive.
        impl Default for $name {
            fn default() -> Self {
                <Self as FromZeros>::new_zeroed()
            }
        }

        impl $name {
            /// Layout computed from this definition (for tools and conformance checks).
            pub const INFO: StructInfo = StructInfo {
                name: stringify!($name),
                size: size_of::<$name>(),
                align: align_of::<$name>(),
                fields: &[$(FieldInfo {
                    name: stringify!($field),
                    offset: offset_of!($name, $field),
                    size: size_of::<$ty>(),
                }),*],
            };
        }

        const _: () = {
            assert!(size_of::<$name>() == $size);
            assert!(align_of::<$name>() == $align);
            $( assert!(offset_of!($name, $field) == $off); )*
        };
    };
}

wv_struct! {
    /// Universal request header: target/parent id, UVP command/status, and one scalar argument.
    pub struct WV_IO_ID [size 16, align 8] {
        /// Object id (parent on create, target otherwise); the device GUID on DEVICE_OPEN.
        [0] pub Id: u64,
        /// In: UVP command (`ci_umv_buf_t.command`). Out: the HCA's UMV status.
        [8] pub VerbInfo: u32,
        /// Per-call scalar: CQ entries, port number, notify type, lkey, rkey, LID, EP option.
        [12] pub Data: u32,
    }
}

impl WV_IO_ID {
    /// The header of a request on object `id` with `data` as its scalar and no UVP command.
    pub const fn new(id: u64, data: u32) -> Self {
        WV_IO_ID {
            Id: id,
            VerbInfo: 0,
            Data: data,
        }
    }
}

wv_struct! {
    /// GUID_QUERY output header: total device count, then as many GUIDs as fit. The C type
    /// declares one GUID, so its `sizeof` (and the output minimum) is 16.
    pub struct WV_IO_GUID_LIST [size 16, align 8] {
        /// Number of RDMA devices, even when not all GUIDs fit.
        [0] pub Count: u64,
        /// First node GUID (network order); more follow in the buffer.
        [8] pub Guid: [NET64; 1],
    }
}

wv_struct! {
    /// DEVICE_QUERY output.
    pub struct WV_IO_DEVICE_ATTRIBUTES [size 152, align 8] {
        /// Firmware version.
        [0] pub FwVersion: u64,
        /// Node GUID (network order).
        [8] pub NodeGuid: NET64,
        /// System image GUID (network order).
        [16] pub SystemImageGuid: NET64,
        /// PCI vendor id.
        [24] pub VendorId: u32,
        /// Vendor part id.
        [28] pub VendorPartId: u32,
        /// Hardware revision.
        [32] pub HwVersion: u32,
        /// `WV_IO_*` capability flags (see `consts`).
        [36] pub CapabilityFlags: u32,
        /// `WV_IO_ATOMIC_*`.
        [40] pub AtomicCapability: u32,
        /// OR of the supported power-of-two page sizes.
        [44] pub PageSizeCapabilityFlags: u32,
        /// Largest registrable region.
        [48] pub MaxMrSize: u64,
        /// Maximum QPs.
        [56] pub MaxQp: u32,
        /// Maximum work requests per QP.
        [60] pub MaxQpWr: u32,
        /// Maximum SGEs per work request.
        [64] pub MaxSge: u32,
        /// Maximum CQs.
        [68] pub MaxCq: u32,
        /// Maximum entries per CQ.
        [72] pub MaxCqEntries: u32,
        /// Maximum memory regions.
        [76] pub MaxMr: u32,
        /// Maximum protection domains.
        [80] pub MaxPd: u32,
        /// Maximum incoming RDMA reads/atomics per QP.
        [84] pub MaxQpResponderResources: u32,
        /// Maximum incoming RDMA reads/atomics per device.
        [88] pub MaxResponderResources: u32,
        /// Maximum outstanding RDMA reads/atomics per QP.
        [92] pub MaxQpInitiatorDepth: u32,
        /// Never written by OFW (echoes the system buffer); kept for layout.
        [96] pub MaxInlineSend: u32,
        /// Maximum memory windows.
        [100] pub MaxMw: u32,
        /// Maximum multicast groups.
        [104] pub MaxMulticast: u32,
        /// Maximum QPs per multicast group.
        [108] pub MaxQpAttach: u32,
        /// Maximum QPs attached to multicast groups in total.
        [112] pub MaxMulticastQp: u32,
        /// Maximum address handles.
        [116] pub MaxAh: u32,
        /// Maximum FMRs.
        [120] pub MaxFmr: u32,
        /// Maximum remaps per FMR.
        [124] pub MaxMapPerFmr: u32,
        /// Maximum SRQs.
        [128] pub MaxSrq: u32,
        /// Maximum work requests per SRQ.
        [132] pub MaxSrqWr: u32,
        /// Maximum SGEs per SRQ work request.
        [136] pub MaxSrqSge: u32,
        /// Pkey table size.
        [140] pub MaxPkeys: u32,
        /// `WV_DEVICE_*`; OFW always reports InfiniBand.
        [144] pub DeviceType: u32,
        /// Local CA ack delay.
        [148] pub LocalAckDelay: u8,
        /// Number of physical ports.
        [149] pub PhysPortCount: u8,
        /// Never written by OFW.
        [150] pub Reserved: [u8; 2],
    }
}

wv_struct! {
    /// Input of the port, GID and pkey queries.
    pub struct WV_IO_DEVICE_PORT_QUERY [size 16, align 8] {
        /// Device id.
        [0] pub Id: u64,
        /// 1-based port number.
        [8] pub PortNumber: u8,
        /// Unused.
        [9] pub Reserved: [u8; 7],
    }
}

wv_struct! {
    /// DEVICE_PORT_QUERY output; layout-identical to the public `WV_PORT_ATTRIBUTES`.
    pub struct WV_IO_PORT_ATTRIBUTES [size 52, align 4] {
        /// `WV_IO_*` capability flags of the port (C spelling kept: "Cability").
        [0] pub PortCabilityFlags: u32,
        /// `WV_IO_PORT_*` link state.
        [4] pub State: u32,
        /// Maximum MTU in bytes.
        [8] pub MaxMtu: u32,
        /// Active MTU in bytes.
        [12] pub ActiveMtu: u32,
        /// GID table entries.
        [16] pub GidTableLength: u32,
        /// Largest message.
        [20] pub MaxMessageSize: u32,
        /// Bad pkey counter.
        [24] pub BadPkeyCounter: u32,
        /// Qkey violation counter.
        [28] pub QkeyViolationCounter: u32,
        /// Pkey table entries.
        [32] pub PkeyTableLength: u16,
        /// Port LID (network order).
        [34] pub Lid: NET16,
        /// Subnet manager LID (network order).
        [36] pub SmLid: NET16,
        /// LID mask count.
        [38] pub Lmc: u8,
        /// Maximum virtual lanes.
        [39] pub MaxVls: u8,
        /// Subnet manager service level.
        [40] pub SmSl: u8,
        /// Subnet timeout.
        [41] pub SubnetTimeout: u8,
        /// InitTypeReply.
        [42] pub InitTypeReply: u8,
        /// Active link width.
        [43] pub ActiveWidth: u8,
        /// Active link speed.
        [44] pub ActiveSpeed: u8,
        /// Physical port state.
        [45] pub PhysicalState: u8,
        /// Transport.
        [46] pub Transport: u8,
        /// Extended active speed.
        [47] pub ExtActiveSpeed: u8,
        /// Link encoding.
        [48] pub LinkEncoding: u8,
    }
    padding
        /// The C compiler's tail padding (49 → 52), explicit so every byte is initialised.
        pub _Padding: [u8; 3];
}

wv_struct! {
    /// One GID as 16 raw bytes (network order).
    pub struct WV_IO_GID [size 16, align 1] {
        /// The GID bytes.
        [0] pub Raw: [u8; 16],
    }
}

wv_struct! {
    /// Defined by the header but used by no IOCTL; kept for completeness of the ABI.
    pub struct WV_IO_EVENT [size 12, align 4] {
        /// Status.
        [0] pub Status: u32,
        /// Event type.
        [4] pub Type: u32,
        /// Port.
        [8] pub PortNumber: u8,
        /// Unused.
        [9] pub Reserved: [u8; 3],
    }
}

wv_struct! {
    /// MEMORY_REGISTER input.
    pub struct WV_IO_MEMORY_REGISTER [size 32, align 8] {
        /// PD id.
        [0] pub Id: u64,
        /// User virtual address (pinned in the caller's process context).
        [8] pub Address: u64,
        /// Length in bytes.
        [16] pub BufferLength: u64,
        /// `WV_ACCESS_*` (= `IB_AC_*`), passed to the HCA raw.
        [24] pub AccessFlags: u32,
        /// Zero.
        [28] pub Reserved: u32,
    }
}

wv_struct! {
    /// MEMORY_REGISTER output.
    pub struct WV_IO_MEMORY_KEYS [size 8, align 4] {
        /// Local key (also the MR's key in the PD map).
        [0] pub Lkey: u32,
        /// Remote key (network order).
        [4] pub Rkey: NET32,
    }
}

wv_struct! {
    /// Address vector; byte-identical to the public `WV_ADDRESS_VECTOR`.
    pub struct WV_IO_AV [size 48, align 4] {
        /// Non-zero when the GRH fields are valid.
        [0] pub NetworkRouteValid: u8,
        /// Unused.
        [1] pub Reserved1: u8,
        /// GRH hop limit.
        [2] pub HopLimit: u8,
        /// GRH traffic class.
        [3] pub TrafficClass: u8,
        /// GRH flow label (network order).
        [4] pub FlowLabel: NET32,
        /// Source GID.
        [8] pub SGid: [u8; 16],
        /// Destination GID.
        [24] pub DGid: [u8; 16],
        /// Unused.
        [40] pub Reserved2: u16,
        /// Destination LID (network order).
        [42] pub DLid: NET16,
        /// Service level.
        [44] pub ServiceLevel: u8,
        /// Source path bits.
        [45] pub SourcePathBits: u8,
        /// Static rate.
        [46] pub StaticRate: u8,
        /// Port number.
        [47] pub PortNumber: u8,
    }
}

wv_struct! {
    /// AH_CREATE input and output (UMV data follows).
    pub struct WV_IO_AH_CREATE [size 64, align 8] {
        /// Id.Id = PD in, AH out; VerbInfo = UVP command/status.
        [0] pub Id: WV_IO_ID,
        /// Address vector of the new AH.
        [16] pub AddressVector: WV_IO_AV,
    }
}

wv_struct! {
    /// SRQ_CREATE / SRQ_QUERY / SRQ_MODIFY input and output (UMV data follows).
    pub struct WV_IO_SRQ_ATTRIBUTES [size 32, align 8] {
        /// Id.Id = PD on create, SRQ otherwise.
        [0] pub Id: WV_IO_ID,
        /// Maximum outstanding work requests.
        [16] pub MaxWr: u32,
        /// Maximum SGEs per work request (ignored by modify).
        [20] pub MaxSge: u32,
        /// Limit that triggers the SRQ-limit event.
        [24] pub SrqLimit: u32,
        /// Unused.
        [28] pub Reserved: u32,
    }
}

wv_struct! {
    /// QP_CREATE input and output (UMV data follows).
    pub struct WV_IO_QP_CREATE [size 72, align 8] {
        /// Id.Id = PD in, QP out.
        [0] pub Id: WV_IO_ID,
        /// Send CQ id.
        [16] pub SendCqId: u64,
        /// Receive CQ id.
        [24] pub ReceiveCqId: u64,
        /// SRQ id, 0 for none.
        [32] pub SrqId: u64,
        /// Send queue depth.
        [40] pub SendDepth: u32,
        /// Send SGEs.
        [44] pub SendSge: u32,
        /// Receive queue depth.
        [48] pub ReceiveDepth: u32,
        /// Receive SGEs.
        [52] pub ReceiveSge: u32,
        /// Maximum inline send size.
        [56] pub MaxInlineSend: u32,
        /// Not used by create.
        [60] pub InitiatorDepth: u32,
        /// Not used by create.
        [64] pub ResponderResources: u32,
        /// 0 RC, 1 UC, 3 UD (passed raw as `ib_qp_type_t`).
        [68] pub QpType: u8,
        /// `WV_IO_QP_SIGNAL_SENDS` / `WV_IO_QP_MEMORY_MANAGEMENT`.
        [69] pub QpFlags: u8,
        /// Unused.
        [70] pub Reserved: u16,
    }
}

wv_struct! {
    /// QP_QUERY output and QP_MODIFY input.
    pub struct WV_IO_QP_ATTRIBUTES [size 192, align 8] {
        /// Id.Id = QP (QP_QUERY leaves it as echoed input).
        [0] pub Id: WV_IO_ID,
        /// Send queue depth.
        [16] pub SendDepth: u32,
        /// Send SGEs.
        [20] pub SendSge: u32,
        /// Receive queue depth.
        [24] pub ReceiveDepth: u32,
        /// Receive SGEs.
        [28] pub ReceiveSge: u32,
        /// Maximum inline send size.
        [32] pub MaxInlineSend: u32,
        /// Outstanding RDMA reads/atomics issued.
        [36] pub InitiatorDepth: u32,
        /// Incoming RDMA reads/atomics accepted.
        [40] pub ResponderResources: u32,
        /// `WV_IO_QP_ATTR_*` mask of the attributes to modify.
        [44] pub Options: u32,
        /// QP type.
        [48] pub QpType: u8,
        /// `WV_IO_QP_STATE_*` current state.
        [49] pub CurrentQpState: u8,
        /// `WV_IO_QP_STATE_*` target state.
        [50] pub QpState: u8,
        /// Path migration state.
        [51] pub ApmState: u8,
        /// QP number (network order).
        [52] pub Qpn: NET32,
        /// Remote QP number (network order).
        [56] pub DestinationQpn: NET32,
        /// Qkey (network order).
        [60] pub Qkey: NET32,
        /// Send PSN (network order).
        [64] pub SendPsn: NET32,
        /// Receive PSN (network order).
        [68] pub ReceivePsn: NET32,
        /// Primary path.
        [72] pub AddressVector: WV_IO_AV,
        /// Alternate path.
        [120] pub AlternateAddressVector: WV_IO_AV,
        /// Path MTU in bytes (256..4096).
        [168] pub PathMtu: u32,
        /// Alternate path MTU in bytes.
        [172] pub AlternatePathMtu: u32,
        /// Pkey index.
        [176] pub PkeyIndex: u16,
        /// Alternate pkey index.
        [178] pub AlternatePkeyIndex: u16,
        /// Local ack timeout.
        [180] pub LocalAckTimeout: u8,
        /// Alternate local ack timeout.
        [181] pub AlternateLocalAckTimeout: u8,
        /// RNR NAK timeout.
        [182] pub RnrNakTimeout: u8,
        /// Retry count.
        [183] pub SequenceErrorRetryCount: u8,
        /// RNR retry count.
        [184] pub RnrRetryCount: u8,
        /// `WV_ACCESS_*` truncated to 8 bits.
        [185] pub AccessFlags: u8,
        /// `WV_IO_QP_SIGNAL_SENDS` / `WV_IO_QP_MEMORY_MANAGEMENT`.
        [186] pub QpFlags: u8,
        /// Unused.
        [187] pub Reserved: [u8; 5],
    }
}

impl WV_IO_QP_ATTRIBUTES {
    /// QP_MODIFY input taking RC QP `qp` to `state` with the attributes `ibv_rc_pingpong` gives
    /// it on port 1 (1024-byte MTU, remote read and write, one read in flight each way, ACK
    /// timeout 14, seven retries of each kind, RNR timer 12). All of them are written; `Options`
    /// names those the step to INIT, RTR or RTS takes (`consts::RC_*_OPTIONS`), for any other
    /// state the state alone. `peer` (QP number, GID) is the remote QP over a global route.
    pub fn rc_step(qp: u64, state: u8, peer: Option<(u32, [u8; 16])>) -> Self {
        use crate::consts::*;
        let mut attr = WV_IO_QP_ATTRIBUTES::default();
        attr.Id.Id = qp;
        attr.QpState = state;
        attr.AddressVector.PortNumber = 1;
        attr.PathMtu = 1024;
        attr.AccessFlags = (WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ) as u8;
        attr.InitiatorDepth = 1;
        attr.ResponderResources = 1;
        attr.LocalAckTimeout = 14;
        attr.SequenceErrorRetryCount = 7;
        attr.RnrRetryCount = 7;
        attr.RnrNakTimeout = 12;
        attr.Options = match state {
            WV_IO_QP_STATE_INIT => RC_INIT_OPTIONS,
            WV_IO_QP_STATE_RTR => RC_RTR_OPTIONS,
            WV_IO_QP_STATE_RTS => RC_RTS_OPTIONS,
            _ => WV_IO_QP_ATTR_STATE,
        };
        if let Some((qpn, gid)) = peer {
            attr.AddressVector.NetworkRouteValid = 1;
            attr.AddressVector.HopLimit = 1;
            attr.AddressVector.DGid = gid;
            attr.DestinationQpn = qpn.to_be();
        }
        attr
    }
}

wv_struct! {
    /// QP_ATTACH / QP_DETACH input.
    pub struct WV_IO_QP_MULTICAST [size 32, align 8] {
        /// Id.Id = QP; low 16 bits of Id.Data = multicast LID (network order).
        [0] pub Id: WV_IO_ID,
        /// Multicast GID.
        [16] pub Gid: WV_IO_GID,
    }
}

wv_struct! {
    /// Winsock `SOCKADDR` (the header redefines it because old DDKs lack it).
    pub struct WV_IO_SOCKADDR [size 16, align 2] {
        /// Address family.
        [0] pub SaFamily: u16,
        /// Family-specific bytes.
        [2] pub SaData: [u8; 14],
    }
}

wv_struct! {
    /// Winsock `SOCKADDR_IN`.
    pub struct WV_IO_SOCKADDR_IN [size 16, align 4] {
        /// `WV_AF_INET` (2).
        [0] pub SinFamily: u16,
        /// Port (network order).
        [2] pub SinPort: NET16,
        /// IPv4 address (network order).
        [4] pub SinAddr: NET32,
        /// Zero.
        [8] pub SinZero: [u8; 8],
    }
}

wv_struct! {
    /// Winsock `SOCKADDR_IN6`.
    pub struct WV_IO_SOCKADDR_IN6 [size 28, align 4] {
        /// `WV_AF_INET6` (23).
        [0] pub Sin6Family: u16,
        /// Port (network order).
        [2] pub Sin6Port: NET16,
        /// Flow info.
        [4] pub Sin6FlowInfo: u32,
        /// IPv6 address.
        [8] pub Sin6Addr: [u8; 16],
        /// Scope id.
        [24] pub Sin6ScopeId: u32,
    }
}

wv_struct! {
    /// A socket address of either family. `SockAddr` is the C union
    /// `{ WV_IO_SOCKADDR Sa; WV_IO_SOCKADDR_IN In; WV_IO_SOCKADDR_IN6 In6; }` kept as its 28
    /// bytes; use [`WV_IO_SOCKADDR_DATA::sa`], [`sin`](WV_IO_SOCKADDR_DATA::sin) and
    /// [`sin6`](WV_IO_SOCKADDR_DATA::sin6) (and the setters) to view it.
    pub struct WV_IO_SOCKADDR_DATA [size 32, align 4] {
        /// Union bytes (see the type's documentation).
        [0] pub SockAddr: [u8; 28],
        /// Unused.
        [28] pub Reserved: u32,
    }
}

wv_struct! {
    /// Which RDMA device and port an endpoint uses; cast from the public `WV_DEVICE_ADDRESS`.
    pub struct WV_IO_DEVICE_ADDRESS [size 16, align 8] {
        /// Device node GUID (network order).
        [0] pub DeviceGuid: NET64,
        /// Partition key (network order).
        [8] pub Pkey: NET16,
        /// Port number.
        [10] pub PortNumber: u8,
        /// Unused.
        [11] pub Reserved: [u8; 5],
    }
}

wv_struct! {
    /// EP_BIND input and output.
    pub struct WV_IO_EP_BIND [size 56, align 8] {
        /// Endpoint id.
        [0] pub Id: u64,
        /// Local address (from `getsockname` of the reserving socket).
        [8] pub Address: WV_IO_SOCKADDR_DATA,
        /// Device/port, zero for INADDR_ANY.
        [40] pub Device: WV_IO_DEVICE_ADDRESS,
    }
}

wv_struct! {
    /// EP_LISTEN input.
    pub struct WV_IO_EP_LISTEN [size 16, align 8] {
        /// Endpoint id.
        [0] pub Id: u64,
        /// Backlog (stored, not enforced).
        [8] pub Backlog: u64,
    }
}

wv_struct! {
    /// EP_GET_REQUEST input.
    pub struct WV_IO_EP_GET_REQUEST [size 16, align 8] {
        /// Listening endpoint id.
        [0] pub Id: u64,
        /// Idle endpoint that receives the connection.
        [8] pub EpId: u64,
    }
}

wv_struct! {
    /// Connection parameters of EP_CONNECT / EP_ACCEPT and of EP_QUERY output.
    pub struct WV_IO_CONNECT_PARAM [size 80, align 8] {
        /// Incoming RDMA reads/atomics accepted.
        [0] pub ResponderResources: u64,
        /// Outstanding RDMA reads/atomics issued.
        [8] pub InitiatorDepth: u64,
        /// Retry count.
        [16] pub RetryCount: u8,
        /// RNR retry count.
        [17] pub RnrRetryCount: u8,
        /// Valid bytes in `Data`; above 56 gives `STATUS_INVALID_BUFFER_SIZE`.
        [18] pub DataLength: u8,
        /// Unused.
        [19] pub Reserved: [u8; 5],
        /// Private data.
        [24] pub Data: [u8; 56],
    }
}

wv_struct! {
    /// EP_CONNECT input.
    pub struct WV_IO_EP_CONNECT [size 128, align 8] {
        /// Endpoint id.
        [0] pub Id: u64,
        /// QP to connect.
        [8] pub QpId: u64,
        /// Peer address.
        [16] pub PeerAddress: WV_IO_SOCKADDR_DATA,
        /// Connection parameters.
        [48] pub Param: WV_IO_CONNECT_PARAM,
    }
}

wv_struct! {
    /// EP_ACCEPT input.
    pub struct WV_IO_EP_ACCEPT [size 96, align 8] {
        /// Endpoint id.
        [0] pub Id: u64,
        /// QP to connect.
        [8] pub QpId: u64,
        /// Connection parameters.
        [16] pub Param: WV_IO_CONNECT_PARAM,
    }
}

wv_struct! {
    /// EP_QUERY output. `Param` is the C union `{ WV_IO_CONNECT_PARAM Connect; UINT64 Backlog; }`
    /// kept as its 80 bytes; use [`WV_IO_EP_ATTRIBUTES::connect`] and
    /// [`backlog`](WV_IO_EP_ATTRIBUTES::backlog) (and the setters) to view it.
    pub struct WV_IO_EP_ATTRIBUTES [size 160, align 8] {
        /// Local address.
        [0] pub LocalAddress: WV_IO_SOCKADDR_DATA,
        /// Peer address.
        [32] pub PeerAddress: WV_IO_SOCKADDR_DATA,
        /// Device/port.
        [64] pub Device: WV_IO_DEVICE_ADDRESS,
        /// Union bytes (see the type's documentation).
        [80] pub Param: [u8; 80],
    }
}

wv_struct! {
    /// EP_DISCONNECT input.
    pub struct WV_IO_EP_DISCONNECT [size 16, align 8] {
        /// Endpoint id.
        [0] pub Id: u64,
        /// QP to move to ERROR, 0 for none.
        [8] pub QpId: u64,
    }
}

wv_struct! {
    /// `ib_path_rec_t` (`inc/iba/ib_types.h`): the SA PathRecord in wire order, carried by
    /// EP_MODIFY (`WV_IO_EP_OPTION_ROUTE`). The C type is packed with `align(8)`; every field is
    /// naturally aligned anyway, so `repr(C)` gives the same bytes.
    pub struct IB_PATH_REC [size 64, align 8] {
        /// Service id.
        [0] pub service_id: NET64,
        /// Destination GID.
        [8] pub dgid: [u8; 16],
        /// Source GID.
        [24] pub sgid: [u8; 16],
        /// Destination LID.
        [40] pub dlid: NET16,
        /// Source LID.
        [42] pub slid: NET16,
        /// Hop limit, flow label, raw-traffic bit.
        [44] pub hop_flow_raw: NET32,
        /// Traffic class.
        [48] pub tclass: u8,
        /// Reversible bit and path count.
        [49] pub num_path: u8,
        /// Partition key.
        [50] pub pkey: NET16,
        /// QoS class and service level.
        [52] pub qos_class_sl: NET16,
        /// MTU selector and value.
        [54] pub mtu: u8,
        /// Rate selector and value.
        [55] pub rate: u8,
        /// Packet lifetime selector and value.
        [56] pub pkt_life: u8,
        /// Preference.
        [57] pub preference: u8,
        /// Reserved.
        [58] pub resv2: [u8; 6],
    }
}

/// The C name of [`IB_PATH_REC`].
pub type ib_path_rec_t = IB_PATH_REC;

/// Copies the first `N` bytes of a union's storage (N is always within it).
fn head<const N: usize, const M: usize>(bytes: &[u8; M]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

impl WV_IO_SOCKADDR_DATA {
    /// The union viewed as `SockAddr.Sa` (family + raw bytes).
    pub fn sa(&self) -> WV_IO_SOCKADDR {
        transmute!(head::<16, 28>(&self.SockAddr))
    }

    /// The union viewed as `SockAddr.In` (IPv4).
    pub fn sin(&self) -> WV_IO_SOCKADDR_IN {
        transmute!(head::<16, 28>(&self.SockAddr))
    }

    /// The union viewed as `SockAddr.In6` (IPv6).
    pub fn sin6(&self) -> WV_IO_SOCKADDR_IN6 {
        transmute!(self.SockAddr)
    }

    /// The address family, common to all union members.
    pub fn family(&self) -> u16 {
        u16::from_ne_bytes([self.SockAddr[0], self.SockAddr[1]])
    }

    /// Stores `SockAddr.Sa`; like a C union write, bytes 16..28 keep their old value.
    pub fn set_sa(&mut self, sa: &WV_IO_SOCKADDR) {
        self.SockAddr[..16].copy_from_slice(sa.as_bytes());
    }

    /// Stores `SockAddr.In`; like a C union write, bytes 16..28 keep their old value.
    pub fn set_sin(&mut self, sin: &WV_IO_SOCKADDR_IN) {
        self.SockAddr[..16].copy_from_slice(sin.as_bytes());
    }

    /// Stores `SockAddr.In6`.
    pub fn set_sin6(&mut self, sin6: &WV_IO_SOCKADDR_IN6) {
        self.SockAddr = transmute!(*sin6);
    }
}

impl WV_IO_EP_ATTRIBUTES {
    /// The union viewed as `Param.Connect` (connected endpoints).
    pub fn connect(&self) -> WV_IO_CONNECT_PARAM {
        transmute!(self.Param)
    }

    /// The union viewed as `Param.Backlog` (listening endpoints).
    pub fn backlog(&self) -> u64 {
        u64::from_ne_bytes(head::<8, 80>(&self.Param))
    }

    /// Stores `Param.Connect`.
    pub fn set_connect(&mut self, connect: &WV_IO_CONNECT_PARAM) {
        self.Param = transmute!(*connect);
    }

    /// Stores `Param.Backlog`; like a C union write, bytes 8..80 keep their old value.
    pub fn set_backlog(&mut self, backlog: u64) {
        self.Param[..8].copy_from_slice(&backlog.to_ne_bytes());
    }
}

// The unions are as large as their largest member, which the byte arrays must match.
const _: () = {
    assert!(size_of::<WV_IO_SOCKADDR_IN6>() == 28);
    assert!(size_of::<WV_IO_CONNECT_PARAM>() == 80);
};

/// Every ABI structure with its computed layout, in header order (`IB_PATH_REC` last).
pub const STRUCTS: &[StructInfo] = &[
    WV_IO_ID::INFO,
    WV_IO_GUID_LIST::INFO,
    WV_IO_DEVICE_ATTRIBUTES::INFO,
    WV_IO_DEVICE_PORT_QUERY::INFO,
    WV_IO_PORT_ATTRIBUTES::INFO,
    WV_IO_GID::INFO,
    WV_IO_EVENT::INFO,
    WV_IO_MEMORY_REGISTER::INFO,
    WV_IO_MEMORY_KEYS::INFO,
    WV_IO_AV::INFO,
    WV_IO_AH_CREATE::INFO,
    WV_IO_SRQ_ATTRIBUTES::INFO,
    WV_IO_QP_CREATE::INFO,
    WV_IO_QP_ATTRIBUTES::INFO,
    WV_IO_QP_MULTICAST::INFO,
    WV_IO_SOCKADDR::INFO,
    WV_IO_SOCKADDR_IN::INFO,
    WV_IO_SOCKADDR_IN6::INFO,
    WV_IO_SOCKADDR_DATA::INFO,
    WV_IO_DEVICE_ADDRESS::INFO,
    WV_IO_EP_BIND::INFO,
    WV_IO_EP_LISTEN::INFO,
    WV_IO_EP_GET_REQUEST::INFO,
    WV_IO_CONNECT_PARAM::INFO,
    WV_IO_EP_CONNECT::INFO,
    WV_IO_EP_ACCEPT::INFO,
    WV_IO_EP_ATTRIBUTES::INFO,
    WV_IO_EP_DISCONNECT::INFO,
    IB_PATH_REC::INFO,
];
