//! One connection endpoint of the soft CM (a CEP, AL's name; Linux's `cm_id_private`): the
//! IB CM state of one side of one connection, or of one listen, and the event it owes its
//! consumer.

use alloc::sync::Weak;

use wv_hal::cm::{DREP_PRIVATE_DATA, DREQ_PRIVATE_DATA, MRA_PRIVATE_DATA, RTU_PRIVATE_DATA};
use wv_hal::{CmEvent, CmEventSink, CmRepEvent, CmReqEvent, KArc};

use super::mad::{Body, Rej};
use crate::device::{Device, Rundown};

/// The connection states of IBA 12.9 that WinVerbs reaches (the MRA sub-states are folded
/// into the state they extend; LAP/APR and SIDR are not modelled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Created, nothing sent or received.
    Idle,
    /// Listening (the listen itself lives in the listen registry).
    Listen,
    /// Active: the REQ is out, the REP not in yet.
    ReqSent,
    /// Passive: a REQ came in; queued on its listener until `get_request` takes it.
    ReqRcvd,
    /// Passive: the REP is out, the RTU not in yet.
    RepSent,
    /// Active: the REP came in; the consumer answers with an RTU or a REJ.
    RepRcvd,
    /// Connected.
    Established,
    /// This side sent a DREQ and waits for the DREP.
    DreqSent,
    /// The peer sent a DREQ; the consumer answers with a DREP.
    DreqRcvd,
    /// Over (disconnected, rejected or timed out); the id waits for `destroy_id`.
    Timewait,
}

/// `4.096 µs × 2^exp`: how IBA encodes CM response times and packet lifetimes.
pub(crate) fn ib_time_ns(exp: u8) -> u64 {
    4096u64 << exp.min(31)
}

/// How long a side waits for the answer to a message: the peer's response time and the
/// packet's round trip (IBA 12.7.2: `response + 2 × packet lifetime`).
pub(crate) fn answer_time_ns(response: u8, packet_life: u8) -> u64 {
    ib_time_ns(response).saturating_add(2 * ib_time_ns(packet_life & 0x3F))
}

/// An event owed to a consumer, owned until it is handed over.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Owed {
    ReqReceived,
    ReqError,
    Rep(CmRepEvent),
    RepError,
    Rtu([u8; RTU_PRIVATE_DATA]),
    Dreq([u8; DREQ_PRIVATE_DATA]),
    DreqError,
    Drep([u8; DREP_PRIVATE_DATA]),
    Rej(Rej),
    Mra(u8, [u8; MRA_PRIVATE_DATA]),
}

impl Owed {
    fn as_event(&self) -> CmEvent<'_> {
        match self {
            Owed::ReqReceived => CmEvent::ReqReceived,
            Owed::ReqError => CmEvent::ReqError,
            Owed::Rep(rep) => CmEvent::RepReceived(rep),
            Owed::RepError => CmEvent::RepError,
            Owed::Rtu(p) => CmEvent::RtuReceived { private_data: p },
            Owed::Dreq(p) => CmEvent::DreqReceived { private_data: p },
            Owed::DreqError => CmEvent::DreqError,
            Owed::Drep(p) => CmEvent::DrepReceived { private_data: p },
            Owed::Rej(r) => CmEvent::RejReceived {
                reason: r.reason,
                ari: &r.ari[..usize::from(r.ari_len).min(r.ari.len())],
                private_data: &r.pdata,
            },
            Owed::Mra(t, p) => CmEvent::MraReceived {
                service_timeout: *t,
                private_data: p,
            },
        }
    }
}

/// An event and where it goes, taken out under the agent's lock and handed over after it.
pub(crate) struct Delivery {
    pub sink: KArc<dyn CmEventSink>,
    pub rundown: KArc<Rundown>,
    pub event: Owed,
}

impl Delivery {
    /// Calls the sink unless its id is being destroyed (`destroy_id` closed the run-down and
    /// waits for calls already in it). DISPATCH_LEVEL, no lock held.
    pub(crate) fn run(self) {
        if self.rundown.acquire() {
            self.sink.on_event(self.event.as_event());
            self.rundown.release();
        }
    }
}

/// One CEP.
pub(crate) struct Cep {
    /// Local communication id.
    pub id: u32,
    pub state: State,
    /// Where events go; `None` for a request no `get_request` took yet.
    pub sink: Option<KArc<dyn CmEventSink>>,
    pub rundown: KArc<Rundown>,
    /// Whether this side received the REQ.
    pub passive: bool,
    /// Local port (1-based) of the connection.
    pub port: u8,
    /// The peer's device (the REQ's destination until an answer names the peer).
    pub peer: Weak<Device>,
    pub peer_guid: u64,
    /// The peer's communication id (0 until known).
    pub peer_comm: u32,
    /// The REQ: the one sent (sender's view) or received (receiver's view).
    pub req: Option<CmReqEvent>,
    /// The REP: the one received (active) or sent (passive).
    pub rep: Option<CmRepEvent>,
    /// How long to wait for the answer to what this side sends.
    pub timeout_ns: u64,
    /// Resends left before a timeout is final.
    pub retries: u8,
    /// When the current wait ends.
    pub deadline: Option<u64>,
    /// The last message sent: what a timeout or a duplicate of the peer's message resends.
    pub last: Option<Body>,
}

impl Cep {
    pub(crate) fn new(
        id: u32,
        state: State,
        sink: Option<KArc<dyn CmEventSink>>,
        rundown: KArc<Rundown>,
    ) -> Cep {
        Cep {
            id,
            state,
            sink,
            rundown,
            passive: false,
            port: 0,
            peer: Weak::new(),
            peer_guid: 0,
            peer_comm: 0,
            req: None,
            rep: None,
            timeout_ns: 0,
            retries: 0,
            deadline: None,
            last: None,
        }
    }

    /// The event for the consumer, if it has one.
    pub(crate) fn owe(&self, event: Owed) -> Option<Delivery> {
        Some(Delivery {
            sink: self.sink.clone()?,
            rundown: self.rundown.clone(),
            event,
        })
    }

    /// Starts waiting `timeout_ns` for an answer to `body`, resending it `retries` times.
    pub(crate) fn wait_for_answer(&mut self, body: Body, now: u64, timeout_ns: u64, retries: u8) {
        self.last = Some(body);
        self.timeout_ns = timeout_ns;
        self.retries = retries;
        self.deadline = Some(now.saturating_add(timeout_ns));
    }

    /// The answer came: no more waiting or resending.
    pub(crate) fn answered(&mut self) {
        self.deadline = None;
        self.retries = 0;
    }
}
