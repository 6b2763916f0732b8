//! kmdf-check shim of `wdk-sys` 0.5.2: direct bindings to the kernel and KMDF APIs, generated
//! at build time from Debian's mingw-w64 DDK headers and the project's WDF subset.
//!
//! Module paths and item names follow the real crate (`wdk_sys::ntddk`, `wdk_sys::wdf`, the
//! types and constants at the root, `NT_SUCCESS`, `PAGED_CODE!`,
//! `call_unsafe_wdf_function_binding!`), so the real `wdk`, `wdk-macros`, `wdk-alloc` and
//! `wdk-panic` crates and the driver compile against it unchanged. Only for type-checking on
//! Linux: nothing built against it is ever linked or run.

#![no_std]

/// Declares `mod bindings` over the generated file `$file` of `OUT_DIR`, with `$attr` on the
/// module. The generated code names the C types as `ctypes::…` (bindgen's `ctypes_prefix`) and
/// the generated types by their bare names; it may use neither.
macro_rules! generated_bindings {
    ($(#[$attr:meta])* $file:literal) => {
        $(#[$attr])*
        #[allow(clippy::all)]
        mod bindings {
            #[allow(
                unused_imports,
                reason = "the C types the generated code names as `ctypes::…`"
            )]
            use crate::ctypes;
            #[allow(
                clippy::wildcard_imports,
                reason = "the generated code refers to the generated types by their bare names"
            )]
            use crate::types::*;

            include!(concat!(env!("OUT_DIR"), $file));
        }
    };
}

/// Items of every driver model (WDM, KMDF, UMDF), as the real crate gates them: each one
/// under `cfg(any(driver_model__driver_type = …))` of the three.
macro_rules! for_every_driver_model {
    ($($item:item)*) => {$(
        #[cfg(any(
            driver_model__driver_type = "WDM",
            driver_model__driver_type = "KMDF",
            driver_model__driver_type = "UMDF"
        ))]
        $item
    )*};
}

for_every_driver_model! {
    #[doc(hidden)]
    pub use wdk_macros as __proc_macros;

    pub use crate::{constants::*, types::*};
}

#[cfg(any(driver_model__driver_type = "WDM", driver_model__driver_type = "KMDF"))]
pub mod ntddk;

#[cfg(any(driver_model__driver_type = "KMDF", driver_model__driver_type = "UMDF"))]
pub mod wdf;

#[cfg(feature = "test-stubs")]
pub mod test_stubs;

/// The C integer types of the generated bindings, with the widths of the Windows target
/// whatever the host is (LLP64: `long` and `unsigned long` are 32-bit). The bindings name them
/// `ctypes::c_long` and so on (bindgen's `ctypes_prefix`), so the same Windows-layout bindings
/// compile, with bindgen's layout assertions holding, for `x86_64-pc-windows-msvc` and for a
/// Linux host (the KMDF emulation of tools/wdf-emu). Everything but the two `long` types is
/// `core::ffi`'s, which has the same widths on both.
pub mod ctypes {
    pub use core::ffi::{
        c_char, c_double, c_float, c_int, c_longlong, c_schar, c_short, c_uchar, c_uint,
        c_ulonglong, c_ushort, c_void,
    };

    /// C `long` on Windows: 32 bits.
    #[allow(non_camel_case_types)]
    pub type c_long = i32;
    /// C `unsigned long` on Windows: 32 bits.
    #[allow(non_camel_case_types)]
    pub type c_ulong = u32;
}

for_every_driver_model! {
    mod constants;
    mod types;
    mod macros;
}

#[cfg(all(driver_model__driver_type = "KMDF", target_pointer_width = "64"))]
mod layout;

// The same linker-symbol stubs the real crate defines: LLVM references `_fltused` and the C++
// frame handlers even from panic=abort, soft-float kernel code.
#[allow(missing_docs)]
// SAFETY: `_fltused` is a required Windows linker symbol for floating point support; no other
// symbol of this crate has the name.
#[unsafe(no_mangle)]
pub static _fltused: () = ();

#[cfg(panic = "abort")]
#[allow(missing_docs)]
// SAFETY: `__CxxFrameHandler3` is a required Windows C++ exception handler symbol; no other
// symbol of this crate has the name.
#[unsafe(no_mangle)]
pub const extern "system" fn __CxxFrameHandler3() -> i32 {
    0
}

#[cfg(panic = "abort")]
#[allow(missing_docs)]
// SAFETY: `__CxxFrameHandler4` is a required Windows C++ exception handler symbol; no other
// symbol of this crate has the name.
#[unsafe(no_mangle)]
pub const extern "system" fn __CxxFrameHandler4() -> i32 {
    // Distinct from __CxxFrameHandler3 so that the linker cannot fold the two.
    1
}

#[cfg(panic = "abort")]
#[allow(missing_docs)]
// SAFETY: `__GSHandlerCheck_EH4` is a required Windows C++ exception handler symbol; no other
// symbol of this crate has the name.
#[unsafe(no_mangle)]
pub const extern "system" fn __GSHandlerCheck_EH4() -> i32 {
    2
}

for_every_driver_model! {
    pub use nt_status::*;

    /// `ntdef.h`'s tests of an `NTSTATUS`'s severity (its top two bits).
    #[allow(non_snake_case)]
    mod nt_status {
        use crate::NTSTATUS;

        /// The severity field: 0 success, 1 informational, 2 warning, 3 error.
        const fn severity(nt_status: NTSTATUS) -> u32 {
            nt_status.cast_unsigned() >> 30
        }

        /// Evaluates to TRUE if the return value specified by `nt_status` is a success
        /// type (0 − 0x3FFFFFFF) or an informational type (0x40000000 − 0x7FFFFFFF).
        #[must_use]
        pub const fn NT_SUCCESS(nt_status: NTSTATUS) -> bool {
            nt_status >= 0
        }

        /// Evaluates to TRUE if the return value specified by `nt_status` is an
        /// informational type (0x40000000 − 0x7FFFFFFF).
        #[must_use]
        pub const fn NT_INFORMATION(nt_status: NTSTATUS) -> bool {
            severity(nt_status) == 1
        }

        /// Evaluates to TRUE if the return value specified by `nt_status` is a warning
        /// type (0x80000000 − 0xBFFFFFFF).
        #[must_use]
        pub const fn NT_WARNING(nt_status: NTSTATUS) -> bool {
            severity(nt_status) == 2
        }

        /// Evaluates to TRUE if the return value specified by `nt_status` is an error
        /// type (0xC0000000 - 0xFFFFFFFF).
        #[must_use]
        pub const fn NT_ERROR(nt_status: NTSTATUS) -> bool {
            severity(nt_status) == 3
        }
    }
}

/// Debug-asserts that the caller runs at `IRQL <= APC_LEVEL`, like the WDK's `PAGED_CODE()`.
#[cfg(any(driver_model__driver_type = "WDM", driver_model__driver_type = "KMDF"))]
#[macro_export]
#[allow(non_snake_case)]
macro_rules! PAGED_CODE {
    () => {
        debug_assert!(unsafe { $crate::ntddk::KeGetCurrentIrql() <= $crate::APC_LEVEL as u8 });
    };
}
