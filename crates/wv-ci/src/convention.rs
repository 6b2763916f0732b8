//! The calling convention of the code on the other side of a C table, and the two macros that
//! let one definition serve both:
//!
//! * `entry_points!` defines each entry of an export table once — an `unsafe extern "both" fn`
//!   whose body is ordinary Rust — and generates from it an `extern "system"` entry point and,
//!   on x86-64, an `extern "win64"` one, plus `NAME::entry(convention)`, the table slot value
//!   for a consumer of that convention;
//! * `callbacks!` defines, for each callback type a consumer hands a table, a function that
//!   calls it with the consumer's convention. It is exported: the emulated KMDF
//!   (tools/wdf-emu) calls a driver's callbacks, typed `extern "C"` by the WDK bindings, with
//!   the same function per type, in the driver's convention.
//!
//! `extern "system"` is the target's own convention: on Windows x64 the Windows one, on Linux
//! the C one. A consumer compiled for the target (the driver's host build, the tests) uses the
//! system table; a Windows x64 image mapped into a Linux x86-64 process (tools/sys-loader) calls
//! every entry, and expects every callback, with the Windows x64 convention — on Windows x64 the
//! two are the same convention.

use core::ffi::c_void;

use crate::base::{INTERFACE, NTSTATUS};
use crate::cm::{iba_cm_event, iba_cm_id};
use crate::ib_types::ib_event_rec_t;

/// The calling convention of the code a table is handed to (and whose callbacks it calls).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Convention {
    /// `extern "system"`: code compiled for this target.
    #[default]
    System,
    /// `extern "win64"`: a Windows x64 image loaded into a process of another x86-64 system.
    #[cfg(target_arch = "x86_64")]
    Win64,
}

impl Convention {
    /// Every convention this target can call.
    pub const ALL: &'static [Convention] = &[
        Convention::System,
        #[cfg(target_arch = "x86_64")]
        Convention::Win64,
    ];

    /// How many there are.
    pub(crate) const COUNT: usize = Self::ALL.len();

    /// Its position in [`Convention::ALL`].
    pub(crate) const fn index(self) -> usize {
        match self {
            Convention::System => 0,
            #[cfg(target_arch = "x86_64")]
            Convention::Win64 => 1,
        }
    }
}

/// The slot value of an exported table's `InterfaceReference` or `InterfaceDereference` for a
/// consumer of a convention: the `entry` of an `entry_points!` item.
pub(crate) type ReferenceEntry = fn(Convention) -> unsafe extern "system" fn(*mut c_void);

/// The `INTERFACE` header of a table WinVerbs exports as `T`, at `version`: its `Context` is
/// one new reference on `owner` (the one the query hands the consumer, released by the
/// consumer's `InterfaceDereference`), and its reference-counting slots are `reference`'s and
/// `dereference`'s entries for a consumer of `convention`.
pub(crate) fn exported_header<T, O>(
    version: u16,
    owner: &wv_hal::KArc<O>,
    convention: Convention,
    [reference, dereference]: [ReferenceEntry; 2],
) -> INTERFACE {
    INTERFACE {
        Size: core::mem::size_of::<T>() as u16,
        Version: version,
        Context: wv_hal::KArc::into_raw(owner.clone()).cast_mut().cast(),
        InterfaceReference: Some(reference(convention)),
        InterfaceDereference: Some(dereference(convention)),
    }
}

/// Defines entry points of a C table once, for every [`Convention`].
///
/// Each item is written `unsafe extern "both" fn NAME<GENERICS>(PARAMS) -> RET [CONV] { BODY }`:
/// documentation (with the entry's `# Safety` contract) and attributes first; `GENERICS` are
/// `T: Bound` pairs, then optionally `; const N: usize`; `[CONV]` is optional and names the
/// `Convention` the body sees (for the entries that take callbacks). It expands to:
///
/// * `unsafe fn NAME<…>(CONV: Convention, PARAMS) -> RET { BODY }`, the one definition;
/// * `mod NAME` with `system` (`unsafe extern "system" fn`, calling the definition with
///   `Convention::System`), `win64` (`unsafe extern "win64" fn`, x86-64 only) and
///   `entry(convention)`, the value of the table slot for a consumer of that convention (the
///   slot's type says `extern "system"`; the Windows one is stored in it for a consumer that
///   calls it with that convention).
macro_rules! entry_points {
    ($(
        $(#[$meta:meta])*
        unsafe extern "both" fn $name:ident
            < $($g:ident : $bound:path),* $(; const $c:ident : usize)? >
            ( $($arg:ident : $ty:ty),* $(,)? ) $(-> $ret:ty)?
            $([$conv:ident])?
            $body:block
    )*) => {$(
        $(#[$meta])*
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name<$($g: $bound,)* $(const $c: usize)?>(
            entry_points!(@conv $($conv)?): $crate::Convention,
            $($arg: $ty),*
        ) $(-> $ret)? $body

        #[doc = concat!("The entry points of `", stringify!($name), "`, one per convention.")]
        #[allow(non_snake_case, unused_imports, clippy::too_many_arguments)]
        mod $name {
            #[allow(clippy::wildcard_imports)]
            use super::*;

            #[doc = concat!("`", stringify!($name), "`, `extern \"system\"`.")]
            ///
            /// # Safety
            /// The entry's C contract (the definition's `# Safety`).
            pub(super) unsafe extern "system" fn system<$($g: $bound,)* $(const $c: usize)?>(
                $($arg: $ty),*
            ) $(-> $ret)? {
                // SAFETY: the caller keeps the entry's C contract, which is the definition's.
                unsafe {
                    super::$name::<$($g,)* $($c)?>($crate::Convention::System, $($arg),*)
                }
            }

            #[doc = concat!("`", stringify!($name), "`, `extern \"win64\"`.")]
            ///
            /// # Safety
            /// The entry's C contract (the definition's `# Safety`).
            #[cfg(target_arch = "x86_64")]
            pub(super) unsafe extern "win64" fn win64<$($g: $bound,)* $(const $c: usize)?>(
                $($arg: $ty),*
            ) $(-> $ret)? {
                // SAFETY: as for `system`.
                unsafe {
                    super::$name::<$($g,)* $($c)?>($crate::Convention::Win64, $($arg),*)
                }
            }

            /// The table slot's value for a consumer of `convention`.
            pub(super) fn entry<$($g: $bound,)* $(const $c: usize)?>(
                convention: $crate::Convention,
            ) -> unsafe extern "system" fn($($ty),*) $(-> $ret)? {
                match convention {
                    $crate::Convention::System => system::<$($g,)* $($c)?>,
                    #[cfg(target_arch = "x86_64")]
                    $crate::Convention::Win64 => {
                        let f: unsafe extern "win64" fn($($ty),*) $(-> $ret)? =
                            win64::<$($g,)* $($c)?>;
                        // SAFETY: only the convention of the pointer's type changes: the
                        // consumer this table is made for calls every entry with the Windows
                        // x64 convention.
                        unsafe {
                            core::mem::transmute::<
                                unsafe extern "win64" fn($($ty),*) $(-> $ret)?,
                                unsafe extern "system" fn($($ty),*) $(-> $ret)?,
                            >(f)
                        }
                    }
                }
            }
        }
    )*};
    (@conv) => { _ };
    (@conv $conv:ident) => { $conv };
}

/// Defines, for each function-pointer type listed, a function that calls a pointer of that type
/// with a [`Convention`](crate::Convention): the pointer is declared with the ABI its bindings
/// give it (`extern "system"` in this crate's tables; the WDK bindings, which tools/wdf-emu
/// calls a driver's callbacks through, say `extern "C"`), while the code behind it is
/// implemented with the convention of the side that registered it.
///
/// Written `extern "ABI"; NAME(ARG: TYPE, …) [-> RET]; …`, each item with its documentation.
/// Each expands, in the crate that invokes the macro, to `pub(crate) unsafe fn NAME(convention,
/// f, ARG…) [-> RET]`, `f` of type `unsafe extern "ABI" fn(TYPE, …) [-> RET]`.
#[macro_export]
macro_rules! callbacks {
    (
        extern $abi:literal;
        $(
            $(#[$meta:meta])*
            $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;
        )*
    ) => {$(
        $(#[$meta])*
        ///
        /// # Safety
        /// `f` is a function of this type implemented with `convention`, and the arguments are
        /// what its contract requires.
        pub(crate) unsafe fn $name(
            convention: $crate::Convention,
            f: unsafe extern $abi fn($($ty),*) $(-> $ret)?,
            $($arg: $ty),*
        ) $(-> $ret)? {
            match convention {
                // SAFETY: the caller's promise.
                $crate::Convention::System => unsafe { f($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                $crate::Convention::Win64 => {
                    // SAFETY: the code behind `f` is implemented with the Windows x64
                    // convention; only the convention of the pointer's type changes.
                    let g = unsafe {
                        ::core::mem::transmute::<
                            unsafe extern $abi fn($($ty),*) $(-> $ret)?,
                            unsafe extern "win64" fn($($ty),*) $(-> $ret)?,
                        >(f)
                    };
                    // SAFETY: the caller's promise.
                    unsafe { g($($arg),*) }
                }
            }
        }
    )*};
}

callbacks! {
    extern "system";
    /// A `ci_async_event_cb_t`: a CA, QP, SRQ or CQ event.
    async_event(record: *mut ib_event_rec_t);
    /// A `ci_completion_cb_t`: a CQ's completion notification.
    completion(context: *mut c_void);
    /// An `iba_cm_callback`: a CM event on an id.
    cm_event(id: *mut iba_cm_id, event: *mut iba_cm_event) -> NTSTATUS;
}
