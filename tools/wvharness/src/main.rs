//! wvharness: the WinVerbs test harness.
fn main() {}
