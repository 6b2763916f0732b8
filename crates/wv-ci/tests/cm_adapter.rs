//! The CM edge end to end through C: `CiCm` (the filter's side) over a `CiCmExport` (ibbus's
//! side) over the host model's scriptable connection manager, `FakeCm`. Every call crosses real
//! `extern "system"` functions with C ids, structures and callbacks; the CM must receive what
//! the caller sent, events must reach the right sink once, and nothing may leak. These tests
//! also run under Miri.

use std::sync::{Arc, Mutex};

use wv_abi::{IB_PATH_REC, NtStatus};
use wv_ci::{CiCm, CiCmExport};
use wv_hal::cm::REJ_USER_DEFINED;
use wv_hal::{
    CmEvent, CmEventSink, CmRep, CmReq, CmReqParams, ConnectionManager, KArc, QpModify, QpState,
    QpType,
};
use wv_host::HostPlatform;
use wv_host::fake_cm::{FakeCm, FakeCmDetail, FakeCmEvent, FakeCmOp, peer_rep, peer_req};

mod support;

/// What a sink saw, in order, as text (the events borrow their data).
#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

impl Seen {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl CmEventSink for Seen {
    fn on_event(&self, event: CmEvent<'_>) {
        let text = match event {
            CmEvent::RepReceived(rep) => format!(
                "rep qpn={:#x} psn={:#x} pdata={:?}",
                rep.remote_qpn,
                rep.starting_psn,
                &rep.private_data[..3]
            ),
            CmEvent::RejReceived {
                reason,
                private_data,
                ..
            } => format!("rej {reason} {private_data:?}"),
            CmEvent::RtuReceived { private_data } => format!("rtu {private_data:?}"),
            CmEvent::DreqReceived { private_data } => format!("dreq {private_data:?}"),
            CmEvent::DrepReceived { private_data } => format!("drep {private_data:?}"),
            CmEvent::MraReceived {
                service_timeout, ..
            } => format!("mra {service_timeout}"),
            other => format!("{other:?}"),
        };
        self.0.lock().unwrap().push(text);
    }
}

struct Rig {
    p: HostPlatform,
    fake: Arc<FakeCm>,
    export: CiCmExport<FakeCm>,
    cm: CiCm,
}

fn rig() -> Rig {
    let p = HostPlatform::deterministic();
    let fake = FakeCm::new(&p);
    let export = CiCmExport::new(Arc::clone(&fake)).expect("a free export slot");
    let cm = export.open().expect("a valid table");
    Rig {
        p,
        fake,
        export,
        cm,
    }
}

impl Rig {
    /// An id made through the table, with the sink that sees its events and the fake CM's id.
    fn new_id(&self) -> (KArc<Seen>, <CiCm as ConnectionManager>::Id, u64) {
        let seen = KArc::new(Seen::default());
        let id = self.cm.create_id(KArc::clone(&seen).into()).unwrap();
        (seen, id, self.fake.last_id(FakeCmOp::CreateId).unwrap())
    }

    /// Destroys `ids`, then [`Rig::finish`]es.
    fn finish_with<const N: usize>(self, ids: [<CiCm as ConnectionManager>::Id; N]) {
        for id in ids {
            self.cm.destroy_id(id);
        }
        self.finish();
    }

    /// Drops the filter's side, then checks that the export holds no reference and the CM
    /// no id.
    fn finish(self) {
        let fake = self.fake;
        support::finish_edge(
            &self.p,
            (self.cm, self.export),
            CiCmExport::consumers,
            || fake.live_ids(),
            "every id destroyed",
        );
    }
}

fn path() -> IB_PATH_REC {
    IB_PATH_REC {
        dgid: [7; 16],
        sgid: [8; 16],
        dlid: 3u16.to_be(),
        slid: 4u16.to_be(),
        pkey: 0xFFFF,
        mtu: 0x84,
        ..IB_PATH_REC::default()
    }
}

#[test]
fn an_active_connection_crosses_the_table_unchanged() {
    let r = rig();
    let (seen, id, fake_id) = r.new_id();
    let path = path();
    let pdata: Vec<u8> = (0..92).collect();
    let req = CmReq {
        service_id: 0x0000_0000_0106_1388,
        primary_path: &path,
        qpn: 0x12_3456,
        params: CmReqParams {
            qp_type: QpType::Rc,
            starting_psn: 0xAB_CDEF,
            max_cm_retries: 15,
            responder_resources: 1,
            initiator_depth: 2,
            remote_cm_response_timeout: 20,
            flow_control: true,
            local_cm_response_timeout: 20,
            rnr_retry_count: 7,
            retry_count: 6,
            srq: true,
        },
        private_data: &pdata,
    };
    r.cm.send_req(&id, &req).unwrap();
    let sent = r.fake.sent(FakeCmOp::SendReq);
    let FakeCmDetail::Req(got) = &sent[0].detail else {
        panic!("no REQ logged: {sent:?}");
    };
    assert_eq!(got.service_id, req.service_id);
    assert_eq!(got.primary_path, path);
    assert_eq!((got.qpn, got.params.starting_psn), (0x12_3456, 0xAB_CDEF));
    assert_eq!(got.private_data, pdata);
    assert_eq!(
        (
            got.params.responder_resources,
            got.params.initiator_depth,
            got.params.srq
        ),
        (1, 2, true)
    );
    // Too much private data for a REQ is refused before C.
    let long = [0u8; 93];
    let too_long = CmReq {
        private_data: &long,
        ..req
    };
    assert_eq!(
        r.cm.send_req(&id, &too_long),
        Err(NtStatus::INVALID_PARAMETER)
    );

    // The peer's REP and what follows arrive through the C callback.
    r.fake.event(fake_id, FakeCmEvent::Rep(peer_rep(b"abc")));
    r.p.run_until_idle();
    assert_eq!(seen.take(), ["rep qpn=0x51 psn=0x5000 pdata=[97, 98, 99]"]);
    let rtr = r.cm.get_qp_attr(&id, QpState::Rtr).unwrap();
    let QpModify::Rtr(rtr) = rtr else {
        panic!("{rtr:?}");
    };
    assert_eq!((rtr.dest_qpn, rtr.rq_psn), (0x51, 0x5000));
    r.cm.send_rtu(&id, b"rtu").unwrap();
    r.fake.event(fake_id, FakeCmEvent::Dreq(b"bye".to_vec()));
    r.p.run_until_idle();
    assert_eq!(seen.take(), ["dreq [98, 121, 101]"]);
    r.cm.send_drep(&id, &[]).unwrap();
    // Out of order: the CM's status comes back unchanged.
    assert_eq!(
        r.cm.send_dreq(&id, &[]),
        Err(NtStatus::INVALID_DEVICE_STATE)
    );
    r.cm.destroy_id(id);
    // An event for a destroyed id reaches nobody.
    r.fake.event(fake_id, FakeCmEvent::Drep(vec![]));
    r.p.run_until_idle();
    assert!(seen.take().is_empty());
    r.finish();
}

#[test]
fn a_listen_hands_requests_over_with_their_own_sinks() {
    let r = rig();
    let (listener, lid, fake_lid) = r.new_id();
    let compare = [0x00, 0x40, 0, 0, 0, 0, 0, 0];
    r.cm.listen(&lid, 0x0106_2710, &compare, 4).unwrap();
    assert_eq!(
        r.fake.sent(FakeCmOp::Listen)[0].detail,
        FakeCmDetail::Listen {
            service_id: 0x0106_2710,
            compare: compare.to_vec(),
            compare_offset: 4
        }
    );
    // Nothing queued yet.
    let conn = KArc::new(Seen::default());
    assert_eq!(
        r.cm.get_request(&lid, KArc::clone(&conn).into()).err(),
        Some(NtStatus::NO_MORE_ENTRIES)
    );
    let req = peer_req(0x0106_2710, b"\x00\x40hello");
    assert!(r.fake.incoming_request(fake_lid, req));
    r.p.run_until_idle();
    assert_eq!(listener.take(), ["ReqReceived"]);
    let (id, got) = r.cm.get_request(&lid, KArc::clone(&conn).into()).unwrap();
    assert_eq!(got, req, "the request arrives field for field");
    let fake_id = r.fake.last_id(FakeCmOp::GetRequest).unwrap();
    let rep = CmRep {
        qpn: 9,
        starting_psn: 0x77,
        private_data: b"accepted",
        failover_accepted: 1,
        responder_resources: 3,
        initiator_depth: 2,
        flow_control: true,
        rnr_retry_count: 7,
        srq: false,
    };
    r.cm.send_rep(&id, &rep).unwrap();
    let FakeCmDetail::Rep(sent) = &r.fake.sent(FakeCmOp::SendRep)[0].detail else {
        panic!("no REP");
    };
    assert_eq!((sent.qpn, sent.starting_psn), (9, 0x77));
    assert_eq!(sent.private_data, b"accepted");
    r.fake.event(fake_id, FakeCmEvent::Rtu(b"go".to_vec()));
    r.p.run_until_idle();
    assert_eq!(conn.take(), ["rtu [103, 111]"]);
    assert!(listener.take().is_empty(), "the listener saw nothing of it");
    r.finish_with([id, lid]);
}

/// Spec §7.1-h: OFW took a request with `get_request`, which gives the new id the listener's
/// callback and context, and overwrote them afterwards; an event processed in between went to
/// the listener with the listener's context. `CiCm` uses `get_request_ex`: the event reaches
/// the new connection's sink.
#[test]
fn an_event_racing_the_hand_over_reaches_the_new_connection() {
    let r = rig();
    let (listener, lid, fake_lid) = r.new_id();
    r.cm.listen(&lid, 0x0106_0001, &[], 0).unwrap();
    r.fake
        .incoming_request(fake_lid, peer_req(0x0106_0001, &[]));
    r.p.run_until_idle();
    assert_eq!(listener.take(), ["ReqReceived"]);
    r.fake.race_next_get_request(FakeCmEvent::Rej {
        reason: REJ_USER_DEFINED,
        private_data: b"no".to_vec(),
    });
    let conn = KArc::new(Seen::default());
    let (id, _) = r.cm.get_request(&lid, KArc::clone(&conn).into()).unwrap();
    assert_eq!(conn.take(), ["rej 28 [110, 111]"]);
    assert!(
        listener.take().is_empty(),
        "the listener got the new id's event"
    );
    r.finish_with([id, lid]);
}

#[test]
fn failures_and_other_events_pass_through() {
    let r = rig();
    r.fake
        .fail_next(FakeCmOp::CreateId, NtStatus::INSUFFICIENT_RESOURCES);
    let seen = KArc::new(Seen::default());
    assert_eq!(
        r.cm.create_id(KArc::clone(&seen).into()).err(),
        Some(NtStatus::INSUFFICIENT_RESOURCES)
    );
    let id = r.cm.create_id(KArc::clone(&seen).into()).unwrap();
    let fake_id = r.fake.last_id(FakeCmOp::CreateId).unwrap();
    r.fake
        .fail_next(FakeCmOp::Listen, NtStatus::INVALID_PARAMETER);
    assert_eq!(
        r.cm.listen(&id, 1, &[], 0),
        Err(NtStatus::INVALID_PARAMETER)
    );
    assert_eq!(
        r.cm.get_qp_attr(&id, QpState::Sqd),
        Err(NtStatus::INVALID_DEVICE_STATE)
    );
    for event in [
        FakeCmEvent::ReqError,
        FakeCmEvent::RepError,
        FakeCmEvent::DreqError,
        FakeCmEvent::Mra(17),
        FakeCmEvent::Other(11),
    ] {
        r.fake.event(fake_id, event);
    }
    r.p.run_until_idle();
    assert_eq!(
        seen.take(),
        ["ReqError", "RepError", "DreqError", "mra 17", "Other(11)"]
    );
    r.finish_with([id]);
}

#[test]
fn each_export_takes_a_slot_and_gives_it_back() {
    let p = HostPlatform::deterministic();
    let fake = FakeCm::new(&p);
    let a = CiCmExport::new(Arc::clone(&fake)).unwrap();
    let b = CiCmExport::new(Arc::clone(&fake)).unwrap();
    let cm = b.open().unwrap();
    drop(b);
    // The table still works: the interface holds the export.
    let id = cm.create_id(KArc::new(Seen::default()).into()).unwrap();
    cm.destroy_id(id);
    drop(cm);
    drop(a);
    p.run_until_idle();
    assert!(fake.live_ids().is_empty());
}
