//! What the CM's events do to an endpoint (OFW `WvEpIbCmHandler`, `WvEpIbListenHandler`).
//!
//! The sinks run at IRQL <= DISPATCH_LEVEL from the CM's own context: they change the state
//! under the endpoint's lock, take the requests the event ends out of their queue under the
//! same lock, and complete them after releasing it. Anything that needs PASSIVE_LEVEL (the
//! disconnect's QP → ERROR, a listener's call to `get_request`) goes to a work item.

use wv_abi::{NtStatus, WV_IO_CONNECT_PARAM};
use wv_hal::cm::REJ_PRIVATE_DATA;
use wv_hal::{
    CmEvent, CmEventSink, CmRepEvent, IoRequest, KArc, KWeak, Platform, RequestQueue, SpinLock,
    Verbs,
};

use super::{EpInner, EpObj, EpState};

/// Private data bytes WinVerbs keeps of a REP or REJ (`WV_IO_CONNECT_PARAM.Data`).
const KEPT: usize = 56;

/// The sink of a connection's CM id.
pub(crate) struct ConnEvents<P: Platform, V: Verbs> {
    pub ep: KWeak<EpObj<P, V>>,
}

/// The sink of a listening CM id.
pub(crate) struct ListenEvents<P: Platform, V: Verbs> {
    pub ep: KWeak<EpObj<P, V>>,
}

impl<P: Platform, V: Verbs> CmEventSink for ListenEvents<P, V> {
    /// A request is queued in the CM: count it and let the drainer pair it with a
    /// GET_REQUEST (it calls the CM, which needs PASSIVE_LEVEL).
    fn on_event(&self, event: CmEvent<'_>) {
        if event != CmEvent::ReqReceived {
            return;
        }
        if let Some(ep) = self.ep.upgrade() {
            {
                let mut inner = ep.inner.lock();
                if inner.state != EpState::Listening {
                    return;
                }
                inner.pending += 1;
            }
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
        if let Some(ep) = self.ep.upgrade() {
            on_connection_event(&ep, event);
        }
    }
}

/// One CM event on an endpoint's connection. IRQL <= DISPATCH_LEVEL.
fn on_connection_event<P: Platform, V: Verbs>(ep: &KArc<EpObj<P, V>>, event: CmEvent<'_>) {
    {
        use EpState::*;
        let handshake = &ep.handshake_queue;
        let notify = &ep.notify_queue;
        let disconnect = {
            let mut inner = ep.inner.lock();
            let mut disconnect = None;
            match (event, inner.state) {
                (_, Destroying) => {}
                (CmEvent::ReqError, ActiveConnect) if !inner.rep_received => {
                    // Nobody answered: the route is still good for another CONNECT.
                    inner.state = RouteResolved;
                    end::<P>(handshake, NtStatus::TIMEOUT, false);
                }
                (CmEvent::RepReceived(rep), ActiveConnect) if !inner.rep_received => {
                    inner.rep_received = true;
                    save_reply(&mut inner, rep);
                    end::<P>(handshake, NtStatus::SUCCESS, false);
                }
                (CmEvent::RepError, PassiveConnect) => {
                    inner.state = Disconnected;
                    end::<P>(handshake, NtStatus::IO_TIMEOUT, false);
                }
                (CmEvent::RtuReceived { .. }, PassiveConnect) => {
                    inner.state = Connected;
                    end::<P>(handshake, NtStatus::SUCCESS, true);
                }
                (CmEvent::DreqReceived { .. }, Connected) => {
                    inner.state = PassiveDisconnect;
                    end::<P>(notify, NtStatus::SUCCESS, false);
                }
                (CmEvent::DreqReceived { .. }, PassiveConnect) => {
                    // The RTU was lost and the peer already disconnects: the pending ACCEPT
                    // ends well, and a DISCONNECT answers the DREQ.
                    inner.state = PassiveDisconnect;
                    end::<P>(handshake, NtStatus::SUCCESS, true);
                }
                (CmEvent::DreqReceived { .. }, ActiveDisconnect)
                | (CmEvent::DrepReceived { .. }, ActiveDisconnect | Disconnected) => {
                    // Both sides disconnected at once, or the DREP of ours.
                    inner.state = Disconnected;
                    end::<P>(notify, NtStatus::SUCCESS, false);
                    disconnect = Some(NtStatus::SUCCESS);
                }
                (CmEvent::DreqError, ActiveDisconnect | Disconnected) => {
                    inner.state = Disconnected;
                    end::<P>(notify, NtStatus::TIMEOUT, false);
                    disconnect = Some(NtStatus::TIMEOUT);
                }
                (CmEvent::RejReceived { private_data, .. }, ActiveConnect | PassiveConnect) => {
                    inner.state = Disconnected;
                    save_reject(&mut inner, private_data);
                    end::<P>(handshake, NtStatus::CONNECTION_REFUSED, false);
                }
                (CmEvent::MraReceived { .. }, _) => {}
                (CmEvent::Other(_), _) => {
                    // OFW's default case: an event WinVerbs does not know ends the connection.
                    inner.state = Disconnected;
                    end::<P>(handshake, NtStatus::NOT_IMPLEMENTED, false);
                    end::<P>(notify, NtStatus::NOT_IMPLEMENTED, false);
                    disconnect = Some(NtStatus::NOT_IMPLEMENTED);
                }
                // Anything else does not fit the state (a late or repeated message): ignored.
                _ => {}
            }
            if let Some(status) = disconnect {
                inner.disconnect_status = status;
                inner.disconnect_due = true;
            }
            disconnect.is_some()
        };
        if disconnect {
            super::work::kick(ep);
        }
    }
}
