//! `libibverbs.so.1` over WinVerbs: rdma-core's libibverbs ABI (every symbol and version
//! node of Debian's rdma-core 44 library, its struct layouts, the op tables its header's
//! inline functions dispatch through) implemented over `wv-client`, so unmodified libibverbs
//! programs (`ibv_devinfo`, `ibv_rc_pingpong`, perftest, rdma-core's pyverbs tests) run on the
//! WinVerbs driver core and the soft HCA, with no RDMA hardware and no kernel module.
//!
//! * [`runtime`]: the stack, brought up on first `ibv_get_device_list` (in-process by
//!   default; `WV_IBVERBS_TRANSPORT` picks another), and the device list.
//! * [`context`], [`objects`], [`cq`], [`srq`], [`qp`]: the verbs. The control path is
//!   WinVerbs IOCTLs; the data path (post, poll, arm) goes through the soft HCA's user-mode
//!   provider without entering the driver, as on hardware.
//! * [`modify`]: Linux's QP transition rules, checked before WinVerbs' QP_MODIFY (which has
//!   OFW's meaning); [`errno`]: NTSTATUS → errno per verb convention.
//! * [`abi`]: the C structs with compile-time layout checks (and bindgen's view of the
//!   installed header on Linux); [`api`], [`compat`], [`private`]: the exported functions by
//!   version node. The build script versions them with `.symver` from the installed library's
//!   symbol table.
//!
//! Application memory is registered as it is (malloc, mmap): the in-process soft HCAs reach it
//! through the kernel's cross-address-space copies (`wv_softhca::dma::process`).
#![allow(
    unsafe_code,
    reason = "the libibverbs C ABI: raw pointers from applications at every entry point"
)]

pub mod abi;
pub mod api;
pub mod compat;
pub mod context;
pub mod cq;
pub mod errno;
pub mod events;
pub mod misc;
pub mod modify;
pub mod objects;
pub mod ops;
pub mod private;
pub mod qp;
pub mod query;
pub mod runtime;
pub mod srq;
#[cfg(not(windows))]
pub mod transport;

#[cfg(wv_exports)]
mod exports {
    include!(concat!(env!("OUT_DIR"), "/exports.rs"));
}
