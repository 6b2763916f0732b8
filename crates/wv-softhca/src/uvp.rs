//! The user half (the "UVP"): the data path a client library calls — post send/receive, poll
//! and arm CQs — without any IOCTL. It writes WQEs into the rings the kernel half allocated,
//! rings doorbells, and reads CQEs.
//!
//! In-process, user mode finds its device through [`registry`], keyed by node GUID and the
//! context token DEVICE_OPEN returned in its vendor output: the moral equivalent of mapping the
//! device's UAR page. Rings are then looked up by the handles and checked against the addresses
//! the creation calls returned.

use alloc::sync::Arc;

use core::sync::atomic::Ordering;

use crate::lock::{Mutex, MutexGuard};
use wv_hal::{KArc, QpState, QpType};

use crate::abi;
use crate::cq::Cq;
use crate::device::Device;
use crate::engine::{self, MAX_INLINE};
use crate::mr::Want;
use crate::mr_cache::MrCache;
use crate::qp::Qp;
use crate::ring::Ring;
use crate::srq::Srq;
use crate::wr::{
    MwBind, MwBindInfo, RecvWr, SendWr, WorkCompletion, WrOpcode, encode_recv, encode_send,
    inc_rkey, send_flags,
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

/// An opened device in user mode.
#[derive(Clone)]
pub struct UvpContext {
    dev: Arc<Device>,
}

impl core::fmt::Debug for UvpContext {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UvpContext")
            .field("guid", &self.dev.guid)
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
            .map(|dev| UvpContext { dev })
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

    /// Maps a CQ from its creation response.
    ///
    /// # Errors
    /// `InvalidParameter` when the handle or ring address does not match the device's.
    pub fn map_cq(&self, r: &abi::CqResp) -> Result<UvpCq, wv_hal::VerbsError> {
        let cq = self
            .dev
            .cqs
            .get(r.cq_handle)
            .ok_or(wv_hal::VerbsError::InvalidParameter)?;
        let ring = cq.ring();
        check(ring.addr() == r.ring_addr && ring.entries() == r.entries)?;
        Ok(UvpCq {
            dev: self.dev.clone(),
            cq,
            poll: Arc::new(Mutex::new(ring)),
        })
    }

    /// Maps a QP from its creation response.
    ///
    /// # Errors
    /// `InvalidParameter` when the handle or ring addresses do not match the device's.
    pub fn map_qp(&self, r: &abi::QpResp) -> Result<UvpQp, wv_hal::VerbsError> {
        let qp = self
            .dev
            .qps
            .get(r.qp_handle)
            .ok_or(wv_hal::VerbsError::InvalidParameter)?;
        check(qp.sq.addr() == r.sq_addr && qp.rq.addr() == r.rq_addr && qp.qpn == r.qpn)?;
        Ok(UvpQp {
            dev: self.dev.clone(),
            qp,
            sq_lock: Arc::new(Mutex::new(MrCache::default())),
            rq_lock: Arc::new(Mutex::new(())),
        })
    }

    /// Maps an SRQ from its creation response.
    ///
    /// # Errors
    /// `InvalidParameter` when the handle or ring address does not match the device's.
    pub fn map_srq(&self, r: &abi::SrqResp) -> Result<UvpSrq, wv_hal::VerbsError> {
        let srq = self
            .dev
            .srqs
            .get(r.srq_handle)
            .ok_or(wv_hal::VerbsError::InvalidParameter)?;
        let ring = srq.ring();
        check(ring.addr() == r.ring_addr && ring.entries() == r.entries)?;
        Ok(UvpSrq {
            dev: self.dev.clone(),
            srq,
            lock: Arc::new(Mutex::new(ring)),
        })
    }
}

/// A QP's data path.
#[derive(Clone)]
pub struct UvpQp {
    dev: Arc<Device>,
    qp: KArc<Qp>,
    /// The post lock, and the regions inline sends copy from.
    sq_lock: Arc<Mutex<MrCache>>,
    rq_lock: Arc<Mutex<()>>,
}

impl core::fmt::Debug for UvpQp {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UvpQp").field("qpn", &self.qp.qpn).finish()
    }
}

impl UvpQp {
    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qp.qpn
    }

    /// The QP's current state (the QP-state bytes shared with the device).
    pub fn state(&self) -> QpState {
        self.qp.state()
    }

    /// The transport type.
    pub fn qp_type(&self) -> QpType {
        self.qp.qp_type
    }

    /// Send queue slots.
    pub fn sq_depth(&self) -> u32 {
        self.qp.sq.entries()
    }

    /// Receive queue slots (0 with an SRQ).
    pub fn rq_depth(&self) -> u32 {
        if self.qp.srq.is_some() {
            0
        } else {
            self.qp.rq.entries()
        }
    }

    /// SGEs per send request.
    pub fn max_send_sge(&self) -> u32 {
        self.qp.sq_max_sge
    }

    /// SGEs per receive request.
    pub fn max_recv_sge(&self) -> u32 {
        self.qp.rq_max_sge
    }

    /// Largest inline payload.
    pub fn max_inline(&self) -> u32 {
        self.qp.max_inline
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
    pub fn post_send_list(&self, wrs: &[SendWr<'_>]) -> Result<(), (usize, PostError)> {
        let qp = &self.qp;
        let mut posted = 0u32;
        let mut result = Ok(());
        {
            let mut mrs = self.sq_lock.lock();
            mrs.validate(&self.dev);
            for (i, wr) in wrs.iter().enumerate() {
                match self.write_send(&mrs, wr, posted, false) {
                    Ok(()) => posted += 1,
                    Err(e) => {
                        result = Err((i, e));
                        break;
                    }
                }
            }
            if posted > 0 {
                qp.sq.publish(posted);
            }
        }
        if posted > 0 {
            // The doorbell: the device runs the queue in this thread.
            engine::run_sq(&self.dev, qp);
            self.dev.deliver_interrupts();
        }
        result
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
        {
            let mut mrs = self.sq_lock.lock();
            mrs.validate(&self.dev);
            self.write_send(&mrs, &wr, 0, true)?;
            self.qp.sq.publish(1);
        }
        engine::run_sq(&self.dev, &self.qp);
        self.dev.deliver_interrupts();
        Ok(new_rkey)
    }

    fn write_send(
        &self,
        mrs: &MrCache,
        wr: &SendWr<'_>,
        ahead: u32,
        type1_bind: bool,
    ) -> Result<(), PostError> {
        let qp = &self.qp;
        if self.dev.is_removed() {
            return Err(PostError::DeviceRemoved);
        }
        if matches!(qp.state(), QpState::Reset | QpState::Init | QpState::Rtr) {
            return Err(PostError::WrongState);
        }
        if !engine::opcode_valid(wr.opcode, qp.qp_type) {
            return Err(PostError::BadOpcode);
        }
        if qp.qp_type == QpType::Ud && wr.ud.is_none()
            || wr.opcode == WrOpcode::BindMw && wr.bind.is_none()
        {
            return Err(PostError::BadOpcode);
        }
        if wr.opcode.is_atomic() && wr.sg_list.iter().map(|s| u64::from(s.length)).sum::<u64>() != 8
        {
            return Err(PostError::AtomicLength);
        }
        let inline_flag = wr.send_flags & send_flags::INLINE != 0 || wr.inline_data.is_some();
        // Filled only for an inline payload gathered from SGEs (nothing to clear otherwise).
        let mut buf: [u8; MAX_INLINE];
        let inline: Option<&[u8]> =
            if wr.opcode.is_read_or_atomic() || wr.opcode.is_local() || !inline_flag {
                None
            } else if let Some(d) = wr.inline_data {
                if d.len() > qp.max_inline as usize {
                    return Err(PostError::InlineTooLarge);
                }
                Some(d)
            } else {
                // Inline from SGEs: user mode copies its own memory into the WQE. Here that memory
                // is read through the regions the SGEs name, so it must be registered.
                buf = [0u8; MAX_INLINE];
                let mut n = 0usize;
                for s in wr.sg_list {
                    let len = s.length as usize;
                    if n + len > qp.max_inline as usize {
                        return Err(PostError::InlineTooLarge);
                    }
                    if len == 0 {
                        continue;
                    }
                    let mr = mrs.get(&self.dev, s.lkey).ok_or(PostError::BadInlineSge)?;
                    let off = mr
                        .check(s.lkey, qp.pd, s.addr, len as u64, Want::LocalRead)
                        .map_err(|_| PostError::BadInlineSge)?;
                    mr.range
                        .read(off, &mut buf[n..n + len])
                        .map_err(|_| PostError::BadInlineSge)?;
                    n += len;
                }
                Some(&buf[..n])
            };
        if inline.is_none() && wr.sg_list.len() > qp.sq_max_sge as usize {
            return Err(PostError::TooManySge);
        }
        let total: u64 = wr.sg_list.iter().map(|s| u64::from(s.length)).sum();
        if total >= 1 << 31 {
            return Err(PostError::TooLong);
        }
        let slot = qp
            .sq
            .producer_slot_ahead(ahead)
            .ok_or(PostError::QueueFull)?;
        encode_send(slot, wr, inline, type1_bind);
        Ok(())
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
        let qp = &self.qp;
        let mut posted = 0u32;
        let mut result = Ok(());
        {
            let _g = self.rq_lock.lock();
            for (i, wr) in wrs.iter().enumerate() {
                let r = if self.dev.is_removed() {
                    Err(PostError::DeviceRemoved)
                } else if qp.srq.is_some() {
                    Err(PostError::UsesSrq)
                } else if qp.state() == QpState::Reset {
                    Err(PostError::WrongState)
                } else if wr.sg_list.len() > qp.rq_max_sge as usize {
                    Err(PostError::TooManySge)
                } else if let Some(slot) = qp.rq.producer_slot_ahead(posted) {
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
                qp.rq.publish(posted);
            }
        }
        if posted > 0 && qp.state() == QpState::Error {
            // The receive doorbell of a QP in ERR: flushed at once. (A sender that got an RNR
            // NAK retries when its RNR timer expires, as on hardware.)
            engine::flush_rq(&self.dev, qp);
            self.dev.deliver_interrupts();
        }
        result
    }
}

/// An SRQ's data path.
#[derive(Clone)]
pub struct UvpSrq {
    dev: Arc<Device>,
    srq: KArc<Srq>,
    /// The post lock, and the ring posts go to.
    lock: Arc<Mutex<KArc<Ring>>>,
}

/// An SRQ resize in progress ([`UvpSrq::begin_resize`]): no receive is posted from the SRQ_MODIFY
/// command until the new ring is mapped ([`SrqResize::finish`]) or the command failed (drop it).
pub struct SrqResize<'a> {
    srq: &'a UvpSrq,
    ring: MutexGuard<'a, KArc<Ring>>,
}

impl core::fmt::Debug for SrqResize<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SrqResize").finish_non_exhaustive()
    }
}

impl SrqResize<'_> {
    /// Maps the ring the command's vendor output names; returns its size.
    ///
    /// # Errors
    /// `InvalidParameter` when the output does not name the SRQ's ring.
    pub fn finish(mut self, r: &abi::SrqResp) -> Result<u32, wv_hal::VerbsError> {
        let ring = self.srq.srq.ring();
        check(
            r.srq_handle == self.srq.srq.handle
                && ring.addr() == r.ring_addr
                && ring.entries() == r.entries,
        )?;
        *self.ring = ring;
        Ok(r.entries)
    }
}

impl core::fmt::Debug for UvpSrq {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UvpSrq")
            .field("handle", &self.srq.handle)
            .finish()
    }
}

impl UvpSrq {
    /// Posts receive requests to the SRQ; stops at the first that fails.
    ///
    /// # Errors
    /// `(index, error)` of the first request that failed.
    pub fn post_recv_list(&self, wrs: &[RecvWr<'_>]) -> Result<(), (usize, PostError)> {
        let mut posted = 0u32;
        let mut result = Ok(());
        {
            let ring = self.lock.lock();
            for (i, wr) in wrs.iter().enumerate() {
                let r = if self.dev.is_removed() {
                    Err(PostError::DeviceRemoved)
                } else if wr.sg_list.len() > self.srq.max_sge as usize {
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
        }
        result
    }

    /// Starts a resize (SRQ_MODIFY with a new size): holds the post lock until
    /// [`SrqResize::finish`] maps the new ring or the guard drops.
    pub fn begin_resize(&self) -> SrqResize<'_> {
        SrqResize {
            srq: self,
            ring: self.lock.lock(),
        }
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

/// A CQ's data path.
#[derive(Clone)]
pub struct UvpCq {
    dev: Arc<Device>,
    cq: KArc<Cq>,
    /// The poll lock, and the ring polled.
    poll: Arc<Mutex<KArc<Ring>>>,
}

/// A CQ resize in progress ([`UvpCq::begin_resize`]): nothing polls or arms the CQ from the
/// CQ_RESIZE command until the new ring is mapped ([`CqResize::finish`]) or the command failed
/// (drop it), as libmlx4 holds its CQ lock across `ibv_resize_cq`.
pub struct CqResize<'a> {
    cq: &'a UvpCq,
    ring: MutexGuard<'a, KArc<Ring>>,
}

impl core::fmt::Debug for CqResize<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CqResize").finish_non_exhaustive()
    }
}

impl CqResize<'_> {
    /// Maps the ring the command's vendor output names; returns its size.
    ///
    /// # Errors
    /// `InvalidParameter` when the output does not name the CQ's ring.
    pub fn finish(mut self, r: &abi::CqResp) -> Result<u32, wv_hal::VerbsError> {
        let ring = self.cq.cq.ring();
        check(
            r.cq_handle == self.cq.cq.handle
                && ring.addr() == r.ring_addr
                && ring.entries() == r.entries,
        )?;
        *self.ring = ring;
        Ok(r.entries)
    }
}

impl core::fmt::Debug for UvpCq {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UvpCq")
            .field("handle", &self.cq.handle)
            .finish()
    }
}

impl UvpCq {
    /// Takes up to `out.len()` completions; returns how many.
    pub fn poll(&self, out: &mut [WorkCompletion]) -> usize {
        let ring = self.poll.lock();
        let mut n = 0;
        while n < out.len() {
            let Some(slot) = ring.consumer_slot() else {
                break;
            };
            out[n] = WorkCompletion::decode(slot);
            ring.consume(1);
            n += 1;
        }
        n
    }

    /// Starts a resize (CQ_RESIZE): holds the poll lock until [`CqResize::finish`] maps the
    /// new ring or the guard drops.
    pub fn begin_resize(&self) -> CqResize<'_> {
        CqResize {
            cq: self,
            ring: self.poll.lock(),
        }
    }

    /// Arms the CQ for one notification (`ibv_req_notify_cq`): the next completion, or with
    /// `solicited_only` the next solicited one (a receive with the SE bit, or any error).
    /// Returns `true` when completions are already waiting (poll again to avoid missing one).
    pub fn arm(&self, solicited_only: bool) -> bool {
        if self.dev.is_removed() {
            return false;
        }
        let ring = self.poll.lock();
        self.cq.arm(solicited_only, &ring)
    }

    /// CQE slots.
    pub fn entries(&self) -> u32 {
        self.poll.lock().entries()
    }

    /// Whether the CQ overran (its error is sticky).
    pub fn overrun(&self) -> bool {
        self.cq.overrun.load(Ordering::Acquire)
    }
}
