//! A device's CM agent: its CEPs, the inbox of CM messages that came to its ports, and the DPC
//! that handles them and the CEPs' timeouts.
//!
//! Everything a consumer sees happens in that DPC, at DISPATCH_LEVEL: a message is handled
//! under the agent's lock, which yields at most one message to send and one event to report,
//! and both go out after the lock is released (so a sink may call back into the CM, and a
//! message to this same device only lands in the inbox). One DPC object serves the inbox and
//! the timeouts: a message arms it for "now" (on the host's threaded platform it then runs on
//! the sender's thread once the sender's call has returned), a wait for its deadline, and at
//! its end it re-arms itself for the earliest deadline left. Only one instance dispatches at a time, so a
//! CEP's events reach its sink in the order its messages came.

use alloc::collections::VecDeque;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;

use crate::lock::{Mutex, MutexGuard};
use spin::Once;
use wv_abi::NtStatus;
use wv_hal::cm::{REJ_INSUFFICIENT_RESOURCES, REJ_INVALID_SERVICE_ID, REJ_TIMEOUT};
use wv_hal::{AllocError, CmReqEvent, Dpc, KArc};

use super::cep::{Cep, Delivery, Owed, State, answer_time_ns};
use super::listens::{self, Listens};
use super::mad::{Body, Mad, Rej, post};
use crate::device::{Device, Rundown};
use crate::fallible::{self, Room};

/// Most CEPs a device has at once (the slot is the low 16 bits of a communication id).
const MAX_CEPS: usize = 0xFFFF;

/// A message to send once the agent's lock is released.
pub(crate) struct Out {
    to: Option<Arc<Device>>,
    mad: Mad,
}

impl Out {
    pub(crate) fn send(self, from: &Device) {
        post(from, self.to, self.mad);
    }
}

/// `body` from `cep` to its peer.
pub(crate) fn to_peer(dev: &Arc<Device>, cep: &Cep, body: Body) -> Out {
    Out {
        to: cep.peer.upgrade(),
        mad: Mad {
            from: Arc::downgrade(dev),
            from_guid: dev.guid,
            from_comm: cep.id,
            to_comm: cep.peer_comm,
            body,
        },
    }
}

/// A REJ for a REQ that got no CEP (nobody listens, or no room).
fn reject_req(dev: &Arc<Device>, mad: &Mad, reason: u16) -> Out {
    Out {
        to: mad.from.upgrade(),
        mad: Mad {
            from: Arc::downgrade(dev),
            from_guid: dev.guid,
            from_comm: 0,
            to_comm: mad.from_comm,
            body: Body::Rej(Rej::bare(reason)),
        },
    }
}

/// What handling a message or a timeout leads to.
#[derive(Default)]
pub(crate) struct Step {
    pub out: Option<Out>,
    pub delivery: Option<Delivery>,
}

impl Step {
    /// Sends the message, then reports the event. No lock held.
    pub(crate) fn finish(self, dev: &Device) {
        if let Some(out) = self.out {
            out.send(dev);
        }
        if let Some(d) = self.delivery {
            d.run();
        }
    }
}

/// The CEPs and the free list of their slots, grown together with the agent's lock released
/// (`fallible::with_room_in` over [`AgentState::room`]). The free list's capacity never falls
/// below the slots', so a removal never allocates.
pub(crate) struct Slots {
    ceps: Vec<Option<Cep>>,
    free: Vec<u16>,
}

impl Room for Slots {
    fn has_room(&self) -> bool {
        // At the limit there is nothing to grow: the insert answers for it.
        !self.free.is_empty() || self.ceps.has_room() || self.ceps.len() >= MAX_CEPS
    }
    fn wanted(&self) -> usize {
        self.ceps.wanted().min(MAX_CEPS)
    }
    fn fits(&self, other: &Self) -> bool {
        self.ceps.fits(&other.ceps) && self.free.fits(&other.free)
    }
    fn with_room_for(n: usize) -> Result<Self, AllocError> {
        Ok(Slots {
            ceps: fallible::vec_with_capacity(n)?,
            free: fallible::vec_with_capacity(n)?,
        })
    }
    fn take_all(&mut self, other: &mut Self) {
        self.ceps.append(&mut other.ceps);
        self.free.append(&mut other.free);
    }
}

pub(crate) struct AgentState {
    slots: Slots,
    generation: u16,
    inbox: VecDeque<Mad>,
    /// The due time the DPC's timer is set for (it may have fired already).
    armed: Option<u64>,
    /// A DPC instance is dispatching; `again` asks it for one more round.
    dispatching: bool,
    again: bool,
}

impl AgentState {
    fn slot(id: u32) -> Option<usize> {
        ((id & 0xFFFF) as usize).checked_sub(1)
    }

    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut Cep> {
        let slot = Self::slot(id)?;
        self.slots
            .ceps
            .get_mut(slot)?
            .as_mut()
            .filter(|c| c.id == id)
    }

    /// The slots, for making room before an insert.
    pub(crate) fn room(&mut self) -> Option<&mut Slots> {
        Some(&mut self.slots)
    }

    /// A new CEP made by `make` from its communication id, in a slot the caller made room
    /// for. Allocates nothing.
    pub(crate) fn insert(&mut self, make: impl FnOnce(u32) -> Cep) -> Result<u32, NtStatus> {
        let s = &mut self.slots;
        let slot = match s.free.pop() {
            Some(slot) => usize::from(slot),
            None if s.ceps.len() >= MAX_CEPS => return Err(NtStatus::INSUFFICIENT_RESOURCES),
            None if s.ceps.has_room() => {
                s.ceps.push(None);
                s.ceps.len() - 1
            }
            None => return Err(NtStatus::NO_MEMORY),
        };
        // The generation in the high half keeps a reused slot from answering to an old id.
        self.generation = self.generation.wrapping_add(1).max(1);
        let id = (u32::from(self.generation) << 16) | (slot as u32 + 1);
        s.ceps[slot] = Some(make(id));
        Ok(id)
    }

    pub(crate) fn remove(&mut self, id: u32) -> Option<Cep> {
        let slot = Self::slot(id)?;
        let entry = self.slots.ceps.get_mut(slot)?;
        if entry.as_ref().is_none_or(|c| c.id != id) {
            return None;
        }
        let cep = entry.take();
        // Within the free list's capacity (see `Slots`).
        self.slots.free.push(slot as u16);
        cep
    }

    /// The CEP connected to the peer's communication id `comm` on the device `guid`.
    fn by_peer(&mut self, guid: u64, comm: u32) -> Option<&mut Cep> {
        self.slots
            .ceps
            .iter_mut()
            .flatten()
            .find(|c| c.peer_guid == guid && c.peer_comm == comm && comm != 0)
    }

    fn next_deadline(&self) -> Option<u64> {
        self.slots
            .ceps
            .iter()
            .flatten()
            .filter_map(|c| c.deadline)
            .min()
    }

    pub(crate) fn live(&self) -> usize {
        self.slots.ceps.iter().flatten().count()
    }
}

/// The CM agent of one device.
pub(crate) struct Agent {
    st: Mutex<AgentState>,
    dpc: Once<KArc<dyn Dpc>>,
    /// The listens of a device on no fabric (a fabric keeps the host's).
    pub own_listens: Mutex<Listens>,
}

/// The DPC of a device's agent.
struct AgentDpc(Weak<Device>);

impl Dpc for AgentDpc {
    fn run(&self) {
        if let Some(dev) = self.0.upgrade() {
            Agent::dispatch(&dev);
        }
    }
}

impl Agent {
    pub(crate) const fn new() -> Agent {
        Agent {
            st: Mutex::new(AgentState {
                slots: Slots {
                    ceps: Vec::new(),
                    free: Vec::new(),
                },
                generation: 0,
                inbox: VecDeque::new(),
                armed: None,
                dispatching: false,
                again: false,
            }),
            dpc: Once::new(),
            own_listens: Mutex::new(Listens::new()),
        }
    }

    /// Wires the agent's DPC (once the device has its `Arc`).
    pub(crate) fn attach(dev: &Arc<Device>) -> Result<(), AllocError> {
        let dpc = KArc::try_new(AgentDpc(Arc::downgrade(dev)))?;
        dev.cm.dpc.call_once(|| dpc.into());
        Ok(())
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, AgentState> {
        self.st.lock()
    }

    /// Makes the DPC run by `due` (unless it already will, or is running and re-arms itself).
    /// Called with the lock held, so arming and the DPC's own re-arming are ordered.
    pub(crate) fn arm(&self, st: &mut AgentState, dev: &Device, due: u64) {
        if st.dispatching {
            st.again = true;
            return;
        }
        if st.armed.is_none_or(|a| due < a)
            && let Some(dpc) = self.dpc.get()
        {
            dev.set_timer(dpc, due);
            st.armed = Some(due);
        }
    }

    /// A message arrived at one of the device's ports.
    pub(crate) fn receive(&self, dev: &Device, mad: Mad) {
        let Ok(mut st) = fallible::with_room_in(|| self.st.lock(), |st| Some(&mut st.inbox)) else {
            // No room: the message is lost, as a MAD the receive queue had no buffer for.
            return;
        };
        // Within the room made above.
        st.inbox.push_back(mad);
        let now = dev.now_ns();
        self.arm(&mut st, dev, now);
    }

    /// The DPC: messages first, then timeouts, until nothing is left; then the timer is set
    /// for the next deadline. DISPATCH_LEVEL.
    fn dispatch(dev: &Arc<Device>) {
        if !dev.dispatch.acquire() {
            // Removed: nothing more happens on this device.
            return;
        }
        let agent = &dev.cm;
        {
            let mut st = agent.st.lock();
            if st.dispatching {
                st.again = true;
                drop(st);
                dev.dispatch.release();
                return;
            }
            st.dispatching = true;
        }
        loop {
            let mad = agent.st.lock().inbox.pop_front();
            if let Some(mad) = mad {
                agent.handle(dev, mad);
                continue;
            }
            if agent.expire_one(dev, dev.now_ns()) {
                continue;
            }
            let mut st = agent.st.lock();
            if core::mem::take(&mut st.again) || !st.inbox.is_empty() {
                continue;
            }
            st.dispatching = false;
            match st.next_deadline() {
                Some(due) => {
                    if let Some(dpc) = agent.dpc.get() {
                        dev.set_timer(dpc, due);
                    }
                    st.armed = Some(due);
                }
                None => {
                    if st.armed.take().is_some()
                        && let Some(dpc) = agent.dpc.get()
                    {
                        dev.cancel_timer(dpc);
                    }
                }
            }
            break;
        }
        dev.dispatch.release();
    }

    fn handle(&self, dev: &Arc<Device>, mad: Mad) {
        if let Body::Req(req) = mad.body {
            return self.on_req(dev, &mad, req);
        }
        let step = {
            let mut st = self.st.lock();
            on_message(&mut st, dev, mad, dev.now_ns())
        };
        step.finish(dev);
    }

    /// A REQ: a retry of one already here is answered as before; a new one becomes a CEP
    /// queued on the listen it is for, or is rejected when nobody listens.
    fn on_req(&self, dev: &Arc<Device>, mad: &Mad, req: CmReqEvent) {
        let retry = {
            let mut st = self.st.lock();
            st.by_peer(mad.from_guid, mad.from_comm)
                .map(|cep| match (cep.state, cep.last) {
                    (
                        State::RepSent | State::ReqRcvd,
                        Some(b @ (Body::Rep(_) | Body::Mra { .. })),
                    ) => Some(to_peer(dev, cep, b)),
                    _ => None,
                })
        };
        if let Some(answer) = retry {
            if let Some(out) = answer {
                out.send(dev);
            }
            return;
        }
        // The request as this side sees it.
        let mut ev = req;
        let path = &mut ev.primary_path;
        core::mem::swap(&mut path.sgid, &mut path.dgid);
        core::mem::swap(&mut path.slid, &mut path.dlid);
        let grh = path.sgid != [0u8; 16];
        ev.port = dev
            .port_of(grh, &path.sgid, u16::from_be(path.slid))
            .unwrap_or(1);
        ev.local_ca_guid = dev.guid;
        ev.remote_ca_guid = mad.from_guid;
        // Everything the request needs is allocated before the locks are taken: its rundown,
        // a CEP slot, room in the listen's queue. A listen whose queue is full has it grown
        // with the registry's lock released; the lookup is then made again.
        let reject = |reason| reject_req(dev, mad, reason).send(dev);
        let Ok(rundown) = KArc::try_new(Rundown::new()) else {
            return reject(REJ_INSUFFICIENT_RESOURCES);
        };
        let delivery = loop {
            if fallible::with_room_in(|| self.st.lock(), AgentState::room).is_err() {
                return reject(REJ_INSUFFICIENT_RESOURCES);
            }
            let Ok(mut registry) = fallible::with_room_in(
                || listens::of(dev).lock(),
                |r| {
                    r.find(ev.service_id, &ev.private_data)
                        .map(|l| &mut l.queue)
                },
            ) else {
                return reject(REJ_INSUFFICIENT_RESOURCES);
            };
            let Some(listen) = registry.find(ev.service_id, &ev.private_data) else {
                drop(registry);
                return reject(REJ_INVALID_SERVICE_ID);
            };
            let mut st = self.st.lock();
            if !st.slots.has_room() {
                // Another request took the slot meanwhile.
                continue;
            }
            let made = st.insert(|id| {
                let mut cep = Cep::new(id, State::ReqRcvd, None, rundown.clone());
                cep.passive = true;
                cep.port = ev.port;
                cep.peer = mad.from.clone();
                cep.peer_guid = mad.from_guid;
                cep.peer_comm = mad.from_comm;
                cep.req = Some(ev);
                cep
            });
            drop(st);
            let Ok(id) = made else {
                drop(registry);
                return reject(REJ_INSUFFICIENT_RESOURCES);
            };
            // Within the room made above.
            listen.queue.push_back((Arc::downgrade(dev), id));
            break Delivery {
                sink: listen.sink.clone(),
                rundown: listen.rundown.clone(),
                event: Owed::ReqReceived,
            };
        };
        delivery.run();
    }

    /// Handles the earliest CEP whose wait ended by `now`: a resend while retries are left,
    /// else the timeout. Returns whether there was one.
    fn expire_one(&self, dev: &Arc<Device>, now: u64) -> bool {
        let step = {
            let mut st = self.st.lock();
            let due = st
                .slots
                .ceps
                .iter()
                .flatten()
                .filter(|c| c.deadline.is_some_and(|d| d <= now))
                .min_by_key(|c| c.deadline)
                .map(|c| c.id);
            let Some(cep) = due.and_then(|id| st.get_mut(id)) else {
                return false;
            };
            timeout(dev, cep, now)
        };
        step.finish(dev);
        true
    }
}

/// A CEP's wait ended: resend, or give up and tell the consumer (and the peer, for a
/// handshake: IBA's REJ with "timeout").
fn timeout(dev: &Arc<Device>, cep: &mut Cep, now: u64) -> Step {
    if cep.retries > 0 {
        cep.retries -= 1;
        cep.deadline = Some(now.saturating_add(cep.timeout_ns));
        return Step {
            out: cep.last.map(|b| to_peer(dev, cep, b)),
            delivery: None,
        };
    }
    cep.answered();
    let (event, reject) = match cep.state {
        State::ReqSent => (Owed::ReqError, true),
        State::RepSent => (Owed::RepError, true),
        State::DreqSent => (Owed::DreqError, false),
        _ => return Step::default(),
    };
    cep.state = State::Timewait;
    Step {
        out: reject.then(|| to_peer(dev, cep, Body::Rej(Rej::bare(REJ_TIMEOUT)))),
        delivery: cep.owe(event),
    }
}

/// Any message but a REQ, for the CEP it names. A message that fits no CEP, or not the
/// CEP's state, is stale or a duplicate: a duplicate the peer sent because this side's answer
/// was lost gets that answer again; anything else is dropped.
fn on_message(st: &mut AgentState, dev: &Arc<Device>, mad: Mad, now: u64) -> Step {
    let cep = match mad.to_comm {
        0 => st.by_peer(mad.from_guid, mad.from_comm),
        id => st.get_mut(id),
    };
    let Some(cep) = cep else {
        return Step::default();
    };
    if cep.peer_comm != 0 && cep.peer_comm != mad.from_comm {
        return Step::default();
    }
    let resend = |cep: &Cep, want: fn(&Body) -> bool| Step {
        out: cep.last.filter(want).map(|b| to_peer(dev, cep, b)),
        delivery: None,
    };
    let packet_life = cep.req.map_or(0, |r| r.primary_path.pkt_life);
    match mad.body {
        Body::Req(_) => Step::default(),
        Body::Rep(rep) => match cep.state {
            State::ReqSent => {
                cep.state = State::RepRcvd;
                cep.answered();
                cep.peer = mad.from;
                cep.peer_guid = mad.from_guid;
                cep.peer_comm = mad.from_comm;
                cep.rep = Some(rep);
                Step {
                    out: None,
                    delivery: cep.owe(Owed::Rep(rep)),
                }
            }
            // Our RTU was lost.
            State::Established => resend(cep, |b| matches!(b, Body::Rtu(_))),
            _ => Step::default(),
        },
        Body::Rtu(pdata) => match cep.state {
            State::RepSent => {
                cep.state = State::Established;
                cep.answered();
                Step {
                    out: None,
                    delivery: cep.owe(Owed::Rtu(pdata)),
                }
            }
            _ => Step::default(),
        },
        Body::Dreq(pdata) => match cep.state {
            // In RepSent the RTU was lost and the peer is already done.
            State::Established | State::RepSent | State::DreqSent => {
                cep.state = State::DreqRcvd;
                cep.answered();
                Step {
                    out: None,
                    delivery: cep.owe(Owed::Dreq(pdata)),
                }
            }
            // Our DREP was lost.
            State::Timewait => resend(cep, |b| matches!(b, Body::Drep(_))),
            _ => Step::default(),
        },
        Body::Drep(pdata) => match cep.state {
            State::DreqSent => {
                cep.state = State::Timewait;
                cep.answered();
                Step {
                    out: None,
                    delivery: cep.owe(Owed::Drep(pdata)),
                }
            }
            _ => Step::default(),
        },
        Body::Rej(rej) => match cep.state {
            State::ReqSent | State::ReqRcvd | State::RepSent | State::RepRcvd => {
                if cep.sink.is_none() {
                    // A request nobody took yet: it just goes.
                    let id = cep.id;
                    st.remove(id);
                    return Step::default();
                }
                cep.state = State::Timewait;
                cep.answered();
                Step {
                    out: None,
                    delivery: cep.owe(Owed::Rej(rej)),
                }
            }
            _ => Step::default(),
        },
        Body::Mra { timeout, pdata } => match cep.state {
            State::ReqSent | State::RepSent => {
                // The peer needs more time: the wait is extended, the retries stay.
                cep.deadline = Some(now.saturating_add(answer_time_ns(timeout, packet_life)));
                Step {
                    out: None,
                    delivery: cep.owe(Owed::Mra(timeout, pdata)),
                }
            }
            _ => Step::default(),
        },
    }
}
