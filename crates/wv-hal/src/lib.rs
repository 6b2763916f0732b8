//! The contracts of the WinVerbs driver core, and nothing else.
//!
//! `wv-core` is generic over two traits defined here:
//!
//! * [`Platform`]: the operating-system services the driver uses (pended requests, manual
//!   request queues, spin locks, events, work items, time): exactly what WDF offers a filter
//!   driver. `driver/` implements it with WDF on Windows; `wv-host` implements it with a host
//!   model of KMDF that checks the IRQL rules. Device models (the soft HCA) also need an
//!   interrupt line and DPCs: [`DeviceModelPlatform`], which the core never uses.
//! * [`Verbs`]: the lower RDMA controller, modelled on OFW's `ci_interface_t`. A real controller
//!   driver provides it through `GUID_RDMA_INTERFACE_VERBS`; `wv-softhca` is a software one.
//! * [`ConnectionManager`]: the IB connection manager of the controller's stack, modelled on
//!   OFW's `iba_cm_interface` (`GUID_INFINIBAND_INTERFACE_CM`), which the endpoint IOCTLs use.
//!
//! In the other direction, [`FilterDriver`] is what the platform calls: PnP arrival and removal
//! of lower devices, and the file/IOCTL callbacks of the control device `\Device\WinVerbs`.
//!
//! Shared objects cross these contracts as [`KArc`]s, whose allocation can fail (an
//! out-of-pool condition fails the request, never the machine).
//!
//! Every method documents the IRQL at which it may be called, and its WDF counterpart. The host
//! model enforces the IRQL rules at run time.
#![no_std]
// One audited module (`karc`) allocates and frees by hand; everything else is safe code.
#![deny(unsafe_code)]

extern crate alloc;

pub mod cm;
pub mod device_model;
pub mod driver;
pub mod irql;
pub mod karc;
pub mod platform;
pub mod types;
pub mod verbs;
mod verbs_shared;
mod wire_enum;

pub use cm::{
    CmEvent, CmEventSink, CmRep, CmRepEvent, CmReq, CmReqEvent, CmReqParams, ConnectionManager,
    NoCm,
};
pub use device_model::{DeviceModelPlatform, Dpc, DpcInserted, InterruptService};
pub use driver::FilterDriver;
pub use irql::Irql;
pub use karc::{AllocError, KArc, KArcSlot, KWeak};
pub use platform::{Event, IoRequest, IoStatus, Platform, RequestQueue, SpinLock, WorkItem};
pub use types::*;
pub use verbs::{
    CaEventSink, CqEventSink, NoEvents, QpEventSink, SrqEventSink, Umv, Verbs, VerbsError,
};
pub use wv_abi::NtStatus;
