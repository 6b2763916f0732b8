//! Counted UTF-16 strings (`UNICODE_STRING`) over static text, built at compile time.

use wdk_sys::{UNICODE_STRING, USHORT};

/// UTF-16 of an ASCII string, at compile time (`N` is its length).
pub const fn ascii_to_utf16<const N: usize>(text: &str) -> [u16; N] {
    let bytes = text.as_bytes();
    assert!(bytes.len() == N);
    let mut utf16 = [0; N];
    let mut i = 0;
    while i < N {
        assert!(bytes[i].is_ascii());
        utf16[i] = bytes[i] as u16;
        i += 1;
    }
    utf16
}

/// A `UNICODE_STRING` over static UTF-16 (not NUL-terminated); the kernel only reads through it.
pub const fn unicode_string(text: &'static [u16]) -> UNICODE_STRING {
    let bytes = text.len() * 2;
    assert!(bytes <= USHORT::MAX as usize);
    #[allow(
        clippy::cast_possible_truncation,
        reason = "checked against USHORT::MAX on the line above"
    )]
    let bytes = bytes as USHORT;
    UNICODE_STRING {
        Length: bytes,
        MaximumLength: bytes,
        Buffer: text.as_ptr().cast_mut(),
    }
}
