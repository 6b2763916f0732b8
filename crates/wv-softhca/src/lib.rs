//! The soft HCA: a pvrdma-style software RDMA controller below the WinVerbs filter.
//!
//! * [`SoftHca`] is the device and its kernel half: it implements [`wv_hal::Verbs`]. Commands go
//!   through a one-slot command channel with a response interrupt; completions and events leave
//!   through a CQ-notify ring and an async-event ring, each with its interrupt vector, whose ISR
//!   (run by `DeviceModelPlatform::interrupt`) queues a DPC (`DeviceModelPlatform::queue_dpc`)
//!   that calls the sinks.
//! * [`uvp`] is the user half: post send/receive, bind memory windows, poll and arm CQs,
//!   without IOCTLs. The work a doorbell starts runs in the doorbell caller's thread, as in rxe;
//!   what waits for time (an RNR wait, a retransmission) runs in the DPC of the QP's timer
//!   (`DeviceModelPlatform::set_timer`), on the platform's clock.
//! * [`DirectClient`] opens a device without the driver (CA, provider, PD, CQs and QPs): the
//!   baselines that measure what the driver adds.
//! * [`Fabric`] joins soft HCAs in one process, with optional fault injection; [`address`]
//!   gives their ports IP addresses, resolves paths between them and keeps the port space.
//! * [`SoftCm`] is the connection manager: IB CM handshakes between the fabric's devices, on
//!   the platform's clock; `SoftHca::c_cm_interface` is its C table.
//! * `SoftHca::c_interface` is the device's C face: the `ci_interface_t` table a Windows
//!   soft-HCA driver would hand the filter (built by `wv-ci`'s export adapter). The C faces are
//!   the `c-face` feature (on by default), which the user-mode provider alone goes without.
//! * [`dma`] is the only module with `unsafe` code: the device reaches client memory only
//!   through regions pinned there.
//! * The kernel half allocates only fallibly and never under one of its locks (`fallible`,
//!   `table`): in the driver it models, the allocation-error handler is a bug check.
//!
//! The crate is `no_std` + `alloc`, so a root-enumerated Windows soft HCA driver can reuse it.
#![no_std]
// One audited module (`dma`) forms pointers into client memory; everything else is safe code.
#![deny(unsafe_code)]

extern crate alloc;

pub mod abi;
pub mod address;
#[cfg(feature = "c-face")]
mod c_face;
mod cm;
mod cq;
pub mod device;
pub mod direct;
pub mod dma;
mod engine;
pub mod fabric;
mod fallible;
mod lock;
#[cfg(all(test, loom))]
mod loom_tests;
mod modify_attr;
mod mr;
mod mr_cache;
mod mw;
mod qp;
mod ring;
mod sched;
mod srq;
pub mod state_table;
mod table;
pub mod uvp;
mod verbs_impl;
pub mod wr;

pub use address::{AddressError, Location, PortLease};
pub use cm::{SoftCm, SoftCmId};
pub use device::{DEFAULT_COMMAND_SLOTS, DeviceConfig, Limits, LinkLayer, Vector};
pub use direct::{DirectClient, DirectError};
pub use dma::{BufferPool, ClientMemory, DmaBuffer};
pub use engine::{GRH_BYTES, MAX_INLINE};
pub use fabric::{Fabric, FaultConfig, LinkStats, PacketFate};
pub use mw::MwType;
pub use qp::MAX_SGE;
pub use uvp::{NewRing, PostError, RingResize, RingResp, UvpContext, UvpCq, UvpQp, UvpSrq};
pub use verbs_impl::{
    ObjectCounts, SoftAh, SoftCa, SoftCq, SoftHca, SoftMcast, SoftMr, SoftMw, SoftPd, SoftQp,
    SoftSrq,
};
pub use wr::{
    AtomicArgs, FastReg, MwBind, MwBindInfo, RecvWr, SendWr, Sge, UdAddress, WcOpcode, WcStatus,
    WorkCompletion, WrOpcode, inc_rkey, send_flags, wc_flags,
};
