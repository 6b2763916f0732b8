//! WinVerbs' query answers → rdma-core's attribute structs.

use wv_abi::{WV_IO_DEVICE_ATTRIBUTES, WV_IO_PORT_ATTRIBUTES};

use crate::abi::*;

/// `ibv_mtu` of a byte count (0 for a count that is no IB MTU); `ibv_mtu` numbers the MTUs as
/// the IB enumeration does.
pub fn mtu_enum(bytes: u32) -> u32 {
    wv_hal::Mtu::from_bytes(bytes).map_or(0, |m| m as u32)
}

/// The byte count of an `ibv_mtu`.
pub fn mtu_bytes(mtu: u32) -> Option<u32> {
    match mtu {
        1..=5 => Some(128 << mtu),
        _ => None,
    }
}

/// DEVICE_QUERY's answer as `ibv_device_attr`.
pub fn device_attr(a: &WV_IO_DEVICE_ATTRIBUTES) -> ibv_device_attr {
    let fw = a.FwVersion;
    let mut fw_ver = [0u8; 64];
    let s = format!("{}.{}.{}", fw >> 32, (fw >> 16) & 0xffff, fw & 0xffff);
    fw_ver[..s.len().min(63)].copy_from_slice(&s.as_bytes()[..s.len().min(63)]);
    let i = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    ibv_device_attr {
        fw_ver,
        // Both GUIDs are network order in both ABIs.
        node_guid: a.NodeGuid,
        sys_image_guid: a.SystemImageGuid,
        max_mr_size: a.MaxMrSize,
        page_size_cap: u64::from(a.PageSizeCapabilityFlags),
        vendor_id: a.VendorId,
        vendor_part_id: a.VendorPartId,
        hw_ver: a.HwVersion,
        max_qp: i(a.MaxQp),
        max_qp_wr: i(a.MaxQpWr),
        device_cap_flags: a.CapabilityFlags,
        max_sge: i(a.MaxSge),
        max_sge_rd: i(a.MaxSge),
        max_cq: i(a.MaxCq),
        max_cqe: i(a.MaxCqEntries),
        max_mr: i(a.MaxMr),
        max_pd: i(a.MaxPd),
        max_qp_rd_atom: i(a.MaxQpResponderResources),
        max_ee_rd_atom: 0,
        max_res_rd_atom: i(a.MaxResponderResources),
        max_qp_init_rd_atom: i(a.MaxQpInitiatorDepth),
        max_ee_init_rd_atom: 0,
        atomic_cap: a.AtomicCapability,
        max_ee: 0,
        max_rdd: 0,
        max_mw: i(a.MaxMw),
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        max_mcast_grp: i(a.MaxMulticast),
        max_mcast_qp_attach: i(a.MaxQpAttach),
        max_total_mcast_qp_attach: i(a.MaxMulticastQp),
        max_ah: i(a.MaxAh),
        max_fmr: i(a.MaxFmr),
        max_map_per_fmr: i(a.MaxMapPerFmr),
        max_srq: i(a.MaxSrq),
        max_srq_wr: i(a.MaxSrqWr),
        max_srq_sge: i(a.MaxSrqSge),
        max_pkeys: u16::try_from(a.MaxPkeys).unwrap_or(u16::MAX),
        local_ca_ack_delay: a.LocalAckDelay,
        phys_port_cnt: a.PhysPortCount,
    }
}

/// The port's link layer (`IBV_LINK_LAYER_*`) from WinVerbs' transport byte.
pub fn link_layer(p: &WV_IO_PORT_ATTRIBUTES) -> u8 {
    if p.Transport == 2 {
        IBV_LINK_LAYER_ETHERNET
    } else {
        IBV_LINK_LAYER_INFINIBAND
    }
}

/// DEVICE_PORT_QUERY's answer as `ibv_port_attr`.
pub fn port_attr(p: &WV_IO_PORT_ATTRIBUTES) -> ibv_port_attr {
    ibv_port_attr {
        state: p.State,
        max_mtu: mtu_enum(p.MaxMtu),
        active_mtu: mtu_enum(p.ActiveMtu),
        gid_tbl_len: i32::try_from(p.GidTableLength).unwrap_or(i32::MAX),
        port_cap_flags: p.PortCabilityFlags,
        max_msg_sz: p.MaxMessageSize,
        bad_pkey_cntr: p.BadPkeyCounter,
        qkey_viol_cntr: p.QkeyViolationCounter,
        pkey_tbl_len: p.PkeyTableLength,
        lid: u16::from_be(p.Lid),
        sm_lid: u16::from_be(p.SmLid),
        lmc: p.Lmc,
        max_vl_num: p.MaxVls,
        sm_sl: p.SmSl,
        subnet_timeout: p.SubnetTimeout,
        init_type_reply: p.InitTypeReply,
        active_width: p.ActiveWidth,
        active_speed: p.ActiveSpeed,
        phys_state: p.PhysicalState,
        link_layer: link_layer(p),
        flags: 0,
        port_cap_flags2: 0,
    }
}
