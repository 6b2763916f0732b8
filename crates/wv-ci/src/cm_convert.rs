//! Value conversions between `wv-hal`'s connection-manager types and the C structures of
//! `iba_cm_interface`, both ways: [`crate::cm_import`] turns Rust calls into C ones and C
//! events into Rust ones, [`crate::cm_export`] the reverse.
//!
//! Byte order: `wv-hal` holds QP numbers, PSNs, service ids and reject reasons in host order;
//! the C structures hold them as `net*_t`. GUIDs pass as stored; path records are wire order on
//! both sides and are copied field by field.

use wv_abi::IB_PATH_REC;
use wv_hal::cm::{REP_PRIVATE_DATA, REQ_PRIVATE_DATA};
use wv_hal::{CmRepEvent, CmReqEvent, CmReqParams, QpType};

use crate::cm::*;
use crate::convert::{qp_type_from_ib, qp_type_to_ib};
use crate::ib_types::*;

/// The C path record of a wire-order one.
pub fn path_to_ib(p: &IB_PATH_REC) -> ib_path_rec_t {
    ib_path_rec_t {
        service_id: p.service_id,
        dgid: ib_gid_t { raw: p.dgid },
        sgid: ib_gid_t { raw: p.sgid },
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
}

/// The wire-order path record of a C one.
pub fn path_from_ib(p: &ib_path_rec_t) -> IB_PATH_REC {
    // SAFETY: every view of the packed GID union is 16 plain bytes.
    let dgid = unsafe { p.dgid.raw };
    // SAFETY: as above.
    let sgid = unsafe { p.sgid.raw };
    IB_PATH_REC {
        service_id: p.service_id,
        dgid,
        sgid,
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
}

/// `iba_cm_req_event` of a received request (the C side's view).
pub fn req_event_to_ib(r: &CmReqEvent) -> iba_cm_req_event {
    let mut out = iba_cm_req_event::zeroed();
    out.service_id = r.service_id.to_be();
    out.primary_path = path_to_ib(&r.primary_path);
    out.qpn = r.remote_qpn.to_be();
    out.qp_type = qp_type_to_ib(r.params.qp_type);
    out.starting_psn = r.params.starting_psn.to_be();
    out.pdata = r.private_data;
    out.max_cm_retries = r.params.max_cm_retries;
    out.resp_res = r.params.responder_resources;
    out.init_depth = r.params.initiator_depth;
    out.remote_resp_timeout = r.params.remote_cm_response_timeout;
    out.flow_ctrl = u8::from(r.params.flow_control);
    out.local_resp_timeout = r.params.local_cm_response_timeout;
    out.rnr_retry_cnt = r.params.rnr_retry_count;
    out.retry_cnt = r.params.retry_count;
    out.srq = u8::from(r.params.srq);
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
        params: CmReqParams {
            qp_type: qp_type_from_ib(r.qp_type).unwrap_or(QpType::Rc),
            starting_psn: u32::from_be(r.starting_psn) & 0x00FF_FFFF,
            max_cm_retries: r.max_cm_retries,
            responder_resources: r.resp_res,
            initiator_depth: r.init_depth,
            remote_cm_response_timeout: r.remote_resp_timeout,
            flow_control: r.flow_ctrl != 0,
            local_cm_response_timeout: r.local_resp_timeout,
            rnr_retry_count: r.rnr_retry_cnt,
            retry_count: r.retry_cnt,
            srq: r.srq != 0,
        },
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
