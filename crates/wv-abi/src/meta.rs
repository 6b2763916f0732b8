//! Layout and constant metadata computed from the real Rust definitions, so tools (the harness,
//! conformance checks) can print or compare the ABI without hard-coding it a second time.

/// One field of a `#[repr(C)]` ABI struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldInfo {
    /// C field name.
    pub name: &'static str,
    /// `offset_of!` in bytes.
    pub offset: usize,
    /// `size_of` the field's type in bytes.
    pub size: usize,
}

/// Layout of one ABI struct, taken from `size_of`/`align_of`/`offset_of!`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StructInfo {
    /// C type name.
    pub name: &'static str,
    /// `sizeof` in bytes.
    pub size: usize,
    /// Alignment in bytes.
    pub align: usize,
    /// Named fields in declaration order (explicit tail padding is not listed).
    pub fields: &'static [FieldInfo],
}

/// One named constant of the header, widened to `u64` for printing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConstInfo {
    /// C macro name.
    pub name: &'static str,
    /// Value.
    pub value: u64,
}
