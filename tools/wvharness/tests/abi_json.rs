//! Runs `wvharness abi --json` and checks it against tables written from the spec, independent
//! of wv-abi's definitions; and `abi --lower --json` against a few numbers of wv-ci's lower
//! interfaces (the full check is wv-ci's own layout test).

mod common;

use common::{json, wvharness};

use serde_json::Value;

/// §2.2 codes in index order.
const CODES: [(&str, u32); 53] = [
    ("WV_IOCTL_GUID_QUERY", 0x003BE004),
    ("WV_IOCTL_LIBRARY_QUERY", 0x003BE008),
    ("WV_IOCTL_DEVICE_OPEN", 0x003BE00C),
    ("WV_IOCTL_DEVICE_CLOSE", 0x003BE010),
    ("WV_IOCTL_DEVICE_QUERY", 0x003BE014),
    ("WV_IOCTL_DEVICE_PORT_QUERY", 0x003BE018),
    ("WV_IOCTL_DEVICE_GID_QUERY", 0x003BE01C),
    ("WV_IOCTL_DEVICE_PKEY_QUERY", 0x003BE020),
    ("WV_IOCTL_DEVICE_NOTIFY", 0x003BE024),
    ("WV_IOCTL_DEVICE_CANCEL", 0x003BE028),
    ("WV_IOCTL_PD_ALLOCATE", 0x003BE02C),
    ("WV_IOCTL_PD_DEALLOCATE", 0x003BE030),
    ("WV_IOCTL_MEMORY_REGISTER", 0x003BE034),
    ("WV_IOCTL_MEMORY_DEREGISTER", 0x003BE038),
    ("WV_IOCTL_MW_ALLOCATE", 0x003BE03C),
    ("WV_IOCTL_MW_DEALLOCATE", 0x003BE040),
    ("WV_IOCTL_AH_CREATE", 0x003BE044),
    ("WV_IOCTL_AH_DESTROY", 0x003BE048),
    ("WV_IOCTL_CQ_CREATE", 0x003BE04C),
    ("WV_IOCTL_CQ_DESTROY", 0x003BE050),
    ("WV_IOCTL_CQ_RESIZE", 0x003BE054),
    ("WV_IOCTL_CQ_NOTIFY", 0x003BE058),
    ("WV_IOCTL_CQ_CANCEL", 0x003BE05C),
    ("WV_IOCTL_SRQ_CREATE", 0x003BE060),
    ("WV_IOCTL_SRQ_DESTROY", 0x003BE064),
    ("WV_IOCTL_SRQ_QUERY", 0x003BE068),
    ("WV_IOCTL_SRQ_MODIFY", 0x003BE06C),
    ("WV_IOCTL_SRQ_NOTIFY", 0x003BE070),
    ("WV_IOCTL_SRQ_CANCEL", 0x003BE074),
    ("WV_IOCTL_QP_CREATE", 0x003BE078),
    ("WV_IOCTL_QP_DESTROY", 0x003BE07C),
    ("WV_IOCTL_QP_QUERY", 0x003BE080),
    ("WV_IOCTL_QP_MODIFY", 0x003BE084),
    ("WV_IOCTL_QP_ATTACH", 0x003BE088),
    ("WV_IOCTL_QP_DETACH", 0x003BE08C),
    ("WV_IOCTL_QP_CANCEL", 0x003BE090),
    ("WV_IOCTL_EP_CREATE", 0x003BE094),
    ("WV_IOCTL_EP_DESTROY", 0x003BE098),
    ("WV_IOCTL_EP_MODIFY", 0x003BE09C),
    ("WV_IOCTL_EP_BIND", 0x003BE0A0),
    ("WV_IOCTL_EP_REJECT", 0x003BE0A4),
    ("WV_IOCTL_EP_CONNECT", 0x003BE0A8),
    ("WV_IOCTL_EP_ACCEPT", 0x003BE0AC),
    ("WV_IOCTL_EP_DISCONNECT", 0x003BE0B0),
    ("WV_IOCTL_EP_DISCONNECT_NOTIFY", 0x003BE0B4),
    ("WV_IOCTL_EP_QUERY", 0x003BE0B8),
    ("WV_IOCTL_EP_LOOKUP", 0x003BE0BC),
    ("WV_IOCTL_EP_MULTICAST_JOIN", 0x003BE0C0),
    ("WV_IOCTL_EP_MULTICAST_LEAVE", 0x003BE0C4),
    ("WV_IOCTL_EP_CANCEL", 0x003BE0C8),
    ("WV_IOCTL_EP_LISTEN", 0x003BE0CC),
    ("WV_IOCTL_EP_GET_REQUEST", 0x003BE0D0),
    ("WV_IOCTL_PD_CANCEL", 0x003BE0D4),
];

/// The hand-transcribed §2.5 layouts (shared with wv-abi's own tests).
const SPEC_LAYOUT: &str = include_str!("../../../crates/wv-abi/tests/spec_layout.txt");

fn abi_json() -> Value {
    json(&["abi", "--json"])
}

/// The value of constant `name` in the ABI description.
fn constant(json: &Value, name: &str) -> u64 {
    json["constants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("missing {name}"))["value"]
        .as_u64()
        .unwrap()
}

#[test]
fn ioctls() {
    let json = abi_json();
    let ioctls = json["ioctls"].as_array().unwrap();
    assert_eq!(ioctls.len(), 53);
    for (i, (obj, (name, code))) in ioctls.iter().zip(CODES).enumerate() {
        assert_eq!(obj["name"], *name);
        assert_eq!(obj["code"], format!("0x{code:08X}"));
        assert_eq!(obj["index"], i + 1);
    }
    assert_eq!(ioctls[32]["completion"], "pends"); // QP_MODIFY runs on a work item here
}

#[test]
fn structs() {
    let json = abi_json();
    let structs = json["structs"].as_array().unwrap();
    let mut seen = 0;
    let mut current: Option<&Value> = None;
    let mut field = 0;
    for line in SPEC_LAYOUT.lines() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let p: Vec<&str> = line.split_whitespace().collect();
        let (a, b): (u64, u64) = (p[1].parse().unwrap(), p[2].parse().unwrap());
        if line.starts_with(' ') {
            let s = current.unwrap();
            let f = &s["fields"][field];
            assert_eq!(f["name"], p[0], "{}", s["name"]);
            assert_eq!(f["offset"], a, "{}.{}", s["name"], p[0]);
            assert_eq!(f["size"], b, "{}.{}", s["name"], p[0]);
            field += 1;
        } else {
            if let Some(s) = current {
                assert_eq!(
                    s["fields"].as_array().unwrap().len(),
                    field,
                    "{}",
                    s["name"]
                );
            }
            let s = structs
                .iter()
                .find(|s| s["name"] == p[0])
                .unwrap_or_else(|| panic!("missing struct {}", p[0]));
            assert_eq!(s["size"], a, "{}", p[0]);
            assert_eq!(s["align"], b, "{}", p[0]);
            current = Some(s);
            field = 0;
            seen += 1;
        }
    }
    assert_eq!(seen, structs.len());
}

#[test]
fn constants() {
    let json = abi_json();
    let get = |name: &str| constant(&json, name);
    for (name, value) in [
        ("WV_CQ_ERROR", 0),
        ("WV_CQ_NEXT_COMPLETION", 1),
        ("WV_CQ_SOLICITED", 2),
        ("WV_MAX_LIB_NAME", 32),
        ("WV_IO_RESIZE_MAX_WR", 0x1),
        ("WV_IO_BATCH_NOTIFY_CQ", 0x4000),
        ("WV_DEVICE_INFINIBAND", 1),
        ("WV_IO_ATOMIC_NODE", 2),
        ("WV_IO_PORT_ACTIVEDEFER", 5),
        ("WV_IO_EVENT_PARTITION", 0x10),
        ("WV_IO_QP_MEMORY_MANAGEMENT", 2),
        ("WV_IO_QP_STATE_SQERROR", 5),
        ("WV_IO_QP_ATTR_PKEY_INDEX", 0x8000),
        ("WV_IO_EP_OPTION_ROUTE", 1),
        ("WV_IO_EP_TYPE_CONNECT", 0x106),
    ] {
        assert_eq!(get(name), value, "{name}");
    }
}

#[test]
fn table_mode_runs() {
    let out = wvharness(&["abi"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("WV_IOCTL_PD_CANCEL"));
    assert!(text.contains("0x003BE0D4"));
    assert!(text.contains("PortCabilityFlags"));
}

#[test]
fn lower_interfaces() {
    let json = json(&["abi", "--lower", "--json"]);
    let mut top: Vec<&String> = json.as_object().unwrap().keys().collect();
    top.sort();
    assert_eq!(top, ["constants", "structs"]);
    let structs = json["structs"].as_array().unwrap();
    // x64 sizes from a C compiler over WinOFED's headers; the two interfaces and their tables
    // come first.
    for (i, (name, size, fields)) in [
        ("RDMA_INTERFACE_VERBS", 640, 3),
        ("ci_interface_t", 600, 73),
        ("INFINIBAND_INTERFACE_CM", 208, 2),
        ("iba_cm_interface", 176, 22),
    ]
    .into_iter()
    .enumerate()
    {
        let s = &structs[i];
        assert_eq!(s["name"], name);
        assert_eq!(s["size"], size, "{name}");
        assert_eq!(s["align"], 8, "{name}");
        assert_eq!(s["fields"].as_array().unwrap().len(), fields, "{name}");
    }
    // Same schema as `abi --json`.
    let verbs = &structs[0]["fields"][2];
    assert_eq!(verbs["name"], "post_event");
    assert_eq!(verbs["offset"], 632);
    assert_eq!(verbs["size"], 8);
    let query_ca = structs[1]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "query_ca")
        .expect("query_ca");
    assert_eq!(
        (&query_ca["offset"], &query_ca["size"]),
        (&96.into(), &8.into())
    );
    let get = |name: &str| constant(&json, name);
    assert_eq!(get("RDMA_INTERFACE_VERBS_VERSION"), 0x0207);
    assert_eq!(get("VERBS_VERSION"), 0x2_0007);
    assert_eq!(get("INFINIBAND_INTERFACE_CM_VERSION"), 0x0101);
    assert_eq!(get("MAX_LIB_NAME"), 32);
    assert_eq!(get("IB_QPS_RTS"), 8);
}

#[test]
fn lower_table_mode_runs() {
    let out = wvharness(&["abi", "--lower"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ci_interface_t  size 600  align 8"));
    assert!(text.contains("ndi_modify_qp"));
    assert!(text.contains("IB_SUCCESS"));
}
