//! The `ib_*` and `mlnx_*` types of `inc/iba/ib_types.h` that the two interface tables pass
//! (by value, by pointer, or inside another type), their enumeration values and flag bits, and
//! the two CM types of `inc/iba/ib_al.h` (`ib_apr_info_t`, `ib_cm_failover_t`).

use core::ffi::c_void;

use crate::base::{boolean_t, net32_t};

/// 16-bit value in network order (as stored).
pub type ib_net16_t = u16;
/// 32-bit value in network order (as stored).
pub type ib_net32_t = u32;
/// 64-bit value in network order (as stored).
pub type ib_net64_t = u64;
/// Upper 64 bits of a GID: the subnet prefix, network order.
pub type ib_gid_prefix_t = ib_net64_t;

ci_opaque! {
    /// The HCA driver's device object; only seen through [`ib_ca_handle_t`].
    _ib_ca;
    /// The HCA driver's protection domain; only seen through [`ib_pd_handle_t`].
    _ib_pd;
    /// The HCA driver's memory region; only seen through [`ib_mr_handle_t`].
    _ib_mr;
    /// The HCA driver's memory window; only seen through [`ib_mw_handle_t`].
    _ib_mw;
    /// The HCA driver's queue pair; only seen through [`ib_qp_handle_t`].
    _ib_qp;
    /// The HCA driver's shared receive queue; only seen through [`ib_srq_handle_t`].
    _ib_srq;
    /// The HCA driver's completion queue; only seen through [`ib_cq_handle_t`].
    _ib_cq;
    /// The HCA driver's address vector; only seen through [`ib_av_handle_t`].
    _ib_av;
    /// The HCA driver's multicast attachment; only seen through [`ib_mcast_handle_t`].
    _ib_mcast;
    /// The HCA driver's fast memory region; only seen through [`mlnx_fmr_handle_t`].
    _mlnx_fmr;
}

/// Handle of an opened HCA (or of its per-process user-mode context).
pub type ib_ca_handle_t = *mut _ib_ca;
/// Handle of a protection domain.
pub type ib_pd_handle_t = *mut _ib_pd;
/// Handle of a memory region.
pub type ib_mr_handle_t = *mut _ib_mr;
/// Handle of a memory window.
pub type ib_mw_handle_t = *mut _ib_mw;
/// Handle of a queue pair.
pub type ib_qp_handle_t = *mut _ib_qp;
/// Handle of a shared receive queue.
pub type ib_srq_handle_t = *mut _ib_srq;
/// Handle of a completion queue.
pub type ib_cq_handle_t = *mut _ib_cq;
/// Handle of an address vector.
pub type ib_av_handle_t = *mut _ib_av;
/// Handle of a multicast group attachment.
pub type ib_mcast_handle_t = *mut _ib_mcast;
/// Handle of a Mellanox fast memory region.
pub type mlnx_fmr_handle_t = *mut _mlnx_fmr;

/// Result of a verb (C enum): `IB_SUCCESS` or an `IB_*` error.
pub type ib_api_status_t = u32;
/// Kind of an asynchronous event (C enum): `IB_AE_*`.
pub type ib_async_event_t = u32;
/// Atomic operation support of an HCA (C enum): `IB_ATOMIC_*`.
pub type ib_atomic_t = u32;
/// Link layer of a port (C `enum rdma_transport_type`): `RDMA_TRANSPORT_*`.
pub type rdma_transport_type = u32;
/// Kind of a protection domain (C enum): `IB_PDT_*`.
pub type ib_pd_type_t = u32;
/// Transport service of a QP (C enum): `IB_QPT_*`.
pub type ib_qp_type_t = u32;
/// Access rights bit mask: `IB_AC_*`.
pub type ib_access_t = u32;
/// QP state, one bit per state: `IB_QPS_*`.
pub type ib_qp_state_t = u32;
/// Path migration state (C enum): `IB_APM_*`.
pub type ib_apm_state_t = u32;
/// Which `ib_srq_attr_t` members a modify applies (C enum used as a bit mask): `IB_SRQ_*`.
pub type ib_srq_attr_mask_t = u32;
/// QP creation flag (C enum) stored in `ib_qp_create_ex_t::create_flags`.
pub type ib_qp_create_flags_t = u32;
/// Which optional `ib_qp_mod_t` members a modify applies: `IB_MOD_QP_*` bits.
pub type ib_qp_opts_t = u32;
/// Operation of a send work request (C enum): `WR_*`.
pub type ib_wr_type_t = u32;
/// Send work request option bits: `IB_SEND_OPT_*`.
pub type ib_send_opt_t = u32;
/// Status of a work completion (C enum): `IB_WCS_*`.
pub type ib_wc_status_t = u32;
/// Operation a work completion reports (C enum): `IB_WC_*`.
pub type ib_wc_type_t = u32;
/// Receive completion option bits: `IB_RECV_OPT_*`.
pub type ib_recv_opt_t = u32;
/// Which HCA/port attributes `modify_ca` changes: `IB_CA_MOD_*` bits.
pub type ib_ca_mod_t = u32;
/// Which memory region attributes a modify changes: `IB_MR_MOD_*` bits.
pub type ib_mr_mod_t = u32;
/// Port initialisation type bits (`IB_INIT_TYPE_*`).
pub type ib_init_type_t = u8;
/// Reason of a CM reject, network order: `IB_REJ_*`.
pub type ib_rej_status_t = ib_net16_t;
/// Status of a CM alternate path response: `IB_AP_*`.
pub type ib_apr_status_t = u8;
/// Status of a SIDR reply: `IB_SIDR_*`.
pub type ib_sidr_status_t = u8;
/// Whether the passive side accepts the alternate path (`ib_al.h`): `IB_FAILOVER_ACCEPT_*`.
pub type ib_cm_failover_t = u8;

ci_struct! {
    /// `ib_gid_t.unicast`: a unicast GID as subnet prefix and interface id (packed).
    #[repr(C, packed)]
    pub struct _ib_gid_unicast [c "struct _ib_gid_unicast", size 16, align 1] {
        /// Subnet prefix, network order.
        [0] pub prefix: ib_gid_prefix_t,
        /// Interface id (port GUID), network order.
        [8] pub interface_id: ib_net64_t,
    }
}

ci_struct! {
    /// `ib_gid_t.multicast`: a multicast GID as header bytes and group id (packed).
    #[repr(C, packed)]
    pub struct _ib_gid_multicast [c "struct _ib_gid_multicast", size 16, align 1] {
        /// 0xFF, then flags and scope.
        [0] pub header: [u8; 2],
        /// Group id.
        [2] pub raw_group_id: [u8; 14],
    }
}

ci_struct! {
    /// 128-bit global identifier (packed union, alignment 1).
    #[repr(C, packed)]
    pub union ib_gid_t [size 16, align 1] {
        /// The 16 bytes in wire order.
        [0] pub raw: [u8; 16],
        /// Unicast view.
        [0] pub unicast: _ib_gid_unicast,
        /// Multicast view.
        [0] pub multicast: _ib_gid_multicast,
    }
}

ci_struct! {
    /// SA PathRecord in wire order. The C type is `__declspec(align(8))` inside a pack(1)
    /// region: alignment 8 and no padding. Every member is naturally aligned, so plain
    /// `repr(C, align(8))` gives the same bytes (Rust cannot combine `packed` and `align`).
    #[repr(C, align(8))]
    pub struct ib_path_rec_t [size 64, align 8] {
        /// Service id, network order.
        [0] pub service_id: ib_net64_t,
        /// Destination GID.
        [8] pub dgid: ib_gid_t,
        /// Source GID.
        [24] pub sgid: ib_gid_t,
        /// Destination LID, network order.
        [40] pub dlid: ib_net16_t,
        /// Source LID, network order.
        [42] pub slid: ib_net16_t,
        /// Raw traffic flag, flow label and hop limit, network order.
        [44] pub hop_flow_raw: ib_net32_t,
        /// Traffic class.
        [48] pub tclass: u8,
        /// Reversible flag and number of paths.
        [49] pub num_path: u8,
        /// Partition key, network order.
        [50] pub pkey: ib_net16_t,
        /// QoS class and service level, network order.
        [52] pub qos_class_sl: ib_net16_t,
        /// MTU selector and code.
        [54] pub mtu: u8,
        /// Rate selector and code.
        [55] pub rate: u8,
        /// Packet lifetime selector and code.
        [56] pub pkt_life: u8,
        /// Preference.
        [57] pub preference: u8,
        /// Reserved.
        [58] pub resv2: [u8; 6],
    }
}

ci_struct! {
    /// Common MAD header (packed).
    #[repr(C, packed)]
    pub struct ib_mad_t [size 24, align 1] {
        /// MAD base version.
        [0] pub base_ver: u8,
        /// Management class.
        [1] pub mgmt_class: u8,
        /// Class version.
        [2] pub class_ver: u8,
        /// Method.
        [3] pub method: u8,
        /// Status, network order.
        [4] pub status: ib_net16_t,
        /// Class-specific field, network order.
        [6] pub class_spec: ib_net16_t,
        /// Transaction id, network order.
        [8] pub trans_id: ib_net64_t,
        /// Attribute id, network order.
        [16] pub attr_id: ib_net16_t,
        /// Reserved.
        [18] pub resv: ib_net16_t,
        /// Attribute modifier, network order.
        [20] pub attr_mod: ib_net32_t,
    }
}

ci_struct! {
    /// Global route header (packed).
    #[repr(C, packed)]
    pub struct ib_grh_t [size 40, align 1] {
        /// IP version, traffic class and flow label, network order.
        [0] pub ver_class_flow: ib_net32_t,
        /// Reserved (payload length on the wire).
        [4] pub resv1: u16,
        /// Reserved (next header on the wire).
        [6] pub resv2: u8,
        /// Hop limit.
        [7] pub hop_limit: u8,
        /// Source GID.
        [8] pub src_gid: ib_gid_t,
        /// Destination GID.
        [24] pub dest_gid: ib_gid_t,
    }
}

ci_struct! {
    /// Asynchronous event record handed to a `ci_async_event_cb_t`.
    #[repr(C)]
    pub struct ib_event_rec_t [size 32, align 8] {
        /// Context of the object the event is about (TO_LONG_PTR; for a CA event, the
        /// registered `ci_event_handler_t`).
        [0] pub context: *mut c_void,
        /// Event kind (`IB_AE_*`).
        [8] pub r#type: ib_async_event_t,
        /// Vendor-defined data.
        [16] pub vendor_specific: u64,
        /// Port the event is about, for port events.
        [24] pub port_number: u8,
    }
}

ci_struct! {
    /// Port capability flags, one `boolean_t` each.
    #[repr(C)]
    pub struct ib_port_cap_t [size 104, align 4] {
        /// Communication manager supported.
        [0] pub cm: boolean_t,
        /// SNMP tunnelling supported.
        [4] pub snmp: boolean_t,
        /// Device management supported.
        [8] pub dev_mgmt: boolean_t,
        /// Vendor classes supported.
        [12] pub vend: boolean_t,
        /// Port is the subnet manager.
        [16] pub sm: boolean_t,
        /// Subnet manager disabled.
        [20] pub sm_disable: boolean_t,
        /// Q_Key violation counter supported.
        [24] pub qkey_ctr: boolean_t,
        /// P_Key violation counter supported.
        [28] pub pkey_ctr: boolean_t,
        /// Notices supported.
        [32] pub notice: boolean_t,
        /// Traps supported.
        [36] pub trap: boolean_t,
        /// Automatic path migration supported.
        [40] pub apm: boolean_t,
        /// SL mapping supported.
        [44] pub slmap: boolean_t,
        /// P_Key table in NVRAM.
        [48] pub pkey_nvram: boolean_t,
        /// M_Key in NVRAM.
        [52] pub mkey_nvram: boolean_t,
        /// System image GUID supported.
        [56] pub sysguid: boolean_t,
        /// Directed-route notices supported.
        [60] pub dr_notice: boolean_t,
        /// Boot management supported.
        [64] pub boot_mgmt: boolean_t,
        /// Capability-mask notices supported.
        [68] pub capm_notice: boolean_t,
        /// Reinitialisation supported.
        [72] pub reinit: boolean_t,
        /// LED info supported.
        [76] pub ledinfo: boolean_t,
        /// Port is active.
        [80] pub port_active: boolean_t,
        /// Inter-packet delay supported.
        [84] pub ipd: boolean_t,
        /// P_Key switch external port trap supported.
        [88] pub pkey_switch_ext_port: boolean_t,
        /// Baseboard management supported.
        [92] pub bm: boolean_t,
        /// Link round-trip latency supported.
        [96] pub link_rtl: boolean_t,
        /// Client reregistration supported.
        [100] pub client_reregister: boolean_t,
    }
}

ci_struct! {
    /// Port attributes `modify_ca` applies (selected by an `ib_ca_mod_t`).
    #[repr(C)]
    pub struct ib_port_attr_mod_t [size 120, align 8] {
        /// New capabilities.
        [0] pub cap: ib_port_cap_t,
        /// P_Key violation counter value.
        [104] pub pkey_ctr: u16,
        /// Q_Key violation counter value.
        [106] pub qkey_ctr: u16,
        /// Initialisation type (`IB_INIT_TYPE_*`).
        [108] pub init_type: ib_init_type_t,
        /// System image GUID, network order.
        [112] pub system_image_guid: ib_net64_t,
    }
}

ci_struct! {
    /// Attributes of one port, part of the `query_ca` output.
    #[repr(C)]
    pub struct ib_port_attr_t [size 168, align 8] {
        /// Port GUID, network order.
        [0] pub port_guid: ib_net64_t,
        /// Port number (1-based).
        [8] pub port_num: u8,
        /// Maximum MTU (IB MTU code).
        [9] pub mtu: u8,
        /// Link layer (`RDMA_TRANSPORT_*`).
        [12] pub transport: rdma_transport_type,
        /// Largest message size.
        [16] pub max_msg_size: u64,
        /// Base LID, network order.
        [24] pub lid: ib_net16_t,
        /// LID mask count.
        [26] pub lmc: u8,
        /// Active link width code.
        [27] pub active_width: u8,
        /// Number of data VLs.
        [28] pub max_vls: u16,
        /// Subnet manager LID, network order.
        [30] pub sm_lid: ib_net16_t,
        /// Subnet manager service level.
        [32] pub sm_sl: u8,
        /// Logical link state.
        [33] pub link_state: u8,
        /// Initialisation type reply (`IB_INIT_TYPE_*`).
        [34] pub init_type_reply: ib_init_type_t,
        /// Subnet timeout exponent.
        [35] pub subnet_timeout: u8,
        /// Active link speed code.
        [36] pub active_speed: u8,
        /// Physical port state.
        [37] pub phys_state: u8,
        /// Extended active speed code.
        [38] pub ext_active_speed: u8,
        /// Link encoding.
        [39] pub link_encoding: u8,
        /// Capability flags.
        [40] pub cap: ib_port_cap_t,
        /// P_Key violation counter.
        [144] pub pkey_ctr: u16,
        /// Q_Key violation counter.
        [146] pub qkey_ctr: u16,
        /// GID table entries.
        [148] pub num_gids: u16,
        /// P_Key table entries.
        [150] pub num_pkeys: u16,
        /// GID table (TO_LONG_PTR), inside the same `query_ca` buffer.
        [152] pub p_gid_table: *mut ib_gid_t,
        /// P_Key table, network order (TO_LONG_PTR), inside the same `query_ca` buffer.
        [160] pub p_pkey_table: *mut ib_net16_t,
    }
}

ci_struct! {
    /// HCA attributes, the head of the variable-size `query_ca` output.
    #[repr(C)]
    pub struct ib_ca_attr_t [size 248, align 8] {
        /// Node GUID, network order.
        [0] pub ca_guid: ib_net64_t,
        /// PCI vendor id.
        [8] pub vend_id: u32,
        /// Device id.
        [12] pub dev_id: u16,
        /// Hardware revision.
        [14] pub revision: u16,
        /// Firmware version.
        [16] pub fw_ver: u64,
        /// Total size of the attribute buffer (this struct and what it points to).
        [24] pub size: u32,
        /// Maximum QPs.
        [28] pub max_qps: u32,
        /// Maximum work requests per queue.
        [32] pub max_wrs: u32,
        /// Maximum scatter/gather entries per work request.
        [36] pub max_sges: u32,
        /// Maximum SGEs for RDMA reads.
        [40] pub max_rd_sges: u32,
        /// Maximum CQs.
        [44] pub max_cqs: u32,
        /// Maximum entries per CQ.
        [48] pub max_cqes: u32,
        /// Maximum protection domains.
        [52] pub max_pds: u32,
        /// Maximum memory regions.
        [56] pub init_regions: u32,
        /// Largest memory region.
        [64] pub init_region_size: u64,
        /// Maximum memory windows.
        [72] pub init_windows: u32,
        /// Maximum address handles.
        [80] pub max_addr_handles: u64,
        /// Maximum partitions.
        [88] pub max_partitions: u32,
        /// Atomic support (`IB_ATOMIC_*`).
        [92] pub atomicity: ib_atomic_t,
        /// Maximum incoming RDMA reads/atomics per QP.
        [96] pub max_qp_resp_res: u8,
        /// Maximum incoming RDMA reads/atomics per HCA.
        [97] pub max_resp_res: u8,
        /// Maximum outstanding RDMA reads/atomics per QP.
        [98] pub max_qp_init_depth: u8,
        /// Maximum raw IPv6 QPs.
        [100] pub max_ipv6_qps: u32,
        /// Maximum raw Ethertype QPs.
        [104] pub max_ether_qps: u32,
        /// Maximum multicast groups.
        [108] pub max_mcast_grps: u32,
        /// Maximum QPs attached to multicast groups in total.
        [112] pub max_mcast_qps: u32,
        /// Maximum QPs per multicast group.
        [116] pub max_qps_per_mcast_grp: u32,
        /// Maximum fast memory regions.
        [120] pub max_fmr: u32,
        /// Maximum remaps per FMR.
        [124] pub max_map_per_fmr: u32,
        /// Maximum SRQs.
        [128] pub max_srq: u32,
        /// Maximum work requests per SRQ.
        [132] pub max_srq_wrs: u32,
        /// Maximum SGEs per SRQ work request.
        [136] pub max_srq_sges: u32,
        /// BlueFlame register size.
        [140] pub bf_reg_size: u32,
        /// BlueFlame registers per page.
        [144] pub bf_regs_per_page: u32,
        /// Largest send queue descriptor.
        [148] pub max_sq_desc_sz: u32,
        /// Local CA ACK delay.
        [152] pub local_ack_delay: u8,
        /// Bad P_Key counter supported.
        [156] pub bad_pkey_ctr_support: boolean_t,
        /// Bad Q_Key counter supported.
        [160] pub bad_qkey_ctr_support: boolean_t,
        /// Raw multicast supported.
        [164] pub raw_mcast_support: boolean_t,
        /// Automatic path migration supported.
        [168] pub apm_support: boolean_t,
        /// The HCA checks the port of an address vector.
        [172] pub av_port_check: boolean_t,
        /// The primary port of a QP can change.
        [176] pub change_primary_port: boolean_t,
        /// QP work queue depths can change.
        [180] pub modify_wr_depth: boolean_t,
        /// SRQ depth can change.
        [184] pub modify_srq_depth: boolean_t,
        /// Modify QP accepts the current state.
        [188] pub current_qp_state_support: boolean_t,
        /// Ports can be shut down.
        [192] pub shutdown_port_capability: boolean_t,
        /// Init type supported.
        [196] pub init_type_support: boolean_t,
        /// Port-active events supported.
        [200] pub port_active_event_support: boolean_t,
        /// System image GUID supported.
        [204] pub system_image_guid_support: boolean_t,
        /// MAD agents run in hardware.
        [208] pub hw_agents: boolean_t,
        /// IPoIB checksum offload supported.
        [212] pub ipoib_csum: boolean_t,
        /// System image GUID, network order.
        [216] pub system_image_guid: ib_net64_t,
        /// Entries of the page size table.
        [224] pub num_page_sizes: u32,
        /// Number of ports.
        [228] pub num_ports: u8,
        /// Supported page sizes (TO_LONG_PTR), inside the same buffer.
        [232] pub p_page_size: *mut u32,
        /// One `ib_port_attr_t` per port (TO_LONG_PTR), inside the same buffer.
        [240] pub p_port_attr: *mut ib_port_attr_t,
    }
}

ci_struct! {
    /// `ib_av_attr_t.conn`: the connected-mode part of an address vector.
    #[repr(C)]
    pub struct _av_conn [c "struct _av_conn", size 4, align 1] {
        /// Path MTU code.
        [0] pub path_mtu: u8,
        /// Local ACK timeout exponent.
        [1] pub local_ack_timeout: u8,
        /// Transport retry count.
        [2] pub seq_err_retry_cnt: u8,
        /// RNR retry count.
        [3] pub rnr_retry_cnt: u8,
    }
}

ci_struct! {
    /// Address vector: how to reach a remote port.
    #[repr(C)]
    pub struct ib_av_attr_t [size 56, align 4] {
        /// Local port number.
        [0] pub port_num: u8,
        /// Service level.
        [1] pub sl: u8,
        /// Destination LID, network order.
        [2] pub dlid: ib_net16_t,
        /// Whether `grh` is used.
        [4] pub grh_valid: boolean_t,
        /// Global route header (packed, alignment 1).
        [8] pub grh: ib_grh_t,
        /// Static rate code.
        [48] pub static_rate: u8,
        /// Source path bits.
        [49] pub path_bits: u8,
        /// Connected-mode parameters.
        [50] pub conn: _av_conn,
    }
}

ci_struct! {
    /// SRQ attributes (create, modify, query).
    #[repr(C)]
    pub struct ib_srq_attr_t [size 12, align 4] {
        /// Maximum outstanding work requests.
        [0] pub max_wr: u32,
        /// Maximum SGEs per work request.
        [4] pub max_sge: u32,
        /// Limit event threshold.
        [8] pub srq_limit: u32,
    }
}

ci_struct! {
    /// QP creation attributes.
    #[repr(C)]
    pub struct ib_qp_create_t [size 56, align 8] {
        /// Transport service (`IB_QPT_*`).
        [0] pub qp_type: ib_qp_type_t,
        /// Maximum inline send data.
        [4] pub sq_max_inline: u32,
        /// Send queue depth.
        [8] pub sq_depth: u32,
        /// Receive queue depth.
        [12] pub rq_depth: u32,
        /// Maximum SGEs per send.
        [16] pub sq_sge: u32,
        /// Maximum SGEs per receive.
        [20] pub rq_sge: u32,
        /// Send CQ (TO_LONG_PTR).
        [24] pub h_sq_cq: ib_cq_handle_t,
        /// Receive CQ (TO_LONG_PTR).
        [32] pub h_rq_cq: ib_cq_handle_t,
        /// SRQ, or null (TO_LONG_PTR).
        [40] pub h_srq: ib_srq_handle_t,
        /// Whether every send is signalled.
        [48] pub sq_signaled: boolean_t,
    }
}

ci_struct! {
    /// QP creation attributes with creation flags (`create_qp_ex`).
    #[repr(C)]
    pub struct ib_qp_create_ex_t [size 64, align 8] {
        /// The plain attributes.
        [0] pub qp_create: ib_qp_create_t,
        /// `IB_QP_CREATE_FLAG_*` bits (C `int`).
        [56] pub create_flags: i32,
    }
}

ci_struct! {
    /// QP attributes (create and query output).
    #[repr(C)]
    pub struct ib_qp_attr_t [size 224, align 8] {
        /// Protection domain (TO_LONG_PTR).
        [0] pub h_pd: ib_pd_handle_t,
        /// Transport service (`IB_QPT_*`).
        [8] pub qp_type: ib_qp_type_t,
        /// Access rights (`IB_AC_*`).
        [12] pub access_ctrl: ib_access_t,
        /// P_Key index.
        [16] pub pkey_index: u16,
        /// Maximum inline send data.
        [20] pub sq_max_inline: u32,
        /// Send queue depth.
        [24] pub sq_depth: u32,
        /// Receive queue depth.
        [28] pub rq_depth: u32,
        /// Maximum SGEs per send.
        [32] pub sq_sge: u32,
        /// Maximum SGEs per receive.
        [36] pub rq_sge: u32,
        /// Outstanding RDMA reads/atomics as initiator.
        [40] pub init_depth: u8,
        /// Incoming RDMA reads/atomics as responder.
        [41] pub resp_res: u8,
        /// Send CQ (TO_LONG_PTR).
        [48] pub h_sq_cq: ib_cq_handle_t,
        /// Receive CQ (TO_LONG_PTR).
        [56] pub h_rq_cq: ib_cq_handle_t,
        /// SRQ, or null (TO_LONG_PTR).
        [64] pub h_srq: ib_srq_handle_t,
        /// Whether every send is signalled.
        [72] pub sq_signaled: boolean_t,
        /// Current state (`IB_QPS_*`).
        [76] pub state: ib_qp_state_t,
        /// QP number, network order.
        [80] pub num: ib_net32_t,
        /// Destination QP number, network order.
        [84] pub dest_num: ib_net32_t,
        /// Q_Key, network order.
        [88] pub qkey: ib_net32_t,
        /// Send PSN, network order.
        [92] pub sq_psn: ib_net32_t,
        /// Receive PSN, network order.
        [96] pub rq_psn: ib_net32_t,
        /// Primary port.
        [100] pub primary_port: u8,
        /// Alternate port.
        [101] pub alternate_port: u8,
        /// Primary path.
        [104] pub primary_av: ib_av_attr_t,
        /// Alternate path.
        [160] pub alternate_av: ib_av_attr_t,
        /// Path migration state (`IB_APM_*`).
        [216] pub apm_state: ib_apm_state_t,
    }
}

ci_struct! {
    /// `ib_qp_mod_t.state.init`: attributes of a move to INIT.
    #[repr(C)]
    pub struct _qp_init [c "struct _qp_init", size 16, align 4] {
        /// Primary port.
        [0] pub primary_port: u8,
        /// Q_Key, network order.
        [4] pub qkey: ib_net32_t,
        /// P_Key index.
        [8] pub pkey_index: u16,
        /// Access rights (`IB_AC_*`).
        [12] pub access_ctrl: ib_access_t,
    }
}

ci_struct! {
    /// `ib_qp_mod_t.state.rtr`: attributes of a move to RTR.
    #[repr(C)]
    pub struct _qp_rtr [c "struct _qp_rtr", size 148, align 4] {
        /// Receive PSN, network order.
        [0] pub rq_psn: ib_net32_t,
        /// Destination QP number, network order.
        [4] pub dest_qp: ib_net32_t,
        /// Primary path.
        [8] pub primary_av: ib_av_attr_t,
        /// Incoming RDMA reads/atomics as responder.
        [64] pub resp_res: u8,
        /// RNR NAK timer code.
        [65] pub rnr_nak_timeout: u8,
        /// Which optional members below apply (`IB_MOD_QP_*`).
        [68] pub opts: ib_qp_opts_t,
        /// Alternate path.
        [72] pub alternate_av: ib_av_attr_t,
        /// Q_Key, network order.
        [128] pub qkey: ib_net32_t,
        /// P_Key index.
        [132] pub pkey_index: u16,
        /// Access rights (`IB_AC_*`).
        [136] pub access_ctrl: ib_access_t,
        /// Send queue depth.
        [140] pub sq_depth: u32,
        /// Receive queue depth.
        [144] pub rq_depth: u32,
    }
}

ci_struct! {
    /// `ib_qp_mod_t.state.rts`: attributes of a move to RTS (or of RTS → RTS).
    #[repr(C)]
    pub struct _qp_rts [c "struct _qp_rts", size 160, align 4] {
        /// Send PSN, network order.
        [0] pub sq_psn: ib_net32_t,
        /// Transport retry count.
        [4] pub retry_cnt: u8,
        /// RNR retry count.
        [5] pub rnr_retry_cnt: u8,
        /// Local ACK timeout exponent.
        [6] pub local_ack_timeout: u8,
        /// Outstanding RDMA reads/atomics as initiator.
        [7] pub init_depth: u8,
        /// Which optional members below apply (`IB_MOD_QP_*`).
        [8] pub opts: ib_qp_opts_t,
        /// RNR NAK timer code.
        [12] pub rnr_nak_timeout: u8,
        /// Expected current state (`IB_QPS_*`).
        [16] pub current_state: ib_qp_state_t,
        /// Q_Key, network order.
        [20] pub qkey: ib_net32_t,
        /// Access rights (`IB_AC_*`).
        [24] pub access_ctrl: ib_access_t,
        /// Incoming RDMA reads/atomics as responder.
        [28] pub resp_res: u8,
        /// Primary path.
        [32] pub primary_av: ib_av_attr_t,
        /// Alternate path.
        [88] pub alternate_av: ib_av_attr_t,
        /// Send queue depth.
        [144] pub sq_depth: u32,
        /// Receive queue depth.
        [148] pub rq_depth: u32,
        /// Path migration state (`IB_APM_*`).
        [152] pub apm_state: ib_apm_state_t,
        /// Primary port.
        [156] pub primary_port: u8,
        /// P_Key index.
        [158] pub pkey_index: u16,
    }
}

ci_struct! {
    /// `ib_qp_mod_t.state.sqd`: attributes of a move to SQD.
    #[repr(C)]
    pub struct _qp_sqd [c "struct _qp_sqd", size 4, align 4] {
        /// Whether to raise an event once the send queue has drained.
        [0] pub sqd_event: boolean_t,
    }
}

ci_struct! {
    /// `ib_qp_mod_t.state`: the per-target-state attributes.
    #[repr(C)]
    pub union _qp_state [c "union _qp_state", size 160, align 4] {
        /// For `IB_QPS_INIT`.
        [0] pub init: _qp_init,
        /// For `IB_QPS_RTR`.
        [0] pub rtr: _qp_rtr,
        /// For `IB_QPS_RTS`.
        [0] pub rts: _qp_rts,
        /// For `IB_QPS_SQD`.
        [0] pub sqd: _qp_sqd,
    }
}

ci_struct! {
    /// A QP state transition request.
    #[repr(C)]
    pub struct ib_qp_mod_t [size 164, align 4] {
        /// Target state (`IB_QPS_*`).
        [0] pub req_state: ib_qp_state_t,
        /// Attributes for the target state.
        [4] pub state: _qp_state,
    }
}

ci_struct! {
    /// One scatter/gather element.
    #[repr(C)]
    pub struct ib_local_ds_t [size 16, align 8] {
        /// Virtual address.
        [0] pub vaddr: u64,
        /// Length in bytes.
        [8] pub length: u32,
        /// Local key of the region.
        [12] pub lkey: u32,
    }
}

ci_struct! {
    /// Page list of a fast registration work request.
    #[repr(C)]
    pub struct ib_fast_reg_page_list_t [size 24, align 8] {
        /// Owning device (driver-private).
        [0] pub device: *mut c_void,
        /// Page addresses.
        [8] pub page_list: *mut u64,
        /// Capacity of `page_list` (C `unsigned int`).
        [16] pub max_page_list_len: u32,
    }
}

ci_struct! {
    /// `ib_send_wr_t.dgrm.ud`: unreliable datagram send parameters.
    #[repr(C)]
    pub struct _send_ud [c "struct _send_ud", size 48, align 8] {
        /// Address vector of the destination.
        [0] pub h_av: ib_av_handle_t,
        /// Destination QP number, network order.
        [8] pub remote_qp: ib_net32_t,
        /// Destination Q_Key, network order.
        [12] pub remote_qkey: ib_net32_t,
        /// Reserved.
        [16] pub rsvd: *mut c_void,
        /// P_Key index (QP1 only).
        [24] pub pkey_index: u16,
        /// LSO header.
        [32] pub header: *mut c_void,
        /// LSO header length (C `int`).
        [40] pub hlen: i32,
        /// LSO maximum segment size (C `int`).
        [44] pub mss: i32,
    }
}

ci_struct! {
    /// `ib_send_wr_t.dgrm.rd`: reliable datagram send parameters.
    #[repr(C)]
    pub struct _send_rd [c "struct _send_rd", size 12, align 4] {
        /// Destination QP number, network order.
        [0] pub remote_qp: ib_net32_t,
        /// Destination Q_Key, network order.
        [4] pub remote_qkey: ib_net32_t,
        /// End-to-end context number, network order.
        [8] pub eecn: ib_net32_t,
    }
}

ci_struct! {
    /// `ib_send_wr_t.dgrm.raw_ether`: raw Ethertype send parameters.
    #[repr(C)]
    pub struct _send_raw_ether [c "struct _send_raw_ether", size 8, align 2] {
        /// Destination LID, network order.
        [0] pub dest_lid: ib_net16_t,
        /// Source path bits.
        [2] pub path_bits: u8,
        /// Service level.
        [3] pub sl: u8,
        /// Static rate code.
        [4] pub max_static_rate: u8,
        /// Ethertype, network order.
        [6] pub ether_type: ib_net16_t,
    }
}

ci_struct! {
    /// `ib_send_wr_t.dgrm.raw_ipv6`: raw IPv6 send parameters.
    #[repr(C)]
    pub struct _send_raw_ipv6 [c "struct _send_raw_ipv6", size 6, align 2] {
        /// Destination LID, network order.
        [0] pub dest_lid: ib_net16_t,
        /// Source path bits.
        [2] pub path_bits: u8,
        /// Service level.
        [3] pub sl: u8,
        /// Static rate code.
        [4] pub max_static_rate: u8,
    }
}

ci_struct! {
    /// `ib_send_wr_t.dgrm`: datagram send parameters by service.
    #[repr(C)]
    pub union _send_dgrm [c "union _send_dgrm", size 48, align 8] {
        /// Unreliable datagram.
        [0] pub ud: _send_ud,
        /// Reliable datagram.
        [0] pub rd: _send_rd,
        /// Raw Ethertype.
        [0] pub raw_ether: _send_raw_ether,
        /// Raw IPv6.
        [0] pub raw_ipv6: _send_raw_ipv6,
    }
}

ci_struct! {
    /// `ib_send_wr_t.remote_ops`: RDMA and atomic parameters.
    #[repr(C)]
    pub struct _send_remote_ops [c "struct _send_remote_ops", size 32, align 8] {
        /// Remote virtual address.
        [0] pub vaddr: u64,
        /// Remote key.
        [8] pub rkey: net32_t,
        /// Compare or add operand, network order.
        [16] pub atomic1: ib_net64_t,
        /// Swap operand, network order.
        [24] pub atomic2: ib_net64_t,
    }
}

ci_struct! {
    /// `ib_send_wr_t.fast_reg`: fast registration parameters.
    #[repr(C)]
    pub struct _fast_reg [c "struct _fast_reg", size 40, align 8] {
        /// Start of the I/O virtual address range.
        [0] pub iova_start: u64,
        /// Pages to map.
        [8] pub page_list: *mut ib_fast_reg_page_list_t,
        /// log2 of the page size (C `unsigned int`).
        [16] pub page_shift: u32,
        /// Pages used from `page_list` (C `unsigned int`).
        [20] pub page_list_len: u32,
        /// Length in bytes.
        [24] pub length: u32,
        /// Access rights (C `int`).
        [28] pub access_flags: i32,
        /// Key to register.
        [32] pub rkey: net32_t,
        /// First byte offset.
        [36] pub fbo: u32,
    }
}

ci_struct! {
    /// The first anonymous union of `ib_send_wr_t`: immediate data or the key to invalidate.
    #[repr(C)]
    pub union ib_send_wr_t_anon_imm [c "ib_send_wr_t::(anonymous union 1)", size 4, align 4] {
        /// Immediate data, network order.
        [0] pub immediate_data: ib_net32_t,
        /// Remote key to invalidate (send with invalidate).
        [0] pub invalidate_rkey: net32_t,
    }
}

ci_struct! {
    /// The second anonymous union of `ib_send_wr_t`: per-operation parameters.
    #[repr(C)]
    pub union ib_send_wr_t_anon_op [c "ib_send_wr_t::(anonymous union 2)", size 48, align 8] {
        /// Datagram parameters.
        [0] pub dgrm: _send_dgrm,
        /// RDMA/atomic parameters.
        [0] pub remote_ops: _send_remote_ops,
        /// Fast registration parameters.
        [0] pub fast_reg: _fast_reg,
    }
}

ci_struct! {
    /// A send work request (a singly linked list through `p_next`).
    #[repr(C)]
    pub struct ib_send_wr_t [size 88, align 8] {
        /// Caller's id, returned in the completion.
        [0] pub wr_id: u64,
        /// Next request, or null.
        [8] pub p_next: *mut ib_send_wr_t,
        /// Scatter/gather list.
        [16] pub ds_array: *mut ib_local_ds_t,
        /// Entries in `ds_array`.
        [24] pub num_ds: u32,
        /// Operation (`WR_*`).
        [28] pub wr_type: ib_wr_type_t,
        /// Option bits (`IB_SEND_OPT_*`).
        [32] pub send_opt: ib_send_opt_t,
        /// C anonymous union (`immediate_data` / `invalidate_rkey`).
        [36] pub anon_imm: ib_send_wr_t_anon_imm
            => anon { immediate_data: ib_net32_t, invalidate_rkey: net32_t },
        /// C anonymous union (`dgrm` / `remote_ops` / `fast_reg`).
        [40] pub anon_op: ib_send_wr_t_anon_op
            => anon { dgrm: _send_dgrm, remote_ops: _send_remote_ops, fast_reg: _fast_reg },
    }
}

ci_struct! {
    /// A receive work request (a singly linked list through `p_next`).
    #[repr(C)]
    pub struct ib_recv_wr_t [size 32, align 8] {
        /// Next request, or null (TO_LONG_PTR).
        [0] pub p_next: *mut ib_recv_wr_t,
        /// Caller's id, returned in the completion.
        [8] pub wr_id: u64,
        /// Entries in `ds_array`.
        [16] pub num_ds: u32,
        /// Scatter/gather list (TO_LONG_PTR).
        [24] pub ds_array: *mut ib_local_ds_t,
    }
}

ci_struct! {
    /// A memory window bind request.
    #[repr(C)]
    pub struct ib_bind_wr_t [size 48, align 8] {
        /// Caller's id, returned in the completion.
        [0] pub wr_id: u64,
        /// Option bits (`IB_SEND_OPT_*`).
        [8] pub send_opt: ib_send_opt_t,
        /// Region to bind to (TO_LONG_PTR).
        [16] pub h_mr: ib_mr_handle_t,
        /// Access rights (`IB_AC_*`).
        [24] pub access_ctrl: ib_access_t,
        /// Current remote key of the window.
        [28] pub current_rkey: net32_t,
        /// Range to bind.
        [32] pub local_ds: ib_local_ds_t,
    }
}

ci_struct! {
    /// `ib_wc_t.recv.conn`: receive details on connected QPs.
    #[repr(C)]
    pub struct _wc_conn [c "struct _wc_conn", size 8, align 4] {
        /// Option bits (`IB_RECV_OPT_*`).
        [0] pub recv_opt: ib_recv_opt_t,
        /// Immediate data, network order.
        [4] pub immediate_data: ib_net32_t,
    }
}

ci_struct! {
    /// `ib_wc_t.recv.ud`: receive details on unreliable datagram QPs.
    #[repr(C)]
    pub struct _wc_ud [c "struct _wc_ud", size 20, align 4] {
        /// Option bits (`IB_RECV_OPT_*`).
        [0] pub recv_opt: ib_recv_opt_t,
        /// Immediate data, network order.
        [4] pub immediate_data: ib_net32_t,
        /// Source QP number, network order.
        [8] pub remote_qp: ib_net32_t,
        /// P_Key index.
        [12] pub pkey_index: u16,
        /// Source LID, network order.
        [14] pub remote_lid: ib_net16_t,
        /// Source service level.
        [16] pub remote_sl: u8,
        /// Source path bits.
        [17] pub path_bits: u8,
    }
}

ci_struct! {
    /// `ib_wc_t.recv.rd`: receive details on reliable datagram QPs.
    #[repr(C)]
    pub struct _wc_rd [c "struct _wc_rd", size 16, align 4] {
        /// Source end-to-end context, network order.
        [0] pub remote_eecn: ib_net32_t,
        /// Source QP number, network order.
        [4] pub remote_qp: ib_net32_t,
        /// Source LID, network order.
        [8] pub remote_lid: ib_net16_t,
        /// Source service level.
        [10] pub remote_sl: u8,
        /// Free receive count.
        [12] pub free_cnt: u32,
    }
}

ci_struct! {
    /// `ib_wc_t.recv.raw_ipv6`: receive details on raw IPv6 QPs.
    #[repr(C)]
    pub struct _wc_raw_ipv6 [c "struct _wc_raw_ipv6", size 4, align 2] {
        /// Source LID, network order.
        [0] pub remote_lid: ib_net16_t,
        /// Source service level.
        [2] pub remote_sl: u8,
        /// Source path bits.
        [3] pub path_bits: u8,
    }
}

ci_struct! {
    /// `ib_wc_t.recv.raw_ether`: receive details on raw Ethertype QPs.
    #[repr(C)]
    pub struct _wc_raw_ether [c "struct _wc_raw_ether", size 6, align 2] {
        /// Source LID, network order.
        [0] pub remote_lid: ib_net16_t,
        /// Source service level.
        [2] pub remote_sl: u8,
        /// Source path bits.
        [3] pub path_bits: u8,
        /// Ethertype, network order.
        [4] pub ether_type: ib_net16_t,
    }
}

ci_struct! {
    /// `ib_wc_t.recv`: receive details by QP service.
    #[repr(C)]
    pub union _wc_recv [c "union _wc_recv", size 20, align 4] {
        /// Connected QPs.
        [0] pub conn: _wc_conn,
        /// Unreliable datagram QPs.
        [0] pub ud: _wc_ud,
        /// Reliable datagram QPs.
        [0] pub rd: _wc_rd,
        /// Raw IPv6 QPs.
        [0] pub raw_ipv6: _wc_raw_ipv6,
        /// Raw Ethertype QPs.
        [0] pub raw_ether: _wc_raw_ether,
    }
}

ci_struct! {
    /// A work completion (`poll_cq` links them through `p_next`).
    #[repr(C)]
    pub struct ib_wc_t [size 56, align 8] {
        /// Next completion, or null (TO_LONG_PTR).
        [0] pub p_next: *mut ib_wc_t,
        /// The work request's id.
        [8] pub wr_id: u64,
        /// Operation (`IB_WC_*`).
        [16] pub wc_type: ib_wc_type_t,
        /// Bytes transferred (receives).
        [20] pub length: u32,
        /// Vendor-defined data.
        [24] pub vendor_specific: u64,
        /// Status (`IB_WCS_*`).
        [32] pub status: ib_wc_status_t,
        /// Receive details.
        [36] pub recv: _wc_recv,
    }
}

ci_struct! {
    /// Virtual memory registration request.
    #[repr(C)]
    pub struct ib_mr_create_t [size 24, align 8] {
        /// Start address (TO_LONG_PTR).
        [0] pub vaddr: *mut c_void,
        /// Length in bytes.
        [8] pub length: u64,
        /// Access rights (`IB_AC_*`).
        [16] pub access_ctrl: ib_access_t,
    }
}

ci_struct! {
    /// Mellanox fast memory region creation request (kernel only).
    #[repr(C)]
    pub struct mlnx_fmr_create_t [size 16, align 4] {
        /// Maximum pages per mapping (C `int`).
        [0] pub max_pages: i32,
        /// Maximum remaps before an unmap (C `int`).
        [4] pub max_maps: i32,
        /// log2 of the page size.
        [8] pub page_size: u8,
        /// Access rights (`IB_AC_*`).
        [12] pub access_ctrl: ib_access_t,
    }
}

ci_struct! {
    /// One physical address range.
    #[repr(C)]
    pub struct ib_phys_range_t [size 16, align 8] {
        /// Physical start address.
        [0] pub base_addr: u64,
        /// Length in bytes.
        [8] pub size: u64,
    }
}

ci_struct! {
    /// Physical memory registration request.
    #[repr(C)]
    pub struct ib_phys_create_t [size 40, align 8] {
        /// Total length in bytes.
        [0] pub length: u64,
        /// Entries in `range_array`.
        [8] pub num_ranges: u32,
        /// The physical ranges.
        [16] pub range_array: *mut ib_phys_range_t,
        /// Offset of the region's start in the first range.
        [24] pub buf_offset: u32,
        /// HCA page size.
        [28] pub hca_page_size: u32,
        /// Access rights (`IB_AC_*`).
        [32] pub access_ctrl: ib_access_t,
    }
}

ci_struct! {
    /// Memory region attributes (`query_mr`).
    #[repr(C)]
    pub struct ib_mr_attr_t [size 56, align 8] {
        /// Protection domain (TO_LONG_PTR).
        [0] pub h_pd: ib_pd_handle_t,
        /// Lowest local address.
        [8] pub local_lb: u64,
        /// Highest local address.
        [16] pub local_ub: u64,
        /// Lowest remote address.
        [24] pub remote_lb: u64,
        /// Highest remote address.
        [32] pub remote_ub: u64,
        /// Access rights (`IB_AC_*`).
        [40] pub access_ctrl: ib_access_t,
        /// Local key.
        [44] pub lkey: net32_t,
        /// Remote key.
        [48] pub rkey: net32_t,
    }
}

ci_struct! {
    /// A vendor-specific operation passed through `vendor_call`.
    #[repr(C)]
    pub struct ib_ci_op_t [size 32, align 8] {
        /// Vendor command.
        [0] pub command: u32,
        /// Size of `p_buf`.
        [4] pub buf_size: u32,
        /// Vendor-defined buffer information.
        [8] pub buf_info: u32,
        /// Vendor status (in/out).
        [12] pub status: i32,
        /// In/out buffer, or null (TO_LONG_PTR).
        [16] pub p_buf: *mut c_void,
        /// Bytes written to `p_buf`.
        [24] pub num_bytes_ret: u32,
    }
}

ci_struct! {
    /// Alternate path response additional information (`ib_al.h`).
    #[repr(C)]
    pub struct ib_apr_info_t [size 72, align 1] {
        /// The bytes.
        [0] pub data: [u8; IB_APR_INFO_SIZE],
    }
}

ci_consts! {
    /// The constants of this module, in declaration order.
    pub(crate) const IB_TYPES_CONSTANTS;

    /// `ib_api_status_t` value.
    group {
        /// Success.
        IB_SUCCESS: ib_api_status_t = 0;
        /// Out of device resources.
        IB_INSUFFICIENT_RESOURCES: ib_api_status_t = 1;
        /// Out of memory, or (`query_ca`) the buffer is too small.
        IB_INSUFFICIENT_MEMORY: ib_api_status_t = 2;
        /// A parameter is invalid.
        IB_INVALID_PARAMETER: ib_api_status_t = 3;
        /// A setting is invalid.
        IB_INVALID_SETTING: ib_api_status_t = 4;
        /// Not found.
        IB_NOT_FOUND: ib_api_status_t = 5;
        /// Timed out.
        IB_TIMEOUT: ib_api_status_t = 6;
        /// Cancelled.
        IB_CANCELED: ib_api_status_t = 7;
        /// Interrupted.
        IB_INTERRUPTED: ib_api_status_t = 8;
        /// Not permitted.
        IB_INVALID_PERMISSION: ib_api_status_t = 9;
        /// Not supported.
        IB_UNSUPPORTED: ib_api_status_t = 10;
        /// Overflow.
        IB_OVERFLOW: ib_api_status_t = 11;
        /// The multicast group is full.
        IB_MAX_MCAST_QPS_REACHED: ib_api_status_t = 12;
        /// Invalid QP state.
        IB_INVALID_QP_STATE: ib_api_status_t = 13;
        /// Invalid path migration state.
        IB_INVALID_APM_STATE: ib_api_status_t = 14;
        /// Invalid port state.
        IB_INVALID_PORT_STATE: ib_api_status_t = 15;
        /// Invalid state.
        IB_INVALID_STATE: ib_api_status_t = 16;
        /// Resource busy.
        IB_RESOURCE_BUSY: ib_api_status_t = 17;
        /// Invalid P_Key.
        IB_INVALID_PKEY: ib_api_status_t = 18;
        /// Invalid local key.
        IB_INVALID_LKEY: ib_api_status_t = 19;
        /// Invalid remote key.
        IB_INVALID_RKEY: ib_api_status_t = 20;
        /// Invalid number of work requests.
        IB_INVALID_MAX_WRS: ib_api_status_t = 21;
        /// Invalid number of SGEs.
        IB_INVALID_MAX_SGE: ib_api_status_t = 22;
        /// Invalid CQ size.
        IB_INVALID_CQ_SIZE: ib_api_status_t = 23;
        /// Invalid SRQ size.
        IB_INVALID_SRQ_SIZE: ib_api_status_t = 24;
        /// Invalid service type.
        IB_INVALID_SERVICE_TYPE: ib_api_status_t = 25;
        /// Invalid GID.
        IB_INVALID_GID: ib_api_status_t = 26;
        /// Invalid LID.
        IB_INVALID_LID: ib_api_status_t = 27;
        /// Invalid GUID.
        IB_INVALID_GUID: ib_api_status_t = 28;
        /// Invalid GUID mask.
        IB_INVALID_GUID_MASK: ib_api_status_t = 29;
        /// Invalid CA handle.
        IB_INVALID_CA_HANDLE: ib_api_status_t = 30;
        /// Invalid AV handle.
        IB_INVALID_AV_HANDLE: ib_api_status_t = 31;
        /// Invalid CQ handle.
        IB_INVALID_CQ_HANDLE: ib_api_status_t = 32;
        /// Invalid QP handle.
        IB_INVALID_QP_HANDLE: ib_api_status_t = 33;
        /// Invalid SRQ handle.
        IB_INVALID_SRQ_HANDLE: ib_api_status_t = 34;
        /// Invalid PD handle.
        IB_INVALID_PD_HANDLE: ib_api_status_t = 35;
        /// Invalid MR handle.
        IB_INVALID_MR_HANDLE: ib_api_status_t = 36;
        /// Invalid FMR handle.
        IB_INVALID_FMR_HANDLE: ib_api_status_t = 37;
        /// Invalid MW handle.
        IB_INVALID_MW_HANDLE: ib_api_status_t = 38;
        /// Invalid multicast handle.
        IB_INVALID_MCAST_HANDLE: ib_api_status_t = 39;
        /// Invalid callback.
        IB_INVALID_CALLBACK: ib_api_status_t = 40;
        /// Invalid access layer handle.
        IB_INVALID_AL_HANDLE: ib_api_status_t = 41;
        /// Invalid handle.
        IB_INVALID_HANDLE: ib_api_status_t = 42;
        /// Generic error.
        IB_ERROR: ib_api_status_t = 43;
        /// Remote error.
        IB_REMOTE_ERROR: ib_api_status_t = 44;
        /// The verbs provider has done all the work.
        IB_VERBS_PROCESSING_DONE: ib_api_status_t = 45;
        /// Invalid work request type.
        IB_INVALID_WR_TYPE: ib_api_status_t = 46;
        /// The QP is in time wait.
        IB_QP_IN_TIMEWAIT: ib_api_status_t = 47;
        /// The EE context is in time wait.
        IB_EE_IN_TIMEWAIT: ib_api_status_t = 48;
        /// Invalid port.
        IB_INVALID_PORT: ib_api_status_t = 49;
        /// Not done yet.
        IB_NOT_DONE: ib_api_status_t = 50;
        /// Invalid index.
        IB_INVALID_INDEX: ib_api_status_t = 51;
        /// No match.
        IB_NO_MATCH: ib_api_status_t = 52;
        /// Pending.
        IB_PENDING: ib_api_status_t = 53;
        /// Unknown error (and the number of status values).
        IB_UNKNOWN_ERROR: ib_api_status_t = 54;
    }

    /// `ib_async_event_t` value.
    group {
        /// Send queue error.
        IB_AE_SQ_ERROR: ib_async_event_t = 1;
        /// Send queue drained (SQD).
        IB_AE_SQ_DRAINED: ib_async_event_t = 2;
        /// Receive queue error.
        IB_AE_RQ_ERROR: ib_async_event_t = 3;
        /// CQ error.
        IB_AE_CQ_ERROR: ib_async_event_t = 4;
        /// Fatal QP error.
        IB_AE_QP_FATAL: ib_async_event_t = 5;
        /// First packet on a QP in RTR (communication established).
        IB_AE_QP_COMM: ib_async_event_t = 6;
        /// Path migrated.
        IB_AE_QP_APM: ib_async_event_t = 7;
        /// Catastrophic HCA error.
        IB_AE_LOCAL_FATAL: ib_async_event_t = 8;
        /// P_Key violation trap.
        IB_AE_PKEY_TRAP: ib_async_event_t = 9;
        /// Q_Key violation trap.
        IB_AE_QKEY_TRAP: ib_async_event_t = 10;
        /// M_Key violation trap.
        IB_AE_MKEY_TRAP: ib_async_event_t = 11;
        /// Port trap.
        IB_AE_PORT_TRAP: ib_async_event_t = 12;
        /// System image GUID trap.
        IB_AE_SYSIMG_GUID_TRAP: ib_async_event_t = 13;
        /// Buffer overrun.
        IB_AE_BUF_OVERRUN: ib_async_event_t = 14;
        /// Link integrity error.
        IB_AE_LINK_INTEGRITY: ib_async_event_t = 15;
        /// Flow control error.
        IB_AE_FLOW_CTRL_ERROR: ib_async_event_t = 16;
        /// B_Key violation trap.
        IB_AE_BKEY_TRAP: ib_async_event_t = 17;
        /// Path migration failed.
        IB_AE_QP_APM_ERROR: ib_async_event_t = 18;
        /// Invalid request on a work queue.
        IB_AE_WQ_REQ_ERROR: ib_async_event_t = 19;
        /// Access error on a work queue.
        IB_AE_WQ_ACCESS_ERROR: ib_async_event_t = 20;
        /// Port became active.
        IB_AE_PORT_ACTIVE: ib_async_event_t = 21;
        /// Port went down.
        IB_AE_PORT_DOWN: ib_async_event_t = 22;
        /// The SM asks clients to reregister.
        IB_AE_CLIENT_REREGISTER: ib_async_event_t = 23;
        /// SRQ fell below its limit.
        IB_AE_SRQ_LIMIT_REACHED: ib_async_event_t = 24;
        /// Catastrophic SRQ error.
        IB_AE_SRQ_CATAS_ERROR: ib_async_event_t = 25;
        /// Last WQE of a QP on an SRQ reached.
        IB_AE_SRQ_QP_LAST_WQE_REACHED: ib_async_event_t = 26;
        /// The driver is being reset.
        IB_AE_RESET_DRIVER: ib_async_event_t = 27;
        /// Clients must release their resources for a reset.
        IB_AE_RESET_CLIENT: ib_async_event_t = 28;
        /// The reset finished.
        IB_AE_RESET_END: ib_async_event_t = 29;
        /// The reset failed.
        IB_AE_RESET_FAILED: ib_async_event_t = 30;
        /// Port LID changed.
        IB_AE_LID_CHANGE: ib_async_event_t = 31;
        /// Port P_Key table changed.
        IB_AE_PKEY_CHANGE: ib_async_event_t = 32;
        /// Subnet manager changed.
        IB_AE_SM_CHANGE: ib_async_event_t = 33;
        /// Port GID table changed.
        IB_AE_GID_CHANGE: ib_async_event_t = 34;
        /// Reset before removal.
        IB_AE_RESET_4_RMV: ib_async_event_t = 35;
        /// CQ overflow.
        IB_AE_CQ_OVERFLOW: ib_async_event_t = 36;
        /// Unknown event (and one past the last value).
        IB_AE_UNKNOWN: ib_async_event_t = 37;
    }

    /// `ib_atomic_t` value.
    group {
        /// No atomics.
        IB_ATOMIC_NONE: ib_atomic_t = 0;
        /// Atomic only with respect to this HCA.
        IB_ATOMIC_LOCAL: ib_atomic_t = 1;
        /// Atomic with respect to the whole node.
        IB_ATOMIC_GLOBAL: ib_atomic_t = 2;
    }

    /// `enum rdma_transport_type` value.
    group {
        /// InfiniBand.
        RDMA_TRANSPORT_IB: rdma_transport_type = 0;
        /// iWARP.
        RDMA_TRANSPORT_IWARP: rdma_transport_type = 1;
        /// RDMA over Ethernet.
        RDMA_TRANSPORT_RDMAOE: rdma_transport_type = 2;
    }

    /// `ib_pd_type_t` value.
    group {
        /// Ordinary PD.
        IB_PDT_NORMAL: ib_pd_type_t = 0;
        /// Alias PD.
        IB_PDT_ALIAS: ib_pd_type_t = 1;
        /// PD for special QPs.
        IB_PDT_SQP: ib_pd_type_t = 2;
        /// PD for UD QPs.
        IB_PDT_UD: ib_pd_type_t = 3;
    }

    /// `ib_qp_type_t` value.
    group {
        /// Reliable connected.
        IB_QPT_RELIABLE_CONN: ib_qp_type_t = 0;
        /// Unreliable connected.
        IB_QPT_UNRELIABLE_CONN: ib_qp_type_t = 1;
        /// Reliable datagram.
        IB_QPT_RELIABLE_DGRM: ib_qp_type_t = 2;
        /// Unreliable datagram.
        IB_QPT_UNRELIABLE_DGRM: ib_qp_type_t = 3;
        /// QP0 (subnet management).
        IB_QPT_QP0: ib_qp_type_t = 4;
        /// QP1 (general services).
        IB_QPT_QP1: ib_qp_type_t = 5;
        /// Raw IPv6.
        IB_QPT_RAW_IPV6: ib_qp_type_t = 6;
        /// Raw Ethertype.
        IB_QPT_RAW_ETHER: ib_qp_type_t = 7;
        /// MAD QP.
        IB_QPT_MAD: ib_qp_type_t = 8;
        /// QP0 alias.
        IB_QPT_QP0_ALIAS: ib_qp_type_t = 9;
        /// QP1 alias.
        IB_QPT_QP1_ALIAS: ib_qp_type_t = 10;
        /// Unknown (one past the last value).
        IB_QPT_UNKNOWN: ib_qp_type_t = 11;
    }

    /// `ib_access_t` bit.
    group {
        /// Remote RDMA read.
        IB_AC_RDMA_READ: ib_access_t = 0x0000_0001;
        /// Remote RDMA write.
        IB_AC_RDMA_WRITE: ib_access_t = 0x0000_0002;
        /// Remote atomics.
        IB_AC_ATOMIC: ib_access_t = 0x0000_0004;
        /// Local write.
        IB_AC_LOCAL_WRITE: ib_access_t = 0x0000_0008;
        /// Memory window binding.
        IB_AC_MW_BIND: ib_access_t = 0x0000_0010;
        /// Map the memory uncached.
        IB_AC_NOT_CACHABLE: ib_access_t = 0x8000_0000;
    }

    /// `ib_qp_state_t` value.
    group {
        /// RESET.
        IB_QPS_RESET: ib_qp_state_t = 0x0000_0001;
        /// INIT.
        IB_QPS_INIT: ib_qp_state_t = 0x0000_0002;
        /// Ready to receive.
        IB_QPS_RTR: ib_qp_state_t = 0x0000_0004;
        /// Ready to send.
        IB_QPS_RTS: ib_qp_state_t = 0x0000_0008;
        /// Send queue drain.
        IB_QPS_SQD: ib_qp_state_t = 0x0000_0010;
        /// SQD, still draining.
        IB_QPS_SQD_DRAINING: ib_qp_state_t = 0x0000_0030;
        /// SQD, drained.
        IB_QPS_SQD_DRAINED: ib_qp_state_t = 0x0000_0050;
        /// Send queue error.
        IB_QPS_SQERR: ib_qp_state_t = 0x0000_0080;
        /// Error.
        IB_QPS_ERROR: ib_qp_state_t = 0x0000_0100;
        /// Time wait (access layer only).
        IB_QPS_TIME_WAIT: ib_qp_state_t = 0xDEAD_0000;
    }

    /// `ib_apm_state_t` value.
    group {
        /// Migrated.
        IB_APM_MIGRATED: ib_apm_state_t = 1;
        /// Rearm.
        IB_APM_REARM: ib_apm_state_t = 2;
        /// Armed.
        IB_APM_ARMED: ib_apm_state_t = 3;
    }

    /// `ib_srq_attr_mask_t` bit.
    group {
        /// `max_wr` applies.
        IB_SRQ_MAX_WR: ib_srq_attr_mask_t = 1 << 0;
        /// `srq_limit` applies.
        IB_SRQ_LIMIT: ib_srq_attr_mask_t = 1 << 1;
    }

    /// `ib_qp_create_flags_t` bit.
    group {
        /// The client serialises send queue access.
        IB_QP_CREATE_FLAG_SQ_ACCESS_CLIENT_SYNC: ib_qp_create_flags_t = 1;
        /// The client serialises receive queue access.
        IB_QP_CREATE_FLAG_RQ_ACCESS_CLIENT_SYNC: ib_qp_create_flags_t = 1 << 1;
        /// The client never overflows the work queues.
        IB_QP_CREATE_FLAG_NO_WQ_OVERFLOW_BY_CLIENT: ib_qp_create_flags_t = 1 << 2;
    }

    /// `ib_qp_opts_t` bit.
    group {
        /// `alternate_av` applies.
        IB_MOD_QP_ALTERNATE_AV: ib_qp_opts_t = 0x0000_0001;
        /// `pkey_index` applies.
        IB_MOD_QP_PKEY: ib_qp_opts_t = 0x0000_0002;
        /// `apm_state` applies.
        IB_MOD_QP_APM_STATE: ib_qp_opts_t = 0x0000_0004;
        /// `primary_av` applies.
        IB_MOD_QP_PRIMARY_AV: ib_qp_opts_t = 0x0000_0008;
        /// `rnr_nak_timeout` applies.
        IB_MOD_QP_RNR_NAK_TIMEOUT: ib_qp_opts_t = 0x0000_0010;
        /// `resp_res` applies.
        IB_MOD_QP_RESP_RES: ib_qp_opts_t = 0x0000_0020;
        /// `init_depth` applies.
        IB_MOD_QP_INIT_DEPTH: ib_qp_opts_t = 0x0000_0040;
        /// `primary_port` applies.
        IB_MOD_QP_PRIMARY_PORT: ib_qp_opts_t = 0x0000_0080;
        /// `access_ctrl` applies.
        IB_MOD_QP_ACCESS_CTRL: ib_qp_opts_t = 0x0000_0100;
        /// `qkey` applies.
        IB_MOD_QP_QKEY: ib_qp_opts_t = 0x0000_0200;
        /// `sq_depth` applies.
        IB_MOD_QP_SQ_DEPTH: ib_qp_opts_t = 0x0000_0400;
        /// `rq_depth` applies.
        IB_MOD_QP_RQ_DEPTH: ib_qp_opts_t = 0x0000_0800;
        /// `current_state` applies.
        IB_MOD_QP_CURRENT_STATE: ib_qp_opts_t = 0x0000_1000;
        /// `retry_cnt` applies.
        IB_MOD_QP_RETRY_CNT: ib_qp_opts_t = 0x0000_2000;
        /// `local_ack_timeout` applies.
        IB_MOD_QP_LOCAL_ACK_TIMEOUT: ib_qp_opts_t = 0x0000_4000;
        /// `rnr_retry_cnt` applies.
        IB_MOD_QP_RNR_RETRY_CNT: ib_qp_opts_t = 0x0000_8000;
        /// Generate a priority tag.
        IB_MOD_QP_GENERATE_PRIO_TAG: ib_qp_opts_t = 0x0001_0000;
    }

    /// `ib_wr_type_t` value.
    group {
        /// Send.
        WR_SEND: ib_wr_type_t = 0;
        /// RDMA write.
        WR_RDMA_WRITE: ib_wr_type_t = 1;
        /// RDMA read.
        WR_RDMA_READ: ib_wr_type_t = 2;
        /// Atomic compare and swap.
        WR_COMPARE_SWAP: ib_wr_type_t = 3;
        /// Atomic fetch and add.
        WR_FETCH_ADD: ib_wr_type_t = 4;
        /// Large send offload.
        WR_LSO: ib_wr_type_t = 5;
        /// No operation.
        WR_NOP: ib_wr_type_t = 6;
        /// Local invalidate.
        WR_LOCAL_INV: ib_wr_type_t = 7;
        /// Fast registration.
        WR_FAST_REG_MR: ib_wr_type_t = 8;
        /// Unknown (one past the last value).
        WR_UNKNOWN: ib_wr_type_t = 9;
    }

    /// `ib_send_opt_t` bit.
    group {
        /// Carries immediate data.
        IB_SEND_OPT_IMMEDIATE: ib_send_opt_t = 0x0000_0001;
        /// Fenced.
        IB_SEND_OPT_FENCE: ib_send_opt_t = 0x0000_0002;
        /// Signalled (always produces a completion).
        IB_SEND_OPT_SIGNALED: ib_send_opt_t = 0x0000_0004;
        /// Solicited event.
        IB_SEND_OPT_SOLICITED: ib_send_opt_t = 0x0000_0008;
        /// Data is copied inline.
        IB_SEND_OPT_INLINE: ib_send_opt_t = 0x0000_0010;
        /// Local operation.
        IB_SEND_OPT_LOCAL: ib_send_opt_t = 0x0000_0020;
        /// IP checksum offload.
        IB_SEND_OPT_TX_IP_CSUM: ib_send_opt_t = 0x0000_0040;
        /// TCP/UDP checksum offload.
        IB_SEND_OPT_TX_TCP_UDP_CSUM: ib_send_opt_t = 0x0000_0080;
        /// Vendor-defined bits.
        IB_SEND_OPT_VEND_MASK: ib_send_opt_t = 0xFFFF_0000;
    }

    /// `ib_wc_status_t` value.
    group {
        /// Success.
        IB_WCS_SUCCESS: ib_wc_status_t = 0;
        /// Local length error.
        IB_WCS_LOCAL_LEN_ERR: ib_wc_status_t = 1;
        /// Local QP operation error.
        IB_WCS_LOCAL_OP_ERR: ib_wc_status_t = 2;
        /// Local protection error.
        IB_WCS_LOCAL_PROTECTION_ERR: ib_wc_status_t = 3;
        /// Flushed.
        IB_WCS_WR_FLUSHED_ERR: ib_wc_status_t = 4;
        /// Memory window bind error.
        IB_WCS_MEM_WINDOW_BIND_ERR: ib_wc_status_t = 5;
        /// Remote access error.
        IB_WCS_REM_ACCESS_ERR: ib_wc_status_t = 6;
        /// Remote operation error.
        IB_WCS_REM_OP_ERR: ib_wc_status_t = 7;
        /// RNR retries exceeded.
        IB_WCS_RNR_RETRY_ERR: ib_wc_status_t = 8;
        /// Transport retries exceeded.
        IB_WCS_TIMEOUT_RETRY_ERR: ib_wc_status_t = 9;
        /// Remote invalid request.
        IB_WCS_REM_INVALID_REQ_ERR: ib_wc_status_t = 10;
        /// Bad response.
        IB_WCS_BAD_RESP_ERR: ib_wc_status_t = 11;
        /// Local access error.
        IB_WCS_LOCAL_ACCESS_ERR: ib_wc_status_t = 12;
        /// General error.
        IB_WCS_GENERAL_ERR: ib_wc_status_t = 13;
        /// Unmatched response.
        IB_WCS_UNMATCHED_RESPONSE: ib_wc_status_t = 14;
        /// Cancelled.
        IB_WCS_CANCELED: ib_wc_status_t = 15;
        /// Remote abort.
        IB_WCS_REM_ABORT_ERR: ib_wc_status_t = 16;
        /// Unknown (one past the last value).
        IB_WCS_UNKNOWN: ib_wc_status_t = 17;
    }

    /// `ib_wc_type_t` value.
    group {
        /// Send.
        IB_WC_SEND: ib_wc_type_t = 0;
        /// RDMA write.
        IB_WC_RDMA_WRITE: ib_wc_type_t = 1;
        /// RDMA read.
        IB_WC_RDMA_READ: ib_wc_type_t = 2;
        /// Compare and swap.
        IB_WC_COMPARE_SWAP: ib_wc_type_t = 3;
        /// Fetch and add.
        IB_WC_FETCH_ADD: ib_wc_type_t = 4;
        /// Memory window bind.
        IB_WC_MW_BIND: ib_wc_type_t = 5;
        /// No operation.
        IB_WC_NOP: ib_wc_type_t = 6;
        /// Unknown send-side operation.
        IB_WC_UNKNOWN1: ib_wc_type_t = 7;
        /// Receive.
        IB_WC_RECV: ib_wc_type_t = 1 << 7;
        /// Receive of an RDMA write with immediate.
        IB_WC_RECV_RDMA_WRITE: ib_wc_type_t = 129;
        /// Large send offload.
        IB_WC_LSO: ib_wc_type_t = 130;
        /// Local invalidate.
        IB_WC_LOCAL_INV: ib_wc_type_t = 131;
        /// Fast registration.
        IB_WC_FAST_REG_MR: ib_wc_type_t = 132;
        /// Unknown receive-side operation.
        IB_WC_UNKNOWN2: ib_wc_type_t = 133;
    }

    /// `ib_recv_opt_t` bit or mask.
    group {
        /// Immediate data is valid.
        IB_RECV_OPT_IMMEDIATE: ib_recv_opt_t = 0x0000_0001;
        /// Forward the packet.
        IB_RECV_OPT_FORWARD: ib_recv_opt_t = 0x0000_0002;
        /// A GRH precedes the data.
        IB_RECV_OPT_GRH_VALID: ib_recv_opt_t = 0x0000_0004;
        /// A key was invalidated.
        IB_RECV_OPT_INVALIDATE: ib_recv_opt_t = 0x0000_0008;
        /// Vendor-defined bits.
        IB_RECV_OPT_VEND_MASK: ib_recv_opt_t = 0xFFFF_0000;
        /// Checksum offload result bits.
        IB_RECV_OPT_CSUM_MASK: ib_recv_opt_t = 0x0000_FF00;
    }

    /// `ib_ca_mod_t` bit.
    group {
        /// Set `cap.cm`.
        IB_CA_MOD_IS_CM_SUPPORTED: ib_ca_mod_t = 0x0000_0001;
        /// Set `cap.snmp`.
        IB_CA_MOD_IS_SNMP_SUPPORTED: ib_ca_mod_t = 0x0000_0002;
        /// Set `cap.dev_mgmt`.
        IB_CA_MOD_IS_DEV_MGMT_SUPPORTED: ib_ca_mod_t = 0x0000_0004;
        /// Set `cap.vend`.
        IB_CA_MOD_IS_VEND_SUPPORTED: ib_ca_mod_t = 0x0000_0008;
        /// Set `cap.sm`.
        IB_CA_MOD_IS_SM: ib_ca_mod_t = 0x0000_0010;
        /// Set `cap.sm_disable`.
        IB_CA_MOD_IS_SM_DISABLED: ib_ca_mod_t = 0x0000_0020;
        /// Reset the Q_Key violation counter.
        IB_CA_MOD_QKEY_CTR: ib_ca_mod_t = 0x0000_0040;
        /// Reset the P_Key violation counter.
        IB_CA_MOD_PKEY_CTR: ib_ca_mod_t = 0x0000_0080;
        /// Set `cap.notice`.
        IB_CA_MOD_IS_NOTICE_SUPPORTED: ib_ca_mod_t = 0x0000_0100;
        /// Set `cap.trap`.
        IB_CA_MOD_IS_TRAP_SUPPORTED: ib_ca_mod_t = 0x0000_0200;
        /// Set `cap.apm`.
        IB_CA_MOD_IS_APM_SUPPORTED: ib_ca_mod_t = 0x0000_0400;
        /// Set `cap.slmap`.
        IB_CA_MOD_IS_SLMAP_SUPPORTED: ib_ca_mod_t = 0x0000_0800;
        /// Set `cap.pkey_nvram`.
        IB_CA_MOD_IS_PKEY_NVRAM_SUPPORTED: ib_ca_mod_t = 0x0000_1000;
        /// Set `cap.mkey_nvram`.
        IB_CA_MOD_IS_MKEY_NVRAM_SUPPORTED: ib_ca_mod_t = 0x0000_2000;
        /// Set `cap.sysguid`.
        IB_CA_MOD_IS_SYSGUID_SUPPORTED: ib_ca_mod_t = 0x0000_4000;
        /// Set `cap.dr_notice`.
        IB_CA_MOD_IS_DR_NOTICE_SUPPORTED: ib_ca_mod_t = 0x0000_8000;
        /// Set `cap.boot_mgmt`.
        IB_CA_MOD_IS_BOOT_MGMT_SUPPORTED: ib_ca_mod_t = 0x0001_0000;
        /// Set `cap.capm_notice`.
        IB_CA_MOD_IS_CAPM_NOTICE_SUPPORTED: ib_ca_mod_t = 0x0002_0000;
        /// Set `cap.reinit` (C spelling "SUPORTED" kept).
        IB_CA_MOD_IS_REINIT_SUPORTED: ib_ca_mod_t = 0x0004_0000;
        /// Set `cap.ledinfo`.
        IB_CA_MOD_IS_LEDINFO_SUPPORTED: ib_ca_mod_t = 0x0008_0000;
        /// Shut the port down.
        IB_CA_MOD_SHUTDOWN_PORT: ib_ca_mod_t = 0x0010_0000;
        /// Set `init_type`.
        IB_CA_MOD_INIT_TYPE_VALUE: ib_ca_mod_t = 0x0020_0000;
        /// Set `system_image_guid`.
        IB_CA_MOD_SYSTEM_IMAGE_GUID: ib_ca_mod_t = 0x0040_0000;
        /// Set `cap.client_reregister`.
        IB_CA_MOD_IS_CLIENT_REREGISTER_SUPPORTED: ib_ca_mod_t = 0x0080_0000;
        /// Reserved bits.
        IB_CA_MOD_RESERVED_MASK: ib_ca_mod_t = 0xFF00_0000;
    }

    /// `ib_mr_mod_t` bit.
    group {
        /// Change the address range.
        IB_MR_MOD_ADDR: ib_mr_mod_t = 0x0000_0001;
        /// Change the protection domain.
        IB_MR_MOD_PD: ib_mr_mod_t = 0x0000_0002;
        /// Change the access rights.
        IB_MR_MOD_ACCESS: ib_mr_mod_t = 0x0000_0004;
    }

    /// `ib_init_type_t` bit.
    group {
        /// Do not load.
        IB_INIT_TYPE_NO_LOAD: ib_init_type_t = 0x01;
        /// Preserve content.
        IB_INIT_TYPE_PRESERVE_CONTENT: ib_init_type_t = 0x02;
        /// Preserve presence.
        IB_INIT_TYPE_PRESERVE_PRESENCE: ib_init_type_t = 0x04;
        /// Do not resuscitate.
        IB_INIT_TYPE_DO_NOT_RESUSCITATE: ib_init_type_t = 0x08;
    }

    /// Largest private data of a CM message, in bytes.
    group {
        /// REQ.
        IB_REQ_PDATA_SIZE: usize = 92;
        /// MRA.
        IB_MRA_PDATA_SIZE: usize = 222;
        /// REJ.
        IB_REJ_PDATA_SIZE: usize = 148;
        /// REP.
        IB_REP_PDATA_SIZE: usize = 196;
        /// RTU.
        IB_RTU_PDATA_SIZE: usize = 224;
        /// LAP.
        IB_LAP_PDATA_SIZE: usize = 168;
        /// APR.
        IB_APR_PDATA_SIZE: usize = 148;
        /// DREQ.
        IB_DREQ_PDATA_SIZE: usize = 220;
        /// DREP.
        IB_DREP_PDATA_SIZE: usize = 224;
        /// SIDR REQ.
        IB_SIDR_REQ_PDATA_SIZE: usize = 216;
        /// SIDR REP.
        IB_SIDR_REP_PDATA_SIZE: usize = 136;
        /// Additional reject information (ARI).
        IB_ARI_SIZE: usize = 72;
        /// Additional APR information.
        IB_APR_INFO_SIZE: usize = 72;
    }

    /// `ib_rej_status_t` value, network order (as stored).
    group {
        /// No QP available.
        IB_REJ_INSUF_QP: ib_rej_status_t = 1u16.to_be();
        /// No EE context available.
        IB_REJ_INSUF_EEC: ib_rej_status_t = 2u16.to_be();
        /// Insufficient resources.
        IB_REJ_INSUF_RESOURCES: ib_rej_status_t = 3u16.to_be();
        /// Timeout.
        IB_REJ_TIMEOUT: ib_rej_status_t = 4u16.to_be();
        /// Request not supported.
        IB_REJ_UNSUPPORTED: ib_rej_status_t = 5u16.to_be();
        /// Invalid communication id.
        IB_REJ_INVALID_COMM_ID: ib_rej_status_t = 6u16.to_be();
        /// Invalid communication instance.
        IB_REJ_INVALID_COMM_INSTANCE: ib_rej_status_t = 7u16.to_be();
        /// Invalid service id.
        IB_REJ_INVALID_SID: ib_rej_status_t = 8u16.to_be();
        /// Invalid transport type.
        IB_REJ_INVALID_XPORT: ib_rej_status_t = 9u16.to_be();
        /// Stale connection.
        IB_REJ_STALE_CONN: ib_rej_status_t = 10u16.to_be();
        /// RD channel does not exist.
        IB_REJ_RDC_NOT_EXIST: ib_rej_status_t = 11u16.to_be();
        /// Invalid primary GID.
        IB_REJ_INVALID_GID: ib_rej_status_t = 12u16.to_be();
        /// Invalid primary LID.
        IB_REJ_INVALID_LID: ib_rej_status_t = 13u16.to_be();
        /// Invalid primary service level.
        IB_REJ_INVALID_SL: ib_rej_status_t = 14u16.to_be();
        /// Invalid primary traffic class.
        IB_REJ_INVALID_TRAFFIC_CLASS: ib_rej_status_t = 15u16.to_be();
        /// Invalid primary hop limit.
        IB_REJ_INVALID_HOP_LIMIT: ib_rej_status_t = 16u16.to_be();
        /// Invalid primary packet rate.
        IB_REJ_INVALID_PKT_RATE: ib_rej_status_t = 17u16.to_be();
        /// Invalid alternate GID.
        IB_REJ_INVALID_ALT_GID: ib_rej_status_t = 18u16.to_be();
        /// Invalid alternate LID.
        IB_REJ_INVALID_ALT_LID: ib_rej_status_t = 19u16.to_be();
        /// Invalid alternate service level.
        IB_REJ_INVALID_ALT_SL: ib_rej_status_t = 20u16.to_be();
        /// Invalid alternate traffic class.
        IB_REJ_INVALID_ALT_TRAFFIC_CLASS: ib_rej_status_t = 21u16.to_be();
        /// Invalid alternate hop limit.
        IB_REJ_INVALID_ALT_HOP_LIMIT: ib_rej_status_t = 22u16.to_be();
        /// Invalid alternate packet rate.
        IB_REJ_INVALID_ALT_PKT_RATE: ib_rej_status_t = 23u16.to_be();
        /// Port redirect.
        IB_REJ_PORT_REDIRECT: ib_rej_status_t = 24u16.to_be();
        /// Invalid MTU.
        IB_REJ_INVALID_MTU: ib_rej_status_t = 26u16.to_be();
        /// Insufficient responder resources.
        IB_REJ_INSUFFICIENT_RESP_RES: ib_rej_status_t = 27u16.to_be();
        /// Consumer-defined reason.
        IB_REJ_USER_DEFINED: ib_rej_status_t = 28u16.to_be();
        /// Invalid RNR retry count.
        IB_REJ_INVALID_RNR_RETRY: ib_rej_status_t = 29u16.to_be();
        /// Duplicate local communication id.
        IB_REJ_DUPLICATE_LOCAL_COMM_ID: ib_rej_status_t = 30u16.to_be();
        /// Invalid class version.
        IB_REJ_INVALID_CLASS_VER: ib_rej_status_t = 31u16.to_be();
        /// Invalid primary flow label.
        IB_REJ_INVALID_FLOW_LBL: ib_rej_status_t = 32u16.to_be();
        /// Invalid alternate flow label.
        IB_REJ_INVALID_ALT_FLOW_LBL: ib_rej_status_t = 33u16.to_be();
        /// Service handoff.
        IB_REJ_SERVICE_HANDOFF: ib_rej_status_t = 65535u16.to_be();
    }

    /// `ib_apr_status_t` value.
    group {
        /// Alternate path accepted.
        IB_AP_SUCCESS: ib_apr_status_t = 0;
        /// Invalid communication id.
        IB_AP_INVALID_COMM_ID: ib_apr_status_t = 1;
        /// Not supported.
        IB_AP_UNSUPPORTED: ib_apr_status_t = 2;
        /// Rejected.
        IB_AP_REJECT: ib_apr_status_t = 3;
        /// Redirect.
        IB_AP_REDIRECT: ib_apr_status_t = 4;
        /// The path is the current one.
        IB_AP_IS_CURRENT: ib_apr_status_t = 5;
        /// Invalid QP number.
        IB_AP_INVALID_QPN: ib_apr_status_t = 6;
        /// Invalid LID.
        IB_AP_INVALID_LID: ib_apr_status_t = 7;
        /// Invalid GID.
        IB_AP_INVALID_GID: ib_apr_status_t = 8;
        /// Invalid flow label.
        IB_AP_INVALID_FLOW_LBL: ib_apr_status_t = 9;
        /// Invalid traffic class.
        IB_AP_INVALID_TCLASS: ib_apr_status_t = 10;
        /// Invalid hop limit.
        IB_AP_INVALID_HOP_LIMIT: ib_apr_status_t = 11;
        /// Invalid packet rate.
        IB_AP_INVALID_PKT_RATE: ib_apr_status_t = 12;
        /// Invalid service level.
        IB_AP_INVALID_SL: ib_apr_status_t = 13;
    }

    /// `ib_sidr_status_t` value.
    group {
        /// QP information is valid.
        IB_SIDR_SUCCESS: ib_sidr_status_t = 0;
        /// Service id not supported.
        IB_SIDR_UNSUPPORTED: ib_sidr_status_t = 1;
        /// Rejected.
        IB_SIDR_REJECT: ib_sidr_status_t = 2;
        /// No QP available.
        IB_SIDR_NO_QP: ib_sidr_status_t = 3;
        /// Redirect.
        IB_SIDR_REDIRECT: ib_sidr_status_t = 4;
        /// Unsupported class version.
        IB_SIDR_UNSUPPORTED_VER: ib_sidr_status_t = 5;
    }

    /// `ib_cm_failover_t` value (`ib_al.h`).
    group {
        /// Failover accepted.
        IB_FAILOVER_ACCEPT_SUCCESS: ib_cm_failover_t = 0;
        /// Failover not supported.
        IB_FAILOVER_ACCEPT_UNSUPPORTED: ib_cm_failover_t = 1;
        /// Failover rejected.
        IB_FAILOVER_ACCEPT_ERROR: ib_cm_failover_t = 2;
    }
}
