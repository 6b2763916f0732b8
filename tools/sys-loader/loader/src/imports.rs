//! What an image may import, with the Windows x64 entry point of each: the emulated kernel's
//! routines (`wdf_emu::wdm::WIN64_ROUTINES`) and the C runtime and bug check of [`crate::crt`]
//! from `ntoskrnl.exe`, and the framework loader's bind and unbind ([`crate::wdfldr`]) from
//! `WDFLDR.SYS`. Module names compare without case, as Windows' loader compares them.

use crate::{crt, wdfldr};

/// The ntoskrnl.exe routines only an image imports.
const CRT: &[(&str, *const ())] = &[
    ("memcpy", crt::memcpy as *const ()),
    ("memmove", crt::memmove as *const ()),
    ("memset", crt::memset as *const ()),
    ("memcmp", crt::memcmp as *const ()),
    ("KeBugCheckEx", crt::KeBugCheckEx as *const ()),
];

/// The WDFLDR.SYS routines.
const WDFLDR: &[(&str, *const ())] = &[
    ("WdfVersionBind", wdfldr::WdfVersionBind as *const ()),
    ("WdfVersionUnbind", wdfldr::WdfVersionUnbind as *const ()),
];

/// Every routine of `module` the emulation provides.
fn routines(module: &str) -> Vec<(&'static str, *const ())> {
    if module.eq_ignore_ascii_case("ntoskrnl.exe") {
        wdf_emu::wdm::WIN64_ROUTINES
            .iter()
            .chain(CRT)
            .copied()
            .collect()
    } else if module.eq_ignore_ascii_case("WDFLDR.SYS") {
        WDFLDR.to_vec()
    } else {
        Vec::new()
    }
}

/// The address of `module!name`'s Windows x64 entry point, if the emulation provides it.
pub fn resolve(module: &str, name: &str) -> Option<usize> {
    routines(module)
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, routine)| routine as usize)
}

/// Every routine the emulation provides, as `module!routine`.
pub fn provided() -> Vec<String> {
    ["ntoskrnl.exe", "WDFLDR.SYS"]
        .iter()
        .flat_map(|m| {
            routines(m)
                .into_iter()
                .map(move |(n, _)| format!("{m}!{n}"))
        })
        .collect()
}
