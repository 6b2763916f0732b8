//! Runs `wvharness check` (in-process transport) as a user would and checks its report: exit
//! status 0, one `PASS  name: detail` line per scenario, the summary line last; `--json` and
//! `--filter` agree with it; bad input is a clear error, not a panic.

mod common;

use common::wvharness;

use serde_json::Value;

#[test]
fn every_scenario_passes() {
    every_scenario_passes_with(&["check"]);
}

/// The soft HCAs with InfiniBand ports: WinOFED's examples address their peer by LID there.
#[test]
fn every_scenario_passes_on_infiniband_ports() {
    let stdout = every_scenario_passes_with(&["check", "--link-layer", "ib"]);
    assert!(
        stdout.contains("the peer by LID, as on an InfiniBand subnet"),
        "{stdout}"
    );
    assert!(
        stdout.contains("soft HCAs with InfiniBand ports"),
        "{stdout}"
    );
}

fn every_scenario_passes_with(args: &[&str]) -> String {
    let out = wvharness(args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(out.status.success(), "exit {:?}:\n{stdout}", out.status);
    let (summary, results) = lines.split_last().expect("output");
    assert!(
        results.len() >= 30,
        "only {} scenarios:\n{stdout}",
        results.len()
    );
    let mut passed = 0;
    for line in results {
        let (tag, rest) = line.split_at(6);
        assert_eq!(tag, "PASS  ", "not a PASS line: {line}\n{stdout}");
        passed += 1;
        assert!(
            rest.split_once(": ").is_some_and(|(_, d)| !d.is_empty()),
            "no detail: {line}"
        );
    }
    assert_eq!(*summary, format!("{passed} passed, 0 failed"));
    assert!(
        results
            .iter()
            .any(|l| l.starts_with("PASS  host-verifier: "))
    );
    stdout
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
