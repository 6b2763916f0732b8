//! The default run (no command) ends with a verdict line. `--quick` keeps it short; the
//! verdict itself depends on the conformance suite, so only its shape is checked here.

mod common;

use common::wvharness;

#[test]
fn default_run_prints_summary_and_verdict() {
    let out = wvharness(&["--quick"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("VERDICT: PASS") || last.starts_with("VERDICT: FAIL"),
        "{stdout}"
    );
    // The exit status agrees with the verdict.
    assert_eq!(
        out.status.success(),
        last.starts_with("VERDICT: PASS"),
        "{stdout}"
    );
    for what in [
        "cache-line ping-pong",
        "futex wake",
        "memcpy",
        "QP_MODIFY inline",
        "TCP loopback connect+accept+close",
        "endpoint scenarios passed",
    ] {
        assert!(stdout.contains(what), "{what} missing:\n{stdout}");
    }
}

#[test]
fn default_run_json_has_the_verdict() {
    let out = wvharness(&["--quick", "--json", "--no-check"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        v["verdict"]
            .as_str()
            .unwrap_or_default()
            .starts_with("VERDICT: ")
    );
    let comparisons = v["comparisons"].as_array().expect("comparisons");
    assert_eq!(comparisons.len(), 5);
    let rate = &comparisons[4];
    assert!(
        rate["what"]
            .as_str()
            .unwrap_or_default()
            .starts_with("conn -t 1")
    );
    assert_eq!(rate["unit"], "/s");
    assert!(rate["value"].as_f64().unwrap_or_default() > 0.0);
}
