//! The compatibility entry points: `IBVERBS_1.0` versions of the verbs (rdma-core's
//! `libibverbs/compat-1_0.c`, for binaries linked before 2006) and `ibv_register_driver` at
//! `IBVERBS_1.1`. They take rdma-core's 1.0 structures (`struct ibv_device_1_0` and friends,
//! another layout); this library does not implement that ABI: every one fails honestly
//! (NULL, -1 or an errno return, with `errno` = `EOPNOTSUPP`). Binaries built against any
//! libibverbs of the last two decades bind to the default versions instead.

use core::ffi::{c_int, c_void};

use crate::errno::{self, EOPNOTSUPP, unsupported_fns};

/// `IBVERBS_1.0`.
pub mod v1_0 {
    use super::*;
    unsupported_fns!(
        "The 1.0 ABI: NULL with `errno` = `EOPNOTSUPP`.",
        *mut c_void = core::ptr::null_mut(),
        ibv_alloc_pd,
        ibv_create_ah,
        ibv_create_cq,
        ibv_create_qp,
        ibv_create_srq,
        ibv_get_device_list,
        ibv_get_device_name,
        ibv_open_device,
        ibv_reg_mr,
    );
    unsupported_fns!(
        "The 1.0 ABI: -1 with `errno` = `EOPNOTSUPP`.",
        c_int = -1,
        ibv_get_async_event,
        ibv_get_cq_event,
        ibv_query_gid,
        ibv_query_pkey,
    );
    unsupported_fns!(
        "The 1.0 ABI: does nothing (nothing of it can have been created).",
        (),
        ibv_ack_async_event,
        ibv_ack_cq_events,
        ibv_free_device_list,
    );
    unsupported_fns!(
        "The 1.0 ABI: `EOPNOTSUPP`.",
        c_int = EOPNOTSUPP,
        ibv_attach_mcast,
        ibv_close_device,
        ibv_dealloc_pd,
        ibv_dereg_mr,
        ibv_destroy_ah,
        ibv_destroy_cq,
        ibv_destroy_qp,
        ibv_destroy_srq,
        ibv_detach_mcast,
        ibv_modify_qp,
        ibv_modify_srq,
        ibv_query_device,
        ibv_query_port,
        ibv_query_qp,
        ibv_query_srq,
        ibv_resize_cq,
    );
    /// The 1.0 ABI: 0 (no GUID) with `errno` = `EOPNOTSUPP`.
    pub extern "C" fn ibv_get_device_guid() -> u64 {
        errno::set(EOPNOTSUPP);
        0
    }
}

/// `IBVERBS_1.1` compatibility: `ibv_register_driver`, the pre-2017 provider registration.
pub mod v1_1 {
    /// No provider registers with this library: ignored.
    pub extern "C" fn ibv_register_driver() {}
}
