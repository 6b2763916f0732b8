//! Enums whose variants stand for fixed wire values (an ABI byte, a frame field).

/// Declares a fieldless `#[repr(int)]` enum and the `const fn` that finds the variant for a
/// wire value (`None` for a value no variant has), so each value is written once, in the
/// variant list, instead of again in a hand-written `match` that can drift from it.
///
/// ```
/// wv_hal::wire_enum! {
///     /// A colour on the wire.
///     #[derive(Clone, Copy, Debug, PartialEq, Eq)]
///     pub enum Colour: u8 {
///         /// Red.
///         Red = 1,
///         /// Blue.
///         Blue = 4,
///     }
///     /// The colour of a wire byte.
///     fn from_wire;
/// }
/// assert_eq!(Colour::from_wire(4), Some(Colour::Blue));
/// assert_eq!(Colour::from_wire(2), None);
/// ```
#[macro_export]
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident: $repr:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $value:literal, )+
        }
        $(#[$from_meta:meta])*
        fn $from:ident;
    ) => {
        $(#[$meta])*
        #[repr($repr)]
        $vis enum $name {
            $( $(#[$variant_meta])* $variant = $value, )+
        }

        impl $name {
            $(#[$from_meta])*
            $vis const fn $from(value: $repr) -> Option<Self> {
                match value {
                    $( $value => Some($name::$variant), )+
                    _ => None,
                }
            }
        }
    };
}
