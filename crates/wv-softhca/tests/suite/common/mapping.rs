//! Anonymous memory of this process, standing in for a client's memory or a service's shared
//! file in the tests that reach memory the way a served device does.

/// A fresh anonymous private read-write mapping of `len` bytes; the caller decides when (or
/// whether) it is unmapped.
pub fn anonymous_mapping(len: usize) -> *mut u8 {
    anonymous_mapping_with(len, libc::PROT_READ | libc::PROT_WRITE)
}

/// [`anonymous_mapping`] with the protection `prot` (`PROT_*`).
pub fn anonymous_mapping_with(len: usize, prot: i32) -> *mut u8 {
    // SAFETY: a fresh anonymous mapping; no pointer is passed in.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    p.cast()
}
