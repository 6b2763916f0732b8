//! Listening endpoints: EP_LISTEN, EP_GET_REQUEST, and the pairing of the connection requests
//! the CM queues on a listen with the GET_REQUESTs waiting for them (OFW `WvEpListen`,
//! `WvEpGetRequest`, `WvEpGetIbRequest`, `WvEpCancelListen`).
//!
//! A GET_REQUEST names the idle endpoint that takes the next connection. It is moved to
//! `Queued` and held by the listener until a request fills it, the listener is cancelled or
//! destroyed (it goes back to Idle), or its file closes. Each request is paired with the
//! endpoint its own GET_REQUEST names (OFW paired the oldest request with the oldest queued
//! endpoint, so a cancelled GET_REQUEST shifted every later pairing by one).
//!
//! The CM announces each queued request on the listen id; the listener counts them and its work
//! item takes them with `get_request`, which hands the new id over with the new endpoint's sink
//! already installed (fix of spec §7.1-h). Requests nobody asked for beyond the listen's
//! backlog are rejected; the CM hands requests over oldest first, so those are the oldest.

use wv_abi::{NtStatus, WV_IO_EP_GET_REQUEST, WV_IO_EP_LISTEN, read_prefix};
use wv_hal::cm::{REJ_INSUFFICIENT_RESOURCES, REQ_PRIVATE_DATA};
use wv_hal::{
    CmReqEvent, ConnectionManager, IoRequest, KArc, Platform, RequestQueue, SpinLock, Verbs,
};

use super::cma::{self, CMP_DST_IP};
use super::events::{ConnEvents, ListenEvents};
use super::{Binding, CmConn, EpObj, EpState, choose_cm};
use crate::fallible::push_locked;
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
        if inner.state != EpState::AddressBound {
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
        let sink = KArc::try_new(ListenEvents { ep: ep.me.clone() })?;
        let slot = KArc::<CmConn<V>>::try_reserve()?;
        let id = cm.create_id(sink.into())?;
        let conn = slot.write(CmConn { cm, id });
        {
            let mut inner = ep.inner.lock();
            if inner.state != EpState::AddressBound {
                drop(inner);
                conn_destroy(conn);
                return Err(NtStatus::NOT_SUPPORTED);
            }
            inner.state = EpState::Listening;
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
            if inner.state == EpState::Listening {
                inner.state = EpState::AddressBound;
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
        if inner.state != EpState::Idle {
            drop(inner);
            return req.complete(NtStatus::CONNECTION_IN_USE, 0);
        }
        inner.state = EpState::Queued;
    }
    // The listener's hold on the endpoint: it cannot be destroyed while queued (OFW).
    ep.refs.get();
    if let Err(((_, back), e)) = push_locked(&listener.queued, (g.EpId, KArc::clone(ep.arc()))) {
        give_back(&back);
        return req.complete(e.into(), 0);
    }
    if let Err((req, status)) = listener.request_queue.park(req) {
        take_queued(&listener, g.EpId);
        return req.complete(status, 0);
    }
    super::kick(listener.arc());
}

/// Returns an endpoint a listener held to Idle and drops the hold.
fn give_back<P: Platform, V: Verbs>(ep: &EpObj<P, V>) {
    {
        let mut inner = ep.inner.lock();
        if inner.state == EpState::Queued {
            inner.state = EpState::Idle;
        }
    }
    ep.refs.put();
}

/// Takes endpoint `id` off the listener's queue and gives it back to Idle.
fn take_queued<P: Platform, V: Verbs>(listener: &EpObj<P, V>, id: u64) {
    let taken = {
        let mut queued = listener.queued.lock();
        queued
            .iter()
            .position(|(i, _)| *i == id)
            .map(|at| queued.remove(at))
    };
    if let Some((_, ep)) = taken {
        give_back(&ep);
    }
}

/// OFW's `WvEpCancelListen`, and what a listener does before it goes: every GET_REQUEST ends
/// with `status` and every queued endpoint goes back to Idle. The listen itself stays.
/// IRQL <= DISPATCH_LEVEL.
pub(crate) fn release_waiters<P: Platform, V: Verbs>(listener: &EpObj<P, V>, status: NtStatus) {
    while let Some(r) = listener.request_queue.retrieve_next() {
        r.complete(status, 0);
    }
    loop {
        let next = listener.queued.lock().pop();
        let Some((_, ep)) = next else { break };
        give_back(&ep);
    }
}

/// The work item's share of a listener: pairs one announced request with a waiting
/// GET_REQUEST, or rejects one beyond the backlog. Returns whether it did anything.
pub(crate) fn pair_one<P: Platform, V: Verbs>(listener: &EpObj<P, V>) -> bool {
    let (pending, backlog) = {
        let inner = listener.inner.lock();
        if inner.state != EpState::Listening {
            return false;
        }
        (inner.pending, inner.backlog)
    };
    if pending == 0 {
        return false;
    }
    if let Some(req) = listener.request_queue.retrieve_next() {
        fill(listener, req);
        return true;
    }
    if pending > backlog {
        reject_one(listener);
        return true;
    }
    false
}

/// Takes the next request from the CM into the endpoint `req` names, and completes `req`.
fn fill<P: Platform, V: Verbs>(listener: &EpObj<P, V>, req: P::Request) {
    let g: WV_IO_EP_GET_REQUEST = match read_prefix(req.buffer()) {
        Ok(g) => g,
        Err(s) => return req.complete(s, 0),
    };
    let ep = listener
        .queued
        .lock()
        .iter()
        .find(|(id, _)| *id == g.EpId)
        .map(|(_, ep)| KArc::clone(ep));
    let Some(ep) = ep else {
        // Given back meanwhile (EP_CANCEL raced the pairing): nothing to fill.
        return req.complete(NtStatus::CANCELLED, 0);
    };
    // What the new id needs, allocated before the CM is asked: when memory is short the
    // request stays with the CM for a later GET_REQUEST, and this one fails (its endpoint
    // goes back to Idle).
    let made = KArc::try_new(ConnEvents { ep: ep.me.clone() })
        .and_then(|sink| Ok((sink, KArc::<CmConn<V>>::try_reserve()?)));
    let (sink, slot) = match made {
        Ok(made) => made,
        Err(e) => {
            take_queued(listener, g.EpId);
            return req.complete(e.into(), 0);
        }
    };
    let taken = listener.with_binding(|rdma, conn| {
        let (id, event) = conn.cm.get_request(&conn.id, sink.into())?;
        let new = Binding {
            rdma: KArc::clone(rdma),
            conn: slot.write(CmConn {
                cm: KArc::clone(&conn.cm),
                id,
            }),
        };
        // Bound inside the device's gate, as every id of an endpoint is.
        match accept_request(&ep, &event, new) {
            Ok(()) => Ok(true),
            Err(refused) => {
                // Nobody will answer this request: the peer hears so now, not at its timeout.
                let id = &refused.conn.id;
                let _ = conn.cm.send_rej(id, REJ_INSUFFICIENT_RESOURCES, &[], &[]);
                refused.destroy();
                Ok(false)
            }
        }
    });
    match taken {
        Ok(filled) => {
            {
                let mut inner = listener.inner.lock();
                inner.pending = inner.pending.saturating_sub(1);
            }
            if filled {
                take_off(listener, g.EpId);
                req.complete(NtStatus::SUCCESS, 0);
            } else {
                // The endpoint was given back (EP_CANCEL of the listener) or is being
                // destroyed since it was found, as when it is not found at all.
                take_queued(listener, g.EpId);
                req.complete(NtStatus::CANCELLED, 0);
            }
        }
        Err(NtStatus::NO_MORE_ENTRIES) => {
            // The count was ahead of the CM (a request it dropped): wait for the next one.
            listener.inner.lock().pending = 0;
            repark(listener, req);
        }
        Err(status) if status == REMOVED => req.complete(status, 0),
        Err(_) => {
            // The CM rejected that request (it could not make the id): the GET_REQUEST waits
            // for the next one.
            let mut inner = listener.inner.lock();
            inner.pending = inner.pending.saturating_sub(1);
            drop(inner);
            repark(listener, req);
        }
    }
}

/// Parks a GET_REQUEST again (at the end of the queue).
fn repark<P: Platform, V: Verbs>(listener: &EpObj<P, V>, req: P::Request) {
    if let Err((req, status)) = listener.request_queue.park(req) {
        req.complete(status, 0);
    }
}

/// Takes endpoint `id` off the listener's queue after a request filled it, dropping the hold.
fn take_off<P: Platform, V: Verbs>(listener: &EpObj<P, V>, id: u64) {
    let taken = {
        let mut queued = listener.queued.lock();
        queued
            .iter()
            .position(|(i, _)| *i == id)
            .map(|at| queued.remove(at))
    };
    if let Some((_, ep)) = taken {
        ep.refs.put();
    }
}

/// A new connection's endpoint takes the request (OFW `WvEpGetIbRequest`): its addresses
/// from the IP-CM header, device and path from the request, the peer's connect parameters
/// and the 56 bytes of private data after the header, and the new connection's CM id.
///
/// Only while it is still `Queued`, checked under its lock together with the move to
/// `PassiveConnect` and the binding: an EP_CANCEL of the listener may have given it back to
/// Idle, or a destroy torn it down, since the work item found it. The binding comes back then,
/// for the caller to reject (OFW bound it anyway: the GET_REQUEST succeeded on an endpoint
/// that could not answer, and a torn-down endpoint kept an id nobody would destroy).
fn accept_request<P: Platform, V: Verbs>(
    ep: &EpObj<P, V>,
    event: &CmReqEvent,
    binding: Binding<P, V>,
) -> Result<(), Binding<P, V>> {
    let (mut local, peer) = cma::addresses(&event.private_data);
    // The port the connection came in on (OFW left it 0).
    let mut sin = local.sin();
    sin.SinPort = ((event.service_id & 0xFFFF) as u16).to_be();
    local.set_sin(&sin);
    let mut inner = ep.inner.lock();
    if inner.state != EpState::Queued {
        return Err(binding);
    }
    inner.attr.LocalAddress = local;
    inner.attr.PeerAddress = peer;
    inner.attr.Device.DeviceGuid = event.local_ca_guid;
    inner.attr.Device.Pkey = event.primary_path.pkey;
    inner.attr.Device.PortNumber = event.port;
    let mut param = inner.attr.connect();
    param.ResponderResources = u64::from(event.responder_resources);
    param.InitiatorDepth = u64::from(event.initiator_depth);
    param.RetryCount = event.retry_count;
    param.RnrRetryCount = event.rnr_retry_count;
    param.DataLength = param.Data.len() as u8;
    param
        .Data
        .copy_from_slice(&event.private_data[cma::HEADER_LEN..REQ_PRIVATE_DATA]);
    inner.attr.set_connect(&param);
    inner.route = event.primary_path;
    inner.state = EpState::PassiveConnect;
    inner.rep_sent = false;
    // Under the endpoint's lock: a teardown (which moves it to Destroying under that lock
    // first) finds the id and destroys it.
    let old = ep.binding.lock().replace(binding);
    drop(inner);
    // A Queued endpoint has no id of its own; kept as `EpObj::bind` does, in case.
    if let Some(old) = old {
        old.destroy();
    }
    Ok(())
}

/// Takes one request nobody asked for beyond the backlog and rejects it.
fn reject_one<P: Platform, V: Verbs>(listener: &EpObj<P, V>) {
    let sink = match KArc::try_new(ListenEvents {
        ep: listener.me.clone(),
    }) {
        Ok(sink) => sink,
        // No memory now; the next run tries again.
        Err(_) => return,
    };
    let rejected = listener.with_binding(|_, conn| {
        let (id, _) = conn.cm.get_request(&conn.id, sink.into())?;
        let _ = conn.cm.send_rej(&id, REJ_INSUFFICIENT_RESOURCES, &[], &[]);
        conn.cm.destroy_id(id);
        Ok(())
    });
    let mut inner = listener.inner.lock();
    match rejected {
        Err(NtStatus::NO_MORE_ENTRIES) => inner.pending = 0,
        _ => inner.pending = inner.pending.saturating_sub(1),
    }
}
