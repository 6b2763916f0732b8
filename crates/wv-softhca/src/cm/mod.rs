//! The soft HCA's connection manager: [`SoftCm`] implements `wv_hal::ConnectionManager` with
//! the IB CM protocol (IBA chapter 12) between the devices of a fabric.
//!
//! * Each device has a CM agent ([`agent`]): its CEPs (one per CM id), an inbox for the CM
//!   messages (REQ, REP, RTU, DREQ, DREP, REJ, MRA) that reach its ports, and a DPC that
//!   handles them and reports the events to the ids' sinks.
//! * Messages travel as packets of the fabric ([`mad`]): subject to its fault injection, lost
//!   when their address names no device. A side that waits for an answer resends on the
//!   platform's clock (`response time + 2 × packet lifetime`, `max_cm_retries` times) and then
//!   reports the timeout (REQ, REP and DREQ errors; the handshakes also send the peer a REJ
//!   with "timeout"). A duplicate of a message whose answer was lost is answered again.
//! * Listens are the host's ([`listens`]): one registry per fabric, matched by service id and
//!   the IP-CM compare data. A REQ nobody listens for is rejected with "invalid service id".
//! * [`qp_attr`] derives the INIT/RTR/RTS attributes from the exchanged REQ and REP.
//!
//! Timing: the CM never reports an event inside a consumer's call; everything the peer's
//! messages or a timeout cause comes from the agent's DPC (a timer set for "now" on arrival),
//! so in the host's deterministic mode a handshake advances only as the test runs deferred
//! work and moves the clock. In the threaded mode a timer a driver callback sets for "now"
//! fires on that callback's own thread once it lowers its IRQL after the call (the host's
//! `set_timer`): a message is handled on the processor that sent it, as a real controller's
//! receive interrupt and DPC would handle it, with no hand-off to another thread. Nothing in
//! a consumer's call lowers the IRQL: the agent's locks are the soft HCA's own.

mod agent;
mod cep;
mod listens;
mod mad;
mod qp_attr;

use alloc::collections::VecDeque;
use alloc::sync::Arc;

use wv_abi::NtStatus;
use wv_hal::cm::{
    DREP_PRIVATE_DATA, DREQ_PRIVATE_DATA, MRA_PRIVATE_DATA, REJ_ARI, REJ_PRIVATE_DATA, REJ_TIMEOUT,
    REJ_USER_DEFINED, REP_PRIVATE_DATA, REQ_PRIVATE_DATA, RTU_PRIVATE_DATA,
};
use wv_hal::{
    CmEventSink, CmRep, CmRepEvent, CmReq, CmReqEvent, CmReqParams, ConnectionManager, KArc,
    QpModify, QpState,
};

pub(crate) use agent::Agent;
pub(crate) use listens::Listens;

use agent::{AgentState, Out, Step, to_peer};
use cep::{Cep, State, answer_time_ns};
use listens::Listen;
use mad::{Body, Rej, full};

use crate::device::{Device, Rundown};
use crate::fallible;

/// The most resends IBA's 4-bit `max_cm_retries` allows.
const MAX_CM_RETRIES: u8 = 15;

/// A soft HCA's connection manager (the interface ibbus would answer
/// `GUID_INFINIBAND_INTERFACE_CM` with on the device's stack).
pub struct SoftCm {
    dev: Arc<Device>,
}

impl core::fmt::Debug for SoftCm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SoftCm")
            .field("device", &self.dev.config.name)
            .field("ids", &self.ids())
            .finish()
    }
}

/// A CM id of a [`SoftCm`]: a CEP of the device it lives on (a connection request lives on
/// the device it arrived at, whichever device's CM the listen was made through).
pub struct SoftCmId {
    dev: Arc<Device>,
    id: u32,
    rundown: KArc<Rundown>,
}

impl core::fmt::Debug for SoftCmId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SoftCmId")
            .field("device", &self.dev.config.name)
            .field("comm_id", &self.id)
            .finish()
    }
}

impl SoftCmId {
    /// The local communication id.
    pub fn comm_id(&self) -> u32 {
        self.id
    }
}

impl SoftCm {
    pub(crate) fn new(dev: Arc<Device>) -> SoftCm {
        SoftCm { dev }
    }

    /// CEPs alive on this device (ids, and requests no listener took yet).
    pub fn ids(&self) -> usize {
        self.dev.cm.lock().live()
    }

    fn alive(&self) -> Result<(), NtStatus> {
        if self.dev.is_removed() {
            Err(NtStatus::DEVICE_REMOVED)
        } else {
            Ok(())
        }
    }

    /// Runs `f` on the id's CEP under its agent's lock, then sends what it yields.
    fn with_cep(
        &self,
        id: &SoftCmId,
        f: impl FnOnce(&mut Cep, u64) -> Result<Option<Body>, NtStatus>,
    ) -> Result<(), NtStatus> {
        self.alive()?;
        let dev = &id.dev;
        let out = {
            let mut st = dev.cm.lock();
            let now = dev.now_ns();
            let cep = st.get_mut(id.id).ok_or(NtStatus::INVALID_PARAMETER)?;
            let body = f(cep, now)?;
            let out = body.map(|b| to_peer(dev, cep, b));
            if let Some(due) = cep.deadline {
                dev.cm.arm(&mut st, dev, due);
            }
            out
        };
        if let Some(out) = out {
            out.send(dev);
        }
        Ok(())
    }
}

/// Fails with `STATUS_INVALID_PARAMETER` when `data` is longer than the field.
fn fits(data: &[u8], field: usize) -> Result<(), NtStatus> {
    if data.len() > field {
        Err(NtStatus::INVALID_PARAMETER)
    } else {
        Ok(())
    }
}

/// Fails with `STATUS_INVALID_DEVICE_STATE` unless `ok`.
fn state_ok(ok: bool) -> Result<(), NtStatus> {
    if ok {
        Ok(())
    } else {
        Err(NtStatus::INVALID_DEVICE_STATE)
    }
}

/// Whether the consumer has the CEP (a request still queued on its listen is not its yet).
fn owned(cep: &Cep) -> bool {
    cep.sink.is_some()
}

impl ConnectionManager for SoftCm {
    type Id = SoftCmId;

    fn create_id(&self, events: KArc<dyn CmEventSink>) -> Result<SoftCmId, NtStatus> {
        self.alive()?;
        let rundown = KArc::try_new(Rundown::new())?;
        // The slot's room is made with the agent's lock released.
        let id = fallible::with_room_in(|| self.dev.cm.lock(), AgentState::room)?
            .insert(|id| Cep::new(id, State::Idle, Some(events), rundown.clone()))?;
        Ok(SoftCmId {
            dev: self.dev.clone(),
            id,
            rundown,
        })
    }

    fn destroy_id(&self, id: SoftCmId) {
        let dev = &id.dev;
        // The farewell IBA asks for: a handshake in progress is rejected, a connection gets
        // its DREQ, a DREQ its DREP.
        let (farewell, listening) = {
            let mut st = dev.cm.lock();
            match st.remove(id.id) {
                None => (None, false),
                Some(cep) => {
                    let body = match cep.state {
                        State::ReqSent => Some(Body::Rej(Rej::bare(REJ_TIMEOUT))),
                        State::ReqRcvd | State::RepSent | State::RepRcvd => {
                            Some(Body::Rej(Rej::bare(REJ_USER_DEFINED)))
                        }
                        State::Established => Some(Body::Dreq([0; DREQ_PRIVATE_DATA])),
                        State::DreqRcvd => Some(Body::Drep([0; DREP_PRIVATE_DATA])),
                        _ => None,
                    };
                    (
                        body.map(|b| to_peer(dev, &cep, b)),
                        cep.state == State::Listen,
                    )
                }
            }
        };
        if let Some(out) = farewell {
            out.send(dev);
        }
        if listening {
            let listen = listens::of(dev).lock().remove(dev, id.id);
            if let Some(listen) = listen {
                reject_queued(listen.queue);
            }
        }
        // No event of the id starts from here on; wait for one running on another processor.
        id.rundown.close_and_wait();
    }

    fn listen(
        &self,
        id: &SoftCmId,
        service_id: u64,
        compare: &[u8],
        compare_offset: u8,
    ) -> Result<(), NtStatus> {
        self.alive()?;
        let compare = listens::compare_of(compare, compare_offset)?;
        let dev = &id.dev;
        // The registry's room is made with its lock released.
        let mut registry = fallible::with_room_in(|| listens::of(dev).lock(), Listens::room)
            .map_err(|_| NtStatus::INSUFFICIENT_RESOURCES)?;
        let mut st = dev.cm.lock();
        let cep = st.get_mut(id.id).ok_or(NtStatus::INVALID_PARAMETER)?;
        state_ok(cep.state == State::Idle)?;
        let sink = cep.sink.clone().ok_or(NtStatus::INVALID_DEVICE_STATE)?;
        registry.add(Listen {
            owner: Arc::downgrade(dev),
            id: id.id,
            service_id,
            compare,
            sink,
            rundown: cep.rundown.clone(),
            queue: VecDeque::new(),
        })?;
        cep.state = State::Listen;
        Ok(())
    }

    fn get_request(
        &self,
        listen: &SoftCmId,
        events: KArc<dyn CmEventSink>,
    ) -> Result<(SoftCmId, CmReqEvent), NtStatus> {
        self.alive()?;
        let mut registry = listens::of(&listen.dev).lock();
        let l = registry
            .get_mut(&listen.dev, listen.id)
            .ok_or(NtStatus::INVALID_DEVICE_STATE)?;
        // Requests that went meanwhile (the peer gave up) are skipped.
        while let Some((dev, cid)) = l.queue.pop_front() {
            let Some(dev) = dev.upgrade() else { continue };
            let mut st = dev.cm.lock();
            let Some(cep) = st.get_mut(cid) else { continue };
            if cep.state != State::ReqRcvd || owned(cep) {
                continue;
            }
            let Some(req) = cep.req else { continue };
            // From here on the request's events go to `events`: nothing can reach the
            // listener's sink in between (the race of spec §7.1-h).
            cep.sink = Some(events.clone());
            let rundown = cep.rundown.clone();
            drop(st);
            return Ok((
                SoftCmId {
                    dev,
                    id: cid,
                    rundown,
                },
                req,
            ));
        }
        Err(NtStatus::NO_MORE_ENTRIES)
    }

    fn send_req(&self, id: &SoftCmId, req: &CmReq<'_>) -> Result<(), NtStatus> {
        fits(req.private_data, REQ_PRIVATE_DATA)?;
        let dev = &id.dev;
        let path = *req.primary_path;
        let by_gid = path.sgid != [0u8; 16];
        let port = dev
            .port_of(by_gid, &path.sgid, u16::from_be(path.slid))
            .ok_or(NtStatus::INVALID_PARAMETER)?;
        let target = if path.dgid != [0u8; 16] {
            dev.route(true, &path.dgid, 0)
        } else {
            dev.route(false, &[0u8; 16], u16::from_be(path.dlid))
        };
        let body = CmReqEvent {
            service_id: req.service_id,
            primary_path: path,
            remote_qpn: req.qpn & 0xFF_FFFF,
            private_data: full(req.private_data),
            params: CmReqParams {
                starting_psn: req.params.starting_psn & 0xFF_FFFF,
                max_cm_retries: req.params.max_cm_retries.min(MAX_CM_RETRIES),
                ..req.params
            },
            local_ca_guid: 0,
            remote_ca_guid: dev.guid,
            pkey_index: 0,
            port,
        };
        self.with_cep(id, |cep, now| {
            state_ok(cep.state == State::Idle && owned(cep))?;
            cep.state = State::ReqSent;
            cep.port = port;
            cep.peer = target
                .as_ref()
                .map_or_else(Default::default, Arc::downgrade);
            cep.req = Some(body);
            cep.wait_for_answer(
                Body::Req(body),
                now,
                answer_time_ns(req.params.remote_cm_response_timeout, path.pkt_life),
                body.params.max_cm_retries,
            );
            Ok(cep.last)
        })
    }

    fn send_rep(&self, id: &SoftCmId, rep: &CmRep<'_>) -> Result<(), NtStatus> {
        fits(rep.private_data, REP_PRIVATE_DATA)?;
        let guid = id.dev.guid;
        self.with_cep(id, |cep, now| {
            state_ok(cep.state == State::ReqRcvd && owned(cep))?;
            let req = cep.req.ok_or(NtStatus::INVALID_DEVICE_STATE)?;
            let body = CmRepEvent {
                remote_qpn: rep.qpn & 0xFF_FFFF,
                starting_psn: rep.starting_psn & 0xFF_FFFF,
                private_data: full(rep.private_data),
                failover_accepted: rep.failover_accepted,
                responder_resources: rep.responder_resources,
                initiator_depth: rep.initiator_depth,
                flow_control: rep.flow_control,
                rnr_retry_count: rep.rnr_retry_count,
                srq: rep.srq,
                remote_ca_guid: guid,
                target_ack_delay: 0,
            };
            cep.rep = Some(body);
            cep.state = State::RepSent;
            cep.wait_for_answer(
                Body::Rep(body),
                now,
                answer_time_ns(
                    req.params.local_cm_response_timeout,
                    req.primary_path.pkt_life,
                ),
                req.params.max_cm_retries,
            );
            Ok(cep.last)
        })
    }

    fn send_rtu(&self, id: &SoftCmId, private_data: &[u8]) -> Result<(), NtStatus> {
        fits(private_data, RTU_PRIVATE_DATA)?;
        self.with_cep(id, |cep, _| {
            state_ok(cep.state == State::RepRcvd)?;
            cep.state = State::Established;
            // Kept to answer a REP the peer resends because this RTU was lost.
            cep.last = Some(Body::Rtu(full(private_data)));
            Ok(cep.last)
        })
    }

    fn send_dreq(&self, id: &SoftCmId, private_data: &[u8]) -> Result<(), NtStatus> {
        fits(private_data, DREQ_PRIVATE_DATA)?;
        self.with_cep(id, |cep, now| {
            state_ok(cep.state == State::Established)?;
            let req = cep.req.ok_or(NtStatus::INVALID_DEVICE_STATE)?;
            // The peer's response time: the passive side's as the REQ announced it, or the
            // active side's.
            let response = if cep.passive {
                req.params.local_cm_response_timeout
            } else {
                req.params.remote_cm_response_timeout
            };
            cep.state = State::DreqSent;
            cep.wait_for_answer(
                Body::Dreq(full(private_data)),
                now,
                answer_time_ns(response, req.primary_path.pkt_life),
                req.params.max_cm_retries,
            );
            Ok(cep.last)
        })
    }

    fn send_drep(&self, id: &SoftCmId, private_data: &[u8]) -> Result<(), NtStatus> {
        fits(private_data, DREP_PRIVATE_DATA)?;
        self.with_cep(id, |cep, _| {
            state_ok(cep.state == State::DreqRcvd)?;
            cep.state = State::Timewait;
            // Kept to answer a DREQ the peer resends because this DREP was lost.
            cep.last = Some(Body::Drep(full(private_data)));
            Ok(cep.last)
        })
    }

    fn send_rej(
        &self,
        id: &SoftCmId,
        reason: u16,
        ari: &[u8],
        private_data: &[u8],
    ) -> Result<(), NtStatus> {
        fits(ari, REJ_ARI)?;
        fits(private_data, REJ_PRIVATE_DATA)?;
        self.with_cep(id, |cep, _| {
            state_ok(
                owned(cep)
                    && matches!(
                        cep.state,
                        State::ReqSent | State::ReqRcvd | State::RepSent | State::RepRcvd
                    ),
            )?;
            cep.state = State::Timewait;
            cep.answered();
            cep.last = None;
            Ok(Some(Body::Rej(Rej {
                reason,
                ari: full(ari),
                ari_len: ari.len() as u8,
                pdata: full(private_data),
            })))
        })
    }

    fn send_mra(
        &self,
        id: &SoftCmId,
        service_timeout: u8,
        private_data: &[u8],
    ) -> Result<(), NtStatus> {
        fits(private_data, MRA_PRIVATE_DATA)?;
        self.with_cep(id, |cep, _| {
            state_ok(owned(cep) && matches!(cep.state, State::ReqRcvd | State::RepRcvd))?;
            let body = Body::Mra {
                timeout: service_timeout,
                pdata: full(private_data),
            };
            if cep.state == State::ReqRcvd {
                // Kept to answer a REQ the peer resends meanwhile.
                cep.last = Some(body);
            }
            Ok(Some(body))
        })
    }

    fn get_qp_attr(&self, id: &SoftCmId, state: QpState) -> Result<QpModify, NtStatus> {
        self.alive()?;
        let mut st = id.dev.cm.lock();
        let cep = st.get_mut(id.id).ok_or(NtStatus::INVALID_PARAMETER)?;
        qp_attr::qp_attr(cep, state)
    }
}

/// Rejects the requests a listen still held when it went (the consumer never took them).
fn reject_queued(queue: VecDeque<(alloc::sync::Weak<Device>, u32)>) {
    for (dev, cid) in queue {
        let Some(dev) = dev.upgrade() else { continue };
        let out: Option<Out> = {
            let mut st = dev.cm.lock();
            match st.get_mut(cid) {
                Some(cep) if cep.state == State::ReqRcvd && !owned(cep) => {
                    let out = to_peer(&dev, cep, Body::Rej(Rej::bare(REJ_USER_DEFINED)));
                    st.remove(cid);
                    Some(out)
                }
                _ => None,
            }
        };
        Step {
            out,
            delivery: None,
        }
        .finish(&dev);
    }
}
