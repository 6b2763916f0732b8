//! An endpoint's mutable state, what its `inner` lock guards ([`EpInner`]), and its state
//! machine: OFW's `WV_ENDPOINT_STATE` ([`EpState`]) with the transitions the endpoint IOCTLs
//! and the CM's events make ([`EpState::may_become`]). The state changes only through
//! [`EpInner::set_state`], which checks the transition in debug builds, so a handler or an
//! event that moves an endpoint where the state machine does not go fails the tests that
//! drive it instead of leaving an endpoint no request can leave.

use wv_abi::{IB_PATH_REC, NtStatus, WV_IO_EP_ATTRIBUTES};

use super::Early;

/// An endpoint's state (OFW `WV_ENDPOINT_STATE`, the same names and order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EpState {
    Idle,
    AddressBound,
    Listening,
    Queued,
    RouteResolved,
    PassiveConnect,
    ActiveConnect,
    Connected,
    ActiveDisconnect,
    PassiveDisconnect,
    Disconnected,
    Destroying,
}

impl EpState {
    /// Every state, in OFW's order.
    #[cfg(test)]
    pub const ALL: [EpState; 12] = [
        EpState::Idle,
        EpState::AddressBound,
        EpState::Listening,
        EpState::Queued,
        EpState::RouteResolved,
        EpState::PassiveConnect,
        EpState::ActiveConnect,
        EpState::Connected,
        EpState::ActiveDisconnect,
        EpState::PassiveDisconnect,
        EpState::Disconnected,
        EpState::Destroying,
    ];

    /// Whether an endpoint in this state may move to `to`: one row per state it moves to,
    /// listing where it may come from. Disconnected takes every endpoint that may hold a CM id
    /// (removal of its device, or OFW's catch-all on a CM event), itself included (a late
    /// DREP or a DISCONNECT after the peer's); Destroying takes every endpoint once.
    pub const fn may_become(self, to: EpState) -> bool {
        use EpState::*;
        match to {
            // A listener gives back the endpoint it held for a GET_REQUEST.
            Idle => matches!(self, Queued),
            // EP_BIND; a listen the CM refused.
            AddressBound => matches!(self, Idle | Listening),
            // EP_LISTEN.
            Listening => matches!(self, AddressBound),
            // EP_GET_REQUEST hands the endpoint to a listener.
            Queued => matches!(self, Idle),
            // EP_MODIFY (route); a REQ nobody answered leaves the route good for another try.
            RouteResolved => matches!(self, AddressBound | ActiveConnect),
            // A connection request fills the endpoint.
            PassiveConnect => matches!(self, Queued),
            // CONNECT sends the REQ.
            ActiveConnect => matches!(self, RouteResolved),
            // The active side's ACCEPT sends the RTU; the passive side receives it.
            Connected => matches!(self, ActiveConnect | PassiveConnect),
            // EP_DISCONNECT sends the DREQ.
            ActiveDisconnect => matches!(self, Connected),
            // The peer's DREQ (before its RTU, too).
            PassiveDisconnect => matches!(self, Connected | PassiveConnect),
            Disconnected => !matches!(self, Idle | Queued | Destroying),
            Destroying => !matches!(self, Destroying),
        }
    }
}

/// What the `inner` lock guards.
pub(crate) struct EpInner {
    /// Changed only by [`EpInner::set_state`].
    state: EpState,
    /// What EP_QUERY returns.
    pub attr: WV_IO_EP_ATTRIBUTES,
    /// The primary path (EP_MODIFY, or the request's).
    pub route: IB_PATH_REC,
    /// Active side: the REP arrived, so ACCEPT may run.
    pub rep_received: bool,
    /// A CONNECT or ACCEPT waits for or runs on the work item, or runs in the caller's thread
    /// (OFW's single work entry: a second one meanwhile is `STATUS_TOO_MANY_COMMANDS`).
    pub busy: bool,
    /// EP_CANCELs so far (wrapping): a CONNECT or ACCEPT the work item was running, in no
    /// queue, when one came is cancelled when it would park (OFW's cancel missed it, and it
    /// waited for an answer nobody would send).
    pub cancels: u32,
    /// Passive side: the REP went out; the ACCEPT waits for the RTU.
    pub rep_sent: bool,
    /// The device whose CM made its id was removed (it is Disconnected for good): what its
    /// work item can no longer do ends with `STATUS_DEVICE_REMOVED`, as its parked requests
    /// did.
    pub removed: bool,
    /// The DISCONNECT's answer came: the work item moves its QP to ERROR and completes it.
    pub disconnect_due: bool,
    /// The parked DISCONNECT moved its QP to ERROR before its DREQ, with this status: its
    /// answer completes it at once (no work item is due).
    pub disconnect_early: Option<NtStatus>,
    /// Listener: requests the CM announced that no GET_REQUEST has taken yet.
    pub pending: u64,
    /// Listener: how many of them it keeps before it rejects more.
    pub backlog: u64,
    /// Listener: the endpoint whose GET_REQUEST a fill is taking, its work item's or its
    /// sink's (that request is in no queue meanwhile). One fill at a time.
    pub filling: Option<u64>,
    /// Queued endpoint: the id of the listener that holds it.
    pub listener: u64,
    /// Queued endpoint: what the CM reported on the new connection's id while the listener
    /// handed it over, applied once the endpoint takes the request.
    pub early: Early,
}

impl EpInner {
    /// A new endpoint's: Idle, nothing bound, no attributes yet.
    pub fn new() -> Self {
        EpInner {
            state: EpState::Idle,
            attr: WV_IO_EP_ATTRIBUTES::default(),
            route: IB_PATH_REC::default(),
            rep_received: false,
            busy: false,
            cancels: 0,
            rep_sent: false,
            removed: false,
            disconnect_due: false,
            disconnect_early: None,
            pending: 0,
            backlog: 0,
            filling: None,
            listener: 0,
            early: Early::None,
        }
    }

    /// The state now.
    pub fn state(&self) -> EpState {
        self.state
    }

    /// The one door for state changes: moves the endpoint to `to`, which must be a transition
    /// of the state machine ([`EpState::may_become`]; checked in debug builds).
    pub fn set_state(&mut self, to: EpState) {
        debug_assert!(
            self.state.may_become(to),
            "endpoint state {:?} → {to:?} is not a transition of the state machine",
            self.state
        );
        self.state = to;
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)
mod tests {
    extern crate std;

    use super::EpInner;
    use super::EpState::{self, *};

    /// The state machine edge by edge, with what moves the endpoint (spec §2.4, §3.8 and OFW's
    /// handlers), written apart from [`EpState::may_become`] so the two are checked against
    /// each other.
    const EDGES: &[(&str, EpState, EpState)] = &[
        ("EP_BIND", Idle, AddressBound),
        ("EP_GET_REQUEST", Idle, Queued),
        ("EP_LISTEN", AddressBound, Listening),
        ("EP_MODIFY route", AddressBound, RouteResolved),
        (
            "removal during a refused listen",
            AddressBound,
            Disconnected,
        ),
        ("the CM refuses the listen", Listening, AddressBound),
        ("removal of the listener's device", Listening, Disconnected),
        ("the listener gives it back", Queued, Idle),
        ("a connection request fills it", Queued, PassiveConnect),
        ("CONNECT's REQ", RouteResolved, ActiveConnect),
        (
            "removal, or a CM event, after an unanswered REQ",
            RouteResolved,
            Disconnected,
        ),
        ("nobody answers the REQ", ActiveConnect, RouteResolved),
        ("ACCEPT's RTU", ActiveConnect, Connected),
        (
            "REJ, EP_REJECT, a handshake that cannot go",
            ActiveConnect,
            Disconnected,
        ),
        ("the RTU arrives", PassiveConnect, Connected),
        (
            "the peer's DREQ before its RTU",
            PassiveConnect,
            PassiveDisconnect,
        ),
        (
            "REJ, the REP's timeout, EP_REJECT",
            PassiveConnect,
            Disconnected,
        ),
        ("EP_DISCONNECT's DREQ", Connected, ActiveDisconnect),
        ("the peer's DREQ", Connected, PassiveDisconnect),
        (
            "the RTU cannot go, an unknown CM event, removal",
            Connected,
            Disconnected,
        ),
        (
            "the DREP, or the DREQ's timeout",
            ActiveDisconnect,
            Disconnected,
        ),
        (
            "EP_DISCONNECT answers the DREQ",
            PassiveDisconnect,
            Disconnected,
        ),
        (
            "a late DREP, a DISCONNECT after the peer's",
            Disconnected,
            Disconnected,
        ),
        ("EP_DESTROY or cleanup", Idle, Destroying),
        ("EP_DESTROY or cleanup", AddressBound, Destroying),
        ("EP_DESTROY or cleanup", Listening, Destroying),
        ("EP_DESTROY or cleanup", Queued, Destroying),
        ("EP_DESTROY or cleanup", RouteResolved, Destroying),
        ("EP_DESTROY or cleanup", PassiveConnect, Destroying),
        ("EP_DESTROY or cleanup", ActiveConnect, Destroying),
        ("EP_DESTROY or cleanup", Connected, Destroying),
        ("EP_DESTROY or cleanup", ActiveDisconnect, Destroying),
        ("EP_DESTROY or cleanup", PassiveDisconnect, Destroying),
        ("EP_DESTROY or cleanup", Disconnected, Destroying),
    ];

    fn listed(from: EpState, to: EpState) -> bool {
        EDGES.iter().any(|&(_, f, t)| f == from && t == to)
    }

    fn in_state(state: EpState) -> EpInner {
        let mut inner = EpInner::new();
        inner.state = state;
        inner
    }

    #[test]
    fn the_table_has_exactly_the_state_machines_edges() {
        let mut legal = 0;
        for from in EpState::ALL {
            for to in EpState::ALL {
                assert_eq!(
                    from.may_become(to),
                    listed(from, to),
                    "{from:?} → {to:?}: the table and the edges disagree"
                );
                legal += usize::from(listed(from, to));
            }
        }
        assert_eq!(legal, EDGES.len(), "an edge is listed twice");
        // Nothing leaves Destroying, and a new endpoint starts Idle.
        assert!(EpState::ALL.iter().all(|&to| !Destroying.may_become(to)));
        assert_eq!(EpInner::new().state(), Idle);
    }

    #[test]
    fn set_state_takes_every_legal_transition() {
        for &(what, from, to) in EDGES {
            let mut inner = in_state(from);
            inner.set_state(to);
            assert_eq!(inner.state(), to, "{what}");
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    fn set_state_refuses_every_illegal_transition() {
        use std::vec::Vec;

        let illegal: Vec<_> = EpState::ALL
            .iter()
            .flat_map(|&from| EpState::ALL.iter().map(move |&to| (from, to)))
            .filter(|&(from, to)| !listed(from, to))
            .collect();
        assert_eq!(illegal.len(), 12 * 12 - EDGES.len());
        // Each refusal is a panic; its report would bury the test's own output.
        let report = std::panic::take_hook();
        std::panic::set_hook(std::boxed::Box::new(|_| {}));
        let accepted: Vec<_> = illegal
            .into_iter()
            .filter(|&(from, to)| {
                std::panic::catch_unwind(move || in_state(from).set_state(to)).is_ok()
            })
            .collect();
        std::panic::set_hook(report);
        assert!(accepted.is_empty(), "accepted: {accepted:?}");
    }
}
