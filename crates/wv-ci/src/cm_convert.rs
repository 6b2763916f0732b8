//! Value conversions between `wv-hal`'s connection-manager types and the C structures of
//! `iba_cm_interface`, both ways: [`crate::cm_import`] turns Rust calls into C ones and C
//! events into Rust ones, [`crate::cm_export`] the reverse.
//!
//! Byte order: `wv-hal` holds QP numbers, PSNs, service ids and reject reasons in host order;
//! the C structures hold them as `net*_t`. GUIDs pass as stored; path records are wire order on
//! both sides and are copied field by field.

use wv_abi::IB_PATH_REC;
use wv_hal::cm::{REP_PRIVATE_DATA, REQ_PRIVATE_DATA};
use wv_hal::{CmRepEvent, CmReqEvent, QpType};

use crate::cm::*;
use crate::convert::qp_type_from_ib;
use crate::ib_types::*;

/// A path record built field by field from one of the other side's (`IB_PATH_REC` and
/// `ib_path_rec_t` name their fields alike); the GIDs come apart, one side holds them in a union.
macro_rules! path_rec {
    ($ty:ident, $p:expr, dgid: $dgid:expr, sgid: $sgid:expr) => {{
        let p = $p;
        $ty {
            service_id: p.service_id,
            dgid: $dgid,
            sgid: $sgid,
            dlid: p.dlid,
            slid: p.slid,
            hop_flow_raw: p.hop_flow_raw,
            tclass: p.tclass,
            num_path: p.num_path,
            pkey: p.pkey,
            qos_class_sl: p.qos_class_sl,
            mtu: p.mtu,
            rate: p.rate,
            pkt_life: p.pkt_life,
            preference: p.preference,
            resv2: p.resv2,
        }
    }};
}

/// Stores a request's `CmReqParams` in the fields `iba_cm_req` and `iba_cm_req_event` share
/// (QP type, PSN in network order, the timing and resource fields).
macro_rules! req_params_to_ib {
    ($c:expr, $params:expr) => {{
        let p: &::wv_hal::CmReqParams = $params;
        $c.qp_type = $crate::convert::qp_type_to_ib(p.qp_type);
        $c.starting_psn = p.starting_psn.to_be();
        $c.max_cm_retries = p.max_cm_retries;
        $c.resp_res = p.responder_resources;
        $c.init_depth = p.initiator_depth;
        $c.remote_resp_timeout = p.remote_cm_response_timeout;
        $c.flow_ctrl = u8::from(p.flow_control);
        $c.local_resp_timeout = p.local_cm_response_timeout;
        $c.rnr_retry_cnt = p.rnr_retry_count;
        $c.retry_cnt = p.retry_count;
        $c.srq = u8::from(p.srq);
    }};
}
pub(crate) use req_params_to_ib;

/// The `CmReqParams` of an `iba_cm_req` or `iba_cm_req_event`, its QP type `qp_type`
/// (each caller decides what an unknown C type becomes).
macro_rules! req_params_from_ib {
    ($c:expr, $qp_type:expr) => {{
        let c = $c;
        ::wv_hal::CmReqParams {
            qp_type: $qp_type,
            starting_psn: u32::from_be(c.starting_psn) & 0x00FF_FFFF,
            max_cm_retries: c.max_cm_retries,
            responder_resources: c.resp_res,
            initiator_depth: c.init_depth,
            remote_cm_response_timeout: c.remote_resp_timeout,
            flow_control: c.flow_ctrl != 0,
            local_cm_response_timeout: c.local_resp_timeout,
            rnr_retry_count: c.rnr_retry_cnt,
            retry_count: c.retry_cnt,
            srq: c.srq != 0,
        }
    }};
}
pub(crate) use req_params_from_ib;

/// The C path record of a wire-order one.
pub fn path_to_ib(p: &IB_PATH_REC) -> ib_path_rec_t {
    path_rec!(
        ib_path_rec_t,
        p,
        dgid: ib_gid_t { raw: p.dgid },
        sgid: ib_gid_t { raw: p.sgid }
    )
}

/// The wire-order path record of a C one.
pub fn path_from_ib(p: &ib_path_rec_t) -> IB_PATH_REC {
    // SAFETY: every view of the packed GID union is 16 plain bytes.
    let dgid = unsafe { p.dgid.raw };
    // SAFETY: as above.
    let sgid = unsafe { p.sgid.raw };
    path_rec!(IB_PATH_REC, p, dgid: dgid, sgid: sgid)
}

/// `iba_cm_req_event` of a received request (the C side's view).
pub fn req_event_to_ib(r: &CmReqEvent) -> iba_cm_req_event {
    let mut out = iba_cm_req_event::zeroed();
    out.service_id = r.service_id.to_be();
    out.primary_path = path_to_ib(&r.primary_path);
    out.qpn = r.remote_qpn.to_be();
    req_params_to_ib!(out, &r.params);
    out.pdata = r.private_data;
    out.local_ca_guid = r.local_ca_guid;
    out.remote_ca_guid = r.remote_ca_guid;
    out.pkey_index = r.pkey_index;
    out.port_num = r.port;
    out
}

/// The received request an `iba_cm_req_event` describes. A QP type WinVerbs does not know
/// reads as RC, the only type it connects.
pub fn req_event_from_ib(r: &iba_cm_req_event) -> CmReqEvent {
    CmReqEvent {
        service_id: u64::from_be(r.service_id),
        primary_path: path_from_ib(&r.primary_path),
        remote_qpn: u32::from_be(r.qpn) & 0x00FF_FFFF,
        private_data: r.pdata,
        params: req_params_from_ib!(r, qp_type_from_ib(r.qp_type).unwrap_or(QpType::Rc)),
        local_ca_guid: r.local_ca_guid,
        remote_ca_guid: r.remote_ca_guid,
        pkey_index: r.pkey_index,
        port: r.port_num,
    }
}

/// The received reply an `iba_cm_rep_event` describes, with `pdata` the bytes its
/// `p_pdata`/`pdata_len` point at (the caller bounds them).
pub fn rep_event_from_ib(r: &iba_cm_rep_event, pdata: &[u8]) -> CmRepEvent {
    let mut private_data = [0u8; REP_PRIVATE_DATA];
    let n = pdata.len().min(REP_PRIVATE_DATA);
    private_data[..n].copy_from_slice(&pdata[..n]);
    CmRepEvent {
        remote_qpn: u32::from_be(r.rep.qpn) & 0x00FF_FFFF,
        starting_psn: u32::from_be(r.rep.starting_psn) & 0x00FF_FFFF,
        private_data,
        failover_accepted: r.rep.failover_accepted,
        responder_resources: r.rep.resp_res,
        initiator_depth: r.rep.init_depth,
        flow_control: r.rep.flow_ctrl != 0,
        rnr_retry_count: r.rep.rnr_retry_cnt,
        srq: r.rep.srq != 0,
        remote_ca_guid: r.ca_guid,
        target_ack_delay: r.target_ack_delay,
    }
}

/// The `iba_cm_rep_event` of a received reply; `p_pdata` points at `r.private_data`, so the
/// result must not outlive `r`.
pub fn rep_event_to_ib(r: &CmRepEvent) -> iba_cm_rep_event {
    let mut out = iba_cm_rep_event::zeroed();
    out.rep = iba_cm_rep {
        qpn: r.remote_qpn.to_be(),
        starting_psn: r.starting_psn.to_be(),
        p_pdata: r.private_data.as_ptr().cast(),
        pdata_len: REP_PRIVATE_DATA as u8,
        failover_accepted: r.failover_accepted,
        resp_res: r.responder_resources,
        init_depth: r.initiator_depth,
        flow_ctrl: u8::from(r.flow_control),
        rnr_retry_cnt: r.rnr_retry_count,
        srq: u8::from(r.srq),
    };
    out.ca_guid = r.remote_ca_guid;
    out.target_ack_delay = r.target_ack_delay;
    out
}

/// A REQ's private data bounded to the field it travels in.
pub fn req_private_data(pdata: &[u8]) -> &[u8] {
    &pdata[..pdata.len().min(REQ_PRIVATE_DATA)]
}

#[cfg(test)]
mod tests {
    use wv_hal::CmReqParams;

    use super::*;

    fn path() -> IB_PATH_REC {
        IB_PATH_REC {
            service_id: 0x0106_0000_1234u64.to_be(),
            dgid: [1; 16],
            sgid: [2; 16],
            dlid: 7u16.to_be(),
            slid: 9u16.to_be(),
            hop_flow_raw: 0x0102_0304,
            tclass: 5,
            num_path: 0x81,
            pkey: 0xFFFF,
            qos_class_sl: 3u16.to_be(),
            mtu: 0x84,
            rate: 0x86,
            pkt_life: 0x92,
            preference: 1,
            resv2: [0; 6],
        }
    }

    #[test]
    fn paths_and_requests_round_trip() {
        let p = path();
        assert_eq!(path_from_ib(&path_to_ib(&p)), p);
        let mut pd = [0u8; REQ_PRIVATE_DATA];
        pd[0] = 0;
        pd[1] = 0x40;
        pd[91] = 0xEE;
        let req = CmReqEvent {
            service_id: 0x0000_0000_0106_4E20,
            primary_path: p,
            remote_qpn: 0x12_3456,
            private_data: pd,
            params: CmReqParams {
                qp_type: QpType::Rc,
                starting_psn: 0xAB_CDEF,
                max_cm_retries: 15,
                responder_resources: 4,
                initiator_depth: 2,
                remote_cm_response_timeout: 20,
                flow_control: true,
                local_cm_response_timeout: 20,
                rnr_retry_count: 7,
                retry_count: 6,
                srq: false,
            },
            local_ca_guid: 0x1122_3344_5566_7788,
            remote_ca_guid: 0x99AA_BBCC_DDEE_FF00,
            pkey_index: 0,
            port: 1,
        };
        let c = req_event_to_ib(&req);
        assert_eq!(c.service_id, 0x0000_0000_0106_4E20u64.to_be());
        assert_eq!(c.qpn, 0x12_3456u32.to_be());
        assert_eq!(req_event_from_ib(&c), req);
    }

    #[test]
    fn replies_round_trip_with_their_private_data() {
        let mut pd = [0u8; REP_PRIVATE_DATA];
        pd[..3].copy_from_slice(b"rep");
        let rep = CmRepEvent {
            remote_qpn: 77,
            starting_psn: 0x10_0000,
            private_data: pd,
            failover_accepted: 1,
            responder_resources: 3,
            initiator_depth: 1,
            flow_control: true,
            rnr_retry_count: 7,
            srq: true,
            remote_ca_guid: 42,
            target_ack_delay: 15,
        };
        let c = rep_event_to_ib(&rep);
        assert_eq!(c.rep.pdata_len as usize, REP_PRIVATE_DATA);
        assert_eq!(rep_event_from_ib(&c, &rep.private_data), rep);
        // A short private data field is zero-filled.
        let short = rep_event_from_ib(&c, b"re");
        assert_eq!(&short.private_data[..3], b"re\0");
    }
}
