//! Conversions between the `WV_IO_*` wire structs and the verbs contract's types.
//!
//! Wire `NET16`/`NET32` fields hold big-endian values as stored in memory; the verbs types are
//! host order except where `wv-hal` says "as stored" (GUIDs, rkeys, pkeys), which pass through.

use wv_abi::consts::wv_qp_attr_to_ib_mod_qp;
use wv_abi::consts::{
    WV_DEVICE_INFINIBAND, WV_IO_BATCH_NOTIFY_CQ, WV_IO_EVENT_ADDRESS, WV_IO_EVENT_ERROR,
    WV_IO_EVENT_LINK_ADDRESS, WV_IO_EVENT_MANAGEMENT, WV_IO_EVENT_PARTITION, WV_IO_EVENT_STATE,
    WV_IO_QP_SIGNAL_SENDS, WV_IO_QP_STATE_MODIFIER, WV_IO_RC_RNR_NAK_GENERATION,
};
use wv_abi::{WV_IO_AV, WV_IO_DEVICE_ATTRIBUTES, WV_IO_PORT_ATTRIBUTES, WV_IO_QP_ATTRIBUTES};
use wv_hal::{
    AddressVector, CaAttributes, CaEventKind, Mtu, PortAttributes, QpAttributes, QpInit, QpModify,
    QpModifyOptions, QpPath, QpRtr, QpRts, QpState,
};

/// `WV_IO_AV` → address vector (OFW `WvVerbsConvertAv`). The GRH fields only count when
/// `NetworkRouteValid` is set; OFW leaves them uninitialised otherwise, here they are zero.
pub(crate) fn av_from_abi(av: &WV_IO_AV) -> AddressVector {
    let grh_valid = av.NetworkRouteValid != 0;
    let mut out = AddressVector {
        grh_valid,
        dlid: u16::from_be(av.DLid),
        service_level: av.ServiceLevel,
        path_bits: av.SourcePathBits,
        static_rate: av.StaticRate,
        port: av.PortNumber,
        ..AddressVector::default()
    };
    if grh_valid {
        out.hop_limit = av.HopLimit;
        out.traffic_class = av.TrafficClass;
        out.flow_label = u32::from_be(av.FlowLabel) & 0x000F_FFFF;
        out.sgid = av.SGid;
        out.dgid = av.DGid;
    }
    out
}

/// Address vector → `WV_IO_AV`, writing only what OFW's `WvAvConvertVerbs` writes (the GRH
/// fields only for a global route, never the reserved bytes).
pub(crate) fn av_to_abi(out: &mut WV_IO_AV, av: &AddressVector) {
    out.NetworkRouteValid = u8::from(av.grh_valid);
    if av.grh_valid {
        out.FlowLabel = (av.flow_label & 0x000F_FFFF).to_be();
        out.TrafficClass = av.traffic_class;
        out.HopLimit = av.hop_limit;
        out.SGid = av.sgid;
        out.DGid = av.dgid;
    }
    out.PortNumber = av.port;
    out.ServiceLevel = av.service_level;
    out.DLid = av.dlid.to_be();
    out.StaticRate = av.static_rate;
    out.SourcePathBits = av.path_bits;
}

/// A QP state byte of the ABI; OFW maps anything unknown to ERROR (`WvVerbsConvertState`).
fn state_from_abi(value: u8) -> QpState {
    QpState::from_abi(value).unwrap_or(QpState::Error)
}

/// One address vector of QP_MODIFY with the connection fields OFW attaches to it
/// (`WvVerbsConvertAv`): the path MTU, ACK timeout and retry counts come from the attribute
/// block, for the alternate path as for the primary (OFW reads neither `AlternatePathMtu` nor
/// `AlternateLocalAckTimeout` there).
fn qp_path_from_abi(av: &WV_IO_AV, attr: &WV_IO_QP_ATTRIBUTES) -> QpPath {
    QpPath {
        av: av_from_abi(av),
        path_mtu: Mtu::from_bytes(attr.PathMtu),
        local_ack_timeout: attr.LocalAckTimeout,
        seq_err_retry_cnt: attr.SequenceErrorRetryCount,
        rnr_retry_cnt: attr.RnrRetryCount,
    }
}

/// QP_MODIFY's `WV_IO_QP_ATTRIBUTES` → the verbs modification, as OFW's `WvVerbsConvertAttr`
/// builds `ib_qp_mod_t`: the target `QpState` alone decides what travels (an unknown state
/// byte means ERROR); `Options` only becomes the RTR/RTS `opts` (`WvVerbsConvertOptions`).
/// `ResponderResources` and `InitiatorDepth` are narrowed to 8 bits as OFW's casts do;
/// `QpFlags`, `AlternatePathMtu`, `AlternateLocalAckTimeout` and `AlternatePkeyIndex` do not
/// travel at all.
pub(crate) fn qp_modify_from_abi(attr: &WV_IO_QP_ATTRIBUTES) -> QpModify {
    let opts = QpModifyOptions(wv_qp_attr_to_ib_mod_qp(attr.Options));
    let access = u32::from(attr.AccessFlags);
    let qkey = u32::from_be(attr.Qkey);
    match state_from_abi(attr.QpState) {
        QpState::Reset => QpModify::Reset,
        QpState::Init => QpModify::Init(QpInit {
            port: attr.AddressVector.PortNumber,
            qkey,
            pkey_index: attr.PkeyIndex,
            access,
        }),
        QpState::Rtr => QpModify::Rtr(QpRtr {
            rq_psn: u32::from_be(attr.ReceivePsn),
            dest_qpn: u32::from_be(attr.DestinationQpn),
            primary: qp_path_from_abi(&attr.AddressVector, attr),
            responder_resources: attr.ResponderResources as u8,
            rnr_nak_timeout: attr.RnrNakTimeout,
            opts,
            alternate: qp_path_from_abi(&attr.AlternateAddressVector, attr),
            qkey,
            pkey_index: attr.PkeyIndex,
            access,
            sq_depth: attr.SendDepth,
            rq_depth: attr.ReceiveDepth,
        }),
        QpState::Rts => QpModify::Rts(QpRts {
            sq_psn: u32::from_be(attr.SendPsn),
            retry_cnt: attr.SequenceErrorRetryCount,
            rnr_retry_cnt: attr.RnrRetryCount,
            local_ack_timeout: attr.LocalAckTimeout,
            initiator_depth: attr.InitiatorDepth as u8,
            opts,
            rnr_nak_timeout: attr.RnrNakTimeout,
            current_state: state_from_abi(attr.CurrentQpState),
            qkey,
            access,
            responder_resources: attr.ResponderResources as u8,
            primary: qp_path_from_abi(&attr.AddressVector, attr),
            alternate: qp_path_from_abi(&attr.AlternateAddressVector, attr),
            sq_depth: attr.SendDepth,
            rq_depth: attr.ReceiveDepth,
            apm_state: attr.ApmState,
            port: attr.AddressVector.PortNumber,
            pkey_index: attr.PkeyIndex,
        }),
        QpState::Sqd => QpModify::Sqd { notify: true },
        QpState::SqError => QpModify::SqError,
        QpState::Error => QpModify::Error,
    }
}

/// QP_QUERY: fills `out` (which holds the echoed system buffer) the way OFW's
/// `WvQpAttrConvertVerbs` does, plus the `Id` header OFW never wrote (fix of spec §7.1-j).
///
/// Kept for compatibility: `Options = 0`, `QpState = CurrentQpState`, `AlternatePkeyIndex =
/// PkeyIndex`, `RnrNakTimeout = 0` and `AccessFlags` truncated to 8 bits, as OFW reports them.
pub(crate) fn qp_attr_to_abi(out: &mut WV_IO_QP_ATTRIBUTES, id: u64, attr: &QpAttributes) {
    out.Id.Id = id;
    out.Id.VerbInfo = 0;
    out.Id.Data = 0;
    out.MaxInlineSend = attr.sq_max_inline;
    out.SendDepth = attr.sq_depth;
    out.ReceiveDepth = attr.rq_depth;
    out.SendSge = attr.sq_sge;
    out.ReceiveSge = attr.rq_sge;
    out.InitiatorDepth = attr.initiator_depth;
    out.ResponderResources = attr.responder_resources;
    out.Options = 0;
    out.QpType = attr.qp_type as u8;
    out.CurrentQpState = attr.state as u8;
    out.QpState = out.CurrentQpState;
    out.ApmState = attr.apm_state;
    out.Qpn = attr.qpn.to_be();
    out.DestinationQpn = attr.dest_qpn.to_be();
    out.Qkey = attr.qkey.to_be();
    out.SendPsn = attr.sq_psn.to_be();
    out.ReceivePsn = attr.rq_psn.to_be();
    out.QpFlags = if attr.sq_signaled {
        WV_IO_QP_SIGNAL_SENDS as u8
    } else {
        0
    };
    out.AccessFlags = attr.access_flags as u8;
    av_to_abi(&mut out.AddressVector, &attr.primary_av);
    av_to_abi(&mut out.AlternateAddressVector, &attr.alternate_av);
    out.PathMtu = attr.path_mtu.bytes();
    out.AlternatePathMtu = attr.alternate_path_mtu.bytes();
    out.PkeyIndex = attr.pkey_index;
    out.AlternatePkeyIndex = out.PkeyIndex;
    out.LocalAckTimeout = attr.local_ack_timeout;
    out.AlternateLocalAckTimeout = attr.alternate_local_ack_timeout;
    out.RnrNakTimeout = 0;
    out.SequenceErrorRetryCount = attr.retry_count;
    out.RnrRetryCount = attr.rnr_retry_count;
}

/// DEVICE_QUERY output (OFW `WvConvertDevAttr`), every field written: OFW never wrote
/// `MaxInlineSend` and `Reserved` and returned stale system-buffer bytes there (fix of spec
/// §7.1-j). `BATCH_NOTIFY_CQ` is advertised and is now true (fix of spec §7.1-a);
/// `DeviceType` is always InfiniBand, as in OFW.
pub(crate) fn device_attr_to_abi(attr: &CaAttributes) -> WV_IO_DEVICE_ATTRIBUTES {
    WV_IO_DEVICE_ATTRIBUTES {
        FwVersion: attr.fw_version,
        NodeGuid: attr.node_guid,
        SystemImageGuid: attr.system_image_guid,
        VendorId: attr.vendor_id,
        VendorPartId: attr.vendor_part_id,
        HwVersion: attr.hw_version,
        CapabilityFlags: attr.capability_flags
            | WV_IO_RC_RNR_NAK_GENERATION
            | WV_IO_BATCH_NOTIFY_CQ,
        AtomicCapability: attr.atomic_capability,
        PageSizeCapabilityFlags: attr.page_size_capability,
        MaxMrSize: attr.max_mr_size,
        MaxQp: attr.max_qp,
        MaxQpWr: attr.max_qp_wr,
        MaxSge: attr.max_sge,
        MaxCq: attr.max_cq,
        MaxCqEntries: attr.max_cqe,
        MaxMr: attr.max_mr,
        MaxPd: attr.max_pd,
        MaxQpResponderResources: attr.max_qp_responder_resources,
        MaxResponderResources: attr.max_responder_resources,
        MaxQpInitiatorDepth: attr.max_qp_initiator_depth,
        MaxInlineSend: attr.max_inline_send,
        MaxMw: attr.max_mw,
        MaxMulticast: attr.max_multicast,
        MaxQpAttach: attr.max_qp_attach,
        MaxMulticastQp: attr.max_multicast_qp,
        MaxAh: attr.max_ah,
        MaxFmr: attr.max_fmr,
        MaxMapPerFmr: attr.max_map_per_fmr,
        MaxSrq: attr.max_srq,
        MaxSrqWr: attr.max_srq_wr,
        MaxSrqSge: attr.max_srq_sge,
        MaxPkeys: attr.max_pkeys,
        DeviceType: WV_DEVICE_INFINIBAND,
        LocalAckDelay: attr.local_ack_delay,
        PhysPortCount: attr.port_count,
        Reserved: [0; 2],
    }
}

/// DEVICE_PORT_QUERY output (OFW `WvConvertPortAttr`), written over the echoed buffer so the
/// three tail padding bytes stay as they were. OFW always adds `QP_STATE_MODIFIER`,
/// `RC_RNR_NAK_GENERATION` and `BATCH_NOTIFY_CQ` to the port capabilities; so does this.
pub(crate) fn port_attr_to_abi(out: &mut WV_IO_PORT_ATTRIBUTES, attr: &PortAttributes) {
    out.PortCabilityFlags = attr.capability_flags
        | WV_IO_QP_STATE_MODIFIER
        | WV_IO_RC_RNR_NAK_GENERATION
        | WV_IO_BATCH_NOTIFY_CQ;
    out.State = attr.state as u32;
    // OFW reports the one MTU field of ib_port_attr_t as both.
    out.MaxMtu = attr.mtu.bytes();
    out.ActiveMtu = attr.mtu.bytes();
    out.GidTableLength = attr.gid_table_len;
    out.MaxMessageSize = attr.max_message_size;
    out.BadPkeyCounter = attr.bad_pkey_counter;
    out.QkeyViolationCounter = attr.qkey_violation_counter;
    out.PkeyTableLength = attr.pkey_table_len;
    out.Lid = attr.lid.to_be();
    out.SmLid = attr.sm_lid.to_be();
    out.Lmc = attr.lmc;
    out.MaxVls = attr.max_vls;
    out.SmSl = attr.sm_sl;
    out.SubnetTimeout = attr.subnet_timeout;
    out.InitTypeReply = attr.init_type_reply;
    out.ActiveWidth = attr.active_width;
    out.ActiveSpeed = attr.active_speed;
    out.ExtActiveSpeed = attr.ext_active_speed >> 4;
    out.LinkEncoding = attr.link_encoding;
    out.PhysicalState = attr.physical_state;
    out.Transport = attr.transport;
}

/// The DEVICE_NOTIFY flag of a device event (OFW `WvDeviceConvertEvent`); 0 = ignored.
pub(crate) fn port_event_flag(kind: CaEventKind) -> u32 {
    match kind {
        CaEventKind::LocalFatal => WV_IO_EVENT_ERROR,
        CaEventKind::PortActive | CaEventKind::PortDown => WV_IO_EVENT_STATE,
        CaEventKind::GidChange => WV_IO_EVENT_ADDRESS,
        CaEventKind::LidChange => WV_IO_EVENT_LINK_ADDRESS,
        CaEventKind::PkeyChange => WV_IO_EVENT_PARTITION,
        CaEventKind::ClientReregister | CaEventKind::SmChange => WV_IO_EVENT_MANAGEMENT,
        CaEventKind::Other => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wv_abi::consts::{WV_IO_QP_ATTR_ACCESS_FLAGS, WV_IO_QP_ATTR_AV, WV_IO_QP_ATTR_STATE};

    #[test]
    fn modify_to_rtr_converts_net_order_mtu_and_options() {
        let mut attr = WV_IO_QP_ATTRIBUTES {
            QpState: 2,
            CurrentQpState: 1,
            Options: WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_AV | WV_IO_QP_ATTR_ACCESS_FLAGS,
            DestinationQpn: 0x0012_3456u32.to_be(),
            ReceivePsn: 0x77u32.to_be(),
            Qkey: 0x1111_2222u32.to_be(),
            PathMtu: 2048,
            LocalAckTimeout: 14,
            ResponderResources: 0x104,
            ..WV_IO_QP_ATTRIBUTES::default()
        };
        attr.AddressVector.PortNumber = 2;
        attr.AddressVector.DLid = 0x0102u16.to_be();
        attr.AddressVector.NetworkRouteValid = 1;
        attr.AddressVector.FlowLabel = 0xFFF1_2345u32.to_be();
        attr.AddressVector.TrafficClass = 9;
        attr.AccessFlags = 0xB;
        let QpModify::Rtr(m) = qp_modify_from_abi(&attr) else {
            panic!("RTR expected")
        };
        assert_eq!(m.dest_qpn, 0x0012_3456);
        assert_eq!(m.rq_psn, 0x77);
        assert_eq!(m.qkey, 0x1111_2222);
        assert_eq!(m.primary.path_mtu, Some(Mtu::Mtu2048));
        assert_eq!(m.primary.local_ack_timeout, 14);
        assert_eq!(m.primary.av.port, 2);
        assert_eq!(m.primary.av.dlid, 0x0102);
        assert_eq!(m.primary.av.flow_label, 0x1_2345);
        assert_eq!(m.primary.av.traffic_class, 9);
        // OFW gives the alternate path the primary's MTU and timeout.
        assert_eq!(m.alternate.path_mtu, Some(Mtu::Mtu2048));
        assert_eq!(m.access, 0xB);
        assert_eq!(m.responder_resources, 4, "narrowed to 8 bits as OFW does");
        assert_eq!(
            m.opts,
            QpModifyOptions(QpModifyOptions::PRIMARY_AV | QpModifyOptions::ACCESS_CTRL)
        );
    }

    #[test]
    fn the_target_state_alone_decides() {
        // No STATE bit, no other bit: OFW still requests the state in QpState.
        let attr = WV_IO_QP_ATTRIBUTES {
            QpState: 6,
            Options: 0,
            ..WV_IO_QP_ATTRIBUTES::default()
        };
        assert_eq!(qp_modify_from_abi(&attr), QpModify::Error);
        // INIT carries port, qkey, pkey index and access whatever Options says.
        let mut attr = WV_IO_QP_ATTRIBUTES {
            QpState: 1,
            Options: WV_IO_QP_ATTR_STATE,
            PkeyIndex: 3,
            Qkey: 0x8001_0000u32.to_be(),
            AccessFlags: 0x0F,
            ..WV_IO_QP_ATTRIBUTES::default()
        };
        attr.AddressVector.PortNumber = 1;
        assert_eq!(
            qp_modify_from_abi(&attr),
            QpModify::Init(QpInit {
                port: 1,
                qkey: 0x8001_0000,
                pkey_index: 3,
                access: 0x0F
            })
        );
        let sqd = WV_IO_QP_ATTRIBUTES {
            QpState: 4,
            ..WV_IO_QP_ATTRIBUTES::default()
        };
        assert_eq!(qp_modify_from_abi(&sqd), QpModify::Sqd { notify: true });
    }

    #[test]
    fn unknown_states_and_mtus() {
        let attr = WV_IO_QP_ATTRIBUTES {
            QpState: 42,
            PathMtu: 3000,
            ..WV_IO_QP_ATTRIBUTES::default()
        };
        assert_eq!(qp_modify_from_abi(&attr), QpModify::Error);
        let rts = WV_IO_QP_ATTRIBUTES {
            QpState: 3,
            CurrentQpState: 9,
            PathMtu: 3000,
            ..WV_IO_QP_ATTRIBUTES::default()
        };
        let QpModify::Rts(m) = qp_modify_from_abi(&rts) else {
            panic!("RTS expected")
        };
        assert_eq!(m.primary.path_mtu, None);
        assert_eq!(m.current_state, QpState::Error);
    }

    #[test]
    fn av_round_trip_keeps_grh_only_when_valid() {
        let mut wire = WV_IO_AV {
            NetworkRouteValid: 0,
            HopLimit: 7,
            ..WV_IO_AV::default()
        };
        let av = av_from_abi(&wire);
        assert_eq!(av.hop_limit, 0);
        wire.HopLimit = 0xEE;
        av_to_abi(&mut wire, &av);
        assert_eq!(
            wire.HopLimit, 0xEE,
            "OFW leaves GRH bytes alone without a route"
        );
    }

    #[test]
    fn event_flags() {
        assert_eq!(port_event_flag(CaEventKind::LocalFatal), 1);
        assert_eq!(port_event_flag(CaEventKind::PortDown), 2);
        assert_eq!(port_event_flag(CaEventKind::SmChange), 0x20);
        assert_eq!(port_event_flag(CaEventKind::Other), 0);
    }
}
