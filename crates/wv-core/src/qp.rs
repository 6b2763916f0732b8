//! Queue pairs: create/destroy/query, multicast attach/detach, QP_CANCEL. QP_MODIFY lives in
//! [`crate::qp_modify`].

use alloc::vec::Vec;

use wv_abi::consts::WV_IO_QP_SIGNAL_SENDS;
use wv_abi::encode::write_prefix;
use wv_abi::{
    NtStatus, Vendor, WV_IO_QP_ATTRIBUTES, WV_IO_QP_CREATE, WV_IO_QP_MULTICAST, read_prefix,
};
use wv_hal::{
    Gid, IoRequest, KArc, Platform, QpCreate, QpEvent, QpEventSink, QpType, RequestQueue, SpinLock,
    Verbs,
};

use crate::convert::qp_attr_to_abi;
use crate::cq::CqObj;
use crate::device::DeviceObj;
use crate::fallible::{Slots, grow_locked, push_locked};
use crate::pd::PdObj;
use crate::provider::{Held, Provider, Teardown, hold};
use crate::shared::Shared;
use crate::srq::SrqObj;
use crate::status::verbs_status;
use crate::sync::{Handle, ModifySched, RefCount};
use crate::umv::with_umv;

/// QP events are not reported to user mode (OFW's handler is an empty TODO; the endpoint
/// issue may use them).
struct NoQpEvents;

impl QpEventSink for NoQpEvents {
    fn on_event(&self, _event: QpEvent) {}
}

/// One multicast attachment (OFW `WV_MULTICAST`).
struct Mcast<V: Verbs> {
    gid: Gid,
    /// NET16 as stored in `WV_IO_QP_MULTICAST.Id.Data`.
    lid: u16,
    handle: V::Mcast,
}

/// A queue pair (OFW `WV_QUEUE_PAIR`).
pub(crate) struct QpObj<P: Platform, V: Verbs> {
    pub pd: KArc<PdObj<P, V>>,
    pub dev: KArc<DeviceObj<P, V>>,
    send_cq: KArc<CqObj<P, V>>,
    recv_cq: KArc<CqObj<P, V>>,
    srq: Option<KArc<SrqObj<P, V>>>,
    pub qp: Handle<P, V::Qp>,
    /// IOCTLs in flight (queued and running modifies do not count: destroy cancels and waits
    /// for them instead of refusing).
    pub refs: RefCount,
    /// The QP number, for the endpoint code (the REQ and REP carry it).
    pub qpn: u32,
    mcast: P::SpinLock<Vec<Mcast<V>>>,
    /// QP_MODIFY requests waiting for the drainer, cancellable while here.
    pub modify_queue: P::Queue,
    /// Orders the drainer's takes against QP_CANCEL and removal, which empty the queue in one
    /// step under it: what they cancel is always the whole tail of the queue, never a modify
    /// queued before one the drainer then runs.
    modify_order: P::SpinLock<()>,
    pub sched: ModifySched<P>,
    /// For the drainer, which the QP itself is (`WorkItem`): queueing it allocates nothing
    /// but the platform's work item.
    pub shared: KArc<Shared<P, V>>,
}

impl<P: Platform, V: Verbs> QpObj<P, V> {
    /// Whether the QP receives through an SRQ (the REQ and REP say so).
    pub fn has_srq(&self) -> bool {
        self.srq.is_some()
    }

    /// Detaches every multicast group and destroys the QP (OFW `WvQpRemoveHandler`).
    pub fn destroy_handles(&self, lower: &V) {
        let groups = core::mem::take(&mut *self.mcast.lock());
        for group in groups {
            lower.detach_mcast(group.handle);
        }
        if let Some(qp) = self.qp.take() {
            lower.destroy_qp(qp);
        }
    }

    /// The oldest queued modify, for the drainer.
    pub fn next_modify(&self) -> Option<P::Request> {
        let _order = self.modify_order.lock();
        self.modify_queue.retrieve_next()
    }

    /// Ends every queued (not started) modify with `status`: QP_CANCEL, device removal, a
    /// drainer that could not be scheduled. They are taken out and completed in one step
    /// under the order lock (completion is legal at DISPATCH_LEVEL; collecting them first
    /// would allocate).
    pub fn fail_parked(&self, status: NtStatus) {
        let _order = self.modify_order.lock();
        while let Some(request) = self.modify_queue.retrieve_next() {
            request.complete(status, 0);
        }
    }
}

impl<P: Platform, V: Verbs> Teardown<P, V> for QpObj<P, V> {
    fn teardown(this: KArc<Self>, _shared: &Shared<P, V>) {
        // Queued modifies end with STATUS_CANCELLED and no new one can be parked; then wait
        // for the one the drainer may be running (PASSIVE_LEVEL).
        this.modify_queue.purge();
        this.sched.wait_idle();
        if let Some(lower) = this.dev.lower() {
            this.destroy_handles(&lower);
        }
        if let Some(srq) = &this.srq {
            srq.refs.put();
        }
        this.recv_cq.refs.put();
        this.send_cq.refs.put();
        this.pd.refs.put();
    }
}

type Parents<P, V> = (
    Held<P, V, PdObj<P, V>>,
    Held<P, V, CqObj<P, V>>,
    Held<P, V, CqObj<P, V>>,
    Option<Held<P, V, SrqObj<P, V>>>,
);

/// Looks up and references the PD, CQs and SRQ of a QP_CREATE under one provider lock
/// (OFW `WvQpCreateAcquire`); `STATUS_NOT_FOUND` if any is missing.
fn acquire_parents<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    create: &WV_IO_QP_CREATE,
) -> Result<Parents<P, V>, NtStatus> {
    let mut tables = prov.tables.lock();
    let tables = &mut *tables;
    let not_found = NtStatus::NOT_FOUND;
    let pd = hold(tables.pds.get(create.Id.Id).ok_or(not_found)?).ok_or(not_found)?;
    let send_cq = hold(tables.cqs.get(create.SendCqId).ok_or(not_found)?).ok_or(not_found)?;
    let recv_cq = hold(tables.cqs.get(create.ReceiveCqId).ok_or(not_found)?).ok_or(not_found)?;
    let srq = match create.SrqId {
        0 => None,
        id => Some(hold(tables.srqs.get(id).ok_or(not_found)?).ok_or(not_found)?),
    };
    Ok((pd, send_cq, recv_cq, srq))
}

/// QP_CREATE `{Id.Id = pd, SendCqId, ReceiveCqId, SrqId (0 = none), capacities}` →
/// `Id.Id = qp`. Runs in the caller's context (spec §7.1-l).
///
/// Beyond OFW: the PD, CQs and SRQ must belong to the same opened device
/// (`STATUS_INVALID_PARAMETER` otherwise; OFW handed one device's CQ handle to another), and an
/// unknown `QpType` is refused with `STATUS_UNSUCCESSFUL`, the status OFW gave when the
/// controller refused it.
pub(crate) fn qp_create<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    mut req: P::Request,
    create: WV_IO_QP_CREATE,
    vendor: Vendor,
) {
    let (pd, send_cq, recv_cq, srq) = match acquire_parents(prov, &create) {
        Ok(parents) => parents,
        Err(status) => return req.complete(status, 0),
    };
    let dev = &pd.dev;
    let same_device = KArc::ptr_eq(&send_cq.dev, dev)
        && KArc::ptr_eq(&recv_cq.dev, dev)
        && srq.as_ref().is_none_or(|s| KArc::ptr_eq(&s.dev, dev));
    if !same_device {
        return req.complete(NtStatus::INVALID_PARAMETER, 0);
    }
    let Some(qp_type) = QpType::from_abi(create.QpType) else {
        return req.complete(NtStatus::UNSUCCESSFUL, 0);
    };
    let handles = (dev.lower(), pd.pd.get(), send_cq.cq.get(), recv_cq.cq.get());
    let (Some(lower), Some(pd_handle), Some(scq), Some(rcq)) = handles else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let srq_handle = match &srq {
        Some(srq) => match srq.srq.get() {
            Some(handle) => Some(handle),
            None => return req.complete(NtStatus::NOT_FOUND, 0),
        },
        None => None,
    };
    let platform = prov.platform();
    // OFW answers a failed QP allocation with STATUS_NO_MEMORY; everything is allocated
    // before the verb.
    let Some((obj_slot, handle_slot, events_slot)) = Slots::reserve() else {
        return req.complete(NtStatus::NO_MEMORY, 0);
    };
    let Ok(sched) = ModifySched::new(platform) else {
        return req.complete(NtStatus::NO_MEMORY, 0);
    };
    let modify_queue = match platform.create_queue() {
        Ok(queue) => queue,
        Err(status) => return req.complete(status, 0),
    };
    let events: KArc<dyn QpEventSink> = events_slot.write(NoQpEvents).into();
    let params = QpCreate {
        qp_type,
        sq_depth: create.SendDepth,
        rq_depth: create.ReceiveDepth,
        sq_sge: create.SendSge,
        rq_sge: create.ReceiveSge,
        sq_max_inline: create.MaxInlineSend,
        sq_signaled: u32::from(create.QpFlags) & WV_IO_QP_SIGNAL_SENDS != 0,
        send_cq: &*scq,
        recv_cq: &*rcq,
        srq: srq_handle.as_deref(),
    };
    let (created, verb_info) = with_umv(&mut req, &create, vendor, |umv| {
        lower.create_qp(&pd_handle, &params, events, umv)
    });
    let (qp, info) = match created {
        Ok(created) => created,
        Err(e) => {
            modify_queue.purge();
            return req.complete(verbs_status(e), 0);
        }
    };
    // The QP's own references on its parents, dropped by its teardown.
    pd.refs.get();
    send_cq.refs.get();
    recv_cq.refs.get();
    if let Some(srq) = &srq {
        srq.refs.get();
    }
    let obj = obj_slot.write(QpObj {
        pd: KArc::clone(pd.arc()),
        dev: KArc::clone(dev),
        send_cq: KArc::clone(send_cq.arc()),
        recv_cq: KArc::clone(recv_cq.arc()),
        srq: srq.as_ref().map(|s| KArc::clone(s.arc())),
        qp: Handle::new(platform, handle_slot.write(qp)),
        refs: RefCount::default(),
        qpn: info.qpn,
        mcast: platform.spin_lock(Vec::new()),
        modify_queue,
        modify_order: platform.spin_lock(()),
        sched,
        shared: KArc::clone(&prov.shared),
    });
    prov.publish(req, obj, verb_info, |_| {});
}

/// QP_QUERY: `Information = outlen`. Beyond OFW (spec §7.1-j): a failing `query_qp` is
/// `STATUS_UNSUCCESSFUL` (OFW converted a zeroed struct and said SUCCESS), and the `Id` header
/// is written (OFW left the echoed input there).
pub(crate) fn qp_query<P: Platform, V: Verbs>(prov: &Provider<P, V>, mut req: P::Request, id: u64) {
    let Some((_qp, lower, handle)) = prov.acquire_live::<QpObj<P, V>>(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let attr = match lower.query_qp(&handle) {
        Ok(attr) => attr,
        Err(e) => return req.complete(verbs_status(e), 0),
    };
    let buf = req.buffer_mut();
    let mut out: WV_IO_QP_ATTRIBUTES = read_prefix(buf).unwrap_or_default();
    qp_attr_to_abi(&mut out, id, &attr);
    write_prefix(buf, &out).ok();
    let len = req.output_len();
    req.complete(NtStatus::SUCCESS, len);
}

/// QP_ATTACH `{Id = qp, Data = NET16 LID, Gid}`.
pub(crate) fn qp_attach<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    mc: WV_IO_QP_MULTICAST,
) {
    let Some((qp, lower, handle)) = prov.acquire_live::<QpObj<P, V>>(mc.Id.Id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let lid = mc.Id.Data as u16;
    // OFW allocates the attachment's record first: STATUS_NO_MEMORY.
    if grow_locked(&qp.mcast, 1).is_err() {
        return req.complete(NtStatus::NO_MEMORY, 0);
    }
    match lower.attach_mcast(&handle, &mc.Gid.Raw, u16::from_be(lid)) {
        Ok(attached) => {
            let group = Mcast {
                gid: mc.Gid.Raw,
                lid,
                handle: attached,
            };
            match push_locked(&qp.mcast, group) {
                Ok(()) => req.complete(NtStatus::SUCCESS, 0),
                Err((group, _)) => {
                    // The room went to a concurrent attach and no more can be had.
                    lower.detach_mcast(group.handle);
                    req.complete(NtStatus::NO_MEMORY, 0);
                }
            }
        }
        Err(e) => req.complete(verbs_status(e), 0),
    }
}

/// QP_DETACH: `STATUS_NOT_FOUND` if the QP is not attached to that `(MGID, LID)`.
pub(crate) fn qp_detach<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    mc: WV_IO_QP_MULTICAST,
) {
    let Some(qp) = prov.acquire::<QpObj<P, V>>(mc.Id.Id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let Some(lower) = qp.dev.lower() else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let lid = mc.Id.Data as u16;
    let group = {
        let mut groups = qp.mcast.lock();
        let found = groups
            .iter()
            .position(|g| g.gid == mc.Gid.Raw && g.lid == lid);
        found.map(|index| groups.remove(index))
    };
    match group {
        Some(group) => {
            lower.detach_mcast(group.handle);
            req.complete(NtStatus::SUCCESS, 0);
        }
        None => req.complete(NtStatus::NOT_FOUND, 0),
    }
}

/// QP_CANCEL: queued (not yet started) modifies end with `STATUS_CANCELLED`; a running one
/// finishes. OFW had nothing to cancel (its modify was synchronous).
pub(crate) fn qp_cancel<P: Platform, V: Verbs>(prov: &Provider<P, V>, req: P::Request, id: u64) {
    let Some(qp) = prov.acquire::<QpObj<P, V>>(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    qp.fail_parked(NtStatus::CANCELLED);
    drop(qp);
    req.complete(NtStatus::SUCCESS, 0);
}
