//! The device: object tables, ports, the command channel, the async-event and CQ-notify rings,
//! and the three interrupt vectors that lead to the DPC which calls the core's sinks.
//!
//! This part is platform-neutral: interrupts leave, and timers and the clock come in, through a
//! [`Bus`] that the platform glue (`verbs_impl`) implements with the platform's interrupt, DPC,
//! timer and clock services.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::lock::{Mutex, RwLock};
use wv_hal::{
    AllocError, CaEvent, CaEventKind, CaEventSink, Dpc, Gid, KArc, Mtu, PortState, QpEvent,
    SrqEvent, VerbsError,
};

use crate::cq::Cq;
use crate::dma::ClientMemory;
use crate::fabric::Fabric;
use crate::fallible;
use crate::mr::Mr;
use crate::mw::{Mw, is_mw_key, mw_handle};
use crate::qp::Qp;
use crate::srq::Srq;
use crate::table::Table;

/// Interrupt vectors (pvrdma's MSI-X layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Vector {
    /// Command response.
    Response = 0,
    /// Async events.
    Async = 1,
    /// CQ notification.
    Cq = 2,
}

/// The board the device sits on (the platform glue): where its interrupt lines go, its clock,
/// and its timers.
pub(crate) trait Bus: Send + Sync {
    /// Raises `vector`: the glue runs the ISR through the platform.
    fn raise(&self, vector: Vector);
    /// The platform's monotonic clock in nanoseconds.
    fn now_ns(&self) -> u64;
    /// Queues `timer` as a DPC once the clock reaches `due_ns` (replacing an earlier due time).
    fn set_timer(&self, timer: &KArc<dyn Dpc>, due_ns: u64);
    /// Cancels a pending timer.
    fn cancel_timer(&self, timer: &KArc<dyn Dpc>);
    /// Blocks the caller for `ns` of the platform's clock (the firmware's command latency).
    fn delay(&self, ns: u64);
}

/// The MTU of every port (`query_port`'s `mtu`): the largest path MTU, and a UD message's limit.
pub(crate) const PORT_MTU: Mtu = Mtu::Mtu4096;

/// Limits the device advertises through `query_ca` and enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Queue pairs.
    pub max_qp: u32,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// SGEs per work request (at most 16).
    pub max_sge: u32,
    /// Completion queues.
    pub max_cq: u32,
    /// Entries per CQ.
    pub max_cqe: u32,
    /// Memory regions.
    pub max_mr: u32,
    /// Largest region.
    pub max_mr_size: u64,
    /// Protection domains.
    pub max_pd: u32,
    /// Shared receive queues.
    pub max_srq: u32,
    /// Work requests per SRQ.
    pub max_srq_wr: u32,
    /// Largest inline send (at most 256).
    pub max_inline: u32,
    /// Address handles.
    pub max_ah: u32,
    /// Memory windows.
    pub max_mw: u32,
    /// P_Keys per port.
    pub max_pkeys: u32,
    /// GIDs per port.
    pub gid_table_len: u32,
    /// RDMA reads in flight per QP.
    pub max_qp_rd_atom: u32,
    /// Largest message.
    pub max_msg: u32,
    /// Multicast groups with attached QPs.
    pub max_mcast_grp: u32,
    /// QPs attached to one multicast group.
    pub max_mcast_qp_attach: u32,
    /// Multicast attachments in all.
    pub max_total_mcast_qp_attach: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_qp: 1024,
            max_qp_wr: 4096,
            max_sge: 16,
            max_cq: 1024,
            max_cqe: 65536,
            max_mr: 4096,
            max_mr_size: 1 << 32,
            max_pd: 1024,
            max_srq: 256,
            max_srq_wr: 4096,
            max_inline: 256,
            max_ah: 1024,
            max_mw: 1024,
            max_pkeys: 16,
            gid_table_len: 16,
            max_qp_rd_atom: 16,
            max_msg: 1 << 31,
            max_mcast_grp: 1024,
            max_mcast_qp_attach: 64,
            max_total_mcast_qp_attach: 1024 * 64,
        }
    }
}

/// What a soft HCA is made of.
#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// Device name (diagnostics).
    pub name: String,
    /// The device's MAC; the node GUID and GID 0 (the link-local GID) derive from its EUI-64.
    pub mac: [u8; 6],
    /// What the ports are (default Ethernet: RoCE).
    pub link_layer: LinkLayer,
    /// Physical ports (1 or 2).
    pub ports: u8,
    /// Limits.
    pub limits: Limits,
    /// How long each command takes to answer, in nanoseconds (0, the default: at once). A
    /// real controller's firmware takes tens of microseconds per command; with a latency here
    /// the caller of a command (QP modify, create, destroy, …) holds one of the
    /// [`command_slots`](Self::command_slots) and waits that long before the response is
    /// written and the response interrupt raised, and the waits of up to that many callers
    /// overlap. The data path never waits.
    pub command_latency_ns: u64,
    /// Commands the firmware accepts at once ([`DEFAULT_COMMAND_SLOTS`] by default; at least
    /// 1). mlx4 in event mode issues as many as the firmware's QUERY_FW reports (a power of
    /// two, one token each) and mlx5's command queue has up to 32 entries; pvrdma has a single
    /// request slot (its driver serialises commands on a semaphore), which is 1 here. A caller
    /// that finds every slot taken waits for one, re-checking every tenth of the latency.
    pub command_slots: u32,
}

/// The command slots of a [`DeviceConfig::new`] device: several commands in flight, as on
/// mlx4/mlx5 firmware.
pub const DEFAULT_COMMAND_SLOTS: u32 = 16;

impl DeviceConfig {
    /// A one-port device with default limits and commands answered at once.
    pub fn new(name: &str, mac: [u8; 6]) -> Self {
        DeviceConfig {
            name: String::from(name),
            mac,
            ports: 1,
            link_layer: LinkLayer::Ethernet,
            limits: Limits::default(),
            command_latency_ns: 0,
            command_slots: DEFAULT_COMMAND_SLOTS,
        }
    }
}

/// The first multicast LID (IBTA: 0xC000–0xFFFE are multicast, 0xFFFF the permissive LID).
pub const MULTICAST_LID_BASE: u16 = 0xC000;

/// The link layer of a device's ports.
///
/// On Ethernet (RoCE v1) every packet carries a GRH: an address without a global route is
/// refused, as the IB core's `rdma_check_ah_attr` refuses it, and the ports report no LID. On
/// InfiniBand a port has the LID the fabric assigned it, addresses may route by LID alone
/// (what WinOFED's examples and an IB subnet's applications do), and IP addresses resolve to
/// the port's GID, as IPoIB and IBAT do, instead of adding GIDs to its table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LinkLayer {
    /// RoCE v1 ports.
    #[default]
    Ethernet,
    /// InfiniBand ports.
    InfiniBand,
}

impl LinkLayer {
    /// `WV_IO_PORT_ATTRIBUTES.Transport` / OFW's `RDMA_TRANSPORT_*`: 0 IB, 2 RoCE.
    pub fn transport(self) -> u8 {
        match self {
            LinkLayer::InfiniBand => 0,
            LinkLayer::Ethernet => 2,
        }
    }

    /// Whether an address must carry a global route.
    pub fn needs_grh(self) -> bool {
        self == LinkLayer::Ethernet
    }
}

/// The EUI-64 of a MAC (the interface id of its link-local GID and the node GUID).
pub fn eui64(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xFF,
        0xFE,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// The MAC-based GID: `fe80::/64` + EUI-64.
pub fn mac_gid(mac: [u8; 6]) -> Gid {
    let mut g = [0u8; 16];
    g[0] = 0xFE;
    g[1] = 0x80;
    g[8..].copy_from_slice(&eui64(mac));
    g
}

/// The IPv4-based GID: `::ffff:a.b.c.d`.
pub fn ipv4_gid(ip: [u8; 4]) -> Gid {
    let mut g = [0u8; 16];
    g[10] = 0xFF;
    g[11] = 0xFF;
    g[12..].copy_from_slice(&ip);
    g
}

#[derive(Debug)]
pub(crate) struct Port {
    pub state: PortState,
    pub lid: u16,
    pub gids: Vec<Gid>,
    pub pkeys: Vec<u16>,
}

/// A run-down reference: callbacks hold it while they run; destroy closes it and waits.
#[derive(Debug, Default)]
pub(crate) struct Rundown(AtomicU32);

const CLOSED: u32 = 1 << 31;

impl Rundown {
    pub(crate) const fn new() -> Self {
        Rundown(AtomicU32::new(0))
    }
    pub(crate) fn acquire(&self) -> bool {
        let mut v = self.0.load(Ordering::Acquire);
        loop {
            if v & CLOSED != 0 {
                return false;
            }
            match self
                .0
                .compare_exchange_weak(v, v + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(n) => v = n,
            }
        }
    }
    pub(crate) fn release(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
    /// Runs `callback` holding a reference, unless the object is being destroyed: how every
    /// sink of the device is called, so that destroy's wait covers the call.
    pub(crate) fn run(&self, callback: impl FnOnce()) {
        if self.acquire() {
            callback();
            self.release();
        }
    }
    /// Refuses new holders and waits for the current ones (callbacks on other processors).
    pub(crate) fn close_and_wait(&self) {
        self.0.fetch_or(CLOSED, Ordering::AcqRel);
        while self.0.load(Ordering::Acquire) & !CLOSED != 0 {
            crate::lock::relax();
        }
    }
}

wv_hal::wire_enum! {
    /// `ib_event_type` numbers carried in the async ring.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum AsyncEvent: u32 {
        CqErr = 0,
        QpFatal = 1,
        CommEst = 4,
        SqDrained = 5,
        DeviceFatal = 8,
        PortActive = 9,
        PortErr = 10,
        SrqErr = 14,
        SrqLimitReached = 15,
        QpLastWqeReached = 16,
        GidChange = 18,
    }
    /// The event of a number the ring carries.
    fn from_u32;
}

/// Whom an async event is for (the object its number names, or every open context) and what
/// it tells them.
enum Recipient {
    CqError,
    Qp(QpEvent),
    Srq(SrqEvent),
    Contexts(CaEventKind),
}

impl AsyncEvent {
    fn recipient(self) -> Recipient {
        use AsyncEvent::*;
        match self {
            CqErr => Recipient::CqError,
            QpFatal => Recipient::Qp(QpEvent::Fatal),
            CommEst => Recipient::Qp(QpEvent::CommEstablished),
            SqDrained => Recipient::Qp(QpEvent::SqDrained),
            QpLastWqeReached => Recipient::Qp(QpEvent::LastWqeReached),
            SrqErr => Recipient::Srq(SrqEvent::Error),
            SrqLimitReached => Recipient::Srq(SrqEvent::LimitReached),
            DeviceFatal => Recipient::Contexts(CaEventKind::LocalFatal),
            PortActive => Recipient::Contexts(CaEventKind::PortActive),
            PortErr => Recipient::Contexts(CaEventKind::PortDown),
            GidChange => Recipient::Contexts(CaEventKind::GidChange),
        }
    }
}

/// A bounded ring of 32-bit pairs written by the device and drained by the DPC (the async
/// ring carries `(type, info)`, the CQ-notify ring `(cq handle, 0)`).
struct EventRing {
    buf: Vec<(u32, u32)>,
    head: usize,
    len: usize,
}

impl EventRing {
    fn try_new(cap: usize) -> Result<Self, AllocError> {
        Ok(EventRing {
            buf: fallible::vec_of(cap, (0, 0))?,
            head: 0,
            len: 0,
        })
    }
    fn push(&mut self, e: (u32, u32)) -> bool {
        if self.len == self.buf.len() {
            return false;
        }
        let i = (self.head + self.len) % self.buf.len();
        self.buf[i] = e;
        self.len += 1;
        true
    }
    fn pop(&mut self) -> Option<(u32, u32)> {
        if self.len == 0 {
            return None;
        }
        let e = self.buf[self.head];
        self.head = (self.head + 1) % self.buf.len();
        self.len -= 1;
        Some(e)
    }
}

/// A user context (`open_ca`): its event sink and its id for the UVP registry.
pub(crate) struct Context {
    pub handle: u32,
    pub sink: wv_hal::KArc<dyn CaEventSink>,
    pub rundown: Rundown,
}

/// A protection domain.
#[derive(Debug)]
pub(crate) struct Pd {
    pub handle: u32,
}

/// An address handle.
#[derive(Debug)]
pub(crate) struct Ah {
    pub handle: u32,
    #[allow(
        dead_code,
        reason = "user mode embeds the AV in its WQEs; kept for diagnostics"
    )]
    pub av: wv_hal::AddressVector,
}

/// Generations of the tables the data path keeps references into: each is bumped (release)
/// after an object has left its table, so a side that cached a reference sees the change with
/// one acquire load per message instead of a table lookup.
#[derive(Debug, Default)]
pub(crate) struct Epochs {
    /// QPs destroyed (and the device removed): peers cached by connected requesters.
    pub qp: AtomicU32,
    /// Regions deregistered: the regions cached by queue sides.
    pub mr: AtomicU32,
}

/// A taken command slot, given back when dropped.
struct CommandSlot<'a>(&'a AtomicU32);

impl Drop for CommandSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// The device model (aligned so that the `Arc` counts do not share a line with its fields).
#[repr(align(64))]
pub(crate) struct Device {
    pub config: DeviceConfig,
    pub guid: u64,
    pub memory: ClientMemory,
    pub removed: AtomicBool,
    pub ports: RwLock<Vec<Port>>,
    pub contexts: Table<Context>,
    pub pds: Table<Pd>,
    pub mrs: Table<Mr>,
    pub mws: Table<Mw>,
    pub ahs: Table<Ah>,
    pub cqs: Table<Cq>,
    pub srqs: Table<Srq>,
    pub qps: Table<Qp>,
    /// The firmware executes one command at a time (the waits for their answers overlap).
    cmd_exec: Mutex<()>,
    /// Commands in flight: at most `config.command_slots`.
    cmd_in_flight: AtomicU32,
    /// Set by the response ISR.
    pub resp_ready: AtomicBool,
    /// Interrupt cause register (bit per vector).
    pub icr: crate::ring::Padded<AtomicU32>,
    async_ring: Mutex<EventRing>,
    cq_ring: Mutex<EventRing>,
    /// Async events lost to a full ring.
    pub async_overflows: AtomicU64,
    irq: RwLock<Option<Arc<dyn Bus>>>,
    /// The fabric this device joined (at most one, for good).
    pub fabric: spin::Once<Arc<Fabric>>,
    /// Lock-free copies of each port's state and LID for the data path (the `ports` table
    /// stays the authority; both change together under its write lock).
    pub port_active: Vec<AtomicBool>,
    pub port_lid: Vec<core::sync::atomic::AtomicU16>,
    /// Packets the QPs of this device put on a lossless link and that were destroyed since
    /// (a live QP counts its own in its send context, so no counter is shared on the data
    /// path).
    pub tx_delivered: crate::ring::Padded<AtomicU64>,
    /// Multicast attachments: (group, QPN).
    pub mcast: RwLock<Vec<(Gid, u32)>>,
    /// Read on every message by both ends of a connection, written only by destroys.
    pub epochs: crate::ring::Padded<Epochs>,
    /// DPC dispatch holds this; removal closes it.
    pub dispatch: Rundown,
    /// The connection manager's agent on this device.
    pub cm: crate::cm::Agent,
}

impl Device {
    /// A device with its tables sized by `config`, unless they cannot be allocated.
    pub(crate) fn try_new(config: DeviceConfig, memory: ClientMemory) -> Result<Self, AllocError> {
        let guid = u64::from_ne_bytes(eui64(config.mac));
        let lim = config.limits;
        let n = usize::from(config.ports.max(1));
        let mut ports = fallible::vec_with_capacity(n)?;
        let mut port_active = fallible::vec_with_capacity(n)?;
        let mut port_lid = fallible::vec_with_capacity(n)?;
        for _ in 0..n {
            let mut gids = fallible::vec_of(lim.gid_table_len.max(1) as usize, [0u8; 16])?;
            gids[0] = mac_gid(config.mac);
            let mut pkeys = fallible::vec_of(lim.max_pkeys.max(1) as usize, 0u16)?;
            pkeys[0] = 0xFFFF;
            // Within the capacities reserved above.
            ports.push(Port {
                state: PortState::Active,
                lid: 0,
                gids,
                pkeys,
            });
            port_active.push(AtomicBool::new(true));
            port_lid.push(core::sync::atomic::AtomicU16::new(0));
        }
        Ok(Device {
            guid,
            memory,
            removed: AtomicBool::new(false),
            ports: RwLock::new(ports),
            contexts: Table::new(),
            pds: Table::new(),
            mrs: Table::new(),
            mws: Table::new(),
            ahs: Table::new(),
            cqs: Table::new(),
            srqs: Table::new(),
            qps: Table::new(),
            cmd_exec: Mutex::new(()),
            cmd_in_flight: AtomicU32::new(0),
            resp_ready: AtomicBool::new(false),
            icr: crate::ring::Padded(AtomicU32::new(0)),
            async_ring: Mutex::new(EventRing::try_new(1024)?),
            cq_ring: Mutex::new(EventRing::try_new(lim.max_cq as usize + 1)?),
            async_overflows: AtomicU64::new(0),
            irq: RwLock::new(None),
            fabric: spin::Once::new(),
            port_active,
            port_lid,
            tx_delivered: crate::ring::Padded(AtomicU64::new(0)),
            mcast: RwLock::new(Vec::new()),
            epochs: crate::ring::Padded(Epochs::default()),
            dispatch: Rundown::new(),
            cm: crate::cm::Agent::new(),
            config,
        })
    }

    pub(crate) fn set_irq(&self, irq: Arc<dyn Bus>) {
        *self.irq.write() = Some(irq);
    }

    /// The platform's clock (0 without a platform).
    pub(crate) fn now_ns(&self) -> u64 {
        self.irq.read().as_ref().map_or(0, |b| b.now_ns())
    }

    /// Sets a timer on the platform (never fires without one).
    pub(crate) fn set_timer(&self, timer: &KArc<dyn Dpc>, due_ns: u64) {
        if let Some(b) = self.irq.read().as_ref() {
            b.set_timer(timer, due_ns);
        }
    }

    /// Cancels a timer.
    pub(crate) fn cancel_timer(&self, timer: &KArc<dyn Dpc>) {
        if let Some(b) = self.irq.read().as_ref() {
            b.cancel_timer(timer);
        }
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.config.limits
    }
    pub(crate) fn port_count(&self) -> u8 {
        self.config.ports.max(1)
    }
    pub(crate) fn link_layer(&self) -> LinkLayer {
        self.config.link_layer
    }
    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// Latches the cause of `v`. The line itself is raised by [`Device::deliver_interrupts`]
    /// once the device has let go of its internal locks (as hardware raises an MSI after its
    /// writes are done), so an ISR or an inline DPC never runs inside the engine's critical
    /// sections.
    fn raise(&self, v: Vector) {
        self.icr.fetch_or(1 << v as u32, Ordering::AcqRel);
    }

    /// Raises every vector whose cause is latched. Called at the end of each doorbell and
    /// command, with no device lock held.
    pub(crate) fn deliver_interrupts(&self) {
        let icr = self.icr.load(Ordering::Acquire);
        if icr == 0 {
            return;
        }
        let irq = self.irq.read().clone();
        if let Some(irq) = irq {
            for v in [Vector::Response, Vector::Async, Vector::Cq] {
                if icr & (1 << v as u32) != 0 {
                    irq.raise(v);
                }
            }
        }
    }

    /// Runs one command through a command slot: the device executes it, the firmware's
    /// latency elapses, then the response is written and the response interrupt raised (its
    /// ISR marks the response ready), and the slot is free again. Up to `command_slots`
    /// callers are between taking a slot and their response at once.
    pub(crate) fn command<R>(
        &self,
        f: impl FnOnce() -> Result<R, VerbsError>,
    ) -> Result<R, VerbsError> {
        if self.is_removed() {
            return Err(VerbsError::DeviceRemoved);
        }
        let bus = self.irq.read().clone();
        // Without a platform nothing can make the caller wait.
        let latency = bus.as_ref().map_or(0, |_| self.config.command_latency_ns);
        let slot = self.command_slot(bus.as_deref(), latency);
        let r = {
            let _exec = self.cmd_exec.lock();
            self.resp_ready.store(false, Ordering::Release);
            f()
        };
        if latency > 0
            && let Some(b) = &bus
        {
            b.delay(latency);
        }
        self.raise(Vector::Response);
        // The response is written: the slot may take the next command. It is given back before
        // the interrupts are delivered, because their DPCs may issue commands of their own.
        drop(slot);
        // The response interrupt and any event the command caused. With no platform attached
        // the driver would poll the ICR; the response slot is valid either way because the
        // device executes synchronously.
        self.deliver_interrupts();
        r
    }

    /// Takes a command slot, waiting while all of them are in use.
    fn command_slot(&self, bus: Option<&dyn Bus>, latency: u64) -> CommandSlot<'_> {
        let slots = self.config.command_slots.max(1);
        loop {
            let n = self.cmd_in_flight.load(Ordering::Relaxed);
            if n < slots {
                if self
                    .cmd_in_flight
                    .compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return CommandSlot(&self.cmd_in_flight);
                }
                continue;
            }
            match bus {
                Some(b) if latency > 0 => b.delay((latency / 10).max(1)),
                _ => crate::lock::relax(),
            }
        }
    }

    /// Writes an async event and raises vector 1.
    pub(crate) fn post_async(&self, ev: AsyncEvent, info: u32) {
        if self.is_removed() {
            return;
        }
        if !self.async_ring.lock().push((ev as u32, info)) {
            self.async_overflows.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.raise(Vector::Async);
    }

    pub(crate) fn post_qp_event(&self, qp: &Qp, ev: QpEvent) {
        let e = match ev {
            QpEvent::CommEstablished => AsyncEvent::CommEst,
            QpEvent::SqDrained => AsyncEvent::SqDrained,
            QpEvent::Fatal => AsyncEvent::QpFatal,
            QpEvent::LastWqeReached => AsyncEvent::QpLastWqeReached,
            QpEvent::PathMigrated => return,
        };
        self.post_async(e, qp.handle);
    }

    /// Writes the CQ's handle into the CQ-notify ring (once until the DPC takes it) and raises
    /// vector 2.
    pub(crate) fn cq_notify(&self, cq: &Cq) {
        if self.is_removed() {
            return;
        }
        if cq.queued.swap(true, Ordering::AcqRel) {
            // Already in the ring: the DPC will call the sink once for both.
            return;
        }
        // The ring has a slot per CQ, and a CQ is in it at most once.
        let _ = self.cq_ring.lock().push((cq.handle, 0));
        self.raise(Vector::Cq);
    }

    /// The DPC of `vector`, at DISPATCH_LEVEL: drains the vector's ring and calls the sinks.
    pub(crate) fn dpc(&self, vector: Vector) {
        if !self.dispatch.acquire() {
            return;
        }
        match vector {
            Vector::Response => {}
            Vector::Cq => loop {
                let Some((h, _)) = self.cq_ring.lock().pop() else {
                    break;
                };
                if let Some(cq) = self.cqs.get(h) {
                    cq.queued.store(false, Ordering::Release);
                    cq.rundown.run(|| cq.sink.on_completion());
                }
            },
            Vector::Async => loop {
                let Some((t, info)) = self.async_ring.lock().pop() else {
                    break;
                };
                if let Some(ev) = AsyncEvent::from_u32(t) {
                    self.dispatch_async(ev, info);
                }
            },
        }
        self.dispatch.release();
    }

    fn dispatch_async(&self, ev: AsyncEvent, info: u32) {
        // The object `info` names, if it is still there: its sink is called under its rundown.
        macro_rules! to_object {
            ($table:ident, |$obj:ident| $call:expr) => {
                if let Some($obj) = self.$table.get(info) {
                    $obj.rundown.run(|| $call);
                }
            };
        }
        match ev.recipient() {
            Recipient::CqError => to_object!(cqs, |cq| cq.sink.on_error()),
            Recipient::Qp(event) => to_object!(qps, |qp| qp.sink.on_event(event)),
            Recipient::Srq(event) => to_object!(srqs, |srq| srq.sink.on_event(event)),
            Recipient::Contexts(kind) => {
                let event = CaEvent {
                    kind,
                    port: info as u8,
                };
                self.contexts
                    .for_each(|ctx| ctx.rundown.run(|| ctx.sink.on_event(event)));
            }
        }
    }

    /// Port state change (the admin surface), raising PORT_ACTIVE / PORT_ERR.
    pub(crate) fn set_port_state(&self, port: u8, up: bool) -> Result<(), VerbsError> {
        if self.is_removed() {
            return Err(VerbsError::DeviceRemoved);
        }
        {
            let mut ports = self.ports.write();
            let p = ports
                .get_mut(usize::from(port).wrapping_sub(1))
                .ok_or(VerbsError::InvalidParameter)?;
            let new = if up {
                PortState::Active
            } else {
                PortState::Down
            };
            if p.state == new {
                return Ok(());
            }
            p.state = new;
            self.port_active[usize::from(port) - 1].store(up, Ordering::Release);
        }
        self.post_async(
            if up {
                AsyncEvent::PortActive
            } else {
                AsyncEvent::PortErr
            },
            u32::from(port),
        );
        self.deliver_interrupts();
        Ok(())
    }

    /// Adds a GID in the first free slot of `port`'s table; returns its index.
    pub(crate) fn add_gid(&self, port: u8, gid: Gid) -> Result<u32, VerbsError> {
        let idx = {
            let mut ports = self.ports.write();
            let p = ports
                .get_mut(usize::from(port).wrapping_sub(1))
                .ok_or(VerbsError::InvalidParameter)?;
            if let Some(i) = p.gids.iter().position(|g| *g == gid) {
                return Ok(i as u32);
            }
            let i = p
                .gids
                .iter()
                .position(|g| *g == [0u8; 16])
                .ok_or(VerbsError::InsufficientResources)?;
            p.gids[i] = gid;
            i as u32
        };
        self.post_async(AsyncEvent::GidChange, u32::from(port));
        self.deliver_interrupts();
        Ok(idx)
    }

    pub(crate) fn port_up(&self, port: u8) -> bool {
        self.port_active
            .get(usize::from(port.max(1)) - 1)
            .is_some_and(|a| a.load(Ordering::Acquire))
    }

    /// GID `index` of `port` as a source GID (index 0, the MAC-based GID, never changes); an
    /// empty or missing entry is `None`.
    pub(crate) fn sgid(&self, port: u8, index: u8) -> Option<Gid> {
        if index == 0 {
            return Some(mac_gid(self.config.mac));
        }
        let ports = self.ports.read();
        let g = *ports
            .get(usize::from(port).wrapping_sub(1))?
            .gids
            .get(usize::from(index))?;
        (g != [0u8; 16]).then_some(g)
    }

    /// The index of `gid` in `port`'s GID table.
    pub(crate) fn gid_index(&self, port: u8, gid: &Gid) -> Option<u8> {
        let ports = self.ports.read();
        let p = ports.get(usize::from(port).wrapping_sub(1))?;
        p.gids
            .iter()
            .position(|g| g == gid)
            .and_then(|i| u8::try_from(i).ok())
    }

    pub(crate) fn lid(&self, port: u8) -> u16 {
        self.port_lid
            .get(usize::from(port.max(1)) - 1)
            .map_or(0, |l| l.load(Ordering::Acquire))
    }

    /// The fabric, if the device joined one.
    pub(crate) fn fabric(&self) -> Option<&Arc<Fabric>> {
        self.fabric.get()
    }

    /// The port `gid` (with `grh`) or `lid` names on this device, if any.
    pub(crate) fn port_of(&self, grh: bool, gid: &Gid, lid: u16) -> Option<u8> {
        let ports = self.ports.read();
        let i = ports.iter().position(|p| {
            if grh {
                *gid != [0u8; 16] && p.gids.iter().any(|g| g == gid)
            } else {
                p.lid != 0 && p.lid == lid
            }
        })?;
        Some(i as u8 + 1)
    }

    /// Whether `gid` (with `grh`) or `lid` names one of this device's ports.
    pub(crate) fn owns(&self, grh: bool, gid: &Gid, lid: u16) -> bool {
        self.port_of(grh, gid, lid).is_some()
    }

    /// The device an address names: this one, or one on the fabric.
    pub(crate) fn route(self: &Arc<Self>, grh: bool, gid: &Gid, lid: u16) -> Option<Arc<Device>> {
        if self.owns(grh, gid, lid) {
            return Some(self.clone());
        }
        self.fabric()?.find(grh, gid, lid)
    }

    pub(crate) fn qp_by_qpn(&self, qpn: u32) -> Option<KArc<Qp>> {
        self.qps.get(qpn.checked_sub(1)?)
    }

    /// The QP epoch (see [`Epochs`]).
    pub(crate) fn qp_epoch(&self) -> u32 {
        self.epochs.qp.load(Ordering::Acquire)
    }

    /// The region epoch (see [`Epochs`]).
    pub(crate) fn mr_epoch(&self) -> u32 {
        self.epochs.mr.load(Ordering::Acquire)
    }

    /// A QP left the table (or the device went away): cached peers must look again.
    pub(crate) fn qp_gone(&self) {
        self.epochs.qp.fetch_add(1, Ordering::Release);
    }

    /// A region left the table: cached regions must be looked up again.
    pub(crate) fn mr_gone(&self) {
        self.epochs.mr.fetch_add(1, Ordering::Release);
    }

    /// The region a (non-window) key names.
    pub(crate) fn mr_by_key(&self, key: u32) -> Option<KArc<Mr>> {
        if is_mw_key(key) {
            return None;
        }
        self.mrs.get(key >> 8)
    }

    /// The window a window key names.
    pub(crate) fn mw_by_key(&self, key: u32) -> Option<KArc<Mw>> {
        if !is_mw_key(key) {
            return None;
        }
        self.mws.get(mw_handle(key))
    }

    /// Surprise removal: every later verb fails, and once this returns no callback runs.
    pub(crate) fn remove(&self) {
        self.removed.store(true, Ordering::Release);
        self.qp_gone();
        self.dispatch.close_and_wait();
    }
}
