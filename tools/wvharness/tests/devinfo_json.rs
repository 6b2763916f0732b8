//! `wvharness devinfo` on the in-process stack: the JSON describes both soft HCAs as the spec
//! and the soft HCA define them; the text looks like ibv_devinfo's; bad input is a clear error.

mod common;

use common::wvharness;

use serde_json::Value;

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
        // A RoCE port has no LID.
        assert_eq!(p["lid"], 0);
        let gid = p["gids"][0]["gid"].as_str().unwrap();
        assert!(gid.starts_with("fe80::"), "{gid}");
        assert_eq!(p["gids"][0]["kind"], "MAC");
        assert_eq!(p["pkeys"][0], 0xffff);
    }
    assert_ne!(devs[0]["node_guid"], devs[1]["node_guid"]);
}

/// The lines ibv_devinfo prints without `-v` (`print_hca_cap`), in its order and with its
/// tabs, per device and per port.
const DEFAULT_DEVICE_LINES: [&str; 9] = [
    "hca_id:\t",
    "\ttransport:\t\t\t",
    "\tfw_ver:\t\t\t\t",
    "\tnode_guid:\t\t\t",
    "\tsys_image_guid:\t\t\t",
    "\tvendor_id:\t\t\t0x",
    "\tvendor_part_id:\t\t\t",
    "\thw_ver:\t\t\t\t0x",
    "\tphys_port_cnt:\t\t\t",
];
const DEFAULT_PORT_LINES: [&str; 8] = [
    "\t\tport:\t",
    "\t\t\tstate:\t\t\t",
    "\t\t\tmax_mtu:\t\t",
    "\t\t\tactive_mtu:\t\t",
    "\t\t\tsm_lid:\t\t\t",
    "\t\t\tport_lid:\t\t",
    "\t\t\tport_lmc:\t\t0x",
    "\t\t\tlink_layer:\t\t",
];

#[test]
fn default_output_is_ibv_devinfos_without_v() {
    let out = wvharness(&["devinfo", "--device", "1"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let want: Vec<&str> = DEFAULT_DEVICE_LINES
        .iter()
        .chain(DEFAULT_PORT_LINES.iter())
        .copied()
        .collect();
    assert_eq!(lines.len(), want.len() + 1, "{text}");
    for (line, prefix) in lines.iter().zip(&want) {
        assert!(line.starts_with(prefix), "{line:?} is not {prefix:?}…");
    }
    // The device name as hca_id, a RoCE port without a LID, the blank line after a port.
    assert_eq!(lines[0], "hca_id:\tsofthca1");
    assert_eq!(lines[1], "\ttransport:\t\t\tInfiniBand (0)");
    assert_eq!(lines[14], "\t\t\tport_lid:\t\t0");
    assert_eq!(lines[16], "\t\t\tlink_layer:\t\tEthernet");
    assert_eq!(lines[17], "");
    // No -v lines.
    for v_only in ["max_qp:", "GID[", "active_width", "library"] {
        assert!(!text.contains(v_only), "{v_only} without -v:\n{text}");
    }
}

#[test]
fn verbose_output_is_ibv_devinfo_v() {
    let out = wvharness(&["devinfo", "-v", "--device", "1"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "hca_id:\tsofthca1\n",
        "\tmax_qp:\t\t\t\t",
        "\tmax_mr_size:\t\t\t0x",
        "\tmax_sge_rd:\t\t\t",
        "\tmax_qp_rd_atom:\t\t\t16\n",
        "\tmax_ee_rd_atom:\t\t\t0\n",
        "\tmax_raw_ethy_qp:\t\t0\n",
        // The multicast limits the soft HCA enforces.
        "\tmax_mcast_grp:\t\t\t1024\n",
        "\tmax_mcast_qp_attach:\t\t64\n",
        "\tmax_total_mcast_qp_attach:\t65536\n",
        "\tlocal_ca_ack_delay:\t\t15\n",
        "\t\tport:\t1\n",
        "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
        "\t\t\tmax_mtu:\t\t4096 (5)\n",
        "\t\t\tport_cap_flags2:\t0x0000\n",
        "\t\t\tmax_vl_num:\t\t1 (1)\n",
        "\t\t\tactive_width:\t\t1X (1)\n",
        "\t\t\tactive_speed:\t\t2.5 Gbps (1)\n",
        "\t\t\tphys_state:\t\tLINK_UP (5)\n",
        // ibv_devinfo's RoCE v1 GID: eight groups of four hex digits, the type after it.
        "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0057:56ff:fe00:0002, RoCE v1\n",
        // The soft HCA's atomics and SRQ resize, as ibv_devinfo -v shows them.
        "\tatomic_cap:\t\t\tATOMIC_HCA (1)\n",
        "\tdevice_cap_flags:\t\t0x00007400\n\t\t\t\t\tPORT_ACTIVE_EVENT\n",
        "\t\t\t\t\tSRQ_RESIZE\n",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    assert_eq!(text.matches("hca_id:").count(), 1);
    // Not ibv_devinfo's: no library or P_Key lines.
    assert!(
        !text.contains("library") && !text.contains("\t\t\tpkeys:"),
        "{text}"
    );
}

#[test]
fn unknown_device_is_a_clear_error() {
    let out = wvharness(&["devinfo", "--device", "5"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no device with index 5"), "{err}");
}
