//! The endpoint IOCTLs (spec §2.4): the ones that complete in the caller's thread, and the
//! entry of CONNECT/ACCEPT, which start in the caller's thread when nothing in them waits and
//! otherwise park until the endpoint's work item starts them. The
//! dispatcher calls each handler with its decoded request (`dispatch.rs`, one row per IOCTL);
//! EP_LISTEN and EP_GET_REQUEST are in `listen.rs`.
//!
//! EP_LOOKUP and the multicast join/leave answer `STATUS_NOT_IMPLEMENTED` in the dispatcher, as
//! OFW does: the datagram endpoint was never implemented end to end.

use core::mem::size_of;
use core::ops::Deref;

use wv_abi::consts::{WV_IO_EP_TYPE_CONNECT, WV_IO_EP_TYPE_DATAGRAM};
use wv_abi::encode::write_prefix;
use wv_abi::{
    IB_PATH_REC, NtStatus, WV_IO_EP_ACCEPT, WV_IO_EP_BIND, WV_IO_EP_CONNECT, WV_IO_EP_DISCONNECT,
    WV_IO_ID,
};
use wv_hal::cm::REJ_USER_DEFINED;
use wv_hal::{ConnectionManager, IoRequest, KArc, Platform, RequestQueue, SpinLock, Verbs};

use super::work::{Answer, answer, disconnect_qp, qp_to_error};
use super::{EpInner, EpObj, EpState, listen};
use crate::QpModifyMode;
use crate::provider::Provider;
use crate::sync::{Gate, ModifySched, RefCount};

/// An endpoint found by id, with a reference: destroy answers `STATUS_ACCESS_DENIED` until
/// this is dropped (OFW `WvEpAcquire` / `WvEpRelease`).
pub(crate) struct EpRef<P: Platform, V: Verbs> {
    ep: KArc<EpObj<P, V>>,
}

impl<P: Platform, V: Verbs> EpRef<P, V> {
    /// The endpoint itself.
    pub fn arc(&self) -> &KArc<EpObj<P, V>> {
        &self.ep
    }
}

impl<P: Platform, V: Verbs> Deref for EpRef<P, V> {
    type Target = EpObj<P, V>;
    fn deref(&self) -> &EpObj<P, V> {
        &self.ep
    }
}

impl<P: Platform, V: Verbs> Drop for EpRef<P, V> {
    fn drop(&mut self) {
        self.ep.refs.put();
    }
}

impl<P: Platform, V: Verbs> Provider<P, V> {
    /// The endpoint with this id, referenced.
    pub fn acquire_ep(&self, id: u64) -> Option<EpRef<P, V>> {
        let ep = {
            let tables = self.tables.lock();
            let ep = tables.eps.get(id)?;
            ep.refs.get();
            KArc::clone(ep)
        };
        self.settle_queued(&ep);
        Some(EpRef { ep })
    }

    /// An endpoint Queued on a listener whose GET_REQUEST has ended goes back to Idle before
    /// any IOCTL looks at it ([`listen::reap`]): the I/O manager's cancel of a GET_REQUEST
    /// tells the driver nothing, so this is where the endpoint learns it is free.
    fn settle_queued(&self, ep: &EpObj<P, V>) {
        let listener = {
            let inner = ep.inner.lock();
            if inner.state() != EpState::Queued {
                return;
            }
            inner.listener
        };
        let listener = self.tables.lock().eps.get(listener).cloned();
        if let Some(listener) = listener {
            listen::reap(&listener);
        }
    }

    /// EP_DESTROY (and cleanup, with `force`): `STATUS_NOT_FOUND` for an unknown id,
    /// `STATUS_ACCESS_DENIED` while an IOCTL uses the endpoint or a listener holds it;
    /// otherwise it leaves its table and is torn down.
    pub fn destroy_ep(&self, id: u64, force: bool) -> NtStatus {
        if !force {
            let ep = self.tables.lock().eps.get(id).cloned();
            if let Some(ep) = ep {
                self.settle_queued(&ep);
            }
        }
        let ep = {
            let mut tables = self.tables.lock();
            let Some(ep) = tables.eps.get(id) else {
                return NtStatus::NOT_FOUND;
            };
            if ep.refs.is_held() && !force {
                return NtStatus::ACCESS_DENIED;
            }
            match tables.eps.remove(id) {
                Some(ep) => ep,
                None => return NtStatus::NOT_FOUND,
            }
        };
        ep.teardown();
        NtStatus::SUCCESS
    }

    /// Cleanup's first step for endpoints (OFW `WvProviderCleanup`): every listener gives
    /// its queued endpoints back, then every endpoint is destroyed. One at a time, no list.
    pub fn cleanup_eps(&self) {
        let mut at = 0;
        loop {
            let next = {
                let tables = self.tables.lock();
                tables
                    .eps
                    .next_after(at)
                    .map(|(id, ep)| (id, KArc::clone(ep)))
            };
            let Some((id, ep)) = next else { break };
            at = id;
            listen::release_waiters(&ep, NtStatus::CANCELLED);
        }
        let mut at = 0;
        loop {
            let next = self.tables.lock().eps.next_after(at).map(|(id, _)| id);
            let Some(id) = next else { break };
            at = id;
            let status = self.destroy_ep(id, true);
            debug_assert_eq!(status, NtStatus::SUCCESS);
        }
    }
}

/// EP_CREATE `UINT64 EpType` → `UINT64 id`, `Information = 8`. Beyond OFW (spec §7.1-j): a
/// type other than `WV_IO_EP_TYPE_CONNECT` / `_DATAGRAM` is `STATUS_INVALID_PARAMETER`.
pub(crate) fn create<P: Platform, V: Verbs>(
    prov: &KArc<Provider<P, V>>,
    mut req: P::Request,
    ep_type: u64,
) {
    if ep_type != WV_IO_EP_TYPE_CONNECT && ep_type != WV_IO_EP_TYPE_DATAGRAM {
        return req.complete(NtStatus::INVALID_PARAMETER, 0);
    }
    let ep = match new_endpoint(prov, ep_type as u16) {
        Ok(ep) => ep,
        Err(status) => return req.complete(status, 0),
    };
    let id = match prov.insert_ep(ep) {
        Ok(id) => id,
        Err((ep, status)) => {
            ep.teardown();
            return req.complete(status, 0);
        }
    };
    let info = write_prefix(req.buffer_mut(), &id).unwrap_or(0);
    req.complete(NtStatus::SUCCESS, info);
}

/// A new Idle endpoint: its queues, gate and scheduler, or the status of what could not be
/// made (`STATUS_NO_MEMORY` for memory, as OFW's `WvEpAllocate`; the framework's status for a
/// queue). Nothing is left behind on failure.
fn new_endpoint<P: Platform, V: Verbs>(
    prov: &KArc<Provider<P, V>>,
    ep_type: u16,
) -> Result<KArc<EpObj<P, V>>, NtStatus> {
    let platform = prov.platform();
    let slot = KArc::<EpObj<P, V>>::try_reserve()?;
    let queues = Queues::<P>::new(platform)?;
    let (work, sched) = match (Gate::new(platform), ModifySched::new(platform)) {
        (Ok(work), Ok(sched)) => (work, sched),
        _ => {
            queues.purge();
            return Err(NtStatus::NO_MEMORY);
        }
    };
    let [start, handshake, disconnect, notify, request] = queues.0;
    Ok(slot.write_cyclic(|me| EpObj {
        ep_type,
        me: me.clone(),
        shared: KArc::clone(&prov.shared),
        prov: KArc::downgrade(prov),
        refs: RefCount::default(),
        inner: platform.spin_lock(EpInner::new()),
        binding: platform.spin_lock(None),
        queued: platform.spin_lock(alloc::vec::Vec::new()),
        refused: platform.spin_lock(None),
        work,
        sched,
        start_queue: start,
        handshake_queue: handshake,
        disconnect_queue: disconnect,
        notify_queue: notify,
        request_queue: request,
    }))
}

/// The five queues of an endpoint, all or none.
struct Queues<P: Platform>([P::Queue; 5]);

impl<P: Platform> Queues<P> {
    fn new(platform: &P) -> Result<Self, NtStatus> {
        let a = platform.create_queue()?;
        let rest = (|| {
            Ok::<_, NtStatus>([
                platform.create_queue()?,
                platform.create_queue()?,
                platform.create_queue()?,
                platform.create_queue()?,
            ])
        })();
        match rest {
            Ok([b, c, d, e]) => Ok(Queues([a, b, c, d, e])),
            Err(status) => {
                a.purge();
                Err(status)
            }
        }
    }

    fn purge(&self) {
        for q in &self.0 {
            q.purge();
        }
    }
}

/// EP_DESTROY `UINT64 id`: see `Provider::destroy_ep`.
pub(crate) fn destroy<P: Platform, V: Verbs>(prov: &Provider<P, V>, req: P::Request, id: u64) {
    let status = prov.destroy_ep(id, false);
    req.complete(status, 0);
}

/// EP_MODIFY `{Id, Data = WV_IO_EP_OPTION_ROUTE}` + path: the route the endpoint connects
/// over (resolved in user mode); only when bound (`STATUS_NOT_SUPPORTED`).
pub(crate) fn modify<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    id: u64,
    route: IB_PATH_REC,
) {
    let Some(ep) = prov.acquire_ep(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let status = {
        let mut inner = ep.inner.lock();
        if inner.state() == EpState::AddressBound {
            inner.route = route;
            inner.set_state(EpState::RouteResolved);
            NtStatus::SUCCESS
        } else {
            NtStatus::NOT_SUPPORTED
        }
    };
    drop(ep);
    req.complete(status, 0);
}

/// EP_BIND: the local address (the user library reserved the port) and device; only when Idle
/// (`STATUS_NOT_SUPPORTED`). `Information = 56`: the input echoes back.
pub(crate) fn bind<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    bind: WV_IO_EP_BIND,
) {
    let Some(ep) = prov.acquire_ep(bind.Id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let ok = {
        let mut inner = ep.inner.lock();
        let ok = inner.state() == EpState::Idle;
        if ok {
            inner.attr.LocalAddress = bind.Address;
            inner.attr.Device = bind.Device;
            inner.set_state(EpState::AddressBound);
        }
        ok
    };
    drop(ep);
    if ok {
        req.complete(NtStatus::SUCCESS, size_of::<WV_IO_EP_BIND>());
    } else {
        req.complete(NtStatus::NOT_SUPPORTED, 0);
    }
}

/// Where a CONNECT or ACCEPT runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// In the caller's thread, now: nothing in it waits.
    Inline,
    /// On the endpoint's work item: it waits for the controller.
    Work,
}

/// CONNECT and ACCEPT: `STATUS_TOO_MANY_COMMANDS` while another waits for or runs on the
/// work item (OFW's single work entry); `STATUS_NOT_SUPPORTED` in a state that does not allow
/// it, checked before it parks (fix of spec §7.1-f: OFW queued it anyway, and its work item
/// then took whatever request was first in the endpoint's one queue). Otherwise it runs in the
/// caller's thread when `at` says nothing in it waits (the dispatcher calls at PASSIVE_LEVEL
/// with no lock held, what the work item would give it, minus the hand-off to a worker and the
/// wake-up that costs), or parks and the work item starts it (OFW always queued it).
fn start<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    id: u64,
    at: impl FnOnce(&EpObj<P, V>) -> Start,
    allowed: impl FnOnce(&EpInner) -> bool,
) {
    let Some(ep) = prov.acquire_ep(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let at = at(&ep);
    let cancels = {
        let mut inner = ep.inner.lock();
        if inner.busy {
            drop(inner);
            return req.complete(NtStatus::TOO_MANY_COMMANDS, 0);
        }
        if !allowed(&inner) {
            drop(inner);
            return req.complete(NtStatus::NOT_SUPPORTED, 0);
        }
        if at == Start::Work {
            if let Err((req, status)) = ep.start_queue.park(req) {
                drop(inner);
                return req.complete(status, 0);
            }
            inner.busy = true;
            None
        } else {
            inner.busy = true;
            // Read with the mark, as the work item reads it when it takes a request.
            Some((req, inner.cancels))
        }
    };
    match cancels {
        Some((req, cancels)) => ep.start_inline(req, cancels),
        None => super::kick(ep.arc()),
    }
}

/// EP_CONNECT: once the route is resolved. Runs in the caller's thread: a connection id and
/// the REQ, and nothing waits (the request then waits for the REP, parked).
pub(crate) fn connect<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    connect: WV_IO_EP_CONNECT,
) {
    start(
        prov,
        req,
        connect.Id,
        |_| Start::Inline,
        |inner| inner.state() == EpState::RouteResolved,
    );
}

/// The controller commands an ACCEPT makes: the QP to INIT, RTR and RTS.
const ACCEPT_COMMANDS: u64 = 3;

/// EP_ACCEPT: on the active side once the REP arrived (it sends the RTU), on the passive side
/// before it replied (it sends the REP). It moves the QP through three controller commands,
/// which may wait for the device: on the work item, unless the driver runs QP modifies in the
/// caller's thread anyway (`QpModifyMode::Inline`, OFW's way), or the device's commands have
/// measured shorter, all three together, than a hand-off to a worker ([`crate::hand_off`]),
/// where it runs there too.
pub(crate) fn accept<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    accept: WV_IO_EP_ACCEPT,
) {
    let mode = prov.shared.config.qp_modify;
    let at = |ep: &EpObj<P, V>| match mode {
        QpModifyMode::Inline => Start::Inline,
        QpModifyMode::Async if ep.inline_pays(ACCEPT_COMMANDS) => Start::Inline,
        QpModifyMode::Async => Start::Work,
    };
    start(prov, req, accept.Id, at, |inner| match inner.state() {
        EpState::ActiveConnect => inner.rep_received,
        EpState::PassiveConnect => !inner.rep_sent,
        _ => false,
    });
}

/// EP_REJECT `{Id}` + private data: refuses the request (passive) or the reply (active) with
/// `IB_REJ_USER_DEFINED`; the endpoint is disconnected. Only while connecting
/// (`STATUS_NOT_SUPPORTED`). The private data length is OFW's `(UINT8)(inlen - 16)`.
pub(crate) fn reject<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    id: u64,
    private_data_len: usize,
) {
    let Some(ep) = prov.acquire_ep(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    {
        let mut inner = ep.inner.lock();
        if !matches!(
            inner.state(),
            EpState::ActiveConnect | EpState::PassiveConnect
        ) {
            drop(inner);
            return req.complete(NtStatus::NOT_SUPPORTED, 0);
        }
        inner.set_state(EpState::Disconnected);
        // A handshake request cannot be answered any more: it ends now rather than never.
        while let Some(r) = ep.handshake_queue.retrieve_next() {
            r.complete(NtStatus::CANCELLED, 0);
        }
    }
    let start = size_of::<WV_IO_ID>();
    let len = usize::from(private_data_len as u8);
    let pdata = req.buffer().get(start..start + len).unwrap_or_default();
    let status = match ep.with_cm(|cm, id| cm.send_rej(id, REJ_USER_DEFINED, &[], pdata)) {
        Ok(()) => NtStatus::SUCCESS,
        Err(status) => status,
    };
    drop(ep);
    req.complete(status, 0);
}

/// EP_DISCONNECT `{Id, QpId}` → the QP-state bytes. Connected: the DREQ goes out and the
/// request pends until the DREP (or the DREQ's timeout), then its QP goes to ERROR.
/// Disconnecting (either way): the DREP answers, the QP goes to ERROR at once, and it completes
/// inline. Otherwise `STATUS_INVALID_DEVICE_STATE`.
///
/// Connected, when the device's QP command measures shorter than a hand-off to a worker
/// ([`crate::hand_off`]): the QP goes to ERROR first, in the caller's thread, and the DREQ
/// after it, the order of Linux's `rdma_disconnect`; the answer then completes the request
/// where it arrives, with no work item (OFW moved the QP after the answer, on its work item,
/// which costs a hand-off on the way back to the caller).
pub(crate) fn disconnect<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    mut req: P::Request,
    d: WV_IO_EP_DISCONNECT,
) {
    let Some(ep) = prov.acquire_ep(d.Id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    // The state is read again below: if it moved meanwhile, the QP step is done and counts
    // for whichever way this DISCONNECT ends.
    let early = (ep.state() == EpState::Connected && ep.inline_pays(1))
        .then(|| qp_to_error(&ep, &mut req, d.QpId));
    let req = {
        let mut inner = ep.inner.lock();
        match inner.state() {
            EpState::Connected => {
                // Parked before the DREQ leaves, so the DREP cannot come first. A QP moved
                // first stays in ERROR if this fails; the connection is still up, and the
                // next DISCONNECT moves it again (ERROR to ERROR) and sends the DREQ.
                if let Err((req, status)) = ep.disconnect_queue.park(req) {
                    drop(inner);
                    return req.complete(status, 0);
                }
                inner.set_state(EpState::ActiveDisconnect);
                inner.disconnect_early = early;
                None
            }
            EpState::ActiveDisconnect | EpState::PassiveDisconnect => Some(req),
            // Gone meanwhile (removal, an unknown event, a teardown): a QP moved first has
            // moved where the connection's end leaves it anyway.
            _ => {
                drop(inner);
                return req.complete(NtStatus::INVALID_DEVICE_STATE, 0);
            }
        }
    };
    let req = match req {
        Some(req) => Some(req),
        None => match ep.with_cm(|cm, id| cm.send_dreq(id, &[])) {
            Ok(()) => return,
            // No DREQ could go: as OFW, disconnect at once. Most often the peer's DREQ came
            // first; its event may have ended the request already (then only its answer is
            // left to send), or it may still come, and find the endpoint disconnected.
            Err(_) => ep.disconnect_queue.retrieve_next(),
        },
    };
    {
        let mut inner = ep.inner.lock();
        inner.disconnect_early = None;
        if inner.state() != EpState::Destroying {
            inner.set_state(EpState::Disconnected);
        }
        // The connection is gone: a DISCONNECT_NOTIFY parked while the DREQ was to go ends
        // now, as no event will end it once the endpoint is disconnected.
        end_notify::<P>(&ep.notify_queue);
    }
    let _ = ep.with_cm(|cm, id| cm.send_drep(id, &[]));
    match (req, early) {
        (Some(req), Some(status)) => answer(req, status, Answer::Inline),
        (Some(req), None) => disconnect_qp(&ep, req, d.QpId, Answer::Inline),
        (None, _) => {}
    }
}

/// Ends the DISCONNECT_NOTIFYs parked on an endpoint that went from connected (or
/// disconnecting actively) to disconnected without a CM event saying so.
pub(crate) fn end_notify<P: Platform>(queue: &P::Queue) {
    crate::notify::complete_all::<P>(queue, NtStatus::SUCCESS);
}

/// EP_DISCONNECT_NOTIFY: pends while connected (or disconnecting actively) until the
/// connection goes; completes at once once it went; otherwise `STATUS_NOT_SUPPORTED`.
pub(crate) fn disconnect_notify<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    id: u64,
) {
    let Some(ep) = prov.acquire_ep(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let inner = ep.inner.lock();
    match inner.state() {
        EpState::Connected | EpState::ActiveDisconnect => {
            if let Err((req, status)) = ep.notify_queue.park(req) {
                drop(inner);
                req.complete(status, 0);
            }
        }
        EpState::PassiveDisconnect | EpState::Disconnected => {
            drop(inner);
            req.complete(NtStatus::SUCCESS, 0);
        }
        _ => {
            drop(inner);
            req.complete(NtStatus::NOT_SUPPORTED, 0);
        }
    }
}

/// EP_QUERY: the endpoint's `WV_IO_EP_ATTRIBUTES`, `Information = 160`.
pub(crate) fn query<P: Platform, V: Verbs>(prov: &Provider<P, V>, mut req: P::Request, id: u64) {
    let Some(ep) = prov.acquire_ep(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let attr = ep.inner.lock().attr;
    drop(ep);
    let info = write_prefix(req.buffer_mut(), &attr).unwrap_or(0);
    req.complete(NtStatus::SUCCESS, info);
}

/// EP_CANCEL: a listener's GET_REQUESTs end with `STATUS_CANCELLED` and its queued endpoints
/// go back to Idle; a connection's parked requests end with `STATUS_CANCELLED`. The
/// connection's state does not change (OFW). Both whatever the state (OFW looked at it), so
/// nothing a listener that stopped listening might still hold outlasts the cancel.
pub(crate) fn cancel<P: Platform, V: Verbs>(prov: &Provider<P, V>, req: P::Request, id: u64) {
    let Some(ep) = prov.acquire_ep(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    listen::release_waiters(&ep, NtStatus::CANCELLED);
    ep.cancel_parked();
    drop(ep);
    req.complete(NtStatus::SUCCESS, 0);
}
