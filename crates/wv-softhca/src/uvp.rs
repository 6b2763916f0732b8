//! The user half (the "UVP"): the data path a client library calls — post send/receive, poll
//! and arm CQs — without any IOCTL. It writes WQEs into the rings the kernel half allocated,
//! rings doorbells, and reads CQEs.
//!
//! Two ways to reach the device:
//!
//! * In-process, user mode finds its device through [`registry`], keyed by node GUID and the
//!   context token DEVICE_OPEN returned in its vendor output: the moral equivalent of mapping
//!   the device's UAR page. Rings are then looked up by the handles and checked against the
//!   addresses the creation calls returned, and a doorbell runs the device's engine in the
//!   caller's thread.
//! * Through a device service (Linux, `wvd`), the rings live in memory the service shares
//!   with this process ([`crate::dma::SharedBlock`]): [`UvpContext::mapped`] takes the
//!   transport's [`MappedDevice`], the creation responses name the rings by device address,
//!   posting and polling touch only that memory, and a doorbell sets the QP's doorbell bits in
//!   its send ring's header and wakes the service ([`MappedDevice::ring`]), whose thread then
//!   runs the QP through its [`Doorbell`].

use alloc::sync::Arc;

use core::marker::PhantomData;
use core::sync::atomic::{AtomicU32, Ordering};

use crate::lock::{Mutex, MutexGuard};
use wv_hal::{KArc, QpState, QpType};

use crate::abi;
use crate::cq::Cq;
use crate::device::Device;
use crate::engine::{self, MAX_INLINE};
use crate::mr::Want;
use crate::mr_cache::MrCache;
use crate::qp::Qp;
use crate::ring::{Ring, Word};
use crate::srq::Srq;
use crate::wr::{
    MwBind, MwBindInfo, RecvWr, SendWr, Sge, WorkCompletion, WrOpcode, encode_recv, encode_send,
    inc_rkey, send_flags,
};
#[cfg(all(feature = "std", target_os = "linux"))]
use crate::{
    dma::SharedBlock,
    ring::{DOORBELL_RECV, DOORBELL_SEND, OWNER_CQ_OVERRUN, OWNER_DOORBELL},
};

/// Why a post failed (detected at once; the WR was not queued).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// The QP's state does not allow it (`EINVAL`).
    WrongState,
    /// More SGEs than the queue was created for (`EINVAL`).
    TooManySge,
    /// Opcode not valid for the QP type, or its parameters missing (a bind without
    /// [`SendWr::bind`]) (`EINVAL`).
    BadOpcode,
    /// An atomic whose local buffer is not 8 bytes (`EINVAL`).
    AtomicLength,
    /// Inline data larger than the QP's inline size (`EINVAL`).
    InlineTooLarge,
    /// Inline SGE outside registered memory (`EINVAL`).
    BadInlineSge,
    /// A receive on a QP attached to an SRQ (`EINVAL`).
    UsesSrq,
    /// Total length too large (`EINVAL`).
    TooLong,
    /// The queue is full (`ENOMEM`).
    QueueFull,
    /// The device is gone (`ENODEV`).
    DeviceRemoved,
}

impl PostError {
    /// The errno rdma-core returns for it.
    pub fn errno(self) -> i32 {
        match self {
            PostError::QueueFull => 12,
            PostError::DeviceRemoved => 19,
            _ => 22,
        }
    }
}

/// The registry of devices open in this process.
pub mod registry {
    use alloc::sync::{Arc, Weak};
    use alloc::vec::Vec;

    use crate::lock::Mutex;

    use crate::device::Device;

    type Entry = (u64, u64, Weak<Device>);
    static REG: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

    /// Registers an open (`open_ca`, the kernel half: the list grows with its lock released).
    ///
    /// # Errors
    /// `InsufficientMemory` when the list cannot grow.
    pub(crate) fn insert(
        guid: u64,
        token: u64,
        dev: Weak<Device>,
    ) -> Result<(), wv_hal::VerbsError> {
        REG.lock().retain(|e| e.2.strong_count() > 0);
        crate::fallible::with_room(|| REG.lock())
            .map_err(crate::fallible::no_memory)?
            .push((guid, token, dev));
        Ok(())
    }
    pub(crate) fn remove(guid: u64, token: u64) {
        REG.lock().retain(|e| !(e.0 == guid && e.1 == token));
    }
    pub(crate) fn find(guid: u64, token: u64) -> Option<Arc<Device>> {
        REG.lock()
            .iter()
            .find(|e| e.0 == guid && e.1 == token)
            .and_then(|e| e.2.upgrade())
    }
}

/// The device's memory as a client of a device service maps it (the service transport
/// implements it): the blocks the creation responses name, and the doorbell.
#[cfg(all(feature = "std", target_os = "linux"))]
pub trait MappedDevice: Send + Sync {
    /// The block of `len` bytes at device address `addr`, as mapped in this process; `None`
    /// when it is not inside what the service shared.
    fn block(&self, addr: u64, len: u64) -> Option<SharedBlock>;
    /// Wakes the service's doorbell thread, if it sleeps: it then runs every QP whose
    /// doorbell bits are set.
    fn ring(&self);
}

/// A QP's doorbell as a device service holds it: the QP's user-mode provider in the client
/// process sets the doorbell bits in the QP's send ring and wakes the service, whose doorbell
/// thread calls [`Doorbell::service`]. The kernel half hands it to the client's
/// [`crate::dma::SharedMemory`] when the QP is created.
#[cfg(all(feature = "std", target_os = "linux"))]
pub struct Doorbell {
    dev: alloc::sync::Weak<Device>,
    qp: wv_hal::KWeak<Qp>,
}

#[cfg(all(feature = "std", target_os = "linux"))]
impl core::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Doorbell").finish_non_exhaustive()
    }
}

#[cfg(all(feature = "std", target_os = "linux"))]
impl Doorbell {
    pub(crate) fn new(dev: &Arc<Device>, qp: &KArc<Qp>) -> Self {
        Doorbell {
            dev: Arc::downgrade(dev),
            qp: KArc::downgrade(qp),
        }
    }

    /// Runs what the client rang for (its send queue; the flush of receives posted to a QP
    /// in ERR), in the calling thread as the in-process doorbell runs it in the poster's.
    /// `Some(true)` when it had rung, `Some(false)` when not, `None` once the QP or its device
    /// is gone (drop the doorbell).
    pub fn service(&self) -> Option<bool> {
        let qp = self.qp.upgrade()?;
        let dev = self.dev.upgrade()?;
        let bits = qp.sq.owner_word(OWNER_DOORBELL).swap(0, Ordering::AcqRel);
        if bits == 0 {
            return Some(false);
        }
        if bits & DOORBELL_SEND != 0 {
            engine::run_sq(&dev, &qp);
        }
        if bits & DOORBELL_RECV != 0 && qp.state() == QpState::Error {
            engine::flush_rq(&dev, &qp);
        }
        dev.deliver_interrupts();
        Some(true)
    }

    /// Whether the QP still exists.
    pub fn is_live(&self) -> bool {
        self.qp.upgrade().is_some() && self.dev.upgrade().is_some()
    }
}

/// How a user-mode object reaches its device.
#[derive(Clone)]
enum Reach {
    /// The device is in this process.
    Local(Arc<Device>),
    /// Through a device service's shared memory.
    #[cfg(all(feature = "std", target_os = "linux"))]
    Mapped(Arc<dyn MappedDevice>),
}

/// The ring a mapped creation response names, as this process maps it.
#[cfg(all(feature = "std", target_os = "linux"))]
fn map_ring(
    dev: &dyn MappedDevice,
    addr: u64,
    entries: u32,
    stride: usize,
) -> Result<KArc<Ring>, wv_hal::VerbsError> {
    let bad = wv_hal::VerbsError::InvalidParameter;
    let len = (entries as u64)
        .checked_mul(stride as u64 * 8)
        .and_then(|b| b.checked_add(crate::dma::RING_HEADER_BYTES as u64))
        .ok_or(bad)?;
    let block = dev.block(addr, len).ok_or(bad)?;
    let ring = Ring::view(block, entries, stride).ok_or(bad)?;
    KArc::try_new(ring).map_err(|_| wv_hal::VerbsError::InsufficientMemory)
}

/// An opened device in user mode.
#[derive(Clone)]
pub struct UvpContext {
    reach: Reach,
    guid: u64,
}

impl core::fmt::Debug for UvpContext {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UvpContext")
            .field("guid", &self.guid)
            .finish()
    }
}

fn check(ok: bool) -> Result<(), wv_hal::VerbsError> {
    if ok {
        Ok(())
    } else {
        Err(wv_hal::VerbsError::InvalidParameter)
    }
}

#[allow(
    clippy::disallowed_methods,
    reason = "the user-mode half: its mappings are a process's allocations, not the driver's"
)]
impl UvpContext {
    /// Finds the device by node GUID and the context token from DEVICE_OPEN's vendor output.
    ///
    /// # Errors
    /// `InvalidParameter` when no such open exists.
    pub fn open(guid: u64, token: u64) -> Result<Self, wv_hal::VerbsError> {
        registry::find(guid, token)
            .map(|dev| UvpContext {
                reach: Reach::Local(dev),
                guid,
            })
            .ok_or(wv_hal::VerbsError::InvalidParameter)
    }

    /// Opens from DEVICE_OPEN's vendor output bytes.
    ///
    /// # Errors
    /// `InvalidParameter` for bytes that are not an [`abi::OpenCaResp`] of a live open.
    pub fn from_open_resp(bytes: &[u8]) -> Result<Self, wv_hal::VerbsError> {
        let r: abi::OpenCaResp = abi::parse(bytes).ok_or(wv_hal::VerbsError::InvalidParameter)?;
        check(r.magic == abi::SOFTHCA_ABI_MAGIC)?;
        Self::open(r.node_guid, r.context)
    }

    /// Opens from DEVICE_OPEN's vendor output bytes a device service answered: the device's
    /// rings are reached through `dev`, the memory the service shares with this process.
    ///
    /// # Errors
    /// `InvalidParameter` for bytes that are not an [`abi::OpenCaResp`].
    #[cfg(all(feature = "std", target_os = "linux"))]
    pub fn mapped(bytes: &[u8], dev: Arc<dyn MappedDevice>) -> Result<Self, wv_hal::VerbsError> {
        let r: abi::OpenCaResp = abi::parse(bytes).ok_or(wv_hal::VerbsError::InvalidParameter)?;
        check(r.magic == abi::SOFTHCA_ABI_MAGIC)?;
        Ok(UvpContext {
            reach: Reach::Mapped(dev),
            guid: r.node_guid,
        })
    }

    /// Maps a CQ from its creation response.
    ///
    /// # Errors
    /// `InvalidParameter` when the handle or ring address does not match the device's.
    pub fn map_cq(&self, r: &abi::CqResp) -> Result<UvpCq, wv_hal::VerbsError> {
        match &self.reach {
            Reach::Local(dev) => {
                let cq = dev
                    .cqs
                    .get(r.cq_handle)
                    .ok_or(wv_hal::VerbsError::InvalidParameter)?;
                let ring = cq.ring();
                check(ring.addr() == r.ring_addr && ring.entries() == r.entries)?;
                Ok(UvpCq {
                    src: CqSrc::Local {
                        dev: dev.clone(),
                        cq,
                    },
                    handle: r.cq_handle,
                    poll: Arc::new(Mutex::new(CqPoll::new(ring))),
                })
            }
            #[cfg(all(feature = "std", target_os = "linux"))]
            Reach::Mapped(dev) => {
                let ring = map_ring(&**dev, r.ring_addr, r.entries, crate::wr::CQE_WORDS)?;
                Ok(UvpCq {
                    src: CqSrc::Mapped(dev.clone()),
                    handle: r.cq_handle,
                    poll: Arc::new(Mutex::new(CqPoll::new(ring))),
                })
            }
        }
    }

    /// Maps a QP from its creation response.
    ///
    /// # Errors
    /// `InvalidParameter` when the handle or ring addresses do not match the device's.
    pub fn map_qp(&self, r: &abi::QpResp) -> Result<UvpQp, wv_hal::VerbsError> {
        let src = match &self.reach {
            Reach::Local(dev) => {
                let qp = dev
                    .qps
                    .get(r.qp_handle)
                    .ok_or(wv_hal::VerbsError::InvalidParameter)?;
                check(qp.sq.addr() == r.sq_addr && qp.rq.addr() == r.rq_addr && qp.qpn == r.qpn)?;
                QpSrc::Local {
                    dev: dev.clone(),
                    qp,
                }
            }
            #[cfg(all(feature = "std", target_os = "linux"))]
            Reach::Mapped(dev) => {
                let qp_type = u8::try_from(r.qp_type)
                    .ok()
                    .and_then(QpType::from_abi)
                    .ok_or(wv_hal::VerbsError::InvalidParameter)?;
                let has_srq = r.flags & abi::QP_RESP_SRQ != 0;
                // With an SRQ the receive ring is a placeholder of one slot.
                let rq_entries = if has_srq { 1 } else { r.rq_entries };
                let sq = map_ring(&**dev, r.sq_addr, r.sq_entries, r.sq_stride as usize)?;
                let rq = map_ring(&**dev, r.rq_addr, rq_entries, r.rq_stride as usize)?;
                QpSrc::Mapped(Arc::new(MappedQp {
                    dev: dev.clone(),
                    sq,
                    rq,
                    qpn: r.qpn,
                    qp_type,
                    sq_max_sge: r.sq_max_sge,
                    rq_max_sge: r.rq_max_sge,
                    max_inline: r.max_inline.min(MAX_INLINE as u32),
                    has_srq,
                }))
            }
        };
        Ok(UvpQp {
            src,
            sq_lock: Arc::new(Mutex::new(MrCache::default())),
            rq: Arc::new(RqPost {
                lock: Mutex::new(()),
                posted: AtomicU32::new(0),
                polled: AtomicU32::new(0),
            }),
        })
    }

    /// Maps an SRQ from its creation response.
    ///
    /// # Errors
    /// `InvalidParameter` when the handle or ring address does not match the device's.
    pub fn map_srq(&self, r: &abi::SrqResp) -> Result<UvpSrq, wv_hal::VerbsError> {
        match &self.reach {
            Reach::Local(dev) => {
                let srq = dev
                    .srqs
                    .get(r.srq_handle)
                    .ok_or(wv_hal::VerbsError::InvalidParameter)?;
                let ring = srq.ring();
                check(ring.addr() == r.ring_addr && ring.entries() == r.entries)?;
                Ok(UvpSrq {
                    src: SrqSrc::Local {
                        dev: dev.clone(),
                        srq: srq.clone(),
                    },
                    handle: r.srq_handle,
                    max_sge: srq.max_sge,
                    lock: Arc::new(Mutex::new(ring)),
                })
            }
            #[cfg(all(feature = "std", target_os = "linux"))]
            Reach::Mapped(dev) => {
                let ring = map_ring(&**dev, r.ring_addr, r.entries, r.stride as usize)?;
                Ok(UvpSrq {
                    src: SrqSrc::Mapped(dev.clone()),
                    handle: r.srq_handle,
                    max_sge: (r.stride as usize).saturating_sub(crate::wr::RQ_HDR_WORDS) as u32 / 2,
                    lock: Arc::new(Mutex::new(ring)),
                })
            }
        }
    }
}

/// A QP as a device service's client sees it: its rings in shared memory and what its
/// creation response said.
#[cfg(all(feature = "std", target_os = "linux"))]
struct MappedQp {
    dev: Arc<dyn MappedDevice>,
    sq: KArc<Ring>,
    rq: KArc<Ring>,
    qpn: u32,
    qp_type: QpType,
    sq_max_sge: u32,
    rq_max_sge: u32,
    max_inline: u32,
    has_srq: bool,
}

#[cfg(all(feature = "std", target_os = "linux"))]
impl MappedQp {
    /// The QP state the device keeps in the send ring's owner word.
    fn state(&self) -> QpState {
        crate::qp::state_from_u32(
            self.sq
                .owner_word(crate::ring::OWNER_QP_STATE)
                .load(Ordering::Acquire),
        )
    }
}

/// Where a user-mode QP is.
#[derive(Clone)]
enum QpSrc {
    Local {
        dev: Arc<Device>,
        qp: KArc<Qp>,
    },
    #[cfg(all(feature = "std", target_os = "linux"))]
    Mapped(Arc<MappedQp>),
}

/// A QP's data path.
#[derive(Clone)]
pub struct UvpQp {
    src: QpSrc,
    /// The post lock, and the regions inline sends copy from.
    sq_lock: Arc<Mutex<MrCache>>,
    rq: Arc<RqPost>,
}

/// A QP's receive post: its lock, and what the polls of its receive CQ learned about its ring.
///
/// perftest, like most receivers, keeps its receive queue full, re-posting one receive per
/// completion; with only the device's head to go by, every such post finds its copy of the
/// head saying "full" and reads the head the device wrote, on the sending side's processor:
/// one more cache line across processors on the ping-pong's critical path. Instead the poll
/// that takes a receive's CQE, on the receiver's own processor, counts it here, and a post
/// learns from the two counts how many of its receives can still be in the ring (posted and
/// not yet polled), as mlx5's provider frees a receive slot when it polls the slot's CQE.
/// Posts that a reset dropped, or CQEs an overrun lost, only make that bound larger than the
/// truth, so a post then reads the device's head as before.
#[derive(Debug)]
struct RqPost {
    lock: Mutex<()>,
    /// Receives posted since the QP was made (wrapping; written under `lock`).
    posted: AtomicU32,
    /// Receive CQEs of this QP that took a slot of its ring, polled since it was attached to
    /// its receive CQ (wrapping; written under that CQ's poll lock).
    polled: AtomicU32,
}

impl core::fmt::Debug for UvpQp {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UvpQp").field("qpn", &self.qpn()).finish()
    }
}

/// What a post checks a send request against, whichever way the QP is reached.
struct SendQueue {
    removed: bool,
    state: QpState,
    qp_type: QpType,
    max_inline: u32,
    max_sge: u32,
}

/// Checks `wr` against `q` and writes it `ahead` slots past the tail of `ring`. `gather`
/// copies an SGE's bytes for inline data sent from the application's buffers (generic, not a
/// `dyn` call: each way of reaching the QP gets its own copy, inlined into its post).
#[inline]
fn write_send<G>(
    q: &SendQueue,
    ring: &Ring,
    wr: &SendWr<'_>,
    ahead: u32,
    type1_bind: bool,
    gather: &mut G,
) -> Result<(), PostError>
where
    G: FnMut(&Sge, &mut [u8]) -> Result<(), PostError>,
{
    if q.removed {
        return Err(PostError::DeviceRemoved);
    }
    if matches!(q.state, QpState::Reset | QpState::Init | QpState::Rtr) {
        return Err(PostError::WrongState);
    }
    if !engine::opcode_valid(wr.opcode, q.qp_type) {
        return Err(PostError::BadOpcode);
    }
    if q.qp_type == QpType::Ud && wr.ud.is_none()
        || wr.opcode == WrOpcode::BindMw && wr.bind.is_none()
    {
        return Err(PostError::BadOpcode);
    }
    if wr.opcode.is_atomic() && wr.sg_list.iter().map(|s| u64::from(s.length)).sum::<u64>() != 8 {
        return Err(PostError::AtomicLength);
    }
    let inline_flag = wr.send_flags & send_flags::INLINE != 0 || wr.inline_data.is_some();
    // Filled only for an inline payload gathered from SGEs (nothing to clear otherwise).
    let mut buf: [u8; MAX_INLINE];
    let inline: Option<&[u8]> =
        if wr.opcode.is_read_or_atomic() || wr.opcode.is_local() || !inline_flag {
            None
        } else if let Some(d) = wr.inline_data {
            if d.len() > q.max_inline as usize {
                return Err(PostError::InlineTooLarge);
            }
            Some(d)
        } else {
            // Inline from SGEs: user mode copies its own memory into the WQE.
            buf = [0u8; MAX_INLINE];
            let mut n = 0usize;
            for s in wr.sg_list {
                let len = s.length as usize;
                if n + len > q.max_inline as usize {
                    return Err(PostError::InlineTooLarge);
                }
                if len == 0 {
                    continue;
                }
                gather(s, &mut buf[n..n + len])?;
                n += len;
            }
            Some(&buf[..n])
        };
    if inline.is_none() && wr.sg_list.len() > q.max_sge as usize {
        return Err(PostError::TooManySge);
    }
    let total: u64 = wr.sg_list.iter().map(|s| u64::from(s.length)).sum();
    if total >= 1 << 31 {
        return Err(PostError::TooLong);
    }
    let slot = ring
        .producer_slot_ahead(ahead)
        .ok_or(PostError::QueueFull)?;
    encode_send(slot, wr, inline, type1_bind);
    Ok(())
}

/// Writes `wrs` one after the other past the tail of `ring` (the post lock is held), each
/// checked against the send queue as `queue` finds it then, and publishes the ones written.
/// Returns how many were written, and the index and error of the first that failed.
#[inline]
fn write_sends<Q, G>(
    ring: &Ring,
    queue: Q,
    wrs: &[SendWr<'_>],
    type1_bind: bool,
    mut gather: G,
) -> (u32, Result<(), (usize, PostError)>)
where
    Q: Fn() -> SendQueue,
    G: FnMut(&Sge, &mut [u8]) -> Result<(), PostError>,
{
    let mut posted = 0u32;
    let mut result = Ok(());
    for (i, wr) in wrs.iter().enumerate() {
        match write_send(&queue(), ring, wr, posted, type1_bind, &mut gather) {
            Ok(()) => posted += 1,
            Err(e) => {
                result = Err((i, e));
                break;
            }
        }
    }
    if posted > 0 {
        ring.publish(posted);
    }
    (posted, result)
}

impl UvpQp {
    /// This QP with `recv_cq`, its receive CQ, reporting to its receive post the receive
    /// slots its completions free ([`RqPost`]), so that a post to a queue kept full does not
    /// read the head the device wrote. A QP that receives through an SRQ is left as it is.
    #[must_use]
    pub fn with_recv_cq(self, recv_cq: &UvpCq) -> Self {
        if !self.has_srq() {
            recv_cq.poll.lock().watch(self.qpn(), &self.rq);
        }
        self
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        match &self.src {
            QpSrc::Local { qp, .. } => qp.qpn,
            #[cfg(all(feature = "std", target_os = "linux"))]
            QpSrc::Mapped(m) => m.qpn,
        }
    }

    /// The QP's current state (the QP-state word shared with the device).
    pub fn state(&self) -> QpState {
        match &self.src {
            QpSrc::Local { qp, .. } => qp.state(),
            #[cfg(all(feature = "std", target_os = "linux"))]
            QpSrc::Mapped(m) => m.state(),
        }
    }

    /// The transport type.
    pub fn qp_type(&self) -> QpType {
        match &self.src {
            QpSrc::Local { qp, .. } => qp.qp_type,
            #[cfg(all(feature = "std", target_os = "linux"))]
            QpSrc::Mapped(m) => m.qp_type,
        }
    }

    fn sq(&self) -> &Ring {
        match &self.src {
            QpSrc::Local { qp, .. } => &qp.sq,
            #[cfg(all(feature = "std", target_os = "linux"))]
            QpSrc::Mapped(m) => &m.sq,
        }
    }

    fn rq(&self) -> &Ring {
        match &self.src {
            QpSrc::Local { qp, .. } => &qp.rq,
            #[cfg(all(feature = "std", target_os = "linux"))]
            QpSrc::Mapped(m) => &m.rq,
        }
    }

    fn has_srq(&self) -> bool {
        match &self.src {
            QpSrc::Local { qp, .. } => qp.srq.is_some(),
            #[cfg(all(feature = "std", target_os = "linux"))]
            QpSrc::Mapped(m) => m.has_srq,
        }
    }

    /// Send queue slots.
    pub fn sq_depth(&self) -> u32 {
        self.sq().entries()
    }

    /// Receive queue slots (0 with an SRQ).
    pub fn rq_depth(&self) -> u32 {
        if self.has_srq() {
            0
        } else {
            self.rq().entries()
        }
    }

    /// SGEs per send request.
    pub fn max_send_sge(&self) -> u32 {
        match &self.src {
            QpSrc::Local { qp, .. } => qp.sq_max_sge,
            #[cfg(all(feature = "std", target_os = "linux"))]
            QpSrc::Mapped(m) => m.sq_max_sge,
        }
    }

    /// SGEs per receive request.
    pub fn max_recv_sge(&self) -> u32 {
        match &self.src {
            QpSrc::Local { qp, .. } => qp.rq_max_sge,
            #[cfg(all(feature = "std", target_os = "linux"))]
            QpSrc::Mapped(m) => m.rq_max_sge,
        }
    }

    /// Largest inline payload.
    pub fn max_inline(&self) -> u32 {
        match &self.src {
            QpSrc::Local { qp, .. } => qp.max_inline,
            #[cfg(all(feature = "std", target_os = "linux"))]
            QpSrc::Mapped(m) => m.max_inline,
        }
    }

    /// Writes `wrs` under the post lock and publishes them, then, if any was written, rings
    /// the send doorbell: the device runs the queue (in this thread in process; the service's
    /// doorbell thread otherwise). One look at where the QP is serves the whole post.
    fn post_sends(&self, wrs: &[SendWr<'_>], type1_bind: bool) -> Result<(), (usize, PostError)> {
        match &self.src {
            QpSrc::Local { dev, qp } => {
                let (posted, result) = {
                    let mut mrs = self.sq_lock.lock();
                    let queue = || SendQueue {
                        removed: dev.is_removed(),
                        state: qp.state(),
                        qp_type: qp.qp_type,
                        max_inline: qp.max_inline,
                        max_sge: qp.sq_max_sge,
                    };
                    // Inline from SGEs: here that memory is read through the regions the SGEs
                    // name, so it must be registered. The cache is validated here, not per
                    // post: a post without an inline payload gathered from SGEs never uses it.
                    let gather = |s: &Sge, out: &mut [u8]| {
                        mrs.validate(dev);
                        let mr = mrs.get(dev, s.lkey).ok_or(PostError::BadInlineSge)?;
                        let off = mr
                            .check(s.lkey, qp.pd, s.addr, out.len() as u64, Want::LocalRead)
                            .map_err(|_| PostError::BadInlineSge)?;
                        mr.range.read(off, out).map_err(|_| PostError::BadInlineSge)
                    };
                    write_sends(&qp.sq, queue, wrs, type1_bind, gather)
                };
                if posted > 0 {
                    engine::run_sq(dev, qp);
                    dev.deliver_interrupts();
                }
                result
            }
            #[cfg(all(feature = "std", target_os = "linux"))]
            QpSrc::Mapped(m) => {
                let (posted, result) = {
                    let _post_lock = self.sq_lock.lock();
                    let queue = || SendQueue {
                        removed: false,
                        state: m.state(),
                        qp_type: m.qp_type,
                        max_inline: m.max_inline,
                        max_sge: m.sq_max_sge,
                    };
                    // The application's own memory, copied as a hardware provider copies it
                    // (no key check), but through the kernel: a wrong address is an error, not
                    // a fault.
                    let gather = |s: &Sge, out: &mut [u8]| {
                        crate::dma::process::read_own(s.addr, out)
                            .map_err(|_| PostError::BadInlineSge)
                    };
                    write_sends(&m.sq, queue, wrs, type1_bind, gather)
                };
                if posted > 0 {
                    m.sq.owner_word(OWNER_DOORBELL)
                        .fetch_or(DOORBELL_SEND, Ordering::AcqRel);
                    m.dev.ring();
                }
                result
            }
        }
    }

    /// Posts one send request.
    ///
    /// # Errors
    /// See [`PostError`].
    pub fn post_send(&self, wr: &SendWr<'_>) -> Result<(), PostError> {
        self.post_send_list(core::slice::from_ref(wr))
            .map_err(|(_, e)| e)
    }

    /// Posts a list of send requests with one doorbell; stops at the first that fails and
    /// returns its index (`bad_wr`); the ones before it are posted.
    ///
    /// # Errors
    /// `(index, error)` of the first request that failed.
    // Out of line, as a hardware provider's post is (reached through the verbs table), so
    // that profiles and `tools/bench-compare` find the whole post under this name.
    #[inline(never)]
    pub fn post_send_list(&self, wrs: &[SendWr<'_>]) -> Result<(), (usize, PostError)> {
        self.post_sends(wrs, false)
    }

    /// Binds the type 1 window whose rkey is `mw_rkey` (`ibv_bind_mw`): posts the bind on the
    /// send queue (its completion is `IBV_WC_BIND_MW` with `wr_id`, signalled as `send_flags`
    /// say) and returns the window's new rkey, the old one with the next key byte. Remote
    /// access with the new key works once the bind has completed; if it completes in error the
    /// window keeps its old key (as with rdma-core, the caller then undoes its copy).
    ///
    /// # Errors
    /// As [`UvpQp::post_send`] (`BadOpcode` on a UD QP).
    pub fn bind_mw(
        &self,
        wr_id: u64,
        send_flags: u32,
        mw_rkey: u32,
        info: &MwBindInfo,
    ) -> Result<u32, PostError> {
        let new_rkey = inc_rkey(mw_rkey);
        let mut wr = SendWr::new(wr_id, WrOpcode::BindMw);
        wr.send_flags = send_flags;
        wr.bind = Some(MwBind {
            mw_rkey,
            new_rkey,
            mr_lkey: info.mr_lkey,
            addr: info.addr,
            length: info.length,
            access: info.access,
        });
        self.post_sends(core::slice::from_ref(&wr), true)
            .map_err(|(_, e)| e)?;
        Ok(new_rkey)
    }

    /// Posts one receive request.
    ///
    /// # Errors
    /// See [`PostError`].
    pub fn post_recv(&self, wr: &RecvWr<'_>) -> Result<(), PostError> {
        self.post_recv_list(core::slice::from_ref(wr))
            .map_err(|(_, e)| e)
    }

    /// Posts a list of receive requests; stops at the first that fails.
    ///
    /// # Errors
    /// `(index, error)` of the first request that failed.
    pub fn post_recv_list(&self, wrs: &[RecvWr<'_>]) -> Result<(), (usize, PostError)> {
        // One look at where the QP lives: the receive post is on the ping-pong's critical
        // path, and every accessor's own `match` (and the state read through the send ring
        // each time) cost it about a third more instructions.
        match &self.src {
            QpSrc::Local { dev, qp } => {
                let (posted, result) = self.rq.post(&qp.rq, wrs, qp.rq_max_sge, || {
                    if dev.is_removed() {
                        Some(PostError::DeviceRemoved)
                    } else if qp.srq.is_some() {
                        Some(PostError::UsesSrq)
                    } else if qp.state() == QpState::Reset {
                        Some(PostError::WrongState)
                    } else {
                        None
                    }
                });
                if posted > 0 && qp.state() == QpState::Error {
                    // The receive doorbell of a QP in ERR: flushed at once. (A sender that got
                    // an RNR NAK retries when its RNR timer expires, as on hardware.)
                    engine::flush_rq(dev, qp);
                    dev.deliver_interrupts();
                }
                result
            }
            #[cfg(all(feature = "std", target_os = "linux"))]
            QpSrc::Mapped(m) => {
                let (posted, result) = self.rq.post(&m.rq, wrs, m.rq_max_sge, || {
                    if m.has_srq {
                        Some(PostError::UsesSrq)
                    } else if m.state() == QpState::Reset {
                        Some(PostError::WrongState)
                    } else {
                        None
                    }
                });
                if posted > 0 && m.state() == QpState::Error {
                    m.sq.owner_word(OWNER_DOORBELL)
                        .fetch_or(DOORBELL_RECV, Ordering::AcqRel);
                    m.dev.ring();
                }
                result
            }
        }
    }
}

/// The ring a command's vendor output names for a queue it gave a new ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewRing {
    /// The queue's handle.
    pub handle: u32,
    /// Address of the ring.
    pub addr: u64,
    /// Entries in the ring.
    pub entries: u32,
    /// Words per entry.
    pub stride_words: usize,
}

/// The vendor output of a command that gives a queue a new ring: CQ_RESIZE's [`abi::CqResp`],
/// SRQ_MODIFY's [`abi::SrqResp`].
pub trait RingResp {
    /// The ring it names.
    fn new_ring(&self) -> NewRing;
}

impl RingResp for abi::CqResp {
    fn new_ring(&self) -> NewRing {
        let (handle, addr, entries) = (self.cq_handle, self.ring_addr, self.entries);
        NewRing {
            handle,
            addr,
            entries,
            stride_words: crate::wr::CQE_WORDS,
        }
    }
}

impl RingResp for abi::SrqResp {
    fn new_ring(&self) -> NewRing {
        let (handle, addr, entries) = (self.srq_handle, self.ring_addr, self.entries);
        NewRing {
            handle,
            addr,
            entries,
            stride_words: self.stride as usize,
        }
    }
}

/// A queue of this device whose ring a command replaces: its current ring is the new one.
trait LocalRing {
    fn current_ring(&self) -> KArc<Ring>;
}

impl LocalRing for Cq {
    fn current_ring(&self) -> KArc<Ring> {
        self.ring()
    }
}

impl LocalRing for Srq {
    fn current_ring(&self) -> KArc<Ring> {
        self.ring()
    }
}

/// Where a resized queue's new ring comes from.
#[derive(Clone, Copy)]
enum RingSource<'a> {
    /// The queue of an in-process device.
    Local(&'a dyn LocalRing),
    /// A device service's memory, mapped from the address the command returns.
    #[cfg(all(feature = "std", target_os = "linux"))]
    Mapped(&'a dyn MappedDevice),
}

/// A ring resize in progress ([`UvpCq::begin_resize`], [`UvpSrq::begin_resize`]): nothing polls
/// or arms the CQ, or posts to the SRQ, from the command (CQ_RESIZE, SRQ_MODIFY) until the new
/// ring is mapped ([`RingResize::finish`]) or the command failed (drop it), as libmlx4 holds its
/// CQ lock across `ibv_resize_cq`. `R` is the command's vendor output.
pub struct RingResize<'a, R> {
    handle: u32,
    source: RingSource<'a>,
    ring: ResizeGuard<'a>,
    resp: PhantomData<fn(&R)>,
}

/// The lock a resize holds, over the ring it replaces.
enum ResizeGuard<'a> {
    Cq(MutexGuard<'a, CqPoll>),
    Srq(MutexGuard<'a, KArc<Ring>>),
}

impl ResizeGuard<'_> {
    fn ring(&mut self) -> &mut KArc<Ring> {
        match self {
            ResizeGuard::Cq(poll) => &mut poll.ring,
            ResizeGuard::Srq(ring) => ring,
        }
    }
}

impl<R> core::fmt::Debug for RingResize<'_, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RingResize").finish_non_exhaustive()
    }
}

impl<'a, R: RingResp> RingResize<'a, R> {
    fn new(handle: u32, source: RingSource<'a>, ring: ResizeGuard<'a>) -> Self {
        RingResize {
            handle,
            source,
            ring,
            resp: PhantomData,
        }
    }

    /// Maps the ring the command's vendor output names; returns its size.
    ///
    /// # Errors
    /// `InvalidParameter` when the output does not name the queue's ring.
    pub fn finish(mut self, resp: &R) -> Result<u32, wv_hal::VerbsError> {
        let new = resp.new_ring();
        check(new.handle == self.handle)?;
        match self.source {
            RingSource::Local(queue) => {
                let ring = queue.current_ring();
                check(ring.addr() == new.addr && ring.entries() == new.entries)?;
                *self.ring.ring() = ring;
            }
            #[cfg(all(feature = "std", target_os = "linux"))]
            RingSource::Mapped(dev) => {
                if self.ring.ring().addr() != new.addr {
                    *self.ring.ring() = map_ring(dev, new.addr, new.entries, new.stride_words)?;
                }
            }
        }
        Ok(new.entries)
    }
}

/// Writes receive requests to a receive ring (a QP's RQ or an SRQ), under its post lock, and
/// publishes them at once; stops at the first that `refused` turns away (asked before each) or
/// that does not fit. Returns how many were posted, and the first failure with its index.
fn post_recvs(
    ring: &Ring,
    wrs: &[RecvWr<'_>],
    max_sge: u32,
    refused: impl Fn() -> Option<PostError>,
) -> (u32, Result<(), (usize, PostError)>) {
    let mut posted = 0u32;
    let mut result = Ok(());
    for (i, wr) in wrs.iter().enumerate() {
        let r = if let Some(e) = refused() {
            Err(e)
        } else if wr.sg_list.len() > max_sge as usize {
            Err(PostError::TooManySge)
        } else if let Some(slot) = ring.producer_slot_ahead(posted) {
            encode_recv(slot, wr);
            Ok(())
        } else {
            Err(PostError::QueueFull)
        };
        if let Err(e) = r {
            result = Err((i, e));
            break;
        }
        posted += 1;
    }
    if posted > 0 {
        ring.publish(posted);
    }
    (posted, result)
}

/// Where a user-mode SRQ is.
#[derive(Clone)]
enum SrqSrc {
    Local {
        dev: Arc<Device>,
        srq: KArc<Srq>,
    },
    #[cfg(all(feature = "std", target_os = "linux"))]
    Mapped(Arc<dyn MappedDevice>),
}

/// An SRQ's data path.
#[derive(Clone)]
pub struct UvpSrq {
    src: SrqSrc,
    handle: u32,
    max_sge: u32,
    /// The post lock, and the ring posts go to.
    lock: Arc<Mutex<KArc<Ring>>>,
}

impl core::fmt::Debug for UvpSrq {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UvpSrq")
            .field("handle", &self.handle)
            .finish()
    }
}

impl UvpSrq {
    fn is_removed(&self) -> bool {
        match &self.src {
            SrqSrc::Local { dev, .. } => dev.is_removed(),
            #[cfg(all(feature = "std", target_os = "linux"))]
            SrqSrc::Mapped(_) => false,
        }
    }

    /// Posts receive requests to the SRQ; stops at the first that fails.
    ///
    /// # Errors
    /// `(index, error)` of the first request that failed.
    pub fn post_recv_list(&self, wrs: &[RecvWr<'_>]) -> Result<(), (usize, PostError)> {
        let ring = self.lock.lock();
        let removed = || self.is_removed().then_some(PostError::DeviceRemoved);
        post_recvs(&ring, wrs, self.max_sge, removed).1
    }

    /// Starts a resize (SRQ_MODIFY with a new size): holds the post lock until
    /// [`RingResize::finish`] maps the new ring or the guard drops.
    pub fn begin_resize(&self) -> RingResize<'_, abi::SrqResp> {
        let source = match &self.src {
            SrqSrc::Local { srq, .. } => RingSource::Local(&**srq),
            #[cfg(all(feature = "std", target_os = "linux"))]
            SrqSrc::Mapped(dev) => RingSource::Mapped(&**dev),
        };
        RingResize::new(self.handle, source, ResizeGuard::Srq(self.lock.lock()))
    }

    /// Receive slots.
    pub fn entries(&self) -> u32 {
        self.lock.lock().entries()
    }

    /// Posts one receive request.
    ///
    /// # Errors
    /// See [`PostError`].
    pub fn post_recv(&self, wr: &RecvWr<'_>) -> Result<(), PostError> {
        self.post_recv_list(core::slice::from_ref(wr))
            .map_err(|(_, e)| e)
    }
}

/// Where a user-mode CQ is.
#[derive(Clone)]
enum CqSrc {
    Local {
        dev: Arc<Device>,
        cq: KArc<Cq>,
    },
    #[cfg(all(feature = "std", target_os = "linux"))]
    Mapped(Arc<dyn MappedDevice>),
}

/// A CQ's data path.
#[derive(Clone)]
pub struct UvpCq {
    src: CqSrc,
    handle: u32,
    /// The poll lock, and the ring polled.
    poll: Arc<Mutex<CqPoll>>,
}

/// What a CQ's poll lock holds: the ring, and the receive posts of the QPs whose receive
/// completions it reports ([`UvpQp::with_recv_cq`]).
struct CqPoll {
    ring: KArc<Ring>,
    watches: [Option<RqWatch>; RQ_WATCHES],
}

/// A QP whose receive completions a CQ's polls report to its receive post.
struct RqWatch {
    qpn: u32,
    post: Arc<RqPost>,
    /// CQEs that were in the ring when the QP was attached, still to be polled: they may be a
    /// destroyed QP's of the same number (numbers are reused), so they tell this one nothing.
    older: u32,
}

/// QPs one CQ counts receive completions for; others post as before, reading the device's head.
const RQ_WATCHES: usize = 4;

impl CqPoll {
    fn new(ring: KArc<Ring>) -> Self {
        CqPoll {
            ring,
            watches: [const { None }; RQ_WATCHES],
        }
    }

    /// The CQE `slot` of QP `qpn` was polled: one of a receive that took a slot of the QP's
    /// own ring is counted for that QP's receive post.
    #[inline]
    fn polled(watches: &mut [Option<RqWatch>; RQ_WATCHES], qpn: u32, slot: &[Word]) {
        let took = crate::wr::cqe_took_rq_slot(slot);
        for w in watches.iter_mut().flatten() {
            if w.older > 0 {
                w.older -= 1;
            } else if took && w.qpn == qpn {
                w.count();
            }
        }
    }

    /// Reports `qpn`'s receive completions to `post` from now on, in place of a watch of the
    /// same number (a destroyed QP's) or of a QP no one holds any more; with every watch
    /// taken, the QP is not watched (its posts read the device's head).
    fn watch(&mut self, qpn: u32, post: &Arc<RqPost>) {
        for slot in &mut self.watches {
            if slot
                .as_ref()
                .is_some_and(|w| w.qpn == qpn || Arc::strong_count(&w.post) == 1)
            {
                *slot = None;
            }
        }
        let older = self.ring.used();
        if let Some(slot) = self.watches.iter_mut().find(|w| w.is_none()) {
            *slot = Some(RqWatch {
                qpn,
                post: post.clone(),
                older,
            });
        }
    }
}

impl RqWatch {
    /// Under the CQ's poll lock, the only writer.
    #[inline]
    fn count(&self) {
        let n = self.post.polled.load(Ordering::Relaxed);
        // Release: the device released the slot before it published the CQE, which this
        // poll acquired; the post that reuses the slot acquires this count.
        self.post.polled.store(n.wrapping_add(1), Ordering::Release);
    }
}

impl RqPost {
    /// [`post_recvs`] to `ring`, this QP's receive ring, under the post lock: first tells the
    /// ring how many of the QP's receives can still be in it (posted, and not yet polled),
    /// then counts what was posted.
    #[inline]
    fn post(
        &self,
        ring: &Ring,
        wrs: &[RecvWr<'_>],
        max_sge: u32,
        refused: impl Fn() -> Option<PostError>,
    ) -> (u32, Result<(), (usize, PostError)>) {
        let _g = self.lock.lock();
        let posted = self.posted.load(Ordering::Relaxed);
        let polled = self.polled.load(Ordering::Acquire);
        ring.producer_learn_outstanding(posted.wrapping_sub(polled));
        let r = post_recvs(ring, wrs, max_sge, refused);
        self.posted
            .store(posted.wrapping_add(r.0), Ordering::Relaxed);
        r
    }
}

impl core::fmt::Debug for UvpCq {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UvpCq")
            .field("handle", &self.handle)
            .finish()
    }
}

impl UvpCq {
    /// Takes up to `out.len()` completions; returns how many.
    pub fn poll(&self, out: &mut [WorkCompletion]) -> usize {
        let n = {
            let mut poll = self.poll.lock();
            let CqPoll { ring, watches } = &mut *poll;
            ring.consume_each(out.len(), |i, slot| {
                let wc = WorkCompletion::decode(slot);
                CqPoll::polled(watches, wc.qp_num, slot);
                out[i] = wc;
            })
        };
        #[cfg(all(feature = "std", target_os = "linux"))]
        if n == 0 && matches!(self.src, CqSrc::Mapped(_)) {
            // Through a device service the device is a thread of this machine (the service's
            // doorbell thread): an application that polls in a tight loop, as perftest and the
            // pingpong examples do, would keep the processor that thread needs, and each
            // completion would wait for the scheduler's time slice (milliseconds). A poll that
            // finds nothing gives the processor away; a hardware HCA needs none.
            extern crate std;
            std::thread::yield_now();
        }
        n
    }

    /// Starts a resize (CQ_RESIZE): holds the poll lock until [`RingResize::finish`] maps the
    /// new ring or the guard drops.
    pub fn begin_resize(&self) -> RingResize<'_, abi::CqResp> {
        let source = match &self.src {
            CqSrc::Local { cq, .. } => RingSource::Local(&**cq),
            #[cfg(all(feature = "std", target_os = "linux"))]
            CqSrc::Mapped(dev) => RingSource::Mapped(&**dev),
        };
        RingResize::new(self.handle, source, ResizeGuard::Cq(self.poll.lock()))
    }

    /// Arms the CQ for one notification (`ibv_req_notify_cq`): the next completion, or with
    /// `solicited_only` the next solicited one (a receive with the SE bit, or any error).
    /// Returns `true` when completions are already waiting (poll again to avoid missing one).
    pub fn arm(&self, solicited_only: bool) -> bool {
        match &self.src {
            CqSrc::Local { dev, cq } => {
                if dev.is_removed() {
                    return false;
                }
                let poll = self.poll.lock();
                cq.arm(solicited_only, &poll.ring)
            }
            #[cfg(all(feature = "std", target_os = "linux"))]
            CqSrc::Mapped(_) => self.poll.lock().ring.arm(solicited_only),
        }
    }

    /// CQE slots.
    pub fn entries(&self) -> u32 {
        self.poll.lock().ring.entries()
    }

    /// Whether the CQ overran (its error is sticky).
    pub fn overrun(&self) -> bool {
        match &self.src {
            CqSrc::Local { cq, .. } => cq.overrun.load(Ordering::Acquire),
            #[cfg(all(feature = "std", target_os = "linux"))]
            CqSrc::Mapped(_) => {
                self.poll
                    .lock()
                    .ring
                    .owner_word(OWNER_CQ_OVERRUN)
                    .load(Ordering::Acquire)
                    != 0
            }
        }
    }
}
