//! Runs the `wvharness` binary the way a user would, for the tests of its commands.
#![allow(dead_code)]

use std::process::{Command, Output};

/// `wvharness args…`, run to its end.
pub fn wvharness(args: &[&str]) -> Output {
    wvharness_with(args, &[])
}

/// `wvharness args…` with `env`'s variables set, run to its end.
pub fn wvharness_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wvharness"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run wvharness")
}

/// `wvharness args…`: whether it succeeded, its stdout and its stderr.
pub fn run(args: &[&str]) -> (bool, String, String) {
    let out = wvharness(args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `wvharness args…`, which must succeed and print JSON: the JSON.
pub fn json(args: &[&str]) -> serde_json::Value {
    json_with(args, &[])
}

/// [`json`] with `env`'s variables set.
pub fn json_with(args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let out = wvharness_with(args, env);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}
