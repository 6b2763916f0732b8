//! OFW's lower interfaces as WinOFED's C headers define them for x64 Windows, byte for byte.
//!
//! WinVerbs talks to the HCA driver through two interface tables it queries from the device
//! stack (spec §3.2): `RDMA_INTERFACE_VERBS` (`inc/kernel/rdma/verbs.h`, holding
//! `ci_interface_t` of `inc/iba/ib_ci.h`) and `INFINIBAND_INTERFACE_CM`
//! (`inc/kernel/iba/ib_cm_ifc.h`, holding `iba_cm_interface`). This crate declares both tables,
//! every function-pointer type in them, and every type those functions take or return.
//!
//! * [`base`]: the WDM and complib types the headers build on (`INTERFACE`, `GUID`,
//!   `LIST_ENTRY`, `KPROCESSOR_MODE`, `boolean_t`, …).
//! * [`ib_types`]: the `ib_*` / `mlnx_*` types of `ib_types.h` (and the two of `ib_al.h`).
//! * [`ci`]: `ib_ci.h` and `verbs.h`: `ci_interface_t`, `RDMA_INTERFACE_VERBS`.
//! * [`cm`]: `ib_cm_ifc.h`: `iba_cm_interface`, `INFINIBAND_INTERFACE_CM`.
//! * [`layout`]: the layout table of every declared type and the list of constants.
//!
//! And the two adapters between these tables and `wv_hal::Verbs`:
//!
//! * [`import::CiVerbs`]: the driver's lower edge — `Verbs` over a `ci_interface_t` a
//!   controller's driver handed over, with the controller's callbacks trampolined into the
//!   driver core's sinks;
//! * [`export::CiExport`]: any `Verbs` implementation presented as that table (the soft HCA's
//!   C face), so the lower edge runs through real C calls on every host;
//! * [`cm_import::CiCm`]: `wv_hal::ConnectionManager` over the connection manager's
//!   `iba_cm_interface`, validated and owned with its reference, its id callbacks trampolined
//!   into the driver core's sinks;
//! * [`cm_export::CiCmExport`]: any `ConnectionManager` presented as that table (the soft
//!   HCA's CM, so the CM edge also runs through real C calls).
//!
//! [`convert`] and [`cm_convert`] hold the value conversions both directions use, [`status`] the `ib_api_status_t` mapping.
//!
//! Conventions:
//!
//! * Type and field names are the C ones. A tag declared inside another type
//!   (`struct _send_ud`, `union _qp_state`) keeps its tag as the Rust name; its C name in the
//!   layout table includes the keyword. The only invented names: an *anonymous* C union gets
//!   a Rust type named after the enclosing type plus `_anon_…` (the layout table lists its
//!   members under the names C code uses for them), and [`iba_cm_callback`] names the CM
//!   callback type the header spells out three times.
//! * Windows x64 is LLP64. Only fixed-width Rust types are used, so the layouts are the same on
//!   every 64-bit target and are checked at compile time there. C enums (`int` under MSVC) are
//!   `u32` aliases with named constants, never Rust enums, since the other side may write any
//!   value. `boolean_t` is `int` (4 bytes).
//! * `TO_LONG_PTR(type, name)` members (a union of the pointer and a `uint64_t`) are declared as
//!   the pointer itself, which is the same 8 bytes on 64-bit targets.
//! * Regions between `cl_packon.h` and `cl_packoff.h` are `#[repr(C, packed)]`.
//! * Network-order (`ib_net*_t`, `net*_t`) values are plain integers holding the bytes as
//!   stored; nothing here swaps bytes.
//! * Function pointers are `Option<unsafe extern "system" fn(…) -> R>`: nullable as in C. The
//!   headers give them no calling convention; x64 has only one, and x86 kernel builds default
//!   to `__stdcall`, which is what `"system"` means there.
//! * Every struct and union has `zeroed()` (and `Default`), the all-zero value C code gets
//!   from `RtlZeroMemory`/`cl_memclr`.
#![no_std]
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

extern crate alloc;

#[macro_use]
mod macros;
#[macro_use]
pub mod convention;

pub mod base;
pub mod ci;
pub mod cm;
pub mod cm_convert;
pub mod cm_export;
pub mod cm_import;
pub mod convert;
pub mod export;
pub mod ib_types;
pub mod import;
pub mod layout;
mod pinned;
pub mod status;

pub use cm_export::{CiCmExport, ExportError};
pub use cm_import::{CiCm, CiCmId};
pub use convention::Convention;
pub use export::CiExport;
pub use import::{CiError, CiTable, CiVerbs};

pub use base::*;
pub use ci::*;
pub use cm::*;
pub use ib_types::*;
pub use layout::{LOWER_CONSTANTS, LOWER_STRUCTS};
pub use wv_abi::meta::{ConstInfo, FieldInfo, StructInfo};
