//! Listening endpoints: EP_LISTEN, EP_GET_REQUEST, and the pairing of the connection requests
//! the CM queues on a listen with the GET_REQUESTs waiting for them (OFW `WvEpListen`,
//! `WvEpGetRequest`, `WvEpGetIbRequest`, `WvEpCancelListen`).
//!
//! A GET_REQUEST names the idle endpoint that takes the next connection. It is moved to
//! `Queued` and held by the listener until a request fills it, the listener is cancelled,
//! destroyed or removed, the GET_REQUEST itself is cancelled (it goes back to Idle), or its
//! file closes. Each request is paired with the endpoint its own GET_REQUEST names (OFW paired
//! the oldest request with the oldest queued endpoint, so a cancelled GET_REQUEST shifted every
//! later pairing by one).
//!
//! Each GET_REQUEST waits in its own endpoint's request queue, the endpoint on the listener's
//! list (oldest first). The listener's `inner` lock orders them: an endpoint is queued with
//! its GET_REQUEST parked, taken for a fill (with the fill's mark), given back, or found to
//! have lost its request only under it; its `queued` lock nests inside it.
//!
//! The CM announces each queued request on the listen id; the listener counts them, and they are
//! taken with `get_request`, which hands the new id over with the new endpoint's sink already
//! installed (fix of spec §7.1-h). When the oldest queued endpoint's GET_REQUEST waits, the
//! listen's own sink takes the request and completes the GET_REQUEST at once, as OFW's listen
//! callback did (`WvEpIbListenHandler` → `WvEpGetIbRequest` → `get_request_ex`, at
//! DISPATCH_LEVEL): no hand-off to a system worker on the way of a connection. Everything
//! else goes to the listener's work item: a request announced before any GET_REQUEST waits,
//! rejecting those beyond the listen's backlog (the CM hands requests over oldest first, so
//! those are the oldest), giving back an endpoint whose GET_REQUEST ended, a fill that
//! could not allocate or that the CM could not serve, and an id the sink took for an endpoint
//! that refused it (rejecting and destroying an id needs PASSIVE_LEVEL).

use wv_abi::{NtStatus, WV_IO_EP_GET_REQUEST, WV_IO_EP_LISTEN};
use wv_hal::cm::{REJ_INSUFFICIENT_RESOURCES, REQ_PRIVATE_DATA};
use wv_hal::{
    AllocError, CmEventSink, CmReqEvent, ConnectionManager, IoRequest, KArc, KArcSlot, Platform,
    RequestQueue, SpinLock, Verbs,
};

use super::cma::{self, CMP_DST_IP};
use super::events::{self, ConnEvents, ListenEvents};
use super::work::refused;
use super::{Binding, CmConn, Early, EpObj, EpState, Queued, choose_cm};
use crate::fallible::grow_locked;
use crate::provider::Provider;
use crate::status::REMOVED;

/// The backlog of a listen that asked for 0 (Winsock's `SOMAXCONN` meaning "a reasonable
/// maximum").
const DEFAULT_BACKLOG: u64 = 128;

/// EP_LISTEN `{Id, Backlog}`: the endpoint must be bound (`STATUS_NOT_SUPPORTED`); it listens
/// for the service id of its port. Bound to one address, the listen matches only requests for
/// that address (the IP-CM header's destination), otherwise every request for the port.
///
/// Beyond OFW: a listen the CM refuses leaves the endpoint bound (OFW left it `Listening`
/// without a listen), and the backlog is honoured.
pub(crate) fn listen<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    l: WV_IO_EP_LISTEN,
) {
    let Some(ep) = prov.acquire_ep(l.Id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let status = match start_listen(&ep, l.Backlog) {
        Ok(()) => NtStatus::SUCCESS,
        Err(status) => status,
    };
    drop(ep);
    req.complete(status, 0);
}

fn start_listen<P: Platform, V: Verbs>(ep: &EpObj<P, V>, backlog: u64) -> Result<(), NtStatus> {
    let (local, device) = {
        let inner = ep.inner.lock();
        if inner.state() != EpState::AddressBound {
            return Err(NtStatus::NOT_SUPPORTED);
        }
        (inner.attr.LocalAddress, inner.attr.Device.DeviceGuid)
    };
    let (compare, offset) = if cma::any_address(&local) {
        ([0u8; cma::HEADER_LEN], 0)
    } else {
        (cma::header(&local, &local), CMP_DST_IP)
    };
    let compare: &[u8] = if offset == 0 { &[] } else { &compare };
    let (rdma, cm) = choose_cm(&ep.shared, device).ok_or(NtStatus::NO_SUCH_DEVICE)?;
    {
        let Some(_share) = rdma.gate.share() else {
            return Err(REMOVED);
        };
        let events: KArc<dyn CmEventSink> =
            KArc::try_new(ListenEvents { ep: ep.me.clone() })?.into();
        let slot = KArc::<CmConn<V>>::try_reserve()?;
        let id = cm.create_id(KArc::clone(&events))?;
        let conn = slot.write(CmConn { cm, id, events });
        {
            let mut inner = ep.inner.lock();
            if inner.state() != EpState::AddressBound {
                drop(inner);
                conn_destroy(conn);
                return Err(NtStatus::NOT_SUPPORTED);
            }
            inner.set_state(EpState::Listening);
            inner.attr.set_backlog(backlog);
            inner.backlog = if backlog == 0 {
                DEFAULT_BACKLOG
            } else {
                backlog
            };
            inner.pending = 0;
        }
        ep.bind(Binding {
            rdma: KArc::clone(&rdma),
            conn,
        });
    }
    let service_id = cma::service_id(ep.ep_type, &local);
    let listened = ep.with_cm(|cm, id| cm.listen(id, service_id, compare, offset));
    if let Err(status) = listened {
        {
            let mut inner = ep.inner.lock();
            if inner.state() == EpState::Listening {
                inner.set_state(EpState::AddressBound);
            }
        }
        release_waiters(ep, status);
        ep.unbind();
        return Err(status);
    }
    Ok(())
}

/// Destroys a connection id that never reached an endpoint.
fn conn_destroy<V: Verbs>(conn: KArc<CmConn<V>>) {
    if let Ok(conn) = KArc::try_unwrap(conn) {
        conn.cm.destroy_id(conn.id);
    }
}

/// EP_GET_REQUEST `{Id = listener, EpId = idle endpoint}`: pends until a connection request
/// fills the endpoint. The listener must listen (`STATUS_NOT_SUPPORTED`), the endpoint be
/// Idle (`STATUS_CONNECTION_IN_USE`); either unknown is `STATUS_NOT_FOUND`.
pub(crate) fn get_request<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    g: WV_IO_EP_GET_REQUEST,
) {
    let Some(listener) = prov.acquire_ep(g.Id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    if listener.state() != EpState::Listening {
        return req.complete(NtStatus::NOT_SUPPORTED, 0);
    }
    let Some(ep) = prov.acquire_ep(g.EpId) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    {
        let mut inner = ep.inner.lock();
        if inner.state() != EpState::Idle {
            drop(inner);
            return req.complete(NtStatus::CONNECTION_IN_USE, 0);
        }
        inner.set_state(EpState::Queued);
        inner.listener = g.Id;
        inner.early = Early::None;
    }
    // The listener's hold on the endpoint: it cannot be destroyed while queued (OFW).
    ep.refs.get();
    if let Err((req, status)) = park_on(&listener, g.EpId, ep.arc(), req) {
        give_back(&ep);
        return req.complete(status, 0);
    }
    // Only a request the CM announced already needs the work item now; one announced later
    // kicks it from the listener's sink, which counts it under the same lock this reads, after
    // this GET_REQUEST was queued under it. (Kicking it anyway woke a worker for nothing.)
    let due = listener.inner.lock().pending > 0;
    if due {
        super::kick(listener.arc());
    }
}

/// Queues endpoint `id` on the listener and parks its GET_REQUEST in the endpoint's own
/// request queue, both under the listener's lock and only while it listens: whatever ends the
/// listener's GET_REQUESTs (removal, EP_CANCEL, destroy) changes its state or takes its
/// queued endpoints under that lock, so it either finds this one queued or this sees the new
/// state (a GET_REQUEST that checked the state before a removal and parked after it waited for
/// ever on a disconnected listener).
fn park_on<P: Platform, V: Verbs>(
    listener: &EpObj<P, V>,
    id: u64,
    ep: &KArc<EpObj<P, V>>,
    req: P::Request,
) -> Result<(), (P::Request, NtStatus)> {
    loop {
        if let Err(e) = grow_locked(&listener.queued, 1) {
            return Err((req, e.into()));
        }
        let inner = listener.inner.lock();
        if inner.state() != EpState::Listening {
            return Err((req, refused(&inner)));
        }
        let mut queued = listener.queued.lock();
        if queued.len() == queued.capacity() {
            // Another GET_REQUEST took the room made for this one: make more.
            continue;
        }
        queued.push(Queued {
            id,
            ep: KArc::clone(ep),
        });
        drop(queued);
        return match ep.request_queue.park(req) {
            Ok(()) => Ok(()),
            Err((req, status)) => {
                // The caller's `give_back` drops the entry's hold.
                drop(take_entry(listener, id));
                Err((req, status))
            }
        };
    }
}

/// Returns an endpoint a listener held to Idle and drops the hold.
fn give_back<P: Platform, V: Verbs>(ep: &EpObj<P, V>) {
    {
        let mut inner = ep.inner.lock();
        if inner.state() == EpState::Queued {
            inner.set_state(EpState::Idle);
            inner.early = Early::None;
        }
        inner.listener = 0;
    }
    ep.refs.put();
}

/// OFW's `WvEpCancelListen`, and what a listener does before it goes: every GET_REQUEST ends
/// with `status` and every queued endpoint goes back to Idle (before its GET_REQUEST ends, so
/// a caller that queues it again at once finds it Idle). The listen itself stays.
/// IRQL <= DISPATCH_LEVEL.
///
/// One endpoint at a time is taken off under the listener's lock (see [`park_on`]); a
/// GET_REQUEST queued while this runs is as concurrent with it as the ones before, and ends
/// with them.
pub(crate) fn release_waiters<P: Platform, V: Verbs>(listener: &EpObj<P, V>, status: NtStatus) {
    loop {
        let taken = {
            let _inner = listener.inner.lock();
            listener.queued.lock().pop()
        };
        let Some(taken) = taken else { break };
        // Its one GET_REQUEST (none while a fill takes it: that one ends there).
        let req = taken.ep.request_queue.retrieve_next();
        give_back(&taken.ep);
        if let Some(req) = req {
            req.complete(status, 0);
        }
    }
}

/// Gives back every endpoint queued on `listener` whose GET_REQUEST ended without it: the
/// I/O manager cancelled the request (CancelIoEx, the thread's exit), which the framework
/// completes by itself without telling the driver. OFW kept such an endpoint Queued with the
/// listener's reference until some later request filled it in place of another GET_REQUEST's
/// endpoint; pairing here follows each GET_REQUEST, so nothing would fill it and its destroy
/// answered `STATUS_ACCESS_DENIED` until the listener was cancelled.
///
/// Each GET_REQUEST waits in its own endpoint's queue, so an endpoint has lost its request
/// when that queue is empty and no fill is taking it, checked under the listener's lock.
/// IRQL <= DISPATCH_LEVEL.
pub(crate) fn reap<P: Platform, V: Verbs>(listener: &EpObj<P, V>) {
    loop {
        let orphan = {
            let inner = listener.inner.lock();
            let mut queued = listener.queued.lock();
            let at = queued
                .iter()
                .position(|q| Some(q.id) != inner.filling && q.ep.request_queue.parked() == 0);
            at.map(|at| queued.remove(at))
        };
        let Some(orphan) = orphan else { return };
        give_back(&orphan.ep);
    }
}

/// What the listener's work item does next.
enum Next<P: Platform, V: Verbs> {
    /// Fill the endpoint of this GET_REQUEST.
    Fill(P::Request, u64, KArc<EpObj<P, V>>),
    /// The oldest queued endpoint lost its GET_REQUEST: give it back.
    GiveBack(Queued<P, V>),
    /// Refuse a request beyond the backlog.
    Reject,
}

/// The work item's share of a listener: pairs one announced request with the oldest waiting
/// GET_REQUEST, or rejects one beyond the backlog. Returns whether it did anything (each time
/// it does, the announced requests or the queued endpoints become fewer, so the work item's
/// loop ends).
pub(crate) fn pair_one<P: Platform, V: Verbs>(listener: &EpObj<P, V>) -> bool {
    let next = {
        let mut inner = listener.inner.lock();
        // A fill the listen's sink runs ends by kicking the work item if more is due.
        if inner.state() != EpState::Listening || inner.pending == 0 || inner.filling.is_some() {
            return false;
        }
        let mut queued = listener.queued.lock();
        match queued.first() {
            Some(q) => match q.ep.request_queue.retrieve_next() {
                Some(req) => {
                    // Taken under the lock with the mark, so `reap` never sees the endpoint
                    // without its request.
                    inner.filling = Some(q.id);
                    Next::Fill(req, q.id, KArc::clone(&q.ep))
                }
                None => Next::GiveBack(queued.remove(0)),
            },
            None if inner.pending > inner.backlog => Next::Reject,
            None => return false,
        }
    };
    match next {
        Next::Fill(req, id, ep) => fill(listener, req, id, &ep),
        Next::GiveBack(q) => give_back(&q.ep),
        Next::Reject => reject_one(listener),
    }
    true
}

/// How a fill ended, for [`end_fill`].
enum Filled {
    /// The endpoint took the request: the GET_REQUEST succeeds.
    Taken,
    /// The GET_REQUEST ends with this status; its endpoint goes back to Idle.
    Failed(NtStatus),
    /// No request could be taken: the GET_REQUEST waits for the next one.
    Again,
}

/// What a fill allocates before it asks the CM: the new id's sink and the record of the id.
type Made<P, V> = (KArc<ConnEvents<P, V>>, KArcSlot<CmConn<V>>);

/// Allocates what a fill of `ep` needs (non-paged: IRQL <= DISPATCH_LEVEL).
fn make<P: Platform, V: Verbs>(ep: &EpObj<P, V>) -> Result<Made<P, V>, AllocError> {
    let sink = KArc::try_new(ConnEvents { ep: ep.me.clone() })?;
    Ok((sink, KArc::<CmConn<V>>::try_reserve()?))
}

/// Where a fill runs, which decides what it may do with an id the endpoint refused.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Site {
    /// The listener's work item, at PASSIVE_LEVEL: it rejects and destroys the id itself.
    Work,
    /// The listen's sink, at DISPATCH_LEVEL: the id goes to the listener's `refused` slot for
    /// the work item.
    Sink,
}

/// Takes the next request from the CM into endpoint `id`, which `req` names, and completes
/// `req` (or parks it again). The work item's fill.
fn fill<P: Platform, V: Verbs>(
    listener: &EpObj<P, V>,
    req: P::Request,
    id: u64,
    ep: &KArc<EpObj<P, V>>,
) {
    // What the new id needs, allocated before the CM is asked: when memory is short the
    // request stays with the CM for a later GET_REQUEST, and this one fails (its endpoint
    // goes back to Idle).
    match make(ep) {
        Ok(made) => hand_over(listener, req, id, ep, made, Site::Work),
        Err(e) => end_fill(listener, id, ep, req, Filled::Failed(e.into()), None),
    }
}

/// The CM announced a request on `listener` (its sink's `ReqReceived`): counts it and, when
/// the oldest queued endpoint's GET_REQUEST waits and no other fill runs, fills that endpoint
/// here and completes its GET_REQUEST (OFW's `WvEpIbListenHandler`). Returns whether the work
/// item is due: for everything else (see the module docs), and for what the fill leaves.
/// IRQL <= DISPATCH_LEVEL, inside the listen id's callback, no lock held; the only CM call it
/// makes is `get_request`, whose contract allows that.
pub(crate) fn announced<P: Platform, V: Verbs>(listener: &EpObj<P, V>) -> bool {
    let (id, ep) = {
        let mut inner = listener.inner.lock();
        if inner.state() != EpState::Listening {
            return false;
        }
        inner.pending += 1;
        if inner.filling.is_some() {
            return true;
        }
        let queued = listener.queued.lock();
        match queued.first() {
            Some(q) if q.ep.request_queue.parked() > 0 => (q.id, KArc::clone(&q.ep)),
            _ => return true,
        }
    };
    // Allocated with no lock held, then the endpoint is taken only if it is still the one
    // found: nothing is allocated for a request no GET_REQUEST waits for, and a short memory
    // leaves the request to the work item's fill, which reports it.
    let Ok(made) = make(&ep) else { return true };
    // The fill runs inside the listener's work gate, as the work item's does: its teardown
    // closes and drains the gate before it destroys the listen's id, which must then be unused
    // (the fill holds it while it asks the CM). Closed: the teardown ends everything.
    let Some(_running) = listener.work.share() else {
        return false;
    };
    let req = {
        let mut inner = listener.inner.lock();
        // One refused id at most waits for the work item: the slot is filled only by a fill
        // the sink runs, which starts only while it is empty and no other fill runs.
        if inner.state() != EpState::Listening
            || inner.filling.is_some()
            || listener.refused.lock().is_some()
        {
            return true;
        }
        let queued = listener.queued.lock();
        let Some(q) = queued
            .first()
            .filter(|q| q.id == id && KArc::ptr_eq(&q.ep, &ep))
        else {
            return true;
        };
        let Some(req) = q.ep.request_queue.retrieve_next() else {
            return true;
        };
        // The mark, as the work item's fill takes it (see [`reap`]).
        inner.filling = Some(id);
        req
    };
    hand_over(listener, req, id, &ep, made, Site::Sink);
    let inner = listener.inner.lock();
    let more =
        inner.pending > 0 && (!listener.queued.lock().is_empty() || inner.pending > inner.backlog);
    more || listener.refused.lock().is_some()
}

/// Asks the CM for the next request on `listener` as a new id for endpoint `id` (`ep`, whose
/// GET_REQUEST `req` is), binds it to the endpoint, and ends the fill.
fn hand_over<P: Platform, V: Verbs>(
    listener: &EpObj<P, V>,
    req: P::Request,
    id: u64,
    ep: &KArc<EpObj<P, V>>,
    (sink, slot): Made<P, V>,
    site: Site,
) {
    let taken = listener.with_binding(|rdma, conn| {
        let events: KArc<dyn CmEventSink> = sink.into();
        let (new_id, event) = conn.cm.get_request(&conn.id, KArc::clone(&events))?;
        let new = Binding {
            rdma: KArc::clone(rdma),
            conn: slot.write(CmConn {
                cm: KArc::clone(&conn.cm),
                id: new_id,
                events,
            }),
        };
        // Bound inside the device's gate, as every id of an endpoint is; so is an id left for
        // the work item parked, so a removal, which drains the gate first, finds it.
        let (accepted, left) = match accept_request(ep, &event, new) {
            Ok(stale) => (true, stale),
            Err(refused) => (false, Some(refused)),
        };
        if let Some(left) = left {
            match site {
                Site::Work if accepted => left.destroy(),
                // Nobody will answer this request: the peer hears so now, not at its timeout.
                Site::Work => refuse(left),
                Site::Sink => {
                    let old = listener.refused.lock().replace(left);
                    debug_assert!(old.is_none(), "the refused slot was taken");
                }
            }
        }
        Ok(accepted)
    });
    let (filled, count) = match taken {
        Ok(true) => (Filled::Taken, Some(1)),
        // The endpoint was given back (EP_CANCEL of the listener) or is being destroyed since
        // the work item took its GET_REQUEST.
        Ok(false) => (Filled::Failed(NtStatus::CANCELLED), Some(1)),
        // The count was ahead of the CM (a request it dropped): wait for the next one.
        Err(NtStatus::NO_MORE_ENTRIES) => (Filled::Again, Some(0)),
        Err(status) if status == REMOVED => (Filled::Failed(status), None),
        // The CM rejected that request (it could not make the id): the GET_REQUEST waits for
        // the next one.
        Err(_) => (Filled::Again, Some(1)),
    };
    end_fill(listener, id, ep, req, filled, count);
}

/// The end of a fill of endpoint `id`, under the listener's lock with the end of its mark
/// (see [`reap`]): the count of announced requests goes down by `taken` (`Some(0)`: the CM
/// has none left), and `req` completes, or waits again in its endpoint's queue (only while the
/// listener listens and still holds the endpoint, as [`park_on`] parks it).
fn end_fill<P: Platform, V: Verbs>(
    listener: &EpObj<P, V>,
    id: u64,
    ep: &EpObj<P, V>,
    req: P::Request,
    filled: Filled,
    taken: Option<u64>,
) {
    let mut inner = listener.inner.lock();
    inner.filling = None;
    match taken {
        Some(0) => inner.pending = 0,
        Some(n) => inner.pending = inner.pending.saturating_sub(n),
        None => {}
    }
    let held = listener.queued.lock().iter().any(|q| q.id == id);
    let status = match filled {
        Filled::Taken => NtStatus::SUCCESS,
        Filled::Failed(status) => status,
        // Given back meanwhile (EP_CANCEL of the listener): nothing is left to wait for.
        Filled::Again if !held => NtStatus::CANCELLED,
        Filled::Again if inner.state() != EpState::Listening => refused(&inner),
        Filled::Again => {
            // Back to the endpoint's queue by way of the listener's: a request cannot be
            // forwarded to the queue that handed it over (KMDF's verifier refuses that;
            // `WdfRequestRequeue`, which OFW used, is not a platform call). It keeps its
            // place: the endpoint stays first in the listener's queue.
            let back = listener
                .request_queue
                .park(req)
                .map(|()| listener.request_queue.retrieve_next());
            let req = match back {
                Ok(Some(req)) => req,
                // Cancelled in that instant (the platform completed it): its endpoint is free.
                Ok(None) => {
                    let entry = take_entry(listener, id);
                    drop(inner);
                    if let Some(q) = entry {
                        give_back(&q.ep);
                    }
                    return;
                }
                Err((req, status)) => {
                    let entry = take_entry(listener, id);
                    drop(inner);
                    return finish(entry, req, status);
                }
            };
            match ep.request_queue.park(req) {
                Ok(()) => return,
                Err((req, status)) => {
                    let entry = take_entry(listener, id);
                    drop(inner);
                    return finish(entry, req, status);
                }
            }
        }
    };
    let entry = take_entry(listener, id);
    drop(inner);
    finish(entry, req, status);
}

/// Takes endpoint `id` off the listener's queue.
fn take_entry<P: Platform, V: Verbs>(listener: &EpObj<P, V>, id: u64) -> Option<Queued<P, V>> {
    let mut queued = listener.queued.lock();
    let at = queued.iter().position(|q| q.id == id)?;
    Some(queued.remove(at))
}

/// Completes a GET_REQUEST whose fill ended with `status`, with its endpoint's entry if the
/// listener still held it: a filled endpoint keeps its new state and only loses the
/// listener's hold (an EP_CANCEL after the fill took the entry already, and the GET_REQUEST
/// still succeeded); any other goes back to Idle first.
fn finish<P: Platform, V: Verbs>(entry: Option<Queued<P, V>>, req: P::Request, status: NtStatus) {
    if let Some(q) = entry {
        if status == NtStatus::SUCCESS {
            q.ep.refs.put();
        } else {
            give_back(&q.ep);
        }
    }
    req.complete(status, 0);
}

/// A new connection's endpoint takes the request (OFW `WvEpGetIbRequest`): its addresses
/// from the IP-CM header, device and path from the request, the peer's connect parameters
/// and the 56 bytes of private data after the header, and the new connection's CM id.
///
/// Only while it is still `Queued`, checked under its lock together with the move to
/// `PassiveConnect` and the binding: an EP_CANCEL of the listener may have given it back to
/// Idle, or a destroy torn it down, since the fill found it. The binding comes back then,
/// for the caller to reject (OFW bound it anyway: the GET_REQUEST succeeded on an endpoint
/// that could not answer, and a torn-down endpoint kept an id nobody would destroy). What the
/// CM reported on the new id while it was handed over applies right after. Any id the
/// endpoint had before comes back for the caller to destroy (none should: a Queued endpoint
/// was never bound). IRQL <= DISPATCH_LEVEL.
fn accept_request<P: Platform, V: Verbs>(
    ep: &EpObj<P, V>,
    event: &CmReqEvent,
    binding: Binding<P, V>,
) -> Result<Option<Binding<P, V>>, Binding<P, V>> {
    let (mut local, peer) = cma::addresses(&event.private_data);
    // The port the connection came in on (OFW left it 0).
    let mut sin = local.sin();
    sin.SinPort = ((event.service_id & 0xFFFF) as u16).to_be();
    local.set_sin(&sin);
    let mut inner = ep.inner.lock();
    if inner.state() != EpState::Queued {
        return Err(binding);
    }
    inner.attr.LocalAddress = local;
    inner.attr.PeerAddress = peer;
    inner.attr.Device.DeviceGuid = event.local_ca_guid;
    inner.attr.Device.Pkey = event.primary_path.pkey;
    inner.attr.Device.PortNumber = event.port;
    let mut param = inner.attr.connect();
    param.ResponderResources = u64::from(event.params.responder_resources);
    param.InitiatorDepth = u64::from(event.params.initiator_depth);
    param.RetryCount = event.params.retry_count;
    param.RnrRetryCount = event.params.rnr_retry_count;
    param.DataLength = param.Data.len() as u8;
    param
        .Data
        .copy_from_slice(&event.private_data[cma::HEADER_LEN..REQ_PRIVATE_DATA]);
    inner.attr.set_connect(&param);
    inner.route = event.primary_path;
    inner.set_state(EpState::PassiveConnect);
    inner.rep_sent = false;
    inner.listener = 0;
    events::replay_early(ep, &mut inner);
    // Under the endpoint's lock: a teardown (which moves it to Destroying under that lock
    // first) finds the id and destroys it.
    let old = ep.binding.lock().replace(binding);
    drop(inner);
    Ok(old)
}

/// Rejects the request of an id nobody will answer and destroys it. PASSIVE_LEVEL.
fn refuse<P: Platform, V: Verbs>(left: Binding<P, V>) {
    let conn = &left.conn;
    let _ = conn
        .cm
        .send_rej(&conn.id, REJ_INSUFFICIENT_RESOURCES, &[], &[]);
    left.destroy();
}

/// The work item's share of an id the listen's sink took for an endpoint that refused it
/// (given back or torn down meanwhile): rejected and destroyed, inside the device's gate as
/// the sink parked it. Returns whether there was one.
///
/// Parked in a slot of one because the sink cannot wait for the id's destroy at
/// DISPATCH_LEVEL; the slot cannot overflow (see [`announced`]), and it is emptied by the
/// work item, by the listener's teardown after its own id is gone (no sink can park another
/// then) and by the device's removal, so no id is left behind.
pub(crate) fn drop_refused<P: Platform, V: Verbs>(listener: &EpObj<P, V>) -> bool {
    if listener.refused.lock().is_none() {
        return false;
    }
    let dropped = listener.with_binding(|_, _| {
        let left = listener.refused.lock().take();
        let some = left.is_some();
        if let Some(left) = left {
            refuse(left);
        }
        Ok(some)
    });
    // Without the listener's id (removed, or torn down) the slot is emptied where the id went.
    dropped.unwrap_or(false)
}

/// Empties the refused slot of a listener whose own id is gone. PASSIVE_LEVEL.
pub(crate) fn drop_refused_unbound<P: Platform, V: Verbs>(listener: &EpObj<P, V>) {
    let left = listener.refused.lock().take();
    if let Some(left) = left {
        refuse(left);
    }
}

/// Takes one request nobody asked for beyond the backlog and rejects it. Allocates nothing:
/// the refused id reports to the listener's own sink (which takes only `ReqReceived`, an
/// event a connection's id never has) for the instant it lives, so memory being short cannot
/// keep the request in the CM while the count says it is due.
fn reject_one<P: Platform, V: Verbs>(listener: &EpObj<P, V>) {
    let rejected = listener.with_binding(|_, conn| {
        let (id, _) = conn.cm.get_request(&conn.id, KArc::clone(&conn.events))?;
        let _ = conn.cm.send_rej(&id, REJ_INSUFFICIENT_RESOURCES, &[], &[]);
        conn.cm.destroy_id(id);
        Ok(())
    });
    let mut inner = listener.inner.lock();
    match rejected {
        Err(NtStatus::NO_MORE_ENTRIES) => inner.pending = 0,
        // Taken (or refused by the CM, which then dropped it), or the device is gone.
        _ => inner.pending = inner.pending.saturating_sub(1),
    }
}
