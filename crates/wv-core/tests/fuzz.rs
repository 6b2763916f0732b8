//! Random IOCTL bytes never panic, never leak, and every request completes exactly once
//! (the verifier checks the last two at teardown).
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

mod common;

use common::*;
use proptest::prelude::*;
use wv_abi::ioctl::*;

/// A request: an index into the WinVerbs code range (a few past both ends), input bytes whose
/// leading ids are small (so lookups sometimes hit), and an output length.
fn request() -> impl Strategy<Value = (u32, Vec<u8>, usize)> {
    (
        0u32..58,
        prop::collection::vec(any::<u8>(), 0..220),
        0usize..220,
        any::<u8>(),
    )
        .prop_map(|(index, mut input, out_len, small)| {
            if input.len() >= 8 {
                input[..8].copy_from_slice(&u64::from(small % 4).to_ne_bytes());
            }
            (wv_ioctl(WV_IOCTL_MIN + index), input, out_len)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_ioctls_are_handled(requests in prop::collection::vec(request(), 1..40)) {
        let fx = Fx::new();
        let f = fx.open();
        // Give lookups something to find.
        let _ = qp_rts(&fx, &f);
        let mut pending = Vec::new();
        for (code, input, out_len) in &requests {
            let io = f.device_io_control(*code, input, *out_len);
            if io.pending() {
                pending.push(io);
            }
        }
        fx.run();
        for io in &pending {
            f.cancel_io_ex(io);
        }
        drop(f);
        fx.run();
        for io in &pending {
            prop_assert!(io.is_complete());
        }
    }
}
