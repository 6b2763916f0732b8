//! What the CM's events do to an endpoint (OFW `WvEpIbCmHandler`, `WvEpIbListenHandler`).
//!
//! The sinks run at IRQL <= DISPATCH_LEVEL from the CM's own context: they change the state
//! and complete the requests the event ends under the endpoint's lock. A listener's sink also
//! takes the announced request with `get_request` for a GET_REQUEST that waits (the one CM
//! call allowed there). Anything that needs PASSIVE_LEVEL (the disconnect's QP → ERROR,
//! rejecting and destroying a request's id) goes to a work item. An event on a new
//! connection's id that comes while the listener is still handing the id over is kept and
//! applied once the endpoint has taken the request.

use wv_abi::{NtStatus, WV_IO_CONNECT_PARAM};
use wv_hal::cm::REJ_PRIVATE_DATA;
use wv_hal::{
    CmEvent, CmEventSink, CmRepEvent, IoRequest, KWeak, Platform, RequestQueue, SpinLock, Verbs,
};

use super::{Early, EpInner, EpObj, EpState};

/// Private data bytes WinVerbs keeps of a REP or REJ (`WV_IO_CONNECT_PARAM.Data`).
pub(crate) const KEPT: usize = 56;

/// The sink of a connection's CM id.
pub(crate) struct ConnEvents<P: Platform, V: Verbs> {
    pub ep: KWeak<EpObj<P, V>>,
}

/// The sink of a listening CM id.
pub(crate) struct ListenEvents<P: Platform, V: Verbs> {
    pub ep: KWeak<EpObj<P, V>>,
}

impl<P: Platform, V: Verbs> CmEventSink for ListenEvents<P, V> {
    /// A request is queued in the CM: the waiting GET_REQUEST takes it here, or the work item
    /// pairs it later ([`super::listen::announced`]).
    fn on_event(&self, event: CmEvent<'_>) {
        if event != CmEvent::ReqReceived {
            return;
        }
        if let Some(ep) = self.ep.upgrade()
            && super::listen::announced(&ep)
        {
            super::work::kick(&ep);
        }
    }
}

/// Completes every request parked in `queue` with `status` (OFW's `WvCompleteRequests`, with
/// `with_info` its `...WithInformation`: `Information = outlen`, the QP-state bytes a passive
/// ACCEPT wrote). Called with the endpoint's lock held, as OFW completes under the queue lock:
/// the event path allocates nothing.
fn end<P: Platform>(queue: &P::Queue, status: NtStatus, with_info: bool) {
    while let Some(r) = queue.retrieve_next() {
        let info = if with_info { r.output_len() } else { 0 };
        r.complete(status, info);
    }
}

/// OFW's `WvEpSaveReply`: the REP's first 56 bytes of private data and the peer's read limits
/// seen from this side (its responder resources are this side's initiator depth).
fn save_reply(inner: &mut EpInner, rep: &CmRepEvent) {
    let mut param = inner.attr.connect();
    param.Data.copy_from_slice(&rep.private_data[..KEPT]);
    param.DataLength = KEPT as u8;
    param.InitiatorDepth = u64::from(rep.responder_resources);
    param.ResponderResources = u64::from(rep.initiator_depth);
    param.RnrRetryCount = rep.rnr_retry_count;
    inner.attr.set_connect(&param);
}

/// OFW's `WvEpSaveReject`: the REJ's first 56 bytes of private data (zero beyond what came).
fn save_reject(inner: &mut EpInner, private_data: &[u8]) {
    let mut param: WV_IO_CONNECT_PARAM = inner.attr.connect();
    param.Data = [0; KEPT];
    let n = private_data.len().min(KEPT).min(REJ_PRIVATE_DATA);
    param.Data[..n].copy_from_slice(&private_data[..n]);
    param.DataLength = KEPT as u8;
    inner.attr.set_connect(&param);
}

impl<P: Platform, V: Verbs> CmEventSink for ConnEvents<P, V> {
    fn on_event(&self, event: CmEvent<'_>) {
        let Some(ep) = self.ep.upgrade() else { return };
        let disconnect = {
            let mut inner = ep.inner.lock();
            if inner.state() == EpState::Queued {
                keep_early(&mut inner, event);
                false
            } else {
                apply(&ep, &mut inner, event)
            }
        };
        if disconnect {
            super::work::kick(&ep);
        }
    }
}

/// An event on the id a listener is handing over to this (still Queued) endpoint: kept for
/// [`replay_early`]. A REP, RTU or timeout does not fit an id that has answered nothing yet,
/// and an MRA changes nothing.
fn keep_early(inner: &mut EpInner, event: CmEvent<'_>) {
    inner.early = match event {
        CmEvent::RejReceived {
            reason,
            private_data,
            ..
        } => {
            let mut data = [0u8; KEPT];
            let len = private_data.len().min(KEPT);
            data[..len].copy_from_slice(&private_data[..len]);
            Early::Rejected {
                reason,
                data,
                len: len as u8,
            }
        }
        CmEvent::DreqReceived { .. } => Early::Disconnecting,
        CmEvent::Other(kind) => Early::Other(kind),
        _ => return,
    };
}

/// Applies what [`keep_early`] kept, now that the endpoint took the request (PassiveConnect,
/// nothing parked on it yet), as if it had come right after. Under the endpoint's lock.
pub(crate) fn replay_early<P: Platform, V: Verbs>(ep: &EpObj<P, V>, inner: &mut EpInner) {
    let early = core::mem::replace(&mut inner.early, Early::None);
    let event = match &early {
        Early::None => return,
        Early::Rejected { reason, data, len } => CmEvent::RejReceived {
            reason: *reason,
            ari: &[],
            private_data: &data[..usize::from(*len)],
        },
        Early::Disconnecting => CmEvent::DreqReceived { private_data: &[] },
        Early::Other(kind) => CmEvent::Other(*kind),
    };
    let disconnect = apply(ep, inner, event);
    debug_assert!(
        !disconnect,
        "no DISCONNECT can wait on a connection just taken"
    );
}

/// One CM event on an endpoint's connection (OFW `WvEpIbCmHandler`), under the endpoint's
/// lock. IRQL <= DISPATCH_LEVEL. Returns whether the DISCONNECT (if one waits) is now due for
/// the work item's QP → ERROR step.
pub(crate) fn apply<P: Platform, V: Verbs>(
    ep: &EpObj<P, V>,
    inner: &mut EpInner,
    event: CmEvent<'_>,
) -> bool {
    use EpState::*;
    let handshake = &ep.handshake_queue;
    let notify = &ep.notify_queue;
    match (event, inner.state()) {
        (_, Destroying) => {}
        (CmEvent::ReqError, ActiveConnect) if !inner.rep_received => {
            // Nobody answered: the route is still good for another CONNECT.
            inner.set_state(RouteResolved);
            end::<P>(handshake, NtStatus::TIMEOUT, false);
        }
        (CmEvent::RepReceived(rep), ActiveConnect) if !inner.rep_received => {
            inner.rep_received = true;
            save_reply(inner, rep);
            end::<P>(handshake, NtStatus::SUCCESS, false);
        }
        (CmEvent::RepError, PassiveConnect) => {
            inner.set_state(Disconnected);
            end::<P>(handshake, NtStatus::IO_TIMEOUT, false);
        }
        (CmEvent::RtuReceived { .. }, PassiveConnect) => {
            inner.set_state(Connected);
            end::<P>(handshake, NtStatus::SUCCESS, true);
        }
        (CmEvent::DreqReceived { .. }, Connected) => {
            inner.set_state(PassiveDisconnect);
            end::<P>(notify, NtStatus::SUCCESS, false);
        }
        (CmEvent::DreqReceived { .. }, PassiveConnect) => {
            // The RTU was lost and the peer already disconnects: the pending ACCEPT ends
            // well, and a DISCONNECT answers the DREQ.
            inner.set_state(PassiveDisconnect);
            end::<P>(handshake, NtStatus::SUCCESS, true);
        }
        // A DREQ in any other state (both sides disconnecting at once, a peer that leaves
        // before the active side's ACCEPT), the DREP of ours, or our DREQ's timeout: OFW's
        // `WvEpCompleteDisconnect`. The endpoint is disconnected, what waits on it ends with
        // the event's status (`STATUS_TIMEOUT` is a success code), and a DISCONNECT moves its
        // QP to ERROR on the work item and ends with that modify's status.
        (CmEvent::DreqReceived { .. } | CmEvent::DrepReceived { .. }, _) => {
            return disconnected(ep, inner, NtStatus::SUCCESS);
        }
        (CmEvent::DreqError, _) => {
            return disconnected(ep, inner, NtStatus::TIMEOUT);
        }
        (CmEvent::RejReceived { private_data, .. }, ActiveConnect | PassiveConnect) => {
            inner.set_state(Disconnected);
            save_reject(inner, private_data);
            end::<P>(handshake, NtStatus::CONNECTION_REFUSED, false);
        }
        (CmEvent::MraReceived { .. }, _) => {}
        (CmEvent::Other(_), _) => {
            // OFW's default case: an event WinVerbs does not know ends the connection, and
            // every request waiting on it, a DISCONNECT too (no QP step).
            inner.set_state(Disconnected);
            inner.disconnect_early = None;
            for queue in [&ep.start_queue, handshake, notify, &ep.disconnect_queue] {
                end::<P>(queue, NtStatus::NOT_IMPLEMENTED, false);
            }
        }
        // Anything else does not fit the state (a late or repeated message): ignored.
        _ => {}
    }
    false
}

/// OFW's `WvEpCompleteDisconnect`: the endpoint is disconnected, the requests waiting for the
/// handshake or the disconnect end with `status`, and the DISCONNECT is due. One whose QP
/// went to ERROR before its DREQ ends here with that modify's status and `Information =
/// outlen`, as from the work item (the event's own status is a success code either way, which
/// OFW did not pass on); returns whether the work item must run.
fn disconnected<P: Platform, V: Verbs>(
    ep: &EpObj<P, V>,
    inner: &mut EpInner,
    status: NtStatus,
) -> bool {
    inner.set_state(EpState::Disconnected);
    end::<P>(&ep.handshake_queue, status, false);
    end::<P>(&ep.notify_queue, status, false);
    if let Some(moved) = inner.disconnect_early.take() {
        if let Some(req) = ep.disconnect_queue.retrieve_next() {
            super::work::answer(req, moved, super::work::Answer::Deferred);
        }
        return false;
    }
    inner.disconnect_due = true;
    true
}
