//! Direct FFI bindings to the kernel routines of the base headers (`ntifs.h`, `ntddk.h`,
//! `ntstrsafe.h` and the kmdf-check compat header). Types are not included in this module, but
//! are available in the top-level `wdk_sys` module.

pub use bindings::*;

#[allow(missing_docs)]
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

    include!(concat!(env!("OUT_DIR"), "/ntddk.rs"));
}
