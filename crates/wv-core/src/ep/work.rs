//! The endpoint's work item: everything of an endpoint that needs PASSIVE_LEVEL and does not
//! run in the caller's thread — an ACCEPT whose QP commands may wait (move the QP to RTS
//! through the CM's attributes, then the REP or RTU), the disconnect's QP → ERROR step once the
//! DREP (or the DREQ's timeout) arrived, and what a listener's sink leaves of the pairing of
//! connection requests with GET_REQUESTs (see [`listen`]). CONNECT (send the REQ), and ACCEPT
//! when QP modifies run inline or its commands measure shorter than a hand-off
//! ([`crate::hand_off`]), run the same code in the caller's thread ([`EpObj::start_inline`]).
//!
//! The endpoint is its own work item (as a QP is its own modify drainer): queueing it
//! allocates nothing but the platform's work item, so CM event callbacks can schedule it
//! without allocating. [`kick`] makes sure one runs; it takes what is due in order and stops
//! when nothing is. Requests wait for it parked (cancellable) in their queue, and a work item
//! the platform cannot queue fails the requests that waited for it (spec §7.1-k).

use wv_abi::ioctl::{WV_IOCTL_EP_ACCEPT, WV_IOCTL_EP_CONNECT};
use wv_abi::{
    NtStatus, WV_IO_CONNECT_PARAM, WV_IO_EP_ACCEPT, WV_IO_EP_CONNECT, WV_IO_EP_DISCONNECT,
    read_prefix,
};
use wv_hal::cm::REQ_PRIVATE_DATA;
use wv_hal::{
    CmEventSink, CmRep, CmReq, CmReqParams, ConnectionManager, IoRequest, KArc, Platform, QpModify,
    QpState, QpType, RequestQueue, SpinLock, Verbs, WorkItem,
};

use super::cma::{self, CM_RESPONSE_TIMEOUT, MAX_CM_RETRIES};
use super::events::ConnEvents;
use super::{Binding, CmConn, EpInner, EpObj, EpState, choose_cm, listen, starting_psn};
use crate::provider::Held;
use crate::qp::QpObj;
use crate::rdma_device::RdmaDevice;
use crate::status::{REMOVED, verbs_status};

/// `IB_FAILOVER_ACCEPT_UNSUPPORTED`: WinVerbs offers no alternate path.
const FAILOVER_UNSUPPORTED: u8 = 1;

/// Makes sure the endpoint's work item runs. IRQL <= DISPATCH_LEVEL (CM callbacks call it).
/// When the platform cannot queue it, what waited for it ends with the platform's status.
pub(crate) fn kick<P: Platform, V: Verbs>(ep: &KArc<EpObj<P, V>>) {
    if !ep.sched.kick(ep.shared.platform.now_ns()) {
        return;
    }
    let work: KArc<dyn WorkItem> = KArc::clone(ep).into();
    if let Err(status) = ep.shared.platform.queue_work(work) {
        loop {
            fail_waiting(ep, status);
            if ep.sched.finish() {
                break;
            }
        }
    }
}

/// Ends what waits for a work item that will not run: queued CONNECT/ACCEPTs, a DISCONNECT
/// whose answer came, a listener's GET_REQUESTs (their endpoints go back to Idle).
fn fail_waiting<P: Platform, V: Verbs>(ep: &EpObj<P, V>, status: NtStatus) {
    {
        let mut inner = ep.inner.lock();
        while let Some(r) = ep.start_queue.retrieve_next() {
            r.complete(status, 0);
        }
        inner.busy = false;
        if core::mem::take(&mut inner.disconnect_due)
            && let Some(r) = ep.disconnect_queue.retrieve_next()
        {
            r.complete(status, 0);
        }
    }
    listen::release_waiters(ep, status);
}

impl<P: Platform, V: Verbs> WorkItem for EpObj<P, V> {
    /// PASSIVE_LEVEL on a system worker thread: everything due, in order, until nothing is.
    fn run(&self) {
        self.shared.platform.paged_code();
        self.shared.timed_start(&self.sched);
        let Some(_running) = self.work.share() else {
            // Torn down: teardown ended every request; only the scheduler is left to settle.
            while !self.sched.finish() {}
            return;
        };
        loop {
            if self.start_next()
                || self.finish_disconnect()
                || listen::pair_one(self)
                || listen::drop_refused(self)
            {
                continue;
            }
            if self.sched.finish() {
                break;
            }
        }
    }
}

/// The status of a request the endpoint's state no longer allows (a CONNECT or ACCEPT when its
/// work item gets to it, a GET_REQUEST when it would park on a listener): OFW's
/// `STATUS_NOT_SUPPORTED`, but `STATUS_CANCELLED` once the endpoint is being destroyed (a
/// destroy or the file's cleanup raced the request) and `STATUS_DEVICE_REMOVED` once the
/// device its CM id came from was removed (which moved it to Disconnected), as the requests
/// still parked then end.
pub(crate) fn refused(inner: &EpInner) -> NtStatus {
    if inner.state() == EpState::Destroying {
        NtStatus::CANCELLED
    } else if inner.removed {
        REMOVED
    } else {
        NtStatus::NOT_SUPPORTED
    }
}

/// What ends a CONNECT or ACCEPT whose work item finds, under the endpoint's lock, that the
/// endpoint no longer allows it ([`refused`]) or that an EP_CANCEL came since it was queued (its
/// `cancels` count moved on: `STATUS_CANCELLED`); `None` when it goes on.
fn overtaken(inner: &EpInner, allowed: bool, cancels: u32) -> Option<NtStatus> {
    if !allowed {
        Some(refused(inner))
    } else if inner.cancels != cancels {
        Some(NtStatus::CANCELLED)
    } else {
        None
    }
}

/// A request's output bytes (the UVP's QP-state buffer), as much as the system buffer holds.
fn output<R: IoRequest>(req: &mut R) -> &mut [u8] {
    let len = req.output_len();
    let buf = req.buffer_mut();
    let len = len.min(buf.len());
    &mut buf[..len]
}

/// The private data bytes of connect parameters (`DataLength` was checked against 56).
fn private_data(param: &WV_IO_CONNECT_PARAM) -> &[u8] {
    &param.Data[..usize::from(param.DataLength).min(param.Data.len())]
}

impl<P: Platform, V: Verbs> EpObj<P, V> {
    /// Starts the oldest queued CONNECT or ACCEPT, if any; returns whether there was one.
    fn start_next(&self) -> bool {
        let (req, cancels) = {
            let mut inner = self.inner.lock();
            let req = self.start_queue.retrieve_next();
            if req.is_none() {
                // Nothing left to start (it may have been cancelled): a new one may come.
                inner.busy = false;
            }
            (req, inner.cancels)
        };
        let Some(req) = req else { return false };
        match req.ioctl_code() {
            WV_IOCTL_EP_CONNECT => self.connect(req, cancels),
            WV_IOCTL_EP_ACCEPT => self.accept(req, cancels),
            _ => req.complete(NtStatus::NOT_IMPLEMENTED, 0),
        }
        self.inner.lock().busy = false;
        true
    }

    /// Runs a CONNECT or ACCEPT in the caller's thread (PASSIVE_LEVEL, no lock held) that
    /// [`super::ops`] marked busy with the endpoint's EP_CANCEL count `cancels`, as the work
    /// item would run it. Inside the work gate, so a teardown waits for it before it destroys
    /// the endpoint's id (one made here after that would outlive the endpoint).
    pub(crate) fn start_inline(&self, req: P::Request, cancels: u32) {
        self.shared.platform.paged_code();
        let Some(_running) = self.work.share() else {
            let status = {
                let mut inner = self.inner.lock();
                inner.busy = false;
                refused(&inner)
            };
            return req.complete(status, 0);
        };
        match req.ioctl_code() {
            WV_IOCTL_EP_CONNECT => self.connect(req, cancels),
            WV_IOCTL_EP_ACCEPT => self.accept(req, cancels),
            _ => req.complete(NtStatus::NOT_IMPLEMENTED, 0),
        }
        self.inner.lock().busy = false;
    }

    /// The file's QP `qp_id`, referenced.
    fn qp(&self, qp_id: u64) -> Result<Held<P, V, QpObj<P, V>>, NtStatus> {
        let prov = self.prov.upgrade().ok_or(NtStatus::CANCELLED)?;
        prov.acquire::<QpObj<P, V>>(qp_id)
            .ok_or(NtStatus::NOT_FOUND)
    }

    /// A new connection id of `rdma`'s CM for this endpoint, made and bound inside a share of
    /// the device's gate, so a removal either waits for it or finds it bound.
    fn new_connection(
        &self,
        rdma: KArc<RdmaDevice<P, V>>,
        cm: KArc<V::Cm>,
    ) -> Result<(), NtStatus> {
        let Some(_share) = rdma.gate.share() else {
            return Err(REMOVED);
        };
        let events: KArc<dyn CmEventSink> = KArc::try_new(ConnEvents {
            ep: self.me.clone(),
        })?
        .into();
        let slot = KArc::<CmConn<V>>::try_reserve()?;
        let id = cm.create_id(KArc::clone(&events))?;
        let conn = slot.write(CmConn { cm, id, events });
        self.bind(Binding {
            rdma: KArc::clone(&rdma),
            conn,
        });
        Ok(())
    }

    /// CONNECT (OFW `WvEpAsyncConnect`): a connection id, the REQ with the IP-CM header and
    /// the caller's private data, then the request waits for the REP. `cancels` is the
    /// endpoint's EP_CANCEL count when the work item took the request.
    fn connect(&self, req: P::Request, cancels: u32) {
        let c: WV_IO_EP_CONNECT = match read_prefix(req.buffer()) {
            Ok(c) => c,
            Err(status) => return req.complete(status, 0),
        };
        let (local, route, device) = {
            let inner = self.inner.lock();
            if inner.state() != EpState::RouteResolved {
                let status = refused(&inner);
                drop(inner);
                return req.complete(status, 0);
            }
            (
                inner.attr.LocalAddress,
                inner.route,
                inner.attr.Device.DeviceGuid,
            )
        };
        let (qpn, srq) = match self.qp(c.QpId) {
            Ok(qp) => (qp.qpn, qp.has_srq()),
            Err(status) => return req.complete(status, 0),
        };
        let mut pdata = [0u8; REQ_PRIVATE_DATA];
        pdata[..cma::HEADER_LEN].copy_from_slice(&cma::header(&local, &c.PeerAddress));
        let user = private_data(&c.Param);
        let pdata_len = cma::HEADER_LEN + user.len();
        pdata[cma::HEADER_LEN..pdata_len].copy_from_slice(user);
        let psn = starting_psn(self.shared.platform.now_ns(), self.me.as_ptr().addr());
        let Some((rdma, cm)) = choose_cm(&self.shared, device) else {
            return req.complete(NtStatus::NO_SUCH_DEVICE, 0);
        };
        if let Err(status) = self.new_connection(rdma, cm) {
            return req.complete(status, 0);
        }
        {
            let mut inner = self.inner.lock();
            // Nor does a REQ go when EP_CANCEL came while this ran.
            let allowed = inner.state() == EpState::RouteResolved;
            if let Some(status) = overtaken(&inner, allowed, cancels) {
                drop(inner);
                return req.complete(status, 0);
            }
            inner.set_state(EpState::ActiveConnect);
            inner.rep_received = false;
            inner.attr.PeerAddress = c.PeerAddress;
            inner.attr.set_connect(&c.Param);
            // Parked before the REQ leaves, so the answer cannot come before the request
            // waits for it.
            if let Err((req, status)) = self.handshake_queue.park(req) {
                inner.set_state(EpState::Disconnected);
                drop(inner);
                return req.complete(status, 0);
            }
        }
        let sent = self.with_cm(|cm, id| {
            cm.send_req(
                id,
                &CmReq {
                    service_id: cma::service_id(self.ep_type, &c.PeerAddress),
                    primary_path: &route,
                    qpn,
                    params: CmReqParams {
                        qp_type: QpType::Rc,
                        starting_psn: psn,
                        max_cm_retries: MAX_CM_RETRIES,
                        responder_resources: c.Param.ResponderResources as u8,
                        initiator_depth: c.Param.InitiatorDepth as u8,
                        remote_cm_response_timeout: CM_RESPONSE_TIMEOUT,
                        flow_control: true,
                        local_cm_response_timeout: CM_RESPONSE_TIMEOUT,
                        rnr_retry_count: c.Param.RnrRetryCount,
                        retry_count: c.Param.RetryCount,
                        srq,
                    },
                    private_data: &pdata[..pdata_len],
                },
            )
        });
        if let Err(status) = sent {
            self.abort_handshake(status);
        }
    }

    /// The handshake could not be sent: the endpoint is disconnected (OFW) and the request
    /// that waits for the answer ends with `status`.
    fn abort_handshake(&self, status: NtStatus) {
        let mut inner = self.inner.lock();
        if inner.state() != EpState::Destroying {
            inner.set_state(EpState::Disconnected);
        }
        while let Some(r) = self.handshake_queue.retrieve_next() {
            r.complete(status, 0);
        }
    }

    /// Moves `qp` to `state` with the CM's attributes for it, adjusted by `adjust`; the
    /// UVP's QP-state bytes go to `out`.
    fn move_qp(
        &self,
        qp: &QpObj<P, V>,
        state: QpState,
        out: &mut [u8],
        adjust: impl FnOnce(&mut QpModify),
    ) -> Result<(), NtStatus> {
        let mut modify = self.with_cm(|cm, id| cm.get_qp_attr(id, state))?;
        adjust(&mut modify);
        let (Some(lower), Some(handle)) = (qp.dev.lower(), qp.qp.get()) else {
            return Err(NtStatus::NOT_FOUND);
        };
        qp.dev
            .rdma
            .modify_qp(&self.shared.platform, &lower, &handle, &modify, out)
            .map_err(verbs_status)
    }

    /// ACCEPT (OFW `WvEpAsyncAccept`): the active side after the REP, or the passive side
    /// after GET_REQUEST.
    fn accept(&self, mut req: P::Request, cancels: u32) {
        let a: WV_IO_EP_ACCEPT = match read_prefix(req.buffer()) {
            Ok(a) => a,
            Err(status) => return req.complete(status, 0),
        };
        let (state, rep_received, rep_sent, status) = {
            let inner = self.inner.lock();
            (
                inner.state(),
                inner.rep_received,
                inner.rep_sent,
                refused(&inner),
            )
        };
        let qp = match self.qp(a.QpId) {
            Ok(qp) => qp,
            Err(status) => return req.complete(status, 0),
        };
        match state {
            EpState::ActiveConnect if rep_received => {
                let moved = self
                    .move_qp(&qp, QpState::Init, output(&mut req), |_| {})
                    .and_then(|()| self.move_qp(&qp, QpState::Rtr, output(&mut req), |_| {}))
                    .and_then(|()| self.move_qp(&qp, QpState::Rts, output(&mut req), |_| {}));
                drop(qp);
                if let Err(status) = moved {
                    return req.complete(status, 0);
                }
                self.accept_active(req, &a.Param);
            }
            EpState::PassiveConnect if !rep_sent => self.accept_passive(req, qp, &a.Param, cancels),
            _ => req.complete(status, 0),
        }
    }

    /// The active side's RTU: the connection is established and the ACCEPT completes with the
    /// QP-state bytes (`Information = outlen`).
    fn accept_active(&self, req: P::Request, param: &WV_IO_CONNECT_PARAM) {
        {
            let mut inner = self.inner.lock();
            if inner.state() != EpState::ActiveConnect {
                let status = refused(&inner);
                drop(inner);
                return req.complete(status, 0);
            }
            inner.set_state(EpState::Connected);
        }
        match self.with_cm(|cm, id| cm.send_rtu(id, private_data(param))) {
            Ok(()) => {
                let info = req.output_len();
                req.complete(NtStatus::SUCCESS, info);
            }
            Err(status) => {
                let mut inner = self.inner.lock();
                if inner.state() == EpState::Connected {
                    inner.set_state(EpState::Disconnected);
                    // A DISCONNECT_NOTIFY may have parked on the connection meanwhile.
                    super::ops::end_notify::<P>(&self.notify_queue);
                }
                drop(inner);
                req.complete(status, 0);
            }
        }
    }

    /// The passive side: QP to RTS with the caller's read limits, the REP, then the ACCEPT
    /// waits for the RTU.
    ///
    /// The REP's starting PSN is the passive side's send PSN, so it goes into the RTS
    /// attributes (IBA 12.7.29). OFW put it into the RTR's receive PSN instead, which is the
    /// active side's starting PSN from the REQ (what the CM's RTR attributes already hold);
    /// with both sides checking PSNs that connection could not carry a message.
    fn accept_passive(
        &self,
        mut req: P::Request,
        qp: Held<P, V, QpObj<P, V>>,
        param: &WV_IO_CONNECT_PARAM,
        cancels: u32,
    ) {
        let psn = starting_psn(self.shared.platform.now_ns(), self.me.as_ptr().addr());
        let resources = param.ResponderResources as u8;
        let depth = param.InitiatorDepth as u8;
        let moved = self
            .move_qp(&qp, QpState::Init, output(&mut req), |_| {})
            .and_then(|()| {
                self.move_qp(&qp, QpState::Rtr, output(&mut req), |m| {
                    if let QpModify::Rtr(rtr) = m {
                        rtr.responder_resources = resources;
                    }
                })
            })
            .and_then(|()| {
                self.move_qp(&qp, QpState::Rts, output(&mut req), |m| {
                    if let QpModify::Rts(rts) = m {
                        rts.initiator_depth = depth;
                        rts.sq_psn = psn;
                    }
                })
            });
        let (qpn, srq) = (qp.qpn, qp.has_srq());
        drop(qp);
        if let Err(status) = moved {
            return req.complete(status, 0);
        }
        {
            let mut inner = self.inner.lock();
            // Nor does a REP go when EP_CANCEL came while the QP moved (the request may still
            // be rejected).
            let allowed = inner.state() == EpState::PassiveConnect && !inner.rep_sent;
            if let Some(status) = overtaken(&inner, allowed, cancels) {
                drop(inner);
                return req.complete(status, 0);
            }
            inner.rep_sent = true;
            if let Err((req, status)) = self.handshake_queue.park(req) {
                drop(inner);
                return req.complete(status, 0);
            }
        }
        let rep = CmRep {
            qpn,
            starting_psn: psn,
            private_data: private_data(param),
            failover_accepted: FAILOVER_UNSUPPORTED,
            responder_resources: resources,
            initiator_depth: depth,
            flow_control: true,
            rnr_retry_count: param.RnrRetryCount,
            srq,
        };
        if let Err(status) = self.with_cm(|cm, id| cm.send_rep(id, &rep)) {
            self.abort_handshake(status);
        }
    }

    /// The DISCONNECT whose answer came (OFW `WvEpAsyncDisconnect`): its QP goes to ERROR
    /// and it completes with that modify's status and `Information = outlen`, whatever the
    /// answer was (OFW: the DREQ's timeout is `STATUS_TIMEOUT`, a success code, so the modify's
    /// status stands). Returns whether one was due.
    fn finish_disconnect(&self) -> bool {
        let req = {
            let mut inner = self.inner.lock();
            if !core::mem::take(&mut inner.disconnect_due) {
                return false;
            }
            self.disconnect_queue.retrieve_next()
        };
        // Cancelled meanwhile: nothing more to do.
        let Some(req) = req else { return true };
        let d: WV_IO_EP_DISCONNECT = match read_prefix(req.buffer()) {
            Ok(d) => d,
            Err(s) => {
                req.complete(s, 0);
                return true;
            }
        };
        disconnect_qp(self, req, d.QpId, Answer::Deferred);
        true
    }
}

/// How a DISCONNECT's completion reports its output (OFW's two paths differ).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// In the caller's thread (`WvEpDisconnect`): `Information = outlen` on success, 0 when
    /// the modify failed.
    Inline,
    /// From the work item after the CM's answer (`WvEpAsyncDisconnect`): `Information =
    /// outlen` always.
    Deferred,
}

/// Moves a disconnect's QP to ERROR (nothing for QP id 0) and completes the request with the
/// modify's status (`STATUS_NOT_FOUND` for a QP the file does not have).
pub(crate) fn disconnect_qp<P: Platform, V: Verbs>(
    ep: &EpObj<P, V>,
    mut req: P::Request,
    qp_id: u64,
    how: Answer,
) {
    let status = qp_to_error(ep, &mut req, qp_id);
    answer(req, status, how);
}

/// Moves a disconnect's QP to ERROR (nothing for QP id 0), its QP-state bytes into `req`'s
/// output; returns the modify's status (`STATUS_NOT_FOUND` for a QP the file does not have).
/// PASSIVE_LEVEL.
pub(crate) fn qp_to_error<P: Platform, V: Verbs>(
    ep: &EpObj<P, V>,
    req: &mut P::Request,
    qp_id: u64,
) -> NtStatus {
    let moved = if qp_id == 0 {
        Ok(())
    } else {
        ep.qp(qp_id).and_then(|qp| {
            let (Some(lower), Some(handle)) = (qp.dev.lower(), qp.qp.get()) else {
                return Err(NtStatus::NOT_FOUND);
            };
            let out = output(req);
            qp.dev
                .rdma
                .modify_qp(&ep.shared.platform, &lower, &handle, &QpModify::Error, out)
                .map_err(verbs_status)
        })
    };
    match moved {
        Ok(()) => NtStatus::SUCCESS,
        Err(e) => e,
    }
}

/// Completes a DISCONNECT with its QP step's `status`, reporting its output as the path `how`
/// says OFW did.
pub(crate) fn answer<R: IoRequest>(req: R, status: NtStatus, how: Answer) {
    let info = if status.is_success() || how == Answer::Deferred {
        req.output_len()
    } else {
        0
    };
    req.complete(status, info);
}
