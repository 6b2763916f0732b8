//! The connection manager below the filter: [`ConnectionManager`], modelled on OFW's
//! `iba_cm_interface` (`inc/kernel/iba/ib_cm_ifc.h`), and the events its ids report.
//!
//! On Windows the filter gets this interface from the same device stack as the verbs
//! (`GUID_INFINIBAND_INTERFACE_CM`, answered by ibbus below WinVerbs); the endpoint IOCTLs are
//! built on it. A CM id is one endpoint of one connection (or one listen): the calls below send
//! the IB CM messages of InfiniBand Architecture chapter 12 (REQ, REP, RTU, DREQ, DREP, REJ,
//! MRA), and the CM reports what the peer sent, or that it did not answer in time, as
//! [`CmEvent`]s to the id's [`CmEventSink`].
//!
//! Byte order: QP numbers, PSNs, service ids and reject reasons are host order here; GUIDs are
//! network order as stored (as [`crate::Verbs::guid`]); the path record is the SA PathRecord in
//! wire order (`ib_path_rec_t`), exactly as EP_MODIFY carries it.

use alloc::sync::Arc;

use wv_abi::{IB_PATH_REC, NtStatus};

use crate::{KArc, QpModify, QpState, QpType};

/// Private data bytes a REQ carries (`IB_REQ_PDATA_SIZE`).
pub const REQ_PRIVATE_DATA: usize = 92;
/// Private data bytes a REP carries (`IB_REP_PDATA_SIZE`).
pub const REP_PRIVATE_DATA: usize = 196;
/// Private data bytes a REJ carries (`IB_REJ_PDATA_SIZE`).
pub const REJ_PRIVATE_DATA: usize = 148;
/// Additional reject information a REJ carries (`IB_ARI_SIZE`).
pub const REJ_ARI: usize = 72;
/// Private data bytes an RTU carries (`IB_RTU_PDATA_SIZE`).
pub const RTU_PRIVATE_DATA: usize = 224;
/// Private data bytes a DREQ carries (`IB_DREQ_PDATA_SIZE`).
pub const DREQ_PRIVATE_DATA: usize = 220;
/// Private data bytes a DREP carries (`IB_DREP_PDATA_SIZE`).
pub const DREP_PRIVATE_DATA: usize = 224;
/// Private data bytes an MRA carries (`IB_MRA_PDATA_SIZE`).
pub const MRA_PRIVATE_DATA: usize = 222;

/// REJ reason (IBA table 112), host order: no QP available.
pub const REJ_INSUFFICIENT_QP: u16 = 1;
/// REJ reason: no resources.
pub const REJ_INSUFFICIENT_RESOURCES: u16 = 3;
/// REJ reason: the sender timed out waiting for the peer (`IB_REJ_TIMEOUT`).
pub const REJ_TIMEOUT: u16 = 4;
/// REJ reason: nobody listens on the service id (`IB_REJ_INVALID_SID`).
pub const REJ_INVALID_SERVICE_ID: u16 = 8;
/// REJ reason: a stale connection (`IB_REJ_STALE_CONN`).
pub const REJ_STALE_CONNECTION: u16 = 10;
/// REJ reason: the consumer rejected (`IB_REJ_USER_DEFINED`); WinVerbs' EP_REJECT sends it.
pub const REJ_USER_DEFINED: u16 = 28;

/// What a REQ asks of the connection, as the requester states it: the same in the request sent
/// ([`CmReq`]) and the request received ([`CmReqEvent`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmReqParams {
    /// Transport of the requester's QP (WinVerbs connects RC QPs).
    pub qp_type: QpType,
    /// Starting PSN of the requester's send queue (24 bits).
    pub starting_psn: u32,
    /// How many times the CM resends the REQ before giving up.
    pub max_cm_retries: u8,
    /// RDMA reads/atomics the requester accepts as responder.
    pub responder_resources: u8,
    /// RDMA reads/atomics the requester issues as initiator.
    pub initiator_depth: u8,
    /// The passive side's CM response time, as the exponent `4.096 µs × 2^n`.
    pub remote_cm_response_timeout: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// The requester's CM response time, same encoding.
    pub local_cm_response_timeout: u8,
    /// RNR retry count for the QP.
    pub rnr_retry_count: u8,
    /// Transport retry count for the QP.
    pub retry_count: u8,
    /// Whether the requester's QP receives through an SRQ.
    pub srq: bool,
}

/// A connection request to send (`iba_cm_req`).
#[derive(Clone, Copy, Debug)]
pub struct CmReq<'a> {
    /// Service id (host order): the listener it is for.
    pub service_id: u64,
    /// Primary path, wire order.
    pub primary_path: &'a IB_PATH_REC,
    /// Local QP number (24 bits).
    pub qpn: u32,
    /// Private data, at most [`REQ_PRIVATE_DATA`] bytes.
    pub private_data: &'a [u8],
    /// What the request asks, the local side being the requester.
    pub params: CmReqParams,
}

/// A connection request as the passive side receives it (`iba_cm_req_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmReqEvent {
    /// Service id (host order).
    pub service_id: u64,
    /// The primary path, as seen from the receiving side: `sgid`/`slid` are the local port's.
    pub primary_path: IB_PATH_REC,
    /// The requester's QP number.
    pub remote_qpn: u32,
    /// The REQ's private data (always the full field).
    pub private_data: [u8; REQ_PRIVATE_DATA],
    /// What the request asks, as the requester set it.
    pub params: CmReqParams,
    /// Node GUID of the receiving device (network order as stored).
    pub local_ca_guid: u64,
    /// Node GUID of the requester's device.
    pub remote_ca_guid: u64,
    /// P_Key index the request arrived on.
    pub pkey_index: u16,
    /// Port the request arrived on (1-based).
    pub port: u8,
}

/// A connection reply to send (`iba_cm_rep`).
#[derive(Clone, Copy, Debug)]
pub struct CmRep<'a> {
    /// Local QP number (24 bits).
    pub qpn: u32,
    /// Starting PSN of the local send queue.
    pub starting_psn: u32,
    /// Private data, at most [`REP_PRIVATE_DATA`] bytes.
    pub private_data: &'a [u8],
    /// Failover acceptance (`IB_FAILOVER_ACCEPT_*`; WinVerbs sends "unsupported", 1).
    pub failover_accepted: u8,
    /// RDMA reads/atomics the local side accepts as responder.
    pub responder_resources: u8,
    /// RDMA reads/atomics the local side issues as initiator.
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// RNR retry count for the peer's QP.
    pub rnr_retry_count: u8,
    /// Whether the local QP uses an SRQ.
    pub srq: bool,
}

/// A connection reply as the active side receives it (`iba_cm_rep_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmRepEvent {
    /// The replier's QP number.
    pub remote_qpn: u32,
    /// The replier's starting send PSN.
    pub starting_psn: u32,
    /// The REP's private data (always the full field).
    pub private_data: [u8; REP_PRIVATE_DATA],
    /// Failover acceptance.
    pub failover_accepted: u8,
    /// RDMA reads/atomics the replier accepts as responder.
    pub responder_resources: u8,
    /// RDMA reads/atomics the replier issues as initiator.
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// RNR retry count the replier asks for.
    pub rnr_retry_count: u8,
    /// Whether the replier's QP uses an SRQ.
    pub srq: bool,
    /// Node GUID of the replier's device (network order as stored).
    pub remote_ca_guid: u64,
    /// The replier's target ACK delay.
    pub target_ack_delay: u8,
}

/// What happened on a CM id (`iba_cm_event`). Private data is borrowed for the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmEvent<'a> {
    /// On a listening id: a connection request is waiting; take it with
    /// [`ConnectionManager::get_request`]. The event itself carries nothing (OFW's listen
    /// handler gets a zeroed event).
    ReqReceived,
    /// The peer never answered the REQ (every retry timed out): `iba_cm_req_error`.
    ReqError,
    /// The peer accepted: `iba_cm_rep_received`.
    RepReceived(&'a CmRepEvent),
    /// The REP was never acknowledged by an RTU: `iba_cm_rep_error`.
    RepError,
    /// The connection is established on the passive side: `iba_cm_rtu_received`.
    RtuReceived {
        /// RTU private data.
        private_data: &'a [u8],
    },
    /// The peer disconnects: `iba_cm_dreq_received`.
    DreqReceived {
        /// DREQ private data.
        private_data: &'a [u8],
    },
    /// The DREQ was never answered: `iba_cm_dreq_error`.
    DreqError,
    /// The peer answered the DREQ: `iba_cm_drep_received`.
    DrepReceived {
        /// DREP private data.
        private_data: &'a [u8],
    },
    /// The peer (or its CM) refused: `iba_cm_rej_received`.
    RejReceived {
        /// Reason (host order, `REJ_*`).
        reason: u16,
        /// Additional reject information.
        ari: &'a [u8],
        /// REJ private data.
        private_data: &'a [u8],
    },
    /// The peer needs more time: `iba_cm_mra_received`.
    MraReceived {
        /// The time it asks for, as the exponent `4.096 µs × 2^n`.
        service_timeout: u8,
        /// MRA private data.
        private_data: &'a [u8],
    },
    /// Any other kind (LAP, APR, SIDR): its `iba_cm_event_type` value.
    Other(u32),
}

/// Receives the events of one CM id.
pub trait CmEventSink: Send + Sync {
    /// An event on the id. Called at IRQL <= DISPATCH_LEVEL from the CM's own context (its
    /// MAD completion or timer DPC), never from inside a call the sink's owner made on the CM:
    /// the sink may take spin locks the owner holds only around such calls' bookkeeping, and
    /// must not block. The only CM call a sink may make is
    /// [`ConnectionManager::get_request`] on its own listening id, for `ReqReceived`. OFW's callbacks return a status (a failure made the CM destroy the id);
    /// WinVerbs always returned success, so this contract has no return value.
    fn on_event(&self, event: CmEvent<'_>);
}

impl CmEventSink for crate::verbs::NoEvents {
    fn on_event(&self, _: CmEvent<'_>) {}
}

/// The connection manager, as WinVerbs uses it.
///
/// # IRQL and context
/// Every call is made at PASSIVE_LEVEL, with no spin lock held, unless it says otherwise:
/// [`ConnectionManager::get_request`] is also made at DISPATCH_LEVEL, from inside the
/// listening id's sink. Events reach an id's sink until [`ConnectionManager::destroy_id`]
/// returns, never after; the CM holds none of its own locks while it calls a sink.
pub trait ConnectionManager: Send + Sync + 'static {
    /// A CM id (`iba_cm_id`): one connection or listen endpoint.
    type Id: Send + Sync;

    /// Creates an id whose events go to `events` (`create_id`).
    ///
    /// # Errors
    /// `STATUS_NO_MEMORY` / `STATUS_INSUFFICIENT_RESOURCES` when out of ids.
    fn create_id(&self, events: KArc<dyn CmEventSink>) -> Result<Self::Id, NtStatus>;

    /// Destroys an id (`destroy_id`): an established connection is torn down (the peer gets a
    /// DREQ), a listen stops, queued requests of a listen are rejected. Waits until no event
    /// callback of the id runs any more.
    fn destroy_id(&self, id: Self::Id);

    /// Listens for REQs to `service_id` (`listen`). `compare` and `compare_offset` are
    /// passed as OFW passes them: WinVerbs gives the 36-byte IP-CM header of its bound address
    /// and `IB_REQ_CM_RDMA_CMP_DST_IP` (4) as the offset argument, which the CM reads as a
    /// mask of the header fields to match (AL's `__cm_rdma_req_cmp`); an empty `compare`
    /// matches every request for the service id.
    ///
    /// # Errors
    /// `STATUS_INVALID_PARAMETER` when another id listens with the same service id and
    /// compare data (AL's `IB_INVALID_SETTING`); `STATUS_INVALID_DEVICE_STATE` for an id that
    /// is not idle.
    fn listen(
        &self,
        id: &Self::Id,
        service_id: u64,
        compare: &[u8],
        compare_offset: u8,
    ) -> Result<(), NtStatus>;

    /// Takes the oldest connection request queued on a listening id, as a new id whose events
    /// go to `events` (`get_request_ex`: the new id reports to `events` from its creation on,
    /// so no event can reach the listener's sink in between, the race of spec §7.1-h).
    ///
    /// IRQL <= DISPATCH_LEVEL, unlike the other calls: it may be called from inside the
    /// listening id's own sink while it handles [`CmEvent::ReqReceived`], as OFW's listen
    /// callback (`WvEpIbListenHandler`) calls `get_request_ex` there. An implementation calls
    /// sinks with none of its locks held, allocates only non-paged memory here and does not
    /// wait. It never calls the new id's sink from inside this call.
    ///
    /// # Errors
    /// `STATUS_NO_MORE_ENTRIES` when no request is queued; `STATUS_NO_MEMORY` when the new id
    /// cannot be allocated (the request is then rejected).
    fn get_request(
        &self,
        listen: &Self::Id,
        events: KArc<dyn CmEventSink>,
    ) -> Result<(Self::Id, CmReqEvent), NtStatus>;

    /// Sends a REQ (`send_req`).
    ///
    /// # Errors
    /// `STATUS_INVALID_PARAMETER` for a path the CM cannot use (no local port owns its
    /// source GID), too much private data; `STATUS_INVALID_DEVICE_STATE` for an id in use.
    fn send_req(&self, id: &Self::Id, req: &CmReq<'_>) -> Result<(), NtStatus>;

    /// Sends a REP for the request the id was created from (`send_rep`).
    ///
    /// # Errors
    /// `STATUS_INVALID_DEVICE_STATE` when the id has no request to answer.
    fn send_rep(&self, id: &Self::Id, rep: &CmRep<'_>) -> Result<(), NtStatus>;

    /// Sends an RTU after a REP (`send_rtu`); the connection is established.
    ///
    /// # Errors
    /// `STATUS_INVALID_DEVICE_STATE` when no REP was received.
    fn send_rtu(&self, id: &Self::Id, private_data: &[u8]) -> Result<(), NtStatus>;

    /// Sends a DREQ on an established connection (`send_dreq`).
    ///
    /// # Errors
    /// `STATUS_INVALID_DEVICE_STATE` when the connection is not established.
    fn send_dreq(&self, id: &Self::Id, private_data: &[u8]) -> Result<(), NtStatus>;

    /// Answers a DREQ (`send_drep`).
    ///
    /// # Errors
    /// `STATUS_INVALID_DEVICE_STATE` when no DREQ was received.
    fn send_drep(&self, id: &Self::Id, private_data: &[u8]) -> Result<(), NtStatus>;

    /// Rejects a request or a reply (`send_rej`); `reason` is host order (`REJ_*`).
    ///
    /// # Errors
    /// `STATUS_INVALID_DEVICE_STATE` when there is nothing to reject.
    fn send_rej(
        &self,
        id: &Self::Id,
        reason: u16,
        ari: &[u8],
        private_data: &[u8],
    ) -> Result<(), NtStatus>;

    /// Asks the peer for more time to answer (`send_mra`).
    ///
    /// # Errors
    /// `STATUS_INVALID_DEVICE_STATE` when there is nothing to acknowledge.
    fn send_mra(
        &self,
        id: &Self::Id,
        service_timeout: u8,
        private_data: &[u8],
    ) -> Result<(), NtStatus>;

    /// The attributes that move the connection's QP to `state` (INIT, RTR or RTS), as the
    /// CM computes them from the exchanged REQ and REP (`get_qp_attr`).
    ///
    /// # Errors
    /// `STATUS_INVALID_PARAMETER` for another state; `STATUS_INVALID_DEVICE_STATE` before the
    /// exchange has what the state needs.
    fn get_qp_attr(&self, id: &Self::Id, state: QpState) -> Result<QpModify, NtStatus>;
}

/// The connection manager of a controller stack that has none: it cannot exist, so an
/// `Option<Arc<NoCm>>` is always `None`.
#[derive(Debug)]
pub enum NoCm {}

impl ConnectionManager for NoCm {
    type Id = NoCm;

    fn create_id(&self, _events: KArc<dyn CmEventSink>) -> Result<NoCm, NtStatus> {
        match *self {}
    }
    fn destroy_id(&self, _id: NoCm) {
        match *self {}
    }
    fn listen(&self, _: &NoCm, _: u64, _: &[u8], _: u8) -> Result<(), NtStatus> {
        match *self {}
    }
    fn get_request(
        &self,
        _: &NoCm,
        _: KArc<dyn CmEventSink>,
    ) -> Result<(NoCm, CmReqEvent), NtStatus> {
        match *self {}
    }
    fn send_req(&self, _: &NoCm, _: &CmReq<'_>) -> Result<(), NtStatus> {
        match *self {}
    }
    fn send_rep(&self, _: &NoCm, _: &CmRep<'_>) -> Result<(), NtStatus> {
        match *self {}
    }
    fn send_rtu(&self, _: &NoCm, _: &[u8]) -> Result<(), NtStatus> {
        match *self {}
    }
    fn send_dreq(&self, _: &NoCm, _: &[u8]) -> Result<(), NtStatus> {
        match *self {}
    }
    fn send_drep(&self, _: &NoCm, _: &[u8]) -> Result<(), NtStatus> {
        match *self {}
    }
    fn send_rej(&self, _: &NoCm, _: u16, _: &[u8], _: &[u8]) -> Result<(), NtStatus> {
        match *self {}
    }
    fn send_mra(&self, _: &NoCm, _: u8, _: &[u8]) -> Result<(), NtStatus> {
        match *self {}
    }
    fn get_qp_attr(&self, _: &NoCm, _: QpState) -> Result<QpModify, NtStatus> {
        match *self {}
    }
}

/// A shared connection manager is a connection manager (as a shared device is a device, see
/// `verbs_shared`): a CM that tests or a device model also hold can be handed to the driver.
impl<C: ConnectionManager> ConnectionManager for Arc<C> {
    type Id = C::Id;

    fn create_id(&self, events: KArc<dyn CmEventSink>) -> Result<C::Id, NtStatus> {
        (**self).create_id(events)
    }
    fn destroy_id(&self, id: C::Id) {
        (**self).destroy_id(id)
    }
    fn listen(
        &self,
        id: &C::Id,
        service_id: u64,
        compare: &[u8],
        compare_offset: u8,
    ) -> Result<(), NtStatus> {
        (**self).listen(id, service_id, compare, compare_offset)
    }
    fn get_request(
        &self,
        listen: &C::Id,
        events: KArc<dyn CmEventSink>,
    ) -> Result<(C::Id, CmReqEvent), NtStatus> {
        (**self).get_request(listen, events)
    }
    fn send_req(&self, id: &C::Id, req: &CmReq<'_>) -> Result<(), NtStatus> {
        (**self).send_req(id, req)
    }
    fn send_rep(&self, id: &C::Id, rep: &CmRep<'_>) -> Result<(), NtStatus> {
        (**self).send_rep(id, rep)
    }
    fn send_rtu(&self, id: &C::Id, private_data: &[u8]) -> Result<(), NtStatus> {
        (**self).send_rtu(id, private_data)
    }
    fn send_dreq(&self, id: &C::Id, private_data: &[u8]) -> Result<(), NtStatus> {
        (**self).send_dreq(id, private_data)
    }
    fn send_drep(&self, id: &C::Id, private_data: &[u8]) -> Result<(), NtStatus> {
        (**self).send_drep(id, private_data)
    }
    fn send_rej(
        &self,
        id: &C::Id,
        reason: u16,
        ari: &[u8],
        private_data: &[u8],
    ) -> Result<(), NtStatus> {
        (**self).send_rej(id, reason, ari, private_data)
    }
    fn send_mra(
        &self,
        id: &C::Id,
        service_timeout: u8,
        private_data: &[u8],
    ) -> Result<(), NtStatus> {
        (**self).send_mra(id, service_timeout, private_data)
    }
    fn get_qp_attr(&self, id: &C::Id, state: QpState) -> Result<QpModify, NtStatus> {
        (**self).get_qp_attr(id, state)
    }
}
