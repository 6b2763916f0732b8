//! [`FakeCm`]: a scriptable connection manager for the driver core's endpoint tests.
//!
//! It keeps what an IB CM keeps per id (a CEP state, the REQ and REP exchanged, the queued
//! requests of a listen) so that out-of-order calls fail as they would on a real CM
//! (`STATUS_INVALID_DEVICE_STATE`), logs every call with its arguments, lets a test fail any
//! call, and delivers the peer's side of the protocol as the test scripts it: the test calls
//! e.g. [`FakeCm::event`]; the CM raises an interrupt on the platform, whose ISR queues a DPC
//! that calls the id's sink at DISPATCH_LEVEL, as a CM's MAD completion processing does.
//!
//! Every call checks that it is made at PASSIVE_LEVEL (`get_request` at IRQL <= DISPATCH_LEVEL,
//! as its contract allows); `destroy_id` waits until no callback of the id runs; ids still
//! alive at teardown are reported as leaks. Sinks are called with no lock of the CM held, so a
//! listen's sink may take its request from inside its `ReqReceived`.

use std::collections::{BTreeMap, HashMap, VecDeque};

use wv_abi::{IB_PATH_REC, NtStatus};
use wv_hal::InterruptService;
use wv_hal::cm::{REP_PRIVATE_DATA, REQ_PRIVATE_DATA};
use wv_hal::{
    CmEvent, CmEventSink, CmRep, CmRepEvent, CmReq, CmReqEvent, CmReqParams, ConnectionManager,
    DeviceModelPlatform, Dpc, Irql, KArc, Mtu, Platform, QpInit, QpModify, QpPath, QpRtr, QpRts,
    QpState, QpType,
};

use crate::irql;
use crate::low_resources;
use crate::platform::HostPlatform;
use crate::sync::{Arc, Condvar, Mutex, Weak};

/// The calls a failure can be injected into (and the log names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)] // each variant is the `ConnectionManager` method of the same name
pub enum FakeCmOp {
    CreateId,
    DestroyId,
    Listen,
    GetRequest,
    SendReq,
    SendRep,
    SendRtu,
    SendDreq,
    SendDrep,
    SendRej,
    SendMra,
    GetQpAttr,
}

/// One logged call with the arguments tests look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeCmCall {
    /// Which call.
    pub op: FakeCmOp,
    /// The id it acted on (the new id for `CreateId`/`GetRequest`, the listener in `detail`).
    pub id: u64,
    /// What it returned.
    pub result: Result<(), NtStatus>,
    /// The arguments.
    pub detail: FakeCmDetail,
}

/// The arguments of a logged call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FakeCmDetail {
    /// No arguments worth logging.
    None,
    /// `listen`.
    Listen {
        /// Service id (host order).
        service_id: u64,
        /// Compare bytes.
        compare: Vec<u8>,
        /// The offset/mask argument.
        compare_offset: u8,
    },
    /// `get_request`: the listener the request came from.
    GetRequest {
        /// The listening id.
        listen: u64,
    },
    /// `send_req`.
    Req(FakeReq),
    /// `send_rep`.
    Rep(FakeRep),
    /// `send_rtu`, `send_dreq`, `send_drep`, `send_mra`: their private data.
    PrivateData(Vec<u8>),
    /// `send_rej`.
    Rej {
        /// Reason (host order).
        reason: u16,
        /// Additional reject information.
        ari: Vec<u8>,
        /// Private data.
        private_data: Vec<u8>,
    },
    /// `get_qp_attr`.
    QpAttr(QpState),
}

/// A REQ as `send_req` received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeReq {
    /// Service id (host order).
    pub service_id: u64,
    /// Primary path.
    pub primary_path: IB_PATH_REC,
    /// Local QP number.
    pub qpn: u32,
    /// Private data.
    pub private_data: Vec<u8>,
    /// What the request asks.
    pub params: CmReqParams,
}

/// A REP as `send_rep` received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeRep {
    /// Local QP number.
    pub qpn: u32,
    /// Starting PSN.
    pub starting_psn: u32,
    /// Private data.
    pub private_data: Vec<u8>,
    /// Failover acceptance.
    pub failover_accepted: u8,
    /// Responder resources.
    pub responder_resources: u8,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// Flow control.
    pub flow_control: bool,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// SRQ.
    pub srq: bool,
}

/// The [`FakeRep`] of a sent [`CmRep`] or a received [`CmRepEvent`]: the same fields, but
/// for the name of the QP number (`qpn_field`).
macro_rules! fake_rep {
    ($rep:expr, $qpn_field:ident) => {{
        let rep = $rep;
        FakeRep {
            qpn: rep.$qpn_field,
            starting_psn: rep.starting_psn,
            private_data: rep.private_data.to_vec(),
            failover_accepted: rep.failover_accepted,
            responder_resources: rep.responder_resources,
            initiator_depth: rep.initiator_depth,
            flow_control: rep.flow_control,
            rnr_retry_count: rep.rnr_retry_count,
            srq: rep.srq,
        }
    }};
}

/// A peer event a test delivers to an id (the owned form of [`CmEvent`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FakeCmEvent {
    /// The REQ timed out.
    ReqError,
    /// The peer accepted.
    Rep(CmRepEvent),
    /// The REP timed out.
    RepError,
    /// The peer's RTU.
    Rtu(Vec<u8>),
    /// The peer's DREQ.
    Dreq(Vec<u8>),
    /// The DREQ timed out.
    DreqError,
    /// The peer's DREP.
    Drep(Vec<u8>),
    /// The peer's REJ.
    Rej {
        /// Reason (host order).
        reason: u16,
        /// Private data.
        private_data: Vec<u8>,
    },
    /// The peer's MRA.
    Mra(u8),
    /// Any other event kind.
    Other(u32),
}

/// The CEP state of one id (IBA 12.9.6, the part WinVerbs drives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CepState {
    /// Created, nothing sent.
    Idle,
    /// Listening.
    Listen,
    /// REQ sent, waiting for the REP.
    ReqSent,
    /// REQ received (an id from `get_request`), not answered yet.
    ReqRcvd,
    /// REP received, RTU not sent yet.
    RepRcvd,
    /// REP sent, waiting for the RTU.
    RepSent,
    /// Connected.
    Established,
    /// DREQ sent, waiting for the DREP.
    DreqSent,
    /// DREQ received, DREP not sent yet.
    DreqRcvd,
    /// Disconnected, rejected or timed out.
    Timewait,
}

struct IdState {
    state: CepState,
    /// Created by `get_request` (the passive side of a connection).
    passive: bool,
    /// Requests queued on a listen, oldest first.
    queued: VecDeque<CmReqEvent>,
    /// The REQ this id sent (active) or received (passive).
    req: Option<FakeReq>,
    /// The REP this id received (active) or sent (passive).
    rep: Option<FakeRep>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    ids: BTreeMap<u64, IdState>,
    fail_next: HashMap<FakeCmOp, VecDeque<NtStatus>>,
    log: Vec<FakeCmCall>,
    /// Delivered from inside the next `get_request` to the new id's sink.
    racing: Option<FakeCmEvent>,
    /// Run as the next call of each kind begins ([`FakeCm::during_next`]).
    during: HashMap<FakeCmOp, Box<dyn FnOnce() + Send>>,
}

impl State {
    /// No objects yet; the first id is 1 (0 is never an id).
    fn new() -> State {
        State {
            next_id: 1,
            ..State::default()
        }
    }

    fn leaks(&self) -> Vec<String> {
        match self.ids.len() {
            0 => Vec::new(),
            n => vec![format!("FakeCm: {n} CM id(s) alive at teardown")],
        }
    }
}

#[derive(Default)]
struct Sinks {
    by_id: HashMap<u64, KArc<dyn CmEventSink>>,
    running: HashMap<u64, usize>,
}

/// A scriptable connection manager implementing [`ConnectionManager`] over a [`HostPlatform`].
pub struct FakeCm {
    platform: HostPlatform,
    state: Arc<Mutex<State>>,
    sinks: Mutex<Sinks>,
    sinks_idle: Condvar,
    events: Mutex<VecDeque<(u64, Delivery)>>,
    dpc: KArc<dyn Dpc>,
}

/// What the DPC delivers.
#[derive(Clone, Debug)]
enum Delivery {
    ReqReceived,
    Event(Box<FakeCmEvent>),
}

struct CmDpc(Weak<FakeCm>);

impl Dpc for CmDpc {
    fn run(&self) {
        if let Some(cm) = self.0.upgrade() {
            cm.deliver_events();
        }
    }
}

struct CmIsr<'a>(&'a FakeCm);

impl InterruptService for CmIsr<'_> {
    fn service(&self) -> bool {
        let cm = self.0;
        if cm.events.lock().is_empty() {
            return false;
        }
        cm.platform.queue_dpc(&cm.dpc);
        true
    }
}

/// An id of the fake CM; destroying it consumes it.
#[derive(Debug, PartialEq, Eq)]
pub struct FakeCmId {
    id: u64,
}

impl FakeCmId {
    /// The id's number, for event injection.
    pub fn id(&self) -> u64 {
        self.id
    }
}

/// A plausible REP from a peer: QP 0x51, PSN 0x5000, the given private data.
pub fn peer_rep(private_data: &[u8]) -> CmRepEvent {
    let mut pd = [0u8; REP_PRIVATE_DATA];
    let n = private_data.len().min(REP_PRIVATE_DATA);
    pd[..n].copy_from_slice(&private_data[..n]);
    CmRepEvent {
        remote_qpn: 0x51,
        starting_psn: 0x5000,
        private_data: pd,
        failover_accepted: 1,
        responder_resources: 2,
        initiator_depth: 3,
        flow_control: true,
        rnr_retry_count: 7,
        srq: false,
        remote_ca_guid: 0x0002_c903_0000_5151u64.to_be(),
        target_ack_delay: 15,
    }
}

/// The path of [`peer_req`]'s request: LID 1 to LID 2 (network order), the default pkey,
/// MTU and packet lifetime as a path record query answers them; no GIDs.
pub fn peer_path() -> IB_PATH_REC {
    IB_PATH_REC {
        dlid: 2u16.to_be(),
        slid: 1u16.to_be(),
        pkey: 0xFFFF,
        mtu: 0x84,
        pkt_life: 0x92,
        ..IB_PATH_REC::default()
    }
}

/// A plausible REQ from a peer for `service_id`: QP 0x61, PSN 0x6000, `private_data` (the
/// IP-CM header and user bytes) at the start of the 92-byte field.
pub fn peer_req(service_id: u64, private_data: &[u8]) -> CmReqEvent {
    let mut pd = [0u8; REQ_PRIVATE_DATA];
    let n = private_data.len().min(REQ_PRIVATE_DATA);
    pd[..n].copy_from_slice(&private_data[..n]);
    CmReqEvent {
        service_id,
        primary_path: peer_path(),
        remote_qpn: 0x61,
        private_data: pd,
        params: CmReqParams {
            qp_type: QpType::Rc,
            starting_psn: 0x6000,
            max_cm_retries: 15,
            responder_resources: 4,
            initiator_depth: 5,
            remote_cm_response_timeout: 20,
            flow_control: true,
            local_cm_response_timeout: 20,
            rnr_retry_count: 6,
            retry_count: 7,
            srq: false,
        },
        local_ca_guid: 0x0002_c903_0000_1234u64.to_be(),
        remote_ca_guid: 0x0002_c903_0000_6161u64.to_be(),
        pkey_index: 0,
        port: 1,
    }
}

impl FakeCm {
    /// A CM whose interrupts and DPCs run on `platform`. Registers a teardown check that
    /// reports every id still alive.
    pub fn new(platform: &HostPlatform) -> Arc<FakeCm> {
        let state = platform.leak_checked(State::new(), State::leaks);
        Arc::new_cyclic(|me: &Weak<FakeCm>| FakeCm {
            platform: platform.clone(),
            state,
            sinks: Mutex::new(Sinks::default()),
            sinks_idle: Condvar::new(),
            events: Mutex::new(VecDeque::new()),
            dpc: KArc::new(CmDpc(me.clone())).into(),
        })
    }

    /// Makes the next `op` call fail with `status` (queued: several calls fail in order).
    pub fn fail_next(&self, op: FakeCmOp, status: NtStatus) {
        self.state
            .lock()
            .fail_next
            .entry(op)
            .or_default()
            .push_back(status);
    }

    /// Every call so far, oldest first.
    pub fn calls(&self) -> Vec<FakeCmCall> {
        self.state.lock().log.clone()
    }

    /// The successful calls of kind `op`, oldest first.
    pub fn sent(&self, op: FakeCmOp) -> Vec<FakeCmCall> {
        self.calls()
            .into_iter()
            .filter(|c| c.op == op && c.result.is_ok())
            .collect()
    }

    /// The ids alive now.
    pub fn live_ids(&self) -> Vec<u64> {
        self.state.lock().ids.keys().copied().collect()
    }

    /// The CEP state of id `id`.
    pub fn cep_state(&self, id: u64) -> Option<CepState> {
        self.state.lock().ids.get(&id).map(|s| s.state)
    }

    /// The ids listening now, with their service ids.
    pub fn listeners(&self) -> Vec<(u64, u64)> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c.detail {
                FakeCmDetail::Listen { service_id, .. } if c.result.is_ok() => {
                    Some((c.id, service_id))
                }
                _ => None,
            })
            .filter(|(id, _)| self.cep_state(*id) == Some(CepState::Listen))
            .collect()
    }

    /// The id of the most recent successful call of kind `op`.
    pub fn last_id(&self, op: FakeCmOp) -> Option<u64> {
        self.sent(op).last().map(|c| c.id)
    }

    /// A peer's REQ arrives for listening id `listen`: it is queued, and the listener's sink
    /// gets `ReqReceived` (interrupt → ISR → DPC). Returns false if `listen` does not listen.
    pub fn incoming_request(&self, listen: u64, req: CmReqEvent) -> bool {
        {
            let mut state = self.state.lock();
            match state.ids.get_mut(&listen) {
                Some(s) if s.state == CepState::Listen => s.queued.push_back(req),
                _ => return false,
            }
        }
        self.raise(listen, Delivery::ReqReceived);
        true
    }

    /// The peer's side of the protocol reaches id `id` (its CEP state follows), through
    /// interrupt and DPC.
    pub fn event(&self, id: u64, event: FakeCmEvent) {
        self.raise(id, Delivery::Event(Box::new(event)));
    }

    /// The next `get_request` delivers `event` to the new id's sink from inside the call
    /// (at DISPATCH_LEVEL), as if the peer's message were processed on another processor
    /// in the very instant the id is handed over (the window of spec §7.1-h).
    pub fn race_next_get_request(&self, event: FakeCmEvent) {
        self.state.lock().racing = Some(event);
    }

    /// The next call of `op` runs `f` as it begins (before its failure injection and its
    /// state check), at PASSIVE_LEVEL on the caller's thread with no lock of the CM held: as
    /// if another thread ran `f` (an IOCTL, a peer's message and the work it causes) in the
    /// very instant the driver waits for the CM, which the deterministic mode cannot
    /// otherwise interleave. A call made above PASSIVE_LEVEL (`get_request` from a listen's
    /// sink) runs `f` on a thread of its own and waits for it there: another processor.
    pub fn during_next(&self, op: FakeCmOp, f: impl FnOnce() + Send + 'static) {
        self.state.lock().during.insert(op, Box::new(f));
    }

    fn raise(&self, id: u64, delivery: Delivery) {
        self.events.lock().push_back((id, delivery));
        self.platform.interrupt(&CmIsr(self));
    }

    /// The DPC: calls each event's sink at DISPATCH_LEVEL. Events for ids destroyed meanwhile
    /// are dropped.
    fn deliver_events(&self) {
        // The CM's own bookkeeping (its DPC), not the driver's allocation: only the sinks it
        // calls are the driver's.
        let _host = low_resources::host_scope();
        loop {
            // Popped in a statement of its own: the lock is released before the sink runs (a
            // sink's own call may raise the next event).
            let next = self.events.lock().pop_front();
            let Some((id, delivery)) = next else { break };
            self.deliver(id, &delivery);
        }
    }

    fn deliver(&self, id: u64, delivery: &Delivery) {
        if let Delivery::Event(event) = delivery {
            self.apply_event(id, event);
        }
        let sink = {
            let mut sinks = self.sinks.lock();
            let sink = sinks.by_id.get(&id).cloned();
            if sink.is_some() {
                *sinks.running.entry(id).or_default() += 1;
            }
            sink
        };
        let Some(sink) = sink else {
            return;
        };
        struct Running<'a>(&'a FakeCm, u64);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                let mut sinks = self.0.sinks.lock();
                if let Some(n) = sinks.running.get_mut(&self.1) {
                    *n -= 1;
                    if *n == 0 {
                        sinks.running.remove(&self.1);
                    }
                }
                self.0.sinks_idle.notify_all();
            }
        }
        let _running = Running(self, id);
        // The sinks are the driver's code, called from the CM's DPC.
        let _driver = low_resources::driver_scope();
        match delivery {
            Delivery::ReqReceived => sink.on_event(CmEvent::ReqReceived),
            Delivery::Event(event) => match &**event {
                FakeCmEvent::ReqError => sink.on_event(CmEvent::ReqError),
                FakeCmEvent::Rep(rep) => sink.on_event(CmEvent::RepReceived(rep)),
                FakeCmEvent::RepError => sink.on_event(CmEvent::RepError),
                FakeCmEvent::Rtu(pd) => sink.on_event(CmEvent::RtuReceived { private_data: pd }),
                FakeCmEvent::Dreq(pd) => {
                    sink.on_event(CmEvent::DreqReceived { private_data: pd });
                }
                FakeCmEvent::DreqError => sink.on_event(CmEvent::DreqError),
                FakeCmEvent::Drep(pd) => {
                    sink.on_event(CmEvent::DrepReceived { private_data: pd });
                }
                FakeCmEvent::Rej {
                    reason,
                    private_data,
                } => sink.on_event(CmEvent::RejReceived {
                    reason: *reason,
                    ari: &[],
                    private_data,
                }),
                FakeCmEvent::Mra(timeout) => sink.on_event(CmEvent::MraReceived {
                    service_timeout: *timeout,
                    private_data: &[],
                }),
                FakeCmEvent::Other(kind) => sink.on_event(CmEvent::Other(*kind)),
            },
        }
    }

    /// The CEP state change the peer's message causes.
    fn apply_event(&self, id: u64, event: &FakeCmEvent) {
        let mut state = self.state.lock();
        let Some(s) = state.ids.get_mut(&id) else {
            return;
        };
        s.state = match (s.state, event) {
            (CepState::ReqSent, FakeCmEvent::Rep(rep)) => {
                s.rep = Some(fake_rep!(rep, remote_qpn));
                CepState::RepRcvd
            }
            (CepState::RepSent, FakeCmEvent::Rtu(_)) => CepState::Established,
            // A DREQ while the REP waits for its RTU implies the RTU (IBA 12.6.8).
            (CepState::Established | CepState::RepSent, FakeCmEvent::Dreq(_))
            | (CepState::DreqSent, FakeCmEvent::Dreq(_)) => CepState::DreqRcvd,
            (CepState::DreqSent, FakeCmEvent::Drep(_) | FakeCmEvent::DreqError) => {
                CepState::Timewait
            }
            (_, FakeCmEvent::ReqError | FakeCmEvent::RepError | FakeCmEvent::Rej { .. }) => {
                CepState::Timewait
            }
            (other, _) => other,
        };
    }

    fn enter(&self, op: FakeCmOp) -> Result<(), NtStatus> {
        let level = self.platform.irql();
        // `get_request` may also be called at DISPATCH_LEVEL, from a listen's sink.
        let max = if op == FakeCmOp::GetRequest {
            Irql::Dispatch
        } else {
            Irql::Passive
        };
        if level > max {
            self.platform
                .verifier()
                .fail(format!("verifier: FakeCm::{op:?} at {}", level.name()));
        }
        let during = self.state.lock().during.remove(&op);
        if let Some(f) = during {
            let run = || {
                // The test's code stands for the driver's other callers, not the CM's
                // bookkeeping.
                let _driver = low_resources::driver_scope();
                f();
            };
            if level == Irql::Passive {
                run();
            } else {
                std::thread::scope(|s| {
                    if s.spawn(run).join().is_err() {
                        panic!("the code run during FakeCm::{op:?} panicked");
                    }
                });
            }
        }
        let mut state = self.state.lock();
        match state.fail_next.get_mut(&op).and_then(VecDeque::pop_front) {
            Some(status) => {
                state.log.push(FakeCmCall {
                    op,
                    id: 0,
                    result: Err(status),
                    detail: FakeCmDetail::None,
                });
                Err(status)
            }
            None => Ok(()),
        }
    }

    fn log(&self, op: FakeCmOp, id: u64, result: Result<(), NtStatus>, detail: FakeCmDetail) {
        self.state.lock().log.push(FakeCmCall {
            op,
            id,
            result,
            detail,
        });
    }

    /// A CM message that only moves the connection from `from` to `to` and carries private
    /// data (RTU, DREQ, DREP): checked, applied and logged as `op`.
    fn send_moving(
        &self,
        op: FakeCmOp,
        id: &FakeCmId,
        from: CepState,
        to: CepState,
        private_data: &[u8],
    ) -> Result<(), NtStatus> {
        // The CM's own bookkeeping, not the driver's allocation.
        let _host = low_resources::host_scope();
        self.enter(op)?;
        let r = self.transition(id.id, &[from], to, |_| {});
        self.log(
            op,
            id.id,
            r,
            FakeCmDetail::PrivateData(private_data.to_vec()),
        );
        r
    }

    /// Moves id `id` from one of `from` to `to`, or fails with `STATUS_INVALID_DEVICE_STATE`.
    fn transition(
        &self,
        id: u64,
        from: &[CepState],
        to: CepState,
        record: impl FnOnce(&mut IdState),
    ) -> Result<(), NtStatus> {
        let mut state = self.state.lock();
        let s = state.ids.get_mut(&id).ok_or(NtStatus::INVALID_PARAMETER)?;
        if !from.contains(&s.state) {
            return Err(NtStatus::INVALID_DEVICE_STATE);
        }
        s.state = to;
        record(s);
        Ok(())
    }

    fn new_id(&self, state: CepState, passive: bool, events: KArc<dyn CmEventSink>) -> u64 {
        let id = {
            let mut st = self.state.lock();
            let id = st.next_id;
            st.next_id += 1;
            st.ids.insert(
                id,
                IdState {
                    state,
                    passive,
                    queued: VecDeque::new(),
                    req: None,
                    rep: None,
                },
            );
            id
        };
        self.sinks.lock().by_id.insert(id, events);
        id
    }

    fn path_of(req: &FakeReq, local_port: u8) -> QpPath {
        let mut path = QpPath {
            path_mtu: Some(Mtu::Mtu1024),
            local_ack_timeout: 18,
            seq_err_retry_cnt: req.params.retry_count,
            rnr_retry_cnt: req.params.rnr_retry_count,
            ..QpPath::default()
        };
        path.av.dlid = u16::from_be(req.primary_path.dlid);
        path.av.port = local_port;
        path
    }
}

impl std::fmt::Debug for FakeCm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeCm")
            .field("live_ids", &self.live_ids())
            .finish()
    }
}

fn fake_req(req: &CmReq<'_>) -> FakeReq {
    FakeReq {
        service_id: req.service_id,
        primary_path: *req.primary_path,
        qpn: req.qpn,
        private_data: req.private_data.to_vec(),
        params: req.params,
    }
}

fn received_req(req: &CmReqEvent) -> FakeReq {
    FakeReq {
        service_id: req.service_id,
        primary_path: req.primary_path,
        qpn: req.remote_qpn,
        private_data: req.private_data.to_vec(),
        params: req.params,
    }
}

fn fake_rep(rep: &CmRep<'_>) -> FakeRep {
    fake_rep!(rep, qpn)
}

impl ConnectionManager for FakeCm {
    type Id = FakeCmId;

    fn create_id(&self, events: KArc<dyn CmEventSink>) -> Result<FakeCmId, NtStatus> {
        // The CM's own bookkeeping, not the driver's allocation.
        let _host = low_resources::host_scope();
        self.enter(FakeCmOp::CreateId)?;
        let id = self.new_id(CepState::Idle, false, events);
        self.log(FakeCmOp::CreateId, id, Ok(()), FakeCmDetail::None);
        Ok(FakeCmId { id })
    }

    fn destroy_id(&self, id: FakeCmId) {
        // The CM's own bookkeeping, not the driver's allocation.
        let _host = low_resources::host_scope();
        let level = self.platform.irql();
        if level != Irql::Passive {
            self.platform
                .verifier()
                .fail(format!("verifier: FakeCm::DestroyId at {}", level.name()));
        }
        {
            let mut sinks = self.sinks.lock();
            sinks.by_id.remove(&id.id);
            while sinks.running.contains_key(&id.id) {
                self.sinks_idle.wait(&mut sinks);
            }
        }
        self.state.lock().ids.remove(&id.id);
        self.log(FakeCmOp::DestroyId, id.id, Ok(()), FakeCmDetail::None);
    }

    fn listen(
        &self,
        id: &FakeCmId,
        service_id: u64,
        compare: &[u8],
        compare_offset: u8,
    ) -> Result<(), NtStatus> {
        // The CM's own bookkeeping, not the driver's allocation.
        let _host = low_resources::host_scope();
        self.enter(FakeCmOp::Listen)?;
        let r = self.transition(id.id, &[CepState::Idle], CepState::Listen, |_| {});
        self.log(
            FakeCmOp::Listen,
            id.id,
            r,
            FakeCmDetail::Listen {
                service_id,
                compare: compare.to_vec(),
                compare_offset,
            },
        );
        r
    }

    fn get_request(
        &self,
        listen: &FakeCmId,
        events: KArc<dyn CmEventSink>,
    ) -> Result<(FakeCmId, CmReqEvent), NtStatus> {
        // The CM's own bookkeeping, not the driver's allocation.
        let _host = low_resources::host_scope();
        self.enter(FakeCmOp::GetRequest)?;
        let req = {
            let mut state = self.state.lock();
            match state.ids.get_mut(&listen.id) {
                Some(s) if s.state == CepState::Listen => s.queued.pop_front(),
                _ => None,
            }
        };
        let Some(req) = req else {
            let status = NtStatus::NO_MORE_ENTRIES;
            self.log(
                FakeCmOp::GetRequest,
                0,
                Err(status),
                FakeCmDetail::GetRequest { listen: listen.id },
            );
            return Err(status);
        };
        let id = self.new_id(CepState::ReqRcvd, true, events);
        if let Some(s) = self.state.lock().ids.get_mut(&id) {
            s.req = Some(received_req(&req));
        }
        self.log(
            FakeCmOp::GetRequest,
            id,
            Ok(()),
            FakeCmDetail::GetRequest { listen: listen.id },
        );
        let racing = self.state.lock().racing.take();
        if let Some(event) = racing {
            let verifier = self.platform.verifier().clone();
            irql::run_callback(&verifier, "CM callback", Irql::Dispatch, || {
                self.deliver(id, &Delivery::Event(Box::new(event)));
            });
        }
        Ok((FakeCmId { id }, req))
    }

    fn send_req(&self, id: &FakeCmId, req: &CmReq<'_>) -> Result<(), NtStatus> {
        // The CM's own bookkeeping, not the driver's allocation.
        let _host = low_resources::host_scope();
        self.enter(FakeCmOp::SendReq)?;
        let sent = fake_req(req);
        let r = if req.private_data.len() > REQ_PRIVATE_DATA {
            Err(NtStatus::INVALID_PARAMETER)
        } else {
            let keep = sent.clone();
            self.transition(id.id, &[CepState::Idle], CepState::ReqSent, |s| {
                s.req = Some(keep);
            })
        };
        self.log(FakeCmOp::SendReq, id.id, r, FakeCmDetail::Req(sent));
        r
    }

    fn send_rep(&self, id: &FakeCmId, rep: &CmRep<'_>) -> Result<(), NtStatus> {
        // The CM's own bookkeeping, not the driver's allocation.
        let _host = low_resources::host_scope();
        self.enter(FakeCmOp::SendRep)?;
        let sent = fake_rep(rep);
        let keep = sent.clone();
        let r = self.transition(id.id, &[CepState::ReqRcvd], CepState::RepSent, |s| {
            s.rep = Some(keep);
        });
        self.log(FakeCmOp::SendRep, id.id, r, FakeCmDetail::Rep(sent));
        r
    }

    fn send_rtu(&self, id: &FakeCmId, private_data: &[u8]) -> Result<(), NtStatus> {
        self.send_moving(
            FakeCmOp::SendRtu,
            id,
            CepState::RepRcvd,
            CepState::Established,
            private_data,
        )
    }

    fn send_dreq(&self, id: &FakeCmId, private_data: &[u8]) -> Result<(), NtStatus> {
        self.send_moving(
            FakeCmOp::SendDreq,
            id,
            CepState::Established,
            CepState::DreqSent,
            private_data,
        )
    }

    fn send_drep(&self, id: &FakeCmId, private_data: &[u8]) -> Result<(), NtStatus> {
        self.send_moving(
            FakeCmOp::SendDrep,
            id,
            CepState::DreqRcvd,
            CepState::Timewait,
            private_data,
        )
    }

    fn send_rej(
        &self,
        id: &FakeCmId,
        reason: u16,
        ari: &[u8],
        private_data: &[u8],
    ) -> Result<(), NtStatus> {
        // The CM's own bookkeeping, not the driver's allocation.
        let _host = low_resources::host_scope();
        self.enter(FakeCmOp::SendRej)?;
        let r = self.transition(
            id.id,
            &[CepState::ReqRcvd, CepState::RepRcvd, CepState::RepSent],
            CepState::Timewait,
            |_| {},
        );
        let detail = FakeCmDetail::Rej {
            reason,
            ari: ari.to_vec(),
            private_data: private_data.to_vec(),
        };
        self.log(FakeCmOp::SendRej, id.id, r, detail);
        r
    }

    fn send_mra(
        &self,
        id: &FakeCmId,
        service_timeout: u8,
        private_data: &[u8],
    ) -> Result<(), NtStatus> {
        // The CM's own bookkeeping, not the driver's allocation.
        let _host = low_resources::host_scope();
        self.enter(FakeCmOp::SendMra)?;
        let _ = service_timeout;
        let states = [CepState::ReqRcvd, CepState::RepRcvd];
        let r = match self.cep_state(id.id) {
            Some(s) if states.contains(&s) => Ok(()),
            Some(_) => Err(NtStatus::INVALID_DEVICE_STATE),
            None => Err(NtStatus::INVALID_PARAMETER),
        };
        let detail = FakeCmDetail::PrivateData(private_data.to_vec());
        self.log(FakeCmOp::SendMra, id.id, r, detail);
        r
    }

    /// INIT: port 1, P_Key index 0, local write + remote read/write. RTR: the peer's QP, its
    /// send PSN and initiator depth from the REQ (passive) or REP (active), MTU 1024, the
    /// path's DLID. RTS: the local send PSN (the REQ's, or the REP's once sent), the REQ's
    /// retry counts, the initiator depth the peer's responder resources allow.
    fn get_qp_attr(&self, id: &FakeCmId, state: QpState) -> Result<QpModify, NtStatus> {
        // The CM's own bookkeeping, not the driver's allocation.
        let _host = low_resources::host_scope();
        self.enter(FakeCmOp::GetQpAttr)?;
        let r = {
            let st = self.state.lock();
            match st.ids.get(&id.id) {
                None => Err(NtStatus::INVALID_PARAMETER),
                Some(s) => Self::qp_attr(s, state),
            }
        };
        let res = r.as_ref().map(|_| ()).map_err(|e| *e);
        self.log(FakeCmOp::GetQpAttr, id.id, res, FakeCmDetail::QpAttr(state));
        r
    }
}

impl FakeCm {
    fn qp_attr(s: &IdState, state: QpState) -> Result<QpModify, NtStatus> {
        let Some(req) = &s.req else {
            return Err(NtStatus::INVALID_DEVICE_STATE);
        };
        // The peer's QP, send PSN, and the reads/atomics each side issues.
        let (peer_qpn, peer_psn, peer_depth, peer_resources, own_psn) = if s.passive {
            let own = s.rep.as_ref().map_or(0, |r| r.starting_psn);
            (
                req.qpn,
                req.params.starting_psn,
                req.params.initiator_depth,
                req.params.responder_resources,
                own,
            )
        } else {
            let Some(rep) = &s.rep else {
                return match state {
                    QpState::Init => Ok(Self::init()),
                    _ => Err(NtStatus::INVALID_DEVICE_STATE),
                };
            };
            (
                rep.qpn,
                rep.starting_psn,
                rep.initiator_depth,
                rep.responder_resources,
                req.params.starting_psn,
            )
        };
        match state {
            QpState::Init => Ok(Self::init()),
            QpState::Rtr => Ok(QpModify::Rtr(QpRtr {
                rq_psn: peer_psn,
                dest_qpn: peer_qpn,
                primary: Self::path_of(req, 1),
                responder_resources: peer_depth,
                rnr_nak_timeout: 12,
                ..QpRtr::default()
            })),
            QpState::Rts => Ok(QpModify::Rts(QpRts {
                sq_psn: own_psn,
                retry_cnt: req.params.retry_count,
                rnr_retry_cnt: req.params.rnr_retry_count,
                local_ack_timeout: 18,
                initiator_depth: peer_resources,
                primary: Self::path_of(req, 1),
                ..QpRts::default()
            })),
            _ => Err(NtStatus::INVALID_PARAMETER),
        }
    }

    fn init() -> QpModify {
        QpModify::Init(QpInit {
            port: 1,
            qkey: 0,
            pkey_index: 0,
            access: 0x1 | 0x2 | 0x8,
        })
    }
}
