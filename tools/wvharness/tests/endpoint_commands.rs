//! `rping` prints rping's lines and verifies the data; `conn` reports the connection rate and
//! its phases. Shapes only, no timing.

mod common;

use common::run;

use serde_json::Value;

#[test]
fn rping_pings_and_disconnects() {
    let (ok, out, err) = run(&["rping", "-C", "100"]);
    assert!(ok, "{err}");
    assert_eq!(out, "", "nothing on stdout without -v");
    assert_eq!(err.trim(), "client DISCONNECT EVENT...");

    let (ok, out, err) = run(&["rping", "-c", "-v", "-C", "3"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr",
            "ping data: rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrs",
            "ping data: rdma-ping-2: CDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrst",
        ]
    );

    // The server's view, over IPv6, with a size of its own, on the direct lower edge.
    let (ok, out, err) = run(&[
        "rping",
        "-s",
        "-v",
        "-C",
        "2",
        "-S",
        "30",
        "-a",
        "fd57:5600::1",
        "-I",
        "fd57:5600::1:1",
        "-p",
        "9999",
        "--lower",
        "direct",
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "server ping data: rdma-ping-0: ABCDEFGHIJKLMNOP",
            "server ping data: rdma-ping-1: BCDEFGHIJKLMNOPQ",
        ]
    );
    // rping's server reports the disconnect, then the wait it ended (state DISCONNECTED).
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [
            "server DISCONNECT EVENT...",
            "wait for RDMA_READ_ADV state 10",
        ]
    );
}

#[test]
fn rping_refuses_bad_sizes_and_unknown_addresses() {
    let (ok, _, err) = run(&["rping", "-C", "1", "-S", "10"]);
    assert!(
        !ok && err.contains("Invalid size 10 (valid range is 26 to 65536)"),
        "{err}"
    );
    let (ok, _, err) = run(&["rping", "-C", "1", "-a", "10.9.9.9"]);
    assert!(!ok && err.contains("rdma_"), "{err}");
}

#[test]
fn conn_reports_rate_and_phases() {
    // The README's command, as it is written there.
    let (ok, out, err) = run(&["conn", "-t", "2", "-n", "1000", "--json"]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["threads"], 2);
    assert_eq!(v["connections"], 1000);
    assert!(v["connections_per_sec"].as_f64().unwrap() > 0.0);
    for phase in ["setup", "connect", "establish", "disconnect", "total"] {
        let p50 = v[phase]["p50_us"].as_f64().unwrap();
        let p99 = v[phase]["p99_us"].as_f64().unwrap();
        assert!(p50 > 0.0 && p99 >= p50, "{phase}: {p50} {p99}");
    }

    let (ok, out, err) = run(&["conn", "-n", "5"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("5 connections on 1 thread(s) in "),
        "{out}"
    );
    assert!(lines[0].ends_with(" connections/s"), "{out}");
    assert_eq!(lines.len(), 7, "{out}");
}
