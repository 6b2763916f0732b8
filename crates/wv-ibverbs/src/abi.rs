//! rdma-core's `<infiniband/verbs.h>` structures, hand-written with its names (x86-64 layout),
//! so the crate compiles for any target. Every layout is asserted at compile time against the
//! C numbers (sizes and offsets of the fields this library or the header's inline functions
//! read), and on Linux also against bindgen's view of Debian's header (`verbs_h`, generated at
//! build time, never committed): a mismatch fails the build.
#![allow(non_camel_case_types, non_snake_case, missing_docs)]

use core::ffi::c_void;

/// bindgen's view of `<infiniband/verbs.h>` (Linux builds only).
#[cfg(wv_verbs_h)]
#[allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::multiple_unsafe_ops_per_block,
    missing_docs,
    unnecessary_transmutes
)]
pub mod verbs_h {
    include!(concat!(env!("OUT_DIR"), "/verbs_h.rs"));
}

/// `pthread_mutex_t` on x86-64 glibc (40 bytes).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct pthread_mutex_t(pub [u8; 40]);
/// `pthread_cond_t` on x86-64 glibc (48 bytes).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct pthread_cond_t(pub [u8; 48]);

/// Sizes and offsets against the C numbers (and, on Linux, against bindgen's struct of the same
/// name).
macro_rules! layout {
    ($t:ident, $size:expr, { $($f:ident @ $off:expr),* $(,)? }) => {
        const _: () = assert!(core::mem::size_of::<$t>() == $size);
        $( const _: () = assert!(core::mem::offset_of!($t, $f) == $off); )*
        #[cfg(wv_verbs_h)]
        const _: () = {
            assert!(core::mem::size_of::<$t>() == core::mem::size_of::<verbs_h::$t>());
            $( assert!(core::mem::offset_of!($t, $f) == core::mem::offset_of!(verbs_h::$t, $f)); )*
        };
    };
}

pub type Fn0 = Option<unsafe extern "C" fn()>;

#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    pub raw: [u8; 16],
    pub global: ibv_gid_global,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_global {
    pub subnet_prefix: u64,
    pub interface_id: u64,
}
const _: () = assert!(core::mem::size_of::<ibv_gid>() == 16);

#[repr(C)]
pub struct _ibv_device_ops {
    pub _dummy1: Fn0,
    pub _dummy2: Fn0,
}

pub const IBV_SYSFS_NAME_MAX: usize = 64;
pub const IBV_SYSFS_PATH_MAX: usize = 256;

#[repr(C)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    pub node_type: i32,
    pub transport_type: i32,
    pub name: [u8; IBV_SYSFS_NAME_MAX],
    pub dev_name: [u8; IBV_SYSFS_NAME_MAX],
    pub dev_path: [u8; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [u8; IBV_SYSFS_PATH_MAX],
}
layout!(ibv_device, 664, { node_type @ 16, transport_type @ 20, name @ 24, dev_name @ 88, dev_path @ 152, ibdev_path @ 408 });

#[repr(C)]
pub struct ibv_context_ops {
    pub _compat_query_device: Fn0,
    pub _compat_query_port: Fn0,
    pub _compat_alloc_pd: Fn0,
    pub _compat_dealloc_pd: Fn0,
    pub _compat_reg_mr: Fn0,
    pub _compat_rereg_mr: Fn0,
    pub _compat_dereg_mr: Fn0,
    pub alloc_mw: Option<unsafe extern "C" fn(*mut ibv_pd, i32) -> *mut ibv_mw>,
    pub bind_mw: Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut ibv_mw_bind) -> i32>,
    pub dealloc_mw: Option<unsafe extern "C" fn(*mut ibv_mw) -> i32>,
    pub _compat_create_cq: Fn0,
    pub poll_cq: Option<unsafe extern "C" fn(*mut ibv_cq, i32, *mut ibv_wc) -> i32>,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut ibv_cq, i32) -> i32>,
    pub _compat_cq_event: Fn0,
    pub _compat_resize_cq: Fn0,
    pub _compat_destroy_cq: Fn0,
    pub _compat_create_srq: Fn0,
    pub _compat_modify_srq: Fn0,
    pub _compat_query_srq: Fn0,
    pub _compat_destroy_srq: Fn0,
    pub post_srq_recv:
        Option<unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> i32>,
    pub _compat_create_qp: Fn0,
    pub _compat_query_qp: Fn0,
    pub _compat_modify_qp: Fn0,
    pub _compat_destroy_qp: Fn0,
    pub post_send:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> i32>,
    pub post_recv:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> i32>,
    pub _compat_create_ah: Fn0,
    pub _compat_destroy_ah: Fn0,
    pub _compat_attach_mcast: Fn0,
    pub _compat_detach_mcast: Fn0,
    pub _compat_async_event: Fn0,
}
layout!(ibv_context_ops, 256, { alloc_mw @ 56, poll_cq @ 88, req_notify_cq @ 96, post_srq_recv @ 160, post_send @ 200, post_recv @ 208 });

#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: i32,
    pub async_fd: i32,
    pub num_comp_vectors: i32,
    pub mutex: pthread_mutex_t,
    pub abi_compat: *mut c_void,
}
layout!(ibv_context, 328, { device @ 0, ops @ 8, cmd_fd @ 264, async_fd @ 268, num_comp_vectors @ 272, mutex @ 280, abi_compat @ 320 });

/// `__VERBS_ABI_IS_EXTENDED`: `abi_compat` of a context with a `verbs_context` before it.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

/// `struct verbs_context`: the extended ops, "growing up" (newest first), `sz`, then the
/// `ibv_context` applications hold (`verbs_get_ctx` is a container_of).
#[repr(C)]
pub struct verbs_context {
    pub query_port:
        Option<unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> i32>,
    pub advise_mr: Fn0,
    pub alloc_null_mr: Option<unsafe extern "C" fn(*mut ibv_pd) -> *mut ibv_mr>,
    pub read_counters: Fn0,
    pub attach_counters_point_flow: Fn0,
    pub create_counters: Fn0,
    pub destroy_counters: Fn0,
    pub reg_dm_mr: Fn0,
    pub alloc_dm: Option<unsafe extern "C" fn(*mut ibv_context, *mut c_void) -> *mut c_void>,
    pub free_dm: Fn0,
    pub modify_flow_action_esp: Fn0,
    pub destroy_flow_action: Fn0,
    pub create_flow_action_esp: Fn0,
    pub modify_qp_rate_limit: Fn0,
    pub alloc_parent_domain: Option<
        unsafe extern "C" fn(*mut ibv_context, *mut ibv_parent_domain_init_attr) -> *mut ibv_pd,
    >,
    pub dealloc_td: Option<unsafe extern "C" fn(*mut ibv_td) -> i32>,
    pub alloc_td:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_td_init_attr) -> *mut ibv_td>,
    pub modify_cq: Option<unsafe extern "C" fn(*mut ibv_cq, *mut ibv_modify_cq_attr) -> i32>,
    pub post_srq_ops: Fn0,
    pub destroy_rwq_ind_table: Fn0,
    pub create_rwq_ind_table:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut c_void) -> *mut c_void>,
    pub destroy_wq: Fn0,
    pub modify_wq: Fn0,
    pub create_wq: Option<unsafe extern "C" fn(*mut ibv_context, *mut c_void) -> *mut c_void>,
    pub query_rt_values: Option<unsafe extern "C" fn(*mut ibv_context, *mut c_void) -> i32>,
    pub create_cq_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex>,
    pub priv_: *mut c_void,
    pub query_device_ex: Option<
        unsafe extern "C" fn(
            *mut ibv_context,
            *const ibv_query_device_ex_input,
            *mut ibv_device_attr_ex,
            usize,
        ) -> i32,
    >,
    pub ibv_destroy_flow: Fn0,
    pub ABI_placeholder2: Fn0,
    pub ibv_create_flow: Option<unsafe extern "C" fn(*mut ibv_qp, *mut c_void) -> *mut c_void>,
    pub ABI_placeholder1: Fn0,
    pub open_qp: Option<unsafe extern "C" fn(*mut ibv_context, *mut c_void) -> *mut ibv_qp>,
    pub create_qp_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp>,
    pub get_srq_num: Option<unsafe extern "C" fn(*mut ibv_srq, *mut u32) -> i32>,
    pub create_srq_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_srq_init_attr_ex) -> *mut ibv_srq>,
    pub open_xrcd: Option<unsafe extern "C" fn(*mut ibv_context, *mut c_void) -> *mut c_void>,
    pub close_xrcd: Fn0,
    pub _ABI_placeholder3: u64,
    pub sz: usize,
    pub context: ibv_context,
}
layout!(verbs_context, 648, { query_port @ 0, alloc_dm @ 64, alloc_parent_domain @ 112, alloc_td @ 128, modify_cq @ 136, create_wq @ 184, query_rt_values @ 192, create_cq_ex @ 200, query_device_ex @ 216, open_qp @ 256, create_qp_ex @ 264, create_srq_ex @ 280, open_xrcd @ 288, sz @ 312, context @ 320 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [u8; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: i32,
    pub max_qp_wr: i32,
    pub device_cap_flags: u32,
    pub max_sge: i32,
    pub max_sge_rd: i32,
    pub max_cq: i32,
    pub max_cqe: i32,
    pub max_mr: i32,
    pub max_pd: i32,
    pub max_qp_rd_atom: i32,
    pub max_ee_rd_atom: i32,
    pub max_res_rd_atom: i32,
    pub max_qp_init_rd_atom: i32,
    pub max_ee_init_rd_atom: i32,
    pub atomic_cap: u32,
    pub max_ee: i32,
    pub max_rdd: i32,
    pub max_mw: i32,
    pub max_raw_ipv6_qp: i32,
    pub max_raw_ethy_qp: i32,
    pub max_mcast_grp: i32,
    pub max_mcast_qp_attach: i32,
    pub max_total_mcast_qp_attach: i32,
    pub max_ah: i32,
    pub max_fmr: i32,
    pub max_map_per_fmr: i32,
    pub max_srq: i32,
    pub max_srq_wr: i32,
    pub max_srq_sge: i32,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}
layout!(ibv_device_attr, 232, { node_guid @ 64, max_mr_size @ 80, vendor_id @ 96, max_qp @ 108, device_cap_flags @ 116, atomic_cap @ 164, max_mw @ 176, max_ah @ 200, max_srq @ 212, max_srq_sge @ 220, max_pkeys @ 224, phys_port_cnt @ 227 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_odp_caps {
    pub general_caps: u64,
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_tso_caps {
    pub max_tso: u32,
    pub supported_qpts: u32,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_rss_caps {
    pub supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    pub rx_hash_fields_mask: u64,
    pub rx_hash_function: u8,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_packet_pacing_caps {
    pub qp_rate_limit_min: u32,
    pub qp_rate_limit_max: u32,
    pub supported_qpts: u32,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_tm_caps {
    pub max_rndv_hdr_size: u32,
    pub max_num_tags: u32,
    pub flags: u32,
    pub max_ops: u32,
    pub max_sge: u32,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_cq_moderation_caps {
    pub max_cq_count: u16,
    pub max_cq_period: u16,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_pci_atomic_caps {
    pub fetch_add: u16,
    pub swap: u16,
    pub compare_swap: u16,
}
layout!(ibv_odp_caps, 24, { general_caps @ 0 });
layout!(ibv_rss_caps, 32, { supported_qpts @ 0, rx_hash_fields_mask @ 16, rx_hash_function @ 24 });
layout!(ibv_tm_caps, 20, { max_sge @ 16 });
layout!(ibv_pci_atomic_caps, 6, { compare_swap @ 4 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    pub odp_caps: ibv_odp_caps,
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    pub tso_caps: ibv_tso_caps,
    pub rss_caps: ibv_rss_caps,
    pub max_wq_type_rq: u32,
    pub packet_pacing_caps: ibv_packet_pacing_caps,
    pub raw_packet_caps: u32,
    pub tm_caps: ibv_tm_caps,
    pub cq_mod_caps: ibv_cq_moderation_caps,
    pub max_dm_size: u64,
    pub pci_atomic_caps: ibv_pci_atomic_caps,
    pub xrc_odp_caps: u32,
    pub phys_port_cnt_ex: u32,
}
layout!(ibv_device_attr_ex, 400, { comp_mask @ 232, odp_caps @ 240, completion_timestamp_mask @ 264, hca_core_clock @ 272, device_cap_flags_ex @ 280, tso_caps @ 288, rss_caps @ 296, max_wq_type_rq @ 328, packet_pacing_caps @ 332, raw_packet_caps @ 344, tm_caps @ 348, cq_mod_caps @ 368, max_dm_size @ 376, pci_atomic_caps @ 384, xrc_odp_caps @ 392, phys_port_cnt_ex @ 396 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_query_device_ex_input {
    pub comp_mask: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_port_attr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: i32,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}
layout!(ibv_port_attr, 52, { pkey_tbl_len @ 32, lid @ 34, sm_lid @ 36, active_width @ 43, active_speed @ 44, phys_state @ 45, link_layer @ 46, flags @ 47, port_cap_flags2 @ 48 });

#[repr(C)]
pub struct ibv_td {
    pub context: *mut ibv_context,
}
layout!(ibv_td, 8, { context @ 0 });

#[repr(C)]
pub struct ibv_td_init_attr {
    pub comp_mask: u32,
}
layout!(ibv_td_init_attr, 4, { comp_mask @ 0 });

#[repr(C)]
pub struct ibv_parent_domain_init_attr {
    pub pd: *mut ibv_pd,
    pub td: *mut ibv_td,
    pub comp_mask: u32,
    pub alloc:
        Option<unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, usize, u64) -> *mut c_void>,
    pub free: Option<unsafe extern "C" fn(*mut ibv_pd, *mut c_void, *mut c_void, u64)>,
    pub pd_context: *mut c_void,
}
layout!(ibv_parent_domain_init_attr, 48, { pd @ 0, td @ 8, comp_mask @ 16, alloc @ 24, free @ 32, pd_context @ 40 });

pub const IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS: u32 = 1 << 0;
pub const IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT: u32 = 1 << 1;

#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}
layout!(ibv_pd, 16, { context @ 0, handle @ 8 });

#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}
layout!(ibv_mr, 48, { context @ 0, pd @ 8, addr @ 16, length @ 24, handle @ 32, lkey @ 36, rkey @ 40 });

#[repr(C)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: u32,
    pub handle: u32,
    pub type_: u32,
}
const _: () = assert!(core::mem::size_of::<ibv_mw>() == 32);
const _: () = assert!(core::mem::offset_of!(ibv_mw, type_) == 24);
#[cfg(wv_verbs_h)]
const _: () = assert!(core::mem::offset_of!(verbs_h::ibv_mw, type_) == 24);
layout!(ibv_mw, 32, { context @ 0, pd @ 8, rkey @ 16, handle @ 20 });

#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}
layout!(ibv_ah, 24, { context @ 0, pd @ 8, handle @ 16 });

#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: i32,
    pub refcnt: i32,
}
layout!(ibv_comp_channel, 16, { context @ 0, fd @ 8, refcnt @ 12 });

#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: i32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}
layout!(ibv_cq, 128, { context @ 0, channel @ 8, cq_context @ 16, handle @ 24, cqe @ 28, mutex @ 32, cond @ 72, comp_events_completed @ 120, async_events_completed @ 124 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

#[repr(C)]
pub struct ibv_wc_tm_info {
    pub tag: u64,
    pub priv_: u32,
}

#[repr(C)]
pub struct ibv_cq_ex {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: i32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
    pub comp_mask: u32,
    pub status: u32,
    pub wr_id: u64,
    pub start_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> i32>,
    pub next_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> i32>,
    pub end_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex)>,
    pub read_opcode: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_vendor_err: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_byte_len: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_imm_data: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_qp_num: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_src_qp: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_wc_flags: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_slid: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_sl: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    pub read_dlid_path_bits: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    pub read_completion_ts: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u64>,
    pub read_cvlan: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u16>,
    pub read_flow_tag: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_tm_info: Option<unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_wc_tm_info)>,
    pub read_completion_wallclock_ns: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u64>,
}
layout!(ibv_cq_ex, 288, { context @ 0, cqe @ 28, comp_mask @ 128, status @ 132, wr_id @ 136, start_poll @ 144, next_poll @ 152, end_poll @ 160, read_opcode @ 168, read_byte_len @ 184, read_imm_data @ 192, read_qp_num @ 200, read_src_qp @ 208, read_wc_flags @ 216, read_slid @ 224, read_sl @ 232, read_dlid_path_bits @ 240, read_completion_ts @ 248, read_cvlan @ 256, read_flow_tag @ 264, read_tm_info @ 272, read_completion_wallclock_ns @ 280 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}
layout!(ibv_cq_init_attr_ex, 56, { cqe @ 0, cq_context @ 8, channel @ 16, comp_vector @ 24, wc_flags @ 32, comp_mask @ 40, flags @ 44, parent_domain @ 48 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_moderate_cq {
    pub cq_count: u16,
    pub cq_period: u16,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_modify_cq_attr {
    pub attr_mask: u32,
    pub moderate: ibv_moderate_cq,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// The union of `imm_data` (network order) and `invalidated_rkey`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}
layout!(ibv_wc, 48, { wr_id @ 0, status @ 8, opcode @ 12, vendor_err @ 16, byte_len @ 20, qp_num @ 28, src_qp @ 32, wc_flags @ 36, pkey_index @ 40, slid @ 42, sl @ 44, dlid_path_bits @ 45 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}
layout!(ibv_sge, 16, { addr @ 0, length @ 8, lkey @ 12 });

#[repr(C)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: i32,
}
layout!(ibv_recv_wr, 32, { wr_id @ 0, next @ 8, sg_list @ 16, num_sge @ 24 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: u32,
}
layout!(ibv_mw_bind_info, 32, { mr @ 0, addr @ 8, length @ 16, mw_access_flags @ 24 });

#[repr(C)]
pub struct ibv_mw_bind {
    pub wr_id: u64,
    pub send_flags: u32,
    pub bind_info: ibv_mw_bind_info,
}
layout!(ibv_mw_bind, 48, { wr_id @ 0, send_flags @ 8, bind_info @ 16 });

/// `wr.rdma` of `ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}
/// `wr.atomic` of `ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}
/// `wr.ud` of `ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_ud {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}
/// The `wr` union of `ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub atomic: ibv_send_wr_atomic,
    pub ud: ibv_send_wr_ud,
}
/// `bind_mw` of `ibv_send_wr`'s last union.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_bind_mw {
    pub mw: *mut ibv_mw,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}
/// `tso` of `ibv_send_wr`'s last union.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_tso {
    pub hdr: *mut c_void,
    pub hdr_sz: u16,
    pub mss: u16,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_ext {
    pub bind_mw: ibv_send_wr_bind_mw,
    pub tso: ibv_send_wr_tso,
}

#[repr(C)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: i32,
    pub opcode: u32,
    pub send_flags: u32,
    /// The union of `imm_data` (network order) and `invalidate_rkey`.
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    /// `qp_type.xrc.remote_srqn`.
    pub qp_type: u32,
    pub ext: ibv_send_wr_ext,
}
layout!(ibv_send_wr, 128, { wr_id @ 0, next @ 8, sg_list @ 16, num_sge @ 24, opcode @ 28, send_flags @ 32, wr @ 40, qp_type @ 72 });
const _: () = assert!(core::mem::offset_of!(ibv_send_wr, ext) == 80);

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}
layout!(ibv_qp_cap, 20, { max_send_wr @ 0, max_recv_wr @ 4, max_send_sge @ 8, max_recv_sge @ 12, max_inline_data @ 16 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}
layout!(ibv_global_route, 24, { dgid @ 0, flow_label @ 16, sgid_index @ 20, hop_limit @ 21, traffic_class @ 22 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}
layout!(ibv_ah_attr, 32, { grh @ 0, dlid @ 24, sl @ 26, src_path_bits @ 27, static_rate @ 28, is_global @ 29, port_num @ 30 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_attr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}
layout!(ibv_qp_attr, 144, { qp_state @ 0, path_mtu @ 8, qkey @ 16, dest_qp_num @ 28, qp_access_flags @ 32, cap @ 36, ah_attr @ 56, alt_ah_attr @ 88, pkey_index @ 120, en_sqd_async_notify @ 124, max_rd_atomic @ 126, max_dest_rd_atomic @ 127, min_rnr_timer @ 128, port_num @ 129, timeout @ 130, retry_cnt @ 131, rnr_retry @ 132, alt_port_num @ 133, alt_timeout @ 134, rate_limit @ 136 });

#[repr(C)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: i32,
}
layout!(ibv_qp_init_attr, 64, { qp_context @ 0, send_cq @ 8, recv_cq @ 16, srq @ 24, cap @ 32, qp_type @ 52, sq_sig_all @ 56 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

#[repr(C)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: i32,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}
layout!(ibv_qp_init_attr_ex, 136, { cap @ 32, qp_type @ 52, sq_sig_all @ 56, comp_mask @ 60, pd @ 64, xrcd @ 72, create_flags @ 80, max_tso_header @ 84, rwq_ind_tbl @ 88, rx_hash_conf @ 96, source_qpn @ 120, send_ops_flags @ 128 });

#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}
layout!(ibv_qp, 160, { context @ 0, qp_context @ 8, pd @ 16, send_cq @ 24, recv_cq @ 32, srq @ 40, handle @ 48, qp_num @ 52, state @ 56, qp_type @ 60, mutex @ 64, cond @ 104, events_completed @ 152 });

#[repr(C)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    pub wr_id: u64,
    pub wr_flags: u32,
    pub wr_atomic_cmp_swp: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64, u64)>,
    pub wr_atomic_fetch_add: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64)>,
    pub wr_bind_mw:
        Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_mw, u32, *const ibv_mw_bind_info)>,
    pub wr_local_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_rdma_read: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_send: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_send_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_tso: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, u16, u16)>,
    pub wr_set_ud_addr: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_ah, u32, u32)>,
    pub wr_set_xrc_srqn: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_set_inline_data: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, usize)>,
    pub wr_set_inline_data_list:
        Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_data_buf)>,
    pub wr_set_sge: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_set_sge_list: Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_sge)>,
    pub wr_start: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_complete: Option<unsafe extern "C" fn(*mut ibv_qp_ex) -> i32>,
    pub wr_abort: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_atomic_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, *const c_void)>,
}
layout!(ibv_qp_ex, 352, { qp_base @ 0, comp_mask @ 160, wr_id @ 168, wr_flags @ 176, wr_atomic_cmp_swp @ 184, wr_atomic_fetch_add @ 192, wr_bind_mw @ 200, wr_local_inv @ 208, wr_rdma_read @ 216, wr_rdma_write @ 224, wr_rdma_write_imm @ 232, wr_send @ 240, wr_send_imm @ 248, wr_send_inv @ 256, wr_send_tso @ 264, wr_set_ud_addr @ 272, wr_set_xrc_srqn @ 280, wr_set_inline_data @ 288, wr_set_inline_data_list @ 296, wr_set_sge @ 304, wr_set_sge_list @ 312, wr_start @ 320, wr_complete @ 328, wr_abort @ 336, wr_atomic_write @ 344 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}
layout!(ibv_srq_attr, 12, { max_wr @ 0, max_sge @ 4, srq_limit @ 8 });

#[repr(C)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}
layout!(ibv_srq_init_attr, 24, { srq_context @ 0, attr @ 8 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_tm_cap {
    pub max_num_tags: u32,
    pub max_ops: u32,
}

#[repr(C)]
pub struct ibv_srq_init_attr_ex {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
    pub comp_mask: u32,
    pub srq_type: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub cq: *mut ibv_cq,
    pub tm_cap: ibv_tm_cap,
}
layout!(ibv_srq_init_attr_ex, 64, { srq_context @ 0, attr @ 8, comp_mask @ 20, srq_type @ 24, pd @ 32, xrcd @ 40, cq @ 48, tm_cap @ 56 });

#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}
layout!(ibv_srq, 128, { context @ 0, srq_context @ 8, pd @ 16, handle @ 24, mutex @ 32, cond @ 72, events_completed @ 120 });

/// `element` of `ibv_async_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_async_event_element {
    pub cq: *mut ibv_cq,
    pub qp: *mut ibv_qp,
    pub srq: *mut ibv_srq,
    pub wq: *mut c_void,
    pub port_num: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_async_event {
    pub element: ibv_async_event_element,
    pub event_type: u32,
}
layout!(ibv_async_event, 16, { element @ 0, event_type @ 8 });

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}
layout!(ibv_gid_entry, 32, { gid @ 0, gid_index @ 16, port_num @ 20, gid_type @ 24, ndev_ifindex @ 28 });

/// `struct ibv_grh` (the 40 bytes a UD receive starts with).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_grh {
    pub version_tclass_flow: u32,
    pub paylen: u16,
    pub next_hdr: u8,
    pub hop_limit: u8,
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
}
layout!(ibv_grh, 40, { version_tclass_flow @ 0, paylen @ 4, next_hdr @ 6, hop_limit @ 7, sgid @ 8, dgid @ 24 });

// ------------------------------------------------------------------------------------------
// Constants (enum values of verbs.h).

pub const IBV_NODE_CA: i32 = 1;
pub const IBV_TRANSPORT_IB: i32 = 0;

pub const IBV_QPT_RC: u32 = 2;
pub const IBV_QPT_UC: u32 = 3;
pub const IBV_QPT_UD: u32 = 4;
pub const IBV_QPT_RAW_PACKET: u32 = 8;
pub const IBV_QPT_XRC_SEND: u32 = 9;
pub const IBV_QPT_XRC_RECV: u32 = 10;
pub const IBV_QPT_DRIVER: u32 = 0xff;

pub const IBV_QPS_RESET: u32 = 0;
pub const IBV_QPS_INIT: u32 = 1;
pub const IBV_QPS_RTR: u32 = 2;
pub const IBV_QPS_RTS: u32 = 3;
pub const IBV_QPS_SQD: u32 = 4;
pub const IBV_QPS_SQE: u32 = 5;
pub const IBV_QPS_ERR: u32 = 6;
pub const IBV_QPS_UNKNOWN: u32 = 7;

pub const IBV_QP_STATE: u32 = 1 << 0;
pub const IBV_QP_CUR_STATE: u32 = 1 << 1;
pub const IBV_QP_EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
pub const IBV_QP_ACCESS_FLAGS: u32 = 1 << 3;
pub const IBV_QP_PKEY_INDEX: u32 = 1 << 4;
pub const IBV_QP_PORT: u32 = 1 << 5;
pub const IBV_QP_QKEY: u32 = 1 << 6;
pub const IBV_QP_AV: u32 = 1 << 7;
pub const IBV_QP_PATH_MTU: u32 = 1 << 8;
pub const IBV_QP_TIMEOUT: u32 = 1 << 9;
pub const IBV_QP_RETRY_CNT: u32 = 1 << 10;
pub const IBV_QP_RNR_RETRY: u32 = 1 << 11;
pub const IBV_QP_RQ_PSN: u32 = 1 << 12;
pub const IBV_QP_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
pub const IBV_QP_ALT_PATH: u32 = 1 << 14;
pub const IBV_QP_MIN_RNR_TIMER: u32 = 1 << 15;
pub const IBV_QP_SQ_PSN: u32 = 1 << 16;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
pub const IBV_QP_PATH_MIG_STATE: u32 = 1 << 18;
pub const IBV_QP_CAP: u32 = 1 << 19;
pub const IBV_QP_DEST_QPN: u32 = 1 << 20;
pub const IBV_QP_RATE_LIMIT: u32 = 1 << 25;

pub const IBV_ACCESS_LOCAL_WRITE: u32 = 1;
pub const IBV_ACCESS_REMOTE_WRITE: u32 = 1 << 1;
pub const IBV_ACCESS_REMOTE_READ: u32 = 1 << 2;
pub const IBV_ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;
pub const IBV_ACCESS_MW_BIND: u32 = 1 << 4;
pub const IBV_ACCESS_ZERO_BASED: u32 = 1 << 5;
pub const IBV_ACCESS_ON_DEMAND: u32 = 1 << 6;
pub const IBV_ACCESS_HUGETLB: u32 = 1 << 7;
pub const IBV_ACCESS_RELAXED_ORDERING: u32 = 1 << 20;
/// `IBV_ACCESS_OPTIONAL_RANGE`: flags a device may ignore.
pub const IBV_ACCESS_OPTIONAL_RANGE: u32 = 0x3ff0_0000;

pub const IBV_PORT_ACTIVE: u32 = 4;
pub const IBV_PORT_DOWN: u32 = 1;
pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;

pub const IBV_EVENT_CQ_ERR: u32 = 0;
pub const IBV_EVENT_QP_FATAL: u32 = 1;
pub const IBV_EVENT_SQ_DRAINED: u32 = 5;
pub const IBV_EVENT_DEVICE_FATAL: u32 = 8;
pub const IBV_EVENT_PORT_ACTIVE: u32 = 9;
pub const IBV_EVENT_PORT_ERR: u32 = 10;
pub const IBV_EVENT_PKEY_CHANGE: u32 = 12;
pub const IBV_EVENT_SM_CHANGE: u32 = 13;
pub const IBV_EVENT_SRQ_ERR: u32 = 14;
pub const IBV_EVENT_SRQ_LIMIT_REACHED: u32 = 15;
pub const IBV_EVENT_QP_LAST_WQE_REACHED: u32 = 16;
pub const IBV_EVENT_GID_CHANGE: u32 = 18;

pub const IBV_WR_RDMA_WRITE: u32 = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
pub const IBV_WR_SEND: u32 = 2;
pub const IBV_WR_SEND_WITH_IMM: u32 = 3;
pub const IBV_WR_RDMA_READ: u32 = 4;
pub const IBV_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
pub const IBV_WR_LOCAL_INV: u32 = 7;
pub const IBV_WR_BIND_MW: u32 = 8;
pub const IBV_WR_SEND_WITH_INV: u32 = 9;

pub const IBV_SEND_INLINE: u32 = 8;

pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
pub const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
pub const IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
pub const IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
pub const IBV_QP_EX_WITH_LOCAL_INV: u64 = 1 << 7;
pub const IBV_QP_EX_WITH_BIND_MW: u64 = 1 << 8;
pub const IBV_QP_EX_WITH_SEND_WITH_INV: u64 = 1 << 9;
/// The send operations the soft HCA executes (no TSO, no atomic write).
pub const SUPPORTED_SEND_OPS: u64 = (1 << 10) - 1;

pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
pub const IBV_QP_INIT_ATTR_XRCD: u32 = 1 << 1;
pub const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
pub const IBV_QP_INIT_ATTR_MAX_TSO_HEADER: u32 = 1 << 3;
pub const IBV_QP_INIT_ATTR_IND_TABLE: u32 = 1 << 4;
pub const IBV_QP_INIT_ATTR_RX_HASH: u32 = 1 << 5;
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

pub const IBV_WC_EX_WITH_BYTE_LEN: u64 = 1 << 0;
pub const IBV_WC_EX_WITH_IMM: u64 = 1 << 1;
pub const IBV_WC_EX_WITH_QP_NUM: u64 = 1 << 2;
pub const IBV_WC_EX_WITH_SRC_QP: u64 = 1 << 3;
pub const IBV_WC_EX_WITH_SLID: u64 = 1 << 4;
pub const IBV_WC_EX_WITH_SL: u64 = 1 << 5;
pub const IBV_WC_EX_WITH_DLID_PATH_BITS: u64 = 1 << 6;
/// The `ibv_cq_ex` fields this library can read (the standard ones; no timestamps, VLAN,
/// flow tag or tag matching).
pub const SUPPORTED_WC_FLAGS: u64 = (1 << 7) - 1;

pub const IBV_CQ_INIT_ATTR_MASK_FLAGS: u32 = 1 << 0;
pub const IBV_CQ_INIT_ATTR_MASK_PD: u32 = 1 << 1;

pub const IBV_SRQ_MAX_WR: u32 = 1 << 0;
pub const IBV_SRQ_LIMIT: u32 = 1 << 1;

pub const IBV_SRQT_BASIC: u32 = 0;
pub const IBV_SRQ_INIT_ATTR_TYPE: u32 = 1 << 0;
pub const IBV_SRQ_INIT_ATTR_PD: u32 = 1 << 1;

pub const IBV_MW_TYPE_1: i32 = 1;
pub const IBV_MW_TYPE_2: i32 = 2;

pub const IBV_REREG_MR_CHANGE_TRANSLATION: i32 = 1;
pub const IBV_REREG_MR_CHANGE_PD: i32 = 2;
pub const IBV_REREG_MR_CHANGE_ACCESS: i32 = 4;
pub const IBV_REREG_MR_FLAGS_SUPPORTED: i32 = 7;
pub const IBV_REREG_MR_ERR_INPUT: i32 = -1;
pub const IBV_REREG_MR_ERR_CMD: i32 = -4;

pub const IBV_GID_TYPE_SYSFS_IB_ROCE_V1: u32 = 0;
pub const IBV_GID_TYPE_SYSFS_ROCE_V2: u32 = 1;
pub const IBV_GID_TYPE_IB: u32 = 0;
pub const IBV_GID_TYPE_ROCE_V1: u32 = 1;
pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;

pub const IBV_ATOMIC_HCA: u32 = 1;

pub const IBV_DEVICE_RC_RNR_NAK_GEN: u32 = 1 << 12;
pub const IBV_DEVICE_SRQ_RESIZE: u32 = 1 << 13;
pub const IBV_DEVICE_PORT_ACTIVE_EVENT: u32 = 1 << 14;
pub const IBV_DEVICE_MEM_WINDOW: u32 = 1 << 17;
pub const IBV_DEVICE_MEM_MGT_EXTENSIONS: u32 = 1 << 21;
pub const IBV_DEVICE_MEM_WINDOW_TYPE_2B: u32 = 1 << 24;
pub const IBV_DEVICE_RESIZE_MAX_WR: u32 = 1 << 0;
