//! The kernel half: [`SoftHca`] implements `wv_hal::Verbs` over the device model, and wires the
//! device's interrupt vectors to the platform (`Platform::interrupt` runs the ISR, which queues
//! the vector's DPC with `Platform::queue_dpc`; the DPC calls the sinks at DISPATCH_LEVEL).

use alloc::sync::{Arc, Weak};
use core::sync::atomic::{AtomicU64, Ordering};

use wv_abi::consts::{WV_IO_ATOMIC_HCA, WV_IO_PORT_ACTIVE_EVENT, WV_IO_SRQ_RESIZE};
use wv_hal::InterruptService;
use wv_hal::{
    AddressVector, CaAttributes, CaEventSink, CqEventSink, DeviceModelPlatform, Dpc, DpcInserted,
    Gid, KArc, MemoryKeys, MemoryRegion, PortAttributes, QpAttributes, QpCreate, QpCreated,
    QpEventSink, QpModify, QpState, SrqAttributes, SrqEventSink, SrqModifyMask, Umv, Verbs,
    VerbsError,
};

use crate::abi;
use crate::cq::{Cq, Side};
use crate::device::{
    Ah, Bus, Context, Device, DeviceConfig, LinkLayer, MULTICAST_LID_BASE, PORT_MTU, Pd, Rundown,
    Vector,
};
use crate::dma::ClientMemory;
use crate::engine::MAX_INLINE;
use crate::fallible::{self, no_memory};
use crate::mr::{Mr, check_access};
use crate::mw::{Mw, MwType};
use crate::qp::{MAX_SGE, Qp};
use crate::ring::Ring;
use crate::srq::Srq;
use crate::table::Table;
use crate::uvp::registry;

/// The ISR of one vector.
struct Isr<P: DeviceModelPlatform> {
    dev: Weak<Device>,
    vector: Vector,
    platform: Arc<P>,
    dpc: KArc<dyn Dpc>,
}

impl<P: DeviceModelPlatform> InterruptService for Isr<P> {
    fn service(&self) -> bool {
        let Some(dev) = self.dev.upgrade() else {
            return false;
        };
        let bit = 1u32 << self.vector as u32;
        // Read and acknowledge the cause; anything more waits for the DPC.
        if dev.icr.fetch_and(!bit, Ordering::AcqRel) & bit == 0 {
            return false;
        }
        if self.vector == Vector::Response {
            dev.resp_ready.store(true, Ordering::Release);
        } else {
            self.platform.queue_dpc(&self.dpc);
        }
        true
    }
}

struct VectorDpc {
    dev: Weak<Device>,
    vector: Vector,
    /// The DPC object's inserted state (`KDPC`), kept by the platform.
    inserted: DpcInserted,
}

impl Dpc for VectorDpc {
    fn run(&self) {
        if let Some(dev) = self.dev.upgrade() {
            dev.dpc(self.vector);
        }
    }
    fn inserted_flag(&self) -> Option<&DpcInserted> {
        Some(&self.inserted)
    }
}

struct Lines<P: DeviceModelPlatform> {
    platform: Arc<P>,
    isrs: [Isr<P>; 3],
}

impl<P: DeviceModelPlatform> Bus for Lines<P> {
    fn raise(&self, vector: Vector) {
        self.platform.interrupt(&self.isrs[vector as usize]);
    }
    fn now_ns(&self) -> u64 {
        self.platform.now_ns()
    }
    fn set_timer(&self, timer: &KArc<dyn Dpc>, due_ns: u64) {
        self.platform.set_timer(timer, due_ns);
    }
    fn delay(&self, ns: u64) {
        self.platform.delay(ns);
    }
    fn cancel_timer(&self, timer: &KArc<dyn Dpc>) {
        self.platform.cancel_timer(timer);
    }
}

/// A soft HCA: the device model plus its kernel-half verbs interface.
pub struct SoftHca<P: DeviceModelPlatform> {
    dev: Arc<Device>,
    _platform: Arc<P>,
}

impl<P: DeviceModelPlatform> core::fmt::Debug for SoftHca<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SoftHca")
            .field("name", &self.dev.config.name)
            .field("guid", &self.dev.guid)
            .finish()
    }
}

/// The objects a soft HCA holds, by kind ([`SoftHca::objects`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjectCounts {
    /// Opens (`open_ca`).
    pub contexts: u32,
    /// Protection domains.
    pub pds: u32,
    /// Memory regions.
    pub mrs: u32,
    /// Memory windows.
    pub mws: u32,
    /// Address handles.
    pub ahs: u32,
    /// Completion queues.
    pub cqs: u32,
    /// Shared receive queues.
    pub srqs: u32,
    /// Queue pairs.
    pub qps: u32,
}

/// A user-mode open of the device.
#[derive(Debug)]
pub struct SoftCa {
    handle: u32,
    /// The context token the UVP presents to the registry.
    pub token: u64,
}
/// A protection domain.
#[derive(Debug)]
pub struct SoftPd(KArc<Pd>);
/// A memory region.
#[derive(Debug)]
pub struct SoftMr(KArc<Mr>);
/// A memory window.
#[derive(Debug)]
pub struct SoftMw(KArc<Mw>);
/// An address handle.
#[derive(Debug)]
pub struct SoftAh(KArc<Ah>);
/// A completion queue.
pub struct SoftCq(pub(crate) KArc<Cq>);
/// A shared receive queue.
pub struct SoftSrq(pub(crate) KArc<Srq>);
/// A queue pair.
pub struct SoftQp(pub(crate) KArc<Qp>);
/// A multicast attachment.
#[derive(Debug)]
pub struct SoftMcast {
    /// The group.
    pub gid: Gid,
    /// The QP number attached.
    pub qpn: u32,
}

macro_rules! debug_handle {
    ($($t:ident),*) => {$(
        impl core::fmt::Debug for $t {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_tuple(stringify!($t)).field(&self.0.handle).finish()
            }
        }
    )*};
}
debug_handle!(SoftCq, SoftSrq, SoftQp);

impl SoftCq {
    /// The CQ handle (what the doorbell names).
    pub fn handle(&self) -> u32 {
        self.0.handle
    }
}
impl SoftQp {
    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.0.qpn
    }
    /// The QP handle.
    pub fn handle(&self) -> u32 {
        self.0.handle
    }
}
impl SoftSrq {
    /// The SRQ handle.
    pub fn handle(&self) -> u32 {
        self.0.handle
    }
}
impl SoftPd {
    /// The PD handle.
    pub fn handle(&self) -> u32 {
        self.0.handle
    }
}

static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

impl<P: DeviceModelPlatform> SoftHca<P> {
    /// A new soft HCA on `platform`, validating client memory with `memory`.
    ///
    /// # Panics
    /// When the tables `config` sizes cannot be allocated ([`SoftHca::try_new`] fails
    /// instead).
    pub fn new(platform: Arc<P>, config: DeviceConfig, memory: ClientMemory) -> Arc<Self> {
        Self::try_new(platform, config, memory).expect("soft HCA tables")
    }

    /// [`SoftHca::new`], failing with `InsufficientMemory` when what `config` sizes (the
    /// ports' GID and P_Key tables, the event rings) or the vectors' DPCs cannot be
    /// allocated. The device object, its bus and this handle are `std`'s `Arc`s: they are
    /// the platform's device object (the lower-device interface the core receives is one).
    ///
    /// # Errors
    /// `InsufficientMemory`.
    #[allow(
        clippy::disallowed_methods,
        reason = "the device object is the platform's allocation at device arrival"
    )]
    pub fn try_new(
        platform: Arc<P>,
        config: DeviceConfig,
        memory: ClientMemory,
    ) -> Result<Arc<Self>, VerbsError> {
        let mut config = config;
        config.limits.max_sge = config.limits.max_sge.min(MAX_SGE as u32);
        config.limits.max_inline = config.limits.max_inline.min(MAX_INLINE as u32);
        let dev = Arc::new(Device::try_new(config, memory).map_err(no_memory)?);
        let isr = |vector| -> Result<Isr<P>, VerbsError> {
            let dpc = KArc::try_new(VectorDpc {
                dev: Arc::downgrade(&dev),
                vector,
                inserted: DpcInserted::new(),
            })
            .map_err(no_memory)?;
            Ok(Isr {
                dev: Arc::downgrade(&dev),
                vector,
                platform: platform.clone(),
                dpc: dpc.into(),
            })
        };
        let lines = Lines {
            platform: platform.clone(),
            isrs: [
                isr(Vector::Response)?,
                isr(Vector::Async)?,
                isr(Vector::Cq)?,
            ],
        };
        dev.set_irq(Arc::new(lines));
        crate::cm::Agent::attach(&dev).map_err(no_memory)?;
        Ok(Arc::new(SoftHca {
            dev,
            _platform: platform,
        }))
    }

    pub(crate) fn device(&self) -> &Arc<Device> {
        &self.dev
    }

    /// The port MAC.
    pub fn mac(&self) -> [u8; 6] {
        self.dev.config.mac
    }

    /// The fabric's LID of `port` (assigned when the device joins a fabric; 0 before): it
    /// routes the UVP's UD work requests that name no GID. The port itself is RoCE and reports
    /// no LID (`query_port` answers 0).
    pub fn lid(&self, port: u8) -> u16 {
        self.dev.lid(port)
    }

    /// The MAC-based GID of the ports (GID index 0).
    pub fn gid(&self) -> Gid {
        crate::device::mac_gid(self.dev.config.mac)
    }

    /// Admin: brings `port` up or down, raising PORT_ACTIVE / PORT_ERR through the async ring.
    ///
    /// # Errors
    /// `InvalidParameter` for a bad port, `DeviceRemoved` after removal.
    pub fn set_port_state(&self, port: u8, up: bool) -> Result<(), VerbsError> {
        self.dev.set_port_state(port, up)
    }

    /// Admin: adds the IPv4-based GID `::ffff:a.b.c.d` to `port`'s table; returns its index.
    ///
    /// # Errors
    /// `InvalidParameter` for a bad port, `InsufficientResources` when the table is full.
    pub fn add_ipv4_gid(&self, port: u8, ip: [u8; 4]) -> Result<u32, VerbsError> {
        self.dev.add_gid(port, crate::device::ipv4_gid(ip))
    }

    /// The device's connection manager (what the filter gets with the verbs on arrival).
    /// Every call makes a new handle to the same agent.
    pub fn cm(&self) -> crate::cm::SoftCm {
        crate::cm::SoftCm::new(self.dev.clone())
    }

    /// Admin: surprise removal. Every later verb fails with `DeviceRemoved` (destroys still
    /// succeed), the data path stops, and once this returns no callback runs.
    pub fn surprise_remove(&self) {
        self.dev.remove();
    }

    /// Async events lost because the async ring was full.
    pub fn async_overflows(&self) -> u64 {
        self.dev.async_overflows.load(Ordering::Relaxed)
    }

    /// How many objects of each kind the device holds (handles in use, creates in progress
    /// included): after everything was destroyed, and after any failed create, all zero.
    pub fn objects(&self) -> ObjectCounts {
        let d = &self.dev;
        ObjectCounts {
            contexts: d.contexts.used(),
            pds: d.pds.used(),
            mrs: d.mrs.used(),
            mws: d.mws.used(),
            ahs: d.ahs.used(),
            cqs: d.cqs.used(),
            srqs: d.srqs.used(),
            qps: d.qps.used(),
        }
    }

    fn check_alive(&self) -> Result<(), VerbsError> {
        if self.dev.is_removed() {
            Err(VerbsError::DeviceRemoved)
        } else {
            Ok(())
        }
    }
}

impl<P: DeviceModelPlatform> Drop for SoftHca<P> {
    fn drop(&mut self) {
        // The QPs' contexts keep strong references to their peers (and so to other devices,
        // whose QPs may keep this one): a QP destroy drops them, but QPs still alive when the
        // device goes away would hold each other's devices for ever. They are caches: drop them.
        self.dev.qps.for_each(|qp| {
            qp.sq_ctx.lock().refs = crate::qp::SqRefs::default();
            qp.resp.lock().mrs.clear();
        });
    }
}

fn wait_rundown(r: &Rundown) {
    r.close_and_wait();
}

fn cq_resp(cq: &Cq, ring: &Ring) -> abi::CqResp {
    abi::CqResp {
        cq_handle: cq.handle,
        entries: ring.entries(),
        ring_addr: ring.addr(),
        ring_bytes: ring.bytes(),
    }
}

fn srq_resp(srq: &Srq, ring: &Ring) -> abi::SrqResp {
    abi::SrqResp {
        srq_handle: srq.handle,
        entries: ring.entries(),
        stride: ring.stride() as u32,
        reserved: 0,
        ring_addr: ring.addr(),
    }
}

fn qp_resp(qp: &Qp) -> abi::QpResp {
    abi::QpResp {
        qp_handle: qp.handle,
        qpn: qp.qpn,
        sq_entries: qp.sq.entries(),
        sq_stride: qp.sq.stride() as u32,
        rq_entries: if qp.srq.is_some() { 0 } else { qp.rq.entries() },
        rq_stride: qp.rq.stride() as u32,
        sq_addr: qp.sq.addr(),
        rq_addr: qp.rq.addr(),
        qp_type: qp.qp_type as u32,
        sq_max_sge: qp.sq_max_sge,
        rq_max_sge: qp.rq_max_sge,
        max_inline: qp.max_inline,
        flags: if qp.srq.is_some() {
            abi::QP_RESP_SRQ
        } else {
            0
        },
        reserved: 0,
    }
}

/// A create command: takes a handle of `table` (unless `limit` are in use), builds the object
/// for it with `build` (every allocation it needs, with no lock held), then runs the command,
/// which answers the vendor output (`answer`) and publishes the object without allocating. A
/// failure anywhere leaves the handle free and the object gone.
fn create<T>(
    dev: &Device,
    table: &Table<T>,
    limit: u32,
    build: impl FnOnce(u32) -> Result<KArc<T>, VerbsError>,
    answer: impl FnOnce(&T) -> Result<(), VerbsError>,
) -> Result<KArc<T>, VerbsError> {
    let handle = table.reserve(limit)?;
    let obj = build(handle.handle())?;
    dev.command(|| {
        answer(&obj)?;
        Ok(handle.publish(obj))
    })
}

impl<P: DeviceModelPlatform> Verbs for SoftHca<P> {
    type Ca = SoftCa;
    type Pd = SoftPd;
    type Mr = SoftMr;
    type Mw = SoftMw;
    type Ah = SoftAh;
    type Cq = SoftCq;
    type Srq = SoftSrq;
    type Qp = SoftQp;
    type Mcast = SoftMcast;
    type Cm = crate::cm::SoftCm;

    fn guid(&self) -> u64 {
        self.dev.guid
    }

    fn library_name(&self) -> &str {
        "softhcau"
    }

    fn open_ca(
        &self,
        umv: &mut Umv<'_>,
        events: wv_hal::KArc<dyn CaEventSink>,
    ) -> Result<SoftCa, VerbsError> {
        let dev = &self.dev;
        self.check_alive()?;
        if umv.output_len != 0 && umv.output_len < core::mem::size_of::<abi::OpenCaResp>() {
            return Err(VerbsError::InvalidParameter);
        }
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        registry::insert(dev.guid, token, Arc::downgrade(dev))?;
        let made = create(
            dev,
            &dev.contexts,
            u32::MAX,
            |handle| {
                KArc::try_new(Context {
                    handle,
                    sink: events,
                    rundown: Rundown::new(),
                })
                .map_err(no_memory)
            },
            |_| {
                let resp = abi::OpenCaResp {
                    magic: abi::SOFTHCA_ABI_MAGIC,
                    reserved: 0,
                    node_guid: dev.guid,
                    context: token,
                };
                abi::write_resp(umv, &resp)
            },
        );
        match made {
            Ok(ctx) => Ok(SoftCa {
                handle: ctx.handle,
                token,
            }),
            Err(e) => {
                registry::remove(dev.guid, token);
                Err(e)
            }
        }
    }

    fn close_ca(&self, ca: SoftCa) {
        registry::remove(self.dev.guid, ca.token);
        if let Some(ctx) = self.dev.contexts.remove(ca.handle) {
            wait_rundown(&ctx.rundown);
        }
    }

    fn query_ca(&self) -> Result<CaAttributes, VerbsError> {
        self.check_alive()?;
        let l = self.dev.limits();
        Ok(CaAttributes {
            fw_version: 1,
            node_guid: self.dev.guid,
            system_image_guid: self.dev.guid,
            vendor_id: 0x0015AD,
            vendor_part_id: 0x0820,
            hw_version: 1,
            // Port events are raised; SRQs resize (SRQ_MODIFY with a new MaxWr). CQ resize has
            // no capability bit in WinVerbs (nor in IB): CQ_RESIZE simply works.
            capability_flags: WV_IO_PORT_ACTIVE_EVENT | WV_IO_SRQ_RESIZE,
            // Compare-and-swap and fetch-and-add, atomic among this device's atomics.
            atomic_capability: WV_IO_ATOMIC_HCA,
            page_size_capability: 0x1000,
            max_mr_size: l.max_mr_size,
            max_qp: l.max_qp,
            max_qp_wr: l.max_qp_wr,
            max_sge: l.max_sge,
            max_cq: l.max_cq,
            max_cqe: l.max_cqe,
            max_mr: l.max_mr,
            max_pd: l.max_pd,
            max_qp_responder_resources: l.max_qp_rd_atom,
            max_responder_resources: l.max_qp_rd_atom * l.max_qp,
            max_qp_initiator_depth: l.max_qp_rd_atom,
            max_inline_send: l.max_inline,
            max_mw: l.max_mw,
            max_multicast: l.max_mcast_grp,
            max_qp_attach: l.max_mcast_qp_attach,
            max_multicast_qp: l.max_total_mcast_qp_attach,
            max_ah: l.max_ah,
            max_fmr: 0,
            max_map_per_fmr: 0,
            max_srq: l.max_srq,
            max_srq_wr: l.max_srq_wr,
            max_srq_sge: l.max_sge,
            max_pkeys: l.max_pkeys,
            local_ack_delay: 15,
            port_count: self.dev.port_count(),
        })
    }

    fn query_port(&self, port: u8) -> Result<PortAttributes, VerbsError> {
        self.check_alive()?;
        let ports = self.dev.ports.read();
        let p = ports
            .get(usize::from(port).wrapping_sub(1))
            .ok_or(VerbsError::InvalidParameter)?;
        let l = self.dev.limits();
        Ok(PortAttributes {
            capability_flags: 0,
            state: p.state,
            mtu: PORT_MTU,
            gid_table_len: p.gids.len() as u32,
            max_message_size: l.max_msg,
            bad_pkey_counter: 0,
            qkey_violation_counter: 0,
            pkey_table_len: p.pkeys.len() as u16,
            // A RoCE (Ethernet) port has no LID: ibv_query_port reports 0 there, and the
            // fabric's own LID (`SoftHca::lid`) only routes the UVP's UD work requests that
            // name no GID. An InfiniBand port reports the LID the fabric gave it (no subnet
            // manager runs: the fabric assigns the LIDs, so `sm_lid` stays 0).
            lid: match self.dev.link_layer() {
                LinkLayer::InfiniBand => self.dev.lid(port),
                LinkLayer::Ethernet => 0,
            },
            sm_lid: 0,
            lmc: 0,
            max_vls: 1,
            sm_sl: 0,
            subnet_timeout: 0,
            init_type_reply: 0,
            active_width: 1,
            active_speed: 1,
            physical_state: if p.state == wv_hal::PortState::Active {
                5
            } else {
                3
            },
            transport: self.dev.link_layer().transport(),
            ext_active_speed: 0,
            link_encoding: 0,
        })
    }

    fn query_gid(&self, port: u8, index: u32) -> Result<Gid, VerbsError> {
        self.check_alive()?;
        let ports = self.dev.ports.read();
        let p = ports
            .get(usize::from(port).wrapping_sub(1))
            .ok_or(VerbsError::InvalidParameter)?;
        p.gids
            .get(index as usize)
            .copied()
            .ok_or(VerbsError::InvalidParameter)
    }

    fn query_pkey(&self, port: u8, index: u16) -> Result<u16, VerbsError> {
        self.check_alive()?;
        let ports = self.dev.ports.read();
        let p = ports
            .get(usize::from(port).wrapping_sub(1))
            .ok_or(VerbsError::InvalidParameter)?;
        p.pkeys
            .get(usize::from(index))
            .map(|k| k.to_be())
            .ok_or(VerbsError::InvalidParameter)
    }

    fn allocate_pd(&self, _ca: &SoftCa, umv: &mut Umv<'_>) -> Result<SoftPd, VerbsError> {
        let dev = &self.dev;
        self.check_alive()?;
        let pd = create(
            dev,
            &dev.pds,
            dev.limits().max_pd,
            |handle| KArc::try_new(Pd { handle }).map_err(no_memory),
            |pd| {
                let resp = abi::PdResp {
                    pd_handle: pd.handle,
                    reserved: 0,
                };
                abi::write_resp(umv, &resp)
            },
        )?;
        Ok(SoftPd(pd))
    }

    fn deallocate_pd(&self, pd: SoftPd) {
        self.dev.pds.remove(pd.0.handle);
    }

    fn register_mr(
        &self,
        pd: &SoftPd,
        region: &MemoryRegion,
    ) -> Result<(SoftMr, MemoryKeys), VerbsError> {
        let dev = &self.dev;
        self.check_alive()?;
        check_access(region.access)?;
        if region.length > dev.limits().max_mr_size {
            return Err(VerbsError::InvalidParameter);
        }
        // The device writes the region for local write, remote write and remote atomics.
        let writable = region.access
            & (wv_abi::consts::WV_ACCESS_LOCAL_WRITE
                | wv_abi::consts::WV_ACCESS_REMOTE_WRITE
                | wv_abi::consts::WV_ACCESS_REMOTE_ATOMIC)
            != 0;
        let range = dev.memory.pin(region.address, region.length, writable)?;
        let mr = create(
            dev,
            &dev.mrs,
            dev.limits().max_mr,
            |handle| {
                KArc::try_new(Mr::new(handle, pd.0.handle, range, region.access)).map_err(no_memory)
            },
            |_| Ok(()),
        )?;
        let key = mr.st.read().key;
        Ok((
            SoftMr(mr),
            MemoryKeys {
                lkey: key,
                rkey: key.to_be(),
            },
        ))
    }

    fn deregister_mr(&self, mr: SoftMr) -> Result<(), (SoftMr, VerbsError)> {
        // A region stays while windows are bound to it (rxe: -EINVAL).
        if mr.0.windows.load(Ordering::Acquire) != 0 {
            return Err((mr, VerbsError::ResourceBusy));
        }
        self.dev.mrs.remove(mr.0.handle);
        // Queue sides that kept it look their regions up again.
        self.dev.mr_gone();
        Ok(())
    }

    fn create_mw(&self, pd: &SoftPd, umv: &mut Umv<'_>) -> Result<(SoftMw, u32), VerbsError> {
        let dev = &self.dev;
        self.check_alive()?;
        // The type comes in the vendor command; a caller without one gets type 1.
        let kind = match abi::read_cmd::<abi::MwCmd>(umv, |c| c.magic)? {
            Some(c) => MwType::from_u32(c.mw_type).ok_or(VerbsError::InvalidParameter)?,
            None => MwType::Type1,
        };
        let mw = create(
            dev,
            &dev.mws,
            dev.limits().max_mw,
            |handle| KArc::try_new(Mw::new(handle, pd.0.handle, kind)).map_err(no_memory),
            |mw| {
                let resp = abi::MwResp {
                    mw_handle: mw.handle,
                    mw_type: kind as u32,
                };
                abi::write_resp(umv, &resp)
            },
        )?;
        // Window keys have bit 31 set: they never name a region.
        let rkey = mw.rkey();
        Ok((SoftMw(mw), rkey.to_be()))
    }

    fn destroy_mw(&self, mw: SoftMw) {
        self.dev.mws.remove(mw.0.handle);
        mw.0.unbind();
    }

    fn create_ah(
        &self,
        _pd: &SoftPd,
        av: &AddressVector,
        umv: &mut Umv<'_>,
    ) -> Result<SoftAh, VerbsError> {
        let dev = &self.dev;
        self.check_alive()?;
        if av.port == 0 || av.port > dev.port_count() {
            return Err(VerbsError::InvalidParameter);
        }
        // A unicast destination: a GRH (always, on RoCE) with a unicast DGID, or on
        // InfiniBand a unicast LID alone.
        let unicast = if av.grh_valid {
            av.dgid[0] != 0xFF
        } else {
            !dev.link_layer().needs_grh() && (1..MULTICAST_LID_BASE).contains(&av.dlid)
        };
        if !unicast {
            return Err(VerbsError::InvalidParameter);
        }
        // The source GID must be one of the port's (a zero SGID means GID index 0).
        let sgid_index = if av.sgid == [0u8; 16] {
            0
        } else {
            dev.gid_index(av.port, &av.sgid)
                .ok_or(VerbsError::InvalidParameter)?
        };
        let ah = create(
            dev,
            &dev.ahs,
            dev.limits().max_ah,
            |handle| KArc::try_new(Ah { handle, av: *av }).map_err(no_memory),
            |ah| {
                let resp = abi::AhResp {
                    ah_handle: ah.handle,
                    sgid_index: u32::from(sgid_index),
                };
                abi::write_resp(umv, &resp)
            },
        )?;
        Ok(SoftAh(ah))
    }

    fn destroy_ah(&self, ah: SoftAh) {
        self.dev.ahs.remove(ah.0.handle);
    }

    fn create_cq(
        &self,
        _ca: &SoftCa,
        entries: u32,
        events: wv_hal::KArc<dyn CqEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<(SoftCq, u32), VerbsError> {
        let dev = &self.dev;
        self.check_alive()?;
        if entries == 0 || entries > dev.limits().max_cqe {
            return Err(VerbsError::InvalidSetting);
        }
        let cq = create(
            dev,
            &dev.cqs,
            dev.limits().max_cq,
            |handle| Cq::try_new(handle, entries, events).map_err(no_memory),
            |cq| abi::write_resp(umv, &cq_resp(cq, &cq.ring())),
        )?;
        let entries = cq.ring().entries();
        Ok((SoftCq(cq), entries))
    }

    fn resize_cq(&self, cq: &SoftCq, entries: u32, umv: &mut Umv<'_>) -> Result<u32, VerbsError> {
        let dev = &self.dev;
        self.check_alive()?;
        if entries == 0 || entries > dev.limits().max_cqe {
            return Err(VerbsError::InvalidSetting);
        }
        if umv.output_len != 0 && umv.output_len < core::mem::size_of::<abi::CqResp>() {
            return Err(VerbsError::InvalidParameter);
        }
        // Up or down; the completions not yet polled move to the new ring, whose address the
        // user-mode provider maps from the vendor output. The ring is allocated before the
        // command, never under a lock.
        let new = Cq::new_ring(entries).map_err(no_memory)?;
        dev.command(|| {
            let ring = cq.0.resize(new)?;
            abi::write_resp(umv, &cq_resp(&cq.0, &ring))?;
            Ok(ring.entries())
        })
    }

    fn destroy_cq(&self, cq: SoftCq) {
        self.dev.cqs.remove(cq.0.handle);
        wait_rundown(&cq.0.rundown);
    }

    fn create_srq(
        &self,
        pd: &SoftPd,
        attr: &SrqAttributes,
        events: wv_hal::KArc<dyn SrqEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<SoftSrq, VerbsError> {
        let dev = &self.dev;
        self.check_alive()?;
        let l = dev.limits();
        if attr.max_wr == 0
            || attr.max_wr > l.max_srq_wr
            || attr.max_sge > l.max_sge
            || attr.srq_limit > attr.max_wr
        {
            return Err(VerbsError::InvalidSetting);
        }
        let max_sge = attr.max_sge.max(1);
        let srq = create(
            dev,
            &dev.srqs,
            l.max_srq,
            |handle| {
                Srq::try_new(
                    handle,
                    pd.0.handle,
                    attr.max_wr,
                    max_sge,
                    attr.srq_limit,
                    events,
                )
            },
            |srq| abi::write_resp(umv, &srq_resp(srq, &srq.ring())),
        )?;
        Ok(SoftSrq(srq))
    }

    fn modify_srq(
        &self,
        srq: &SoftSrq,
        attr: &SrqAttributes,
        mask: SrqModifyMask,
        umv: &mut Umv<'_>,
    ) -> Result<(), VerbsError> {
        let dev = &self.dev;
        let s = &srq.0;
        self.check_alive()?;
        // WinVerbs' SRQ_MODIFY always passes MAX_WR with the limit, as OFW did: the current
        // size is no resize, another one resizes (up or down, the receives not yet used moving
        // to the new ring, whose address goes back in the vendor output).
        let entries = if mask.max_wr {
            if attr.max_wr == 0 || attr.max_wr > dev.limits().max_srq_wr {
                return Err(VerbsError::InvalidSetting);
            }
            attr.max_wr.next_power_of_two()
        } else {
            s.ring().entries()
        };
        if mask.limit && attr.srq_limit > entries {
            return Err(VerbsError::InvalidParameter);
        }
        if umv.output_len != 0 && umv.output_len < core::mem::size_of::<abi::SrqResp>() {
            return Err(VerbsError::InvalidParameter);
        }
        // Allocated before the command, never under the consumers' lock.
        let new = if mask.max_wr {
            Some(Srq::new_ring(attr.max_wr, s.max_sge).map_err(no_memory)?)
        } else {
            None
        };
        dev.command(|| {
            let ring = match new {
                Some(new) => s.resize(new)?,
                None => s.ring(),
            };
            if mask.limit {
                s.limit.store(attr.srq_limit, Ordering::Release);
            }
            abi::write_resp(umv, &srq_resp(s, &ring))
        })
    }

    fn query_srq(&self, srq: &SoftSrq, _umv: &mut Umv<'_>) -> Result<SrqAttributes, VerbsError> {
        self.check_alive()?;
        Ok(SrqAttributes {
            max_wr: srq.0.ring().entries(),
            max_sge: srq.0.max_sge,
            srq_limit: srq.0.limit.load(Ordering::Acquire),
        })
    }

    fn destroy_srq(&self, srq: SoftSrq) {
        self.dev.srqs.remove(srq.0.handle);
        wait_rundown(&srq.0.rundown);
    }

    fn create_qp(
        &self,
        pd: &SoftPd,
        c: &QpCreate<'_, SoftCq, SoftSrq>,
        events: wv_hal::KArc<dyn QpEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<(SoftQp, QpCreated), VerbsError> {
        let dev = &self.dev;
        self.check_alive()?;
        let _cmd = abi::read_cmd::<abi::QpCmd>(umv, |c| c.magic)?;
        let l = dev.limits();
        if c.sq_depth > l.max_qp_wr
            || c.rq_depth > l.max_qp_wr
            || c.sq_sge > l.max_sge
            || c.rq_sge > l.max_sge
            || c.sq_max_inline > l.max_inline
        {
            return Err(VerbsError::InvalidSetting);
        }
        if c.srq.is_some_and(|s| s.0.pd != pd.0.handle) {
            return Err(VerbsError::InvalidParameter);
        }
        let shape = QpCreate {
            qp_type: c.qp_type,
            sq_depth: c.sq_depth,
            rq_depth: c.rq_depth,
            sq_sge: c.sq_sge,
            rq_sge: c.rq_sge,
            sq_max_inline: c.sq_max_inline,
            sq_signaled: c.sq_signaled,
            send_cq: &c.send_cq.0,
            recv_cq: &c.recv_cq.0,
            srq: c.srq.map(|s| &s.0),
        };
        // Bound to its CQs before the command (binding may grow their lists): if the create
        // fails after that, it is unbound again.
        let mut bound = None;
        let made = create(
            dev,
            &dev.qps,
            l.max_qp,
            |handle| {
                let qp = Qp::try_new(handle, pd.0.handle, dev, &shape, events)?;
                bound = Some(qp.clone());
                // The QP's sides become producers of its CQs (the only one of a CQ posts
                // without the CQ's lock).
                qp.send_cq.bind(&qp, Side::Send)?;
                qp.recv_cq.bind(&qp, Side::Recv)?;
                // A device service's client rings its doorbell through the service.
                #[cfg(all(feature = "std", target_os = "linux"))]
                if let Some(shared) = crate::dma::process::caller_shared() {
                    shared
                        .add_doorbell(crate::uvp::Doorbell::new(dev, &qp))
                        .map_err(no_memory)?;
                }
                Ok(qp)
            },
            |qp| abi::write_resp(umv, &qp_resp(qp)),
        );
        let qp = match made {
            Ok(qp) => qp,
            Err(e) => {
                if let Some(qp) = bound {
                    Qp::shut_down(&qp, dev);
                }
                return Err(e);
            }
        };
        let created = QpCreated {
            qpn: qp.qpn,
            sq_depth: qp.sq.entries(),
            rq_depth: if qp.srq.is_some() { 0 } else { qp.rq.entries() },
            sq_sge: qp.sq_max_sge,
            rq_sge: qp.rq_max_sge,
            sq_max_inline: qp.max_inline,
        };
        Ok((SoftQp(qp), created))
    }

    fn query_qp(&self, qp: &SoftQp) -> Result<QpAttributes, VerbsError> {
        self.check_alive()?;
        let mut a = *qp.0.attrs.lock();
        a.state = qp.0.state();
        Ok(a)
    }

    fn modify_qp(&self, qp: &SoftQp, modify: &QpModify, out: &mut [u8]) -> Result<(), VerbsError> {
        let dev = &self.dev;
        dev.command(|| {
            Qp::modify(&qp.0, dev, modify)?;
            let st = abi::QpStateOut {
                state: qp.0.state() as u32,
                reserved: 0,
            };
            let bytes = zerocopy::IntoBytes::as_bytes(&st);
            if out.len() >= bytes.len() {
                out[..bytes.len()].copy_from_slice(bytes);
            }
            Ok(())
        })
    }

    fn destroy_qp(&self, qp: SoftQp) {
        self.dev.qps.remove(qp.0.handle);
        // Requesters that kept it as their peer look again.
        self.dev.qp_gone();
        // A destroyed QP discards its work silently (no flush completions) and its timer.
        qp.0.state_word()
            .store(QpState::Reset as u32, Ordering::Release);
        self.dev.cancel_timer(&qp.0.timer);
        wait_rundown(&qp.0.rundown);
        Qp::shut_down(&qp.0, &self.dev);
    }

    fn attach_mcast(&self, qp: &SoftQp, gid: &Gid, lid: u16) -> Result<SoftMcast, VerbsError> {
        let _ = lid;
        let dev = &self.dev;
        self.check_alive()?;
        if qp.0.qp_type != wv_hal::QpType::Ud || gid[0] != 0xFF {
            return Err(VerbsError::InvalidParameter);
        }
        loop {
            let attached = dev.command(|| {
                let mut groups = dev.mcast.write();
                // The limits query_ca advertises.
                let l = dev.limits();
                let in_group = groups.iter().filter(|(g, _)| g == gid).count() as u32;
                let is_new_group = in_group == 0;
                // Distinct groups (counted only when a new one would be added; no allocation).
                let group_count = || {
                    groups
                        .iter()
                        .enumerate()
                        .filter(|(i, (g, _))| !groups[..*i].iter().any(|(h, _)| h == g))
                        .count() as u32
                };
                if groups.len() as u32 >= l.max_total_mcast_qp_attach
                    || in_group >= l.max_mcast_qp_attach
                    || (is_new_group && group_count() >= l.max_mcast_grp)
                {
                    return Err(VerbsError::InsufficientResources);
                }
                if groups.len() == groups.capacity() {
                    return Ok(false);
                }
                groups.push((*gid, qp.0.qpn));
                Ok(true)
            })?;
            if attached {
                return Ok(SoftMcast {
                    gid: *gid,
                    qpn: qp.0.qpn,
                });
            }
            // The list is full: it grows outside the command and its lock, and the command
            // runs again.
            drop(fallible::with_room(|| dev.mcast.write()).map_err(no_memory)?);
        }
    }

    fn detach_mcast(&self, mcast: SoftMcast) {
        let mut m = self.dev.mcast.write();
        if let Some(i) = m.iter().position(|e| *e == (mcast.gid, mcast.qpn)) {
            m.remove(i);
        }
    }
}
