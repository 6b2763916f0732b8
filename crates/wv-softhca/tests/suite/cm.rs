//! The soft CM: IB CM handshakes between two soft HCAs of a fabric, in the host's
//! deterministic mode (messages move only when the DPCs run, the clock only when a test moves
//! it). Each scenario runs on the CM directly and, where it says so, through the C face
//! (`c_cm_interface` read back by `wv-ci`'s `CiCm`), as the filter uses it.

use std::sync::Arc;
use std::sync::Mutex;

use crate::common::*;
use wv_abi::consts::{WV_ACCESS_REMOTE_ATOMIC, WV_ACCESS_REMOTE_READ, WV_ACCESS_REMOTE_WRITE};
use wv_abi::{IB_PATH_REC, NtStatus};
use wv_hal::cm::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

/// An owned copy of a CM event.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    ReqReceived,
    ReqError,
    Rep(CmRepEvent),
    RepError,
    Rtu(Vec<u8>),
    Dreq(Vec<u8>),
    DreqError,
    Drep(Vec<u8>),
    Rej(u16, Vec<u8>),
    Mra(u8),
    Other(u32),
}

#[derive(Default)]
struct Events(Mutex<Vec<Ev>>);

impl Events {
    fn take(&self) -> Vec<Ev> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

impl CmEventSink for Events {
    fn on_event(&self, event: CmEvent<'_>) {
        self.0.lock().unwrap().push(owned(event));
    }
}

/// An owned copy of `event`.
fn owned(event: CmEvent<'_>) -> Ev {
    {
        match event {
            CmEvent::ReqReceived => Ev::ReqReceived,
            CmEvent::ReqError => Ev::ReqError,
            CmEvent::RepReceived(r) => Ev::Rep(*r),
            CmEvent::RepError => Ev::RepError,
            CmEvent::RtuReceived { private_data } => Ev::Rtu(private_data.to_vec()),
            CmEvent::DreqReceived { private_data } => Ev::Dreq(private_data.to_vec()),
            CmEvent::DreqError => Ev::DreqError,
            CmEvent::DrepReceived { private_data } => Ev::Drep(private_data.to_vec()),
            CmEvent::RejReceived {
                reason,
                private_data,
                ..
            } => Ev::Rej(reason, private_data.to_vec()),
            CmEvent::MraReceived {
                service_timeout, ..
            } => Ev::Mra(service_timeout),
            CmEvent::Other(n) => Ev::Other(n),
        }
    }
}

fn sink() -> (KArc<Events>, KArc<dyn CmEventSink>) {
    let s = KArc::new(Events::default());
    (s.clone(), s.into())
}

const SID: u64 = 0x0106_1388;
/// The packet lifetime of the test paths (`4.096 µs × 2^13`).
const PKT_LIFE: u8 = 13;
/// The CM response time the REQs announce (`4.096 µs × 2^16` ≈ 268 ms).
const RESPONSE: u8 = 16;
const RETRIES: u8 = 3;

fn ib_time(exp: u8) -> u64 {
    4096 << exp
}
/// How long a side waits for an answer: response time + 2 × packet lifetime.
fn wait_ns() -> u64 {
    ib_time(RESPONSE) + 2 * ib_time(PKT_LIFE)
}

/// The path from `a` to `b` as an SA would return it.
fn path(a: &Node, b: &Node) -> IB_PATH_REC {
    IB_PATH_REC {
        dgid: b.hca.gid(),
        sgid: a.hca.gid(),
        dlid: b.hca.lid(1).to_be(),
        slid: a.hca.lid(1).to_be(),
        hop_flow_raw: 1u32.to_be(),
        num_path: 0x81,
        pkey: 0xFFFFu16.to_be(),
        mtu: 0x80 | 3,
        rate: 0x80 | 3,
        pkt_life: 0x80 | PKT_LIFE,
        ..IB_PATH_REC::default()
    }
}

fn req<'a>(path: &'a IB_PATH_REC, qpn: u32, pdata: &'a [u8]) -> CmReq<'a> {
    CmReq {
        service_id: SID,
        primary_path: path,
        qpn,
        params: CmReqParams {
            qp_type: QpType::Rc,
            starting_psn: 0x1111,
            max_cm_retries: RETRIES,
            responder_resources: 4,
            initiator_depth: 2,
            remote_cm_response_timeout: RESPONSE,
            flow_control: true,
            local_cm_response_timeout: RESPONSE,
            rnr_retry_count: 6,
            retry_count: 5,
            srq: false,
        },
        private_data: pdata,
    }
}

fn rep(qpn: u32, pdata: &[u8]) -> CmRep<'_> {
    CmRep {
        qpn,
        starting_psn: 0x2222,
        private_data: pdata,
        failover_accepted: 1,
        responder_resources: 2,
        initiator_depth: 1,
        flow_control: true,
        rnr_retry_count: 3,
        srq: false,
    }
}

/// Moves `qp` to RTS with the CM's attributes (the passive side's send PSN is its REP's).
fn move_qp<C: ConnectionManager>(node: &Node, qp: &Qp, cm: &C, id: &C::Id, sq_psn: Option<u32>) {
    for state in [QpState::Init, QpState::Rtr, QpState::Rts] {
        let mut m = cm.get_qp_attr(id, state).unwrap();
        if let (QpModify::Rts(rts), Some(psn)) = (&mut m, sq_psn) {
            rts.sq_psn = psn;
        }
        node.modify(qp, &m).unwrap();
    }
    assert_eq!(node.state(qp), QpState::Rts);
}

/// The full life of one connection, over any face of the two CMs: REQ with private data, the
/// request taken from the listen, both QPs moved with the CM's attributes, REP, RTU, a send
/// across, DREQ and DREP; every id destroyed and nothing left behind.
fn full_connection<C: ConnectionManager>(p: &HostPlatform, a: &Node, b: &Node, cm_a: &C, cm_b: &C) {
    let (ca, cb) = (a.cq(16), b.cq(16));
    let (qa, qb) = (a.qp(QpType::Rc, &ca), b.qp(QpType::Rc, &cb));
    let (listen_events, ls) = sink();
    let listener = cm_b.create_id(ls).unwrap();
    cm_b.listen(&listener, SID, &[], 0).unwrap();

    let (active_events, s) = sink();
    let active = cm_a.create_id(s).unwrap();
    let path = path(a, b);
    cm_a.send_req(&active, &req(&path, qa.uvp.qpn(), b"hello"))
        .unwrap();
    // Nothing is reported inside a call.
    assert!(listen_events.take().is_empty());
    p.run_until_idle();
    assert_eq!(listen_events.take(), vec![Ev::ReqReceived]);

    let (passive_events, s) = sink();
    let (passive, ev) = cm_b.get_request(&listener, s).unwrap();
    assert_eq!(ev.service_id, SID);
    assert_eq!(ev.remote_qpn, qa.uvp.qpn());
    assert_eq!(ev.params.starting_psn, 0x1111);
    assert_eq!(&ev.private_data[..5], b"hello");
    assert!(ev.private_data[5..].iter().all(|&x| x == 0));
    assert_eq!(
        ev.primary_path.sgid,
        b.hca.gid(),
        "the path as the receiver sees it"
    );
    assert_eq!(ev.primary_path.dgid, a.hca.gid());
    assert_eq!(ev.local_ca_guid, b.hca.guid());
    assert_eq!(ev.remote_ca_guid, a.hca.guid());
    assert_eq!(
        (
            ev.port,
            ev.params.responder_resources,
            ev.params.initiator_depth
        ),
        (1, 4, 2)
    );
    assert_eq!((ev.params.rnr_retry_count, ev.params.retry_count), (6, 5));
    let Err(NtStatus::NO_MORE_ENTRIES) = cm_b.get_request(&listener, sink().1) else {
        panic!("one request, taken once");
    };

    move_qp(b, &qb, cm_b, &passive, Some(0x2222));
    cm_b.send_rep(&passive, &rep(qb.uvp.qpn(), b"welcome"))
        .unwrap();
    p.run_until_idle();
    let evs = active_events.take();
    let [Ev::Rep(r)] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    assert_eq!((r.remote_qpn, r.starting_psn), (qb.uvp.qpn(), 0x2222));
    assert_eq!(&r.private_data[..7], b"welcome");
    assert_eq!(r.remote_ca_guid, b.hca.guid());
    move_qp(a, &qa, cm_a, &active, None);
    cm_a.send_rtu(&active, b"rtu").unwrap();
    p.run_until_idle();
    let evs = passive_events.take();
    assert!(
        matches!(evs.as_slice(), [Ev::Rtu(d)] if d.starts_with(b"rtu")),
        "{evs:?}"
    );

    // The QPs talk: the CM's PSNs, QP numbers and path fit together.
    let (m, rb) = mems(a, 64, b, 64);
    m.buf.write(0, b"ping").unwrap();
    post_recv(&qb, 9, rb.sge(0, 64));
    post_send(&qa, 1, m.sge(0, 4));
    p.run_until_idle();
    assert_eq!(poll_all(&ca)[0].status, WcStatus::Success);
    assert_eq!(poll_all(&cb)[0].status, WcStatus::Success);
    assert_eq!(&rb.buf.to_vec()[..4], b"ping");

    cm_a.send_dreq(&active, b"bye").unwrap();
    p.run_until_idle();
    let evs = passive_events.take();
    assert!(
        matches!(evs.as_slice(), [Ev::Dreq(d)] if d.starts_with(b"bye")),
        "{evs:?}"
    );
    cm_b.send_drep(&passive, b"ok").unwrap();
    p.run_until_idle();
    let evs = active_events.take();
    assert!(
        matches!(evs.as_slice(), [Ev::Drep(d)] if d.starts_with(b"ok")),
        "{evs:?}"
    );

    cm_a.destroy_id(active);
    cm_b.destroy_id(passive);
    cm_b.destroy_id(listener);
    p.run_until_idle();
    assert!(listen_events.take().is_empty());
    assert_eq!((a.hca.cm().ids(), b.hca.cm().ids()), (0, 0));
    assert_eq!(p.pending_timers(), 0, "no wait is left");
    settle(p);
}

#[test]
fn a_connection_from_req_to_drep() {
    let (p, _f, a, b) = deterministic_pair();
    full_connection(&p, &a, &b, &a.hca.cm(), &b.hca.cm());
}

#[test]
fn a_connection_through_the_c_tables() {
    let (p, _f, a, b) = deterministic_pair();
    let (ta, tb) = (
        a.hca.c_cm_interface().unwrap(),
        b.hca.c_cm_interface().unwrap(),
    );
    let (cm_a, cm_b) = (ta.open().unwrap(), tb.open().unwrap());
    full_connection(&p, &a, &b, &cm_a, &cm_b);
    drop((cm_a, cm_b));
    assert_eq!(ta.consumers() + tb.consumers(), 0);
}

#[test]
fn a_connection_on_one_device() {
    let (p, _f, a, _b) = deterministic_pair();
    // A second client of the same device: the connection loops back.
    let (ca, ca_events, out) = open_ca_logged(&*a.hca);
    let b = Node {
        platform: p.clone(),
        hca: a.hca.clone(),
        uvp: UvpContext::from_open_resp(&out).unwrap(),
        pd: a.hca.allocate_pd(&ca, &mut Umv::none()).unwrap(),
        ca,
        ca_events,
        pool: a.pool.clone(),
    };
    let cm = a.hca.cm();
    full_connection(&p, &a, &b, &cm, &cm);
}

#[test]
fn a_req_nobody_listens_for_is_rejected_as_an_invalid_service_id() {
    let (p, _f, a, b) = deterministic_pair();
    let cm = a.hca.cm();
    let (events, s) = sink();
    let id = cm.create_id(s).unwrap();
    let path = path(&a, &b);
    cm.send_req(&id, &req(&path, 5, &[])).unwrap();
    p.run_until_idle();
    assert_eq!(
        events.take(),
        vec![Ev::Rej(REJ_INVALID_SERVICE_ID, vec![0; REJ_PRIVATE_DATA])]
    );
    assert_eq!(p.pending_timers(), 0, "the REQ's wait ended with the REJ");
    // The id is done with: another REQ on it is refused.
    assert_eq!(
        cm.send_req(&id, &req(&path, 5, &[])),
        Err(NtStatus::INVALID_DEVICE_STATE)
    );
    cm.destroy_id(id);
    settle(&p);
}

#[test]
fn a_req_to_an_address_nobody_owns_times_out_after_its_retries() {
    let (p, f, a, b) = deterministic_pair();
    let cm = a.hca.cm();
    let (events, s) = sink();
    let id = cm.create_id(s).unwrap();
    let mut path = path(&a, &b);
    path.dgid[15] ^= 0x55;
    let t0 = p.now_ns();
    cm.send_req(&id, &req(&path, 5, &[])).unwrap();
    p.run_until_idle();
    // The REQ and each resend wait the full time; the last one ends it.
    for n in 1..=RETRIES {
        assert_eq!(p.next_timer_ns(), Some(t0 + u64::from(n) * wait_ns()));
        assert!(p.run_next_timer());
        assert!(events.take().is_empty(), "resend {n} is not the end");
    }
    assert!(p.run_next_timer());
    assert_eq!(p.now_ns(), t0 + u64::from(RETRIES + 1) * wait_ns());
    assert_eq!(events.take(), vec![Ev::ReqError]);
    assert_eq!(p.pending_timers(), 0);
    assert_eq!(
        f.stats().delivered,
        0,
        "nobody owns the address: nothing was delivered"
    );
    cm.destroy_id(id);
    settle(&p);
}

/// A listener on `b`, an active id on `a` with its REQ sent; returns the listen's events,
/// the active id's events, the listener and the active id.
#[allow(clippy::type_complexity)]
fn requested(
    p: &HostPlatform,
    a: &Node,
    b: &Node,
    cm_a: &SoftCm,
    cm_b: &SoftCm,
) -> (KArc<Events>, KArc<Events>, SoftCmId, SoftCmId) {
    let (listen_events, s) = sink();
    let listener = cm_b.create_id(s).unwrap();
    cm_b.listen(&listener, SID, &[], 0).unwrap();
    let (active_events, s) = sink();
    let active = cm_a.create_id(s).unwrap();
    let path = path(a, b);
    cm_a.send_req(&active, &req(&path, 7, &[])).unwrap();
    p.run_until_idle();
    (listen_events, active_events, listener, active)
}

/// [`requested`], and the passive side takes the request: the listener, the active side's
/// events and id, the passive side's events and id.
fn taken(
    p: &HostPlatform,
    a: &Node,
    b: &Node,
    cm_a: &SoftCm,
    cm_b: &SoftCm,
) -> (SoftCmId, KArc<Events>, SoftCmId, KArc<Events>, SoftCmId) {
    let (_l, active_events, listener, active) = requested(p, a, b, cm_a, cm_b);
    let (passive_events, s) = sink();
    let (passive, _) = cm_b.get_request(&listener, s).unwrap();
    (listener, active_events, active, passive_events, passive)
}

/// The passive side's REP (QPN 8, no private data) and the active side's RTU, each delivered.
fn establish(
    p: &HostPlatform,
    cm_a: &SoftCm,
    cm_b: &SoftCm,
    active: &SoftCmId,
    passive: &SoftCmId,
) {
    cm_b.send_rep(passive, &rep(8, &[])).unwrap();
    p.run_until_idle();
    cm_a.send_rtu(active, &[]).unwrap();
    p.run_until_idle();
}

/// The address vector of `path` as one side sees it, on `port`, for the path record of
/// [`the_qp_attributes_are_the_req_and_rep_as_each_side_sees_them`]: the hop limit is the low
/// byte of the hop/flow word and the flow label the 20 bits above it, the SL the low nibble of
/// the QoS word, the rate without its selector.
fn path_av(path: &IB_PATH_REC, port: u8) -> AddressVector {
    AddressVector {
        grh_valid: true,
        hop_limit: 0x40,
        traffic_class: 0x28,
        flow_label: 0xA_BCDE,
        sgid: path.sgid,
        dgid: path.dgid,
        dlid: u16::from_be(path.dlid),
        service_level: 5,
        path_bits: 0,
        static_rate: 6,
        port,
    }
}

/// What `get_qp_attr` gives each side (IBA 12.7, Linux's `cm_init_qp_*_attr`): INIT on the
/// connection's port, granting the peer RDMA reads, writes and atomics; RTR with the peer's QP
/// and starting PSN, the REQ's path as this side sees it, this side's responder resources and
/// the RNR NAK timer; RTS with this side's starting PSN, the REQ's retry count, the RNR retry
/// count the peer asked for, an ACK timeout of twice the packet lifetime (one more power of
/// two) and this side's initiator depth. The passive side's own values are the REQ's wishes
/// until its REP is sent, then the REP's.
#[test]
fn the_qp_attributes_are_the_req_and_rep_as_each_side_sees_them() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let listener = cm_b.create_id(sink().1).unwrap();
    cm_b.listen(&listener, SID, &[], 0).unwrap();
    let active = cm_a.create_id(sink().1).unwrap();
    let mut path = path(&a, &b);
    // Raw-traffic bit, flow label 0xABCDE, hop limit 0x40.
    path.hop_flow_raw = 0x8ABC_DE40u32.to_be();
    path.tclass = 0x28;
    // QoS class 0x123, SL 5.
    path.qos_class_sl = 0x1235u16.to_be();
    path.rate = 0x80 | 6;
    cm_a.send_req(&active, &req(&path, 0x51, &[])).unwrap();
    p.run_until_idle();
    let (passive, ev) = cm_b.get_request(&listener, sink().1).unwrap();

    // Twice the packet lifetime of 2^13 × 4.096 µs.
    let ack_timeout = PKT_LIFE + 1;
    let conn = |path: &IB_PATH_REC, rnr_retry_cnt| QpPath {
        av: path_av(path, 1),
        path_mtu: Some(Mtu::Mtu1024),
        local_ack_timeout: ack_timeout,
        seq_err_retry_cnt: 5,
        rnr_retry_cnt,
    };
    let rtr = |rq_psn, dest_qpn, primary, responder_resources| {
        QpModify::Rtr(QpRtr {
            rq_psn,
            dest_qpn,
            primary,
            responder_resources,
            rnr_nak_timeout: 12,
            ..QpRtr::default()
        })
    };
    let rts = |sq_psn, rnr_retry_cnt, initiator_depth, primary| {
        QpModify::Rts(QpRts {
            sq_psn,
            retry_cnt: 5,
            rnr_retry_cnt,
            local_ack_timeout: ack_timeout,
            initiator_depth,
            primary,
            port: 1,
            pkey_index: 0,
            ..QpRts::default()
        })
    };
    for (cm, id) in [(&cm_a, &active), (&cm_b, &passive)] {
        let Ok(QpModify::Init(init)) = cm.get_qp_attr(id, QpState::Init) else {
            panic!("INIT attributes");
        };
        assert_eq!((init.port, init.pkey_index), (1, 0));
        for access in [
            WV_ACCESS_REMOTE_READ,
            WV_ACCESS_REMOTE_WRITE,
            WV_ACCESS_REMOTE_ATOMIC,
        ] {
            assert_eq!(init.access & access, access, "{access:#x}");
        }
    }

    // The passive side before its REP: the REQ's RNR retry count is for its QP, the REQ's
    // initiator depth its responder resources and the REQ's responder resources its depth.
    let passive_path = conn(&ev.primary_path, 6);
    assert_eq!(
        cm_b.get_qp_attr(&passive, QpState::Rtr),
        Ok(rtr(0x1111, 0x51, passive_path, 2))
    );
    assert_eq!(
        cm_b.get_qp_attr(&passive, QpState::Rts),
        Ok(rts(0, 6, 4, passive_path))
    );
    // Its REP sent, its own values are the REP's.
    let reply = CmRep {
        responder_resources: 3,
        initiator_depth: 1,
        rnr_retry_count: 2,
        ..rep(0x52, &[])
    };
    cm_b.send_rep(&passive, &reply).unwrap();
    p.run_until_idle();
    assert_eq!(
        cm_b.get_qp_attr(&passive, QpState::Rtr),
        Ok(rtr(0x1111, 0x51, passive_path, 3))
    );
    assert_eq!(
        cm_b.get_qp_attr(&passive, QpState::Rts),
        Ok(rts(0x2222, 6, 1, passive_path))
    );
    // The active side: the REP's RNR retry count is for its QP.
    let active_path = conn(&path, 2);
    assert_eq!(
        cm_a.get_qp_attr(&active, QpState::Rtr),
        Ok(rtr(0x2222, 0x52, active_path, 4))
    );
    assert_eq!(
        cm_a.get_qp_attr(&active, QpState::Rts),
        Ok(rts(0x1111, 2, 2, active_path))
    );
    cm_a.destroy_id(active);
    cm_b.destroy_id(passive);
    cm_b.destroy_id(listener);
    settle(&p);
}

#[test]
fn a_lost_rep_is_sent_again_when_the_req_comes_again() {
    let (p, f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listener, active_events, active, passive_events, passive) =
        taken(&p, &a, &b, &cm_a, &cm_b);
    f.script(&[PacketFate::Drop]);
    cm_b.send_rep(&passive, &rep(8, b"again")).unwrap();
    p.run_until_idle();
    assert!(active_events.take().is_empty(), "the REP was lost");
    // The active side's wait ends first (its REQ went out first): it resends the REQ, and
    // the passive side answers the duplicate with its REP.
    assert!(p.run_next_timer());
    let evs = active_events.take();
    assert!(
        matches!(evs.as_slice(), [Ev::Rep(r)] if r.private_data.starts_with(b"again")),
        "{evs:?}"
    );
    assert!(
        passive_events.take().is_empty(),
        "no new request: a duplicate"
    );
    assert_eq!(cm_b.ids(), 2, "the listener and one connection");
    cm_a.send_rtu(&active, &[]).unwrap();
    p.run_until_idle();
    assert!(matches!(passive_events.take().as_slice(), [Ev::Rtu(_)]));
    assert_eq!(p.pending_timers(), 0);
    for (cm, id) in [(&cm_a, active), (&cm_b, passive), (&cm_b, listener)] {
        cm.destroy_id(id);
    }
    settle(&p);
}

#[test]
fn a_rep_never_acknowledged_is_a_rep_error_and_a_rej_to_the_peer() {
    let (p, f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listener, active_events, active, passive_events, passive) =
        taken(&p, &a, &b, &cm_a, &cm_b);
    cm_b.send_rep(&passive, &rep(8, &[])).unwrap();
    p.run_until_idle();
    assert!(matches!(active_events.take().as_slice(), [Ev::Rep(_)]));
    // The active side never answers (its consumer sits on the REP), and every resent REP is
    // lost on the way.
    f.script(&[PacketFate::Drop; RETRIES as usize]);
    for _ in 0..RETRIES {
        assert!(p.run_next_timer());
    }
    assert!(passive_events.take().is_empty());
    assert!(p.run_next_timer());
    assert_eq!(passive_events.take(), vec![Ev::RepError]);
    let evs = active_events.take();
    assert!(
        matches!(evs.as_slice(), [Ev::Rej(REJ_TIMEOUT, _)]),
        "{evs:?}"
    );
    for (cm, id) in [(&cm_a, active), (&cm_b, passive), (&cm_b, listener)] {
        cm.destroy_id(id);
    }
    settle(&p);
}

#[test]
fn a_dreq_nobody_answers_is_a_dreq_error() {
    let (p, f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listener, active_events, active, passive_events, passive) =
        taken(&p, &a, &b, &cm_a, &cm_b);
    establish(&p, &cm_a, &cm_b, &active, &passive);
    assert_eq!(active_events.take().len(), 1);
    assert_eq!(passive_events.take().len(), 1);
    // Every DREQ is lost.
    f.script(&[PacketFate::Drop; 1 + RETRIES as usize]);
    cm_a.send_dreq(&active, &[]).unwrap();
    p.run_until_idle();
    let t0 = p.now_ns();
    for _ in 0..=RETRIES {
        assert!(p.run_next_timer());
    }
    assert_eq!(p.now_ns(), t0 + u64::from(RETRIES + 1) * wait_ns());
    assert_eq!(active_events.take(), vec![Ev::DreqError]);
    assert!(passive_events.take().is_empty());
    // A DREP cannot answer a DREQ that never came.
    assert_eq!(
        cm_b.send_drep(&passive, &[]),
        Err(NtStatus::INVALID_DEVICE_STATE)
    );
    for (cm, id) in [(&cm_a, active), (&cm_b, passive), (&cm_b, listener)] {
        cm.destroy_id(id);
    }
    settle(&p);
}

#[test]
fn destroying_a_listen_rejects_the_requests_it_held() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listen_events, active_events, listener, active) = requested(&p, &a, &b, &cm_a, &cm_b);
    assert_eq!(listen_events.take(), vec![Ev::ReqReceived]);
    assert_eq!(cm_b.ids(), 2, "the listener and the queued request");
    cm_b.destroy_id(listener);
    p.run_until_idle();
    let evs = active_events.take();
    assert!(
        matches!(evs.as_slice(), [Ev::Rej(REJ_USER_DEFINED, _)]),
        "{evs:?}"
    );
    assert_eq!(cm_b.ids(), 0);
    assert!(listen_events.take().is_empty());
    cm_a.destroy_id(active);
    settle(&p);
}

#[test]
fn a_request_whose_sender_gives_up_before_it_is_taken_is_gone() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listen_events, _ae, listener, active) = requested(&p, &a, &b, &cm_a, &cm_b);
    assert_eq!(listen_events.take(), vec![Ev::ReqReceived]);
    // The active side goes: its REJ takes the request back.
    cm_a.destroy_id(active);
    p.run_until_idle();
    assert_eq!(cm_b.ids(), 1);
    let Err(NtStatus::NO_MORE_ENTRIES) = cm_b.get_request(&listener, sink().1) else {
        panic!("the request went");
    };
    cm_b.destroy_id(listener);
    settle(&p);
}

#[test]
fn destroying_a_connection_tells_the_peer() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listener, active_events, active, passive_events, passive) =
        taken(&p, &a, &b, &cm_a, &cm_b);
    establish(&p, &cm_a, &cm_b, &active, &passive);
    active_events.take();
    passive_events.take();
    // An established connection's id goes: the peer gets a DREQ.
    cm_a.destroy_id(active);
    p.run_until_idle();
    assert!(matches!(passive_events.take().as_slice(), [Ev::Dreq(_)]));
    cm_b.send_drep(&passive, &[]).unwrap();
    p.run_until_idle();
    for (cm, id) in [(&cm_b, passive), (&cm_b, listener)] {
        cm.destroy_id(id);
    }
    assert_eq!(p.pending_timers(), 0);
    settle(&p);
}

#[test]
fn mra_extends_the_wait() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (_l, active_events, listener, active) = requested(&p, &a, &b, &cm_a, &cm_b);
    let (_pe, s) = sink();
    let (passive, _) = cm_b.get_request(&listener, s).unwrap();
    let t0 = p.now_ns();
    cm_b.send_mra(&passive, 20, &[]).unwrap();
    p.run_until_idle();
    assert_eq!(active_events.take(), vec![Ev::Mra(20)]);
    assert_eq!(
        p.next_timer_ns(),
        Some(t0 + ib_time(20) + 2 * ib_time(PKT_LIFE)),
        "the wait is the MRA's"
    );
    cm_b.send_rep(&passive, &rep(8, &[])).unwrap();
    p.run_until_idle();
    assert!(matches!(active_events.take().as_slice(), [Ev::Rep(_)]));
    cm_b.destroy_id(passive);
    cm_a.destroy_id(active);
    cm_b.destroy_id(listener);
    settle(&p);
}

#[test]
fn listens_match_service_id_and_the_compared_address() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    // IP-CM headers: version 0, IPv4, a source port, source and destination addresses.
    let header = |dst: [u8; 4]| {
        let mut h = [0u8; 36];
        h[1] = 0x40;
        h[2..4].copy_from_slice(&5000u16.to_be_bytes());
        h[16..20].copy_from_slice(&[10, 0, 1, 1]);
        h[32..36].copy_from_slice(&dst);
        h
    };
    let (any_events, s) = sink();
    let any = cm_b.create_id(s).unwrap();
    cm_b.listen(&any, SID, &[], 0).unwrap();
    let (one_events, s) = sink();
    let one = cm_b.create_id(s).unwrap();
    cm_b.listen(&one, SID, &header([10, 0, 0, 1]), 4).unwrap();
    // The same listen again is refused; a listening id cannot listen twice.
    let dup = cm_b.create_id(sink().1).unwrap();
    assert_eq!(
        cm_b.listen(&dup, SID, &header([10, 0, 0, 1]), 4),
        Err(NtStatus::INVALID_PARAMETER)
    );
    assert_eq!(
        cm_b.listen(&one, SID + 1, &[], 0),
        Err(NtStatus::INVALID_DEVICE_STATE)
    );
    let path = path(&a, &b);
    let mut ids = vec![];
    for dst in [[10, 0, 0, 1], [10, 0, 0, 2]] {
        let id = cm_a.create_id(sink().1).unwrap();
        cm_a.send_req(&id, &req(&path, 7, &header(dst))).unwrap();
        ids.push(id);
    }
    p.run_until_idle();
    // The request for 10.0.0.1 goes to its listen, the other one to the wildcard.
    assert_eq!(one_events.take(), vec![Ev::ReqReceived]);
    assert_eq!(any_events.take(), vec![Ev::ReqReceived]);
    let (_, ev) = cm_b
        .get_request(&one, sink().1)
        .map(|(id, ev)| {
            cm_b.destroy_id(id);
            ((), ev)
        })
        .unwrap();
    assert_eq!(ev.private_data[32..36], [10, 0, 0, 1]);
    for id in ids {
        cm_a.destroy_id(id);
    }
    for id in [any, one, dup] {
        cm_b.destroy_id(id);
    }
    p.run_until_idle();
    assert_eq!((cm_a.ids(), cm_b.ids()), (0, 0));
    settle(&p);
}

#[test]
fn wrong_states_and_sizes_are_refused() {
    let (p, _f, a, b) = deterministic_pair();
    let cm = a.hca.cm();
    let id = cm.create_id(sink().1).unwrap();
    let path = path(&a, &b);
    assert_eq!(
        cm.send_rep(&id, &rep(1, &[])),
        Err(NtStatus::INVALID_DEVICE_STATE)
    );
    assert_eq!(cm.send_rtu(&id, &[]), Err(NtStatus::INVALID_DEVICE_STATE));
    assert_eq!(cm.send_dreq(&id, &[]), Err(NtStatus::INVALID_DEVICE_STATE));
    assert_eq!(cm.send_drep(&id, &[]), Err(NtStatus::INVALID_DEVICE_STATE));
    assert_eq!(
        cm.send_rej(&id, 28, &[], &[]),
        Err(NtStatus::INVALID_DEVICE_STATE)
    );
    assert_eq!(
        cm.send_mra(&id, 1, &[]),
        Err(NtStatus::INVALID_DEVICE_STATE)
    );
    assert_eq!(
        cm.get_qp_attr(&id, QpState::Init),
        Err(NtStatus::INVALID_DEVICE_STATE)
    );
    assert_eq!(
        cm.send_req(&id, &req(&path, 1, &[0; REQ_PRIVATE_DATA + 1])),
        Err(NtStatus::INVALID_PARAMETER)
    );
    let mut foreign = path;
    foreign.sgid = [9; 16];
    assert_eq!(
        cm.send_req(&id, &req(&foreign, 1, &[])),
        Err(NtStatus::INVALID_PARAMETER),
        "no port of this device owns the source GID"
    );
    cm.send_req(&id, &req(&path, 1, &[])).unwrap();
    assert!(cm.get_qp_attr(&id, QpState::Init).is_ok());
    assert_eq!(
        cm.get_qp_attr(&id, QpState::Rtr),
        Err(NtStatus::INVALID_DEVICE_STATE),
        "no REP yet"
    );
    assert_eq!(
        cm.get_qp_attr(&id, QpState::Sqd),
        Err(NtStatus::INVALID_PARAMETER)
    );
    cm.destroy_id(id);
    settle(&p);
}

#[test]
fn removal_stops_the_cm() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (_l, active_events, listener, active) = requested(&p, &a, &b, &cm_a, &cm_b);
    b.hca.surprise_remove();
    assert_eq!(
        cm_b.create_id(sink().1).err(),
        Some(NtStatus::DEVICE_REMOVED)
    );
    assert_eq!(
        cm_b.get_request(&listener, sink().1).err(),
        Some(NtStatus::DEVICE_REMOVED)
    );
    // The peer's REQ retries find nobody and end as a timeout.
    while p.run_next_timer() {}
    assert_eq!(active_events.take(), vec![Ev::ReqError]);
    cm_a.destroy_id(active);
    cm_b.destroy_id(listener);
    settle(&p);
}

/// The CM behind an `Arc` is the CM (what the direct lower edge hands the core).
#[test]
fn a_shared_cm_is_a_cm() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (Arc::new(a.hca.cm()), Arc::new(b.hca.cm()));
    full_connection(&p, &a, &b, &cm_a, &cm_b);
}

#[test]
fn a_req_for_a_gid_of_the_second_port_arrives_on_that_port() {
    let p = HostPlatform::deterministic();
    let a = Node::simple(&p);
    let b = Node::configured(&p, "two ports", |c| c.ports = 2);
    let _fabric = fabric_of(&a, &b);
    // A GID only port 2 has: the port the request is for is found by its GID (GRH present).
    let index = b.hca.add_ipv4_gid(2, [10, 0, 0, 2]).unwrap();
    let gid = b.hca.query_gid(2, index).unwrap();
    assert_ne!(gid, b.hca.gid());
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listen_events, ls) = sink();
    let listener = cm_b.create_id(ls).unwrap();
    cm_b.listen(&listener, SID, &[], 0).unwrap();
    let (_active_events, s) = sink();
    let active = cm_a.create_id(s).unwrap();
    let mut to_port_2 = path(&a, &b);
    to_port_2.dgid = gid;
    cm_a.send_req(&active, &req(&to_port_2, 0x123, b""))
        .unwrap();
    p.run_until_idle();
    assert_eq!(listen_events.take(), vec![Ev::ReqReceived]);
    let (passive, ev) = cm_b.get_request(&listener, sink().1).unwrap();
    assert_eq!(
        ev.primary_path.sgid, gid,
        "the path as the receiver sees it"
    );
    assert_eq!(ev.port, 2);
    // The passive side's QP goes on that port, through every move.
    let Ok(QpModify::Init(init)) = cm_b.get_qp_attr(&passive, QpState::Init) else {
        panic!("INIT attributes");
    };
    let Ok(QpModify::Rtr(rtr)) = cm_b.get_qp_attr(&passive, QpState::Rtr) else {
        panic!("RTR attributes");
    };
    let Ok(QpModify::Rts(rts)) = cm_b.get_qp_attr(&passive, QpState::Rts) else {
        panic!("RTS attributes");
    };
    assert_eq!(
        (
            init.port,
            rtr.primary.av.port,
            rts.port,
            rts.primary.av.port
        ),
        (2, 2, 2, 2)
    );
}

#[test]
fn each_id_has_its_own_communication_id_and_a_freed_one_is_not_reused_at_once() {
    let (p, _f, a, _b) = deterministic_pair();
    let cm = a.hca.cm();
    let first = cm.create_id(sink().1).unwrap();
    let second = cm.create_id(sink().1).unwrap();
    let (c1, c2) = (first.comm_id(), second.comm_id());
    assert_ne!(c1, c2);
    // A message still on its way to a destroyed id must not reach the next one made.
    cm.destroy_id(first);
    let third = cm.create_id(sink().1).unwrap();
    assert_ne!(third.comm_id(), c1);
    assert_ne!(third.comm_id(), c2);
    cm.destroy_id(second);
    cm.destroy_id(third);
    settle(&p);
}

#[test]
fn private_data_may_fill_its_field() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listen_events, s) = sink();
    let listener = cm_b.create_id(s).unwrap();
    cm_b.listen(&listener, SID, &[], 0).unwrap();
    let active = cm_a.create_id(sink().1).unwrap();
    let path = path(&a, &b);
    let full = [0x5A; REQ_PRIVATE_DATA];
    cm_a.send_req(&active, &req(&path, 7, &full)).unwrap();
    p.run_until_idle();
    assert_eq!(listen_events.take(), vec![Ev::ReqReceived]);
    let (passive, ev) = cm_b.get_request(&listener, sink().1).unwrap();
    assert_eq!(ev.private_data, full);
    for (cm, id) in [(&cm_a, active), (&cm_b, passive), (&cm_b, listener)] {
        cm.destroy_id(id);
    }
    settle(&p);
}

#[test]
fn a_req_carries_a_24_bit_psn_and_at_most_15_retries() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let listener = cm_b.create_id(sink().1).unwrap();
    cm_b.listen(&listener, SID, &[], 0).unwrap();
    let active = cm_a.create_id(sink().1).unwrap();
    let path = path(&a, &b);
    let mut r = req(&path, 7, &[]);
    // IBA 12.6.5: Starting PSN is a 24-bit field and Max CM Retries a 4-bit one.
    r.params.starting_psn = 0xAB12_3456;
    r.params.max_cm_retries = 200;
    cm_a.send_req(&active, &r).unwrap();
    p.run_until_idle();
    let (passive, ev) = cm_b.get_request(&listener, sink().1).unwrap();
    assert_eq!(ev.params.starting_psn, 0x12_3456);
    assert_eq!(ev.params.max_cm_retries, 15);
    for (cm, id) in [(&cm_a, active), (&cm_b, passive), (&cm_b, listener)] {
        cm.destroy_id(id);
    }
    settle(&p);
}

#[test]
fn only_the_side_that_received_the_req_replies() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listener, active_events, active, passive_events, passive) =
        taken(&p, &a, &b, &cm_a, &cm_b);
    assert_eq!(
        cm_a.send_rep(&active, &rep(7, &[])),
        Err(NtStatus::INVALID_DEVICE_STATE),
        "the active side sent the REQ"
    );
    establish(&p, &cm_a, &cm_b, &active, &passive);
    assert_eq!(
        cm_b.send_rep(&passive, &rep(8, &[])),
        Err(NtStatus::INVALID_DEVICE_STATE),
        "connected"
    );
    p.run_until_idle();
    assert_eq!(active_events.take().len(), 1, "the one REP");
    assert_eq!(passive_events.take().len(), 1, "the RTU");
    for (cm, id) in [(&cm_a, active), (&cm_b, passive), (&cm_b, listener)] {
        cm.destroy_id(id);
    }
    settle(&p);
}

#[test]
fn destroying_an_id_mid_handshake_rejects_and_mid_disconnect_replies() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    // REQ received: the passive side goes, the active side gets a consumer REJ.
    let (listener, active_events, active, _pe, passive) = taken(&p, &a, &b, &cm_a, &cm_b);
    cm_b.destroy_id(passive);
    p.run_until_idle();
    let evs = active_events.take();
    assert!(
        matches!(evs.as_slice(), [Ev::Rej(REJ_USER_DEFINED, _)]),
        "{evs:?}"
    );
    cm_a.destroy_id(active);
    cm_b.destroy_id(listener);

    // REP received: the active side goes, the passive side gets a consumer REJ.
    let (listener, active_events, active, passive_events, passive) =
        taken(&p, &a, &b, &cm_a, &cm_b);
    cm_b.send_rep(&passive, &rep(8, &[])).unwrap();
    p.run_until_idle();
    assert!(matches!(active_events.take().as_slice(), [Ev::Rep(_)]));
    cm_a.destroy_id(active);
    p.run_until_idle();
    let evs = passive_events.take();
    assert!(
        matches!(evs.as_slice(), [Ev::Rej(REJ_USER_DEFINED, _)]),
        "{evs:?}"
    );
    cm_b.destroy_id(passive);
    cm_b.destroy_id(listener);

    // DREQ received: the id that goes answers it with a DREP.
    let (listener, active_events, active, passive_events, passive) =
        taken(&p, &a, &b, &cm_a, &cm_b);
    establish(&p, &cm_a, &cm_b, &active, &passive);
    active_events.take();
    passive_events.take();
    cm_a.send_dreq(&active, &[]).unwrap();
    p.run_until_idle();
    assert!(matches!(passive_events.take().as_slice(), [Ev::Dreq(_)]));
    cm_b.destroy_id(passive);
    p.run_until_idle();
    let evs = active_events.take();
    assert!(matches!(evs.as_slice(), [Ev::Drep(_)]), "{evs:?}");
    cm_a.destroy_id(active);
    cm_b.destroy_id(listener);
    p.run_until_idle();
    assert_eq!(p.pending_timers(), 0);
    assert_eq!((cm_a.ids(), cm_b.ids()), (0, 0));
    settle(&p);
}

#[test]
fn a_lost_mra_is_sent_again_when_the_req_comes_again() {
    let (p, f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listener, active_events, active, _pe, passive) = taken(&p, &a, &b, &cm_a, &cm_b);
    f.script(&[PacketFate::Drop]);
    cm_b.send_mra(&passive, 20, &[]).unwrap();
    p.run_until_idle();
    assert!(active_events.take().is_empty(), "the MRA was lost");
    // The REQ's wait ends: it is resent, and the duplicate is answered with the MRA.
    assert!(p.run_next_timer());
    assert_eq!(active_events.take(), vec![Ev::Mra(20)]);
    for (cm, id) in [(&cm_a, active), (&cm_b, passive), (&cm_b, listener)] {
        cm.destroy_id(id);
    }
    settle(&p);
}

#[test]
fn a_lost_rtu_is_sent_again_when_the_rep_comes_again() {
    let (p, f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listener, active_events, active, passive_events, passive) =
        taken(&p, &a, &b, &cm_a, &cm_b);
    cm_b.send_rep(&passive, &rep(8, &[])).unwrap();
    p.run_until_idle();
    assert!(matches!(active_events.take().as_slice(), [Ev::Rep(_)]));
    f.script(&[PacketFate::Drop]);
    cm_a.send_rtu(&active, b"rtu").unwrap();
    p.run_until_idle();
    assert!(passive_events.take().is_empty(), "the RTU was lost");
    // The REP's wait ends: it is resent, and the connected side answers with its RTU again.
    assert!(p.run_next_timer());
    let evs = passive_events.take();
    assert!(
        matches!(evs.as_slice(), [Ev::Rtu(d)] if d.starts_with(b"rtu")),
        "{evs:?}"
    );
    assert!(active_events.take().is_empty());
    assert_eq!(p.pending_timers(), 0);
    for (cm, id) in [(&cm_a, active), (&cm_b, passive), (&cm_b, listener)] {
        cm.destroy_id(id);
    }
    settle(&p);
}

#[test]
fn a_lost_drep_is_sent_again_when_the_dreq_comes_again() {
    let (p, f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listener, active_events, active, passive_events, passive) =
        taken(&p, &a, &b, &cm_a, &cm_b);
    establish(&p, &cm_a, &cm_b, &active, &passive);
    active_events.take();
    passive_events.take();
    cm_a.send_dreq(&active, &[]).unwrap();
    p.run_until_idle();
    assert!(matches!(passive_events.take().as_slice(), [Ev::Dreq(_)]));
    f.script(&[PacketFate::Drop]);
    cm_b.send_drep(&passive, b"drep").unwrap();
    p.run_until_idle();
    assert!(active_events.take().is_empty(), "the DREP was lost");
    // The DREQ's wait ends: it is resent, and the side in timewait answers with its DREP.
    assert!(p.run_next_timer());
    let evs = active_events.take();
    assert!(
        matches!(evs.as_slice(), [Ev::Drep(d)] if d.starts_with(b"drep")),
        "{evs:?}"
    );
    assert!(passive_events.take().is_empty());
    assert_eq!(p.pending_timers(), 0);
    for (cm, id) in [(&cm_a, active), (&cm_b, passive), (&cm_b, listener)] {
        cm.destroy_id(id);
    }
    settle(&p);
}

#[test]
fn a_listen_compares_only_the_fields_its_mask_selects() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    // IP-CM headers (`ib_cm_rdma_req_t`): version and IP version, source port, source and
    // destination addresses.
    let header = |version: u8, port: u16, src: u8, dst: u8| {
        let mut h = [0u8; 36];
        h[0] = version;
        h[1] = 0x40;
        h[2..4].copy_from_slice(&port.to_be_bytes());
        h[16..20].copy_from_slice(&[10, 0, 1, src]);
        h[32..36].copy_from_slice(&[10, 0, 0, dst]);
        h
    };
    let listened = header(0, 5000, 1, 1);
    const PORT: u8 = 1;
    const SRC: u8 = 2;
    const DST: u8 = 4;
    let path = path(&a, &b);
    for (mask, req_header, taken) in [
        // Version and IP version always count.
        (0, header(0, 6000, 2, 2), true),
        (0, header(1, 5000, 1, 1), false),
        (PORT, header(0, 5000, 2, 2), true),
        (PORT, header(0, 6000, 1, 1), false),
        (SRC, header(0, 6000, 1, 2), true),
        (SRC, header(0, 5000, 2, 1), false),
        (DST, header(0, 6000, 2, 1), true),
        (DST, header(0, 5000, 1, 2), false),
        (PORT | SRC | DST, listened, true),
    ] {
        let (listen_events, s) = sink();
        let listener = cm_b.create_id(s).unwrap();
        cm_b.listen(&listener, SID, &listened, mask).unwrap();
        let (active_events, s) = sink();
        let active = cm_a.create_id(s).unwrap();
        cm_a.send_req(&active, &req(&path, 7, &req_header)).unwrap();
        p.run_until_idle();
        let case = format!("mask {mask}, request {req_header:?}");
        if taken {
            assert_eq!(listen_events.take(), vec![Ev::ReqReceived], "{case}");
            assert!(active_events.take().is_empty(), "{case}");
        } else {
            assert!(listen_events.take().is_empty(), "{case}");
            let evs = active_events.take();
            assert!(
                matches!(evs.as_slice(), [Ev::Rej(REJ_INVALID_SERVICE_ID, _)]),
                "{case}: {evs:?}"
            );
        }
        cm_a.destroy_id(active);
        cm_b.destroy_id(listener);
        p.run_until_idle();
    }
    assert_eq!((cm_a.ids(), cm_b.ids()), (0, 0));
    settle(&p);
}

#[test]
fn a_listen_compare_may_be_as_long_as_the_reqs_private_data() {
    let (p, _f, _a, b) = deterministic_pair();
    let cm = b.hca.cm();
    let id = cm.create_id(sink().1).unwrap();
    assert_eq!(
        cm.listen(&id, SID, &[0; REQ_PRIVATE_DATA + 1], 0),
        Err(NtStatus::INVALID_PARAMETER)
    );
    cm.listen(&id, SID, &[0; REQ_PRIVATE_DATA], 0).unwrap();
    cm.destroy_id(id);
    settle(&p);
}

#[test]
fn a_removed_device_sends_nothing() {
    let (p, _f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (listener, active_events, active, passive_events, passive) =
        taken(&p, &a, &b, &cm_a, &cm_b);
    establish(&p, &cm_a, &cm_b, &active, &passive);
    active_events.take();
    passive_events.take();
    // The passive device is gone: destroying its id sends no DREQ from it.
    b.hca.surprise_remove();
    cm_b.destroy_id(passive);
    p.run_until_idle();
    assert!(active_events.take().is_empty());
    cm_a.destroy_id(active);
    cm_b.destroy_id(listener);
    settle(&p);
}

std::thread_local! {
    /// Set while this thread is inside a call on a CM (see [`on_worker`]).
    static IN_CALL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// An event, the thread it came on, and whether that thread was inside a CM call then.
type SeenOn = (Ev, std::thread::ThreadId, bool);

#[derive(Default)]
struct EventsOn(Mutex<Vec<SeenOn>>);

impl CmEventSink for EventsOn {
    fn on_event(&self, event: CmEvent<'_>) {
        let at = (std::thread::current().id(), IN_CALL.with(|c| c.get()));
        self.0.lock().unwrap().push((owned(event), at.0, at.1));
    }
}

fn sink_on() -> (KArc<EventsOn>, KArc<dyn CmEventSink>) {
    let s = KArc::new(EventsOn::default());
    (s.clone(), s.into())
}

/// A CM call made from a work item, as the filter makes them (a driver callback at
/// PASSIVE_LEVEL), marked as inside the call while it runs. Returns the worker's thread once
/// the pool is idle again.
fn on_worker(p: &HostPlatform, call: impl FnOnce() + Send + 'static) -> std::thread::ThreadId {
    type Call = Box<dyn FnOnce() + Send>;
    struct Work(Mutex<Option<Call>>, Mutex<Option<std::thread::ThreadId>>);
    impl WorkItem for Work {
        fn run(&self) {
            *self.1.lock().unwrap() = Some(std::thread::current().id());
            if let Some(call) = self.0.lock().unwrap().take() {
                IN_CALL.with(|c| c.set(true));
                call();
                IN_CALL.with(|c| c.set(false));
            }
        }
    }
    let work = KArc::new(Work(Mutex::new(Some(Box::new(call))), Mutex::new(None)));
    p.queue_work(work.clone().into()).unwrap();
    p.run_until_idle();
    let worker = *work.1.lock().unwrap();
    worker.expect("the work item ran")
}

/// On the threaded host, each message is handled on the thread of the call that sent it,
/// after that call returned (never inside it), and the events come in the protocol's order:
/// a whole connection, REQ to DREP, with every call made from a work item. Nothing is left
/// queued or armed at the end.
#[test]
fn threaded_messages_are_handled_on_the_senders_thread_after_its_call() {
    let p = HostPlatform::threaded(2);
    let (_f, a, b) = pair(&p);
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    let (ca, cb) = (a.cq(16), b.cq(16));
    let (qa, qb) = (a.qp(QpType::Rc, &ca), b.qp(QpType::Rc, &cb));
    let (listen_events, ls) = sink_on();
    let listener = cm_b.create_id(ls).unwrap();
    cm_b.listen(&listener, SID, &[], 0).unwrap();
    let (active_events, s) = sink_on();
    let active = Arc::new(cm_a.create_id(s).unwrap());
    let take = |e: &EventsOn| std::mem::take(&mut *e.0.lock().unwrap());

    let (cm, id, path, qpn) = (a.hca.cm(), active.clone(), path(&a, &b), qa.uvp.qpn());
    let sender = on_worker(&p, move || {
        cm.send_req(&*id, &req(&path, qpn, b"hello")).unwrap();
    });
    assert_eq!(take(&listen_events), vec![(Ev::ReqReceived, sender, false)]);

    let (passive_events, s) = sink_on();
    let (passive, _) = cm_b.get_request(&listener, s).unwrap();
    let passive = Arc::new(passive);
    move_qp(&b, &qb, &cm_b, &*passive, Some(0x2222));
    let (cm, id, qpn) = (b.hca.cm(), passive.clone(), qb.uvp.qpn());
    let sender = on_worker(&p, move || {
        cm.send_rep(&*id, &rep(qpn, b"welcome")).unwrap()
    });
    let evs = take(&active_events);
    assert!(
        matches!(evs.as_slice(), [(Ev::Rep(_), t, false)] if *t == sender),
        "{evs:?}"
    );
    move_qp(&a, &qa, &cm_a, &*active, None);

    let mut senders = Vec::new();
    let (cm, id) = (a.hca.cm(), active.clone());
    senders.push(on_worker(&p, move || cm.send_rtu(&*id, b"rtu").unwrap()));
    let (cm, id) = (a.hca.cm(), active.clone());
    senders.push(on_worker(&p, move || cm.send_dreq(&*id, b"bye").unwrap()));
    let (cm, id) = (b.hca.cm(), passive.clone());
    senders.push(on_worker(&p, move || cm.send_drep(&*id, b"ok").unwrap()));
    let kinds = |evs: Vec<SeenOn>| {
        evs.into_iter()
            .map(|(e, t, inside)| {
                let kind = match e {
                    Ev::Rtu(_) => "RTU",
                    Ev::Dreq(_) => "DREQ",
                    Ev::Drep(_) => "DREP",
                    _ => "other",
                };
                (kind, t, inside)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        kinds(take(&passive_events)),
        vec![("RTU", senders[0], false), ("DREQ", senders[1], false)]
    );
    assert_eq!(
        kinds(take(&active_events)),
        vec![("DREP", senders[2], false)]
    );

    let (Ok(active), Ok(passive)) = (Arc::try_unwrap(active), Arc::try_unwrap(passive)) else {
        panic!("an id is still held");
    };
    cm_a.destroy_id(active);
    cm_b.destroy_id(passive);
    cm_b.destroy_id(listener);
    p.run_until_idle();
    assert!(take(&listen_events).is_empty());
    assert_eq!((a.hca.cm().ids(), b.hca.cm().ids()), (0, 0));
    assert_eq!(p.pending_timers(), 0, "no wait is left");
    settle(&p);
}
