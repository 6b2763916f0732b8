//! The generated constants and variables of every enabled header, plus what bindgen cannot
//! generate: `WDF_NO_*`, `POOL_FLAG_*` and the `STATUS_*` codes.

#![allow(missing_docs)]

pub use bindings::*;
#[cfg(any(driver_model__driver_type = "WDM", driver_model__driver_type = "KMDF"))]
pub use kernel_mode::*;
#[cfg(any(driver_model__driver_type = "KMDF", driver_model__driver_type = "UMDF"))]
pub use wdf::*;

use crate::types::NTSTATUS;

generated_bindings!(
    #[allow(non_upper_case_globals)]
    "/constants.rs"
);

// The WDK defines these as `(NULL)`, which bindgen does not turn into constants.
#[cfg(any(driver_model__driver_type = "KMDF", driver_model__driver_type = "UMDF"))]
mod wdf {
    use crate::types::{PVOID, PWDF_OBJECT_ATTRIBUTES};

    pub const WDF_NO_OBJECT_ATTRIBUTES: PWDF_OBJECT_ATTRIBUTES = core::ptr::null_mut();
    pub const WDF_NO_EVENT_CALLBACK: PVOID = core::ptr::null_mut();
    pub const WDF_NO_HANDLE: PVOID = core::ptr::null_mut();
    pub const WDF_NO_CONTEXT: PVOID = core::ptr::null_mut();
    pub const WDF_NO_SEND_OPTIONS: PVOID = core::ptr::null_mut();
}

// The WDK writes these with a ui64 suffix, which bindgen cannot read; values from the
// POOL_FLAGS page of the kernel-mode DDI reference.
#[cfg(any(driver_model__driver_type = "WDM", driver_model__driver_type = "KMDF"))]
mod kernel_mode {
    use crate::types::POOL_FLAGS;

    pub const POOL_FLAG_REQUIRED_START: POOL_FLAGS = 0x0000_0000_0000_0001;
    pub const POOL_FLAG_USE_QUOTA: POOL_FLAGS = 0x0000_0000_0000_0001;
    pub const POOL_FLAG_UNINITIALIZED: POOL_FLAGS = 0x0000_0000_0000_0002;
    pub const POOL_FLAG_SESSION: POOL_FLAGS = 0x0000_0000_0000_0004;
    pub const POOL_FLAG_CACHE_ALIGNED: POOL_FLAGS = 0x0000_0000_0000_0008;
    pub const POOL_FLAG_RESERVED1: POOL_FLAGS = 0x0000_0000_0000_0010;
    pub const POOL_FLAG_RAISE_ON_FAILURE: POOL_FLAGS = 0x0000_0000_0000_0020;
    pub const POOL_FLAG_NON_PAGED: POOL_FLAGS = 0x0000_0000_0000_0040;
    pub const POOL_FLAG_NON_PAGED_EXECUTE: POOL_FLAGS = 0x0000_0000_0000_0080;
    pub const POOL_FLAG_PAGED: POOL_FLAGS = 0x0000_0000_0000_0100;
    pub const POOL_FLAG_RESERVED2: POOL_FLAGS = 0x0000_0000_0000_0200;
    pub const POOL_FLAG_RESERVED3: POOL_FLAGS = 0x0000_0000_0000_0400;
    pub const POOL_FLAG_REQUIRED_END: POOL_FLAGS = 0x0000_0000_8000_0000;
    pub const POOL_FLAG_OPTIONAL_START: POOL_FLAGS = 0x0000_0001_0000_0000;
    pub const POOL_FLAG_SPECIAL_POOL: POOL_FLAGS = 0x0000_0001_0000_0000;
    pub const POOL_FLAG_OPTIONAL_END: POOL_FLAGS = 0x8000_0000_0000_0000;
}

// Defined at this level so that they shadow anything the glob imports above could bring in.
include!(concat!(env!("OUT_DIR"), "/status.rs"));
