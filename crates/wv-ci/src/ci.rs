//! The verbs provider interface: `inc/iba/ib_ci.h` (kernel part: `ci_interface_t`, every
//! `ci_*` function type, `ci_umv_buf_t`, the callbacks) and `inc/kernel/rdma/verbs.h`
//! (`RDMA_INTERFACE_VERBS`, the table mlx4_bus hands out through IRP_MN_QUERY_INTERFACE).
//!
//! `IN const T x` parameters are plain `T` (the `const` only binds the callee's copy);
//! `const T*` is `*const T`, every other pointer `*mut T`. Parameter names are the C ones.

use core::ffi::c_void;

use crate::base::{ET_POST_EVENT, GUID, INTERFACE, KPROCESSOR_MODE, LIST_ENTRY, MDL, boolean_t};
use crate::base::{net32_t, net64_t};
use crate::ib_types::*;

ci_struct! {
    /// Vendor (user-mode provider) channel of a verb: the UVP's private request and reply.
    #[repr(C)]
    pub struct ci_umv_buf_t [size 24, align 8] {
        /// UVP command.
        [0] pub command: u32,
        /// Vendor status returned by the HCA driver.
        [4] pub status: u32,
        /// Bytes of vendor input in `p_inout_buf`.
        [8] pub input_size: u32,
        /// Bytes of vendor output room in `p_inout_buf`.
        [12] pub output_size: u32,
        /// Address of the in/out buffer (a user address for user-mode calls).
        [16] pub p_inout_buf: u64,
    }
}

/// Completion notification of a CQ: called with the `cq_context` given at creation.
pub type ci_completion_cb_t = Option<unsafe extern "system" fn(cq_context: *mut c_void)>;

/// Asynchronous event notification (QP, SRQ, CQ and CA events).
pub type ci_async_event_cb_t =
    Option<unsafe extern "system" fn(p_event_record: *mut ib_event_rec_t)>;

ci_struct! {
    /// A CA event registration: the driver links `entry` into its list and calls
    /// `pfn_async_event_cb` with `ib_event_rec_t.context` pointing at this struct.
    #[repr(C)]
    pub struct ci_event_handler_t [size 24, align 8] {
        /// Link in the driver's handler list.
        [0] pub entry: LIST_ENTRY,
        /// The callback.
        [16] pub pfn_async_event_cb: ci_async_event_cb_t,
    }
}

ci_struct! {
    /// Processor group affinity of a CQ's completion handling (`create_cq_ex`).
    #[repr(C)]
    pub struct ib_group_affinity_t [size 16, align 8] {
        /// Processor mask within the group.
        [0] pub mask: u64,
        /// Processor group.
        [8] pub group: u16,
    }
}

/// Opens an HCA by GUID for the access layer; returns the CA handle.
pub type ci_open_ca = Option<
    unsafe extern "system" fn(
        ca_guid: ib_net64_t,
        pfn_async_event_cb: ci_async_event_cb_t,
        ca_context: *const c_void,
        ph_ca: *mut ib_ca_handle_t,
    ) -> ib_api_status_t,
>;

/// Adds a CA event handler.
pub type ci_register_event_handler_t =
    Option<unsafe extern "system" fn(h_ca: ib_ca_handle_t, p_reg: *mut ci_event_handler_t)>;

/// Removes a CA event handler.
pub type ci_unregister_event_handler_t =
    Option<unsafe extern "system" fn(h_ca: ib_ca_handle_t, p_reg: *mut ci_event_handler_t)>;

/// Opens a per-process (user-mode) context of an HCA; returns its handle in `ph_um_ca`.
pub type ci_um_open_ca_t = Option<
    unsafe extern "system" fn(
        h_ca: ib_ca_handle_t,
        mode: KPROCESSOR_MODE,
        p_umv_buf: *mut ci_umv_buf_t,
        ph_um_ca: *mut ib_ca_handle_t,
    ) -> ib_api_status_t,
>;

/// Queries the HCA attributes into a caller buffer of `*p_size` bytes; with a null or small
/// buffer it answers `IB_INSUFFICIENT_MEMORY` and the size needed.
pub type ci_query_ca = Option<
    unsafe extern "system" fn(
        h_ca: ib_ca_handle_t,
        p_ca_attr: *mut ib_ca_attr_t,
        p_size: *mut u32,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Changes HCA/port attributes.
pub type ci_modify_ca = Option<
    unsafe extern "system" fn(
        h_ca: ib_ca_handle_t,
        port_num: u8,
        ca_mod: ib_ca_mod_t,
        p_port_attr_mod: *const ib_port_attr_mod_t,
    ) -> ib_api_status_t,
>;

/// Closes an HCA opened with `open_ca`.
pub type ci_close_ca = Option<unsafe extern "system" fn(h_ca: ib_ca_handle_t) -> ib_api_status_t>;

/// Closes a per-process context opened with `um_open_ca`.
pub type ci_um_close_ca_t =
    Option<unsafe extern "system" fn(h_ca: ib_ca_handle_t, h_um_ca: ib_ca_handle_t)>;

/// Allocates a protection domain.
pub type ci_allocate_pd = Option<
    unsafe extern "system" fn(
        h_ca: ib_ca_handle_t,
        r#type: ib_pd_type_t,
        ph_pd: *mut ib_pd_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Frees a protection domain.
pub type ci_deallocate_pd =
    Option<unsafe extern "system" fn(h_pd: ib_pd_handle_t) -> ib_api_status_t>;

/// Creates an address vector.
pub type ci_create_av = Option<
    unsafe extern "system" fn(
        h_pd: ib_pd_handle_t,
        p_av_attr: *const ib_av_attr_t,
        ph_av: *mut ib_av_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Queries an address vector and its PD.
pub type ci_query_av = Option<
    unsafe extern "system" fn(
        h_av: ib_av_handle_t,
        p_av_attr: *mut ib_av_attr_t,
        ph_pd: *mut ib_pd_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Changes an address vector.
pub type ci_modify_av = Option<
    unsafe extern "system" fn(
        h_av: ib_av_handle_t,
        p_av_attr: *const ib_av_attr_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Destroys an address vector.
pub type ci_destroy_av = Option<unsafe extern "system" fn(h_av: ib_av_handle_t) -> ib_api_status_t>;

/// Creates a shared receive queue.
pub type ci_create_srq = Option<
    unsafe extern "system" fn(
        h_pd: ib_pd_handle_t,
        srq_context: *const c_void,
        pfn_async_event_cb: ci_async_event_cb_t,
        p_srq_attr: *const ib_srq_attr_t,
        ph_srq: *mut ib_srq_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Changes an SRQ's attributes selected by the mask.
pub type ci_modify_srq = Option<
    unsafe extern "system" fn(
        h_srq: ib_srq_handle_t,
        p_srq_attr: *const ib_srq_attr_t,
        srq_attr_mask: ib_srq_attr_mask_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Queries an SRQ's attributes.
pub type ci_query_srq = Option<
    unsafe extern "system" fn(
        h_srq: ib_srq_handle_t,
        p_srq_attr: *mut ib_srq_attr_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Destroys an SRQ.
pub type ci_destroy_srq =
    Option<unsafe extern "system" fn(h_srq: ib_srq_handle_t) -> ib_api_status_t>;

/// Creates a queue pair; fills `p_qp_attr` with what was granted.
pub type ci_create_qp = Option<
    unsafe extern "system" fn(
        h_pd: ib_pd_handle_t,
        qp_context: *const c_void,
        pfn_async_event_cb: ci_async_event_cb_t,
        p_create_attr: *mut ib_qp_create_t,
        p_qp_attr: *mut ib_qp_attr_t,
        ph_qp: *mut ib_qp_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Creates a queue pair with creation flags.
pub type ci_create_qp_ex = Option<
    unsafe extern "system" fn(
        h_pd: ib_pd_handle_t,
        qp_context: *const c_void,
        pfn_async_event_cb: ci_async_event_cb_t,
        p_create_attr: *mut ib_qp_create_ex_t,
        p_qp_attr: *mut ib_qp_attr_t,
        ph_qp: *mut ib_qp_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Creates a special QP (QP0/QP1) on a port.
pub type ci_create_spl_qp = Option<
    unsafe extern "system" fn(
        h_pd: ib_pd_handle_t,
        port_num: u8,
        qp_context: *const c_void,
        pfn_async_event_cb: ci_async_event_cb_t,
        p_create_attr: *mut ib_qp_create_t,
        p_qp_attr: *mut ib_qp_attr_t,
        ph_qp: *mut ib_qp_handle_t,
    ) -> ib_api_status_t,
>;

/// Moves a QP to another state.
pub type ci_modify_qp = Option<
    unsafe extern "system" fn(
        h_qp: ib_qp_handle_t,
        p_modify_attr: *const ib_qp_mod_t,
        p_qp_attr: *mut ib_qp_attr_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Moves a QP to another state for a kernel client that holds a user-mode QP, writing the
/// vendor reply to `p_outbuf` (`buf_size` bytes).
pub type ci_ndi_modify_qp = Option<
    unsafe extern "system" fn(
        h_qp: ib_qp_handle_t,
        p_modify_attr: *const ib_qp_mod_t,
        p_qp_attr: *mut ib_qp_attr_t,
        buf_size: u32,
        p_outbuf: *mut u8,
    ) -> ib_api_status_t,
>;

/// Queries a QP's attributes.
pub type ci_query_qp = Option<
    unsafe extern "system" fn(
        h_qp: ib_qp_handle_t,
        p_qp_attr: *mut ib_qp_attr_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Destroys a QP (`timewait`: how long its number stays reserved).
pub type ci_destroy_qp =
    Option<unsafe extern "system" fn(h_qp: ib_qp_handle_t, timewait: u64) -> ib_api_status_t>;

/// Creates a completion queue of at least `*p_size` entries; returns the real size there.
pub type ci_create_cq = Option<
    unsafe extern "system" fn(
        h_ca: ib_ca_handle_t,
        cq_context: *const c_void,
        pfn_async_event_cb: ci_async_event_cb_t,
        completion_cb: ci_completion_cb_t,
        p_size: *mut u32,
        ph_cq: *mut ib_cq_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Creates a completion queue with a processor group affinity.
pub type ci_create_cq_ex = Option<
    unsafe extern "system" fn(
        h_ca: ib_ca_handle_t,
        cq_context: *const c_void,
        pfn_async_event_cb: ci_async_event_cb_t,
        completion_cb: ci_completion_cb_t,
        affinity: *mut ib_group_affinity_t,
        p_size: *mut u32,
        ph_cq: *mut ib_cq_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Resizes a CQ; returns the real size in `*p_size`.
pub type ci_resize_cq = Option<
    unsafe extern "system" fn(
        h_cq: ib_cq_handle_t,
        p_size: *mut u32,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Sets a CQ's interrupt moderation.
pub type ci_modify_cq = Option<
    unsafe extern "system" fn(
        h_cq: ib_cq_handle_t,
        moder_cnt: u16,
        moder_time: u16,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Queries a CQ's size.
pub type ci_query_cq = Option<
    unsafe extern "system" fn(
        h_cq: ib_cq_handle_t,
        p_size: *mut u32,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Destroys a CQ.
pub type ci_destroy_cq = Option<unsafe extern "system" fn(h_cq: ib_cq_handle_t) -> ib_api_status_t>;

/// Registers virtual memory; `um_call` says the address is a user-mode one.
pub type ci_register_mr = Option<
    unsafe extern "system" fn(
        h_pd: ib_pd_handle_t,
        p_mr_create: *const ib_mr_create_t,
        p_lkey: *mut net32_t,
        p_rkey: *mut net32_t,
        ph_mr: *mut ib_mr_handle_t,
        um_call: boolean_t,
    ) -> ib_api_status_t,
>;

/// Registers virtual memory at a chosen HCA address (`mapaddr`).
pub type ci_register_mr_remap = Option<
    unsafe extern "system" fn(
        h_pd: ib_pd_handle_t,
        p_mr_create: *const ib_mr_create_t,
        mapaddr: u64,
        p_lkey: *mut net32_t,
        p_rkey: *mut net32_t,
        ph_mr: *mut ib_mr_handle_t,
        um_call: boolean_t,
    ) -> ib_api_status_t,
>;

/// Registers the memory an MDL describes.
pub type ci_register_mdl = Option<
    unsafe extern "system" fn(
        h_pd: ib_pd_handle_t,
        p_mr_create: *const ib_mr_create_t,
        p_mdl: *mut MDL,
        p_lkey: *mut net32_t,
        p_rkey: *mut net32_t,
        ph_mr: *mut ib_mr_handle_t,
    ) -> ib_api_status_t,
>;

/// Registers physical memory.
pub type ci_register_pmr = Option<
    unsafe extern "system" fn(
        h_pd: ib_pd_handle_t,
        p_pmr_create: *const ib_phys_create_t,
        p_vaddr: *mut u64,
        p_lkey: *mut net32_t,
        p_rkey: *mut net32_t,
        ph_mr: *mut ib_mr_handle_t,
    ) -> ib_api_status_t,
>;

/// Queries a memory region.
pub type ci_query_mr = Option<
    unsafe extern "system" fn(
        h_mr: ib_mr_handle_t,
        p_mr_query: *mut ib_mr_attr_t,
    ) -> ib_api_status_t,
>;

/// Changes a virtual memory region.
pub type ci_modify_mr = Option<
    unsafe extern "system" fn(
        h_mr: ib_mr_handle_t,
        mr_modify_mask: ib_mr_mod_t,
        p_mr_create: *const ib_mr_create_t,
        p_lkey: *mut net32_t,
        p_rkey: *mut net32_t,
        h_pd: ib_pd_handle_t,
        um_call: boolean_t,
    ) -> ib_api_status_t,
>;

/// Changes a physical memory region.
pub type ci_modify_pmr = Option<
    unsafe extern "system" fn(
        h_mr: ib_mr_handle_t,
        mr_modify_mask: ib_mr_mod_t,
        p_pmr_create: *const ib_phys_create_t,
        p_vaddr: *mut u64,
        p_lkey: *mut net32_t,
        p_rkey: *mut net32_t,
        h_pd: ib_pd_handle_t,
    ) -> ib_api_status_t,
>;

/// Registers a region sharing the pages of an existing one.
pub type ci_register_smr = Option<
    unsafe extern "system" fn(
        h_mr: ib_mr_handle_t,
        h_pd: ib_pd_handle_t,
        access_ctrl: ib_access_t,
        p_vaddr: *mut u64,
        p_lkey: *mut net32_t,
        p_rkey: *mut net32_t,
        ph_mr: *mut ib_mr_handle_t,
        um_call: boolean_t,
    ) -> ib_api_status_t,
>;

/// Deregisters a memory region.
pub type ci_deregister_mr =
    Option<unsafe extern "system" fn(h_mr: ib_mr_handle_t) -> ib_api_status_t>;

/// Allocates a Mellanox fast memory region.
pub type ci_alloc_mlnx_fmr = Option<
    unsafe extern "system" fn(
        h_pd: ib_pd_handle_t,
        p_fmr_ctreate: *const mlnx_fmr_create_t,
        ph_fmr: *mut mlnx_fmr_handle_t,
    ) -> ib_api_status_t,
>;

/// Maps physical pages into a fast memory region (`list_len` is a C `int`).
pub type ci_map_phys_mlnx_fmr = Option<
    unsafe extern "system" fn(
        h_fmr: mlnx_fmr_handle_t,
        paddr_list: *const u64,
        list_len: i32,
        p_vaddr: *mut u64,
        p_lkey: *mut net32_t,
        p_rkey: *mut net32_t,
    ) -> ib_api_status_t,
>;

/// Unmaps a fast memory region.
pub type ci_unmap_mlnx_fmr =
    Option<unsafe extern "system" fn(ph_fmr: *const mlnx_fmr_handle_t) -> ib_api_status_t>;

/// Frees a fast memory region.
pub type ci_dealloc_mlnx_fmr =
    Option<unsafe extern "system" fn(h_fmr: mlnx_fmr_handle_t) -> ib_api_status_t>;

/// Creates a memory window.
pub type ci_create_mw = Option<
    unsafe extern "system" fn(
        h_pd: ib_pd_handle_t,
        p_rkey: *mut net32_t,
        ph_mw: *mut ib_mw_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Queries a memory window's PD and remote key.
pub type ci_query_mw = Option<
    unsafe extern "system" fn(
        h_mw: ib_mw_handle_t,
        ph_pd: *mut ib_pd_handle_t,
        p_rkey: *mut net32_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Binds a memory window through a QP.
pub type ci_bind_mw = Option<
    unsafe extern "system" fn(
        h_mw: ib_mw_handle_t,
        h_qp: ib_qp_handle_t,
        p_mw_bind: *mut ib_bind_wr_t,
        p_rkey: *mut net32_t,
    ) -> ib_api_status_t,
>;

/// Destroys a memory window.
pub type ci_destroy_mw = Option<unsafe extern "system" fn(h_mw: ib_mw_handle_t) -> ib_api_status_t>;

/// Posts send work requests; on failure `*pp_failed` is the first one not posted.
pub type ci_post_send = Option<
    unsafe extern "system" fn(
        h_qp: ib_qp_handle_t,
        p_send_wr: *mut ib_send_wr_t,
        pp_failed: *mut *mut ib_send_wr_t,
    ) -> ib_api_status_t,
>;

/// Posts receive work requests to an SRQ.
pub type ci_post_srq_recv = Option<
    unsafe extern "system" fn(
        h_srq: ib_srq_handle_t,
        p_recv_wr: *mut ib_recv_wr_t,
        pp_failed: *mut *mut ib_recv_wr_t,
    ) -> ib_api_status_t,
>;

/// Posts receive work requests to a QP.
pub type ci_post_recv = Option<
    unsafe extern "system" fn(
        h_qp: ib_qp_handle_t,
        p_recv_wr: *mut ib_recv_wr_t,
        pp_failed: *mut *mut ib_recv_wr_t,
    ) -> ib_api_status_t,
>;

/// Counts the completions waiting in a CQ.
pub type ci_peek_cq =
    Option<unsafe extern "system" fn(h_cq: ib_cq_handle_t, p_n_cqes: *mut u32) -> ib_api_status_t>;

/// Polls completions into a free list, returning the done list.
pub type ci_poll_cq = Option<
    unsafe extern "system" fn(
        h_cq: ib_cq_handle_t,
        pp_free_wclist: *mut *mut ib_wc_t,
        pp_done_wclist: *mut *mut ib_wc_t,
    ) -> ib_api_status_t,
>;

/// Polls up to `*p_num_entries` completions into an array (C `int*`).
pub type ci_poll_cq_array = Option<
    unsafe extern "system" fn(
        h_cq: ib_cq_handle_t,
        p_num_entries: *mut i32,
        wc: *mut ib_wc_t,
    ) -> ib_api_status_t,
>;

/// Arms a CQ for the next (or next solicited) completion.
pub type ci_enable_cq_notify = Option<
    unsafe extern "system" fn(h_cq: ib_cq_handle_t, solicited: boolean_t) -> ib_api_status_t,
>;

/// Arms a CQ to notify once `n_cqes` completions are waiting.
pub type ci_enable_ncomp_cq_notify =
    Option<unsafe extern "system" fn(h_cq: ib_cq_handle_t, n_cqes: u32) -> ib_api_status_t>;

/// Attaches a QP to a multicast group.
pub type ci_attach_mcast = Option<
    unsafe extern "system" fn(
        h_qp: ib_qp_handle_t,
        p_mcast_gid: *const ib_gid_t,
        mcast_lid: ib_net16_t,
        ph_mcast: *mut ib_mcast_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Detaches a QP from a multicast group.
pub type ci_detach_mcast =
    Option<unsafe extern "system" fn(h_mcast: ib_mcast_handle_t) -> ib_api_status_t>;

/// Processes a MAD locally (for HCAs without hardware agents).
pub type ci_local_mad = Option<
    unsafe extern "system" fn(
        h_ca: ib_ca_handle_t,
        port_num: u8,
        p_src_av_attr: *const ib_av_attr_t,
        p_mad_in: *const ib_mad_t,
        p_mad_out: *mut ib_mad_t,
    ) -> ib_api_status_t,
>;

/// Vendor-specific call on a set of handles.
pub type ci_vendor_call = Option<
    unsafe extern "system" fn(
        h_ca: ib_ca_handle_t,
        handle_array: *mut *const c_void,
        num_handles: u32,
        p_ci_op: *mut ib_ci_op_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t,
>;

/// Allocates a memory region for fast registration (`max_page_list_len` is a C `int`).
pub type ci_alloc_fast_reg_mr = Option<
    unsafe extern "system" fn(
        h_pd: ib_pd_handle_t,
        max_page_list_len: i32,
        p_lkey: *mut net32_t,
        p_rkey: *mut net32_t,
        ph_mr: *mut ib_mr_handle_t,
    ) -> ib_api_status_t,
>;

/// Allocates a page list for fast registration.
pub type ci_alloc_fast_reg_page_list = Option<
    unsafe extern "system" fn(
        h_ca: ib_ca_handle_t,
        max_page_list_len: i32,
        page_list: *mut *mut ib_fast_reg_page_list_t,
    ) -> ib_api_status_t,
>;

/// Frees a fast registration page list.
pub type ci_free_fast_reg_page_list =
    Option<unsafe extern "system" fn(h_fr: *mut ib_fast_reg_page_list_t)>;

/// Reports a port's link layer (`enum rdma_transport_type`).
pub type ci_rdma_port_get_transport =
    Option<unsafe extern "system" fn(h_ca: ib_ca_handle_t, port_num: u8) -> rdma_transport_type>;

/// Reports the service level to use for an IP port number.
pub type ci_get_sl_for_ip_port = Option<
    unsafe extern "system" fn(h_ca: ib_ca_handle_t, adapter_port_num: u8, ip_port_num: u16) -> u8,
>;

ci_struct! {
    /// The verbs provider's function table and identity (`struct _ci_interface`).
    #[repr(C)]
    pub struct ci_interface_t [size 600, align 8] {
        /// Node GUID, network order.
        [0] pub guid: net64_t,
        /// The HCA's `ib_ca_handle_t` from `open_ca` (WinVerbs uses it as `h_ca`).
        [8] pub p_hca_obj: *mut c_void,
        /// Identifies the driver.
        [16] pub driver_id: GUID,
        /// PCI vendor id.
        [32] pub vend_id: u32,
        /// PCI device id.
        [36] pub dev_id: u16,
        /// Device revision.
        [38] pub dev_revision: u16,
        /// User-mode provider library name, NUL-terminated (C `char`).
        [40] pub libname: [u8; MAX_LIB_NAME],
        /// Verbs version the table implements (`VERBS_VERSION`).
        [72] pub version: u32,
        /// `open_ca`.
        [80] pub open_ca: ci_open_ca,
        /// `um_open_ca`.
        [88] pub um_open_ca: ci_um_open_ca_t,
        /// `query_ca`.
        [96] pub query_ca: ci_query_ca,
        /// `modify_ca`.
        [104] pub modify_ca: ci_modify_ca,
        /// `close_ca`.
        [112] pub close_ca: ci_close_ca,
        /// `um_close_ca`.
        [120] pub um_close_ca: ci_um_close_ca_t,
        /// `register_event_handler`.
        [128] pub register_event_handler: ci_register_event_handler_t,
        /// `unregister_event_handler`.
        [136] pub unregister_event_handler: ci_unregister_event_handler_t,
        /// `vendor_call`.
        [144] pub vendor_call: ci_vendor_call,
        /// `allocate_pd`.
        [152] pub allocate_pd: ci_allocate_pd,
        /// `deallocate_pd`.
        [160] pub deallocate_pd: ci_deallocate_pd,
        /// `create_av`.
        [168] pub create_av: ci_create_av,
        /// `query_av`.
        [176] pub query_av: ci_query_av,
        /// `modify_av`.
        [184] pub modify_av: ci_modify_av,
        /// `destroy_av`.
        [192] pub destroy_av: ci_destroy_av,
        /// `create_srq`.
        [200] pub create_srq: ci_create_srq,
        /// `modify_srq`.
        [208] pub modify_srq: ci_modify_srq,
        /// `query_srq`.
        [216] pub query_srq: ci_query_srq,
        /// `destroy_srq`.
        [224] pub destroy_srq: ci_destroy_srq,
        /// `create_qp`.
        [232] pub create_qp: ci_create_qp,
        /// `create_spl_qp`.
        [240] pub create_spl_qp: ci_create_spl_qp,
        /// `modify_qp`.
        [248] pub modify_qp: ci_modify_qp,
        /// `query_qp`.
        [256] pub query_qp: ci_query_qp,
        /// `destroy_qp`.
        [264] pub destroy_qp: ci_destroy_qp,
        /// `ndi_modify_qp`.
        [272] pub ndi_modify_qp: ci_ndi_modify_qp,
        /// `create_cq`.
        [280] pub create_cq: ci_create_cq,
        /// `resize_cq`.
        [288] pub resize_cq: ci_resize_cq,
        /// `modify_cq`.
        [296] pub modify_cq: ci_modify_cq,
        /// `query_cq`.
        [304] pub query_cq: ci_query_cq,
        /// `destroy_cq`.
        [312] pub destroy_cq: ci_destroy_cq,
        /// `register_mr`.
        [320] pub register_mr: ci_register_mr,
        /// `register_pmr`.
        [328] pub register_pmr: ci_register_pmr,
        /// `query_mr`.
        [336] pub query_mr: ci_query_mr,
        /// `modify_mr`.
        [344] pub modify_mr: ci_modify_mr,
        /// `modify_pmr`.
        [352] pub modify_pmr: ci_modify_pmr,
        /// `register_smr`.
        [360] pub register_smr: ci_register_smr,
        /// `deregister_mr`.
        [368] pub deregister_mr: ci_deregister_mr,
        /// `alloc_mlnx_fmr`.
        [376] pub alloc_mlnx_fmr: ci_alloc_mlnx_fmr,
        /// `map_phys_mlnx_fmr`.
        [384] pub map_phys_mlnx_fmr: ci_map_phys_mlnx_fmr,
        /// `unmap_mlnx_fmr`.
        [392] pub unmap_mlnx_fmr: ci_unmap_mlnx_fmr,
        /// `dealloc_mlnx_fmr`.
        [400] pub dealloc_mlnx_fmr: ci_dealloc_mlnx_fmr,
        /// `create_mw`.
        [408] pub create_mw: ci_create_mw,
        /// `query_mw`.
        [416] pub query_mw: ci_query_mw,
        /// `bind_mw`.
        [424] pub bind_mw: ci_bind_mw,
        /// `destroy_mw`.
        [432] pub destroy_mw: ci_destroy_mw,
        /// `post_send`.
        [440] pub post_send: ci_post_send,
        /// `post_recv`.
        [448] pub post_recv: ci_post_recv,
        /// `post_srq_recv`.
        [456] pub post_srq_recv: ci_post_srq_recv,
        /// `peek_cq` (optional).
        [464] pub peek_cq: ci_peek_cq,
        /// `poll_cq`.
        [472] pub poll_cq: ci_poll_cq,
        /// `enable_cq_notify`.
        [480] pub enable_cq_notify: ci_enable_cq_notify,
        /// `enable_ncomp_cq_notify` (optional).
        [488] pub enable_ncomp_cq_notify: ci_enable_ncomp_cq_notify,
        /// `attach_mcast`.
        [496] pub attach_mcast: ci_attach_mcast,
        /// `detach_mcast`.
        [504] pub detach_mcast: ci_detach_mcast,
        /// `local_mad`.
        [512] pub local_mad: ci_local_mad,
        /// `poll_cq_array` (verbs 2.1).
        [520] pub poll_cq_array: ci_poll_cq_array,
        /// `alloc_fast_reg_mr`.
        [528] pub alloc_fast_reg_mr: ci_alloc_fast_reg_mr,
        /// `alloc_fast_reg_page_list`.
        [536] pub alloc_fast_reg_page_list: ci_alloc_fast_reg_page_list,
        /// `free_fast_reg_page_list`.
        [544] pub free_fast_reg_page_list: ci_free_fast_reg_page_list,
        /// `rdma_port_get_transport` (verbs 2.2).
        [552] pub rdma_port_get_transport: ci_rdma_port_get_transport,
        /// `get_sl_for_ip_port` (verbs 2.3).
        [560] pub get_sl_for_ip_port: ci_get_sl_for_ip_port,
        /// `create_cq_ex` (verbs 2.4).
        [568] pub create_cq_ex: ci_create_cq_ex,
        /// `create_qp_ex` (verbs 2.5).
        [576] pub create_qp_ex: ci_create_qp_ex,
        /// `register_mr_remap` (kernel clients).
        [584] pub register_mr_remap: ci_register_mr_remap,
        /// `register_mdl` (kernel clients).
        [592] pub register_mdl: ci_register_mdl,
    }
}

ci_struct! {
    /// The verbs interface mlx4_bus answers `GUID_RDMA_INTERFACE_VERBS` queries with
    /// (`struct _RDMA_INTERFACE_VERBS`).
    #[repr(C)]
    pub struct RDMA_INTERFACE_VERBS [size 640, align 8] {
        /// WDM interface header (size, version, reference routines).
        [0] pub InterfaceHeader: INTERFACE,
        /// The verbs table.
        [32] pub Verbs: ci_interface_t,
        /// The driver's trace hook.
        [632] pub post_event: ET_POST_EVENT,
    }
}

/// `GUID_RDMA_INTERFACE_VERBS` {F0EBAE86-EDB5-4B40-A10A-44D5DB3B964E}.
pub const GUID_RDMA_INTERFACE_VERBS: GUID = GUID {
    Data1: 0xF0EB_AE86,
    Data2: 0xEDB5,
    Data3: 0x4B40,
    Data4: [0xA1, 0x0A, 0x44, 0xD5, 0xDB, 0x3B, 0x96, 0x4E],
};

ci_consts! {
    /// The constants of this module, in declaration order.
    pub(crate) const CI_CONSTANTS;

    /// Verbs interface version part (`ib_ci.h`).
    group {
        /// Major version of the verbs interface.
        VERBS_MAJOR_VER: u32 = 0x0002;
        /// Minor version of the verbs interface.
        VERBS_MINOR_VER: u32 = 0x0007;
        /// Major version of the extended verbs interface.
        VERBS_EX_MAJOR_VER: u32 = 0x0001;
        /// Minor version of the extended verbs interface.
        VERBS_EX_MINOR_VER: u32 = 0x0000;
        /// `ci_interface_t::version`: major in the high 16 bits, minor in the low.
        VERBS_VERSION: u32 = (VERBS_MAJOR_VER << 16) | VERBS_MINOR_VER;
    }

    /// Size constant of `ci_interface_t`.
    group {
        /// Size of `ci_interface_t::libname`.
        MAX_LIB_NAME: usize = 32;
    }

    /// Interface version (`verbs.h`).
    group {
        /// `INTERFACE::Version` of `RDMA_INTERFACE_VERBS`: major in the high byte, minor in
        /// the low (`VerbsVersion(VERBS_MAJOR_VER, VERBS_MINOR_VER)`).
        RDMA_INTERFACE_VERBS_VERSION: u16 = ((VERBS_MAJOR_VER as u16) << 8) | VERBS_MINOR_VER as u16;
    }
}
