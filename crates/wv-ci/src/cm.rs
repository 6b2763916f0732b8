//! The kernel CM interface of `inc/kernel/iba/ib_cm_ifc.h`: `iba_cm_interface`, the
//! `iba_cm_*` request and event types, and `INFINIBAND_INTERFACE_CM`, which the ibbus filter
//! answers `GUID_INFINIBAND_INTERFACE_CM` queries with.
//!
//! The header declares the table's function pointers inline, without typedefs, so the fields
//! below spell out their types. Parameter names are the C ones.

use core::ffi::c_void;

use crate::base::{GUID, INTERFACE, NTSTATUS, net32_t, net64_t};
use crate::ib_types::*;

/// The CM event callback of an [`iba_cm_id`] (`NTSTATUS (*)(iba_cm_id*, iba_cm_event*)`); a
/// failure status makes the CM destroy the id. The header has no name for this type.
pub type iba_cm_callback =
    Option<unsafe extern "system" fn(p_id: *mut iba_cm_id, p_event: *mut iba_cm_event) -> NTSTATUS>;

ci_struct! {
    /// A CM id: one connection (or listen) endpoint of the kernel CM.
    #[repr(C)]
    pub struct iba_cm_id [size 24, align 8] {
        /// The owner's context.
        [0] pub context: *mut c_void,
        /// Event callback.
        [8] pub callback: iba_cm_callback,
        /// Local communication id.
        [16] pub cid: net32_t,
    }
}

ci_struct! {
    /// Parameters of a connection request (`send_req`).
    #[repr(C)]
    pub struct iba_cm_req [size 64, align 8] {
        /// Service id, network order.
        [0] pub service_id: ib_net64_t,
        /// Primary path.
        [8] pub p_primary_path: *mut ib_path_rec_t,
        /// Alternate path, or null.
        [16] pub p_alt_path: *mut ib_path_rec_t,
        /// Local QP number, network order.
        [24] pub qpn: net32_t,
        /// QP transport service (`IB_QPT_*`).
        [28] pub qp_type: ib_qp_type_t,
        /// Starting PSN, network order.
        [32] pub starting_psn: net32_t,
        /// Private data.
        [40] pub p_pdata: *const c_void,
        /// Private data length.
        [48] pub pdata_len: u8,
        /// Maximum CM retries.
        [49] pub max_cm_retries: u8,
        /// Responder resources offered.
        [50] pub resp_res: u8,
        /// Initiator depth requested.
        [51] pub init_depth: u8,
        /// Remote CM response timeout exponent.
        [52] pub remote_resp_timeout: u8,
        /// End-to-end flow control.
        [53] pub flow_ctrl: u8,
        /// Local CM response timeout exponent.
        [54] pub local_resp_timeout: u8,
        /// RNR retry count.
        [55] pub rnr_retry_cnt: u8,
        /// Transport retry count.
        [56] pub retry_cnt: u8,
        /// Whether the QP uses an SRQ.
        [57] pub srq: u8,
    }
}

ci_struct! {
    /// A received connection request.
    #[repr(C)]
    pub struct iba_cm_req_event [size 280, align 8] {
        /// Service id, network order.
        [0] pub service_id: ib_net64_t,
        /// Primary path.
        [8] pub primary_path: ib_path_rec_t,
        /// Alternate path.
        [72] pub alt_path: ib_path_rec_t,
        /// Remote QP number, network order.
        [136] pub qpn: net32_t,
        /// QP transport service (`IB_QPT_*`).
        [140] pub qp_type: ib_qp_type_t,
        /// Remote starting PSN, network order.
        [144] pub starting_psn: net32_t,
        /// Private data.
        [148] pub pdata: [u8; IB_REQ_PDATA_SIZE],
        /// Maximum CM retries.
        [240] pub max_cm_retries: u8,
        /// Responder resources offered.
        [241] pub resp_res: u8,
        /// Initiator depth requested.
        [242] pub init_depth: u8,
        /// Remote CM response timeout exponent.
        [243] pub remote_resp_timeout: u8,
        /// End-to-end flow control.
        [244] pub flow_ctrl: u8,
        /// Local CM response timeout exponent.
        [245] pub local_resp_timeout: u8,
        /// RNR retry count.
        [246] pub rnr_retry_cnt: u8,
        /// Transport retry count.
        [247] pub retry_cnt: u8,
        /// Whether the remote QP uses an SRQ.
        [248] pub srq: u8,
        /// Local CA GUID, network order.
        [256] pub local_ca_guid: net64_t,
        /// Remote CA GUID, network order.
        [264] pub remote_ca_guid: net64_t,
        /// P_Key index the request arrived on.
        [272] pub pkey_index: u16,
        /// Port the request arrived on.
        [274] pub port_num: u8,
    }
}

ci_struct! {
    /// Parameters of a connection reply (`send_rep`, `format_rep`; also in the REP event).
    #[repr(C)]
    pub struct iba_cm_rep [size 24, align 8] {
        /// Local QP number, network order.
        [0] pub qpn: net32_t,
        /// Starting PSN, network order.
        [4] pub starting_psn: net32_t,
        /// Private data.
        [8] pub p_pdata: *const c_void,
        /// Private data length.
        [16] pub pdata_len: u8,
        /// Failover acceptance (`IB_FAILOVER_ACCEPT_*`).
        [17] pub failover_accepted: ib_cm_failover_t,
        /// Responder resources.
        [18] pub resp_res: u8,
        /// Initiator depth.
        [19] pub init_depth: u8,
        /// End-to-end flow control.
        [20] pub flow_ctrl: u8,
        /// RNR retry count.
        [21] pub rnr_retry_cnt: u8,
        /// Whether the QP uses an SRQ.
        [22] pub srq: u8,
    }
}

ci_struct! {
    /// A received connection reply.
    #[repr(C)]
    pub struct iba_cm_rep_event [size 40, align 8] {
        /// The reply parameters.
        [0] pub rep: iba_cm_rep,
        /// Remote CA GUID, network order.
        [24] pub ca_guid: net64_t,
        /// Remote target ACK delay.
        [32] pub target_ack_delay: u8,
    }
}

ci_struct! {
    /// Private data of an RTU, DREQ or DREP event.
    #[repr(C)]
    pub struct iba_cm_pdata [size 16, align 8] {
        /// Private data.
        [0] pub p_pdata: *mut c_void,
        /// Private data length.
        [8] pub pdata_len: u8,
    }
}

/// A received RTU (`iba_cm_pdata`).
pub type iba_cm_rtu_event = iba_cm_pdata;
/// A received DREQ (`iba_cm_pdata`).
pub type iba_cm_dreq_event = iba_cm_pdata;
/// A received DREP (`iba_cm_pdata`).
pub type iba_cm_drep_event = iba_cm_pdata;

ci_struct! {
    /// A received reject.
    #[repr(C)]
    pub struct iba_cm_rej_event [size 24, align 8] {
        /// Additional reject information.
        [0] pub ari: *mut c_void,
        /// Private data.
        [8] pub p_pdata: *mut c_void,
        /// Reason, network order (`IB_REJ_*`).
        [16] pub reason: ib_rej_status_t,
        /// Length of `ari`.
        [18] pub ari_length: u8,
        /// Private data length.
        [19] pub pdata_len: u8,
    }
}

ci_struct! {
    /// A received MRA (message receipt acknowledgement).
    #[repr(C)]
    pub struct iba_cm_mra_event [size 16, align 8] {
        /// Private data.
        [0] pub p_pdata: *mut c_void,
        /// Private data length.
        [8] pub pdata_len: u8,
        /// Service timeout exponent.
        [9] pub service_timeout: u8,
    }
}

ci_struct! {
    /// Parameters of a load alternate path request (`send_lap`; also the LAP event).
    #[repr(C)]
    pub struct iba_cm_lap [size 24, align 8] {
        /// Alternate path.
        [0] pub p_alt_path: *mut ib_path_rec_t,
        /// Private data.
        [8] pub p_pdata: *mut c_void,
        /// Private data length.
        [16] pub pdata_len: u8,
        /// Remote CM response timeout exponent.
        [17] pub remote_resp_timeout: u8,
    }
}

/// A received LAP (`iba_cm_lap`).
pub type iba_cm_lap_event = iba_cm_lap;

ci_struct! {
    /// Parameters of an alternate path response (`send_apr`; also the APR event).
    #[repr(C)]
    pub struct iba_cm_apr [size 24, align 8] {
        /// Private data.
        [0] pub p_pdata: *mut c_void,
        /// Additional information.
        [8] pub p_info: *mut ib_apr_info_t,
        /// Private data length.
        [16] pub pdata_len: u8,
        /// Length of `p_info`.
        [17] pub info_length: u8,
        /// Status (`IB_AP_*`).
        [18] pub status: ib_apr_status_t,
    }
}

/// A received APR (`iba_cm_apr`).
pub type iba_cm_apr_event = iba_cm_apr;

ci_struct! {
    /// Parameters of a service id resolution request (`send_sidr_req`).
    #[repr(C)]
    pub struct iba_cm_sidr_req [size 32, align 8] {
        /// Service id, network order.
        [0] pub service_id: ib_net64_t,
        /// Path to the remote side.
        [8] pub p_path: *mut ib_path_rec_t,
        /// Private data.
        [16] pub p_pdata: *mut c_void,
        /// Private data length.
        [24] pub pdata_len: u8,
        /// Maximum CM retries.
        [25] pub max_cm_retries: u8,
        /// Timeout.
        [28] pub timeout: u32,
    }
}

ci_struct! {
    /// A received SIDR request.
    #[repr(C)]
    pub struct iba_cm_sidr_req_event [size 48, align 8] {
        /// The request parameters.
        [0] pub sidr_req: iba_cm_sidr_req,
        /// Remote CA GUID, network order.
        [32] pub ca_guid: net64_t,
        /// P_Key index the request arrived on.
        [40] pub pkey_index: u16,
        /// Port the request arrived on.
        [42] pub port_num: u8,
    }
}

ci_struct! {
    /// Parameters of a SIDR reply (`send_sidr_rep`; also the SIDR REP event).
    #[repr(C)]
    pub struct iba_cm_sidr_rep [size 32, align 8] {
        /// QP number, network order.
        [0] pub qpn: net32_t,
        /// Q_Key, network order.
        [4] pub qkey: net32_t,
        /// Private data.
        [8] pub p_pdata: *mut c_void,
        /// Additional information.
        [16] pub p_info: *mut c_void,
        /// Private data length.
        [24] pub pdata_len: u8,
        /// Length of `p_info`.
        [25] pub info_len: u8,
        /// Status (`IB_SIDR_*`).
        [26] pub status: ib_sidr_status_t,
    }
}

/// A received SIDR reply (`iba_cm_sidr_rep`).
pub type iba_cm_sidr_rep_event = iba_cm_sidr_rep;

/// Kind of a CM event (C enum): `iba_cm_*_error` / `iba_cm_*_received`.
pub type iba_cm_event_type = u32;

ci_struct! {
    /// `iba_cm_event.data`: the event's details by kind (a C union without a tag).
    #[repr(C)]
    pub union iba_cm_event_anon_data [c "iba_cm_event::data (anonymous union)", size 280, align 8] {
        /// REQ received.
        [0] pub req: iba_cm_req_event,
        /// REP received.
        [0] pub rep: iba_cm_rep_event,
        /// RTU received.
        [0] pub rtu: iba_cm_rtu_event,
        /// DREQ received.
        [0] pub dreq: iba_cm_dreq_event,
        /// DREP received.
        [0] pub drep: iba_cm_drep_event,
        /// REJ received.
        [0] pub rej: iba_cm_rej_event,
        /// MRA received.
        [0] pub mra: iba_cm_mra_event,
        /// LAP received.
        [0] pub lap: iba_cm_lap_event,
        /// APR received.
        [0] pub apr: iba_cm_apr_event,
        /// SIDR REQ received.
        [0] pub sidr_req: iba_cm_sidr_req_event,
        /// SIDR REP received.
        [0] pub sidr_rep: iba_cm_sidr_rep_event,
    }
}

ci_struct! {
    /// A CM event handed to an id's callback (or returned by `get_request`).
    #[repr(C)]
    pub struct iba_cm_event [size 288, align 8] {
        /// Kind (`iba_cm_*`).
        [0] pub r#type: iba_cm_event_type,
        /// Details by kind.
        [8] pub data: iba_cm_event_anon_data => named {
            req: iba_cm_req_event,
            rep: iba_cm_rep_event,
            rtu: iba_cm_rtu_event,
            dreq: iba_cm_dreq_event,
            drep: iba_cm_drep_event,
            rej: iba_cm_rej_event,
            mra: iba_cm_mra_event,
            lap: iba_cm_lap_event,
            apr: iba_cm_apr_event,
            sidr_req: iba_cm_sidr_req_event,
            sidr_rep: iba_cm_sidr_rep_event,
        },
    }
}

ci_struct! {
    /// The kernel CM's function table (`struct _iba_cm_interface`).
    #[repr(C)]
    pub struct iba_cm_interface [size 176, align 8] {
        /// Creates an id with its callback and context.
        [0] pub create_id: Option<
            unsafe extern "system" fn(
                callback: iba_cm_callback,
                context: *mut c_void,
                pp_id: *mut *mut iba_cm_id,
            ) -> NTSTATUS,
        >,
        /// Destroys an id (PASSIVE_LEVEL; waits for its callbacks).
        [8] pub destroy_id: Option<unsafe extern "system" fn(p_id: *mut iba_cm_id)>,
        /// Listens for a service id, optionally matching private data bytes.
        [16] pub listen: Option<
            unsafe extern "system" fn(
                p_id: *mut iba_cm_id,
                service_id: net64_t,
                p_compare_buf: *mut c_void,
                compare_len: u8,
                compare_offset: u8,
            ) -> NTSTATUS,
        >,
        /// Takes a queued connection request from a listening id.
        [24] pub get_request: Option<
            unsafe extern "system" fn(
                p_listen_id: *mut iba_cm_id,
                pp_id: *mut *mut iba_cm_id,
                p_event: *mut iba_cm_event,
            ) -> NTSTATUS,
        >,
        /// Sends a REQ.
        [32] pub send_req: Option<
            unsafe extern "system" fn(p_id: *mut iba_cm_id, p_req: *mut iba_cm_req) -> NTSTATUS,
        >,
        /// Sends a REP.
        [40] pub send_rep: Option<
            unsafe extern "system" fn(p_id: *mut iba_cm_id, p_rep: *mut iba_cm_rep) -> NTSTATUS,
        >,
        /// Sends an RTU.
        [48] pub send_rtu: Option<
            unsafe extern "system" fn(
                p_id: *mut iba_cm_id,
                p_pdata: *const c_void,
                pdata_len: u8,
            ) -> NTSTATUS,
        >,
        /// Sends a DREQ.
        [56] pub send_dreq: Option<
            unsafe extern "system" fn(
                p_id: *mut iba_cm_id,
                p_pdata: *const c_void,
                pdata_len: u8,
            ) -> NTSTATUS,
        >,
        /// Sends a DREP.
        [64] pub send_drep: Option<
            unsafe extern "system" fn(
                p_id: *mut iba_cm_id,
                p_pdata: *const c_void,
                pdata_len: u8,
            ) -> NTSTATUS,
        >,
        /// Sends a REJ.
        [72] pub send_rej: Option<
            unsafe extern "system" fn(
                p_id: *mut iba_cm_id,
                status: ib_rej_status_t,
                p_ari: *const c_void,
                ari_len: u8,
                p_pdata: *const c_void,
                pdata_len: u8,
            ) -> NTSTATUS,
        >,
        /// Sends an MRA.
        [80] pub send_mra: Option<
            unsafe extern "system" fn(
                p_id: *mut iba_cm_id,
                service_timeout: u8,
                p_pdata: *const c_void,
                pdata_len: u8,
            ) -> NTSTATUS,
        >,
        /// Sends a LAP.
        [88] pub send_lap: Option<
            unsafe extern "system" fn(p_id: *mut iba_cm_id, p_lap: *mut iba_cm_lap) -> NTSTATUS,
        >,
        /// Sends an APR.
        [96] pub send_apr: Option<
            unsafe extern "system" fn(p_id: *mut iba_cm_id, p_apr: *mut iba_cm_apr) -> NTSTATUS,
        >,
        /// Sends a SIDR REQ.
        [104] pub send_sidr_req: Option<
            unsafe extern "system" fn(p_id: *mut iba_cm_id, p_req: *mut iba_cm_sidr_req) -> NTSTATUS,
        >,
        /// Sends a SIDR REP.
        [112] pub send_sidr_rep: Option<
            unsafe extern "system" fn(p_id: *mut iba_cm_id, p_rep: *mut iba_cm_sidr_rep) -> NTSTATUS,
        >,
        /// Fills the QP attributes for moving the connection's QP to `state`.
        [120] pub get_qp_attr: Option<
            unsafe extern "system" fn(
                p_id: *mut iba_cm_id,
                state: ib_qp_state_t,
                p_attr: *mut ib_qp_mod_t,
            ) -> NTSTATUS,
        >,
        /// Migrates to the alternate path.
        [128] pub migrate: Option<unsafe extern "system" fn(p_id: *mut iba_cm_id) -> NTSTATUS>,
        /// Marks the connection established without an RTU.
        [136] pub established: Option<unsafe extern "system" fn(p_id: *mut iba_cm_id) -> NTSTATUS>,
        /// Stops listening.
        [144] pub cancel_listen: Option<unsafe extern "system" fn(p_id: *mut iba_cm_id) -> NTSTATUS>,
        /// Prepares a REP and the QP's INIT attributes without sending it.
        [152] pub format_rep: Option<
            unsafe extern "system" fn(
                p_id: *mut iba_cm_id,
                p_rep: *mut iba_cm_rep,
                p_init: *mut ib_qp_mod_t,
            ) -> NTSTATUS,
        >,
        /// Sends the REP prepared by `format_rep`.
        [160] pub send_formatted_rep: Option<unsafe extern "system" fn(p_id: *mut iba_cm_id) -> NTSTATUS>,
        /// `get_request` that also sets the new id's callback and context.
        [168] pub get_request_ex: Option<
            unsafe extern "system" fn(
                p_listen_id: *mut iba_cm_id,
                callback: iba_cm_callback,
                context: *mut c_void,
                pp_id: *mut *mut iba_cm_id,
                p_event: *mut iba_cm_event,
            ) -> NTSTATUS,
        >,
    }
}

ci_struct! {
    /// The CM interface the ibbus filter answers `GUID_INFINIBAND_INTERFACE_CM` queries with
    /// (`struct _INFINIBAND_INTERFACE_CM`).
    #[repr(C)]
    pub struct INFINIBAND_INTERFACE_CM [size 208, align 8] {
        /// WDM interface header (size, version, reference routines).
        [0] pub InterfaceHeader: INTERFACE,
        /// The CM table.
        [32] pub CM: iba_cm_interface,
    }
}

/// `GUID_INFINIBAND_INTERFACE_CM` {6A11D060-8957-49E6-BE2A-01EDF1BD22B3}.
pub const GUID_INFINIBAND_INTERFACE_CM: GUID = GUID {
    Data1: 0x6A11_D060,
    Data2: 0x8957,
    Data3: 0x49E6,
    Data4: [0xBE, 0x2A, 0x01, 0xED, 0xF1, 0xBD, 0x22, 0xB3],
};

ci_consts! {
    /// The constants of this module, in declaration order.
    pub(crate) const CM_CONSTANTS;

    /// Interface version (`ib_cm_ifc.h`).
    group {
        /// `INTERFACE::Version` of `INFINIBAND_INTERFACE_CM` (`IbaCmVersion(1, 1)`).
        INFINIBAND_INTERFACE_CM_VERSION: u16 = (1 << 8) | 1;
    }

    /// `iba_cm_event_type` value.
    group {
        /// A REQ failed (no reply).
        iba_cm_req_error: iba_cm_event_type = 0;
        /// A REQ arrived.
        iba_cm_req_received: iba_cm_event_type = 1;
        /// A REP failed (no RTU).
        iba_cm_rep_error: iba_cm_event_type = 2;
        /// A REP arrived.
        iba_cm_rep_received: iba_cm_event_type = 3;
        /// An RTU arrived.
        iba_cm_rtu_received: iba_cm_event_type = 4;
        /// A DREQ failed (no DREP).
        iba_cm_dreq_error: iba_cm_event_type = 5;
        /// A DREQ arrived.
        iba_cm_dreq_received: iba_cm_event_type = 6;
        /// A DREP arrived.
        iba_cm_drep_received: iba_cm_event_type = 7;
        /// A REJ arrived.
        iba_cm_rej_received: iba_cm_event_type = 8;
        /// An MRA arrived.
        iba_cm_mra_received: iba_cm_event_type = 9;
        /// A LAP failed.
        iba_cm_lap_error: iba_cm_event_type = 10;
        /// A LAP arrived.
        iba_cm_lap_received: iba_cm_event_type = 11;
        /// An APR arrived.
        iba_cm_apr_received: iba_cm_event_type = 12;
        /// A SIDR REQ failed.
        iba_cm_sidr_req_error: iba_cm_event_type = 13;
        /// A SIDR REQ arrived.
        iba_cm_sidr_req_received: iba_cm_event_type = 14;
        /// A SIDR REP arrived.
        iba_cm_sidr_rep_received: iba_cm_event_type = 15;
    }
}
