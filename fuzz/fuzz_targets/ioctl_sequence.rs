//! Feeds byte strings, read as sequences of raw IOCTLs, lower-device events, CancelIoEx, the
//! last handle's close and a new open (up to 8 per input), device removal and re-arrival, to
//! the driver core on the deterministic host model. Whatever the bytes, nothing may panic, every request must end
//! exactly once, and nothing may leak: the host verifier checks all of it when the I/O manager
//! is dropped (driver unload), and a violation panics, which libFuzzer reports.
//!
//! The interpreter is shared with the proptest twin that runs under `cargo test`
//! (`crates/wv-core/tests/fuzz.rs`), which also replays the seed corpus kept in
//! `fuzz/corpus/ioctl_sequence/`.
#![no_main]

#[path = "../../crates/wv-core/tests/common/script.rs"]
mod script;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    script::run(data);
});
