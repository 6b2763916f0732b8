//! The `IBVERBS_PRIVATE_34` node: the interface between libibverbs and its providers
//! (`ibv_cmd_*` kernel commands, provider registration, the ioctl helpers). Providers such as
//! libmlx5 and libefa, which perftest links with `BIND_NOW`, import these symbols, so they must
//! exist; no provider runs over this library (its only provider is the soft HCA's, built in),
//! so they are inert: commands answer `EOPNOTSUPP` (NULL for the allocating ones), the
//! registration and logging calls do nothing. Their arguments are never read, so one
//! signature serves each kind (extra arguments are harmless in the C calling convention).
//! `ibv_query_gid_type` and `ibv_read_ibdev_sysfs_file`, which applications use, are real
//! (`context`, `misc`).

use core::ffi::{c_int, c_void};

use crate::errno::{EOPNOTSUPP, unsupported_fns};

unsupported_fns!(
    "Inert provider interface: `EOPNOTSUPP`.",
    c_int = EOPNOTSUPP,
    __ioctl_final_num_attrs,
    execute_ioctl,
    ibv_cmd_advise_mr,
    ibv_cmd_alloc_dm,
    ibv_cmd_alloc_mw,
    ibv_cmd_alloc_pd,
    ibv_cmd_attach_mcast,
    ibv_cmd_close_xrcd,
    ibv_cmd_create_ah,
    ibv_cmd_create_counters,
    ibv_cmd_create_cq,
    ibv_cmd_create_cq_ex,
    ibv_cmd_create_flow,
    ibv_cmd_create_flow_action_esp,
    ibv_cmd_create_qp,
    ibv_cmd_create_qp_ex,
    ibv_cmd_create_qp_ex2,
    ibv_cmd_create_rwq_ind_table,
    ibv_cmd_create_srq,
    ibv_cmd_create_srq_ex,
    ibv_cmd_create_wq,
    ibv_cmd_dealloc_mw,
    ibv_cmd_dealloc_pd,
    ibv_cmd_dereg_mr,
    ibv_cmd_destroy_ah,
    ibv_cmd_destroy_counters,
    ibv_cmd_destroy_cq,
    ibv_cmd_destroy_flow,
    ibv_cmd_destroy_flow_action,
    ibv_cmd_destroy_qp,
    ibv_cmd_destroy_rwq_ind_table,
    ibv_cmd_destroy_srq,
    ibv_cmd_destroy_wq,
    ibv_cmd_detach_mcast,
    ibv_cmd_free_dm,
    ibv_cmd_get_context,
    ibv_cmd_modify_cq,
    ibv_cmd_modify_flow_action_esp,
    ibv_cmd_modify_qp,
    ibv_cmd_modify_qp_ex,
    ibv_cmd_modify_srq,
    ibv_cmd_modify_wq,
    ibv_cmd_open_qp,
    ibv_cmd_open_xrcd,
    ibv_cmd_poll_cq,
    ibv_cmd_post_recv,
    ibv_cmd_post_send,
    ibv_cmd_post_srq_recv,
    ibv_cmd_query_context,
    ibv_cmd_query_device_any,
    ibv_cmd_query_mr,
    ibv_cmd_query_port,
    ibv_cmd_query_qp,
    ibv_cmd_query_srq,
    ibv_cmd_read_counters,
    ibv_cmd_reg_dm_mr,
    ibv_cmd_reg_dmabuf_mr,
    ibv_cmd_reg_mr,
    ibv_cmd_req_notify_cq,
    ibv_cmd_rereg_mr,
    ibv_cmd_resize_cq,
    verbs_init_cq,
);
unsupported_fns!(
    "Inert provider interface: NULL with `errno` = `EOPNOTSUPP`.",
    *mut c_void = core::ptr::null_mut(),
    _verbs_init_and_alloc_context,
    verbs_open_device,
);
unsupported_fns!(
    "Inert provider interface: does nothing.",
    (),
    __verbs_log,
    verbs_register_driver_34,
    verbs_set_ops,
    verbs_uninit_context,
);
