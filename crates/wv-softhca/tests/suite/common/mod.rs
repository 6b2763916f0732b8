//! Shared test harness: soft HCAs on the host model, with recording sinks and helpers that
//! drive QPs through the state table the way a client library would.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use wv_abi::consts::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::abi::{self, CqResp, QpResp, SrqResp};
use wv_softhca::*;

/// Counts CQ callbacks.
#[derive(Default)]
pub struct CqSink {
    pub completions: AtomicUsize,
    pub errors: AtomicUsize,
}
impl CqEventSink for CqSink {
    fn on_completion(&self) {
        self.completions.fetch_add(1, Ordering::SeqCst);
    }
    fn on_error(&self) {
        self.errors.fetch_add(1, Ordering::SeqCst);
    }
}
impl CqSink {
    pub fn completions(&self) -> usize {
        self.completions.load(Ordering::SeqCst)
    }
    pub fn errors(&self) -> usize {
        self.errors.load(Ordering::SeqCst)
    }
}

/// Records events.
pub struct Log<E> {
    pub events: Mutex<Vec<E>>,
}
impl<E> Default for Log<E> {
    fn default() -> Self {
        Log {
            events: Mutex::new(Vec::new()),
        }
    }
}
impl<E: Clone> Log<E> {
    pub fn take(&self) -> Vec<E> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }
}
impl CaEventSink for Log<CaEvent> {
    fn on_event(&self, e: CaEvent) {
        self.events.lock().unwrap().push(e);
    }
}
impl QpEventSink for Log<QpEvent> {
    fn on_event(&self, e: QpEvent) {
        self.events.lock().unwrap().push(e);
    }
}
impl SrqEventSink for Log<SrqEvent> {
    fn on_event(&self, e: SrqEvent) {
        self.events.lock().unwrap().push(e);
    }
}

#[cfg(all(feature = "std", target_os = "linux"))]
mod mapping;
#[cfg(all(feature = "std", target_os = "linux"))]
pub use mapping::{anonymous_mapping, anonymous_mapping_with};

pub type Hca = SoftHca<HostPlatform>;

/// One soft HCA opened by one client.
/// Opens `verbs` as a user-mode client does: its events logged, the open's reply (for the
/// UVP) returned with it.
pub fn open_ca_logged<V: Verbs>(verbs: &V) -> (V::Ca, wv_hal::KArc<Log<CaEvent>>, [u8; 64]) {
    let ca_events = wv_hal::KArc::new(Log::default());
    let mut out = [0u8; 64];
    let ca = verbs
        .open_ca(&mut Umv::new(0, 0, 64, &mut out), ca_events.clone().into())
        .unwrap();
    (ca, ca_events, out)
}

pub struct Node {
    pub platform: HostPlatform,
    pub hca: Arc<Hca>,
    pub ca: SoftCa,
    pub ca_events: wv_hal::KArc<Log<CaEvent>>,
    pub uvp: UvpContext,
    pub pd: SoftPd,
    pub pool: BufferPool,
}

pub struct Cq {
    pub soft: SoftCq,
    pub uvp: UvpCq,
    pub sink: wv_hal::KArc<CqSink>,
}

pub struct Qp {
    pub soft: SoftQp,
    pub uvp: UvpQp,
    pub events: wv_hal::KArc<Log<QpEvent>>,
    pub qp_type: QpType,
}

pub struct Srq {
    pub soft: SoftSrq,
    pub uvp: UvpSrq,
    pub events: wv_hal::KArc<Log<SrqEvent>>,
}

pub struct Mem {
    pub buf: DmaBuffer,
    pub mr: SoftMr,
    pub lkey: u32,
    pub rkey: u32,
}

impl Mem {
    pub fn sge(&self, off: usize, len: u32) -> Sge {
        Sge {
            addr: self.buf.addr() + off as u64,
            length: len,
            lkey: self.lkey,
        }
    }
    pub fn addr(&self, off: usize) -> u64 {
        self.buf.addr() + off as u64
    }
}

pub const ALL_ACCESS: u32 = WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ;

static NEXT_MAC: AtomicUsize = AtomicUsize::new(1);

pub fn mac() -> [u8; 6] {
    let n = NEXT_MAC.fetch_add(1, Ordering::Relaxed) as u32;
    let b = n.to_be_bytes();
    [0x02, 0x00, b[0], b[1], b[2], b[3]]
}

impl Node {
    pub fn new(platform: &HostPlatform, config: DeviceConfig) -> Node {
        let pool = BufferPool::new();
        Node::with_memory(platform, config, ClientMemory::pool(pool.clone()), pool)
    }

    /// A device whose client memory is `memory` (`pool`: the buffers [`Node::mem`] registers,
    /// which a device of another kind of memory refuses).
    pub fn with_memory(
        platform: &HostPlatform,
        config: DeviceConfig,
        memory: ClientMemory,
        pool: BufferPool,
    ) -> Node {
        let hca = SoftHca::new(Arc::new(platform.clone()), config, memory);
        Node::client(platform, hca, pool, |out| {
            UvpContext::from_open_resp(out).unwrap()
        })
    }

    /// A client of `hca`: a CA opened (its events logged), the user-mode provider `provider`
    /// makes from the open's reply, and a PD.
    pub fn client(
        platform: &HostPlatform,
        hca: Arc<Hca>,
        pool: BufferPool,
        provider: impl FnOnce(&[u8; 64]) -> UvpContext,
    ) -> Node {
        let (ca, ca_events, out) = open_ca_logged(&*hca);
        let uvp = provider(&out);
        let pd = hca.allocate_pd(&ca, &mut Umv::none()).unwrap();
        Node {
            platform: platform.clone(),
            hca,
            ca,
            ca_events,
            uvp,
            pd,
            pool,
        }
    }

    /// A device named `name` (with a MAC of its own) whose configuration `set` adjusts.
    pub fn configured(
        platform: &HostPlatform,
        name: &str,
        set: impl FnOnce(&mut DeviceConfig),
    ) -> Node {
        let mut config = DeviceConfig::new(name, mac());
        set(&mut config);
        Node::new(platform, config)
    }

    pub fn simple(platform: &HostPlatform) -> Node {
        Node::new(platform, DeviceConfig::new("soft", mac()))
    }

    /// Another client of the same device, with its own CA open and PD (as a second process on
    /// the host would be): the far end of a loopback connection.
    pub fn another_client(&self) -> Node {
        Node::client(&self.platform, self.hca.clone(), self.pool.clone(), |out| {
            UvpContext::from_open_resp(out).unwrap()
        })
    }

    pub fn cq(&self, entries: u32) -> Cq {
        self.cq_answered(entries).0
    }

    /// [`Node::cq`] with the device's vendor output, which names the CQ's ring.
    pub fn cq_answered(&self, entries: u32) -> (Cq, CqResp) {
        let sink = wv_hal::KArc::new(CqSink::default());
        let (soft, r) = create_cq(&*self.hca, &self.ca, entries, sink.clone());
        assert_cq_ring_described(&r);
        let uvp = self.uvp.map_cq(&r).unwrap();
        (Cq { soft, uvp, sink }, r)
    }

    pub fn mem(&self, len: usize, access: u32) -> Mem {
        self.mem_in(&self.pd, len, access)
    }

    /// A buffer of `len` bytes from the pool registered with `access` in `pd` (one of this
    /// client's PDs, not necessarily its own).
    pub fn mem_in(&self, pd: &SoftPd, len: usize, access: u32) -> Mem {
        let buf = self.pool.alloc(len);
        let region = MemoryRegion {
            address: buf.addr(),
            length: len as u64,
            access,
        };
        let (mr, keys) = self.hca.register_mr(pd, &region).unwrap();
        Mem {
            buf,
            mr,
            lkey: keys.lkey,
            rkey: u32::from_be(keys.rkey),
        }
    }

    /// A region of `len` bytes with [`ALL_ACCESS`] whose first bytes are `data`: the source of
    /// a message a test checks where it lands.
    pub fn mem_holding(&self, len: usize, data: &[u8]) -> Mem {
        let mem = self.mem(len, ALL_ACCESS);
        mem.buf.write(0, data).unwrap();
        mem
    }

    #[allow(clippy::too_many_arguments)]
    pub fn qp_with(
        &self,
        qp_type: QpType,
        scq: &Cq,
        rcq: &Cq,
        srq: Option<&Srq>,
        depth: u32,
        sge: u32,
        inline: u32,
        sig_all: bool,
    ) -> Qp {
        let create = qp_create(
            qp_type,
            &scq.soft,
            &rcq.soft,
            srq.map(|s| &s.soft),
            depth,
            sge,
            inline,
            sig_all,
        );
        self.create_qp(&create).0
    }

    /// A QP made as `create` asks, mapped for the UVP, with what the device answered.
    pub fn create_qp(&self, create: &QpCreate<'_, SoftCq, SoftSrq>) -> (Qp, QpCreated) {
        let (qp, created, _) = self.create_qp_answered(create);
        (qp, created)
    }

    /// [`Node::create_qp`] with the device's vendor output, which names the QP's rings.
    pub fn create_qp_answered(
        &self,
        create: &QpCreate<'_, SoftCq, SoftSrq>,
    ) -> (Qp, QpCreated, QpResp) {
        let events = wv_hal::KArc::new(Log::default());
        let (soft, created, r) = create_qp(&*self.hca, &self.pd, create, events.clone());
        let uvp = self.uvp.map_qp(&r).unwrap();
        let qp = Qp {
            soft,
            uvp,
            events,
            qp_type: create.qp_type,
        };
        (qp, created, r)
    }

    pub fn qp(&self, qp_type: QpType, cq: &Cq) -> Qp {
        self.qp_with(qp_type, cq, cq, None, 16, 4, 64, true)
    }

    pub fn srq(&self, max_wr: u32, limit: u32) -> Srq {
        self.srq_with(max_wr, 2, limit)
    }

    /// An SRQ of `max_wr` receives of `max_sge` SGEs, armed at `limit`.
    pub fn srq_with(&self, max_wr: u32, max_sge: u32, limit: u32) -> Srq {
        let events = wv_hal::KArc::new(Log::default());
        let attr = SrqAttributes {
            max_wr,
            max_sge,
            srq_limit: limit,
        };
        let (soft, r) = create_srq(&*self.hca, &self.pd, &attr, events.clone());
        let uvp = self.uvp.map_srq(&r).unwrap();
        Srq { soft, uvp, events }
    }

    pub fn modify(&self, qp: &Qp, m: &QpModify) -> Result<(), VerbsError> {
        let mut out = [0u8; 8];
        self.hca.modify_qp(&qp.soft, m, &mut out)
    }

    pub fn state(&self, qp: &Qp) -> QpState {
        self.hca.query_qp(&qp.soft).unwrap().state
    }
}

/// A CQ of `entries` on `ca` of `verbs`, as a user-mode client makes it, with its vendor
/// output.
pub fn create_cq<V: Verbs>(
    verbs: &V,
    ca: &V::Ca,
    entries: u32,
    sink: wv_hal::KArc<CqSink>,
) -> (V::Cq, CqResp) {
    let mut out = [0u8; 64];
    let (cq, _n) = verbs
        .create_cq(ca, entries, sink.into(), &mut Umv::new(0, 0, 64, &mut out))
        .unwrap();
    (cq, abi::parse(&out).unwrap())
}

/// A QP made as `create` asks in `pd` of `verbs`, as a user-mode client makes it, with what
/// the device answered and its vendor output (whose QP number is the one answered).
pub fn create_qp<V: Verbs>(
    verbs: &V,
    pd: &V::Pd,
    create: &QpCreate<'_, V::Cq, V::Srq>,
    events: wv_hal::KArc<Log<QpEvent>>,
) -> (V::Qp, QpCreated, QpResp) {
    let mut out = [0u8; 64];
    let (qp, created) = verbs
        .create_qp(pd, create, events.into(), &mut Umv::new(0, 0, 64, &mut out))
        .unwrap();
    let r: QpResp = abi::parse(&out).unwrap();
    assert_eq!(r.qpn, created.qpn);
    (qp, created, r)
}

/// An SRQ of `attr` in `pd` of `verbs`, as a user-mode client makes it, with its vendor
/// output.
pub fn create_srq<V: Verbs>(
    verbs: &V,
    pd: &V::Pd,
    attr: &SrqAttributes,
    events: wv_hal::KArc<Log<SrqEvent>>,
) -> (V::Srq, SrqResp) {
    let mut out = [0u8; 64];
    let srq = verbs
        .create_srq(pd, attr, events.into(), &mut Umv::new(0, 0, 64, &mut out))
        .unwrap();
    (srq, abi::parse(&out).unwrap())
}

/// What a QP of `qp_type` over `send_cq` and `recv_cq` (and `srq`) asks for: `depth` requests
/// of `sge` SGEs each way, `inline` bytes inline, every send signaled or not (`sig_all`).
#[allow(clippy::too_many_arguments)]
pub fn qp_create<'a, C, S>(
    qp_type: QpType,
    send_cq: &'a C,
    recv_cq: &'a C,
    srq: Option<&'a S>,
    depth: u32,
    sge: u32,
    inline: u32,
    sig_all: bool,
) -> QpCreate<'a, C, S> {
    QpCreate {
        qp_type,
        sq_depth: depth,
        rq_depth: depth,
        sq_sge: sge,
        rq_sge: sge,
        sq_max_inline: inline,
        sq_signaled: sig_all,
        send_cq,
        recv_cq,
        srq,
    }
}

/// CQ_RESIZE's command alone (what the provider does around it is the caller's): the size
/// the device answered and its vendor output.
pub fn resize_cq_command(node: &Node, cq: &Cq, entries: u32) -> Result<(u32, CqResp), VerbsError> {
    let mut out = [0u8; 64];
    let got = node
        .hca
        .resize_cq(&cq.soft, entries, &mut Umv::new(0, 0, 64, &mut out))?;
    Ok((got, abi::parse(&out).unwrap()))
}

/// A CQ's vendor output (CQ_CREATE, CQ_RESIZE) describes its ring whole: `ring_bytes` is its
/// `entries` slots of the CQE size the provider maps (64 bytes, as pvrdma's CQEs).
pub fn assert_cq_ring_described(r: &CqResp) {
    let ring = r.new_ring();
    assert_eq!(ring.stride_words * 8, 64);
    assert_eq!(r.ring_bytes, u64::from(r.entries) * 64, "{r:?}");
}

/// Every value a QP modification can carry, filled in sensibly: what a client library puts
/// in `WV_IO_QP_ATTRIBUTES`. [`Attrs::to`] builds the OFW modification for one target state
/// from it, as the driver does (`WvVerbsConvertAttr`): `options` (`WV_IO_QP_ATTR_*`) survives
/// only as the RTR/RTS options.
#[derive(Clone, Copy, Debug)]
pub struct Attrs {
    pub options: u32,
    pub port: u8,
    pub qkey: u32,
    pub pkey_index: u16,
    pub access: u32,
    pub dest_qpn: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub av: AddressVector,
    pub path_mtu: Option<Mtu>,
    pub local_ack_timeout: u8,
    pub retry: u8,
    pub rnr_retry: u8,
    pub rnr_nak_timeout: u8,
    pub initiator_depth: u8,
    pub responder_resources: u8,
    pub alternate_av: AddressVector,
    pub current_state: QpState,
    pub apm_state: u8,
}

impl Attrs {
    /// The modification to `state`.
    pub fn to(&self, state: QpState) -> QpModify {
        let path = |av: AddressVector| QpPath {
            av,
            path_mtu: self.path_mtu,
            local_ack_timeout: self.local_ack_timeout,
            seq_err_retry_cnt: self.retry,
            rnr_retry_cnt: self.rnr_retry,
        };
        let opts = QpModifyOptions(wv_qp_attr_to_ib_mod_qp(self.options));
        match state {
            QpState::Reset => QpModify::Reset,
            QpState::Init => QpModify::Init(QpInit {
                port: self.port,
                qkey: self.qkey,
                pkey_index: self.pkey_index,
                access: self.access,
            }),
            QpState::Rtr => QpModify::Rtr(QpRtr {
                rq_psn: self.rq_psn,
                dest_qpn: self.dest_qpn,
                primary: path(self.av),
                responder_resources: self.responder_resources,
                rnr_nak_timeout: self.rnr_nak_timeout,
                opts,
                alternate: path(self.alternate_av),
                qkey: self.qkey,
                pkey_index: self.pkey_index,
                access: self.access,
                sq_depth: 0,
                rq_depth: 0,
            }),
            QpState::Rts => QpModify::Rts(QpRts {
                sq_psn: self.sq_psn,
                retry_cnt: self.retry,
                rnr_retry_cnt: self.rnr_retry,
                local_ack_timeout: self.local_ack_timeout,
                initiator_depth: self.initiator_depth,
                opts,
                rnr_nak_timeout: self.rnr_nak_timeout,
                current_state: self.current_state,
                qkey: self.qkey,
                access: self.access,
                responder_resources: self.responder_resources,
                primary: path(self.av),
                alternate: path(self.alternate_av),
                sq_depth: 0,
                rq_depth: 0,
                apm_state: self.apm_state,
                port: self.port,
                pkey_index: self.pkey_index,
            }),
            QpState::Sqd => QpModify::Sqd { notify: true },
            QpState::SqError => QpModify::SqError,
            QpState::Error => QpModify::Error,
        }
    }
}

/// Sensible values with the given `WV_IO_QP_ATTR_*` options.
pub fn attrs(options: u32) -> Attrs {
    Attrs {
        options,
        port: 1,
        qkey: 0x1111_1111,
        pkey_index: 0,
        access: WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ,
        dest_qpn: 0,
        rq_psn: 0,
        sq_psn: 0,
        av: AddressVector {
            port: 1,
            ..AddressVector::default()
        },
        path_mtu: Some(Mtu::Mtu1024),
        local_ack_timeout: 14,
        retry: 7,
        rnr_retry: 7,
        rnr_nak_timeout: 12,
        initiator_depth: 1,
        responder_resources: 1,
        alternate_av: AddressVector::default(),
        current_state: QpState::Reset,
        apm_state: 0,
    }
}

/// The modification to `state` with sensible values and the given options.
pub fn qpm(state: QpState, options: u32) -> QpModify {
    attrs(options).to(state)
}

/// [`attrs`] for a QP of `node` connected to itself: a path to the node's own GID, the QP's
/// own number as destination (no traffic needed to move it through the state table).
pub fn loopback_attrs(node: &Node, qp: &Qp, options: u32) -> Attrs {
    let mut a = attrs(options);
    a.av = route_to(node);
    a.alternate_av = a.av;
    a.dest_qpn = qp.uvp.qpn();
    a
}

/// A global route to `node`'s device (its GID) through port 1.
pub fn route_to(node: &Node) -> AddressVector {
    AddressVector {
        grh_valid: true,
        dgid: node.hca.gid(),
        port: 1,
        ..AddressVector::default()
    }
}

/// An RC QP's modification to RTR towards `qp` of `node`, expecting the default PSN: the far
/// end of a connection brought only half way up.
pub fn rc_rtr_towards(node: &Node, qp: &Qp) -> QpModify {
    let mut m = attrs(RTR_RC);
    m.av = route_to(node);
    m.dest_qpn = qp.uvp.qpn();
    m.rq_psn = Conn::default().psn;
    m.to(QpState::Rtr)
}

/// A fresh QP of `t` on `cq`, driven to `target` with [`loopback_attrs`] and no options at all.
/// Moves `qp` to `next` with `attrs`, checks that `query_qp` reports it there, and returns
/// what the query reported for the caller to check the attributes the move carried.
pub fn moved(node: &Node, qp: &Qp, attrs: &Attrs, next: QpState) -> QpAttributes {
    node.modify(qp, &attrs.to(next)).unwrap();
    let q = node.hca.query_qp(&qp.soft).unwrap();
    assert_eq!(q.state, next);
    q
}

pub fn qp_in_state(node: &Node, cq: &Cq, t: QpType, target: QpState) -> Qp {
    let qp = node.qp(t, cq);
    let path: &[QpState] = match target {
        QpState::Reset => &[],
        QpState::Init => &[QpState::Init],
        QpState::Rtr => &[QpState::Init, QpState::Rtr],
        QpState::Rts => &[QpState::Init, QpState::Rtr, QpState::Rts],
        QpState::Sqd => &[QpState::Init, QpState::Rtr, QpState::Rts, QpState::Sqd],
        QpState::Error => &[QpState::Init, QpState::Error],
        QpState::SqError => unreachable!(),
    };
    for &n in path {
        node.modify(&qp, &loopback_attrs(node, &qp, 0).to(n))
            .unwrap_or_else(|e| panic!("{t:?} to {n:?}: {e:?}"));
    }
    assert_eq!(node.state(&qp), target);
    qp
}

pub const INIT_RC: u32 = RC_INIT_OPTIONS;
pub const INIT_UD: u32 =
    WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_PKEY_INDEX | WV_IO_QP_ATTR_PORT_NUMBER | WV_IO_QP_ATTR_QKEY;
pub const RTR_RC: u32 = RC_RTR_OPTIONS;
pub const RTR_UC: u32 = WV_IO_QP_ATTR_STATE
    | WV_IO_QP_ATTR_AV
    | WV_IO_QP_ATTR_DESTINATION_QPN
    | WV_IO_QP_ATTR_RECEIVE_PSN;
pub const RTS_RC: u32 = RC_RTS_OPTIONS;
pub const RTS_UD: u32 = WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_SEND_PSN;

/// Tunables of [`connect`].
#[derive(Clone, Copy)]
pub struct Conn {
    pub retry: u8,
    pub rnr_retry: u8,
    pub access: u32,
    pub psn: u32,
    /// Local ACK timeout (`timeout`).
    pub timeout: u8,
    /// The RNR NAK timer this side's responder asks for (`min_rnr_timer`).
    pub min_rnr_timer: u8,
    /// `max_rd_atomic` (initiator depth).
    pub depth: u8,
    /// `max_dest_rd_atomic` (responder resources).
    pub resources: u8,
    pub mtu: Mtu,
}
impl Default for Conn {
    fn default() -> Self {
        Conn {
            retry: 7,
            rnr_retry: 7,
            access: WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ,
            psn: 0x123,
            timeout: 14,
            min_rnr_timer: 12,
            depth: 1,
            resources: 1,
            mtu: Mtu::Mtu1024,
        }
    }
}

impl Conn {
    /// The defaults but for `retry` transport retries.
    pub fn with_retry(retry: u8) -> Conn {
        Conn {
            retry,
            ..Conn::default()
        }
    }

    /// The defaults but for `rnr_retry` RNR retries.
    pub fn with_rnr_retry(rnr_retry: u8) -> Conn {
        Conn {
            rnr_retry,
            ..Conn::default()
        }
    }
}

/// Moves `qp` of `node` to RTS, connected to `remote_qpn` on the device whose GID is `dgid`.
pub fn bring_up(node: &Node, qp: &Qp, dgid: Gid, remote_qpn: u32, c: Conn) {
    match qp.qp_type {
        QpType::Ud => {
            node.modify(qp, &qpm(QpState::Init, INIT_UD)).unwrap();
            node.modify(qp, &qpm(QpState::Rtr, WV_IO_QP_ATTR_STATE))
                .unwrap();
            node.modify(qp, &qpm(QpState::Rts, RTS_UD)).unwrap();
        }
        t => {
            let mut a = attrs(INIT_RC);
            a.access = c.access;
            node.modify(qp, &a.to(QpState::Init)).unwrap();
            a.options = if t == QpType::Rc { RTR_RC } else { RTR_UC };
            a.av = AddressVector {
                grh_valid: true,
                dgid,
                port: 1,
                hop_limit: 1,
                ..AddressVector::default()
            };
            a.dest_qpn = remote_qpn;
            a.rq_psn = c.psn;
            a.rnr_nak_timeout = c.min_rnr_timer;
            a.responder_resources = c.resources;
            a.path_mtu = Some(c.mtu);
            node.modify(qp, &a.to(QpState::Rtr)).unwrap();
            a.options = if t == QpType::Rc { RTS_RC } else { RTS_UD };
            a.sq_psn = c.psn;
            a.retry = c.retry;
            a.rnr_retry = c.rnr_retry;
            a.local_ack_timeout = c.timeout;
            a.initiator_depth = c.depth;
            node.modify(qp, &a.to(QpState::Rts)).unwrap();
        }
    }
    assert_eq!(node.state(qp), QpState::Rts);
}

/// Connects two QPs to each other.
pub fn connect(a: &Node, qa: &Qp, b: &Node, qb: &Qp, c: Conn) {
    bring_up(a, qa, b.hca.gid(), qb.uvp.qpn(), c);
    bring_up(b, qb, a.hca.gid(), qa.uvp.qpn(), c);
}

/// A QP of `qa`'s type on `b`, on a CQ of its own of `entries`, connected to `qa` of `a` with
/// `c`: the far end for a QP a test made its own way.
pub fn connected_peer(a: &Node, qa: &Qp, b: &Node, entries: u32, c: Conn) -> (Cq, Qp) {
    let cb = b.cq(entries);
    let qb = b.qp(qa.qp_type, &cb);
    connect(a, qa, b, &qb, c);
    (cb, qb)
}

/// The two ends' buffers of a transfer: a region of `len_a` bytes of `a`, then one of `len_b`
/// bytes of `b`, each with [`ALL_ACCESS`].
pub fn mems(a: &Node, len_a: usize, b: &Node, len_b: usize) -> (Mem, Mem) {
    (a.mem(len_a, ALL_ACCESS), b.mem(len_b, ALL_ACCESS))
}

/// The two ends of a message of `len` bytes, `byte` of each offset: a region of `a` of `len`
/// bytes holding it and one of `len_b` bytes of `b` (as [`mems`]); the source, the message and
/// the destination.
pub fn patterned(
    a: &Node,
    len: usize,
    b: &Node,
    len_b: usize,
    byte: impl Fn(usize) -> u8,
) -> (Mem, Vec<u8>, Mem) {
    let (src, dst) = mems(a, len, b, len_b);
    let data = write_pattern(&src, len, byte);
    (src, data, dst)
}

/// Writes `len` bytes, `byte` of each offset, at the start of `mem` and returns them: a
/// message each byte of which can be checked where it lands.
pub fn write_pattern(mem: &Mem, len: usize, byte: impl Fn(usize) -> u8) -> Vec<u8> {
    let data: Vec<u8> = (0..len).map(byte).collect();
    mem.buf.write(0, &data).unwrap();
    data
}

/// Polls everything.
pub fn poll_all(cq: &Cq) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut wc = [WorkCompletion::default(); 16];
    loop {
        let n = cq.uvp.poll(&mut wc);
        out.extend_from_slice(&wc[..n]);
        if n < wc.len() {
            return out;
        }
    }
}

/// Each completion's request id and status, in the order polled.
pub fn statuses(wcs: &[WorkCompletion]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

/// Polls everything: each completion's request id, status and opcode, in the order polled.
pub fn completions(cq: &Cq) -> Vec<(u64, WcStatus, WcOpcode)> {
    poll_all(cq)
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode))
        .collect()
}

/// The one completion on `cq`: its request id, status and opcode.
pub fn one(cq: &Cq) -> (u64, WcStatus, WcOpcode) {
    let w = completions(cq);
    assert_eq!(w.len(), 1, "{w:?}");
    w[0]
}

/// A signaled RDMA WRITE (`id`) of the bytes `sg` names to `addr` under `rkey` (a region's or
/// a window's).
pub fn write_wr<'a>(id: u64, sg: &'a [Sge], addr: u64, rkey: u32) -> SendWr<'a> {
    let mut wr = send_wr(id, WrOpcode::RdmaWrite, sg);
    wr.remote_addr = addr;
    wr.rkey = rkey;
    wr
}

/// Posts [`write_wr`] on `qp` and returns the one completion it makes on `cq` (as [`one`]):
/// a write through a key, and how it ended.
pub fn write_through(
    qp: &Qp,
    cq: &Cq,
    id: u64,
    sg: &[Sge],
    addr: u64,
    rkey: u32,
) -> (u64, WcStatus, WcOpcode) {
    qp.uvp.post_send(&write_wr(id, sg, addr, rkey)).unwrap();
    one(cq)
}

/// Each completion's request id, in the order polled.
pub fn wr_ids(wcs: &[WorkCompletion]) -> Vec<u64> {
    wcs.iter().map(|w| w.wr_id).collect()
}

/// Checks that `cq` did not overrun and polling it gives the completions of requests `0..n`,
/// in order.
#[track_caller]
pub fn expect_in_order(cq: &Cq, n: u64) {
    assert!(!cq.uvp.overrun());
    assert_eq!(wr_ids(&poll_all(cq)), (0..n).collect::<Vec<_>>());
}

/// Checks that polling `cq` gives exactly the completions `expected` (request id and status),
/// in that order.
#[track_caller]
pub fn expect_statuses(cq: &Cq, expected: &[(u64, WcStatus)]) {
    assert_eq!(statuses(&poll_all(cq)), expected);
}

/// A signaled RDMA `op` (`id`) between the bytes `sg` names and `remote` at `off`, under its
/// rkey.
pub fn rdma_wr<'a>(id: u64, op: WrOpcode, sg: &'a [Sge], remote: &Mem, off: usize) -> SendWr<'a> {
    let mut wr = send_wr(id, op, sg);
    wr.remote_addr = remote.addr(off);
    wr.rkey = remote.rkey;
    wr
}

/// The address of a UD send to QP `qpn` of the device whose GID is `dgid`, under the Q_Key of
/// [`attrs`], with a global route.
pub fn ud_to(dgid: Gid, qpn: u32) -> UdAddress {
    UdAddress {
        dgid,
        grh: true,
        remote_qpn: qpn,
        remote_qkey: 0x1111_1111,
        ..UdAddress::default()
    }
}

/// Posts a signaled UD SEND (`id`) of the bytes `sge` names from `qp` to `to`.
pub fn ud_send(qp: &Qp, id: u64, sge: Sge, to: UdAddress) {
    let sg = [sge];
    let mut wr = send_wr(id, WrOpcode::Send, &sg);
    wr.ud = Some(to);
    qp.uvp.post_send(&wr).unwrap();
}

pub fn send_wr<'a>(id: u64, op: WrOpcode, sges: &'a [Sge]) -> SendWr<'a> {
    let mut wr = SendWr::new(id, op);
    wr.sg_list = sges;
    wr.send_flags = send_flags::SIGNALED;
    wr
}

/// Posts a signaled SEND (`id`) of the bytes `sge` names on `qp`.
pub fn post_send(qp: &Qp, id: u64, sge: Sge) {
    qp.uvp
        .post_send(&send_wr(id, WrOpcode::Send, &[sge]))
        .unwrap();
}

/// Posts a receive (`id`) into the bytes `sge` names on `qp`.
pub fn post_recv(qp: &Qp, id: u64, sge: Sge) {
    qp.uvp.post_recv(&recv_wr(id, &[sge])).unwrap();
}

/// Posts a receive (`id`) into the bytes `sge` names on `srq`.
pub fn post_srq_recv(srq: &Srq, id: u64, sge: Sge) {
    srq.uvp.post_recv(&recv_wr(id, &[sge])).unwrap();
}

pub fn recv_wr(id: u64, sges: &[Sge]) -> RecvWr<'_> {
    RecvWr {
        wr_id: id,
        sg_list: sges,
    }
}

/// Two devices on one fabric, each with one client.
pub fn pair(platform: &HostPlatform) -> (Arc<Fabric>, Node, Node) {
    pair_on(platform, Topology::TwoDevices)
}

/// A deterministic platform and a [`Node::simple`] on it.
pub fn deterministic_node() -> (HostPlatform, Node) {
    let p = HostPlatform::deterministic();
    let node = Node::simple(&p);
    (p, node)
}

/// [`deterministic_node`] with a CQ of `entries` on the device: where the tests of one QP's
/// life start.
pub fn deterministic_node_with_cq(entries: u32) -> (HostPlatform, Node, Cq) {
    let (p, node) = deterministic_node();
    let cq = node.cq(entries);
    (p, node, cq)
}

/// A deterministic platform and one device on it configured by `set`: the start of the tests
/// that need limits, ports or groups other than the defaults.
pub fn deterministic_configured(
    name: &str,
    set: impl FnOnce(&mut DeviceConfig),
) -> (HostPlatform, Node) {
    let p = HostPlatform::deterministic();
    let node = Node::configured(&p, name, set);
    (p, node)
}

/// A deterministic platform with a device configured as [`Node::configured`] makes it and a
/// plain one, on one fabric.
pub fn deterministic_configured_pair(
    name: &str,
    set: impl FnOnce(&mut DeviceConfig),
) -> (HostPlatform, Arc<Fabric>, Node, Node) {
    let p = HostPlatform::deterministic();
    let a = Node::configured(&p, name, set);
    let b = Node::simple(&p);
    let f = fabric_of(&a, &b);
    (p, f, a, b)
}

/// A deterministic platform and [`pair`] on it.
pub fn deterministic_pair() -> (HostPlatform, Arc<Fabric>, Node, Node) {
    let p = HostPlatform::deterministic();
    let (f, a, b) = pair(&p);
    (p, f, a, b)
}

/// Where the two ends of a connection are. On one device a packet loops back through the
/// device's own transport, and the fabric's fault injection decides its fate as it does
/// between two devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// Two clients of one device on a fabric: QPs of the same device.
    OneDevice,
    /// One client on each of two devices of a fabric.
    TwoDevices,
}

/// Two clients on one fabric, on one device or on two.
pub fn pair_on(platform: &HostPlatform, topology: Topology) -> (Arc<Fabric>, Node, Node) {
    let a = Node::simple(platform);
    let b = match topology {
        Topology::OneDevice => a.another_client(),
        Topology::TwoDevices => Node::simple(platform),
    };
    (fabric_of(&a, &b), a, b)
}

/// A fabric with the devices of `a` and `b` attached (once, if they share one).
pub fn fabric_of(a: &Node, b: &Node) -> Arc<Fabric> {
    let fabric = Fabric::new();
    fabric.attach(&a.hca);
    fabric.attach(&b.hca);
    fabric
}

/// Defines each test once per [`Topology`]: `fn name(topology) { body }` becomes a module
/// `name` with the tests `one_device` and `two_devices`, each running the body.
#[macro_export]
macro_rules! on_both_topologies {
    ($( $(#[$meta:meta])* fn $name:ident($topology:ident) $body:block )*) => {$(
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn body($topology: $crate::common::Topology) $body

            #[test]
            fn one_device() {
                body($crate::common::Topology::OneDevice);
            }

            #[test]
            fn two_devices() {
                body($crate::common::Topology::TwoDevices);
            }
        }
    )*};
}

/// Runs the DPCs and checks the verifier stayed clean.
pub fn settle(p: &HostPlatform) {
    p.run_until_idle();
    assert_eq!(p.verifier().violations(), Vec::<String>::new());
}

/// Two devices on one fabric, each with a 64-entry CQ and an RC QP, the QPs connected with `c`.
pub fn rc_pair_with(p: &HostPlatform, c: Conn) -> (Arc<Fabric>, Node, Node, Cq, Cq, Qp, Qp) {
    rc_pair_on(p, Topology::TwoDevices, c)
}

/// Two clients on `topology`, each with a 64-entry CQ and an RC QP, the QPs connected with `c`.
pub fn rc_pair_on(
    p: &HostPlatform,
    topology: Topology,
    c: Conn,
) -> (Arc<Fabric>, Node, Node, Cq, Cq, Qp, Qp) {
    let (f, a, b) = pair_on(p, topology);
    let (ca, cb, qa, qb) = two_qps(&a, &b, QpType::Rc, 64);
    connect(&a, &qa, &b, &qb, c);
    (f, a, b, ca, cb, qa, qb)
}

/// A deterministic platform and [`rc_pair_on`] on it.
pub fn deterministic_rc_pair_on(
    topology: Topology,
    c: Conn,
) -> (HostPlatform, Arc<Fabric>, Node, Node, Cq, Cq, Qp, Qp) {
    let p = HostPlatform::deterministic();
    let (f, a, b, ca, cb, qa, qb) = rc_pair_on(&p, topology, c);
    (p, f, a, b, ca, cb, qa, qb)
}

/// A deterministic platform and [`rc_pair_with`] on it.
pub fn deterministic_rc_pair_with(
    c: Conn,
) -> (HostPlatform, Arc<Fabric>, Node, Node, Cq, Cq, Qp, Qp) {
    deterministic_rc_pair_on(Topology::TwoDevices, c)
}

/// A deterministic platform and [`rc_pair`] on it.
pub fn deterministic_rc_pair() -> (HostPlatform, Arc<Fabric>, Node, Node, Cq, Cq, Qp, Qp) {
    deterministic_rc_pair_with(Conn::default())
}

/// A deterministic platform and [`pair`] on it, with a QP of `qp_type` on each client, each on
/// its own CQ of `entries`, the QPs connected with `c`.
pub fn deterministic_connected(
    qp_type: QpType,
    entries: u32,
    c: Conn,
) -> (HostPlatform, Arc<Fabric>, Node, Node, Cq, Cq, Qp, Qp) {
    let (p, f, a, b) = deterministic_pair();
    let (ca, cb, qa, qb) = two_qps(&a, &b, qp_type, entries);
    connect(&a, &qa, &b, &qb, c);
    (p, f, a, b, ca, cb, qa, qb)
}

/// A deterministic platform and [`pair`] on it, with [`ud_qps`] on each client.
pub fn deterministic_ud_pair(
    entries: u32,
) -> (HostPlatform, Arc<Fabric>, Node, Node, Cq, Cq, Qp, Qp) {
    let (p, f, a, b) = deterministic_pair();
    let (ca, cb, qa, qb) = ud_qps(&a, &b, entries);
    (p, f, a, b, ca, cb, qa, qb)
}

/// [`rc_pair_with`] with the default connection attributes.
pub fn rc_pair(p: &HostPlatform) -> (Arc<Fabric>, Node, Node, Cq, Cq, Qp, Qp) {
    rc_pair_with(p, Conn::default())
}

/// An RC QP taking `depth` sends on each of `a` and `b`, each on its own CQ of `entries`,
/// connected with the default attributes.
pub fn deep_rc_qps(a: &Node, b: &Node, entries: u32, depth: u32) -> (Cq, Cq, Qp, Qp) {
    let (ca, cb) = two_cqs(a, b, entries);
    let qa = a.qp_with(QpType::Rc, &ca, &ca, None, depth, 1, 0, true);
    let qb = b.qp_with(QpType::Rc, &cb, &cb, None, depth, 1, 0, true);
    connect(a, &qa, b, &qb, Conn::default());
    (ca, cb, qa, qb)
}

/// A QP of `qp_type` on `node`, on a CQ of its own of `entries`, brought up to RTS toward QP
/// `remote_qpn` of the device whose GID is `dgid` with `c` (a UD QP takes no peer: zeros).
pub fn qp_up(
    node: &Node,
    qp_type: QpType,
    entries: u32,
    dgid: Gid,
    remote_qpn: u32,
    c: Conn,
) -> (Cq, Qp) {
    let cq = node.cq(entries);
    let qp = node.qp(qp_type, &cq);
    bring_up(node, &qp, dgid, remote_qpn, c);
    (cq, qp)
}

/// A CQ of `entries` on each of `a` and `b`.
pub fn two_cqs(a: &Node, b: &Node, entries: u32) -> (Cq, Cq) {
    (a.cq(entries), b.cq(entries))
}

/// A QP of `qp_type` on each of `a` and `b`, each on its own CQ of `entries`, in RESET.
pub fn two_qps(a: &Node, b: &Node, qp_type: QpType, entries: u32) -> (Cq, Cq, Qp, Qp) {
    let (ca, cb) = two_cqs(a, b, entries);
    let qa = a.qp(qp_type, &ca);
    let qb = b.qp(qp_type, &cb);
    (ca, cb, qa, qb)
}

/// A UD QP on each of `a` and `b`, each on its own CQ of `entries`, both brought up to RTS.
pub fn ud_qps(a: &Node, b: &Node, entries: u32) -> (Cq, Cq, Qp, Qp) {
    let (ca, cb, qa, qb) = two_qps(a, b, QpType::Ud, entries);
    bring_up(a, &qa, [0; 16], 0, Conn::default());
    bring_up(b, &qb, [0; 16], 0, Conn::default());
    (ca, cb, qa, qb)
}

/// The local ACK timeout of `attrs()`'s `local_ack_timeout` (14): 4.096 µs × 2^14.
pub const ACK_TIMEOUT_NS: u64 = 4096 << 14;
/// The RNR NAK delay of `attrs()`'s `rnr_nak_timeout` (12): 0.64 ms.
pub const RNR_DELAY_NS: u64 = 640_000;

/// Deterministic mode: fires the device timers one after the other (moving the clock to each)
/// until none is pending or the next is more than `budget_ns` past the clock at the call.
/// Returns how many fired.
pub fn run_timers_for(p: &HostPlatform, budget_ns: u64) -> usize {
    let end = p.now_ns().saturating_add(budget_ns);
    let mut fired = 0;
    while let Some(due) = p.next_timer_ns() {
        if due > end {
            break;
        }
        assert!(p.run_next_timer());
        fired += 1;
    }
    fired
}

/// Fires device timers until none is pending (at most `limit` of them: an RNR wait with
/// `rnr_retry = 7` never ends on its own).
pub fn run_timers(p: &HostPlatform, limit: usize) -> usize {
    let mut fired = 0;
    while fired < limit && p.run_next_timer() {
        fired += 1;
    }
    fired
}
