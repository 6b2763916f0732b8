//! `wvharness devinfo` on the in-process stack: the JSON describes both soft HCAs as the spec
//! and the soft HCA define them; the text looks like ibv_devinfo's; bad input is a clear error.

use std::process::Command;

use serde_json::Value;

fn wvharness(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_wvharness"))
        .args(args)
        .output()
        .expect("run wvharness")
}

#[test]
fn json_lists_both_devices() {
    let out = wvharness(&["devinfo", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let devs = v.as_array().expect("array of devices");
    assert_eq!(devs.len(), 2);
    for (i, d) in devs.iter().enumerate() {
        assert_eq!(d["index"], i);
        assert_eq!(d["library"], "softhcau");
        let guid = d["node_guid"].as_str().unwrap();
        // ibv_devinfo form: four groups of four hex digits.
        assert_eq!(guid.len(), 19, "{guid}");
        assert_eq!(guid.matches(':').count(), 3, "{guid}");
        assert_eq!(d["transport"], "InfiniBand");
        assert_eq!(d["limits"]["atomic_cap"], "ATOMIC_HCA (1)");
        let caps = d["device_caps"].as_array().unwrap();
        assert!(caps.iter().any(|c| c == "SRQ_RESIZE"), "{caps:?}");
        for limit in [
            "max_qp",
            "max_qp_wr",
            "max_sge",
            "max_cq",
            "max_cqe",
            "max_mr",
            "max_pd",
        ] {
            assert!(d["limits"][limit].as_u64().unwrap() > 0, "{limit}");
        }
        let ports = d["ports"].as_array().unwrap();
        assert!(!ports.is_empty());
        let p = &ports[0];
        assert_eq!(p["port"], 1);
        assert_eq!(p["state"], "PORT_ACTIVE (4)");
        assert_eq!(p["link_layer"], "Ethernet");
        assert_eq!(p["lid"], i + 1);
        let gid = p["gids"][0]["gid"].as_str().unwrap();
        assert!(gid.starts_with("fe80::"), "{gid}");
        assert_eq!(p["gids"][0]["kind"], "MAC");
        assert_eq!(p["pkeys"][0], 0xffff);
    }
    assert_ne!(devs[0]["node_guid"], devs[1]["node_guid"]);
}

#[test]
fn text_looks_like_ibv_devinfo() {
    let out = wvharness(&["devinfo", "-v", "--device", "1"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "hca_id:\t1\n",
        "\tlibrary:\t\t\tsofthcau\n",
        "\tmax_qp:\t\t\t\t",
        "\tmax_mr_size:\t\t\t0x",
        "\t\tport:\t1\n",
        "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
        "\t\t\tGID[  0]:\t\tfe80::",
        // The soft HCA's atomics and SRQ resize, as ibv_devinfo -v shows them.
        "\tatomic_cap:\t\t\tATOMIC_HCA (1)\n",
        "\tdevice_cap_flags:\t\t0x00007400\n\t\t\t\t\tPORT_ACTIVE_EVENT\n",
        "\t\t\t\t\tSRQ_RESIZE\n",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    assert_eq!(text.matches("hca_id:").count(), 1);
}

#[test]
fn unknown_device_is_a_clear_error() {
    let out = wvharness(&["devinfo", "--device", "5"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no device with index 5"), "{err}");
}
