//! [`QpAttr`]: a builder over `WV_IO_QP_ATTRIBUTES` and its `WV_IO_QP_ATTR_*` mask.

use wv_abi::WV_IO_AV;
use wv_abi::WV_IO_QP_ATTRIBUTES;
use wv_abi::consts::*;

use crate::verbs::{AddressVector, Mtu, QpState};

/// `AddressVector` (host order) → `WV_IO_AV` (network-order LID and flow label).
pub(crate) fn av_to_abi(out: &mut WV_IO_AV, av: &AddressVector) {
    out.NetworkRouteValid = u8::from(av.grh_valid);
    out.HopLimit = av.hop_limit;
    out.TrafficClass = av.traffic_class;
    out.FlowLabel = (av.flow_label & 0x000F_FFFF).to_be();
    out.SGid = av.sgid;
    out.DGid = av.dgid;
    out.DLid = av.dlid.to_be();
    out.ServiceLevel = av.service_level;
    out.SourcePathBits = av.path_bits;
    out.StaticRate = av.static_rate;
    out.PortNumber = av.port;
}

/// The attributes of one QP_MODIFY: a `WV_IO_QP_ATTRIBUTES` and the `Options` mask saying
/// which of its fields apply, built the way `ibv_modify_qp` callers build `ibv_qp_attr` and
/// its mask. Values are host order; the builder stores the ABI's network-order fields.
///
/// The helpers set exactly what `ibv_rc_pingpong` / `ibv_ud_pingpong` set for each transition
/// (device-model-and-perftest.md §3); `with_*` adds or overrides single attributes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAttr {
    attr: WV_IO_QP_ATTRIBUTES,
}

impl QpAttr {
    /// Nothing set (an empty mask).
    pub fn new() -> Self {
        Self::default()
    }

    /// Only the target state (`IBV_QP_STATE`): RESET, ERR, SQD, or UD/UC steps that need
    /// nothing else.
    pub fn to_state(state: QpState) -> Self {
        Self::new().with_state(state)
    }

    /// RESET → INIT of an RC or UC QP: `{STATE, PKEY_INDEX, PORT, ACCESS_FLAGS}`.
    pub fn init(port: u8, pkey_index: u16, access: u32) -> Self {
        Self::to_state(QpState::Init)
            .with_port(port)
            .with_pkey_index(pkey_index)
            .with_access(access)
    }

    /// RESET → INIT of a UD QP: `{STATE, PKEY_INDEX, PORT, QKEY}`.
    pub fn init_ud(port: u8, pkey_index: u16, qkey: u32) -> Self {
        Self::to_state(QpState::Init)
            .with_port(port)
            .with_pkey_index(pkey_index)
            .with_qkey(qkey)
    }

    /// INIT → RTR of an RC QP: `{STATE, AV, PATH_MTU, DEST_QPN, RQ_PSN, MAX_DEST_RD_ATOMIC,
    /// MIN_RNR_TIMER}` (the path MTU travels with the address vector in WinVerbs).
    pub fn rtr(
        dest_qpn: u32,
        rq_psn: u32,
        av: &AddressVector,
        mtu: Mtu,
        resp_res: u8,
        min_rnr_timer: u8,
    ) -> Self {
        Self::rtr_uc(dest_qpn, rq_psn, av, mtu)
            .with_responder_resources(resp_res)
            .with_min_rnr_timer(min_rnr_timer)
    }

    /// INIT → RTR of a UC QP: `{STATE, AV, PATH_MTU, DEST_QPN, RQ_PSN}`.
    pub fn rtr_uc(dest_qpn: u32, rq_psn: u32, av: &AddressVector, mtu: Mtu) -> Self {
        Self::to_state(QpState::Rtr)
            .with_av(av, mtu)
            .with_dest_qpn(dest_qpn)
            .with_rq_psn(rq_psn)
    }

    /// INIT → RTR of a UD QP: `{STATE}`.
    pub fn rtr_ud() -> Self {
        Self::to_state(QpState::Rtr)
    }

    /// RTR → RTS of an RC QP: `{STATE, SQ_PSN, TIMEOUT, RETRY_CNT, RNR_RETRY,
    /// MAX_QP_RD_ATOMIC}`.
    pub fn rts(sq_psn: u32, timeout: u8, retry: u8, rnr_retry: u8, init_depth: u8) -> Self {
        Self::rts_ud(sq_psn)
            .with_timeout(timeout)
            .with_retry_count(retry)
            .with_rnr_retry(rnr_retry)
            .with_initiator_depth(init_depth)
    }

    /// RTR → RTS of a UC or UD QP: `{STATE, SQ_PSN}`.
    pub fn rts_ud(sq_psn: u32) -> Self {
        Self::to_state(QpState::Rts).with_sq_psn(sq_psn)
    }

    fn set(mut self, bit: u32, f: impl FnOnce(&mut WV_IO_QP_ATTRIBUTES)) -> Self {
        f(&mut self.attr);
        self.attr.Options |= bit;
        self
    }

    /// The target state.
    pub fn with_state(self, state: QpState) -> Self {
        self.set(WV_IO_QP_ATTR_STATE, |a| a.QpState = state as u8)
    }

    /// The state the caller believes the QP is in (`IBV_QP_CUR_STATE`).
    pub fn with_current_state(self, state: QpState) -> Self {
        self.set(WV_IO_QP_ATTR_CURRENT_STATE, |a| {
            a.CurrentQpState = state as u8
        })
    }

    /// The port (WinVerbs carries it in the primary address vector).
    pub fn with_port(self, port: u8) -> Self {
        self.set(WV_IO_QP_ATTR_PORT_NUMBER, |a| {
            a.AddressVector.PortNumber = port
        })
    }

    /// The P_Key index.
    pub fn with_pkey_index(self, index: u16) -> Self {
        self.set(WV_IO_QP_ATTR_PKEY_INDEX, |a| a.PkeyIndex = index)
    }

    /// Remote access rights (`WV_ACCESS_*`; the ABI field is 8 bits wide).
    pub fn with_access(self, access: u32) -> Self {
        self.set(WV_IO_QP_ATTR_ACCESS_FLAGS, |a| a.AccessFlags = access as u8)
    }

    /// The Q_Key (UD).
    pub fn with_qkey(self, qkey: u32) -> Self {
        self.set(WV_IO_QP_ATTR_QKEY, |a| a.Qkey = qkey.to_be())
    }

    /// The primary path and its MTU. The port of `av` is kept unless it is 0 (then the port
    /// set by [`QpAttr::with_port`], if any, stays).
    pub fn with_av(self, av: &AddressVector, mtu: Mtu) -> Self {
        self.set(WV_IO_QP_ATTR_AV, |a| {
            let port = a.AddressVector.PortNumber;
            av_to_abi(&mut a.AddressVector, av);
            if av.port == 0 {
                a.AddressVector.PortNumber = port;
            }
            a.PathMtu = mtu.bytes();
        })
    }

    /// The remote QP number.
    pub fn with_dest_qpn(self, qpn: u32) -> Self {
        self.set(WV_IO_QP_ATTR_DESTINATION_QPN, |a| {
            a.DestinationQpn = qpn.to_be()
        })
    }

    /// The receive PSN.
    pub fn with_rq_psn(self, psn: u32) -> Self {
        self.set(WV_IO_QP_ATTR_RECEIVE_PSN, |a| a.ReceivePsn = psn.to_be())
    }

    /// The send PSN.
    pub fn with_sq_psn(self, psn: u32) -> Self {
        self.set(WV_IO_QP_ATTR_SEND_PSN, |a| a.SendPsn = psn.to_be())
    }

    /// RDMA reads the QP answers at once (`max_dest_rd_atomic`).
    pub fn with_responder_resources(self, n: u8) -> Self {
        self.set(WV_IO_QP_ATTR_RESPONDER_RESOURCES, |a| {
            a.ResponderResources = u32::from(n)
        })
    }

    /// RDMA reads the QP issues at once (`max_rd_atomic`).
    pub fn with_initiator_depth(self, n: u8) -> Self {
        self.set(WV_IO_QP_ATTR_INITIATOR_DEPTH, |a| {
            a.InitiatorDepth = u32::from(n)
        })
    }

    /// The RNR NAK timer code (`min_rnr_timer`).
    pub fn with_min_rnr_timer(self, timer: u8) -> Self {
        self.set(WV_IO_QP_ATTR_RNR_NAK_TIMEOUT, |a| a.RnrNakTimeout = timer)
    }

    /// The local ACK timeout code (`timeout`).
    pub fn with_timeout(self, timeout: u8) -> Self {
        self.set(WV_IO_QP_ATTR_ACK_TIMEOUT, |a| a.LocalAckTimeout = timeout)
    }

    /// Transport retries (`retry_cnt`).
    pub fn with_retry_count(self, n: u8) -> Self {
        self.set(WV_IO_QP_ATTR_ERROR_RETRY_COUNT, |a| {
            a.SequenceErrorRetryCount = n
        })
    }

    /// RNR retries (`rnr_retry`; 7 = for ever).
    pub fn with_rnr_retry(self, n: u8) -> Self {
        self.set(WV_IO_QP_ATTR_RNR_RETRY_COUNT, |a| a.RnrRetryCount = n)
    }

    /// The `WV_IO_QP_ATTR_*` mask built so far.
    pub fn mask(&self) -> u32 {
        self.attr.Options
    }

    /// The ABI struct (its `Id` is filled in by [`crate::verbs::Qp::modify`]).
    pub fn as_abi(&self) -> &WV_IO_QP_ATTRIBUTES {
        &self.attr
    }

    /// Wraps a hand-built ABI struct (its `Options` is the mask).
    pub fn from_abi(attr: WV_IO_QP_ATTRIBUTES) -> Self {
        QpAttr { attr }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc_helpers_set_the_pingpong_masks() {
        assert_eq!(
            QpAttr::init(1, 0, WV_ACCESS_REMOTE_WRITE).mask(),
            RC_INIT_OPTIONS
        );
        let av = AddressVector {
            port: 1,
            dlid: 0x12,
            ..AddressVector::default()
        };
        let rtr = QpAttr::rtr(0x42, 7, &av, Mtu::Mtu1024, 1, 12);
        assert_eq!(rtr.mask(), RC_RTR_OPTIONS);
        let a = rtr.as_abi();
        assert_eq!(a.QpState, WV_IO_QP_STATE_RTR);
        assert_eq!(u32::from_be(a.DestinationQpn), 0x42);
        assert_eq!(u32::from_be(a.ReceivePsn), 7);
        assert_eq!(a.PathMtu, 1024);
        assert_eq!(u16::from_be(a.AddressVector.DLid), 0x12);
        assert_eq!(a.AddressVector.PortNumber, 1);
        let rts = QpAttr::rts(9, 14, 7, 7, 1);
        assert_eq!(rts.mask(), RC_RTS_OPTIONS);
    }

    #[test]
    fn ud_helpers_and_port_kept_by_a_portless_av() {
        let init = QpAttr::init_ud(2, 0, 0x1111_1111);
        assert_eq!(
            init.mask(),
            WV_IO_QP_ATTR_STATE
                | WV_IO_QP_ATTR_PKEY_INDEX
                | WV_IO_QP_ATTR_PORT_NUMBER
                | WV_IO_QP_ATTR_QKEY
        );
        assert_eq!(u32::from_be(init.as_abi().Qkey), 0x1111_1111);
        assert_eq!(QpAttr::rtr_ud().mask(), WV_IO_QP_ATTR_STATE);
        assert_eq!(
            QpAttr::rts_ud(5).mask(),
            WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_SEND_PSN
        );
        let a = QpAttr::new()
            .with_port(2)
            .with_av(&AddressVector::default(), Mtu::Mtu256);
        assert_eq!(a.as_abi().AddressVector.PortNumber, 2);
    }
}
