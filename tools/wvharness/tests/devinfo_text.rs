//! `wvharness devinfo -v` against a sample of Debian's `ibv_devinfo -v` (rdma-core 44),
//! captured on this project's soft HCAs: Debian's tool ran on the libibverbs over WinVerbs
//! (`tools/ibverbs/build`) through the device service, two default soft HCAs, one RoCE port
//! each (`tests/data/ibv_devinfo-v.txt`).

use std::process::Command;

/// The sample's lines with the values that depend on which process brought the soft HCAs up
/// (the MAC, hence the node and system image GUIDs and the MAC-based GID) replaced by a
/// placeholder. `board_id` is left out: ibv_devinfo reads it from sysfs, and no WinVerbs
/// IOCTL carries one (see the devinfo module).
fn normalised(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with("\tboard_id:"))
        .map(|l| {
            let identity = l.starts_with("\tnode_guid:")
                || l.starts_with("\tsys_image_guid:")
                || (l.starts_with("\t\t\tGID[") && l.contains("\tfe80:"));
            match l.rfind('\t') {
                Some(at) if identity => format!("{}<identity>", &l[..=at]),
                _ => l.to_string(),
            }
        })
        .collect()
}

#[test]
fn verbose_text_is_ibv_devinfos_line_for_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_wvharness"))
        .args(["devinfo", "-v"])
        .output()
        .expect("run wvharness");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = normalised(&String::from_utf8_lossy(&out.stdout));
    let real = normalised(include_str!("data/ibv_devinfo-v.txt"));
    for (i, (o, r)) in ours.iter().zip(&real).enumerate() {
        assert_eq!(o, r, "line {} differs", i + 1);
    }
    assert_eq!(ours.len(), real.len(), "line count");
}
