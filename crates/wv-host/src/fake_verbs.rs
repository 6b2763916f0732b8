//! [`FakeVerbs`]: a scriptable lower RDMA device for the driver core's tests.
//!
//! It keeps just enough state to behave like a controller seen through `ci_interface_t`:
//! live objects with ids (so leaks are reported at teardown: "FakeVerbs: 1 CQ alive at
//! teardown"), device limits, a QP state model, vendor (UMV) replies, failure injection at
//! every call, and a call log. Events are delivered the way a device delivers them: the test
//! calls e.g. [`FakeVerbs::cq_completion`], which raises an interrupt on the platform; the ISR
//! queues the device's DPC, and the DPC calls the registered sink at DISPATCH_LEVEL.
//!
//! Every verb checks that it is called at PASSIVE_LEVEL ("verifier: FakeVerbs::create_cq at
//! DISPATCH_LEVEL"), and `destroy_qp` checks that no `modify_qp` is running on the QP (the
//! core must wait for a running modify before destroying).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use wv_hal::InterruptService;
use wv_hal::{
    AddressVector, CaAttributes, CaEvent, CaEventKind, CaEventSink, CqEventSink,
    DeviceModelPlatform, Dpc, Gid, Irql, KArc, MemoryKeys, MemoryRegion, Mtu, Platform,
    PortAttributes, PortState, QpAttributes, QpCreate, QpCreated, QpEvent, QpEventSink, QpModify,
    QpModifyOptions, QpState, QpType, SrqAttributes, SrqEvent, SrqEventSink, SrqModifyMask, Umv,
    Verbs, VerbsError,
};

use crate::irql;
use crate::low_resources::{self, ScopeGuard};
use crate::platform::HostPlatform;
use crate::sync::{Arc, Condvar, Mutex, Weak};

/// The verbs a failure can be injected into (and the call log names). Destroy calls cannot
/// fail (the contract says teardown always succeeds) but appear in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)] // each variant is the `Verbs` method of the same name
pub enum FakeCall {
    OpenCa,
    CloseCa,
    QueryCa,
    QueryPort,
    QueryGid,
    QueryPkey,
    AllocatePd,
    DeallocatePd,
    RegisterMr,
    DeregisterMr,
    CreateMw,
    DestroyMw,
    CreateAh,
    DestroyAh,
    CreateCq,
    ResizeCq,
    DestroyCq,
    CreateSrq,
    ModifySrq,
    QuerySrq,
    DestroySrq,
    CreateQp,
    QueryQp,
    ModifyQp,
    DestroyQp,
    AttachMcast,
    DetachMcast,
}

/// The kinds of device objects, for leak reports and [`FakeVerbs::live_objects`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)] // names as in the verbs API
pub enum ObjectKind {
    Ca,
    Pd,
    Mr,
    Mw,
    Ah,
    Cq,
    Srq,
    Qp,
    Mcast,
}

impl ObjectKind {
    fn name(self) -> &'static str {
        match self {
            ObjectKind::Ca => "CA",
            ObjectKind::Pd => "PD",
            ObjectKind::Mr => "MR",
            ObjectKind::Mw => "MW",
            ObjectKind::Ah => "AH",
            ObjectKind::Cq => "CQ",
            ObjectKind::Srq => "SRQ",
            ObjectKind::Qp => "QP",
            ObjectKind::Mcast => "multicast attachment",
        }
    }
}

/// One port of the fake device.
#[derive(Clone, Debug)]
pub struct FakePort {
    /// What `query_port` returns (`gid_table_len`/`pkey_table_len` are set from the tables).
    pub attributes: PortAttributes,
    /// The GID table.
    pub gids: Vec<Gid>,
    /// The P_Key table (network order as stored).
    pub pkeys: Vec<u16>,
}

impl Default for FakePort {
    fn default() -> Self {
        let mut gid = [0u8; 16];
        gid[0] = 0xfe;
        gid[1] = 0x80;
        gid[8..].copy_from_slice(&0x0002_c9ff_fe00_1234u64.to_be_bytes());
        FakePort {
            attributes: PortAttributes {
                capability_flags: 0,
                state: PortState::Active,
                mtu: Mtu::Mtu2048,
                gid_table_len: 1,
                max_message_size: 1 << 31,
                bad_pkey_counter: 0,
                qkey_violation_counter: 0,
                pkey_table_len: 1,
                lid: 1,
                sm_lid: 1,
                lmc: 0,
                max_vls: 1,
                sm_sl: 0,
                subnet_timeout: 18,
                init_type_reply: 0,
                active_width: 2,
                active_speed: 1,
                physical_state: 5,
                transport: 0,
                ext_active_speed: 0,
                link_encoding: 0,
            },
            gids: vec![gid],
            pkeys: vec![0xffff_u16.to_be()],
        }
    }
}

/// What the fake device is: identity, limits (enforced) and ports.
#[derive(Clone, Debug)]
pub struct FakeConfig {
    /// Node GUID (NET64 as stored); also `ca.node_guid`.
    pub guid: u64,
    /// User-mode provider library name.
    pub library_name: String,
    /// Device attributes and limits; `port_count` is set from `ports`.
    pub ca: CaAttributes,
    /// The ports, port 1 first.
    pub ports: Vec<FakePort>,
    /// How long each `modify_qp` takes (0, instant, by default): in deterministic mode it moves
    /// the injected clock forward by this much; in threaded mode, whose clock is the real one,
    /// the call sleeps that long.
    pub modify_ns: u64,
}

impl Default for FakeConfig {
    fn default() -> Self {
        let guid = 0x0002_c903_0000_1234u64.to_be();
        FakeConfig {
            guid,
            library_name: "fakeu".to_owned(),
            ca: CaAttributes {
                fw_version: 0x0001_0002_0003,
                node_guid: guid,
                system_image_guid: guid,
                vendor_id: 0x15b3,
                vendor_part_id: 0x1003,
                hw_version: 1,
                page_size_capability: 1 << 12,
                max_mr_size: u64::MAX,
                max_qp: 64,
                max_qp_wr: 1024,
                max_sge: 16,
                max_cq: 64,
                max_cqe: 4096,
                max_mr: 256,
                max_pd: 32,
                max_qp_responder_resources: 4,
                max_responder_resources: 64,
                max_qp_initiator_depth: 4,
                max_inline_send: 64,
                max_mw: 64,
                max_multicast: 16,
                max_qp_attach: 8,
                max_multicast_qp: 64,
                max_ah: 64,
                max_srq: 16,
                max_srq_wr: 1024,
                max_srq_sge: 16,
                max_pkeys: 1,
                local_ack_delay: 16,
                port_count: 1,
                ..CaAttributes::default()
            },
            ports: vec![FakePort::default()],
            modify_ns: 0,
        }
    }
}

/// An entry of the call log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoggedCall {
    /// Which verb.
    pub call: FakeCall,
    /// The object it acted on or created (0 when none).
    pub object: u64,
    /// What it returned.
    pub result: Result<(), VerbsError>,
}

/// One `modify_qp` call, in the order the calls started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModifyRecord {
    /// The QP's id.
    pub qp: u64,
    /// Start order over the whole device, from 1.
    pub seq: u32,
    /// The state before.
    pub from: QpState,
    /// The target state.
    pub to: QpState,
    /// The modification as the driver handed it over (OFW's `ib_qp_mod_t` meaning).
    pub modify: QpModify,
    /// The outcome; `None` while the call is still running.
    pub result: Option<Result<(), VerbsError>>,
}

/// Decides a failure for a call and object id, before the fail-next list is consulted.
pub type FailureHook = Box<dyn Fn(FakeCall, u64) -> Option<VerbsError> + Send + Sync>;

macro_rules! handles {
    ($($name:ident: $what:literal),* $(,)?) => {$(
        #[doc = concat!("A ", $what, " of the fake device; destroying it consumes it.")]
        #[derive(Debug, PartialEq, Eq)]
        pub struct $name {
            id: u64,
        }
        impl $name {
            /// The object's id (unique over all kinds of one device), for event injection.
            pub fn id(&self) -> u64 {
                self.id
            }
        }
    )*};
}

handles! {
    FakeCa: "user-mode open of the device",
    FakePd: "protection domain",
    FakeMr: "memory region",
    FakeMw: "memory window",
    FakeAh: "address handle",
    FakeCq: "completion queue",
    FakeSrq: "shared receive queue",
    FakeQp: "queue pair",
    FakeMcast: "multicast attachment",
}

/// Object state without callbacks (kept apart from the sinks so the teardown check, which
/// holds this state, cannot keep driver objects alive).
enum Obj {
    Ca,
    Pd,
    Mr,
    Mw,
    Ah,
    Cq {
        entries: u32,
    },
    Srq {
        attr: SrqAttributes,
    },
    Qp {
        attr: QpAttributes,
        modifying: usize,
    },
    Mcast,
}

impl Obj {
    fn kind(&self) -> ObjectKind {
        match self {
            Obj::Ca => ObjectKind::Ca,
            Obj::Pd => ObjectKind::Pd,
            Obj::Mr => ObjectKind::Mr,
            Obj::Mw => ObjectKind::Mw,
            Obj::Ah => ObjectKind::Ah,
            Obj::Cq { .. } => ObjectKind::Cq,
            Obj::Srq { .. } => ObjectKind::Srq,
            Obj::Qp { .. } => ObjectKind::Qp,
            Obj::Mcast => ObjectKind::Mcast,
        }
    }
}

#[derive(Clone)]
enum Sink {
    Ca(wv_hal::KArc<dyn CaEventSink>),
    Cq(wv_hal::KArc<dyn CqEventSink>),
    Srq(wv_hal::KArc<dyn SrqEventSink>),
    Qp(wv_hal::KArc<dyn QpEventSink>),
}

#[derive(Clone, Copy, Debug)]
enum FakeEvent {
    CqCompletion(u64),
    CqError(u64),
    Srq(u64, SrqEvent),
    Qp(u64, QpEvent),
    Ca(CaEvent),
}

#[derive(Default)]
struct State {
    next_id: u64,
    objects: BTreeMap<u64, Obj>,
    fail_next: HashMap<FakeCall, VecDeque<VerbsError>>,
    log: Vec<LoggedCall>,
    modify_log: Vec<ModifyRecord>,
    gates: HashMap<u64, Arc<Gate>>,
    umv_status: u32,
    umv_output: Vec<u8>,
    last_umv_input: Vec<u8>,
}

impl State {
    /// No objects yet; the first id is 1 (0 is never an id).
    fn new() -> State {
        State {
            next_id: 1,
            ..State::default()
        }
    }

    fn count(&self, kind: ObjectKind) -> usize {
        self.objects.values().filter(|o| o.kind() == kind).count()
    }

    fn leaks(&self) -> Vec<String> {
        let mut by_kind: BTreeMap<ObjectKind, usize> = BTreeMap::new();
        for obj in self.objects.values() {
            *by_kind.entry(obj.kind()).or_default() += 1;
        }
        by_kind
            .into_iter()
            .map(|(kind, n)| {
                let plural = if n == 1 { "" } else { "s" };
                format!("FakeVerbs: {n} {}{plural} alive at teardown", kind.name())
            })
            .collect()
    }
}

/// The "callback running" counts one event delivery holds; dropping it releases what is left.
struct Running<'a> {
    fake: &'a FakeVerbs,
    ids: Vec<u64>,
}

impl Running<'_> {
    fn release(&mut self, id: u64) {
        if let Some(pos) = self.ids.iter().position(|i| *i == id) {
            self.ids.swap_remove(pos);
            self.fake.release_running(id);
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        for id in std::mem::take(&mut self.ids) {
            self.fake.release_running(id);
        }
    }
}

/// Sinks and the count of callbacks running per object (destroy waits for them).
#[derive(Default)]
struct Sinks {
    by_id: HashMap<u64, Sink>,
    running: HashMap<u64, usize>,
}

/// A scriptable lower device implementing [`Verbs`] over a [`HostPlatform`].
pub struct FakeVerbs {
    platform: HostPlatform,
    config: Mutex<FakeConfig>,
    state: Arc<Mutex<State>>,
    hook: Mutex<Option<FailureHook>>,
    sinks: Mutex<Sinks>,
    sinks_idle: Condvar,
    events: Mutex<VecDeque<FakeEvent>>,
    dpc: KArc<dyn Dpc>,
}

struct FakeDpc(Weak<FakeVerbs>);

impl Dpc for FakeDpc {
    fn run(&self) {
        let _host = low_resources::host_scope();
        if let Some(fake) = self.0.upgrade() {
            fake.deliver_events();
        }
    }
}

struct FakeIsr<'a>(&'a FakeVerbs);

impl InterruptService for FakeIsr<'_> {
    fn service(&self) -> bool {
        let _host = low_resources::host_scope();
        let fake = self.0;
        if fake.events.lock().is_empty() {
            return false;
        }
        fake.platform.queue_dpc(&fake.dpc);
        true
    }
}

/// Holds back `modify_qp` on one QP until released (see [`FakeVerbs::hold_modify`]).
pub struct ModifyGate {
    gate: Arc<Gate>,
}

#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Default)]
struct GateState {
    released: bool,
    blocked: usize,
}

impl ModifyGate {
    /// Lets every held and later `modify_qp` of the QP proceed.
    pub fn release(&self) {
        self.gate.state.lock().released = true;
        self.gate.cv.notify_all();
    }

    /// How many `modify_qp` calls are blocked on the gate now.
    pub fn blocked(&self) -> usize {
        self.gate.state.lock().blocked
    }

    /// Waits until at least one `modify_qp` is blocked on the gate (it has started and is
    /// "running"); `timeout` is a hang guard. Returns whether one is.
    pub fn wait_blocked(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut state = self.gate.state.lock();
        while state.blocked == 0 {
            if self.gate.cv.wait_until(&mut state, deadline).timed_out() {
                break;
            }
        }
        state.blocked > 0
    }
}

impl Drop for ModifyGate {
    fn drop(&mut self) {
        self.release();
    }
}

impl std::fmt::Debug for ModifyGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModifyGate")
            .field("blocked", &self.blocked())
            .finish()
    }
}

fn qp_transition_ok(from: QpState, to: QpState) -> bool {
    use QpState::*;
    matches!(
        (from, to),
        (_, Reset)
            | (_, Error)
            | (Reset, Init)
            | (Init, Init)
            | (Init, Rtr)
            | (Rtr, Rts)
            | (Rts, Rts)
            | (Rts, Sqd)
            | (Sqd, Rts)
            | (Sqd, Sqd)
            | (SqError, Rts)
    )
}

/// A controller's interface is released at PASSIVE_LEVEL: on Windows the last
/// `InterfaceDereference` may run the controller's teardown, which can wait. A driver that lets
/// the last reference go under a spin lock (at DISPATCH_LEVEL) is reported.
impl Drop for FakeVerbs {
    fn drop(&mut self) {
        if let Some(at) = irql::get_raw()
            && (at.irql != Irql::Passive || at.locks > 0)
        {
            self.platform.verifier().report(format!(
                "verifier: the lower device's last reference was dropped at {:?} with {} spin \
                 lock(s) held (it must be released at PASSIVE_LEVEL)",
                at.irql, at.locks
            ));
        }
    }
}

impl FakeVerbs {
    /// A device described by `config` whose interrupts and DPCs run on `platform`. Registers a
    /// teardown check that reports every object still alive.
    pub fn new(platform: &HostPlatform, mut config: FakeConfig) -> Arc<FakeVerbs> {
        config.ca.port_count = u8::try_from(config.ports.len()).unwrap_or(u8::MAX);
        config.ca.node_guid = config.guid;
        for port in &mut config.ports {
            port.attributes.gid_table_len = u32::try_from(port.gids.len()).unwrap_or(u32::MAX);
            port.attributes.pkey_table_len = u16::try_from(port.pkeys.len()).unwrap_or(u16::MAX);
        }
        let state = platform.leak_checked(State::new(), State::leaks);
        Arc::new_cyclic(|me: &Weak<FakeVerbs>| FakeVerbs {
            platform: platform.clone(),
            config: Mutex::new(config),
            state,
            hook: Mutex::new(None),
            sinks: Mutex::new(Sinks::default()),
            sinks_idle: Condvar::new(),
            events: Mutex::new(VecDeque::new()),
            dpc: KArc::new(FakeDpc(me.clone())).into(),
        })
    }

    /// A default device (one active port, modest limits) on `platform`.
    pub fn with_defaults(platform: &HostPlatform) -> Arc<FakeVerbs> {
        Self::new(platform, FakeConfig::default())
    }

    /// Changes the configuration (port state, tables, limits) from now on.
    pub fn configure(&self, f: impl FnOnce(&mut FakeConfig)) {
        f(&mut self.config.lock());
    }

    /// Makes the next `call` fail with `error` (queued: several calls fail in order).
    pub fn fail_next(&self, call: FakeCall, error: VerbsError) {
        self.state
            .lock()
            .fail_next
            .entry(call)
            .or_default()
            .push_back(error);
    }

    /// Decides failures with a closure of (call, object id), consulted before
    /// [`FakeVerbs::fail_next`]; `None` removes it.
    pub fn set_failure_hook(&self, hook: Option<FailureHook>) {
        *self.hook.lock() = hook;
    }

    /// Every verb called so far, in order.
    pub fn calls(&self) -> Vec<LoggedCall> {
        self.state.lock().log.clone()
    }

    /// How many times `call` was made.
    pub fn call_count(&self, call: FakeCall) -> usize {
        self.state
            .lock()
            .log
            .iter()
            .filter(|c| c.call == call)
            .count()
    }

    /// Live objects by id.
    pub fn live_objects(&self) -> Vec<(u64, ObjectKind)> {
        self.state
            .lock()
            .objects
            .iter()
            .map(|(id, o)| (*id, o.kind()))
            .collect()
    }

    /// How many objects of `kind` are alive.
    pub fn live_count(&self, kind: ObjectKind) -> usize {
        self.state.lock().count(kind)
    }

    /// The leak messages the teardown check would report now.
    pub fn leaks(&self) -> Vec<String> {
        self.state.lock().leaks()
    }

    /// Sets the vendor reply of every call with UMV data: `status` goes to `Umv::status` and
    /// `output` (truncated to `Umv::output_len`) is written at the start of the vendor buffer.
    pub fn set_umv_reply(&self, status: u32, output: Vec<u8>) {
        let mut state = self.state.lock();
        state.umv_status = status;
        state.umv_output = output;
    }

    /// The vendor input bytes of the last call that carried UMV data.
    pub fn last_umv_input(&self) -> Vec<u8> {
        self.state.lock().last_umv_input.clone()
    }

    /// Every `modify_qp` so far, in start order.
    pub fn modify_log(&self) -> Vec<ModifyRecord> {
        self.state.lock().modify_log.clone()
    }

    /// The current state of QP `qp_id`, if it is alive.
    pub fn qp_state(&self, qp_id: u64) -> Option<QpState> {
        match self.state.lock().objects.get(&qp_id) {
            Some(Obj::Qp { attr, .. }) => Some(attr.state),
            _ => None,
        }
    }

    /// Makes every `modify_qp` on QP `qp_id` block (after it is logged as started) until the
    /// gate is released or dropped. Threaded mode only: in deterministic mode a held modify
    /// would block the only thread, and panics instead.
    pub fn hold_modify(&self, qp_id: u64) -> ModifyGate {
        let gate = Arc::new(Gate::default());
        self.state.lock().gates.insert(qp_id, Arc::clone(&gate));
        ModifyGate { gate }
    }

    // ---- event injection -------------------------------------------------------------------

    fn raise(&self, event: FakeEvent) -> bool {
        self.events.lock().push_back(event);
        self.platform.interrupt(&FakeIsr(self))
    }

    /// CQ `cq_id` got a completion: interrupt → ISR → DPC → `on_completion` at DISPATCH_LEVEL.
    /// Returns whether the ISR claimed the interrupt.
    pub fn cq_completion(&self, cq_id: u64) -> bool {
        self.raise(FakeEvent::CqCompletion(cq_id))
    }

    /// CQ `cq_id` is in error: `on_error` through interrupt and DPC.
    pub fn cq_error(&self, cq_id: u64) -> bool {
        self.raise(FakeEvent::CqError(cq_id))
    }

    /// An SRQ event through interrupt and DPC.
    pub fn srq_event(&self, srq_id: u64, event: SrqEvent) -> bool {
        self.raise(FakeEvent::Srq(srq_id, event))
    }

    /// A QP event through interrupt and DPC.
    pub fn qp_event(&self, qp_id: u64, event: QpEvent) -> bool {
        self.raise(FakeEvent::Qp(qp_id, event))
    }

    /// A port (or, with port 0, device-wide) event, delivered to every open CA's sink.
    pub fn port_event(&self, port: u8, kind: CaEventKind) -> bool {
        self.raise(FakeEvent::Ca(CaEvent { kind, port }))
    }

    /// The DPC: drains the event ring and calls the sinks at DISPATCH_LEVEL. Events for objects
    /// destroyed meanwhile are dropped, like a real device's stale EQ entries.
    fn deliver_events(&self) {
        while let Some(event) = self.events.lock().pop_front() {
            let targets: Vec<(u64, Sink)> = {
                let mut sinks = self.sinks.lock();
                let targets: Vec<(u64, Sink)> = match event {
                    FakeEvent::Ca(_) => sinks
                        .by_id
                        .iter()
                        .filter(|(_, s)| matches!(s, Sink::Ca(_)))
                        .map(|(id, s)| (*id, s.clone()))
                        .collect(),
                    FakeEvent::CqCompletion(id)
                    | FakeEvent::CqError(id)
                    | FakeEvent::Srq(id, _)
                    | FakeEvent::Qp(id, _) => sinks
                        .by_id
                        .get(&id)
                        .map(|s| (id, s.clone()))
                        .into_iter()
                        .collect(),
                };
                for (id, _) in &targets {
                    *sinks.running.entry(*id).or_default() += 1;
                }
                targets
            };
            // The guard releases every count still held, also when a sink panics (a verifier
            // failure inside a callback), so a later destroy does not wait for ever.
            let mut counted = Running {
                fake: self,
                ids: targets.iter().map(|(id, _)| *id).collect(),
            };
            for (id, sink) in targets {
                // The sinks are the driver's code, called from the device's DPC.
                let driver = low_resources::driver_scope();
                match (&sink, event) {
                    (Sink::Ca(s), FakeEvent::Ca(e)) => s.on_event(e),
                    (Sink::Cq(s), FakeEvent::CqCompletion(_)) => s.on_completion(),
                    (Sink::Cq(s), FakeEvent::CqError(_)) => s.on_error(),
                    (Sink::Srq(s), FakeEvent::Srq(_, e)) => s.on_event(e),
                    (Sink::Qp(s), FakeEvent::Qp(_, e)) => s.on_event(e),
                    _ => {} // an event for an object of another kind: ignored
                }
                drop(driver);
                counted.release(id);
            }
        }
    }

    /// Drops one "callback running" count of `id` and wakes destroys waiting for it.
    fn release_running(&self, id: u64) {
        let mut sinks = self.sinks.lock();
        if let Some(n) = sinks.running.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                sinks.running.remove(&id);
            }
        }
        self.sinks_idle.notify_all();
    }

    /// Unregisters a sink and waits until no callback for it runs, so that no callback for the
    /// object runs after its destroy returns.
    fn remove_sink(&self, id: u64) {
        let mut sinks = self.sinks.lock();
        sinks.by_id.remove(&id);
        while sinks.running.contains_key(&id) {
            self.sinks_idle.wait(&mut sinks);
        }
    }

    // ---- helpers for the verbs -------------------------------------------------------------

    /// The entry of a verb: the host's allocation scope for the rest of the call (what the fake
    /// allocates is not the driver's), the IRQL check, then an injected failure if one is due.
    fn enter(&self, call: FakeCall, object: u64) -> Result<ScopeGuard, VerbsError> {
        let host = low_resources::host_scope();
        self.check_passive(call);
        let hooked = self.hook.lock().as_ref().and_then(|h| h(call, object));
        let mut state = self.state.lock();
        let injected =
            hooked.or_else(|| state.fail_next.get_mut(&call).and_then(VecDeque::pop_front));
        if let Some(error) = injected {
            state.log.push(LoggedCall {
                call,
                object,
                result: Err(error),
            });
            return Err(error);
        }
        Ok(host)
    }

    /// [`Self::enter`] of a verb that carries the user library's private data: the fake's
    /// reply goes into `umv` once the verb is past its injected failure.
    fn enter_umv(
        &self,
        call: FakeCall,
        object: u64,
        umv: &mut Umv<'_>,
    ) -> Result<ScopeGuard, VerbsError> {
        let host = self.enter(call, object)?;
        self.umv(umv);
        Ok(host)
    }

    /// Verbs run at PASSIVE_LEVEL.
    fn check_passive(&self, call: FakeCall) {
        let level = self.platform.irql();
        if level != Irql::Passive {
            self.platform
                .verifier()
                .fail(format!("verifier: FakeVerbs::{call:?} at {}", level.name()));
        }
    }

    fn log(&self, call: FakeCall, object: u64, result: Result<(), VerbsError>) {
        self.state.lock().log.push(LoggedCall {
            call,
            object,
            result,
        });
    }

    /// Logs the call's outcome and passes it on.
    /// Logs a create verb's outcome under the id it made (0 when refused); `wrap` builds the
    /// handle from the id.
    fn created<T>(
        &self,
        call: FakeCall,
        made: Result<u64, VerbsError>,
        wrap: impl FnOnce(u64) -> T,
    ) -> Result<T, VerbsError> {
        let id = *made.as_ref().unwrap_or(&0);
        self.finish(call, id, made.map(wrap))
    }

    fn finish<T>(
        &self,
        call: FakeCall,
        object: u64,
        r: Result<T, VerbsError>,
    ) -> Result<T, VerbsError> {
        self.log(call, object, r.as_ref().map(|_| ()).map_err(|e| *e));
        r
    }

    fn umv(&self, umv: &mut Umv<'_>) {
        let mut state = self.state.lock();
        state.last_umv_input = umv.input().to_vec();
        umv.status = state.umv_status;
        let n = state
            .umv_output
            .len()
            .min(umv.output_len)
            .min(umv.buf.len());
        umv.buf[..n].copy_from_slice(&state.umv_output[..n]);
    }

    fn create(&self, obj: Obj, limit: u32) -> Result<u64, VerbsError> {
        let mut state = self.state.lock();
        let kind = obj.kind();
        if state.count(kind) >= limit as usize {
            return Err(VerbsError::InsufficientResources);
        }
        let id = state.next_id;
        state.next_id += 1;
        state.objects.insert(id, obj);
        Ok(id)
    }

    /// A destroy verb (never refused), in the host's allocation scope.
    fn destroy(&self, call: FakeCall, id: u64) {
        let _host = low_resources::host_scope();
        self.check_passive(call);
        self.remove_sink(id);
        self.state.lock().objects.remove(&id);
        self.log(call, id, Ok(()));
    }

    fn port(&self, port: u8) -> Result<FakePort, VerbsError> {
        let config = self.config.lock();
        usize::from(port)
            .checked_sub(1)
            .and_then(|i| config.ports.get(i).cloned())
            .ok_or(VerbsError::InvalidParameter)
    }

    fn limits(&self) -> CaAttributes {
        self.config.lock().ca
    }
}

impl std::fmt::Debug for FakeVerbs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeVerbs")
            .field("guid", &format_args!("{:#x}", self.config.lock().guid))
            .field("live_objects", &self.live_objects())
            .finish()
    }
}

impl Verbs for FakeVerbs {
    type Ca = FakeCa;
    type Pd = FakePd;
    type Mr = FakeMr;
    type Mw = FakeMw;
    type Ah = FakeAh;
    type Cq = FakeCq;
    type Srq = FakeSrq;
    type Qp = FakeQp;
    type Mcast = FakeMcast;
    type Cm = crate::fake_cm::FakeCm;

    fn guid(&self) -> u64 {
        let _host = low_resources::host_scope();
        self.config.lock().guid
    }

    fn library_name(&self) -> &str {
        let _host = low_resources::host_scope();
        // The trait hands out a borrow of the device; the name is fixed at creation in
        // practice, so leak one copy per distinct name rather than hold the lock.
        let name = self.config.lock().library_name.clone();
        static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
        let mut names = NAMES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = names.iter().find(|n| **n == name) {
            return n;
        }
        let leaked: &'static str = Box::leak(name.into_boxed_str());
        names.push(leaked);
        leaked
    }

    fn open_ca(
        &self,
        umv: &mut Umv<'_>,
        events: wv_hal::KArc<dyn CaEventSink>,
    ) -> Result<FakeCa, VerbsError> {
        let _host = self.enter_umv(FakeCall::OpenCa, 0, umv)?;
        let r = self.create(Obj::Ca, u32::MAX);
        if let Ok(id) = r {
            self.sinks.lock().by_id.insert(id, Sink::Ca(events));
        }
        self.created(FakeCall::OpenCa, r, |id| FakeCa { id })
    }

    fn close_ca(&self, ca: FakeCa) {
        self.destroy(FakeCall::CloseCa, ca.id);
    }

    fn query_ca(&self) -> Result<CaAttributes, VerbsError> {
        let _host = self.enter(FakeCall::QueryCa, 0)?;
        self.finish(FakeCall::QueryCa, 0, Ok(self.limits()))
    }

    fn query_port(&self, port: u8) -> Result<PortAttributes, VerbsError> {
        let _host = self.enter(FakeCall::QueryPort, u64::from(port))?;
        let r = self.port(port).map(|p| p.attributes);
        self.finish(FakeCall::QueryPort, u64::from(port), r)
    }

    fn query_gid(&self, port: u8, index: u32) -> Result<Gid, VerbsError> {
        let _host = self.enter(FakeCall::QueryGid, u64::from(port))?;
        let r = self.port(port).and_then(|p| {
            p.gids
                .get(index as usize)
                .copied()
                .ok_or(VerbsError::InvalidParameter)
        });
        self.finish(FakeCall::QueryGid, u64::from(port), r)
    }

    fn query_pkey(&self, port: u8, index: u16) -> Result<u16, VerbsError> {
        let _host = self.enter(FakeCall::QueryPkey, u64::from(port))?;
        let r = self.port(port).and_then(|p| {
            p.pkeys
                .get(usize::from(index))
                .copied()
                .ok_or(VerbsError::InvalidParameter)
        });
        self.finish(FakeCall::QueryPkey, u64::from(port), r)
    }

    fn allocate_pd(&self, ca: &FakeCa, umv: &mut Umv<'_>) -> Result<FakePd, VerbsError> {
        let _host = self.enter_umv(FakeCall::AllocatePd, ca.id, umv)?;
        let r = self.create(Obj::Pd, self.limits().max_pd);
        self.created(FakeCall::AllocatePd, r, |id| FakePd { id })
    }

    fn deallocate_pd(&self, pd: FakePd) {
        self.destroy(FakeCall::DeallocatePd, pd.id);
    }

    fn register_mr(
        &self,
        pd: &FakePd,
        region: &MemoryRegion,
    ) -> Result<(FakeMr, MemoryKeys), VerbsError> {
        let _host = self.enter(FakeCall::RegisterMr, pd.id)?;
        let r = if region.length == 0 || region.address.checked_add(region.length).is_none() {
            Err(VerbsError::InvalidParameter)
        } else {
            self.create(Obj::Mr, self.limits().max_mr)
        };
        let keys = |id: u64| {
            let key = u32::try_from(id & 0xffff_ffff).unwrap_or(0);
            MemoryKeys {
                lkey: key,
                rkey: (key | 0x8000_0000).to_be(),
            }
        };
        self.created(FakeCall::RegisterMr, r, |id| (FakeMr { id }, keys(id)))
    }

    fn deregister_mr(&self, mr: FakeMr) -> Result<(), (FakeMr, VerbsError)> {
        let _host = match self.enter(FakeCall::DeregisterMr, mr.id) {
            Ok(host) => host,
            Err(e) => return Err((mr, e)),
        };
        self.destroy(FakeCall::DeregisterMr, mr.id);
        Ok(())
    }

    fn create_mw(&self, pd: &FakePd, umv: &mut Umv<'_>) -> Result<(FakeMw, u32), VerbsError> {
        let _host = self.enter_umv(FakeCall::CreateMw, pd.id, umv)?;
        let r = self.create(Obj::Mw, self.limits().max_mw);
        let rkey = |id: u64| (u32::try_from(id & 0xffff).unwrap_or(0) | 0x4000_0000).to_be();
        self.created(FakeCall::CreateMw, r, |id| (FakeMw { id }, rkey(id)))
    }

    fn destroy_mw(&self, mw: FakeMw) {
        self.destroy(FakeCall::DestroyMw, mw.id);
    }

    fn create_ah(
        &self,
        pd: &FakePd,
        av: &AddressVector,
        umv: &mut Umv<'_>,
    ) -> Result<FakeAh, VerbsError> {
        let _host = self.enter_umv(FakeCall::CreateAh, pd.id, umv)?;
        let r = self
            .port(av.port)
            .and_then(|_| self.create(Obj::Ah, self.limits().max_ah));
        self.created(FakeCall::CreateAh, r, |id| FakeAh { id })
    }

    fn destroy_ah(&self, ah: FakeAh) {
        self.destroy(FakeCall::DestroyAh, ah.id);
    }

    fn create_cq(
        &self,
        ca: &FakeCa,
        entries: u32,
        events: wv_hal::KArc<dyn CqEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<(FakeCq, u32), VerbsError> {
        let _host = self.enter_umv(FakeCall::CreateCq, ca.id, umv)?;
        let limits = self.limits();
        let r = if entries > limits.max_cqe {
            Err(VerbsError::InvalidSetting)
        } else {
            let entries = entries.max(1);
            self.create(Obj::Cq { entries }, limits.max_cq)
                .map(|id| (id, entries))
        };
        if let Ok((id, _)) = r {
            self.sinks.lock().by_id.insert(id, Sink::Cq(events));
        }
        let id = r.as_ref().map_or(0, |(id, _)| *id);
        self.finish(FakeCall::CreateCq, id, r.map(|(id, n)| (FakeCq { id }, n)))
    }

    fn resize_cq(&self, cq: &FakeCq, entries: u32, umv: &mut Umv<'_>) -> Result<u32, VerbsError> {
        let _host = self.enter_umv(FakeCall::ResizeCq, cq.id, umv)?;
        let r = if entries > self.limits().max_cqe {
            Err(VerbsError::InvalidSetting)
        } else {
            let entries = entries.max(1);
            if let Some(Obj::Cq { entries: e }) = self.state.lock().objects.get_mut(&cq.id) {
                *e = entries;
            }
            Ok(entries)
        };
        self.finish(FakeCall::ResizeCq, cq.id, r)
    }

    fn destroy_cq(&self, cq: FakeCq) {
        self.destroy(FakeCall::DestroyCq, cq.id);
    }

    fn create_srq(
        &self,
        pd: &FakePd,
        attr: &SrqAttributes,
        events: wv_hal::KArc<dyn SrqEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<FakeSrq, VerbsError> {
        let _host = self.enter_umv(FakeCall::CreateSrq, pd.id, umv)?;
        let limits = self.limits();
        let r = if attr.max_wr > limits.max_srq_wr || attr.max_sge > limits.max_srq_sge {
            Err(VerbsError::InvalidSetting)
        } else {
            self.create(Obj::Srq { attr: *attr }, limits.max_srq)
        };
        if let Ok(id) = r {
            self.sinks.lock().by_id.insert(id, Sink::Srq(events));
        }
        self.created(FakeCall::CreateSrq, r, |id| FakeSrq { id })
    }

    fn modify_srq(
        &self,
        srq: &FakeSrq,
        attr: &SrqAttributes,
        mask: SrqModifyMask,
        umv: &mut Umv<'_>,
    ) -> Result<(), VerbsError> {
        let _host = self.enter_umv(FakeCall::ModifySrq, srq.id, umv)?;
        let limits = self.limits();
        let r = if mask.max_wr && attr.max_wr > limits.max_srq_wr {
            Err(VerbsError::InvalidSetting)
        } else {
            if let Some(Obj::Srq { attr: a }) = self.state.lock().objects.get_mut(&srq.id) {
                if mask.max_wr {
                    a.max_wr = attr.max_wr;
                }
                if mask.limit {
                    a.srq_limit = attr.srq_limit;
                }
            }
            Ok(())
        };
        self.finish(FakeCall::ModifySrq, srq.id, r)
    }

    fn query_srq(&self, srq: &FakeSrq, umv: &mut Umv<'_>) -> Result<SrqAttributes, VerbsError> {
        let _host = self.enter_umv(FakeCall::QuerySrq, srq.id, umv)?;
        let r = match self.state.lock().objects.get(&srq.id) {
            Some(Obj::Srq { attr }) => Ok(*attr),
            _ => Err(VerbsError::InvalidParameter),
        };
        self.finish(FakeCall::QuerySrq, srq.id, r)
    }

    fn destroy_srq(&self, srq: FakeSrq) {
        self.destroy(FakeCall::DestroySrq, srq.id);
    }

    fn create_qp(
        &self,
        pd: &FakePd,
        create: &QpCreate<'_, FakeCq, FakeSrq>,
        events: wv_hal::KArc<dyn QpEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<(FakeQp, QpCreated), VerbsError> {
        let _host = self.enter_umv(FakeCall::CreateQp, pd.id, umv)?;
        let limits = self.limits();
        let too_big = create.sq_depth > limits.max_qp_wr
            || create.rq_depth > limits.max_qp_wr
            || create.sq_sge > limits.max_sge
            || create.rq_sge > limits.max_sge
            || create.sq_max_inline > limits.max_inline_send;
        let r = if too_big {
            Err(VerbsError::InvalidSetting)
        } else {
            let sizes = QpCreated {
                qpn: 0,
                sq_depth: create.sq_depth,
                rq_depth: create.rq_depth,
                sq_sge: create.sq_sge,
                rq_sge: create.rq_sge,
                sq_max_inline: create.sq_max_inline,
            };
            let attr = QpAttributes::new_qp(create.qp_type, &sizes, create.sq_signaled);
            self.create(Obj::Qp { attr, modifying: 0 }, limits.max_qp)
                .map(|id| {
                    let qpn = 0x40 + u32::try_from(id & 0x00ff_ffff).unwrap_or(0);
                    if let Some(Obj::Qp { attr, .. }) = self.state.lock().objects.get_mut(&id) {
                        attr.qpn = qpn;
                    }
                    let created = QpCreated {
                        qpn,
                        sq_depth: create.sq_depth,
                        rq_depth: create.rq_depth,
                        sq_sge: create.sq_sge,
                        rq_sge: create.rq_sge,
                        sq_max_inline: create.sq_max_inline,
                    };
                    (id, created)
                })
        };
        if let Ok((id, _)) = r {
            self.sinks.lock().by_id.insert(id, Sink::Qp(events));
        }
        let id = r.as_ref().map_or(0, |(id, _)| *id);
        self.finish(FakeCall::CreateQp, id, r.map(|(id, c)| (FakeQp { id }, c)))
    }

    fn query_qp(&self, qp: &FakeQp) -> Result<QpAttributes, VerbsError> {
        let _host = self.enter(FakeCall::QueryQp, qp.id)?;
        let r = match self.state.lock().objects.get(&qp.id) {
            Some(Obj::Qp { attr, .. }) => Ok(*attr),
            _ => Err(VerbsError::InvalidParameter),
        };
        self.finish(FakeCall::QueryQp, qp.id, r)
    }

    /// Logs the modify as started, blocks while a [`ModifyGate`] holds the QP, validates the
    /// transition (the IB state table, minimally), applies it and writes the output bytes:
    /// `out[0]` = the new state, `out[1..5]` = the modify's start sequence number (LE).
    fn modify_qp(&self, qp: &FakeQp, modify: &QpModify, out: &mut [u8]) -> Result<(), VerbsError> {
        let _host = self.enter(FakeCall::ModifyQp, qp.id)?;
        let (seq, index, gate) = {
            let mut state = self.state.lock();
            let from = match state.objects.get_mut(&qp.id) {
                Some(Obj::Qp { attr, modifying }) => {
                    *modifying += 1;
                    attr.state
                }
                _ => QpState::Reset,
            };
            let to = modify.target();
            let seq = u32::try_from(state.modify_log.len() + 1).unwrap_or(u32::MAX);
            state.modify_log.push(ModifyRecord {
                qp: qp.id,
                seq,
                from,
                to,
                modify: *modify,
                result: None,
            });
            let gate = state.gates.get(&qp.id).cloned();
            (seq, state.modify_log.len() - 1, gate)
        };
        if let Some(gate) = gate {
            let mut g = gate.state.lock();
            if !g.released {
                if self.platform.is_deterministic() {
                    drop(g);
                    panic!(
                        "FakeVerbs: modify_qp on held QP {} in deterministic mode would block \
                         the only thread for ever",
                        qp.id
                    );
                }
                g.blocked += 1;
                gate.cv.notify_all();
                while !g.released {
                    gate.cv.wait(&mut g);
                }
                g.blocked -= 1;
            }
        }
        let modify_ns = self.config.lock().modify_ns;
        if modify_ns > 0 {
            if self.platform.is_deterministic() {
                self.platform.advance_clock(modify_ns);
            } else {
                std::thread::sleep(std::time::Duration::from_nanos(modify_ns));
            }
        }
        let port_ok = match modify {
            QpModify::Init(init) => self.port(init.port).is_ok(),
            _ => true,
        };
        let r = {
            let mut state = self.state.lock();
            let record = state.modify_log[index];
            let r = match state.objects.get_mut(&qp.id) {
                Some(Obj::Qp { attr, modifying }) => {
                    *modifying -= 1;
                    if !port_ok {
                        Err(VerbsError::InvalidParameter)
                    } else if qp_transition_ok(attr.state, record.to) {
                        attr.state = record.to;
                        apply_modify(attr, modify);
                        Ok(())
                    } else {
                        Err(VerbsError::InvalidState)
                    }
                }
                _ => Err(VerbsError::InvalidParameter),
            };
            state.modify_log[index].result = Some(r);
            if r.is_ok() {
                let mut bytes = [0u8; 5];
                bytes[0] = record.to as u8;
                bytes[1..5].copy_from_slice(&seq.to_le_bytes());
                let n = out.len().min(bytes.len());
                out[..n].copy_from_slice(&bytes[..n]);
            }
            r
        };
        self.finish(FakeCall::ModifyQp, qp.id, r)
    }

    fn destroy_qp(&self, qp: FakeQp) {
        let _host = low_resources::host_scope();
        let running = match self.state.lock().objects.get(&qp.id) {
            Some(Obj::Qp { modifying, .. }) => *modifying,
            _ => 0,
        };
        if running != 0 {
            self.platform.verifier().fail(format!(
                "FakeVerbs: destroy_qp on QP {} while {running} modify_qp call(s) run on it",
                qp.id
            ));
        }
        self.destroy(FakeCall::DestroyQp, qp.id);
    }

    fn attach_mcast(&self, qp: &FakeQp, gid: &Gid, lid: u16) -> Result<FakeMcast, VerbsError> {
        let _ = lid;
        let _host = self.enter(FakeCall::AttachMcast, qp.id)?;
        let is_ud = matches!(
            self.state.lock().objects.get(&qp.id),
            Some(Obj::Qp { attr, .. }) if attr.qp_type == QpType::Ud
        );
        let r = if !is_ud || gid[0] != 0xff {
            Err(VerbsError::InvalidParameter)
        } else {
            self.create(Obj::Mcast, self.limits().max_multicast)
        };
        self.created(FakeCall::AttachMcast, r, |id| FakeMcast { id })
    }

    fn detach_mcast(&self, mcast: FakeMcast) {
        self.destroy(FakeCall::DetachMcast, mcast.id);
    }
}

/// Applies the attributes of a modify the fake keeps (enough for `query_qp` to reflect it):
/// each target state's fixed set, and the optional ones its options ask for.
fn apply_modify(attr: &mut QpAttributes, modify: &QpModify) {
    match modify {
        QpModify::Init(init) => {
            attr.primary_av.port = init.port;
            attr.qkey = init.qkey;
            attr.pkey_index = init.pkey_index;
            attr.access_flags = init.access;
        }
        QpModify::Rtr(rtr) => {
            attr.dest_qpn = rtr.dest_qpn;
            attr.rq_psn = rtr.rq_psn;
            attr.primary_av = rtr.primary.av;
            if let Some(mtu) = rtr.primary.path_mtu {
                attr.path_mtu = mtu;
            }
            attr.responder_resources = u32::from(rtr.responder_resources);
            attr.rnr_nak_timeout = rtr.rnr_nak_timeout;
            if rtr.opts.has(QpModifyOptions::ALTERNATE_AV) {
                attr.alternate_av = rtr.alternate.av;
            }
            if rtr.opts.has(QpModifyOptions::ACCESS_CTRL) {
                attr.access_flags = rtr.access;
            }
            if rtr.opts.has(QpModifyOptions::QKEY) {
                attr.qkey = rtr.qkey;
            }
            if rtr.opts.has(QpModifyOptions::PKEY) {
                attr.pkey_index = rtr.pkey_index;
            }
        }
        QpModify::Rts(rts) => {
            attr.sq_psn = rts.sq_psn;
            attr.retry_count = rts.retry_cnt;
            attr.rnr_retry_count = rts.rnr_retry_cnt;
            attr.local_ack_timeout = rts.local_ack_timeout;
            attr.initiator_depth = u32::from(rts.initiator_depth);
            if rts.opts.has(QpModifyOptions::ACCESS_CTRL) {
                attr.access_flags = rts.access;
            }
            if rts.opts.has(QpModifyOptions::QKEY) {
                attr.qkey = rts.qkey;
            }
        }
        QpModify::Reset | QpModify::Sqd { .. } | QpModify::SqError | QpModify::Error => {}
    }
}
