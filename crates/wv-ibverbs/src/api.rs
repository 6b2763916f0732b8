//! Every default-version export, by its C name: the build script's `.symver` table points at
//! `crate::api::<name>`, so a symbol of the reference library without its function here is a
//! compile error.

use core::ffi::{c_int, c_void};

use crate::abi::*;
use crate::errno::{self, EOPNOTSUPP};

pub use crate::context::{
    _ibv_query_gid_ex, _ibv_query_gid_table, ibv_ack_async_event, ibv_close_device,
    ibv_free_device_list, ibv_get_async_event, ibv_get_device_guid, ibv_get_device_index,
    ibv_get_device_list, ibv_get_device_name, ibv_get_pkey_index, ibv_open_device,
    ibv_query_device, ibv_query_gid, ibv_query_gid_type, ibv_query_pkey, ibv_query_port,
};
pub use crate::cq::{
    ibv_ack_cq_events, ibv_create_cq, ibv_destroy_cq, ibv_get_cq_event, ibv_resize_cq,
};
pub use crate::misc::{
    ibv_create_ah_from_wc, ibv_dofork_range, ibv_dontfork_range, ibv_event_type_str, ibv_fork_init,
    ibv_get_sysfs_path, ibv_init_ah_from_wc, ibv_is_fork_initialized, ibv_node_type_str,
    ibv_port_state_str, ibv_rate_to_mbps, ibv_rate_to_mult, ibv_read_ibdev_sysfs_file,
    ibv_read_sysfs_file, ibv_resolve_eth_l2_from_gid, ibv_wc_status_str, mbps_to_ibv_rate,
    mult_to_ibv_rate,
};
pub use crate::objects::{
    ibv_alloc_pd, ibv_create_ah, ibv_create_comp_channel, ibv_dealloc_pd, ibv_dereg_mr,
    ibv_destroy_ah, ibv_destroy_comp_channel, ibv_reg_dmabuf_mr, ibv_reg_mr, ibv_reg_mr_iova,
    ibv_reg_mr_iova2, ibv_rereg_mr,
};
pub use crate::private::*;
pub use crate::qp::{
    ibv_attach_mcast, ibv_create_qp, ibv_destroy_qp, ibv_detach_mcast, ibv_modify_qp,
    ibv_qp_to_qp_ex, ibv_query_qp, ibv_query_qp_data_in_order,
};
pub use crate::srq::{ibv_create_srq, ibv_destroy_srq, ibv_modify_srq, ibv_query_srq};

/// `ibv_import_device`: sharing a context through its command descriptor needs the kernel's
/// uverbs file; none exists here (`EOPNOTSUPP`).
pub extern "C" fn ibv_import_device(_cmd_fd: c_int) -> *mut ibv_context {
    errno::ret_ptr(Err(EOPNOTSUPP))
}
/// `ibv_import_pd`: see [`ibv_import_device`].
pub extern "C" fn ibv_import_pd(_c: *mut ibv_context, _handle: u32) -> *mut ibv_pd {
    errno::ret_ptr(Err(EOPNOTSUPP))
}
/// `ibv_import_mr`: see [`ibv_import_device`].
pub extern "C" fn ibv_import_mr(_p: *mut ibv_pd, _handle: u32) -> *mut ibv_mr {
    errno::ret_ptr(Err(EOPNOTSUPP))
}
/// `ibv_import_dm`: see [`ibv_import_device`].
pub extern "C" fn ibv_import_dm(_c: *mut ibv_context, _handle: u32) -> *mut c_void {
    errno::ret_ptr(Err(EOPNOTSUPP))
}
/// `ibv_unimport_pd`: nothing can have been imported.
pub extern "C" fn ibv_unimport_pd(_p: *mut ibv_pd) {}
/// `ibv_unimport_mr`: nothing can have been imported.
pub extern "C" fn ibv_unimport_mr(_m: *mut ibv_mr) {}
/// `ibv_unimport_dm`: nothing can have been imported.
pub extern "C" fn ibv_unimport_dm(_d: *mut c_void) {}
/// `ibv_query_ece`: no enhanced connection establishment (`EOPNOTSUPP`).
pub extern "C" fn ibv_query_ece(_q: *mut ibv_qp, _ece: *mut c_void) -> c_int {
    errno::ret(Err(EOPNOTSUPP))
}
/// `ibv_set_ece`: see [`ibv_query_ece`].
pub extern "C" fn ibv_set_ece(_q: *mut ibv_qp, _ece: *mut c_void) -> c_int {
    errno::ret(Err(EOPNOTSUPP))
}
/// `ibv_copy_ah_attr_from_kern`: a converter of the kernel's uverbs structs for providers;
/// no kernel structs exist here, so it copies nothing (documented as inert).
pub extern "C" fn ibv_copy_ah_attr_from_kern(_dst: *mut c_void, _src: *mut c_void) {}
/// `ibv_copy_qp_attr_from_kern`: inert, as [`ibv_copy_ah_attr_from_kern`].
pub extern "C" fn ibv_copy_qp_attr_from_kern(_dst: *mut c_void, _src: *mut c_void) {}
/// `ibv_copy_path_rec_from_kern`: inert, as [`ibv_copy_ah_attr_from_kern`].
pub extern "C" fn ibv_copy_path_rec_from_kern(_dst: *mut c_void, _src: *mut c_void) {}
/// `ibv_copy_path_rec_to_kern`: inert, as [`ibv_copy_ah_attr_from_kern`].
pub extern "C" fn ibv_copy_path_rec_to_kern(_dst: *mut c_void, _src: *mut c_void) {}
