//! A [`Platform`] and a lower device built on loom's primitives, so that loom can explore every
//! interleaving of the real driver core's synchronisation (`RUSTFLAGS="--cfg loom"`).
//!
//! The host model proper ([`crate::HostPlatform`]) is too large to model-check: its verifier,
//! IRQL bookkeeping and worker pool would multiply the states loom must visit. This platform
//! keeps exactly the semantics the core relies on, with loom's mutexes and atomics where
//! ownership is decided:
//!
//! * a request completes once; a second completion, a request dropped without completion and
//!   a request still parked at the end are recorded ([`Ledger`]), not hidden;
//! * a manual queue decides under its lock who owns a parked request: `retrieve_next`,
//!   `purge` or the I/O manager's [`LoomPlatform::cancel`], exactly one of them;
//! * a cancel that reaches a request before it is parked completes it when it parks;
//! * work items wait in a queue until a model thread runs them ([`LoomPlatform::run_work`]);
//! * the lower device ([`LoomVerbs`]) calls its sinks from "DPC" threads of the model and
//!   never after the object's destroy call returned; it counts live objects for leaks;
//! * its connection manager ([`LoomCm`]) keeps each id's CEP state, so that a call out of
//!   order fails as on a real CM, and delivers the peer's messages (REQ, REP, REJ, DREQ, DREP)
//!   to the sinks from "DPC" threads of the model, never after `destroy_id` returned, with
//!   none of its locks held (a listen's sink may take its request with `get_request` from
//!   inside `ReqReceived`); it counts live ids for leaks.
//!
//! Spin locks are loom mutexes; IRQL is not modelled (the host model checks it).
#![allow(missing_docs)]

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex as StdMutex;

use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

use wv_abi::NtStatus;
use wv_hal::{
    AddressVector, CaAttributes, CaEventSink, CmEvent, CmEventSink, CmRep, CmRepEvent, CmReq,
    CmReqEvent, ConnectionManager, CqEventSink, Event, Gid, IoRequest, Irql, KArc, MemoryKeys,
    MemoryRegion, Platform, PortAttributes, QpAttributes, QpCreate, QpCreated, QpEventSink, QpInit,
    QpModify, QpRtr, QpRts, QpState, RequestQueue, SpinLock, SrqAttributes, SrqEventSink,
    SrqModifyMask, Umv, Verbs, VerbsError, WorkItem,
};

use crate::fake_cm::CepState;

/// What happened to every request of a model run. Plain `std` state: recording is not part
/// of what loom explores.
#[derive(Default, Debug)]
pub struct Ledger {
    /// (request id, status) per completion, in order.
    pub completions: Vec<(u64, NtStatus)>,
    /// Violations seen: a second completion, a request dropped without completion.
    pub violations: Vec<String>,
}

/// The I/O manager's record of one request.
pub struct Irp {
    pub id: u64,
    cancelled: AtomicBool,
    /// The queue it is parked in, if any (its id).
    parked_in: Mutex<Option<u64>>,
}

pub struct LoomRequest {
    irp: std::sync::Arc<Irp>,
    ledger: std::sync::Arc<StdMutex<Ledger>>,
    code: u32,
    input_len: usize,
    output_len: usize,
    buffer: Vec<u8>,
    done: bool,
}

impl LoomRequest {
    fn finish(mut self, status: NtStatus) {
        self.done = true;
        let mut ledger = self.ledger.lock().unwrap();
        if ledger.completions.iter().any(|(id, _)| *id == self.irp.id) {
            ledger
                .violations
                .push(format!("request {} completed twice", self.irp.id));
        }
        ledger.completions.push((self.irp.id, status));
    }
}

impl IoRequest for LoomRequest {
    crate::request::request_fields!();
    fn complete(self, status: NtStatus, _information: usize) {
        self.finish(status);
    }
}

impl Drop for LoomRequest {
    fn drop(&mut self) {
        if !self.done {
            self.ledger.lock().unwrap().violations.push(format!(
                "request {} dropped without completion",
                self.irp.id
            ));
        }
    }
}

#[derive(Default)]
struct QueueState {
    parked: VecDeque<LoomRequest>,
    purged: bool,
}

struct QueueInner {
    id: u64,
    state: Mutex<QueueState>,
}

/// A manual queue (see the module docs).
pub struct LoomQueue {
    inner: Arc<QueueInner>,
    platform: LoomPlatform,
}

impl RequestQueue<LoomRequest> for LoomQueue {
    fn park(&self, request: LoomRequest) -> Result<(), (LoomRequest, NtStatus)> {
        let mut state = self.inner.state.lock().unwrap();
        if state.purged {
            return Err((request, NtStatus::CANCELLED));
        }
        let cancelled = {
            let mut parked_in = request.irp.parked_in.lock().unwrap();
            let cancelled = request.irp.cancelled.load(Ordering::SeqCst);
            if !cancelled {
                *parked_in = Some(self.inner.id);
            }
            cancelled
        };
        if cancelled {
            drop(state);
            request.finish(NtStatus::CANCELLED);
        } else {
            state.parked.push_back(request);
        }
        Ok(())
    }

    fn retrieve_next(&self) -> Option<LoomRequest> {
        let request = self.inner.state.lock().unwrap().parked.pop_front()?;
        *request.irp.parked_in.lock().unwrap() = None;
        Some(request)
    }

    fn purge(&self) {
        let drained: Vec<LoomRequest> = {
            let mut state = self.inner.state.lock().unwrap();
            state.purged = true;
            state.parked.drain(..).collect()
        };
        for request in drained {
            *request.irp.parked_in.lock().unwrap() = None;
            request.finish(NtStatus::CANCELLED);
        }
    }

    fn parked(&self) -> usize {
        self.inner.state.lock().unwrap().parked.len()
    }
}

impl Drop for LoomQueue {
    fn drop(&mut self) {
        let left = self.inner.state.lock().unwrap().parked.len();
        if left != 0 {
            self.platform
                .shared
                .ledger
                .lock()
                .unwrap()
                .violations
                .push(format!("queue dropped with {left} requests parked"));
        }
        self.platform
            .shared
            .queues
            .lock()
            .unwrap()
            .retain(|q| q.id != self.inner.id);
    }
}

pub struct LoomSpinLock<T>(Mutex<T>);

impl<T: Send> SpinLock<T> for LoomSpinLock<T> {
    type Guard<'a>
        = MutexGuard<'a, T>
    where
        Self: 'a,
        T: 'a;
    fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap()
    }
}

pub struct LoomEvent {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Event for LoomEvent {
    fn set(&self) {
        *self.set.lock().unwrap() = true;
        self.cv.notify_all();
    }
    fn is_set(&self) -> bool {
        *self.set.lock().unwrap()
    }
    fn wait(&self) {
        let mut set = self.set.lock().unwrap();
        while !*set {
            set = self.cv.wait(set).unwrap();
        }
    }
}

struct Shared {
    ledger: std::sync::Arc<StdMutex<Ledger>>,
    next_id: AtomicU64,
    work: Mutex<VecDeque<KArc<dyn WorkItem>>>,
    /// Live queues, so the I/O manager can find the one a request is parked in.
    queues: Mutex<Vec<Arc<QueueInner>>>,
    /// The clock, moved only by [`LoomPlatform::advance_clock`]: the core reads it for its
    /// estimates, not to synchronise, so it is not one of the atomics loom explores.
    clock_ns: std::sync::atomic::AtomicU64,
}

/// The loom platform; clones are the same platform.
#[derive(Clone)]
pub struct LoomPlatform {
    shared: Arc<Shared>,
}

impl Default for LoomPlatform {
    fn default() -> Self {
        Self::new()
    }
}

impl LoomPlatform {
    pub fn new() -> Self {
        LoomPlatform {
            shared: Arc::new(Shared {
                ledger: std::sync::Arc::default(),
                next_id: AtomicU64::new(1),
                work: Mutex::new(VecDeque::new()),
                queues: Mutex::new(Vec::new()),
                clock_ns: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// Moves the clock forward by `ns`.
    pub fn advance_clock(&self, ns: u64) {
        self.shared
            .clock_ns
            .fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
    }

    /// A new request (an IRP the I/O manager built) with `input` and room for `output_len`.
    pub fn request(
        &self,
        code: u32,
        input: &[u8],
        output_len: usize,
    ) -> (LoomRequest, std::sync::Arc<Irp>) {
        let irp = std::sync::Arc::new(Irp {
            id: self.shared.next_id.fetch_add(1, Ordering::Relaxed),
            cancelled: AtomicBool::new(false),
            parked_in: Mutex::new(None),
        });
        let mut buffer = vec![0; input.len().max(output_len)];
        buffer[..input.len()].copy_from_slice(input);
        let request = LoomRequest {
            irp: std::sync::Arc::clone(&irp),
            ledger: std::sync::Arc::clone(&self.shared.ledger),
            code,
            input_len: input.len(),
            output_len,
            buffer,
            done: false,
        };
        (request, irp)
    }

    /// CancelIoEx: marks the IRP and, if it is parked, takes it out of its queue and completes
    /// it with STATUS_CANCELLED. Returns whether it did.
    pub fn cancel(&self, irp: &Irp) -> bool {
        let queue = {
            let parked_in = irp.parked_in.lock().unwrap();
            irp.cancelled.store(true, Ordering::SeqCst);
            *parked_in
        };
        let Some(queue_id) = queue else { return false };
        let queue = self
            .shared
            .queues
            .lock()
            .unwrap()
            .iter()
            .find(|q| q.id == queue_id)
            .cloned();
        let Some(queue) = queue else { return false };
        let taken = {
            let mut state = queue.state.lock().unwrap();
            let at = state.parked.iter().position(|r| r.irp.id == irp.id);
            at.and_then(|at| state.parked.remove(at))
        };
        match taken {
            Some(request) => {
                *request.irp.parked_in.lock().unwrap() = None;
                request.finish(NtStatus::CANCELLED);
                true
            }
            None => false,
        }
    }

    /// Runs queued work items until none is left (a system worker thread).
    pub fn run_work(&self) {
        loop {
            let item = self.shared.work.lock().unwrap().pop_front();
            match item {
                Some(item) => item.run(),
                None => break,
            }
        }
    }

    /// The statuses request `id` was completed with (one, if all went well).
    pub fn completions_of(&self, id: u64) -> Vec<NtStatus> {
        self.shared
            .ledger
            .lock()
            .unwrap()
            .completions
            .iter()
            .filter(|(i, _)| *i == id)
            .map(|(_, s)| *s)
            .collect()
    }

    /// Every violation recorded.
    pub fn violations(&self) -> Vec<String> {
        self.shared.ledger.lock().unwrap().violations.clone()
    }

    /// Queues alive: each object that parks requests (an endpoint has five) holds its own
    /// until it is freed, so none left means none was leaked.
    pub fn live_queues(&self) -> usize {
        self.shared.queues.lock().unwrap().len()
    }

    /// Work items queued and not run yet (each holds its object alive).
    pub fn queued_work(&self) -> usize {
        self.shared.work.lock().unwrap().len()
    }
}

impl Platform for LoomPlatform {
    type Request = LoomRequest;
    type Queue = LoomQueue;
    type SpinLock<T: Send> = LoomSpinLock<T>;
    type Event = LoomEvent;

    fn create_queue(&self) -> Result<LoomQueue, NtStatus> {
        let inner = Arc::new(QueueInner {
            id: self.shared.next_id.fetch_add(1, Ordering::Relaxed),
            state: Mutex::new(QueueState::default()),
        });
        self.shared.queues.lock().unwrap().push(Arc::clone(&inner));
        Ok(LoomQueue {
            inner,
            platform: self.clone(),
        })
    }

    fn spin_lock<T: Send>(&self, value: T) -> LoomSpinLock<T> {
        LoomSpinLock(Mutex::new(value))
    }

    fn event(&self) -> Result<LoomEvent, NtStatus> {
        Ok(LoomEvent {
            set: Mutex::new(false),
            cv: Condvar::new(),
        })
    }

    fn queue_work(&self, work: KArc<dyn WorkItem>) -> Result<(), NtStatus> {
        self.shared.work.lock().unwrap().push_back(work);
        Ok(())
    }

    fn irql(&self) -> Irql {
        Irql::Passive
    }

    fn paged_code(&self) {}

    fn now_ns(&self) -> u64 {
        self.shared
            .clock_ns
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A lower device with just enough behaviour for the models (see the module docs).
pub struct LoomVerbs {
    guid: u64,
    /// The sinks of live CQs and devices, by handle. A "DPC" calls them with this lock held,
    /// so a destroy (which takes it) returns only when no callback runs any more.
    cq_sinks: Mutex<Vec<(u64, KArc<dyn CqEventSink>)>>,
    ca_sinks: Mutex<Vec<(u64, KArc<dyn CaEventSink>)>>,
    /// Live objects (a leak check): plain std, not modelled.
    live: StdMutex<Vec<u64>>,
    next: AtomicU64,
}

impl LoomVerbs {
    pub fn new(guid: u64) -> Self {
        LoomVerbs {
            guid,
            cq_sinks: Mutex::new(Vec::new()),
            ca_sinks: Mutex::new(Vec::new()),
            live: StdMutex::new(Vec::new()),
            next: AtomicU64::new(1),
        }
    }

    fn create(&self) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.live.lock().unwrap().push(id);
        id
    }

    fn destroy(&self, id: u64) {
        let mut live = self.live.lock().unwrap();
        let at = live.iter().position(|i| *i == id).expect("destroyed twice");
        live.swap_remove(at);
    }

    /// Objects still alive.
    pub fn live(&self) -> usize {
        self.live.lock().unwrap().len()
    }

    /// The CQ DPC: a completion on every live CQ.
    pub fn cq_completion(&self) {
        let sinks = self.cq_sinks.lock().unwrap();
        for (_, sink) in sinks.iter() {
            sink.on_completion();
        }
    }
}

pub struct H(u64);

impl Verbs for LoomVerbs {
    type Ca = H;
    type Pd = H;
    type Mr = H;
    type Mw = H;
    type Ah = H;
    type Cq = H;
    type Srq = H;
    type Qp = H;
    type Mcast = H;
    type Cm = LoomCm;

    fn guid(&self) -> u64 {
        self.guid
    }
    fn library_name(&self) -> &str {
        "loomu"
    }
    fn open_ca(&self, _: &mut Umv<'_>, events: KArc<dyn CaEventSink>) -> Result<H, VerbsError> {
        let id = self.create();
        self.ca_sinks.lock().unwrap().push((id, events));
        Ok(H(id))
    }
    fn close_ca(&self, ca: H) {
        self.ca_sinks.lock().unwrap().retain(|(id, _)| *id != ca.0);
        self.destroy(ca.0);
    }
    fn query_ca(&self) -> Result<CaAttributes, VerbsError> {
        Ok(CaAttributes {
            port_count: 1,
            ..CaAttributes::default()
        })
    }
    fn query_port(&self, _: u8) -> Result<PortAttributes, VerbsError> {
        Err(VerbsError::Unsupported)
    }
    fn query_gid(&self, _: u8, _: u32) -> Result<Gid, VerbsError> {
        Err(VerbsError::Unsupported)
    }
    fn query_pkey(&self, _: u8, _: u16) -> Result<u16, VerbsError> {
        Err(VerbsError::Unsupported)
    }
    fn allocate_pd(&self, _: &H, _: &mut Umv<'_>) -> Result<H, VerbsError> {
        Ok(H(self.create()))
    }
    fn deallocate_pd(&self, pd: H) {
        self.destroy(pd.0);
    }
    fn register_mr(&self, _: &H, _: &MemoryRegion) -> Result<(H, MemoryKeys), VerbsError> {
        let id = self.create();
        let key = u32::try_from(id).unwrap_or(u32::MAX);
        Ok((
            H(id),
            MemoryKeys {
                lkey: key,
                rkey: key,
            },
        ))
    }
    fn deregister_mr(&self, mr: H) -> Result<(), (H, VerbsError)> {
        self.destroy(mr.0);
        Ok(())
    }
    fn create_mw(&self, _: &H, _: &mut Umv<'_>) -> Result<(H, u32), VerbsError> {
        Ok((H(self.create()), 0))
    }
    fn destroy_mw(&self, mw: H) {
        self.destroy(mw.0);
    }
    fn create_ah(&self, _: &H, _: &AddressVector, _: &mut Umv<'_>) -> Result<H, VerbsError> {
        Ok(H(self.create()))
    }
    fn destroy_ah(&self, ah: H) {
        self.destroy(ah.0);
    }
    fn create_cq(
        &self,
        _: &H,
        entries: u32,
        events: KArc<dyn CqEventSink>,
        _: &mut Umv<'_>,
    ) -> Result<(H, u32), VerbsError> {
        let id = self.create();
        self.cq_sinks.lock().unwrap().push((id, events));
        Ok((H(id), entries))
    }
    fn resize_cq(&self, _: &H, entries: u32, _: &mut Umv<'_>) -> Result<u32, VerbsError> {
        Ok(entries)
    }
    fn destroy_cq(&self, cq: H) {
        self.cq_sinks.lock().unwrap().retain(|(id, _)| *id != cq.0);
        self.destroy(cq.0);
    }
    fn create_srq(
        &self,
        _: &H,
        _: &SrqAttributes,
        _: KArc<dyn SrqEventSink>,
        _: &mut Umv<'_>,
    ) -> Result<H, VerbsError> {
        Ok(H(self.create()))
    }
    fn modify_srq(
        &self,
        _: &H,
        _: &SrqAttributes,
        _: SrqModifyMask,
        _: &mut Umv<'_>,
    ) -> Result<(), VerbsError> {
        Ok(())
    }
    fn query_srq(&self, _: &H, _: &mut Umv<'_>) -> Result<SrqAttributes, VerbsError> {
        Ok(SrqAttributes::default())
    }
    fn destroy_srq(&self, srq: H) {
        self.destroy(srq.0);
    }
    fn create_qp(
        &self,
        _: &H,
        create: &QpCreate<'_, H, H>,
        _: KArc<dyn QpEventSink>,
        _: &mut Umv<'_>,
    ) -> Result<(H, QpCreated), VerbsError> {
        let id = self.create();
        Ok((
            H(id),
            QpCreated {
                qpn: u32::try_from(id).unwrap_or(0),
                sq_depth: create.sq_depth,
                rq_depth: create.rq_depth,
                sq_sge: create.sq_sge,
                rq_sge: create.rq_sge,
                sq_max_inline: create.sq_max_inline,
            },
        ))
    }
    fn query_qp(&self, _: &H) -> Result<QpAttributes, VerbsError> {
        Err(VerbsError::Unsupported)
    }
    fn modify_qp(&self, _: &H, _: &QpModify, _: &mut [u8]) -> Result<(), VerbsError> {
        Ok(())
    }
    fn destroy_qp(&self, qp: H) {
        self.destroy(qp.0);
    }
    fn attach_mcast(&self, _: &H, _: &Gid, _: u16) -> Result<H, VerbsError> {
        Ok(H(self.create()))
    }
    fn detach_mcast(&self, mcast: H) {
        self.destroy(mcast.0);
    }
}

/// A message of the peer that [`LoomCm::peer`] delivers to the id it is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerMessage {
    /// The peer accepts our REQ.
    Rep,
    /// The peer refuses our REQ or our REP.
    Rej,
    /// The peer's RTU after our REP.
    Rtu,
    /// The peer disconnects.
    Dreq,
    /// The peer answers our DREQ.
    Drep,
}

impl PeerMessage {
    /// The CEP states of the id a real peer could send this message to (it answers what this
    /// side sent, or disconnects what is connected), and the state the message moves it to.
    fn transition(self) -> (&'static [CepState], CepState) {
        use CepState::*;
        match self {
            PeerMessage::Rep => (&[ReqSent], RepRcvd),
            PeerMessage::Rej => (&[ReqSent, RepSent], Timewait),
            PeerMessage::Rtu => (&[RepSent], Established),
            // A DREQ while the REP waits for its RTU implies the RTU (IBA 12.6.8).
            PeerMessage::Dreq => (&[Established, RepSent, DreqSent], DreqRcvd),
            PeerMessage::Drep => (&[DreqSent], Timewait),
        }
    }
}

#[derive(Default)]
struct CmSinks {
    by_id: Vec<(u64, KArc<dyn CmEventSink>)>,
    /// One entry per sink call running now, by id.
    running: Vec<u64>,
}

struct CmIdState {
    cep: CepState,
    /// A listen's connection requests, oldest first.
    queued: VecDeque<CmReqEvent>,
}

#[derive(Default)]
struct CmState {
    next: u64,
    ids: BTreeMap<u64, CmIdState>,
}

/// An id of [`LoomCm`]; destroying it consumes it.
#[derive(Debug, PartialEq, Eq)]
pub struct LoomCmId(u64);

/// A connection manager with just enough behaviour for the models (see the module docs); the
/// lower device's [`Verbs::Cm`].
pub struct LoomCm {
    /// The sinks of live ids and the calls of them running now. A "DPC" takes the sink under
    /// this lock, counts its call and calls it after the lock, so `destroy_id` (which removes
    /// the sink and then waits for `idle` until no call of the id runs) returns only when no
    /// callback of the id runs, and none starts after. Ids are made and destroyed under it
    /// too, so an id and its sink come and go together.
    sinks: Mutex<CmSinks>,
    /// Signalled when a call of a sink ends.
    idle: Condvar,
    /// The CEP state of every live id (and the leak check). Plain std: each call's bookkeeping
    /// is one step, as a real CM does it under its own lock; it is never held across a loom
    /// operation, so it adds no states for loom to explore.
    state: StdMutex<CmState>,
}

impl Default for LoomCm {
    fn default() -> Self {
        Self::new()
    }
}

impl LoomCm {
    pub fn new() -> Self {
        LoomCm {
            sinks: Mutex::new(CmSinks::default()),
            idle: Condvar::new(),
            state: StdMutex::new(CmState {
                next: 1,
                ..CmState::default()
            }),
        }
    }

    /// Ids alive now.
    pub fn live_ids(&self) -> usize {
        self.state.lock().unwrap().ids.len()
    }

    /// The CEP state of every live id, by id (ids are numbered from 1 in creation order).
    pub fn ceps(&self) -> Vec<(u64, CepState)> {
        let state = self.state.lock().unwrap();
        state.ids.iter().map(|(id, s)| (*id, s.cep)).collect()
    }

    /// A peer's REQ reaches the oldest listening id: it is queued there and the listen's sink
    /// gets `ReqReceived`, on the calling thread (the CM's DPC). False when nobody listens
    /// (also when the listen went before its sink got the event).
    pub fn peer_request(&self, req: CmReqEvent) -> bool {
        let listen = {
            let mut state = self.state.lock().unwrap();
            let listen = state
                .ids
                .iter_mut()
                .find(|(_, s)| s.cep == CepState::Listen);
            match listen {
                Some((id, s)) => {
                    s.queued.push_back(req);
                    *id
                }
                None => return false,
            }
        };
        self.call(listen, CmEvent::ReqReceived)
    }

    /// The peer sends `message` to the oldest id whose CEP state a real peer could send it to
    /// (see [`PeerMessage`]); its state follows and its sink gets the event on the calling
    /// thread (the CM's DPC). False when no id is in such a state: the peer has nothing to
    /// answer yet, or the id is gone (also when it went before its sink got the event).
    pub fn peer(&self, message: PeerMessage) -> bool {
        let id = {
            let (from, to) = message.transition();
            let mut state = self.state.lock().unwrap();
            let found = state.ids.iter_mut().find(|(_, s)| from.contains(&s.cep));
            match found {
                Some((id, s)) => {
                    s.cep = to;
                    *id
                }
                None => return false,
            }
        };
        match message {
            PeerMessage::Rep => {
                let rep: CmRepEvent = crate::fake_cm::peer_rep(b"");
                self.call(id, CmEvent::RepReceived(&rep))
            }
            PeerMessage::Rej => self.call(
                id,
                CmEvent::RejReceived {
                    reason: wv_hal::cm::REJ_USER_DEFINED,
                    ari: &[],
                    private_data: &[],
                },
            ),
            PeerMessage::Rtu => self.call(id, CmEvent::RtuReceived { private_data: &[] }),
            PeerMessage::Dreq => self.call(id, CmEvent::DreqReceived { private_data: &[] }),
            PeerMessage::Drep => self.call(id, CmEvent::DrepReceived { private_data: &[] }),
        }
    }

    /// Calls id `id`'s sink, if the id still lives, with no lock held (see [`LoomCm::sinks`]);
    /// returns whether it did.
    fn call(&self, id: u64, event: CmEvent<'_>) -> bool {
        let sink = {
            let mut sinks = self.sinks.lock().unwrap();
            let Some(sink) = sinks
                .by_id
                .iter()
                .find(|(i, _)| *i == id)
                .map(|(_, s)| KArc::clone(s))
            else {
                // Destroyed since the message changed its state: the event is dropped.
                return false;
            };
            sinks.running.push(id);
            sink
        };
        sink.on_event(event);
        let mut sinks = self.sinks.lock().unwrap();
        if let Some(at) = sinks.running.iter().position(|i| *i == id) {
            sinks.running.swap_remove(at);
        }
        self.idle.notify_all();
        true
    }

    /// A new id in `cep` reporting to `events`.
    fn new_id(&self, cep: CepState, events: KArc<dyn CmEventSink>) -> LoomCmId {
        let mut sinks = self.sinks.lock().unwrap();
        let id = {
            let mut state = self.state.lock().unwrap();
            let id = state.next;
            state.next += 1;
            let queued = VecDeque::new();
            state.ids.insert(id, CmIdState { cep, queued });
            id
        };
        sinks.by_id.push((id, events));
        LoomCmId(id)
    }

    /// The CEP state of a live id.
    fn cep(&self, id: &LoomCmId) -> CepState {
        let state = self.state.lock().unwrap();
        state.ids.get(&id.0).expect("a call on a destroyed id").cep
    }

    /// Moves id `id` from one of `from` to `to`, or fails with `STATUS_INVALID_DEVICE_STATE`.
    fn transition(&self, id: &LoomCmId, from: &[CepState], to: CepState) -> Result<(), NtStatus> {
        let mut state = self.state.lock().unwrap();
        let s = state.ids.get_mut(&id.0).expect("a call on a destroyed id");
        if !from.contains(&s.cep) {
            return Err(NtStatus::INVALID_DEVICE_STATE);
        }
        s.cep = to;
        Ok(())
    }
}

impl ConnectionManager for LoomCm {
    type Id = LoomCmId;

    fn create_id(&self, events: KArc<dyn CmEventSink>) -> Result<LoomCmId, NtStatus> {
        Ok(self.new_id(CepState::Idle, events))
    }

    fn destroy_id(&self, id: LoomCmId) {
        let mut sinks = self.sinks.lock().unwrap();
        sinks.by_id.retain(|(i, _)| *i != id.0);
        while sinks.running.contains(&id.0) {
            sinks = self.idle.wait(sinks).unwrap();
        }
        let removed = self.state.lock().unwrap().ids.remove(&id.0);
        assert!(removed.is_some(), "CM id {} destroyed twice", id.0);
    }

    fn listen(&self, id: &LoomCmId, _: u64, _: &[u8], _: u8) -> Result<(), NtStatus> {
        self.transition(id, &[CepState::Idle], CepState::Listen)
    }

    /// At any IRQL the contract allows, also from inside the listen's own sink: no lock of
    /// the CM is held while a sink runs.
    fn get_request(
        &self,
        listen: &LoomCmId,
        events: KArc<dyn CmEventSink>,
    ) -> Result<(LoomCmId, CmReqEvent), NtStatus> {
        let req = {
            let mut state = self.state.lock().unwrap();
            match state.ids.get_mut(&listen.0) {
                Some(s) if s.cep == CepState::Listen => s.queued.pop_front(),
                _ => None,
            }
        };
        let req = req.ok_or(NtStatus::NO_MORE_ENTRIES)?;
        Ok((self.new_id(CepState::ReqRcvd, events), req))
    }

    fn send_req(&self, id: &LoomCmId, _: &CmReq<'_>) -> Result<(), NtStatus> {
        self.transition(id, &[CepState::Idle], CepState::ReqSent)
    }

    fn send_rep(&self, id: &LoomCmId, _: &CmRep<'_>) -> Result<(), NtStatus> {
        self.transition(id, &[CepState::ReqRcvd], CepState::RepSent)
    }

    fn send_rtu(&self, id: &LoomCmId, _: &[u8]) -> Result<(), NtStatus> {
        self.transition(id, &[CepState::RepRcvd], CepState::Established)
    }

    fn send_dreq(&self, id: &LoomCmId, _: &[u8]) -> Result<(), NtStatus> {
        self.transition(id, &[CepState::Established], CepState::DreqSent)
    }

    fn send_drep(&self, id: &LoomCmId, _: &[u8]) -> Result<(), NtStatus> {
        self.transition(id, &[CepState::DreqRcvd], CepState::Timewait)
    }

    fn send_rej(&self, id: &LoomCmId, _: u16, _: &[u8], _: &[u8]) -> Result<(), NtStatus> {
        use CepState::*;
        self.transition(id, &[ReqRcvd, RepRcvd, RepSent], Timewait)
    }

    fn send_mra(&self, id: &LoomCmId, _: u8, _: &[u8]) -> Result<(), NtStatus> {
        // Only a state check: an MRA changes no CEP state WinVerbs looks at.
        let cep = self.cep(id);
        if matches!(cep, CepState::ReqRcvd | CepState::RepRcvd) {
            Ok(())
        } else {
            Err(NtStatus::INVALID_DEVICE_STATE)
        }
    }

    /// INIT always; RTR and RTS once a REQ and a REP were exchanged (their values do not
    /// matter to the lower device of the models).
    fn get_qp_attr(&self, id: &LoomCmId, state: QpState) -> Result<QpModify, NtStatus> {
        use CepState::*;
        let cep = self.cep(id);
        let exchanged = matches!(cep, ReqRcvd | RepRcvd | RepSent | Established);
        match state {
            QpState::Init => Ok(QpModify::Init(QpInit {
                port: 1,
                ..QpInit::default()
            })),
            QpState::Rtr if exchanged => Ok(QpModify::Rtr(QpRtr::default())),
            QpState::Rts if exchanged => Ok(QpModify::Rts(QpRts {
                retry_cnt: 7,
                rnr_retry_cnt: 7,
                local_ack_timeout: 18,
                ..QpRts::default()
            })),
            QpState::Rtr | QpState::Rts => Err(NtStatus::INVALID_DEVICE_STATE),
            _ => Err(NtStatus::INVALID_PARAMETER),
        }
    }
}
