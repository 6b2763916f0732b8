//! `pingpong` prints rdma-core's pingpong examples' lines. Shapes only, no timing.

mod common;

/// `wvharness pingpong args…`.
fn run(args: &[&str]) -> (bool, String, String) {
    common::run(&[&["pingpong"], args].concat())
}

fn check_shape(out: &str, size: u64, iters: u64, ud: bool) {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    for (line, side) in lines[..2]
        .iter()
        .zip(["  local address:  LID 0x", "  remote address: LID 0x"])
    {
        assert!(line.starts_with(side), "{line}");
        let rest = &line[side.len()..];
        // LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s (ud_pingpong's local line: `PSN 0x%06x:
        // GID`).
        let colon = ud && side.contains("local");
        let (head, gid) = rest
            .split_once(if colon { ": GID " } else { ", GID " })
            .unwrap_or_else(|| panic!("{line}"));
        assert!(!gid.is_empty(), "{line}");
        let parts: Vec<&str> = head.split(", ").collect();
        assert_eq!(parts.len(), 3, "{line}");
        assert_eq!(parts[0], "0000", "a RoCE port has no LID: {line}");
        assert!(
            parts[1].starts_with("QPN 0x") && parts[1].len() == 12,
            "{line}"
        );
        assert!(
            parts[2].starts_with("PSN 0x") && parts[2].len() == 12,
            "{line}"
        );
    }
    let bytes = size * iters * 2;
    assert!(
        lines[2].starts_with(&format!("{bytes} bytes in ")) && lines[2].ends_with(" Mbit/sec"),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].starts_with(&format!("{iters} iters in ")) && lines[3].ends_with(" usec/iter"),
        "{}",
        lines[3]
    );
}

#[test]
fn rc_uc_ud_with_and_without_events_and_srq() {
    for (args, size, ud) in [
        (&["-n", "50", "-g", "0"][..], 4096, false),
        (&["-n", "50", "-g", "0", "-e", "-c"], 4096, false),
        (
            &["-n", "50", "-g", "0", "-C", "UC", "-s", "100"],
            100,
            false,
        ),
        (&["-n", "50", "-g", "0", "-C", "UD"], 1024, true),
        (
            &["-n", "50", "-g", "0", "-C", "UD", "-s", "4096", "-c"],
            4096,
            true,
        ),
        (
            &["-n", "50", "-g", "0", "-C", "UD", "-e", "--srq", "-s", "64"],
            64,
            true,
        ),
        (&["-n", "50", "-g", "0", "--srq", "-r", "4"], 4096, false),
    ] {
        let (ok, out, err) = run(args);
        assert!(ok, "{args:?}: {err}");
        check_shape(&out, size, 50, ud);
        assert!(!out.contains("invalid data"), "{args:?}: {out}");
    }
}

#[test]
fn without_a_gid_index_the_gid_is_zero_and_roce_refuses_the_path() {
    // As rdma-core's examples: no -g, GID `::`; on a RoCE port the connection then fails
    // (RC/UC at RTR, UD at the address handle), after the address lines are printed.
    for (conn, ud, want) in [
        ("RC", false, "RTR"),
        ("UC", false, "RTR"),
        ("UD", true, "Failed to create AH"),
    ] {
        let (ok, out, err) = run(&["-n", "5", "-C", conn]);
        assert!(!ok, "{conn}: {out}");
        assert!(err.contains(want), "{conn}: {err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{conn}: {out}");
        let sep = if ud { ": GID ::" } else { ", GID ::" };
        assert!(lines[0].ends_with(sep), "{}", lines[0]);
        assert!(lines[1].ends_with(", GID ::"), "{}", lines[1]);
    }
}

#[test]
fn bad_sizes_are_errors() {
    // ud_pingpong's check against the port's active MTU (4096 on the soft HCA).
    let (ok, _, err) = run(&["-g", "0", "-C", "UD", "-s", "5000"]);
    assert!(
        !ok && err.contains("Requested size larger than port MTU (4096)"),
        "{err}"
    );
}

#[test]
fn sends_go_inline_only_when_the_granted_inline_size_covers_them() {
    // The examples create the QP without asking for inline data and read back what the device
    // granted; with one SGE the soft HCA's send WQE has room for 16 bytes.
    let json = |size: &str, conn: &str| -> serde_json::Value {
        let (ok, out, err) = run(&["-n", "5", "-g", "0", "-C", conn, "-s", size, "--json"]);
        assert!(ok, "{size} {conn}: {err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    for conn in ["RC", "UD"] {
        let small = json("16", conn);
        assert_eq!(small["max_inline_data"], 16, "{conn}: {small}");
        assert_eq!(small["inline"], true, "{conn}: {small}");
        let above = json("32", conn);
        assert_eq!(above["max_inline_data"], 16, "{conn}: {above}");
        assert_eq!(above["inline"], false, "{conn}: {above}");
    }
}
