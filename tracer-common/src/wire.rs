//! The wire's small enums, each declared once with its numbers.

/// Declares a `#[repr(u16)]` enum carried as a number on the ring (a header's `func`, say): its
/// variants and numbers, `ALL` in declaration order, and `from_u16`. Attributes (docs, serde derives
/// behind the `user` feature) pass through to the enum and its variants.
macro_rules! wire_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $number:literal,)*
    }) => {
        $(#[$meta])*
        #[repr(u16)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
        $vis enum $name {
            $($(#[$vmeta])* $variant = $number,)*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &[Self] = &[$(Self::$variant),*];

            /// The value numbered `v`, if there is one.
            pub const fn from_u16(v: u16) -> Option<Self> {
                match v {
                    $($number => Some(Self::$variant),)*
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use wire_enum;
