//! The declaration macros: `ci_struct!` (structs and unions with their layout table entry and
//! compile-time layout checks), `ci_opaque!` (types only ever seen behind a pointer) and
//! `ci_consts!` (named constants collected into a list).

/// Types for which the all-zero bit pattern is a valid value: integers, arrays of them, raw
/// pointers, nullable function pointers, and every struct/union `ci_struct!` declares (whose
/// fields are all checked to be `ZeroValid`). `zeroed()` relies on it; it is crate-private so
/// nothing outside can add a type for which zero is not valid.
pub(crate) trait ZeroValid {}

/// The first of the named function pointers that `$table` lacks, as its name (`None` when
/// every one is there): the functions an interface must provide for WinVerbs to use it.
macro_rules! first_missing {
    ($table:expr; $($f:ident),+ $(,)?) => {{
        let table = $table;
        [$( (table.$f.is_none(), stringify!($f)) ),+]
            .into_iter()
            .find_map(|(absent, name)| absent.then_some(name))
    }};
}

/// The C spelling of a field name: `stringify!` keeps the `r#` of a raw identifier (`r#type`),
/// which C does not have.
pub(crate) const fn c_name(name: &'static str) -> &'static str {
    match name.as_bytes() {
        [b'r', b'#', ..] => match core::str::from_utf8(name.as_bytes().split_at(2).1) {
            Ok(s) => s,
            Err(_) => name,
        },
        _ => name,
    }
}

macro_rules! zero_valid_prims {
    ($($t:ty),*) => { $( impl ZeroValid for $t {} )* };
}
zero_valid_prims!(u8, u16, u32, u64, i8, i16, i32, i64);

impl<T: ZeroValid, const N: usize> ZeroValid for [T; N] {}
impl<T> ZeroValid for *const T {}
impl<T> ZeroValid for *mut T {}

/// `None` is the all-zero function pointer, for every arity the headers use.
macro_rules! zero_valid_fns {
    ($( ($($arg:ident),*) )*) => {
        $( impl<R, $($arg),*> ZeroValid for Option<unsafe extern "system" fn($($arg),*) -> R> {} )*
    };
}
zero_valid_fns! {
    () (A) (A, B) (A, B, C) (A, B, C, D) (A, B, C, D, E) (A, B, C, D, E, F)
    (A, B, C, D, E, F, G) (A, B, C, D, E, F, G, H) (A, B, C, D, E, F, G, H, I)
}

/// Declares a `#[repr(C…)]` struct or union (the caller writes the `repr`), with:
///
/// * `INFO`: its [`StructInfo`](wv_abi::meta::StructInfo) computed from the definition (C name,
///   `size_of`, `align_of`, each field's `offset_of!` and size);
/// * compile-time asserts (64-bit targets) of size, alignment and every field offset against
///   the numbers in brackets, which are a C compiler's for the x64 headers;
/// * `zeroed()` and `Default`, after checking at compile time that every field type is
///   `ZeroValid`.
///
/// Header: `pub struct NAME [size S, align A]`, or `[c "struct _tag", size S, align A]` when the
/// C name is a tag. A field may end in `=> anon { m: T, … }` (a Rust field standing for an
/// anonymous C union: the table lists the members `m`, whose names C code uses directly) or
/// `=> named { m: T, … }` (a named C member of anonymous type: the table lists the member and
/// its members as `field.m`).
macro_rules! ci_struct {
    (@cname $name:ident) => { stringify!($name) };
    (@cname $name:ident $cname:literal) => { $cname };

    (@fields $name:ident [$($acc:tt)*]) => { &[$($acc)*] };
    (@fields $name:ident [$($acc:tt)*]
        $field:ident : $ty:ty => anon { $($sub:ident : $subty:ty),* } ; $($rest:tt)*
    ) => {
        ci_struct!(@fields $name [$($acc)* $(
            $crate::FieldInfo {
                name: $crate::macros::c_name(stringify!($sub)),
                offset: ::core::mem::offset_of!($name, $field.$sub),
                size: ::core::mem::size_of::<$subty>(),
            },
        )*] $($rest)*)
    };
    (@fields $name:ident [$($acc:tt)*]
        $field:ident : $ty:ty => named { $($sub:ident : $subty:ty),* } ; $($rest:tt)*
    ) => {
        ci_struct!(@fields $name [$($acc)*
            $crate::FieldInfo {
                name: $crate::macros::c_name(stringify!($field)),
                offset: ::core::mem::offset_of!($name, $field),
                size: ::core::mem::size_of::<$ty>(),
            },
            $(
                $crate::FieldInfo {
                    name: concat!(stringify!($field), ".", stringify!($sub)),
                    offset: ::core::mem::offset_of!($name, $field.$sub),
                    size: ::core::mem::size_of::<$subty>(),
                },
            )*
        ] $($rest)*)
    };
    (@fields $name:ident [$($acc:tt)*] $field:ident : $ty:ty ; $($rest:tt)*) => {
        ci_struct!(@fields $name [$($acc)*
            $crate::FieldInfo {
                name: $crate::macros::c_name(stringify!($field)),
                offset: ::core::mem::offset_of!($name, $field),
                size: ::core::mem::size_of::<$ty>(),
            },
        ] $($rest)*)
    };

    (@item struct $(#[$meta:meta])* $name:ident { $($body:tt)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy)]
        pub struct $name { $($body)* }
    };
    (@item union $(#[$meta:meta])* $name:ident { $($body:tt)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy)]
        pub union $name { $($body)* }
    };

    (
        $(#[$meta:meta])*
        pub $kind:ident $name:ident [$(c $cname:literal,)? size $size:literal, align $align:literal] {
            $(
                $(#[$fmeta:meta])*
                [$off:literal] pub $field:ident : $ty:ty
                $( => $mode:ident { $( $sub:ident : $subty:ty ),* $(,)? } )?
            ),* $(,)?
        }
    ) => {
        ci_struct!(@item $kind $(#[$meta])* $name { $( $(#[$fmeta])* pub $field: $ty, )* });

        impl $name {
            /// Layout computed from this definition (C names), for tools and tests.
            pub const INFO: $crate::StructInfo = $crate::StructInfo {
                name: ci_struct!(@cname $name $($cname)?),
                size: ::core::mem::size_of::<$name>(),
                align: ::core::mem::align_of::<$name>(),
                fields: ci_struct!(@fields $name []
                    $( $field : $ty $( => $mode { $($sub : $subty),* } )? ; )*
                ),
            };

            /// The all-zero value (what C code gets after zeroing the memory).
            pub const fn zeroed() -> Self {
                // SAFETY: every field type is `ZeroValid` (checked below at compile time):
                // integers, arrays of them, raw pointers, `Option` of function pointers, or
                // structs/unions declared by this macro, recursively. For all of them the
                // all-zero bit pattern is a valid value (0, null, `None`).
                unsafe { ::core::mem::zeroed() }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::zeroed()
            }
        }

        impl $crate::macros::ZeroValid for $name {}

        const _: () = {
            const fn zero_valid<T: $crate::macros::ZeroValid>() {}
            $( zero_valid::<$ty>(); )*
        };

        #[cfg(target_pointer_width = "64")]
        const _: () = {
            assert!(::core::mem::size_of::<$name>() == $size);
            assert!(::core::mem::align_of::<$name>() == $align);
            $( assert!(::core::mem::offset_of!($name, $field) == $off); )*
        };
    };
}

/// Declares a type C code only ever handles through a pointer (its definition is private to
/// the other side): zero-sized, not constructible, not `Send`/`Sync`/`Unpin`.
macro_rules! ci_opaque {
    ($( $(#[$meta:meta])* $name:ident; )*) => {$(
        $(#[$meta])*
        #[repr(C)]
        pub struct $name {
            _opaque: [u8; 0],
            _marker: ::core::marker::PhantomData<(*mut u8, ::core::marker::PhantomPinned)>,
        }
    )*};
}

/// Declares groups of named constants. Each constant gets its group's documentation plus its
/// own (if any); all of them land in `$list` (name and value widened to `u64`) in order.
macro_rules! ci_consts {
    (@one [$(#[$gmeta:meta])*] $(#[$meta:meta])* $name:ident : $ty:ty = $value:expr) => {
        $(#[$gmeta])*
        $(#[$meta])*
        pub const $name: $ty = $value;
    };
    (@group $gmetas:tt $( $(#[$meta:meta])* $name:ident : $ty:ty = $value:expr; )*) => {
        $( ci_consts!(@one $gmetas $(#[$meta])* $name : $ty = $value); )*
    };
    (
        $(#[$lmeta:meta])* $vis:vis const $list:ident;
        $( $(#[$gmeta:meta])* group { $( $(#[$meta:meta])* $name:ident : $ty:ty = $value:expr; )* } )*
    ) => {
        $( ci_consts!(@group [$(#[$gmeta])*] $( $(#[$meta])* $name : $ty = $value; )*); )*

        $(#[$lmeta])*
        $vis const $list: &[$crate::ConstInfo] = &[$($(
            $crate::ConstInfo { name: stringify!($name), value: $name as u64 },
        )*)*];
    };
}
