//! The lower edge end to end through C: `CiVerbs` (the filter's side) over a `CiExport` (a
//! controller's side) over the host model's scriptable device, `FakeVerbs`. Every verb crosses
//! real `extern "system"` calls with C structures, handles and callbacks; the device's answers
//! must arrive unchanged (or changed exactly as the C types force), its callbacks must reach
//! the right sink once, and nothing may leak. These tests also run under Miri.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use wv_hal::KArc;

use wv_abi::consts::*;
use wv_ci::ib_types::IB_AE_LOCAL_FATAL;
use wv_ci::{CiError, CiExport, CiTable, CiVerbs, RDMA_INTERFACE_VERBS_VERSION};
use wv_hal::*;
use wv_host::HostPlatform;
use wv_host::fake_verbs::{FakeCall, FakeConfig, FakeVerbs, ObjectKind};

mod support;

/// Counts every callback it receives.
#[derive(Default)]
struct Counter {
    ca: AtomicUsize,
    last_ca: std::sync::Mutex<Option<CaEvent>>,
    completions: AtomicUsize,
    errors: AtomicUsize,
    srq: std::sync::Mutex<Vec<SrqEvent>>,
    qp: std::sync::Mutex<Vec<QpEvent>>,
}

impl CaEventSink for Counter {
    fn on_event(&self, event: CaEvent) {
        self.ca.fetch_add(1, Ordering::SeqCst);
        *self.last_ca.lock().unwrap() = Some(event);
    }
}
impl CqEventSink for Counter {
    fn on_completion(&self) {
        self.completions.fetch_add(1, Ordering::SeqCst);
    }
    fn on_error(&self) {
        self.errors.fetch_add(1, Ordering::SeqCst);
    }
}
impl SrqEventSink for Counter {
    fn on_event(&self, event: SrqEvent) {
        self.srq.lock().unwrap().push(event);
    }
}
impl QpEventSink for Counter {
    fn on_event(&self, event: QpEvent) {
        self.qp.lock().unwrap().push(event);
    }
}

struct Rig {
    p: HostPlatform,
    fake: Arc<FakeVerbs>,
    export: CiExport<FakeVerbs>,
    ci: CiVerbs,
}

fn rig_with(config: FakeConfig) -> Rig {
    let p = HostPlatform::deterministic();
    let fake = FakeVerbs::new(&p, config);
    let export = CiExport::new(fake.clone()).expect("export");
    // SAFETY: an interface the export just made, with its reference.
    let ci = unsafe { CiVerbs::new(export.interface()) }.expect("a valid table");
    Rig {
        p,
        fake,
        export,
        ci,
    }
}

fn rig() -> Rig {
    rig_with(FakeConfig::default())
}

type Ca = <CiVerbs as Verbs>::Ca;
type Pd = <CiVerbs as Verbs>::Pd;
type Cq = <CiVerbs as Verbs>::Cq;
type Srq = <CiVerbs as Verbs>::Srq;
type Qp = <CiVerbs as Verbs>::Qp;

impl Rig {
    /// The device opened through C, its events counted.
    fn open_ca(&self) -> Ca {
        self.ci
            .open_ca(&mut Umv::none(), KArc::new(Counter::default()).into())
            .unwrap()
    }

    /// A CQ of `entries` on `ca`, its events counted.
    fn cq(&self, ca: &Ca, entries: u32) -> Cq {
        let sink = KArc::new(Counter::default()).into();
        self.ci
            .create_cq(ca, entries, sink, &mut Umv::none())
            .unwrap()
            .0
    }

    /// A QP as `create` says on `pd`, its events counted.
    fn qp(&self, pd: &Pd, create: &QpCreate<'_, Cq, Srq>) -> Qp {
        let sink = KArc::new(Counter::default()).into();
        self.ci
            .create_qp(pd, create, sink, &mut Umv::none())
            .unwrap()
            .0
    }

    /// Destroys `qp` and `cq`, then [`Rig::finish_with_pd`].
    fn finish_with(self, ca: Ca, pd: Pd, cq: Cq, qp: Qp) {
        self.ci.destroy_qp(qp);
        self.ci.destroy_cq(cq);
        self.finish_with_pd(ca, pd);
    }

    /// Deallocates `pd` and closes `ca`, then [`Rig::finish`]es.
    fn finish_with_pd(self, ca: Ca, pd: Pd) {
        self.ci.deallocate_pd(pd);
        self.ci.close_ca(ca);
        self.finish();
    }

    /// Drops the filter's side, then checks that the export holds no reference and the device
    /// no object but the export's own open.
    fn finish(self) {
        let fake = self.fake;
        support::finish_edge(
            &self.p,
            (self.ci, self.export),
            CiExport::consumers,
            || fake.live_objects(),
            "every object destroyed",
        );
    }

    fn live(&self, kind: ObjectKind) -> Vec<u64> {
        self.fake
            .live_objects()
            .into_iter()
            .filter(|(_, k)| *k == kind)
            .map(|(id, _)| id)
            .collect()
    }
}

/// The attributes the C types can carry: `ib_ca_attr_t` has no inline size and expresses only
/// some capability bits, `ib_port_attr_t` five port capabilities.
fn through_c(mut ca: CaAttributes) -> CaAttributes {
    ca.max_inline_send = 0;
    ca.capability_flags &= WV_IO_BAD_PKEY_COUNTER
        | WV_IO_BAD_QKEY_COUNTER
        | WV_IO_PATH_MIGRATION
        | WV_IO_AH_PORT_CHECKING
        | WV_IO_CHANGE_PHYSICAL_PORT
        | WV_IO_RESIZE_MAX_WR
        | WV_IO_SRQ_RESIZE
        | WV_IO_QP_STATE_MODIFIER
        | WV_IO_SHUTDOWN_PORT
        | WV_IO_INIT_TYPE
        | WV_IO_PORT_ACTIVE_EVENT
        | WV_IO_SYSTEM_IMAGE_GUID;
    ca
}

#[test]
fn identity_and_queries_arrive_as_the_device_answers_them() {
    let mut config = FakeConfig::default();
    config.ca.capability_flags = WV_IO_SRQ_RESIZE | WV_IO_PORT_ACTIVE_EVENT;
    config.ca.page_size_capability = (1 << 12) | (1 << 21);
    let mut port2 = config.ports[0].clone();
    port2.attributes.capability_flags = WV_IO_PATH_MIGRATION;
    port2.attributes.lid = 0x1234;
    port2.gids.push([0xAB; 16]);
    port2.pkeys.push(0x8001u16.to_be());
    config.ports.push(port2);
    let r = rig_with(config);
    assert_eq!(r.ci.guid(), r.fake.guid());
    assert_eq!(r.ci.library_name(), "fakeu");
    assert_eq!(
        r.ci.query_ca().unwrap(),
        through_c(r.fake.query_ca().unwrap())
    );
    for port in 1..=2 {
        let want = r.fake.query_port(port).unwrap();
        assert_eq!(r.ci.query_port(port).unwrap(), want, "port {port}");
        for i in 0..want.gid_table_len {
            assert_eq!(r.ci.query_gid(port, i), r.fake.query_gid(port, i));
        }
        for i in 0..want.pkey_table_len {
            assert_eq!(r.ci.query_pkey(port, i), r.fake.query_pkey(port, i));
        }
        assert_eq!(
            r.ci.query_gid(port, want.gid_table_len),
            Err(VerbsError::InvalidParameter)
        );
    }
    assert_eq!(r.ci.query_port(3), Err(VerbsError::InvalidParameter));
    assert_eq!(r.ci.query_port(0), Err(VerbsError::InvalidParameter));
    r.finish();
}

#[test]
fn vendor_bytes_travel_both_ways() {
    let r = rig();
    r.fake.set_umv_reply(0x77, b"reply".to_vec());
    let mut buf = *b"request\0\0\0";
    let mut umv = Umv::new(0x42, 7, 10, &mut buf);
    let ca =
        r.ci.open_ca(&mut umv, KArc::new(Counter::default()).into())
            .unwrap();
    assert_eq!(umv.status, 0x77);
    assert_eq!(&buf[..5], b"reply");
    assert_eq!(r.fake.last_umv_input(), b"request".to_vec());
    let pd = r.ci.allocate_pd(&ca, &mut Umv::none()).unwrap();
    r.finish_with_pd(ca, pd);
}

#[test]
fn device_events_reach_each_open_once_and_stop_after_close() {
    let r = rig();
    let (a, b) = (KArc::new(Counter::default()), KArc::new(Counter::default()));
    let ca_a = r.ci.open_ca(&mut Umv::none(), a.clone().into()).unwrap();
    let ca_b = r.ci.open_ca(&mut Umv::none(), b.clone().into()).unwrap();
    assert!(r.fake.port_event(1, CaEventKind::PortDown));
    r.p.run_until_idle();
    assert_eq!(a.ca.load(Ordering::SeqCst), 1);
    assert_eq!(b.ca.load(Ordering::SeqCst), 1);
    assert_eq!(
        *a.last_ca.lock().unwrap(),
        Some(CaEvent {
            kind: CaEventKind::PortDown,
            port: 1
        })
    );
    r.ci.close_ca(ca_a);
    r.fake.port_event(0, CaEventKind::LocalFatal);
    r.p.run_until_idle();
    assert_eq!(a.ca.load(Ordering::SeqCst), 1, "closed: no more events");
    assert_eq!(b.ca.load(Ordering::SeqCst), 2);
    assert_eq!(
        b.last_ca.lock().unwrap().map(|e| e.kind),
        Some(CaEventKind::LocalFatal)
    );
    r.ci.close_ca(ca_b);
    assert_ne!(IB_AE_LOCAL_FATAL, 0);
    r.finish();
}

#[test]
fn cq_srq_and_qp_callbacks_arrive_through_the_trampolines() {
    let r = rig();
    let ca = r.open_ca();
    let pd = r.ci.allocate_pd(&ca, &mut Umv::none()).unwrap();
    let cq_sink = KArc::new(Counter::default());
    let (cq, size) =
        r.ci.create_cq(&ca, 100, cq_sink.clone().into(), &mut Umv::none())
            .unwrap();
    assert!(size >= 100);
    let cq_id = r.live(ObjectKind::Cq)[0];
    r.fake.cq_completion(cq_id);
    r.fake.cq_completion(cq_id);
    r.fake.cq_error(cq_id);
    r.p.run_until_idle();
    assert_eq!(cq_sink.completions.load(Ordering::SeqCst), 2);
    assert_eq!(cq_sink.errors.load(Ordering::SeqCst), 1);
    assert!(r.ci.resize_cq(&cq, 200, &mut Umv::none()).unwrap() >= 200);

    let srq_sink = KArc::new(Counter::default());
    let attr = SrqAttributes {
        max_wr: 16,
        max_sge: 1,
        srq_limit: 0,
    };
    let srq =
        r.ci.create_srq(&pd, &attr, srq_sink.clone().into(), &mut Umv::none())
            .unwrap();
    let srq_id = r.live(ObjectKind::Srq)[0];
    for e in [
        SrqEvent::LimitReached,
        SrqEvent::LastWqeReached,
        SrqEvent::Error,
    ] {
        r.fake.srq_event(srq_id, e);
    }
    r.p.run_until_idle();
    assert_eq!(
        *srq_sink.srq.lock().unwrap(),
        vec![
            SrqEvent::LimitReached,
            SrqEvent::LastWqeReached,
            SrqEvent::Error
        ]
    );
    let limit = SrqAttributes {
        srq_limit: 4,
        ..attr
    };
    let mask = SrqModifyMask {
        max_wr: false,
        limit: true,
    };
    r.ci.modify_srq(&srq, &limit, mask, &mut Umv::none())
        .unwrap();
    assert_eq!(r.ci.query_srq(&srq, &mut Umv::none()).unwrap().srq_limit, 4);

    let qp_sink = KArc::new(Counter::default());
    let create = QpCreate {
        sq_signaled: true,
        srq: Some(&srq),
        ..QpCreate::new(QpType::Rc, &cq, 8)
    };
    let (qp, created) =
        r.ci.create_qp(&pd, &create, qp_sink.clone().into(), &mut Umv::none())
            .unwrap();
    assert!(created.qpn != 0 && created.sq_depth >= 8);
    let qp_id = r.live(ObjectKind::Qp)[0];
    r.fake.qp_event(qp_id, QpEvent::CommEstablished);
    r.fake.qp_event(qp_id, QpEvent::Fatal);
    r.p.run_until_idle();
    assert_eq!(
        *qp_sink.qp.lock().unwrap(),
        vec![QpEvent::CommEstablished, QpEvent::Fatal]
    );
    let attr = r.ci.query_qp(&qp).unwrap();
    assert_eq!(
        (attr.qpn, attr.qp_type, attr.state),
        (created.qpn, QpType::Rc, QpState::Reset)
    );
    assert!(attr.sq_signaled);

    // After destroy, events for the objects are dropped by the device: no callback reaches a
    // freed context.
    r.ci.destroy_qp(qp);
    r.ci.destroy_srq(srq);
    r.ci.destroy_cq(cq);
    r.fake.cq_completion(cq_id);
    r.p.run_until_idle();
    assert_eq!(cq_sink.completions.load(Ordering::SeqCst), 2);
    r.finish_with_pd(ca, pd);
}

#[test]
fn every_modification_arrives_exactly_as_sent() {
    let r = rig();
    let ca = r.open_ca();
    let pd = r.ci.allocate_pd(&ca, &mut Umv::none()).unwrap();
    let cq = r.cq(&ca, 8);
    let create = QpCreate::new(QpType::Rc, &cq, 8);
    let qp = r.qp(&pd, &create);
    let path = QpPath {
        av: AddressVector {
            grh_valid: true,
            hop_limit: 1,
            traffic_class: 3,
            flow_label: 0xABCDE,
            sgid: [1; 16],
            dgid: [2; 16],
            dlid: 7,
            service_level: 1,
            path_bits: 0,
            static_rate: 0,
            port: 1,
        },
        path_mtu: Some(Mtu::Mtu1024),
        local_ack_timeout: 14,
        seq_err_retry_cnt: 7,
        rnr_retry_cnt: 7,
    };
    let steps = [
        QpModify::Init(QpInit {
            port: 1,
            qkey: 0x1111_1111,
            pkey_index: 0,
            access: 0x0B,
        }),
        QpModify::Rtr(QpRtr {
            rq_psn: 0x12_3456,
            dest_qpn: 0x99,
            primary: path,
            responder_resources: 1,
            rnr_nak_timeout: 12,
            opts: QpModifyOptions(QpModifyOptions::ACCESS_CTRL | QpModifyOptions::PKEY),
            alternate: QpPath::default(),
            qkey: 0,
            pkey_index: 0,
            access: 0x0B,
            sq_depth: 0,
            rq_depth: 0,
        }),
        QpModify::Rts(QpRts {
            sq_psn: 0x65_4321,
            retry_cnt: 7,
            rnr_retry_cnt: 7,
            local_ack_timeout: 14,
            initiator_depth: 1,
            responder_resources: 1,
            primary: path,
            ..QpRts::default()
        }),
        QpModify::Sqd { notify: true },
        QpModify::Error,
        QpModify::Reset,
    ];
    for m in steps {
        let mut out = [0u8; 8];
        r.ci.modify_qp(&qp, &m, &mut out).unwrap();
        let log = r.fake.modify_log();
        let last = log.last().unwrap();
        assert_eq!(last.modify, m, "arrived as sent");
        assert_eq!(
            out[0],
            m.target() as u8,
            "the device's output bytes came back"
        );
    }
    // Output of no bytes: null buffer, size 0.
    r.ci.modify_qp(&qp, &QpModify::Reset, &mut []).unwrap();
    // A refused transition comes back as the device's error.
    assert_eq!(
        r.ci.modify_qp(
            &qp,
            &QpModify::Rts(match steps[2] {
                QpModify::Rts(rts) => rts,
                _ => unreachable!(),
            }),
            &mut []
        ),
        Err(VerbsError::InvalidState)
    );
    r.finish_with(ca, pd, cq, qp);
}

#[test]
fn memory_windows_address_handles_and_multicast() {
    let r = rig();
    let ca = r.open_ca();
    let pd = r.ci.allocate_pd(&ca, &mut Umv::none()).unwrap();
    let region = MemoryRegion {
        address: 0x7FF0_0000_1000,
        length: 4096,
        access: WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_READ,
    };
    let (mr, keys) = r.ci.register_mr(&pd, &region).unwrap();
    assert_ne!(keys.lkey, 0);
    // A failed deregistration leaves the region registered under the same handle.
    r.fake
        .fail_next(FakeCall::DeregisterMr, VerbsError::ResourceBusy);
    let (mr, e) = r.ci.deregister_mr(mr).unwrap_err();
    assert_eq!(e, VerbsError::ResourceBusy);
    assert_eq!(r.live(ObjectKind::Mr).len(), 1);
    r.ci.deregister_mr(mr).unwrap();
    assert_eq!(r.live(ObjectKind::Mr).len(), 0);

    let (mw, rkey) = r.ci.create_mw(&pd, &mut Umv::none()).unwrap();
    assert_ne!(rkey, 0);
    r.ci.destroy_mw(mw);
    let av = AddressVector {
        port: 1,
        dlid: 3,
        ..AddressVector::default()
    };
    let ah = r.ci.create_ah(&pd, &av, &mut Umv::none()).unwrap();
    r.ci.destroy_ah(ah);

    let cq = r.cq(&ca, 8);
    let create = QpCreate::new(QpType::Ud, &cq, 8);
    let qp = r.qp(&pd, &create);
    let mut mgid = [0u8; 16];
    mgid[0] = 0xFF;
    let m = r.ci.attach_mcast(&qp, &mgid, 0xC001).unwrap();
    assert_eq!(
        r.ci.attach_mcast(&qp, &[0; 16], 1).unwrap_err(),
        VerbsError::InvalidParameter
    );
    r.ci.detach_mcast(m);
    r.finish_with(ca, pd, cq, qp);
}

#[test]
fn device_failures_come_back_as_the_same_errors() {
    let r = rig();
    let ca = r.open_ca();
    for e in [
        VerbsError::InsufficientResources,
        VerbsError::InvalidSetting,
        VerbsError::InsufficientMemory,
    ] {
        r.fake.fail_next(FakeCall::CreateCq, e);
        let got = r.ci.create_cq(
            &ca,
            8,
            KArc::new(Counter::default()).into(),
            &mut Umv::none(),
        );
        assert_eq!(got.err(), Some(e));
    }
    r.fake
        .fail_next(FakeCall::OpenCa, VerbsError::InsufficientResources);
    assert_eq!(
        r.ci.open_ca(&mut Umv::none(), KArc::new(Counter::default()).into())
            .err(),
        Some(VerbsError::InsufficientResources)
    );
    r.fake.fail_next(FakeCall::QueryCa, VerbsError::Other);
    assert_eq!(r.ci.query_ca(), Err(VerbsError::Other));
    r.ci.close_ca(ca);
    r.finish();
}

#[test]
fn unusable_tables_are_refused_and_their_reference_released() {
    let r = rig();
    let mut bad_version = r.export.interface();
    bad_version.InterfaceHeader.Version = RDMA_INTERFACE_VERBS_VERSION + 1;
    // SAFETY: an interface of the export, with its reference.
    let e = unsafe { CiVerbs::new(bad_version) }.unwrap_err();
    assert_eq!(
        e,
        CiError::Version(CiTable::Verbs, RDMA_INTERFACE_VERBS_VERSION + 1)
    );
    assert_eq!(e.to_string(), "verbs interface version 0x0208, want 0x0207");
    let mut small = r.export.interface();
    small.InterfaceHeader.Size = 32;
    // SAFETY: as above.
    let e = unsafe { CiVerbs::new(small) }.unwrap_err();
    assert_eq!(e, CiError::Size(CiTable::Verbs, 32));
    let mut missing = r.export.interface();
    missing.Verbs.ndi_modify_qp = None;
    let e = {
        // SAFETY: as above.
        unsafe { CiVerbs::new(missing) }.unwrap_err()
    };
    assert_eq!(e, CiError::Missing(CiTable::Verbs, "ndi_modify_qp"));
    assert_eq!(
        r.export.consumers(),
        1,
        "only the rig's own interface is held"
    );
    r.finish();
}
