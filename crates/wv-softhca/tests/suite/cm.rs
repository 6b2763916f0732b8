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

/// Checks that what a sink saw (`evs`, taken from it) is exactly what the pattern matches,
/// and shows it when not.
macro_rules! assert_saw {
    ($evs:expr, $($pattern:tt)+) => {{
        let evs = $evs;
        assert!(matches!(evs.as_slice(), $($pattern)+), "{evs:?}");
    }};
}

/// An id of `cm` listening for [`SID`] where the REQ's private data at `offset` is `compare`
/// (none: any), with its events.
fn listener<C: ConnectionManager>(cm: &C, compare: &[u8], offset: u8) -> (KArc<Events>, C::Id) {
    let (events, s) = sink();
    let id = cm.create_id(s).unwrap();
    cm.listen(&id, SID, compare, offset).unwrap();
    (events, id)
}

/// An id of `cm` that has sent `req` (still on its way), with its events.
fn requester<C: ConnectionManager>(cm: &C, req: &CmReq<'_>) -> (KArc<Events>, C::Id) {
    let (events, s) = sink();
    let id = cm.create_id(s).unwrap();
    cm.send_req(&id, req).unwrap();
    (events, id)
}

/// The full life of one connection, over any face of the two CMs: REQ with private data, the
/// request taken from the listen, both QPs moved with the CM's attributes, REP, RTU, a send
/// across, DREQ and DREP; every id destroyed and nothing left behind.
fn full_connection<C: ConnectionManager>(p: &HostPlatform, a: &Node, b: &Node, cm_a: &C, cm_b: &C) {
    let (ca, cb) = two_cqs(a, b, 16);
    let (qa, qb) = (a.qp(QpType::Rc, &ca), b.qp(QpType::Rc, &cb));
    let (listen_events, listener) = listener(cm_b, &[], 0);
    let path = path(a, b);
    let (active_events, active) = requester(cm_a, &req(&path, qa.uvp.qpn(), b"hello"));
    // Nothing is reported inside a call.
    assert!(listen_events.take().is_empty());
    assert_eq!(delivered(p, &listen_events), vec![Ev::ReqReceived]);

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
    let evs = delivered(p, &active_events);
    let [Ev::Rep(r)] = evs.as_slice() else {
        panic!("{evs:?}")
    };
    assert_eq!((r.remote_qpn, r.starting_psn), (qb.uvp.qpn(), 0x2222));
    assert_eq!(&r.private_data[..7], b"welcome");
    assert_eq!(r.remote_ca_guid, b.hca.guid());
    move_qp(a, &qa, cm_a, &active, None);
    cm_a.send_rtu(&active, b"rtu").unwrap();
    assert_saw!(delivered(p, &passive_events), [Ev::Rtu(d)] if d.starts_with(b"rtu"));

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
    assert_saw!(delivered(p, &passive_events), [Ev::Dreq(d)] if d.starts_with(b"bye"));
    cm_b.send_drep(&passive, b"ok").unwrap();
    assert_saw!(delivered(p, &active_events), [Ev::Drep(d)] if d.starts_with(b"ok"));

    cm_a.destroy_id(active);
    cm_b.destroy_id(passive);
    cm_b.destroy_id(listener);
    assert!(delivered(p, &listen_events).is_empty());
    assert_eq!((a.hca.cm().ids(), b.hca.cm().ids()), (0, 0));
    assert_eq!(p.pending_timers(), 0, "no wait is left");
    settle(p);
}

/// What `events` saw once the DPCs have run (the messages sent so far delivered).
fn delivered(p: &HostPlatform, events: &Events) -> Vec<Ev> {
    p.run_until_idle();
    events.take()
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
    let b = a.another_client();
    let cm = a.hca.cm();
    full_connection(&p, &a, &b, &cm, &cm);
}

#[test]
fn a_req_nobody_listens_for_is_rejected_as_an_invalid_service_id() {
    let (p, _f, a, b) = deterministic_pair();
    let cm = a.hca.cm();
    let path = path(&a, &b);
    let (events, id) = requester(&cm, &req(&path, 5, &[]));
    assert_eq!(
        delivered(&p, &events),
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
    let mut path = path(&a, &b);
    path.dgid[15] ^= 0x55;
    let t0 = p.now_ns();
    let (events, id) = requester(&cm, &req(&path, 5, &[]));
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

/// Two devices of a fabric and their CMs, in deterministic mode: where the scenarios on the
/// CM directly start.
struct Cms {
    p: HostPlatform,
    f: Arc<Fabric>,
    a: Node,
    b: Node,
    cm_a: SoftCm,
    cm_b: SoftCm,
}

/// A listen on B and an id on A whose REQ (QPN 7, no private data) it received: the listen's
/// events, the active id's events, the listener and the active id.
struct Requested {
    listen_events: KArc<Events>,
    active_events: KArc<Events>,
    listener: SoftCmId,
    active: SoftCmId,
}

/// A connection under way from A to B: the listener, and the active and passive ids with
/// their events.
struct Handshake {
    listener: SoftCmId,
    active_events: KArc<Events>,
    active: SoftCmId,
    passive_events: KArc<Events>,
    passive: SoftCmId,
}

fn cms() -> Cms {
    let (p, f, a, b) = deterministic_pair();
    let (cm_a, cm_b) = (a.hca.cm(), b.hca.cm());
    Cms {
        p,
        f,
        a,
        b,
        cm_a,
        cm_b,
    }
}

impl Cms {
    /// What `events` saw once the DPCs have run.
    fn delivered(&self, events: &Events) -> Vec<Ev> {
        delivered(&self.p, events)
    }

    /// The path from A to B.
    fn path(&self) -> IB_PATH_REC {
        path(&self.a, &self.b)
    }

    /// A listener on B, an active id on A with its REQ sent and delivered: the listen saw it.
    fn requested(&self) -> Requested {
        let (listen_events, listener) = listener(&self.cm_b, &[], 0);
        let path = self.path();
        let (active_events, active) = requester(&self.cm_a, &req(&path, 7, &[]));
        assert_eq!(self.delivered(&listen_events), vec![Ev::ReqReceived]);
        Requested {
            listen_events,
            active_events,
            listener,
            active,
        }
    }

    /// [`Cms::requested`], and the passive side takes the request.
    fn taken(&self) -> Handshake {
        let Requested {
            active_events,
            listener,
            active,
            ..
        } = self.requested();
        let (passive_events, s) = sink();
        let (passive, _) = self.cm_b.get_request(&listener, s).unwrap();
        Handshake {
            listener,
            active_events,
            active,
            passive_events,
            passive,
        }
    }

    /// The passive side's REP (QPN 8, no private data), delivered: the active side's one event.
    fn reply(&self, h: &Handshake) {
        self.cm_b.send_rep(&h.passive, &rep(8, &[])).unwrap();
        assert_saw!(self.delivered(&h.active_events), [Ev::Rep(_)]);
    }

    /// The active side's RTU, delivered: the passive side's one event.
    fn confirm(&self, h: &Handshake) {
        self.cm_a.send_rtu(&h.active, &[]).unwrap();
        assert_saw!(self.delivered(&h.passive_events), [Ev::Rtu(_)]);
    }

    /// A DREQ from the active side, delivered: the passive side's one event.
    fn disconnect(&self, h: &Handshake) {
        self.cm_a.send_dreq(&h.active, &[]).unwrap();
        assert_saw!(self.delivered(&h.passive_events), [Ev::Dreq(_)]);
    }

    /// Sends a message the fabric loses (`send`, the `what`): `to`, the side it is for, hears
    /// nothing until the wait of the sender's peer ends and its last message goes again, which
    /// the sender answers with the lost one again. What `to` saw then.
    fn lost_and_sent_again(&self, to: &Events, what: &str, send: impl FnOnce()) -> Vec<Ev> {
        self.f.script(&[PacketFate::Drop]);
        send();
        assert!(self.delivered(to).is_empty(), "the {what} was lost");
        assert!(self.p.run_next_timer());
        to.take()
    }

    /// Checks that neither side of `h` heard more and no wait is left, then [`Cms::close`]s.
    fn close_quiet(&self, h: Handshake) {
        assert!(h.active_events.take().is_empty());
        assert!(h.passive_events.take().is_empty());
        assert_eq!(self.p.pending_timers(), 0);
        self.close(h);
    }

    /// Destroys the handshake's ids and checks the platform settled.
    fn close(&self, h: Handshake) {
        self.cm_a.destroy_id(h.active);
        self.cm_b.destroy_id(h.passive);
        self.cm_b.destroy_id(h.listener);
        settle(&self.p);
    }

    /// Runs the DPCs and checks that neither CM has an id left and the platform settled.
    fn no_ids_left(&self) {
        self.p.run_until_idle();
        assert_eq!((self.cm_a.ids(), self.cm_b.ids()), (0, 0));
        settle(&self.p);
    }
}

/// [`cms`] and [`Cms::requested`].
fn requested() -> (Cms, Requested) {
    let c = cms();
    let r = c.requested();
    (c, r)
}

/// [`cms`] and [`Cms::taken`].
fn taken() -> (Cms, Handshake) {
    let c = cms();
    let h = c.taken();
    (c, h)
}

/// [`taken`] and [`Cms::reply`].
fn replied() -> (Cms, Handshake) {
    let (c, h) = taken();
    c.reply(&h);
    (c, h)
}

/// [`replied`] and [`Cms::confirm`]: the connection established.
fn established() -> (Cms, Handshake) {
    let (c, h) = replied();
    c.confirm(&h);
    (c, h)
}

/// [`established`] and [`Cms::disconnect`].
fn disconnecting() -> (Cms, Handshake) {
    let (c, h) = established();
    c.disconnect(&h);
    (c, h)
}

/// Runs `check` on a new id of A's CM, with no event sink of interest, then destroys the id
/// and checks the platform settled.
fn on_a_new_id(check: impl FnOnce(&Cms, &SoftCm, &SoftCmId)) {
    let c = cms();
    let id = c.cm_a.create_id(sink().1).unwrap();
    check(&c, &c.cm_a, &id);
    c.cm_a.destroy_id(id);
    settle(&c.p);
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
    let c = cms();
    let (_, listener) = listener(&c.cm_b, &[], 0);
    let mut path = c.path();
    // Raw-traffic bit, flow label 0xABCDE, hop limit 0x40.
    path.hop_flow_raw = 0x8ABC_DE40u32.to_be();
    path.tclass = 0x28;
    // QoS class 0x123, SL 5.
    path.qos_class_sl = 0x1235u16.to_be();
    path.rate = 0x80 | 6;
    let (_, active) = requester(&c.cm_a, &req(&path, 0x51, &[]));
    c.p.run_until_idle();
    let (passive, ev) = c.cm_b.get_request(&listener, sink().1).unwrap();

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
    for (cm, id) in [(&c.cm_a, &active), (&c.cm_b, &passive)] {
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
    let attrs = |cm: &SoftCm, id| {
        (
            cm.get_qp_attr(id, QpState::Rtr),
            cm.get_qp_attr(id, QpState::Rts),
        )
    };
    assert_eq!(
        attrs(&c.cm_b, &passive),
        (
            Ok(rtr(0x1111, 0x51, passive_path, 2)),
            Ok(rts(0, 6, 4, passive_path))
        )
    );
    // Its REP sent, its own values are the REP's.
    let reply = CmRep {
        responder_resources: 3,
        initiator_depth: 1,
        rnr_retry_count: 2,
        ..rep(0x52, &[])
    };
    c.cm_b.send_rep(&passive, &reply).unwrap();
    c.p.run_until_idle();
    assert_eq!(
        attrs(&c.cm_b, &passive),
        (
            Ok(rtr(0x1111, 0x51, passive_path, 3)),
            Ok(rts(0x2222, 6, 1, passive_path))
        )
    );
    // The active side: the REP's RNR retry count is for its QP.
    let active_path = conn(&path, 2);
    assert_eq!(
        attrs(&c.cm_a, &active),
        (
            Ok(rtr(0x2222, 0x52, active_path, 4)),
            Ok(rts(0x1111, 2, 2, active_path))
        )
    );
    c.cm_a.destroy_id(active);
    for id in [passive, listener] {
        c.cm_b.destroy_id(id);
    }
    settle(&c.p);
}

#[test]
fn a_lost_rep_is_sent_again_when_the_req_comes_again() {
    let (c, h) = taken();
    // The active side's wait ends first (its REQ went out first): it resends the REQ, and
    // the passive side answers the duplicate with its REP.
    let evs = c.lost_and_sent_again(&h.active_events, "REP", || {
        c.cm_b.send_rep(&h.passive, &rep(8, b"again")).unwrap();
    });
    assert_saw!(evs, [Ev::Rep(r)] if r.private_data.starts_with(b"again"));
    assert!(
        h.passive_events.take().is_empty(),
        "no new request: a duplicate"
    );
    assert_eq!(c.cm_b.ids(), 2, "the listener and one connection");
    c.cm_a.send_rtu(&h.active, &[]).unwrap();
    assert_saw!(c.delivered(&h.passive_events), [Ev::Rtu(_)]);
    assert_eq!(c.p.pending_timers(), 0);
    c.close(h);
}

#[test]
fn a_rep_never_acknowledged_is_a_rep_error_and_a_rej_to_the_peer() {
    let (c, h) = replied();
    // The active side never answers (its consumer sits on the REP), and every resent REP is
    // lost on the way.
    c.f.script(&[PacketFate::Drop; RETRIES as usize]);
    for _ in 0..RETRIES {
        assert!(c.p.run_next_timer());
    }
    assert!(h.passive_events.take().is_empty());
    assert!(c.p.run_next_timer());
    assert_eq!(h.passive_events.take(), vec![Ev::RepError]);
    assert_saw!(h.active_events.take(), [Ev::Rej(REJ_TIMEOUT, _)]);
    c.close(h);
}

#[test]
fn a_dreq_nobody_answers_is_a_dreq_error() {
    let (c, h) = established();
    // Every DREQ is lost.
    c.f.script(&[PacketFate::Drop; 1 + RETRIES as usize]);
    c.cm_a.send_dreq(&h.active, &[]).unwrap();
    c.p.run_until_idle();
    let t0 = c.p.now_ns();
    for _ in 0..=RETRIES {
        assert!(c.p.run_next_timer());
    }
    assert_eq!(c.p.now_ns(), t0 + u64::from(RETRIES + 1) * wait_ns());
    assert_eq!(h.active_events.take(), vec![Ev::DreqError]);
    assert!(h.passive_events.take().is_empty());
    // A DREP cannot answer a DREQ that never came.
    assert_eq!(
        c.cm_b.send_drep(&h.passive, &[]),
        Err(NtStatus::INVALID_DEVICE_STATE)
    );
    c.close(h);
}

#[test]
fn destroying_a_listen_rejects_the_requests_it_held() {
    let (c, r) = requested();
    assert_eq!(c.cm_b.ids(), 2, "the listener and the queued request");
    c.cm_b.destroy_id(r.listener);
    assert_saw!(
        c.delivered(&r.active_events),
        [Ev::Rej(REJ_USER_DEFINED, _)]
    );
    assert_eq!(c.cm_b.ids(), 0);
    assert!(r.listen_events.take().is_empty());
    c.cm_a.destroy_id(r.active);
    settle(&c.p);
}

/// A listen's sink that takes its request with `get_request` from inside `ReqReceived`, as the
/// contract allows (OFW's listen callback calls `get_request_ex` there).
struct Taker {
    cm: SoftCm,
    listen: Mutex<Option<SoftCmId>>,
    /// The new id's sink.
    passive: KArc<dyn CmEventSink>,
    /// What each `get_request` returned, with the IRQL it was called at.
    taken: Mutex<Vec<(Taken, Irql)>>,
}

/// What `get_request` returns.
type Taken = Result<(SoftCmId, CmReqEvent), NtStatus>;

impl CmEventSink for Taker {
    fn on_event(&self, event: CmEvent<'_>) {
        if event != CmEvent::ReqReceived {
            return;
        }
        let listen = self.listen.lock().unwrap();
        let Some(listen) = listen.as_ref() else {
            return;
        };
        let got = self.cm.get_request(listen, KArc::clone(&self.passive));
        let irql = wv_host::kernel::irql();
        self.taken.lock().unwrap().push((got, irql));
    }
}

/// The CM calls a listen's sink with none of its locks held, so the sink can take the request
/// right there (at DISPATCH_LEVEL, in the agent's DPC): a lock the CM held around the call
/// would deadlock `get_request`, which takes the listen registry's and the agent's locks.
#[test]
fn a_listens_sink_takes_its_request_inside_the_event() {
    let c = cms();
    let (passive_events, passive) = sink();
    let taker = KArc::new(Taker {
        cm: c.b.hca.cm(),
        listen: Mutex::new(None),
        passive,
        taken: Mutex::new(Vec::new()),
    });
    let listener = c.cm_b.create_id(KArc::clone(&taker).into()).unwrap();
    c.cm_b.listen(&listener, SID, &[], 0).unwrap();
    *taker.listen.lock().unwrap() = Some(listener);
    let path = c.path();
    let (active_events, active) = requester(&c.cm_a, &req(&path, 7, b"inside"));
    // Delivered on a thread of its own, so a deadlock fails the test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    let p = c.p.clone();
    std::thread::spawn(move || {
        p.run_until_idle();
        let _ = tx.send(());
    });
    rx.recv_timeout(std::time::Duration::from_secs(30))
        .expect("get_request from the listen's sink deadlocked");
    let (passive_id, ev, irql) = {
        let mut taken = taker.taken.lock().unwrap();
        assert_eq!(taken.len(), 1, "one ReqReceived, one get_request");
        let (got, irql) = taken.pop().unwrap();
        let (id, ev) = got.expect("the request was taken");
        (id, ev, irql)
    };
    assert_eq!(irql, Irql::Dispatch, "from the agent's DPC");
    assert_eq!(&ev.private_data[..6], b"inside");
    // The new id answers as one taken outside the event.
    c.cm_b.send_rep(&passive_id, &rep(8, &[])).unwrap();
    assert_saw!(c.delivered(&active_events), [Ev::Rep(_)]);
    c.cm_a.send_rtu(&active, &[]).unwrap();
    assert_saw!(c.delivered(&passive_events), [Ev::Rtu(_)]);
    let listener = taker.listen.lock().unwrap().take().unwrap();
    c.close(Handshake {
        listener,
        active_events,
        active,
        passive_events,
        passive: passive_id,
    });
}

#[test]
fn a_request_whose_sender_gives_up_before_it_is_taken_is_gone() {
    let (c, r) = requested();
    // The active side goes: its REJ takes the request back.
    c.cm_a.destroy_id(r.active);
    c.p.run_until_idle();
    assert_eq!(c.cm_b.ids(), 1);
    let Err(NtStatus::NO_MORE_ENTRIES) = c.cm_b.get_request(&r.listener, sink().1) else {
        panic!("the request went");
    };
    c.cm_b.destroy_id(r.listener);
    settle(&c.p);
}

#[test]
fn destroying_a_connection_tells_the_peer() {
    let (c, h) = established();
    // An established connection's id goes: the peer gets a DREQ.
    c.cm_a.destroy_id(h.active);
    assert_saw!(c.delivered(&h.passive_events), [Ev::Dreq(_)]);
    c.cm_b.send_drep(&h.passive, &[]).unwrap();
    c.p.run_until_idle();
    for id in [h.passive, h.listener] {
        c.cm_b.destroy_id(id);
    }
    assert_eq!(c.p.pending_timers(), 0);
    settle(&c.p);
}

#[test]
fn mra_extends_the_wait() {
    let (c, h) = taken();
    let t0 = c.p.now_ns();
    c.cm_b.send_mra(&h.passive, 20, &[]).unwrap();
    assert_eq!(c.delivered(&h.active_events), vec![Ev::Mra(20)]);
    assert_eq!(
        c.p.next_timer_ns(),
        Some(t0 + ib_time(20) + 2 * ib_time(PKT_LIFE)),
        "the wait is the MRA's"
    );
    c.reply(&h);
    c.close(h);
}

#[test]
fn listens_match_service_id_and_the_compared_address() {
    let c = cms();
    // IP-CM headers: version 0, IPv4, a source port, source and destination addresses.
    let header = |dst: [u8; 4]| {
        let mut h = [0u8; 36];
        h[1] = 0x40;
        h[2..4].copy_from_slice(&5000u16.to_be_bytes());
        h[16..20].copy_from_slice(&[10, 0, 1, 1]);
        h[32..36].copy_from_slice(&dst);
        h
    };
    let (any_events, any) = listener(&c.cm_b, &[], 0);
    let (one_events, one) = listener(&c.cm_b, &header([10, 0, 0, 1]), 4);
    // The same listen again is refused; a listening id cannot listen twice.
    let dup = c.cm_b.create_id(sink().1).unwrap();
    assert_eq!(
        c.cm_b.listen(&dup, SID, &header([10, 0, 0, 1]), 4),
        Err(NtStatus::INVALID_PARAMETER)
    );
    assert_eq!(
        c.cm_b.listen(&one, SID + 1, &[], 0),
        Err(NtStatus::INVALID_DEVICE_STATE)
    );
    let path = c.path();
    let ids = [[10, 0, 0, 1], [10, 0, 0, 2]]
        .map(|dst| requester(&c.cm_a, &req(&path, 7, &header(dst))).1);
    c.p.run_until_idle();
    // The request for 10.0.0.1 goes to its listen, the other one to the wildcard.
    assert_eq!(one_events.take(), vec![Ev::ReqReceived]);
    assert_eq!(any_events.take(), vec![Ev::ReqReceived]);
    let (taken, ev) = c.cm_b.get_request(&one, sink().1).unwrap();
    c.cm_b.destroy_id(taken);
    assert_eq!(ev.private_data[32..36], [10, 0, 0, 1]);
    for id in ids {
        c.cm_a.destroy_id(id);
    }
    for id in [any, one, dup] {
        c.cm_b.destroy_id(id);
    }
    c.no_ids_left();
}

#[test]
fn wrong_states_and_sizes_are_refused() {
    on_a_new_id(|c, cm, id| {
        let path = c.path();
        assert_eq!(
            cm.send_rep(id, &rep(1, &[])),
            Err(NtStatus::INVALID_DEVICE_STATE)
        );
        assert_eq!(cm.send_rtu(id, &[]), Err(NtStatus::INVALID_DEVICE_STATE));
        assert_eq!(cm.send_dreq(id, &[]), Err(NtStatus::INVALID_DEVICE_STATE));
        assert_eq!(cm.send_drep(id, &[]), Err(NtStatus::INVALID_DEVICE_STATE));
        assert_eq!(
            cm.send_rej(id, 28, &[], &[]),
            Err(NtStatus::INVALID_DEVICE_STATE)
        );
        assert_eq!(cm.send_mra(id, 1, &[]), Err(NtStatus::INVALID_DEVICE_STATE));
        assert_eq!(
            cm.get_qp_attr(id, QpState::Init),
            Err(NtStatus::INVALID_DEVICE_STATE)
        );
        assert_eq!(
            cm.send_req(id, &req(&path, 1, &[0; REQ_PRIVATE_DATA + 1])),
            Err(NtStatus::INVALID_PARAMETER)
        );
        let mut foreign = path;
        foreign.sgid = [9; 16];
        assert_eq!(
            cm.send_req(id, &req(&foreign, 1, &[])),
            Err(NtStatus::INVALID_PARAMETER),
            "no port of this device owns the source GID"
        );
        cm.send_req(id, &req(&path, 1, &[])).unwrap();
        assert!(cm.get_qp_attr(id, QpState::Init).is_ok());
        assert_eq!(
            cm.get_qp_attr(id, QpState::Rtr),
            Err(NtStatus::INVALID_DEVICE_STATE),
            "no REP yet"
        );
        assert_eq!(
            cm.get_qp_attr(id, QpState::Sqd),
            Err(NtStatus::INVALID_PARAMETER)
        );
    });
}

#[test]
fn removal_stops_the_cm() {
    let (c, r) = requested();
    c.b.hca.surprise_remove();
    assert_eq!(
        c.cm_b.create_id(sink().1).err(),
        Some(NtStatus::DEVICE_REMOVED)
    );
    assert_eq!(
        c.cm_b.get_request(&r.listener, sink().1).err(),
        Some(NtStatus::DEVICE_REMOVED)
    );
    // The peer's REQ retries find nobody and end as a timeout.
    while c.p.run_next_timer() {}
    assert_eq!(r.active_events.take(), vec![Ev::ReqError]);
    c.cm_a.destroy_id(r.active);
    c.cm_b.destroy_id(r.listener);
    settle(&c.p);
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
    let (listen_events, listener) = listener(&cm_b, &[], 0);
    let mut to_port_2 = path(&a, &b);
    to_port_2.dgid = gid;
    let _active = requester(&cm_a, &req(&to_port_2, 0x123, b""));
    assert_eq!(delivered(&p, &listen_events), vec![Ev::ReqReceived]);
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

/// Sends `r` from A to a listen on B and returns what the request B took carried, with every
/// id destroyed after.
fn carried(c: &Cms, r: &CmReq<'_>) -> CmReqEvent {
    let (listen_events, listener) = listener(&c.cm_b, &[], 0);
    let (_, active) = requester(&c.cm_a, r);
    assert_eq!(c.delivered(&listen_events), vec![Ev::ReqReceived]);
    let (passive, ev) = c.cm_b.get_request(&listener, sink().1).unwrap();
    c.cm_a.destroy_id(active);
    c.cm_b.destroy_id(passive);
    c.cm_b.destroy_id(listener);
    ev
}

#[test]
fn private_data_may_fill_its_field() {
    let c = cms();
    let path = c.path();
    let full = [0x5A; REQ_PRIVATE_DATA];
    let ev = carried(&c, &req(&path, 7, &full));
    assert_eq!(ev.private_data, full);
    settle(&c.p);
}

#[test]
fn a_req_carries_a_24_bit_psn_and_at_most_15_retries() {
    let c = cms();
    let path = c.path();
    let mut r = req(&path, 7, &[]);
    // IBA 12.6.5: Starting PSN is a 24-bit field and Max CM Retries a 4-bit one.
    r.params.starting_psn = 0xAB12_3456;
    r.params.max_cm_retries = 200;
    let ev = carried(&c, &r);
    assert_eq!(ev.params.starting_psn, 0x12_3456);
    assert_eq!(ev.params.max_cm_retries, 15);
    settle(&c.p);
}

#[test]
fn only_the_side_that_received_the_req_replies() {
    let (c, h) = taken();
    assert_eq!(
        c.cm_a.send_rep(&h.active, &rep(7, &[])),
        Err(NtStatus::INVALID_DEVICE_STATE),
        "the active side sent the REQ"
    );
    c.reply(&h);
    c.confirm(&h);
    assert_eq!(
        c.cm_b.send_rep(&h.passive, &rep(8, &[])),
        Err(NtStatus::INVALID_DEVICE_STATE),
        "connected"
    );
    assert!(c.delivered(&h.active_events).is_empty(), "the one REP");
    assert!(h.passive_events.take().is_empty(), "the one RTU");
    c.close(h);
}

#[test]
fn destroying_an_id_mid_handshake_rejects_and_mid_disconnect_replies() {
    let c = cms();
    // REQ received: the passive side goes, the active side gets a consumer REJ.
    let h = c.taken();
    c.cm_b.destroy_id(h.passive);
    assert_saw!(
        c.delivered(&h.active_events),
        [Ev::Rej(REJ_USER_DEFINED, _)]
    );
    c.cm_a.destroy_id(h.active);
    c.cm_b.destroy_id(h.listener);

    // REP received: the active side goes, the passive side gets a consumer REJ.
    let h = c.taken();
    c.reply(&h);
    c.cm_a.destroy_id(h.active);
    assert_saw!(
        c.delivered(&h.passive_events),
        [Ev::Rej(REJ_USER_DEFINED, _)]
    );
    c.cm_b.destroy_id(h.passive);
    c.cm_b.destroy_id(h.listener);

    // DREQ received: the id that goes answers it with a DREP.
    let h = c.taken();
    c.reply(&h);
    c.confirm(&h);
    c.disconnect(&h);
    c.cm_b.destroy_id(h.passive);
    assert_saw!(c.delivered(&h.active_events), [Ev::Drep(_)]);
    c.cm_a.destroy_id(h.active);
    c.cm_b.destroy_id(h.listener);
    c.p.run_until_idle();
    assert_eq!(c.p.pending_timers(), 0);
    c.no_ids_left();
}

#[test]
fn a_lost_mra_is_sent_again_when_the_req_comes_again() {
    let (c, h) = taken();
    // The REQ's wait ends: it is resent, and the duplicate is answered with the MRA.
    let evs = c.lost_and_sent_again(&h.active_events, "MRA", || {
        c.cm_b.send_mra(&h.passive, 20, &[]).unwrap();
    });
    assert_eq!(evs, vec![Ev::Mra(20)]);
    c.close(h);
}

#[test]
fn a_lost_rtu_is_sent_again_when_the_rep_comes_again() {
    let (c, h) = replied();
    // The REP's wait ends: it is resent, and the connected side answers with its RTU again.
    let evs = c.lost_and_sent_again(&h.passive_events, "RTU", || {
        c.cm_a.send_rtu(&h.active, b"rtu").unwrap();
    });
    assert_saw!(evs, [Ev::Rtu(d)] if d.starts_with(b"rtu"));
    c.close_quiet(h);
}

#[test]
fn a_lost_drep_is_sent_again_when_the_dreq_comes_again() {
    let (c, h) = disconnecting();
    // The DREQ's wait ends: it is resent, and the side in timewait answers with its DREP.
    let evs = c.lost_and_sent_again(&h.active_events, "DREP", || {
        c.cm_b.send_drep(&h.passive, b"drep").unwrap();
    });
    assert_saw!(evs, [Ev::Drep(d)] if d.starts_with(b"drep"));
    c.close_quiet(h);
}

#[test]
fn a_listen_compares_only_the_fields_its_mask_selects() {
    let c = cms();
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
    let path = c.path();
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
        let (listen_events, listener) = listener(&c.cm_b, &listened, mask);
        let (active_events, active) = requester(&c.cm_a, &req(&path, 7, &req_header));
        c.p.run_until_idle();
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
        c.cm_a.destroy_id(active);
        c.cm_b.destroy_id(listener);
        c.p.run_until_idle();
    }
    c.no_ids_left();
}

#[test]
fn a_listen_compare_may_be_as_long_as_the_reqs_private_data() {
    on_a_new_id(|_, cm, id| {
        assert_eq!(
            cm.listen(id, SID, &[0; REQ_PRIVATE_DATA + 1], 0),
            Err(NtStatus::INVALID_PARAMETER)
        );
        cm.listen(id, SID, &[0; REQ_PRIVATE_DATA], 0).unwrap();
    });
}

#[test]
fn a_removed_device_sends_nothing() {
    let (c, h) = established();
    // The passive device is gone: destroying its id sends no DREQ from it.
    c.b.hca.surprise_remove();
    c.cm_b.destroy_id(h.passive);
    assert!(c.delivered(&h.active_events).is_empty());
    c.cm_a.destroy_id(h.active);
    c.cm_b.destroy_id(h.listener);
    settle(&c.p);
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
