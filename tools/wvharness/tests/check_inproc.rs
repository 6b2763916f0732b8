//! Runs `wvharness check` (in-process transport) as a user would and checks its report: exit
//! status 0, one `PASS  name: detail` line per scenario, the summary line last; `--json` and
//! `--filter` agree with it; bad input is a clear error, not a panic.

use std::process::Command;

use serde_json::Value;

fn wvharness(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_wvharness"))
        .args(args)
        .output()
        .expect("run wvharness")
}

/// Scenarios a transport may legitimately skip: the in-process `File` has no hook yet to
/// deliver an IOCTL after CloseHandle.
const MAY_SKIP: &[&str] = &["status-file-closed"];

/// Driver defects the suite finds only when a race goes the wrong way, listed so this test
/// stays deterministic while the output still reports them to a person. Remove an entry once
/// the driver is fixed.
///
/// * `qp-modify-cancel`: wv-core's QP_CANCEL empties the modify queue one request at a time
///   (`notify::complete_all`) while the QP's drainer work item also takes requests out of it,
///   so a modify queued after one that QP_CANCEL cancelled can still run (about 1 run in 20).
///   The spec's pattern (§3.7) flushes under the queue lock, serialised against the consumer.
const KNOWN_RACES: &[(&str, &str)] = &[("qp-modify-cancel", "not FIFO")];

#[test]
fn every_scenario_passes() {
    let out = wvharness(&["check"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    let (summary, results) = lines.split_last().expect("output");
    assert!(
        results.len() >= 30,
        "only {} scenarios:\n{stdout}",
        results.len()
    );
    let mut passed = 0;
    let mut skipped = 0;
    let mut known = 0;
    for line in results {
        let (tag, rest) = line.split_at(6);
        let name = rest.split(": ").next().unwrap();
        let known_race = KNOWN_RACES
            .iter()
            .any(|(n, why)| *n == name && rest.contains(why));
        match tag {
            "PASS  " => passed += 1,
            "SKIP  " if MAY_SKIP.contains(&name) => skipped += 1,
            "FAIL  " if known_race => {
                eprintln!("known driver race reported: {line}");
                known += 1;
            }
            _ => panic!("not a PASS line: {line}\n{stdout}"),
        }
        assert!(
            rest.split_once(": ").is_some_and(|(_, d)| !d.is_empty()),
            "no detail: {line}"
        );
    }
    let want = if skipped == 0 {
        format!("{passed} passed, {known} failed")
    } else {
        format!("{passed} passed, {known} failed, {skipped} skipped")
    };
    assert_eq!(*summary, want);
    // Exit status 0 exactly when nothing failed.
    assert_eq!(out.status.success(), known == 0, "exit {:?}", out.status);
    assert!(
        results
            .iter()
            .any(|l| l.starts_with("PASS  host-verifier: "))
    );
}

#[test]
fn json_and_filter() {
    let out = wvharness(&["check", "--json", "--filter", "notify-"]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let arr = v.as_array().expect("array");
    assert!(arr.len() >= 8, "{arr:?}");
    for r in arr {
        let name = r["name"].as_str().unwrap();
        assert!(
            name.contains("notify-") || name == "host-verifier",
            "{name} does not match the filter"
        );
        assert_eq!(r["passed"], true, "{r}");
        assert!(!r["detail"].as_str().unwrap().is_empty());
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let out = wvharness(&["check", "--filter", "no-such-scenario"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no scenario matches"));
    let out = wvharness(&["check", "--device", "9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no device with index 9"));
    #[cfg(not(windows))]
    {
        let out = wvharness(&["check", "--transport", "windows"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("only in Windows builds"));
    }
}
