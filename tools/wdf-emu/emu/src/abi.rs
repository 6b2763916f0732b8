//! How the driver enters the emulation: every DDI and kernel routine is an ordinary Rust
//! function (`fn(&Arc<Inner>, args…) -> R`), and [`ddis!`](crate::ddis) / [`kernel_routines!`]
//! generate from that one definition the exported entry point for each calling convention:
//!
//! * the C convention ([`Convention::System`](crate::Convention::System)): what a host build
//!   of the driver calls (`extern "system"` is `extern "C"` on Linux), exported under the
//!   routine's own name for the kernel routines and through `WdfFunctions_01031` for the DDIs;
//! * the Windows x64 convention ([`Convention::Win64`](crate::Convention::Win64)): what a
//!   `winverbs.sys` image calls once a loader has mapped it into a Linux process; those entry
//!   points are not exported but listed ([`crate::table::WIN64_TABLE`],
//!   [`crate::wdm::WIN64_ROUTINES`]) for the loader to bind.
//!
//! Each entry point finds the running machine, checks the caller's IRQL against the routine's
//! documented maximum, switches to the kernel's allocation scope, and runs the routine inside
//! `catch_unwind`: nothing may unwind into the driver, whose frames are `extern "C"`. A
//! violation is recorded and the routine returns what the framework returns on that error (or
//! an inert value), never a panic.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use wdk_sys::PWDF_DRIVER_GLOBALS;
use wv_hal::Irql;
use wv_host::kernel;

use crate::machine::{self, Inner};
use crate::verifier::WDF_VIOLATION;

/// The text of a panic payload.
pub(crate) fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "(non-string panic payload)".to_owned()
    }
}

/// The common part of every entry point: the machine, the IRQL check, the scope, the unwind
/// barrier. `fail` is what the routine returns when it cannot run.
fn enter<R>(
    name: &'static str,
    max_irql: Irql,
    fail: impl FnOnce() -> R,
    body: impl FnOnce(&Arc<Inner>) -> R,
) -> R {
    let _host = kernel::host_scope();
    let Some(machine) = machine::current() else {
        eprintln!("wdf-emu: {name} called with no machine running");
        return fail();
    };
    let irql = kernel::irql();
    if irql > max_irql {
        machine.violation(format!(
            "verifier: {name} called at {}; its maximum is {} (IRQL rule)",
            irql.name(),
            max_irql.name()
        ));
        machine.count("irql violations");
        return fail();
    }
    match catch_unwind(AssertUnwindSafe(|| body(&machine))) {
        Ok(result) => result,
        Err(payload) => {
            machine.violation(format!(
                "wdf-emu: {name} failed inside the emulation: {}",
                panic_text(&*payload)
            ));
            fail()
        }
    }
}

/// The entry of a DDI: [`enter`], after checking the driver-globals argument every DDI takes
/// first (the framework dereferences it: a wrong one is a WDF violation).
pub(crate) fn ddi<R>(
    name: &'static str,
    globals: PWDF_DRIVER_GLOBALS,
    max_irql: Irql,
    fail: impl Fn() -> R + Copy,
    body: impl FnOnce(&Arc<Inner>) -> R,
) -> R {
    enter(name, max_irql, fail, |m| {
        if globals != crate::table::driver_globals() {
            m.bug_check(
                WDF_VIOLATION,
                format!("{name}: DriverGlobals {globals:p} is not this driver's"),
            );
            return fail();
        }
        m.count("ddi calls");
        m.count(name);
        body(m)
    })
}

/// The entry of a kernel routine: [`enter`].
pub(crate) fn kernel_routine<R>(
    name: &'static str,
    max_irql: Irql,
    fail: impl FnOnce() -> R,
    body: impl FnOnce(&Arc<Inner>) -> R,
) -> R {
    enter(name, max_irql, fail, |m| {
        m.count(name);
        body(m)
    })
}

/// Declares the DDIs the emulation implements. Each line names the DDI, its table index, its
/// `PFN_` type (checked against the bindings), its documented maximum IRQL, what it returns
/// when it cannot run, its parameters after `DriverGlobals`, and the Rust function that
/// implements it (`unsafe fn(&Arc<Inner>, params…) -> R`).
#[macro_export]
#[doc(hidden)]
macro_rules! ddis {
    // The module `$module` of entry points with the calling convention `$abi`: the same
    // bodies for both conventions.
    (@entry_points $(#[$doc:meta])* $module:ident, $abi:literal, $convention:literal; $(
        $name:ident [$irql:ident, fail = $fail:expr]
            ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $imp:path;
    )*) => {
        $(#[$doc])*
        #[allow(non_snake_case, clippy::too_many_arguments)]
        pub mod $module {
            #[allow(clippy::wildcard_imports)]
            use super::*;
            $(
                #[doc = concat!("`", stringify!($name), "`, ", $convention, ".")]
                ///
                /// # Safety
                /// The DDI's documented contract.
                pub unsafe extern $abi fn $name(
                    globals: wdk_sys::PWDF_DRIVER_GLOBALS,
                    $($arg: $ty),*
                ) $(-> $ret)? {
                    $crate::abi::ddi(
                        stringify!($name),
                        globals,
                        wv_hal::Irql::$irql,
                        || $fail,
                        // SAFETY: the driver's arguments, which the DDI's contract makes
                        // valid; the function checks what the framework checks.
                        |m| unsafe { $imp(m, $($arg),*) },
                    )
                }
            )*
        }
    };
    ($(
        $name:ident [$index:ident, $pfn:ident, $irql:ident, fail = $fail:expr]
            ($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $imp:path;
    )*) => {
        $crate::ddis!(@entry_points
            /// The DDIs' entry points with the C convention (a host build of the driver).
            c, "C", "C convention";
            $($name [$irql, fail = $fail] ($($arg: $ty),*) $(-> $ret)? => $imp;)*
        );
        $crate::ddis!(@entry_points
            /// The DDIs' entry points with the Windows x64 convention (a loaded image).
            win64, "win64", "Windows x64 convention";
            $($name [$irql, fail = $fail] ($($arg: $ty),*) $(-> $ret)? => $imp;)*
        );

        // Each C entry point has exactly the type of the bindings' `PFN_WDF…`.
        $( const _: wdk_sys::$pfn = Some(c::$name); )*

        /// Puts the implemented DDIs into a table of traps, at their KMDF 1.31 indices.
        pub(crate) const fn install(
            mut c_table: [wdk_sys::WDFFUNC; $crate::table::ENTRIES],
            mut win64_table: [wdk_sys::WDFFUNC; $crate::table::ENTRIES],
        ) -> ([wdk_sys::WDFFUNC; $crate::table::ENTRIES], [wdk_sys::WDFFUNC; $crate::table::ENTRIES]) {
            $(
                let index = wdk_sys::_WDFFUNCENUM::$index as usize;
                // SAFETY: a table entry is a type-erased function pointer; the driver casts it
                // back to the DDI's `PFN_` type (checked above) before calling it.
                c_table[index] = Some(unsafe {
                    std::mem::transmute::<
                        unsafe extern "C" fn(wdk_sys::PWDF_DRIVER_GLOBALS, $($ty),*) $(-> $ret)?,
                        unsafe extern "C" fn(),
                    >(c::$name)
                });
                // SAFETY: as above; the loader casts it to the Windows-convention type.
                win64_table[index] = Some(unsafe {
                    std::mem::transmute::<
                        unsafe extern "win64" fn(wdk_sys::PWDF_DRIVER_GLOBALS, $($ty),*) $(-> $ret)?,
                        unsafe extern "C" fn(),
                    >(win64::$name)
                });
            )*
            (c_table, win64_table)
        }

        /// The names of the implemented DDIs, with their table indices.
        pub const IMPLEMENTED: &[(&str, usize)] = &[
            $( (stringify!($name), wdk_sys::_WDFFUNCENUM::$index as usize), )*
        ];
    };
}

/// Declares the kernel routines: the exported C entry point under the routine's own name, the
/// Windows x64 one, and their list. Same shape as [`ddis!`](crate::ddis) without the table.
#[macro_export]
#[doc(hidden)]
macro_rules! kernel_routines {
    // The module `$module` of entry points with the calling convention `$abi` (and the
    // attribute `$attr` on each): the same bodies for both conventions.
    (@entry_points $(#[$doc:meta])* $module:ident, #[$attr:meta] $abi:literal,
        $convention:literal; $(
        $name:ident [$irql:ident, fail = $fail:expr]
            ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $imp:path;
    )*) => {
        $(#[$doc])*
        #[allow(non_snake_case)]
        pub mod $module {
            #[allow(clippy::wildcard_imports)]
            use super::*;
            $(
                #[doc = concat!("`", stringify!($name), "`, ", $convention, ".")]
                ///
                /// # Safety
                /// The routine's documented contract.
                #[$attr]
                pub unsafe extern $abi fn $name($($arg: $ty),*) $(-> $ret)? {
                    $crate::abi::kernel_routine(
                        stringify!($name),
                        wv_hal::Irql::$irql,
                        || $fail,
                        // SAFETY: the driver's arguments, which the routine's contract makes
                        // valid; the function checks what the kernel checks.
                        |m| unsafe { $imp(m, $($arg),*) },
                    )
                }
            )*
        }
    };
    ($(
        $name:ident [$irql:ident, fail = $fail:expr]
            ($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $imp:path;
    )*) => {
        $crate::kernel_routines!(@entry_points
            /// The kernel routines' entry points with the C convention, exported by name: a
            /// host build of the driver links against these symbols.
            c, #[unsafe(no_mangle)] "C", "C convention";
            $($name [$irql, fail = $fail] ($($arg: $ty),*) $(-> $ret)? => $imp;)*
        );
        $crate::kernel_routines!(@entry_points
            /// The kernel routines' entry points with the Windows x64 convention.
            // Found through the tables, not by name: nothing to export (the attribute only
            // repeats the module's).
            win64, #[allow(non_snake_case)] "win64", "Windows x64 convention";
            $($name [$irql, fail = $fail] ($($arg: $ty),*) $(-> $ret)? => $imp;)*
        );

        /// Every kernel routine with its Windows x64 entry point, for a loader's import
        /// resolution.
        pub const WIN64_ROUTINES: &[(&str, *const ())] = &[
            $( (stringify!($name), win64::$name as *const ()), )*
        ];
    };
}
