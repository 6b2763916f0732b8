//! Value conversions between `wv-hal`'s verbs types and the C structures of `ci_interface_t`,
//! both ways: [`crate::import`] turns Rust calls into C ones, [`crate::export`] C calls into
//! Rust ones. Where OFW's WinVerbs converts something itself (`WvVerbsConvertAv`,
//! `WvSetDeviceCap`, `WvConvertPortCap`, `WvQpStateConvertVerbs`), the import direction does
//! it the same way; the export direction is its inverse.
//!
//! Byte order: `wv-hal` values are host order except GIDs, rkeys, pkeys and GUIDs "as stored";
//! the C structures hold `ib_net*_t` fields in network order.

use wv_abi::consts::*;
use wv_hal::{
    AddressVector, CaAttributes, CaEvent, CaEventKind, Gid, Mtu, PortAttributes, PortState,
    QpAttributes, QpEvent, QpInit, QpModify, QpModifyOptions, QpPath, QpRtr, QpRts, QpState,
    QpType, SrqAttributes, SrqEvent, VerbsError,
};

use crate::base::boolean_t;
use crate::ib_types::*;

fn flag(set: boolean_t, bit: u32) -> u32 {
    if set != 0 { bit } else { 0 }
}

fn boolean(flags: u32, bit: u32) -> boolean_t {
    boolean_t::from(flags & bit != 0)
}

/// `ib_qp_state_t` (a bit per state) of a state.
pub fn qp_state_to_ib(state: QpState) -> ib_qp_state_t {
    match state {
        QpState::Reset => IB_QPS_RESET,
        QpState::Init => IB_QPS_INIT,
        QpState::Rtr => IB_QPS_RTR,
        QpState::Rts => IB_QPS_RTS,
        QpState::Sqd => IB_QPS_SQD,
        QpState::SqError => IB_QPS_SQERR,
        QpState::Error => IB_QPS_ERROR,
    }
}

/// The state an `ib_qp_state_t` names. OFW's `WvQpStateConvertVerbs` maps anything it does not
/// know to ERROR; so does this, except that the SQD sub-states (draining, drained) are SQD.
pub fn qp_state_from_ib(state: ib_qp_state_t) -> QpState {
    match state {
        IB_QPS_RESET => QpState::Reset,
        IB_QPS_INIT => QpState::Init,
        IB_QPS_RTR => QpState::Rtr,
        IB_QPS_RTS => QpState::Rts,
        IB_QPS_SQD | IB_QPS_SQD_DRAINING | IB_QPS_SQD_DRAINED => QpState::Sqd,
        IB_QPS_SQERR => QpState::SqError,
        _ => QpState::Error,
    }
}

/// The QP type an `ib_qp_type_t` names, if WinVerbs has it.
pub fn qp_type_from_ib(qp_type: ib_qp_type_t) -> Option<QpType> {
    match qp_type {
        IB_QPT_RELIABLE_CONN => Some(QpType::Rc),
        IB_QPT_UNRELIABLE_CONN => Some(QpType::Uc),
        IB_QPT_UNRELIABLE_DGRM => Some(QpType::Ud),
        _ => None,
    }
}

/// `ib_qp_type_t` of a QP type.
pub fn qp_type_to_ib(qp_type: QpType) -> ib_qp_type_t {
    match qp_type {
        QpType::Rc => IB_QPT_RELIABLE_CONN,
        QpType::Uc => IB_QPT_UNRELIABLE_CONN,
        QpType::Ud => IB_QPT_UNRELIABLE_DGRM,
    }
}

fn mtu_to_ib(mtu: Option<Mtu>) -> u8 {
    mtu.map_or(0, |m| m as u8)
}

/// `ib_av_attr_t` of a path, as `WvVerbsConvertAv` fills it: the GRH only for a global route,
/// its first word built from the flow label and traffic class (version bits left 0).
pub fn path_to_ib(path: &QpPath) -> ib_av_attr_t {
    let av = &path.av;
    let mut out = ib_av_attr_t::zeroed();
    out.port_num = av.port;
    out.sl = av.service_level;
    out.dlid = av.dlid.to_be();
    out.grh_valid = boolean_t::from(av.grh_valid);
    if av.grh_valid {
        let ver_class_flow = (av.flow_label & 0x000F_FFFF) | (u32::from(av.traffic_class) << 20);
        out.grh.ver_class_flow = ver_class_flow.to_be();
        out.grh.hop_limit = av.hop_limit;
        out.grh.src_gid = ib_gid_t { raw: av.sgid };
        out.grh.dest_gid = ib_gid_t { raw: av.dgid };
    }
    out.static_rate = av.static_rate;
    out.path_bits = av.path_bits;
    out.conn = _av_conn {
        path_mtu: mtu_to_ib(path.path_mtu),
        local_ack_timeout: path.local_ack_timeout,
        seq_err_retry_cnt: path.seq_err_retry_cnt,
        rnr_retry_cnt: path.rnr_retry_cnt,
    };
    out
}

/// `ib_av_attr_t` of an address vector with no connection parameters (`create_av`).
pub fn av_to_ib(av: &AddressVector) -> ib_av_attr_t {
    path_to_ib(&QpPath {
        av: *av,
        ..QpPath::default()
    })
}

fn gid_of(gid: ib_gid_t) -> Gid {
    // SAFETY: every view of the packed union is 16 plain bytes; `raw` is valid whatever view
    // the writer used.
    unsafe { gid.raw }
}

/// The path an `ib_av_attr_t` describes (`WvAvConvertVerbs` plus the `conn` part).
pub fn path_from_ib(av: &ib_av_attr_t) -> QpPath {
    let grh_valid = av.grh_valid != 0;
    let mut out = AddressVector {
        grh_valid,
        dlid: u16::from_be(av.dlid),
        service_level: av.sl,
        path_bits: av.path_bits,
        static_rate: av.static_rate,
        port: av.port_num,
        ..AddressVector::default()
    };
    if grh_valid {
        let grh = av.grh;
        let word = u32::from_be(grh.ver_class_flow);
        out.flow_label = word & 0x000F_FFFF;
        out.traffic_class = (word >> 20) as u8;
        out.hop_limit = grh.hop_limit;
        out.sgid = gid_of(grh.src_gid);
        out.dgid = gid_of(grh.dest_gid);
    }
    QpPath {
        av: out,
        path_mtu: Mtu::from_ib(av.conn.path_mtu),
        local_ack_timeout: av.conn.local_ack_timeout,
        seq_err_retry_cnt: av.conn.seq_err_retry_cnt,
        rnr_retry_cnt: av.conn.rnr_retry_cnt,
    }
}

/// `ib_qp_mod_t` of a modification: exactly what OFW's `WvVerbsConvertAttr` fills for the
/// target state, nothing else (the rest stays zero).
pub fn qp_mod_to_ib(m: &QpModify) -> ib_qp_mod_t {
    let mut out = ib_qp_mod_t::zeroed();
    out.req_state = qp_state_to_ib(m.target());
    match m {
        QpModify::Reset | QpModify::SqError | QpModify::Error => {}
        QpModify::Init(init) => {
            out.state.init = _qp_init {
                primary_port: init.port,
                qkey: init.qkey.to_be(),
                pkey_index: init.pkey_index,
                access_ctrl: init.access,
            };
        }
        QpModify::Rtr(rtr) => {
            let mut r = _qp_rtr::zeroed();
            r.rq_psn = rtr.rq_psn.to_be();
            r.dest_qp = rtr.dest_qpn.to_be();
            r.primary_av = path_to_ib(&rtr.primary);
            r.resp_res = rtr.responder_resources;
            r.rnr_nak_timeout = rtr.rnr_nak_timeout;
            r.opts = rtr.opts.0;
            r.alternate_av = path_to_ib(&rtr.alternate);
            r.qkey = rtr.qkey.to_be();
            r.pkey_index = rtr.pkey_index;
            r.access_ctrl = rtr.access;
            r.sq_depth = rtr.sq_depth;
            r.rq_depth = rtr.rq_depth;
            out.state.rtr = r;
        }
        QpModify::Rts(rts) => {
            let mut r = _qp_rts::zeroed();
            r.sq_psn = rts.sq_psn.to_be();
            r.retry_cnt = rts.retry_cnt;
            r.rnr_retry_cnt = rts.rnr_retry_cnt;
            r.local_ack_timeout = rts.local_ack_timeout;
            r.init_depth = rts.initiator_depth;
            r.opts = rts.opts.0;
            r.rnr_nak_timeout = rts.rnr_nak_timeout;
            r.current_state = qp_state_to_ib(rts.current_state);
            r.qkey = rts.qkey.to_be();
            r.access_ctrl = rts.access;
            r.resp_res = rts.responder_resources;
            r.primary_av = path_to_ib(&rts.primary);
            r.alternate_av = path_to_ib(&rts.alternate);
            r.sq_depth = rts.sq_depth;
            r.rq_depth = rts.rq_depth;
            r.apm_state = u32::from(rts.apm_state);
            r.primary_port = rts.port;
            r.pkey_index = rts.pkey_index;
            out.state.rts = r;
        }
        QpModify::Sqd { notify } => {
            out.state.sqd = _qp_sqd {
                sqd_event: boolean_t::from(*notify),
            };
        }
    }
    out
}

/// The modification an `ib_qp_mod_t` requests.
///
/// # Errors
/// `InvalidParameter` for a `req_state` that names no state a QP can be moved to.
pub fn qp_mod_from_ib(m: &ib_qp_mod_t) -> Result<QpModify, VerbsError> {
    Ok(match m.req_state {
        IB_QPS_RESET => QpModify::Reset,
        IB_QPS_INIT => {
            // SAFETY: the union member that `req_state` selects; every member is plain integers
            // (any bit pattern is valid), so reading it cannot be undefined even if the caller
            // filled another.
            let init = unsafe { m.state.init };
            QpModify::Init(QpInit {
                port: init.primary_port,
                qkey: u32::from_be(init.qkey),
                pkey_index: init.pkey_index,
                access: init.access_ctrl,
            })
        }
        IB_QPS_RTR => {
            // SAFETY: as above, the member `req_state` selects, plain integers only.
            let rtr = unsafe { m.state.rtr };
            QpModify::Rtr(QpRtr {
                rq_psn: u32::from_be(rtr.rq_psn),
                dest_qpn: u32::from_be(rtr.dest_qp),
                primary: path_from_ib(&rtr.primary_av),
                responder_resources: rtr.resp_res,
                rnr_nak_timeout: rtr.rnr_nak_timeout,
                opts: QpModifyOptions(rtr.opts),
                alternate: path_from_ib(&rtr.alternate_av),
                qkey: u32::from_be(rtr.qkey),
                pkey_index: rtr.pkey_index,
                access: rtr.access_ctrl,
                sq_depth: rtr.sq_depth,
                rq_depth: rtr.rq_depth,
            })
        }
        IB_QPS_RTS => {
            // SAFETY: as above, the member `req_state` selects, plain integers only.
            let rts = unsafe { m.state.rts };
            QpModify::Rts(QpRts {
                sq_psn: u32::from_be(rts.sq_psn),
                retry_cnt: rts.retry_cnt,
                rnr_retry_cnt: rts.rnr_retry_cnt,
                local_ack_timeout: rts.local_ack_timeout,
                initiator_depth: rts.init_depth,
                opts: QpModifyOptions(rts.opts),
                rnr_nak_timeout: rts.rnr_nak_timeout,
                current_state: qp_state_from_ib(rts.current_state),
                qkey: u32::from_be(rts.qkey),
                access: rts.access_ctrl,
                responder_resources: rts.resp_res,
                primary: path_from_ib(&rts.primary_av),
                alternate: path_from_ib(&rts.alternate_av),
                sq_depth: rts.sq_depth,
                rq_depth: rts.rq_depth,
                apm_state: rts.apm_state as u8,
                port: rts.primary_port,
                pkey_index: rts.pkey_index,
            })
        }
        IB_QPS_SQD | IB_QPS_SQD_DRAINING | IB_QPS_SQD_DRAINED => {
            // SAFETY: as above, the member `req_state` selects, plain integers only.
            let sqd = unsafe { m.state.sqd };
            QpModify::Sqd {
                notify: sqd.sqd_event != 0,
            }
        }
        IB_QPS_SQERR => QpModify::SqError,
        IB_QPS_ERROR => QpModify::Error,
        _ => return Err(VerbsError::InvalidParameter),
    })
}

/// The attributes `query_qp` reports, from `ib_qp_attr_t`. The connection parameters live in
/// the paths' `conn` parts; `ib_qp_attr_t` has no RNR NAK timer (OFW reports 0 for it anyway).
///
/// # Errors
/// `Other` for a QP type WinVerbs does not know.
pub fn qp_attr_from_ib(a: &ib_qp_attr_t) -> Result<QpAttributes, VerbsError> {
    let qp_type = qp_type_from_ib(a.qp_type).ok_or(VerbsError::Other)?;
    let primary = path_from_ib(&a.primary_av);
    let alternate = path_from_ib(&a.alternate_av);
    Ok(QpAttributes {
        qp_type,
        state: qp_state_from_ib(a.state),
        sq_depth: a.sq_depth,
        rq_depth: a.rq_depth,
        sq_sge: a.sq_sge,
        rq_sge: a.rq_sge,
        sq_max_inline: a.sq_max_inline,
        initiator_depth: u32::from(a.init_depth),
        responder_resources: u32::from(a.resp_res),
        apm_state: a.apm_state as u8,
        qpn: u32::from_be(a.num),
        dest_qpn: u32::from_be(a.dest_num),
        qkey: u32::from_be(a.qkey),
        sq_psn: u32::from_be(a.sq_psn),
        rq_psn: u32::from_be(a.rq_psn),
        primary_av: primary.av,
        alternate_av: alternate.av,
        path_mtu: primary.path_mtu.unwrap_or(Mtu::Mtu256),
        alternate_path_mtu: alternate.path_mtu.unwrap_or(Mtu::Mtu256),
        pkey_index: a.pkey_index,
        alternate_pkey_index: a.pkey_index,
        local_ack_timeout: primary.local_ack_timeout,
        alternate_local_ack_timeout: alternate.local_ack_timeout,
        rnr_nak_timeout: 0,
        retry_count: primary.seq_err_retry_cnt,
        rnr_retry_count: primary.rnr_retry_cnt,
        access_flags: a.access_ctrl,
        sq_signaled: a.sq_signaled != 0,
    })
}

/// `ib_qp_attr_t` of a QP's attributes (the handles are the caller's business).
pub fn qp_attr_to_ib(a: &QpAttributes) -> ib_qp_attr_t {
    let mut out = ib_qp_attr_t::zeroed();
    out.qp_type = qp_type_to_ib(a.qp_type);
    out.access_ctrl = a.access_flags;
    out.pkey_index = a.pkey_index;
    out.sq_max_inline = a.sq_max_inline;
    out.sq_depth = a.sq_depth;
    out.rq_depth = a.rq_depth;
    out.sq_sge = a.sq_sge;
    out.rq_sge = a.rq_sge;
    out.init_depth = a.initiator_depth.min(255) as u8;
    out.resp_res = a.responder_resources.min(255) as u8;
    out.sq_signaled = boolean_t::from(a.sq_signaled);
    out.state = qp_state_to_ib(a.state);
    out.num = a.qpn.to_be();
    out.dest_num = a.dest_qpn.to_be();
    out.qkey = a.qkey.to_be();
    out.sq_psn = a.sq_psn.to_be();
    out.rq_psn = a.rq_psn.to_be();
    out.primary_port = a.primary_av.port;
    out.alternate_port = a.alternate_av.port;
    out.primary_av = path_to_ib(&QpPath {
        av: a.primary_av,
        path_mtu: Some(a.path_mtu),
        local_ack_timeout: a.local_ack_timeout,
        seq_err_retry_cnt: a.retry_count,
        rnr_retry_cnt: a.rnr_retry_count,
    });
    out.alternate_av = path_to_ib(&QpPath {
        av: a.alternate_av,
        path_mtu: Some(a.alternate_path_mtu),
        local_ack_timeout: a.alternate_local_ack_timeout,
        seq_err_retry_cnt: 0,
        rnr_retry_cnt: 0,
    });
    out.apm_state = u32::from(a.apm_state);
    out
}

/// `ib_srq_attr_t` of SRQ attributes.
pub fn srq_attr_to_ib(a: &SrqAttributes) -> ib_srq_attr_t {
    ib_srq_attr_t {
        max_wr: a.max_wr,
        max_sge: a.max_sge,
        srq_limit: a.srq_limit,
    }
}

/// SRQ attributes of an `ib_srq_attr_t`.
pub fn srq_attr_from_ib(a: &ib_srq_attr_t) -> SrqAttributes {
    SrqAttributes {
        max_wr: a.max_wr,
        max_sge: a.max_sge,
        srq_limit: a.srq_limit,
    }
}

/// The device attributes of an `ib_ca_attr_t` (OFW `WvConvertDevAttr`, `WvSetDeviceCap`,
/// `WvSetDevicePages`). `page_sizes` is the table `p_page_size` points at; `ib_ca_attr_t` has
/// no largest inline send, so `max_inline_send` is 0.
pub fn ca_attr_from_ib(a: &ib_ca_attr_t, page_sizes: &[u32]) -> CaAttributes {
    let caps = flag(a.bad_pkey_ctr_support, WV_IO_BAD_PKEY_COUNTER)
        | flag(a.bad_qkey_ctr_support, WV_IO_BAD_QKEY_COUNTER)
        | flag(a.apm_support, WV_IO_PATH_MIGRATION)
        | flag(a.av_port_check, WV_IO_AH_PORT_CHECKING)
        | flag(a.change_primary_port, WV_IO_CHANGE_PHYSICAL_PORT)
        | flag(a.modify_wr_depth, WV_IO_RESIZE_MAX_WR)
        | flag(a.modify_srq_depth, WV_IO_SRQ_RESIZE)
        | flag(a.current_qp_state_support, WV_IO_QP_STATE_MODIFIER)
        | flag(a.shutdown_port_capability, WV_IO_SHUTDOWN_PORT)
        | flag(a.init_type_support, WV_IO_INIT_TYPE)
        | flag(a.port_active_event_support, WV_IO_PORT_ACTIVE_EVENT)
        | flag(a.system_image_guid_support, WV_IO_SYSTEM_IMAGE_GUID);
    let pages = page_sizes
        .iter()
        .filter(|s| s.is_power_of_two())
        .fold(0, |acc, s| acc | s);
    CaAttributes {
        fw_version: a.fw_ver,
        node_guid: a.ca_guid,
        system_image_guid: a.system_image_guid,
        vendor_id: a.vend_id,
        vendor_part_id: u32::from(a.dev_id),
        hw_version: u32::from(a.revision),
        capability_flags: caps,
        atomic_capability: a.atomicity,
        page_size_capability: pages,
        max_mr_size: a.init_region_size,
        max_qp: a.max_qps,
        max_qp_wr: a.max_wrs,
        max_sge: a.max_sges,
        max_cq: a.max_cqs,
        max_cqe: a.max_cqes,
        max_mr: a.init_regions,
        max_pd: a.max_pds,
        max_qp_responder_resources: u32::from(a.max_qp_resp_res),
        max_responder_resources: u32::from(a.max_resp_res),
        max_qp_initiator_depth: u32::from(a.max_qp_init_depth),
        max_inline_send: 0,
        max_mw: a.init_windows,
        max_multicast: a.max_mcast_grps,
        max_qp_attach: a.max_qps_per_mcast_grp,
        max_multicast_qp: a.max_mcast_qps,
        max_ah: a.max_addr_handles.min(u64::from(u32::MAX)) as u32,
        max_fmr: a.max_fmr,
        max_map_per_fmr: a.max_map_per_fmr,
        max_srq: a.max_srq,
        max_srq_wr: a.max_srq_wrs,
        max_srq_sge: a.max_srq_sges,
        max_pkeys: a.max_partitions,
        local_ack_delay: a.local_ack_delay,
        port_count: a.num_ports,
    }
}

/// `ib_ca_attr_t` of device attributes (the table pointers, `size` and `num_page_sizes` are the
/// caller's business).
pub fn ca_attr_to_ib(a: &CaAttributes) -> ib_ca_attr_t {
    let caps = a.capability_flags;
    let mut out = ib_ca_attr_t::zeroed();
    out.ca_guid = a.node_guid;
    out.vend_id = a.vendor_id;
    out.dev_id = a.vendor_part_id as u16;
    out.revision = a.hw_version as u16;
    out.fw_ver = a.fw_version;
    out.max_qps = a.max_qp;
    out.max_wrs = a.max_qp_wr;
    out.max_sges = a.max_sge;
    out.max_rd_sges = a.max_sge;
    out.max_cqs = a.max_cq;
    out.max_cqes = a.max_cqe;
    out.max_pds = a.max_pd;
    out.init_regions = a.max_mr;
    out.init_region_size = a.max_mr_size;
    out.init_windows = a.max_mw;
    out.max_addr_handles = u64::from(a.max_ah);
    out.max_partitions = a.max_pkeys;
    out.atomicity = a.atomic_capability;
    out.max_qp_resp_res = a.max_qp_responder_resources.min(255) as u8;
    out.max_resp_res = a.max_responder_resources.min(255) as u8;
    out.max_qp_init_depth = a.max_qp_initiator_depth.min(255) as u8;
    out.max_mcast_grps = a.max_multicast;
    out.max_mcast_qps = a.max_multicast_qp;
    out.max_qps_per_mcast_grp = a.max_qp_attach;
    out.max_fmr = a.max_fmr;
    out.max_map_per_fmr = a.max_map_per_fmr;
    out.max_srq = a.max_srq;
    out.max_srq_wrs = a.max_srq_wr;
    out.max_srq_sges = a.max_srq_sge;
    out.local_ack_delay = a.local_ack_delay;
    out.bad_pkey_ctr_support = boolean(caps, WV_IO_BAD_PKEY_COUNTER);
    out.bad_qkey_ctr_support = boolean(caps, WV_IO_BAD_QKEY_COUNTER);
    out.apm_support = boolean(caps, WV_IO_PATH_MIGRATION);
    out.av_port_check = boolean(caps, WV_IO_AH_PORT_CHECKING);
    out.change_primary_port = boolean(caps, WV_IO_CHANGE_PHYSICAL_PORT);
    out.modify_wr_depth = boolean(caps, WV_IO_RESIZE_MAX_WR);
    out.modify_srq_depth = boolean(caps, WV_IO_SRQ_RESIZE);
    out.current_qp_state_support = boolean(caps, WV_IO_QP_STATE_MODIFIER);
    out.shutdown_port_capability = boolean(caps, WV_IO_SHUTDOWN_PORT);
    out.init_type_support = boolean(caps, WV_IO_INIT_TYPE);
    out.port_active_event_support = boolean(caps, WV_IO_PORT_ACTIVE_EVENT);
    out.system_image_guid_support = boolean(caps, WV_IO_SYSTEM_IMAGE_GUID);
    out.system_image_guid = a.system_image_guid;
    out.num_ports = a.port_count;
    out
}

/// The page sizes of a capability mask (bit n = 2^n bytes), as `p_page_size` lists them.
pub fn page_sizes(mask: u32) -> impl Iterator<Item = u32> {
    (0..32)
        .map(|bit| 1u32 << bit)
        .filter(move |b| mask & b != 0)
}

fn port_state_from_ib(state: u8) -> PortState {
    match state {
        1 => PortState::Down,
        2 => PortState::Init,
        3 => PortState::Armed,
        4 => PortState::Active,
        _ => PortState::Nop,
    }
}

/// The port attributes of an `ib_port_attr_t` (OFW `WvConvertPortAttr`, `WvConvertPortCap`).
pub fn port_attr_from_ib(p: &ib_port_attr_t) -> PortAttributes {
    let cap = &p.cap;
    let caps = flag(cap.qkey_ctr, WV_IO_BAD_QKEY_COUNTER)
        | flag(cap.pkey_ctr, WV_IO_BAD_PKEY_COUNTER)
        | flag(cap.apm, WV_IO_PATH_MIGRATION)
        | flag(cap.sysguid, WV_IO_SYSTEM_IMAGE_GUID)
        | flag(cap.port_active, WV_IO_PORT_ACTIVE_EVENT);
    PortAttributes {
        capability_flags: caps,
        state: port_state_from_ib(p.link_state),
        mtu: Mtu::from_ib(p.mtu).unwrap_or(Mtu::Mtu256),
        gid_table_len: u32::from(p.num_gids),
        max_message_size: p.max_msg_size.min(u64::from(u32::MAX)) as u32,
        bad_pkey_counter: u32::from(p.pkey_ctr),
        qkey_violation_counter: u32::from(p.qkey_ctr),
        pkey_table_len: p.num_pkeys,
        lid: u16::from_be(p.lid),
        sm_lid: u16::from_be(p.sm_lid),
        lmc: p.lmc,
        max_vls: p.max_vls.min(255) as u8,
        sm_sl: p.sm_sl,
        subnet_timeout: p.subnet_timeout,
        init_type_reply: p.init_type_reply,
        active_width: p.active_width,
        active_speed: p.active_speed,
        physical_state: p.phys_state,
        transport: p.transport as u8,
        ext_active_speed: p.ext_active_speed,
        link_encoding: p.link_encoding,
    }
}

/// `ib_port_attr_t` of port attributes (the tables are the caller's business).
pub fn port_attr_to_ib(port: u8, p: &PortAttributes) -> ib_port_attr_t {
    let caps = p.capability_flags;
    let mut out = ib_port_attr_t::zeroed();
    out.port_num = port;
    out.mtu = p.mtu as u8;
    out.transport = rdma_transport_type::from(p.transport);
    out.max_msg_size = u64::from(p.max_message_size);
    out.lid = p.lid.to_be();
    out.lmc = p.lmc;
    out.active_width = p.active_width;
    out.max_vls = u16::from(p.max_vls);
    out.sm_lid = p.sm_lid.to_be();
    out.sm_sl = p.sm_sl;
    out.link_state = p.state as u8;
    out.init_type_reply = p.init_type_reply;
    out.subnet_timeout = p.subnet_timeout;
    out.active_speed = p.active_speed;
    out.phys_state = p.physical_state;
    out.ext_active_speed = p.ext_active_speed;
    out.link_encoding = p.link_encoding;
    out.cap.qkey_ctr = boolean(caps, WV_IO_BAD_QKEY_COUNTER);
    out.cap.pkey_ctr = boolean(caps, WV_IO_BAD_PKEY_COUNTER);
    out.cap.apm = boolean(caps, WV_IO_PATH_MIGRATION);
    out.cap.sysguid = boolean(caps, WV_IO_SYSTEM_IMAGE_GUID);
    out.cap.port_active = boolean(caps, WV_IO_PORT_ACTIVE_EVENT);
    out.pkey_ctr = p.bad_pkey_counter.min(0xFFFF) as u16;
    out.qkey_ctr = p.qkey_violation_counter.min(0xFFFF) as u16;
    out.num_gids = p.gid_table_len.min(0xFFFF) as u16;
    out.num_pkeys = p.pkey_table_len;
    out
}

/// A device event of an `ib_event_rec_t` (the kinds `WvDeviceConvertEvent` knows; the rest is
/// `Other`).
pub fn ca_event_from_ib(kind: ib_async_event_t, port: u8) -> CaEvent {
    let kind = match kind {
        IB_AE_LOCAL_FATAL => CaEventKind::LocalFatal,
        IB_AE_PORT_ACTIVE => CaEventKind::PortActive,
        IB_AE_PORT_DOWN => CaEventKind::PortDown,
        IB_AE_GID_CHANGE => CaEventKind::GidChange,
        IB_AE_LID_CHANGE => CaEventKind::LidChange,
        IB_AE_PKEY_CHANGE => CaEventKind::PkeyChange,
        IB_AE_CLIENT_REREGISTER => CaEventKind::ClientReregister,
        IB_AE_SM_CHANGE => CaEventKind::SmChange,
        _ => CaEventKind::Other,
    };
    CaEvent { kind, port }
}

/// The `IB_AE_*` code of a device event.
pub fn ca_event_to_ib(kind: CaEventKind) -> ib_async_event_t {
    match kind {
        CaEventKind::LocalFatal => IB_AE_LOCAL_FATAL,
        CaEventKind::PortActive => IB_AE_PORT_ACTIVE,
        CaEventKind::PortDown => IB_AE_PORT_DOWN,
        CaEventKind::GidChange => IB_AE_GID_CHANGE,
        CaEventKind::LidChange => IB_AE_LID_CHANGE,
        CaEventKind::PkeyChange => IB_AE_PKEY_CHANGE,
        CaEventKind::ClientReregister => IB_AE_CLIENT_REREGISTER,
        CaEventKind::SmChange => IB_AE_SM_CHANGE,
        CaEventKind::Other => IB_AE_UNKNOWN,
    }
}

/// An SRQ event of an `IB_AE_*` code (OFW's `WvSrqEventHandler`: anything but the limit and
/// last-WQE events is an error).
pub fn srq_event_from_ib(kind: ib_async_event_t) -> SrqEvent {
    match kind {
        IB_AE_SRQ_LIMIT_REACHED => SrqEvent::LimitReached,
        IB_AE_SRQ_QP_LAST_WQE_REACHED => SrqEvent::LastWqeReached,
        _ => SrqEvent::Error,
    }
}

/// The `IB_AE_*` code of an SRQ event.
pub fn srq_event_to_ib(event: SrqEvent) -> ib_async_event_t {
    match event {
        SrqEvent::LimitReached => IB_AE_SRQ_LIMIT_REACHED,
        SrqEvent::LastWqeReached => IB_AE_SRQ_QP_LAST_WQE_REACHED,
        SrqEvent::Error => IB_AE_SRQ_CATAS_ERROR,
    }
}

/// A QP event of an `IB_AE_*` code, if it is one.
pub fn qp_event_from_ib(kind: ib_async_event_t) -> Option<QpEvent> {
    Some(match kind {
        IB_AE_QP_COMM => QpEvent::CommEstablished,
        IB_AE_SQ_DRAINED => QpEvent::SqDrained,
        IB_AE_QP_APM => QpEvent::PathMigrated,
        IB_AE_SRQ_QP_LAST_WQE_REACHED => QpEvent::LastWqeReached,
        IB_AE_SQ_ERROR
        | IB_AE_RQ_ERROR
        | IB_AE_QP_FATAL
        | IB_AE_WQ_REQ_ERROR
        | IB_AE_WQ_ACCESS_ERROR
        | IB_AE_QP_APM_ERROR => QpEvent::Fatal,
        _ => return None,
    })
}

/// The `IB_AE_*` code of a QP event.
pub fn qp_event_to_ib(event: QpEvent) -> ib_async_event_t {
    match event {
        QpEvent::CommEstablished => IB_AE_QP_COMM,
        QpEvent::SqDrained => IB_AE_SQ_DRAINED,
        QpEvent::Fatal => IB_AE_QP_FATAL,
        QpEvent::PathMigrated => IB_AE_QP_APM,
        QpEvent::LastWqeReached => IB_AE_SRQ_QP_LAST_WQE_REACHED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> QpPath {
        QpPath {
            av: AddressVector {
                grh_valid: true,
                hop_limit: 64,
                traffic_class: 0xA5,
                flow_label: 0x1_2345,
                sgid: [1; 16],
                dgid: [2; 16],
                dlid: 0x0102,
                service_level: 3,
                path_bits: 1,
                static_rate: 2,
                port: 1,
            },
            path_mtu: Some(Mtu::Mtu2048),
            local_ack_timeout: 14,
            seq_err_retry_cnt: 7,
            rnr_retry_cnt: 6,
        }
    }

    #[test]
    fn paths_round_trip_and_use_ofw_byte_order() {
        let p = path();
        let c = path_to_ib(&p);
        assert_eq!(c.dlid, 0x0102u16.to_be());
        let grh = c.grh;
        assert_eq!(u32::from_be(grh.ver_class_flow), 0x0A51_2345);
        assert_eq!(c.conn.path_mtu, 4);
        assert_eq!(path_from_ib(&c), p);
        // No route: the GRH stays zero and comes back empty.
        let mut local = p;
        local.av.grh_valid = false;
        let c = path_to_ib(&local);
        assert_eq!(gid_of(c.grh.dest_gid), [0; 16]);
        assert_eq!(path_from_ib(&c).av.dgid, [0; 16]);
    }

    #[test]
    fn modifications_round_trip_for_every_state() {
        let rtr = QpRtr {
            rq_psn: 0x12_3456,
            dest_qpn: 0x00_0042,
            primary: path(),
            responder_resources: 4,
            rnr_nak_timeout: 12,
            opts: QpModifyOptions(QpModifyOptions::ACCESS_CTRL),
            alternate: path(),
            qkey: 0x1111_1111,
            pkey_index: 1,
            access: 0xB,
            sq_depth: 0,
            rq_depth: 0,
        };
        let rts = QpRts {
            sq_psn: 0x65_4321,
            retry_cnt: 7,
            rnr_retry_cnt: 7,
            local_ack_timeout: 14,
            initiator_depth: 4,
            opts: QpModifyOptions(QpModifyOptions::QKEY),
            rnr_nak_timeout: 3,
            current_state: QpState::Rtr,
            qkey: 5,
            access: 1,
            responder_resources: 4,
            primary: path(),
            alternate: QpPath::default(),
            sq_depth: 16,
            rq_depth: 16,
            apm_state: 1,
            port: 1,
            pkey_index: 0,
        };
        for m in [
            QpModify::Reset,
            QpModify::Init(QpInit {
                port: 2,
                qkey: 0x8000_0001,
                pkey_index: 3,
                access: 0xF,
            }),
            QpModify::Rtr(rtr),
            QpModify::Rts(rts),
            QpModify::Sqd { notify: true },
            QpModify::SqError,
            QpModify::Error,
        ] {
            let c = qp_mod_to_ib(&m);
            assert_eq!(qp_mod_from_ib(&c), Ok(m));
        }
        let c = qp_mod_to_ib(&QpModify::Rtr(rtr));
        // SAFETY: the RTR member was written.
        let r = unsafe { c.state.rtr };
        assert_eq!(c.req_state, IB_QPS_RTR);
        assert_eq!(r.dest_qp, 0x42u32.to_be());
        assert_eq!(r.opts, crate::ib_types::IB_MOD_QP_ACCESS_CTRL);
        let mut bad = c;
        bad.req_state = 0x4000;
        assert_eq!(qp_mod_from_ib(&bad), Err(VerbsError::InvalidParameter));
    }

    #[test]
    fn states_events_and_types() {
        for s in [
            QpState::Reset,
            QpState::Init,
            QpState::Rtr,
            QpState::Rts,
            QpState::Sqd,
            QpState::SqError,
            QpState::Error,
        ] {
            assert_eq!(qp_state_from_ib(qp_state_to_ib(s)), s);
        }
        assert_eq!(qp_state_from_ib(IB_QPS_SQD_DRAINED), QpState::Sqd);
        assert_eq!(qp_state_from_ib(IB_QPS_TIME_WAIT), QpState::Error);
        for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
            assert_eq!(qp_type_from_ib(qp_type_to_ib(t)), Some(t));
        }
        assert_eq!(qp_type_from_ib(IB_QPT_QP0), None);
        for k in [
            CaEventKind::LocalFatal,
            CaEventKind::PortActive,
            CaEventKind::PortDown,
            CaEventKind::GidChange,
            CaEventKind::LidChange,
            CaEventKind::PkeyChange,
            CaEventKind::ClientReregister,
            CaEventKind::SmChange,
            CaEventKind::Other,
        ] {
            assert_eq!(ca_event_from_ib(ca_event_to_ib(k), 1).kind, k);
        }
        for e in [
            SrqEvent::LimitReached,
            SrqEvent::LastWqeReached,
            SrqEvent::Error,
        ] {
            assert_eq!(srq_event_from_ib(srq_event_to_ib(e)), e);
        }
        for e in [
            QpEvent::CommEstablished,
            QpEvent::SqDrained,
            QpEvent::Fatal,
            QpEvent::PathMigrated,
            QpEvent::LastWqeReached,
        ] {
            assert_eq!(qp_event_from_ib(qp_event_to_ib(e)), Some(e));
        }
    }

    #[test]
    fn device_and_port_attributes_round_trip() {
        let ca = CaAttributes {
            fw_version: 0x0002_0009_1000,
            node_guid: 0x0202_0304_0506_0708u64.to_be(),
            system_image_guid: 0x11,
            vendor_id: 0x15B3,
            vendor_part_id: 0x1003,
            hw_version: 1,
            capability_flags: WV_IO_BAD_PKEY_COUNTER | WV_IO_SRQ_RESIZE | WV_IO_PORT_ACTIVE_EVENT,
            atomic_capability: 1,
            page_size_capability: 0x1000 | 0x20_0000,
            max_mr_size: 1 << 40,
            max_qp: 1024,
            max_qp_wr: 4096,
            max_sge: 16,
            max_cq: 1024,
            max_cqe: 65535,
            max_mr: 4096,
            max_pd: 256,
            max_qp_responder_resources: 16,
            max_responder_resources: 255,
            max_qp_initiator_depth: 16,
            max_inline_send: 0,
            max_mw: 1024,
            max_multicast: 64,
            max_qp_attach: 8,
            max_multicast_qp: 512,
            max_ah: 1024,
            max_fmr: 0,
            max_map_per_fmr: 0,
            max_srq: 64,
            max_srq_wr: 4096,
            max_srq_sge: 16,
            max_pkeys: 16,
            local_ack_delay: 15,
            port_count: 2,
        };
        let c = ca_attr_to_ib(&ca);
        let pages: [u32; 2] = [0x1000, 0x20_0000];
        assert_eq!(page_sizes(ca.page_size_capability).count(), 2);
        assert_eq!(ca_attr_from_ib(&c, &pages), ca);
        let port = PortAttributes {
            capability_flags: WV_IO_PATH_MIGRATION | WV_IO_SYSTEM_IMAGE_GUID,
            state: PortState::Active,
            mtu: Mtu::Mtu4096,
            gid_table_len: 16,
            max_message_size: 1 << 31,
            bad_pkey_counter: 2,
            qkey_violation_counter: 3,
            pkey_table_len: 16,
            lid: 7,
            sm_lid: 1,
            lmc: 0,
            max_vls: 8,
            sm_sl: 0,
            subnet_timeout: 18,
            init_type_reply: 0,
            active_width: 2,
            active_speed: 1,
            physical_state: 5,
            transport: 2,
            ext_active_speed: 0x10,
            link_encoding: 1,
        };
        let c = port_attr_to_ib(1, &port);
        assert_eq!(c.lid, 7u16.to_be());
        assert_eq!(port_attr_from_ib(&c), port);
    }
}
