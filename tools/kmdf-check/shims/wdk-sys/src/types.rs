//! The generated types of every enabled header. `wdk-macros` parses the same file (through the
//! path `call_unsafe_wdf_function_binding!` passes it) for the DDI signatures.

pub use bindings::*;

// Generated code: clippy's opinions about bindgen's output are not actionable here, and the
// project-wide restriction lints (SAFETY comments, one unsafe operation per block) cannot be
// met by a generator.
#[allow(missing_docs)]
#[allow(non_upper_case_globals)]
#[allow(non_camel_case_types)]
#[allow(non_snake_case)]
#[allow(unnecessary_transmutes)]
#[allow(unsafe_op_in_unsafe_fn)]
#[allow(clippy::all)]
#[allow(clippy::undocumented_unsafe_blocks)]
#[allow(clippy::multiple_unsafe_ops_per_block)]
#[allow(clippy::missing_safety_doc)]
mod bindings {
    // The C types the generated code names as `ctypes::…` (bindgen's `ctypes_prefix`).
    use crate::ctypes;

    include!(concat!(env!("OUT_DIR"), "/types.rs"));
}
