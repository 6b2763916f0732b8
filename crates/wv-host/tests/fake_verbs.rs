//! FakeVerbs: limits, failure injection, the call log, events through interrupt → DPC,
//! the QP state model and held modifies, UMV replies.

mod common;

use std::sync::{Arc, Mutex};

use wv_hal::{
    CaEvent, CaEventKind, CaEventSink, CqEventSink, Irql, Platform, QpCreate, QpEvent, QpEventSink,
    QpInit, QpModify, QpRtr, QpRts, QpState, QpType, SrqAttributes, SrqEvent, SrqEventSink, Umv,
    Verbs, VerbsError, WorkItem,
};
use wv_host::HostPlatform;
use wv_host::fake_verbs::{FakeCa, FakeCall, FakeConfig, FakeCq, FakePd, FakeVerbs, ObjectKind};

type Seen = Arc<Mutex<Vec<(String, Irql)>>>;

struct Sink(HostPlatform, Seen);
impl Sink {
    fn note(&self, what: String) {
        self.1.lock().unwrap().push((what, self.0.irql()));
    }
}
impl CaEventSink for Sink {
    fn on_event(&self, e: CaEvent) {
        self.note(format!("ca {:?} port {}", e.kind, e.port));
    }
}
impl CqEventSink for Sink {
    fn on_completion(&self) {
        self.note("cq completion".into());
    }
    fn on_error(&self) {
        self.note("cq error".into());
    }
}
impl SrqEventSink for Sink {
    fn on_event(&self, e: SrqEvent) {
        self.note(format!("srq {e:?}"));
    }
}
impl QpEventSink for Sink {
    fn on_event(&self, e: QpEvent) {
        self.note(format!("qp {e:?}"));
    }
}

fn sink(p: &HostPlatform, seen: &Seen) -> wv_hal::KArc<Sink> {
    wv_hal::KArc::new(Sink(p.clone(), Arc::clone(seen)))
}

/// The modification to `state` carrying only what OFW always sends with it.
/// A fake HCA on `p` with its CA, a PD and a 4-entry CQ open; every event sink notes into
/// the log returned with them.
fn ca_pd_cq(p: &HostPlatform) -> (Arc<FakeVerbs>, Seen, FakeCa, FakePd, FakeCq) {
    let fake = FakeVerbs::with_defaults(p);
    let seen = Seen::default();
    let ca = fake
        .open_ca(&mut Umv::none(), sink(p, &seen).into())
        .unwrap();
    let pd = fake.allocate_pd(&ca, &mut Umv::none()).unwrap();
    let (cq, _) = fake
        .create_cq(&ca, 4, sink(p, &seen).into(), &mut Umv::none())
        .unwrap();
    (fake, seen, ca, pd, cq)
}

fn modify(state: QpState) -> QpModify {
    match state {
        QpState::Reset => QpModify::Reset,
        QpState::Init => QpModify::Init(QpInit {
            port: 1,
            ..QpInit::default()
        }),
        QpState::Rtr => QpModify::Rtr(QpRtr::default()),
        QpState::Rts => QpModify::Rts(QpRts { ..QpRts::default() }),
        QpState::Sqd => QpModify::Sqd { notify: true },
        QpState::SqError => QpModify::SqError,
        QpState::Error => QpModify::Error,
    }
}

#[test]
fn identity_ports_and_tables() {
    let p = HostPlatform::deterministic();
    let fake = FakeVerbs::new(
        &p,
        FakeConfig {
            guid: 0x1122,
            library_name: "mlx4u".into(),
            ..FakeConfig::default()
        },
    );
    assert_eq!(fake.guid(), 0x1122);
    assert_eq!(fake.library_name(), "mlx4u");
    let ca = fake.query_ca().unwrap();
    assert_eq!(ca.port_count, 1);
    assert_eq!(ca.node_guid, 0x1122);
    assert!(fake.query_port(1).is_ok());
    assert_eq!(fake.query_port(0), Err(VerbsError::InvalidParameter));
    assert_eq!(fake.query_port(2), Err(VerbsError::InvalidParameter));
    assert_eq!(fake.query_gid(1, 0).unwrap()[0], 0xfe);
    assert_eq!(fake.query_gid(1, 1), Err(VerbsError::InvalidParameter));
    assert_eq!(fake.query_pkey(1, 0), Ok(0xffff));
    assert_eq!(fake.query_pkey(1, 1), Err(VerbsError::InvalidParameter));
    p.shutdown();
}

#[test]
fn limits_are_enforced_and_failures_injected_and_logged() {
    let p = HostPlatform::deterministic();
    let fake = FakeVerbs::with_defaults(&p);
    fake.configure(|c| c.ca.max_cq = 1);
    let seen = Seen::default();
    let ca = fake
        .open_ca(&mut Umv::none(), sink(&p, &seen).into())
        .unwrap();
    assert_eq!(
        fake.create_cq(&ca, 1 << 20, sink(&p, &seen).into(), &mut Umv::none())
            .err(),
        Some(VerbsError::InvalidSetting)
    );
    let (cq, n) = fake
        .create_cq(&ca, 10, sink(&p, &seen).into(), &mut Umv::none())
        .unwrap();
    assert_eq!(n, 10);
    assert_eq!(
        fake.create_cq(&ca, 10, sink(&p, &seen).into(), &mut Umv::none())
            .err(),
        Some(VerbsError::InsufficientResources)
    );
    fake.fail_next(FakeCall::AllocatePd, VerbsError::InsufficientMemory);
    assert_eq!(
        fake.allocate_pd(&ca, &mut Umv::none()).err(),
        Some(VerbsError::InsufficientMemory)
    );
    let pd = fake.allocate_pd(&ca, &mut Umv::none()).unwrap();
    fake.set_failure_hook(Some(Box::new(|call, _| {
        (call == FakeCall::QueryCa).then_some(VerbsError::DeviceRemoved)
    })));
    assert_eq!(fake.query_ca(), Err(VerbsError::DeviceRemoved));
    fake.set_failure_hook(None);
    assert_eq!(fake.live_count(ObjectKind::Cq), 1);
    assert_eq!(
        fake.leaks(),
        vec![
            "FakeVerbs: 1 CA alive at teardown",
            "FakeVerbs: 1 PD alive at teardown",
            "FakeVerbs: 1 CQ alive at teardown",
        ]
    );
    fake.deallocate_pd(pd);
    fake.destroy_cq(cq);
    fake.close_ca(ca);
    assert!(fake.live_objects().is_empty());
    assert_eq!(fake.call_count(FakeCall::CreateCq), 3);
    assert_eq!(fake.call_count(FakeCall::AllocatePd), 2);
    let last = fake.calls().last().copied().unwrap();
    assert_eq!(last.call, FakeCall::CloseCa);
    p.shutdown();
}

#[test]
fn events_arrive_through_interrupt_and_dpc_at_dispatch() {
    let p = HostPlatform::deterministic();
    let (fake, seen, ca, pd, cq) = ca_pd_cq(&p);
    let srq_attr = SrqAttributes {
        max_wr: 4,
        max_sge: 1,
        srq_limit: 0,
    };
    let srq = fake
        .create_srq(&pd, &srq_attr, sink(&p, &seen).into(), &mut Umv::none())
        .unwrap();
    let create = QpCreate {
        sq_signaled: true,
        srq: Some(&srq),
        ..QpCreate::new(QpType::Ud, &cq, 4)
    };
    let (qp, created) = fake
        .create_qp(&pd, &create, sink(&p, &seen).into(), &mut Umv::none())
        .unwrap();
    assert_ne!(created.qpn, 0);
    assert!(fake.cq_completion(cq.id()));
    assert!(fake.cq_error(cq.id()));
    assert!(fake.srq_event(srq.id(), SrqEvent::LimitReached));
    assert!(fake.qp_event(qp.id(), QpEvent::CommEstablished));
    assert!(fake.port_event(1, CaEventKind::PortDown));
    assert!(
        seen.lock().unwrap().is_empty(),
        "deterministic: DPC waits for run_until_idle"
    );
    p.run_until_idle();
    let got = seen.lock().unwrap().clone();
    let d = Irql::Dispatch;
    assert_eq!(
        got,
        vec![
            ("cq completion".to_owned(), d),
            ("cq error".to_owned(), d),
            ("srq LimitReached".to_owned(), d),
            ("qp CommEstablished".to_owned(), d),
            ("ca PortDown port 1".to_owned(), d),
        ]
    );
    // After destroy, no callback for the object.
    let cq_id = cq.id();
    fake.destroy_qp(qp);
    fake.destroy_srq(srq);
    fake.destroy_cq(cq);
    fake.cq_completion(cq_id);
    p.run_until_idle();
    assert_eq!(seen.lock().unwrap().len(), 5);
    fake.deallocate_pd(pd);
    fake.close_ca(ca);
    p.shutdown();
}

#[test]
fn qp_state_model_and_modify_log() {
    let p = HostPlatform::deterministic();
    let (fake, seen, ca, pd, cq) = ca_pd_cq(&p);
    let create = QpCreate::new(QpType::Rc, &cq, 4);
    let (qp, _) = fake
        .create_qp(&pd, &create, sink(&p, &seen).into(), &mut Umv::none())
        .unwrap();
    let mut out = [0u8; 8];
    assert_eq!(
        fake.modify_qp(&qp, &modify(QpState::Rtr), &mut out),
        Err(VerbsError::InvalidState)
    );
    fake.modify_qp(&qp, &modify(QpState::Init), &mut out)
        .unwrap();
    assert_eq!(out[0], QpState::Init as u8);
    assert_eq!(u32::from_le_bytes(out[1..5].try_into().unwrap()), 2);
    fake.modify_qp(&qp, &modify(QpState::Rtr), &mut out)
        .unwrap();
    fake.modify_qp(&qp, &modify(QpState::Rts), &mut out)
        .unwrap();
    assert_eq!(fake.qp_state(qp.id()), Some(QpState::Rts));
    assert_eq!(fake.query_qp(&qp).unwrap().state, QpState::Rts);
    let log = fake.modify_log();
    let steps: Vec<_> = log
        .iter()
        .map(|m| (m.seq, m.from, m.to, m.result))
        .collect();
    assert_eq!(
        steps,
        vec![
            (
                1,
                QpState::Reset,
                QpState::Rtr,
                Some(Err(VerbsError::InvalidState))
            ),
            (2, QpState::Reset, QpState::Init, Some(Ok(()))),
            (3, QpState::Init, QpState::Rtr, Some(Ok(()))),
            (4, QpState::Rtr, QpState::Rts, Some(Ok(()))),
        ]
    );
    fake.destroy_qp(qp);
    fake.destroy_cq(cq);
    fake.deallocate_pd(pd);
    fake.close_ca(ca);
    p.shutdown();
}

#[test]
fn umv_reply_and_input_are_observable() {
    let p = HostPlatform::deterministic();
    let fake = FakeVerbs::with_defaults(&p);
    fake.set_umv_reply(0x77, vec![1, 2, 3, 4]);
    let mut buf = [9u8, 8, 7, 0, 0, 0];
    let mut umv = Umv::new(5, 3, 2, &mut buf);
    let ca = fake
        .open_ca(
            &mut umv,
            wv_hal::KArc::new(Sink(p.clone(), Seen::default())).into(),
        )
        .unwrap();
    assert_eq!(umv.status, 0x77);
    assert_eq!(fake.last_umv_input(), vec![9, 8, 7]);
    assert_eq!(buf, [1, 2, 7, 0, 0, 0], "output truncated to output_len");
    fake.close_ca(ca);
    p.shutdown();
}

struct Modify(
    Arc<FakeVerbs>,
    Arc<wv_host::fake_verbs::FakeQp>,
    QpState,
    Arc<Mutex<Vec<u8>>>,
);
impl WorkItem for Modify {
    fn run(&self) {
        let mut out = [0u8; 5];
        self.0
            .modify_qp(&self.1, &modify(self.2), &mut out)
            .unwrap();
        self.3.lock().unwrap().push(out[0]);
    }
}

#[test]
fn a_held_modify_blocks_on_a_worker_until_released() {
    let p = HostPlatform::threaded(2);
    let (fake, seen, ca, pd, cq) = ca_pd_cq(&p);
    let create = QpCreate::new(QpType::Rc, &cq, 4);
    let (qp, _) = fake
        .create_qp(&pd, &create, sink(&p, &seen).into(), &mut Umv::none())
        .unwrap();
    let qp = Arc::new(qp);
    let done = Arc::new(Mutex::new(Vec::new()));
    let gate = fake.hold_modify(qp.id());
    p.queue_work(
        wv_hal::KArc::new(Modify(
            Arc::clone(&fake),
            Arc::clone(&qp),
            QpState::Init,
            Arc::clone(&done),
        ))
        .into(),
    )
    .unwrap();
    assert!(gate.wait_blocked(common::HANG_GUARD));
    assert_eq!(gate.blocked(), 1);
    assert!(done.lock().unwrap().is_empty());
    assert_eq!(fake.modify_log()[0].result, None, "running");
    gate.release();
    p.run_until_idle();
    assert_eq!(*done.lock().unwrap(), vec![QpState::Init as u8]);
    fake.destroy_qp(Arc::try_unwrap(qp).unwrap());
    fake.destroy_cq(cq);
    fake.deallocate_pd(pd);
    fake.close_ca(ca);
    p.shutdown();
}
