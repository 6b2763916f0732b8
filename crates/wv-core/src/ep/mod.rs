//! Endpoints (OFW `WV_ENDPOINT`): the 16 EP IOCTLs over the connection manager of the lower
//! device's stack, with OFW's state machine (spec §2.4, §3.8) and its bugs fixed.
//!
//! * [`cma`]: the IP-CM header, service ids and any-addresses rdma_cm and WinVerbs share.
//! * [`ops`]: the IOCTLs that complete inline, and the entry of the pending ones.
//! * [`listen`]: LISTEN, GET_REQUEST, and the pairing of queued connection requests with
//!   waiting GET_REQUESTs.
//! * [`work`]: the endpoint's work item, which runs everything that needs PASSIVE_LEVEL and
//!   cannot run in the caller's thread: ACCEPT (whose QP commands may wait), the disconnect's
//!   QP → ERROR step and the listener's pairing; and CONNECT, which runs in the caller's
//!   thread (nothing in it waits), as ACCEPT does when QP modifies run inline.
//! * [`events`]: what the CM's events do to an endpoint (its sinks).
//! * [`state`]: what an endpoint's lock guards, and its state machine: every change of state
//!   goes through [`EpInner::set_state`], checked against [`EpState::may_become`].
//!
//! Requests park in one queue per purpose (fix of spec §7.1-f: OFW parked every request of an
//! endpoint in one queue, so a work item could take the wrong one): an ACCEPT until the work
//! item starts it, then CONNECT and ACCEPT until the handshake's answer; DISCONNECT until the DREP;
//! DISCONNECT_NOTIFY until the connection goes; GET_REQUEST on the endpoint it names, which
//! the listener holds, until a request fills it. Each is checked against the
//! endpoint's state before it parks, and everything that parks ends: by a CM event, by
//! EP_CANCEL, by the I/O manager's cancel, by destroy or cleanup (`STATUS_CANCELLED`) or by
//! the removal of the device whose CM the endpoint uses (`STATUS_DEVICE_REMOVED`).
//!
//! Locks: an endpoint's `inner` spin lock guards its state and attributes; the CM is never
//! called with it (or any lock) held, and nothing waits under it. A listener's lock may be held
//! while its `queued` lock and then a queued endpoint's are taken, never the other way round
//! (the listener's lock orders its GET_REQUESTs: see [`listen`]); an endpoint's `inner` lock
//! may be held while its `binding` lock is taken (a new connection is bound together with the
//! state that owns it), never the other way round.

pub(crate) mod cma;
pub(crate) mod events;
pub(crate) mod listen;
pub(crate) mod ops;
pub(crate) mod state;
pub(crate) mod work;

use alloc::vec::Vec;

use wv_abi::NtStatus;
use wv_hal::{
    CmEventSink, ConnectionManager, KArc, KWeak, Platform, RequestQueue, SpinLock, Verbs,
};

use crate::hand_off;
use crate::provider::Provider;
use crate::rdma_device::RdmaDevice;
use crate::shared::Shared;
use crate::status::REMOVED;
use crate::sync::{Gate, ModifySched, RefCount};

pub(crate) use state::{EpInner, EpState};
pub(crate) use work::kick;

/// A CM id of the lower device's CM.
pub(crate) type CmId<V> = <<V as Verbs>::Cm as ConnectionManager>::Id;

/// A CM id with the CM it belongs to and the sink its events go to.
pub(crate) struct CmConn<V: Verbs> {
    pub cm: KArc<V::Cm>,
    pub id: CmId<V>,
    /// Kept so that a listener can lend its sink to the requests it refuses beyond the
    /// backlog: refusing one then needs no memory (a refusal that waited for memory could
    /// only be retried, and the work item spun as long as memory was short).
    pub events: KArc<dyn CmEventSink>,
}

/// The CM id of an endpoint and the lower device whose CM made it. Users hold a share of the
/// device's gate while they call the CM, so removal (which closes and drains the gate) and
/// teardown find the id unused when they take it to destroy it.
pub(crate) struct Binding<P: Platform, V: Verbs> {
    pub rdma: KArc<RdmaDevice<P, V>>,
    pub conn: KArc<CmConn<V>>,
}

impl<P: Platform, V: Verbs> Binding<P, V> {
    /// Destroys the id. PASSIVE_LEVEL; waits for its running callbacks.
    fn destroy(self) {
        match KArc::try_unwrap(self.conn) {
            Ok(conn) => conn.cm.destroy_id(conn.id),
            Err(_still_used) => debug_assert!(false, "CM id destroyed while still in use"),
        }
    }
}

/// An event on a new connection's id that came while the id was being handed over to its
/// endpoint (still Queued): the CM calls the new id's sink from the moment it exists, so the
/// peer's REJ or DREQ may arrive before the endpoint has taken the request. The endpoint keeps
/// it and applies it right after, as if it had come then (dropping it left an endpoint that
/// accepted a connection its peer had already given up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Early {
    None,
    /// The peer refused, with the first bytes of its private data.
    Rejected {
        reason: u16,
        data: [u8; events::KEPT],
        len: u8,
    },
    /// The peer disconnects.
    Disconnecting,
    /// An event WinVerbs does not know: it ends the connection.
    Other(u32),
}

/// An endpoint a listener holds for a GET_REQUEST (which waits in the endpoint's
/// `request_queue`).
pub(crate) struct Queued<P: Platform, V: Verbs> {
    /// Its id in the file (the GET_REQUEST's `EpId`).
    pub id: u64,
    pub ep: KArc<EpObj<P, V>>,
}

/// A device and its connection manager.
pub(crate) type DeviceCm<P, V> = (KArc<RdmaDevice<P, V>>, KArc<<V as Verbs>::Cm>);

/// An endpoint (OFW `WV_ENDPOINT`).
pub(crate) struct EpObj<P: Platform, V: Verbs> {
    /// `WV_IO_EP_TYPE_*` as stored by OFW (16 bits); the high half of its service ids.
    pub ep_type: u16,
    /// Itself, for the sinks of its CM ids.
    pub me: KWeak<EpObj<P, V>>,
    pub shared: KArc<Shared<P, V>>,
    /// Its file, for the QPs its work items move.
    pub prov: KWeak<Provider<P, V>>,
    /// IOCTLs in flight and, for an endpoint queued on a listener, the listener's hold:
    /// destroy answers `STATUS_ACCESS_DENIED` while any is held (as OFW's `Ref > 1`).
    pub refs: RefCount,
    pub inner: P::SpinLock<EpInner>,
    pub binding: P::SpinLock<Option<Binding<P, V>>>,
    /// Listener: the endpoints its GET_REQUESTs wait to fill, oldest first.
    pub queued: P::SpinLock<Vec<Queued<P, V>>>,
    /// Listener: an id its sink took for an endpoint that refused it, for the work item to
    /// reject and destroy (see [`listen::drop_refused`]).
    pub refused: P::SpinLock<Option<Binding<P, V>>>,
    /// The work item runs inside it; teardown closes it and waits.
    pub work: Gate<P>,
    /// At most one work item of the endpoint at a time (it is the endpoint itself).
    pub sched: ModifySched<P>,
    /// An ACCEPT until the work item starts it (a CONNECT, and an ACCEPT when QP modifies run
    /// inline, start in the caller's thread and never wait here).
    pub start_queue: P::Queue,
    /// CONNECT until the REP, a passive ACCEPT until the RTU.
    pub handshake_queue: P::Queue,
    /// DISCONNECT until the DREP (or the DREQ's timeout).
    pub disconnect_queue: P::Queue,
    /// DISCONNECT_NOTIFY until the connection goes.
    pub notify_queue: P::Queue,
    /// Queued endpoint: its GET_REQUEST, until a connection request fills it (so the
    /// request's end is seen here: the I/O manager's cancel tells the driver nothing). A
    /// listener's stays empty but for the instant a GET_REQUEST passes through on its way back
    /// to its endpoint's.
    pub request_queue: P::Queue,
}

/// Completes every request of `queue` with `status`, `Information = 0`.
fn fail_queue<P: Platform>(queue: &P::Queue, status: NtStatus) {
    crate::notify::complete_all::<P>(queue, status);
}

impl<P: Platform, V: Verbs> EpObj<P, V> {
    /// The state now.
    pub fn state(&self) -> EpState {
        self.inner.lock().state()
    }

    /// Runs `call` with the endpoint's CM and id under a share of the id's device gate.
    /// `STATUS_DEVICE_REMOVED` when the device has gone (or the endpoint has no id).
    pub fn with_cm<T>(
        &self,
        call: impl FnOnce(&V::Cm, &CmId<V>) -> Result<T, NtStatus>,
    ) -> Result<T, NtStatus> {
        // The id is taken inside the share: removal cannot be past its drain, so it has not
        // taken the id yet and finds it unused once this returns.
        self.with_binding(|_, conn| call(&conn.cm, &conn.id))
    }

    /// Runs `call` with the endpoint's binding (its device and CM id) under a share of the
    /// device's gate, as [`EpObj::with_cm`].
    pub fn with_binding<T>(
        &self,
        call: impl FnOnce(&KArc<RdmaDevice<P, V>>, &KArc<CmConn<V>>) -> Result<T, NtStatus>,
    ) -> Result<T, NtStatus> {
        let rdma = self
            .binding
            .lock()
            .as_ref()
            .map(|b| KArc::clone(&b.rdma))
            .ok_or(REMOVED)?;
        let Some(_share) = rdma.gate.share() else {
            return Err(REMOVED);
        };
        let conn = match self.binding.lock().as_ref() {
            Some(b) if KArc::ptr_eq(&b.rdma, &rdma) => KArc::clone(&b.conn),
            _ => return Err(REMOVED),
        };
        call(&rdma, &conn)
    }

    /// Whether `commands` QP commands of the endpoint's device are expected to end sooner
    /// than a hand-off to its work item would start them ([`crate::hand_off`]).
    pub fn inline_pays(&self, commands: u64) -> bool {
        self.binding.lock().as_ref().is_some_and(|binding| {
            hand_off::inline_pays(&binding.rdma.commands, &self.shared.hand_off, commands)
        })
    }

    /// Replaces the endpoint's CM id (a stale one, of an earlier failed attempt, is
    /// destroyed). PASSIVE_LEVEL.
    pub(crate) fn bind(&self, binding: Binding<P, V>) {
        let old = self.binding.lock().replace(binding);
        if let Some(old) = old {
            old.destroy();
        }
    }

    /// Destroys the endpoint's CM id, if it has one. PASSIVE_LEVEL.
    pub(crate) fn unbind(&self) {
        let old = self.binding.lock().take();
        if let Some(old) = old {
            old.destroy();
        }
    }

    /// EP_CANCEL of a connection: every parked request ends with `STATUS_CANCELLED`, and so
    /// does the CONNECT or ACCEPT the work item is running, when it would park.
    pub fn cancel_parked(&self) {
        {
            let mut inner = self.inner.lock();
            inner.cancels = inner.cancels.wrapping_add(1);
            // Under the same lock as the count: the work item takes a CONNECT or ACCEPT out of
            // the start queue and reads the count under it, so it either took the request
            // before (and sees the new count where it would park) or finds it gone. With the
            // queue emptied after the lock, a request taken in between was in no queue and
            // saw the new count: the cancel missed it.
            fail_queue::<P>(&self.start_queue, NtStatus::CANCELLED);
        }
        self.fail_parked(NtStatus::CANCELLED);
    }

    /// Ends every request parked on the endpoint with `status` (EP_CANCEL of a connection,
    /// device removal). The CM's state is not changed (OFW).
    pub fn fail_parked(&self, status: NtStatus) {
        fail_queue::<P>(&self.start_queue, status);
        fail_queue::<P>(&self.handshake_queue, status);
        fail_queue::<P>(&self.disconnect_queue, status);
        fail_queue::<P>(&self.notify_queue, status);
    }

    /// Destroys what is left of an endpoint that left its table (EP_DESTROY, cleanup): a
    /// listener first ends its GET_REQUESTs and gives its queued endpoints back (fix of spec
    /// §7.1-g: OFW left them queued, with a reference, on a freed listener); then running work
    /// items finish, the CM id goes, and every parked request ends with `STATUS_CANCELLED`.
    /// PASSIVE_LEVEL, no lock held.
    pub fn teardown(&self) {
        self.inner.lock().set_state(EpState::Destroying);
        listen::release_waiters(self, NtStatus::CANCELLED);
        if self.work.close() {
            self.work.wait_drained();
        }
        self.unbind();
        // After the listen's id: its sink, which parks refused ids, has returned for good.
        listen::drop_refused_unbound(self);
        self.start_queue.purge();
        self.handshake_queue.purge();
        self.disconnect_queue.purge();
        self.notify_queue.purge();
        self.request_queue.purge();
    }

    /// The device whose CM made this endpoint's id is going: the id goes, every parked request
    /// ends with `STATUS_DEVICE_REMOVED`, and the endpoint is disconnected. The device's gate
    /// is closed and drained, so nothing uses the id.
    fn remove(&self) {
        let binding = self.binding.lock().take();
        let Some(binding) = binding else { return };
        binding.destroy();
        // The sink parks refused ids inside the drained gate: none comes after this.
        listen::drop_refused_unbound(self);
        {
            let mut inner = self.inner.lock();
            if inner.state() != EpState::Destroying {
                inner.set_state(EpState::Disconnected);
            }
            inner.removed = true;
        }
        self.fail_parked(REMOVED);
        listen::release_waiters(self, REMOVED);
    }
}

/// Removal of a lower device, for endpoints: every endpoint of every file whose CM id that
/// device's CM made ends (see [`EpObj::remove`]). The device's gate is closed and drained.
/// One endpoint at a time with every lock released, building no list (removal cannot fail).
pub(crate) fn remove_device<P: Platform, V: Verbs>(
    rdma: &KArc<RdmaDevice<P, V>>,
    shared: &Shared<P, V>,
) {
    let mut file = 0;
    loop {
        let prov = {
            let providers = shared.providers.lock();
            match providers.get(file) {
                Some(p) => p.upgrade(),
                None => break,
            }
        };
        file += 1;
        let Some(prov) = prov else { continue };
        let mut at = 0;
        loop {
            let next = {
                let tables = prov.tables.lock();
                let mut cursor = at;
                loop {
                    match tables.eps.next_after(cursor) {
                        Some((id, ep)) if ep.uses(rdma) => break Some((id, KArc::clone(ep))),
                        Some((id, _)) => cursor = id,
                        None => break None,
                    }
                }
            };
            let Some((id, ep)) = next else { break };
            at = id;
            ep.remove();
        }
    }
}

impl<P: Platform, V: Verbs> EpObj<P, V> {
    /// Whether the endpoint's CM id was made by `rdma`'s CM.
    fn uses(&self, rdma: &KArc<RdmaDevice<P, V>>) -> bool {
        self.binding
            .lock()
            .as_ref()
            .is_some_and(|b| KArc::ptr_eq(&b.rdma, rdma))
    }
}

/// The device (and its CM) an endpoint bound to `device_guid` uses: that device when it has a
/// CM, otherwise the first device that has one. OFW used one CM for every device (the first
/// one's, never dropped: spec §7.1-c); an IB CM serves every port of the host, so any present
/// device's CM reaches the endpoint's port, and each id stays tied to the device whose CM made
/// it, so its removal ends exactly the ids that used it.
pub(crate) fn choose_cm<P: Platform, V: Verbs>(
    shared: &Shared<P, V>,
    device_guid: u64,
) -> Option<DeviceCm<P, V>> {
    let devices = shared.devices.lock();
    let with_cm = |d: &KArc<RdmaDevice<P, V>>| d.cm().map(|cm| (KArc::clone(d), cm));
    devices
        .iter()
        .filter(|d| device_guid != 0 && d.guid == device_guid)
        .find_map(with_cm)
        .or_else(|| devices.iter().find_map(with_cm))
}

/// A fresh 24-bit starting PSN (OFW: `RtlRandomEx`): the clock and the endpoint's address,
/// mixed. It only has to differ between connections, not be secret.
pub(crate) fn starting_psn(now_ns: u64, salt: usize) -> u32 {
    let mut x = now_ns ^ (salt as u64).rotate_left(29) ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    (x as u32) & 0x00FF_FFFF
}
