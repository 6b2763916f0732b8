//! Direct FFI bindings to the functions declared in WDF headers. Types are not included in
//! this module, but are available in the top-level `wdk_sys` module.

#[allow(
    unused_imports,
    reason = "the WDF subset declares every DDI as a PFN_* type of the function table, so the \
              generated file may hold no plain function"
)]
pub use bindings::*;

generated_bindings!(
    #[allow(missing_docs)]
    #[allow(
        unused_imports,
        reason = "the generated code may use none of the generated types"
    )]
    "/wdf.rs"
);

// How `call_unsafe_wdf_function_binding!` bounds-checks its table index at run time.
#[doc(hidden)]
pub mod __private {
    include!(concat!(env!("OUT_DIR"), "/wdf_function_count.rs"));
}
