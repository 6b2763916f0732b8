//! The context's op tables: `ibv_context_ops` (the data path the header's inline functions
//! call: post, poll, arm, memory windows) and the extended ops of `verbs_context` that the
//! `_ex` inline functions reach through `verbs_get_ctx_op`. Ops this library does not have
//! stay NULL, which the header's inline functions turn into `EOPNOTSUPP`/`ENOSYS`, as with a
//! provider that lacks them.

use crate::abi::*;

/// The legacy op table.
pub fn context_ops() -> ibv_context_ops {
    ibv_context_ops {
        _compat_query_device: None,
        _compat_query_port: None,
        _compat_alloc_pd: None,
        _compat_dealloc_pd: None,
        _compat_reg_mr: None,
        _compat_rereg_mr: None,
        _compat_dereg_mr: None,
        alloc_mw: Some(crate::objects::alloc_mw),
        bind_mw: Some(crate::qp::bind_mw),
        dealloc_mw: Some(crate::objects::dealloc_mw),
        _compat_create_cq: None,
        poll_cq: Some(crate::cq::poll_cq),
        req_notify_cq: Some(crate::cq::req_notify_cq),
        _compat_cq_event: None,
        _compat_resize_cq: None,
        _compat_destroy_cq: None,
        _compat_create_srq: None,
        _compat_modify_srq: None,
        _compat_query_srq: None,
        _compat_destroy_srq: None,
        post_srq_recv: Some(crate::srq::post_srq_recv),
        _compat_create_qp: None,
        _compat_query_qp: None,
        _compat_modify_qp: None,
        _compat_destroy_qp: None,
        post_send: Some(crate::qp::post_send),
        post_recv: Some(crate::qp::post_recv),
        _compat_create_ah: None,
        _compat_destroy_ah: None,
        _compat_attach_mcast: None,
        _compat_detach_mcast: None,
        _compat_async_event: None,
    }
}

/// A `verbs_context` around `context` with the extended ops this library implements (`sz`
/// is set by the caller to the whole struct: every op slot exists).
pub fn verbs_context_ops(context: ibv_context) -> verbs_context {
    verbs_context {
        query_port: Some(crate::context::query_port_ex),
        advise_mr: None,
        alloc_null_mr: None,
        read_counters: None,
        attach_counters_point_flow: None,
        create_counters: None,
        destroy_counters: None,
        reg_dm_mr: None,
        alloc_dm: None,
        free_dm: None,
        modify_flow_action_esp: None,
        destroy_flow_action: None,
        create_flow_action_esp: None,
        modify_qp_rate_limit: None,
        alloc_parent_domain: Some(crate::objects::alloc_parent_domain),
        dealloc_td: Some(crate::objects::dealloc_td),
        alloc_td: Some(crate::objects::alloc_td),
        modify_cq: Some(crate::cq::modify_cq),
        post_srq_ops: None,
        destroy_rwq_ind_table: None,
        create_rwq_ind_table: None,
        destroy_wq: None,
        modify_wq: None,
        create_wq: None,
        query_rt_values: None,
        create_cq_ex: Some(crate::cq::create_cq_ex),
        priv_: core::ptr::null_mut(),
        query_device_ex: Some(crate::context::query_device_ex),
        ibv_destroy_flow: None,
        ABI_placeholder2: None,
        ibv_create_flow: None,
        ABI_placeholder1: None,
        open_qp: None,
        create_qp_ex: Some(crate::qp::create_qp_ex),
        get_srq_num: None,
        create_srq_ex: Some(crate::srq::create_srq_ex),
        open_xrcd: None,
        close_xrcd: None,
        _ABI_placeholder3: 0,
        sz: 0,
        context,
    }
}
