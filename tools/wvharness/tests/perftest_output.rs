//! The benchmark commands' output parses with perftest's column headers. Shapes only: no
//! timing is asserted (performance never fails a test).

use std::process::Command;

const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
const BW_HEADER: &str =
    " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]";
const BW_HEADER_G: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wvharness"))
        .args(args)
        .output()
        .expect("run wvharness");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The numeric rows after `header`, each split into fields.
fn rows(stdout: &str, header: &str) -> Vec<Vec<f64>> {
    let lines: Vec<&str> = stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == header)
        .unwrap_or_else(|| panic!("no header line {header:?} in:\n{stdout}"));
    lines[at + 1..]
        .iter()
        .take_while(|l| !l.starts_with("----"))
        .map(|l| {
            l.split_whitespace()
                .map(|f| {
                    f.parse::<f64>()
                        .unwrap_or_else(|_| panic!("non-numeric field {f:?} in {l:?}"))
                })
                .collect()
        })
        .collect()
}

#[test]
fn latency_tests_print_perftest_rows() {
    for test in ["send_lat", "write_lat", "read_lat"] {
        let (ok, out, err) = run(&[test, "-n", "50"]);
        assert!(ok, "{test}: {err}");
        let r = rows(&out, LAT_HEADER);
        assert_eq!(r.len(), 1, "{test}");
        assert_eq!(r[0].len(), 9, "{test}: {:?}", r[0]);
        assert_eq!((r[0][0], r[0][1]), (2.0, 50.0), "{test}");
    }
}

#[test]
fn bandwidth_tests_print_perftest_rows() {
    for test in ["send_bw", "write_bw", "read_bw"] {
        let (ok, out, err) = run(&[test, "-n", "50"]);
        assert!(ok, "{test}: {err}");
        let r = rows(&out, BW_HEADER);
        assert_eq!(r.len(), 1, "{test}");
        assert_eq!(r[0].len(), 5, "{test}: {:?}", r[0]);
        assert_eq!((r[0][0], r[0][1]), (65536.0, 50.0), "{test}");
    }
    let (ok, out, err) = run(&["write_bw", "-n", "20", "--report_gbits", "-N"]);
    assert!(ok, "{err}");
    assert_eq!(rows(&out, BW_HEADER_G)[0][2], 0.0, "-N prints no peak");
}

#[test]
fn other_transports_and_events_run() {
    for args in [
        &["send_lat", "-n", "20", "-c", "UD"][..],
        &["send_bw", "-n", "100", "-c", "UC", "-s", "512"],
        &["send_lat", "-n", "20", "-e"],
        &["read_lat", "-n", "20", "-e"],
        &["send_bw", "-n", "100", "-c", "UD", "-s", "256", "-e"],
    ] {
        let (ok, out, err) = run(args);
        assert!(ok, "{args:?}: {err}");
        assert!(
            out.lines().any(|l| l == LAT_HEADER || l == BW_HEADER),
            "{args:?}:\n{out}"
        );
    }
}

#[test]
fn all_sizes_sweep_2_to_8_mib() {
    let (ok, out, err) = run(&["write_bw", "-a", "-n", "20"]);
    assert!(ok, "{err}");
    let sizes: Vec<u64> = rows(&out, BW_HEADER).iter().map(|r| r[0] as u64).collect();
    let want: Vec<u64> = (1..=23).map(|i| 1u64 << i).collect();
    assert_eq!(sizes, want);
    let (ok, out, err) = run(&["send_lat", "-a", "-n", "10"]);
    assert!(ok, "{err}");
    assert_eq!(rows(&out, LAT_HEADER).len(), 23);
}

#[test]
fn json_has_the_same_numbers() {
    let (ok, out, err) = run(&["send_lat", "-n", "20", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["results"][0]["bytes"], 2);
    assert_eq!(v["results"][0]["iterations"], 20);
    assert!(v["results"][0]["t_typical"].is_number());
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    for (args, want) in [
        (
            &["write_lat", "-c", "UD"][..],
            "UD connection only possible in SEND verb",
        ),
        (
            &["write_bw", "-e"],
            "Events feature not available on WRITE verb",
        ),
        (&["send_lat", "-s", "0"], "Size must be between"),
        (&["send_lat", "--device", "7"], "no device with index 7"),
        (&["send_bw", "--device", "0xdead"], "no device with GUID"),
        (&["send_lat", "--transport", "windows"], "windows transport"),
        (&["pingpong", "-s", "0"], "size must be at least 1 byte"),
    ] {
        let (ok, _, err) = run(args);
        assert!(!ok, "{args:?} should fail");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
