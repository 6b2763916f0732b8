//! The OFW WinVerbs user/kernel ABI (`core/winverbs/wv_ioctl.h`), byte for byte.
//!
//! * [`ioctl`]: IOCTL codes and how each one completes.
//! * [`io`]: the `WV_IO_*` structures, with compile-time layout checks.
//! * [`consts`]: flags and enumeration values.
//! * [`status`]: the NTSTATUS values the driver produces (ABI for pended requests).
//! * [`mod@decode`] / [`encode`]: request validation and in-place output writing.
//! * [`meta`]: computed layout tables for tools.
//!
//! No `unsafe`, no allocation: the driver core and user-mode tools share it.
#![no_std]
#![forbid(unsafe_code)]

pub mod consts;
pub mod decode;
pub mod encode;
pub mod io;
pub mod ioctl;
pub mod meta;
pub mod status;

pub use consts::CONSTANTS;
pub use decode::{Request, Vendor, decode, read_prefix, read_u64_id};
pub use io::*;
pub use ioctl::{Completion, Ioctl};
pub use meta::{ConstInfo, FieldInfo, StructInfo};
pub use status::{ALL_KNOWN, NtStatus};
