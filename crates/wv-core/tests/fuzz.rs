//! The proptest twin of the cargo-fuzz target `fuzz/fuzz_targets/ioctl_sequence.rs`: the same
//! script interpreter (`common/script.rs`) on random byte strings, and on every seed of the
//! fuzz corpus kept in the repository (`fuzz/corpus/ioctl_sequence/`), so `cargo test` replays
//! them. Whatever the bytes: no panic, every request ends exactly once, nothing leaks.
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

#[path = "common/script.rs"]
mod script;

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_are_handled(data in prop::collection::vec(any::<u8>(), 0..600)) {
        script::run(&data);
    }
}

#[test]
fn the_seed_corpus_replays_cleanly() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/ioctl_sequence");
    let mut seeds = 0;
    let mut ran = script::Ran::default();
    for entry in std::fs::read_dir(&dir).expect("the seed corpus") {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        let one = script::run(&data);
        ran.requests += one.requests;
        ran.cancels += one.cancels;
        ran.closes += one.closes;
        ran.removals += one.removals;
        seeds += 1;
    }
    assert!(seeds >= 8, "the seed corpus is missing ({seeds} seeds)");
    assert!(ran.closes > 0 && ran.removals > 0 && ran.cancels > 0);
}
