//! `pingpong` prints rc_pingpong's lines. Shapes only, no timing.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wvharness"))
        .arg("pingpong")
        .args(args)
        .output()
        .expect("run wvharness");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn check_shape(out: &str, size: u64, iters: u64) {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    for (line, side) in lines[..2]
        .iter()
        .zip(["  local address:  LID 0x", "  remote address: LID 0x"])
    {
        assert!(line.starts_with(side), "{line}");
        let rest = &line[side.len()..];
        // LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID …
        let parts: Vec<&str> = rest.split(", ").collect();
        assert_eq!(parts.len(), 4, "{line}");
        assert_eq!(parts[0].len(), 4, "{line}");
        assert!(
            parts[1].starts_with("QPN 0x") && parts[1].len() == 12,
            "{line}"
        );
        assert!(
            parts[2].starts_with("PSN 0x") && parts[2].len() == 12,
            "{line}"
        );
        assert!(parts[3].starts_with("GID "), "{line}");
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
    for (args, size) in [
        (&["-n", "50"][..], 4096),
        (&["-n", "50", "-e"], 4096),
        (&["-n", "50", "-c", "UC", "-s", "100"], 100),
        (&["-n", "50", "-c", "UD"], 1024),
        (&["-n", "50", "-c", "UD", "-e", "--srq", "-s", "64"], 64),
        (&["-n", "50", "--srq", "-r", "4"], 4096),
    ] {
        let (ok, out, err) = run(args);
        assert!(ok, "{args:?}: {err}");
        check_shape(&out, size, 50);
    }
}

#[test]
fn bad_sizes_are_errors() {
    let (ok, _, err) = run(&["-c", "UD", "-s", "5000"]);
    assert!(!ok && err.contains("larger than port MTU"), "{err}");
}
