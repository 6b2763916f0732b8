//! Direct FFI bindings to the kernel routines of the base headers (`ntifs.h`, `ntddk.h`,
//! `ntstrsafe.h` and the kmdf-check compat header). Types are not included in this module, but
//! are available in the top-level `wdk_sys` module.

pub use bindings::*;

generated_bindings!(
    #[allow(missing_docs)]
    "/ntddk.rs"
);
