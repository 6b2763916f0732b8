//! ABI conformance: IOCTL codes, struct layouts and decoder buffer rules against tables written
//! from the spec (tests/common, tests/spec_layout.txt), not from the crate's own definitions.

mod common;

use common::{Extra, TABLE, expected, spec_structs, vendor_of};
use wv_abi::consts::CONSTANTS;
use wv_abi::io::STRUCTS;
use wv_abi::ioctl::{self, Completion, Ioctl};
use wv_abi::{NtStatus, Request, Vendor, WV_IO_CONNECT_PARAM, WV_IO_EP_ATTRIBUTES, decode};

#[test]
fn ioctl_codes_match_the_spec_table() {
    assert_eq!(Ioctl::ALL.len(), TABLE.len());
    for (i, (ioctl, row)) in Ioctl::ALL.iter().zip(TABLE.iter()).enumerate() {
        let index = i as u32 + 1;
        assert_eq!(ioctl.code(), row.code, "{}", row.name);
        assert_eq!(ioctl.name(), row.name);
        assert_eq!(ioctl.index(), index);
        assert_eq!(*ioctl as u32, index);
        assert_eq!(ioctl.function(), 0x800 + index);
        assert_eq!(Ioctl::from_code(row.code), Some(*ioctl));
    }
    assert_eq!(ioctl::WV_IOCTL_GUID_QUERY, 0x003B_E004);
    assert_eq!(ioctl::WV_IOCTL_QP_MODIFY, 0x003B_E084);
    assert_eq!(ioctl::WV_IOCTL_EP_GET_REQUEST, 0x003B_E0D0);
    assert_eq!(ioctl::WV_IOCTL_PD_CANCEL, 0x003B_E0D4);
    assert_eq!(ioctl::wv_ioctl(ioctl::WV_IOCTL_MIN), 0x003B_E000);
    assert_eq!(ioctl::wv_ioctl(ioctl::WV_IOCTL_MAX), 0x003B_E0D8);
}

#[test]
fn unknown_codes() {
    for code in [
        0x003B_E000, // MIN sentinel
        0x003B_E0D8, // MAX sentinel
        0x003B_E0DC,
        0x003B_E005, // METHOD_IN_DIRECT
        0x003B_E007, // METHOD_NEITHER
        0x003B_2004, // FILE_ANY_ACCESS
        0x003B_6004, // FILE_READ_DATA only
        0x0022_E004, // FILE_DEVICE_UNKNOWN
        0x803B_E004, // custom-device bit
        0,
        u32::MAX,
    ] {
        assert_eq!(Ioctl::from_code(code), None, "{code:#010X}");
        assert_eq!(
            decode(code, &[0; 256], 256),
            Err(NtStatus::PROCEDURE_NOT_FOUND)
        );
    }
}

#[test]
fn completion_column() {
    use Completion::*;
    let pends = [
        Ioctl::CqNotify,
        Ioctl::SrqNotify,
        Ioctl::QpModify,
        Ioctl::EpConnect,
        Ioctl::EpAccept,
        Ioctl::EpGetRequest,
    ];
    let either = [
        Ioctl::DeviceNotify,
        Ioctl::EpDisconnect,
        Ioctl::EpDisconnectNotify,
    ];
    for ioctl in Ioctl::ALL {
        let want = if pends.contains(&ioctl) {
            Pends
        } else if either.contains(&ioctl) {
            Either
        } else {
            Inline
        };
        assert_eq!(ioctl.completion(), want, "{}", ioctl.name());
    }
}

#[test]
fn struct_layouts_match_the_spec() {
    let spec = spec_structs();
    assert_eq!(spec.len(), STRUCTS.len());
    for s in &spec {
        let info = STRUCTS
            .iter()
            .find(|i| i.name == s.name)
            .unwrap_or_else(|| panic!("missing {}", s.name));
        assert_eq!((info.size, info.align), (s.size, s.align), "{}", s.name);
        let fields: Vec<(String, usize, usize)> = info
            .fields
            .iter()
            .map(|f| (f.name.to_string(), f.offset, f.size))
            .collect();
        assert_eq!(fields, s.fields, "{}", s.name);
    }
}

#[test]
fn constants_present() {
    let get = |name: &str| CONSTANTS.iter().find(|c| c.name == name).map(|c| c.value);
    assert_eq!(get("WV_CQ_ERROR"), Some(0));
    assert_eq!(get("WV_CQ_NEXT_COMPLETION"), Some(1));
    assert_eq!(get("WV_CQ_SOLICITED"), Some(2));
    assert_eq!(get("WV_IO_BATCH_NOTIFY_CQ"), Some(0x4000));
    assert_eq!(get("WV_IO_QP_ATTR_RNR_RETRY_COUNT"), Some(0x80000));
    assert_eq!(get("WV_IO_EP_TYPE_DATAGRAM"), Some(0x111));
    assert_eq!(get("WV_MAX_LIB_NAME"), Some(32));
    assert_eq!(get("WV_IO_EVENT_MANAGEMENT"), Some(0x20));
    assert_eq!(get("WV_IO_QP_STATE_ERROR"), Some(6));
    assert_eq!(get("WV_ACCESS_REMOTE_WRITE"), Some(0xA));
}

#[test]
fn status_display_and_debug() {
    assert_eq!(
        NtStatus::NOT_FOUND.to_string(),
        "STATUS_NOT_FOUND (0xC0000225)"
    );
    assert_eq!(format!("{:?}", NtStatus::CANCELLED), "STATUS_CANCELLED");
    assert_eq!(
        format!("{:?}", NtStatus(0xC0DE_0001)),
        "NtStatus(0xC0DE0001)"
    );
    assert_eq!(NtStatus(0xC0DE_0001).to_string(), "NTSTATUS 0xC0DE0001");
}

/// An input that passes the extra checks, so only the lengths decide.
fn valid_input(row: &common::Row, len: usize) -> Vec<u8> {
    let mut input = vec![0u8; len];
    if row.extra == Extra::EpModifyRoute && len >= 16 {
        input[12..16].copy_from_slice(&1u32.to_ne_bytes());
    }
    input
}

#[test]
fn decode_minimums_exact_short_and_long() {
    for row in &TABLE {
        let min_in = match row.extra {
            Extra::EpModifyRoute => 80,
            _ => row.min_in,
        };
        // Exactly the minimum.
        let input = valid_input(row, min_in);
        let req = decode(row.code, &input, row.min_out)
            .unwrap_or_else(|e| panic!("{} at minimum: {e}", row.name));
        assert_eq!(req.ioctl().code(), row.code);

        // One byte short of the input or the output.
        if min_in > 0 {
            let input = valid_input(row, min_in - 1);
            assert_eq!(
                decode(row.code, &input, row.min_out),
                Err(NtStatus::BUFFER_TOO_SMALL),
                "{} input short",
                row.name
            );
        }
        if row.min_out > 0 {
            let input = valid_input(row, min_in);
            assert_eq!(
                decode(row.code, &input, row.min_out - 1),
                Err(NtStatus::BUFFER_TOO_SMALL),
                "{} output short",
                row.name
            );
        }

        // Longer, with vendor bytes after the fixed part.
        let mut input = valid_input(row, min_in + 40);
        for (i, b) in input[min_in..].iter_mut().enumerate() {
            *b = i as u8 + 1;
        }
        let req = decode(row.code, &input, row.min_out + 24).unwrap();
        if let Some(fixed) = row.vendor_fixed {
            let vendor = vendor_of(&req).expect(row.name);
            assert_eq!(vendor.input_len, input.len() - fixed, "{}", row.name);
            assert_eq!(vendor.output_len, 24, "{}", row.name);
        } else {
            assert!(vendor_of(&req).is_none(), "{}", row.name);
        }
    }
}

#[test]
fn decode_reads_fields_from_unaligned_input() {
    // An odd offset into the backing buffer: the decoder must not assume alignment.
    let mut backing = [0u8; 1 + 16 + 5];
    let input = &mut backing[1..];
    input[..8].copy_from_slice(&0x0102_0304_0506_0708u64.to_ne_bytes());
    input[8..12].copy_from_slice(&0xAABB_CCDDu32.to_ne_bytes());
    input[12..16].copy_from_slice(&7u32.to_ne_bytes());
    input[16..].copy_from_slice(b"hello");
    match decode(ioctl::WV_IOCTL_CQ_CREATE, input, 16 + 9).unwrap() {
        Request::CqCreate { id, vendor } => {
            assert_eq!(id.Id, 0x0102_0304_0506_0708);
            assert_eq!(id.VerbInfo, 0xAABB_CCDD);
            assert_eq!(id.Data, 7);
            assert_eq!(
                vendor,
                Vendor {
                    input_len: 5,
                    output_len: 9
                }
            );
        }
        other => panic!("{other:?}"),
    }
    match decode(ioctl::WV_IOCTL_LIBRARY_QUERY, &input[..8], 28).unwrap() {
        Request::LibraryQuery { guid, output_len } => {
            assert_eq!(guid, 0x0102_0304_0506_0708);
            assert_eq!(output_len, 28);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn cq_notify_from_batch_notify_is_too_small() {
    // Bug 7.1-a: BatchNotify sends only the 8-byte id.
    assert_eq!(
        decode(ioctl::WV_IOCTL_CQ_NOTIFY, &[1, 0, 0, 0, 0, 0, 0, 0], 0),
        Err(NtStatus::BUFFER_TOO_SMALL)
    );
}

#[test]
fn ep_modify_checks_option_before_length() {
    let mut input = [0u8; 80];
    input[12..16].copy_from_slice(&2u32.to_ne_bytes());
    assert_eq!(
        decode(ioctl::WV_IOCTL_EP_MODIFY, &input[..16], 0),
        Err(NtStatus::INVALID_PARAMETER)
    );
    input[12..16].copy_from_slice(&1u32.to_ne_bytes());
    assert_eq!(
        decode(ioctl::WV_IOCTL_EP_MODIFY, &input[..79], 0),
        Err(NtStatus::BUFFER_TOO_SMALL)
    );
    input[16..24].copy_from_slice(&0x1122u64.to_ne_bytes());
    match decode(ioctl::WV_IOCTL_EP_MODIFY, &input, 0).unwrap() {
        Request::EpModify { id, route } => {
            assert_eq!(id.Data, 1);
            assert_eq!(route.service_id, 0x1122);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn connect_and_accept_private_data_length() {
    for (code, len, at) in [
        (ioctl::WV_IOCTL_EP_CONNECT, 128, 66),
        (ioctl::WV_IOCTL_EP_ACCEPT, 96, 34),
    ] {
        let mut input = vec![0u8; len];
        input[at] = 56;
        assert!(decode(code, &input, 0).is_ok());
        input[at] = 57;
        assert_eq!(decode(code, &input, 0), Err(NtStatus::INVALID_BUFFER_SIZE));
        // The length check still comes first.
        assert_eq!(
            decode(code, &input[..len - 1], 0),
            Err(NtStatus::BUFFER_TOO_SMALL)
        );
    }
}

#[test]
fn ep_reject_hands_on_private_data() {
    let mut input = [0u8; 20];
    input[16..].copy_from_slice(b"nope");
    match decode(ioctl::WV_IOCTL_EP_REJECT, &input, 0).unwrap() {
        Request::EpReject {
            private_data_len, ..
        } => assert_eq!(private_data_len, 4),
        other => panic!("{other:?}"),
    }
}

#[test]
fn oracle_agrees_with_itself_on_the_table() {
    // Sanity of the oracle used by the property test: every row accepts its own minimum.
    for row in &TABLE {
        let len = if row.extra == Extra::EpModifyRoute {
            80
        } else {
            row.min_in
        };
        assert_eq!(
            expected(row.code, &valid_input(row, len), row.min_out),
            Ok(()),
            "{}",
            row.name
        );
    }
}

#[test]
fn union_accessors() {
    let mut attr = WV_IO_EP_ATTRIBUTES::default();
    let mut param = WV_IO_CONNECT_PARAM {
        DataLength: 3,
        ..Default::default()
    };
    param.Data[..3].copy_from_slice(b"abc");
    attr.set_connect(&param);
    assert_eq!(attr.connect(), param);
    attr.set_backlog(0x55);
    assert_eq!(attr.backlog(), 0x55);
    // Like a C union, the bytes after Backlog still hold the old Connect tail.
    assert_eq!(attr.connect().Data[..3], *b"abc");

    let mut addr = wv_abi::WV_IO_SOCKADDR_DATA::default();
    addr.set_sin(&wv_abi::WV_IO_SOCKADDR_IN {
        SinFamily: 2,
        SinPort: 0x5000u16.to_be(),
        SinAddr: u32::from_be_bytes([10, 0, 0, 1]).to_be(),
        SinZero: [0; 8],
    });
    assert_eq!(addr.family(), 2);
    assert_eq!(addr.sa().SaFamily, 2);
    assert_eq!(u16::from_be(addr.sin().SinPort), 0x5000);
    assert_eq!(&addr.SockAddr[4..8], &[10, 0, 0, 1]);
    let six = wv_abi::WV_IO_SOCKADDR_IN6 {
        Sin6Family: 23,
        Sin6ScopeId: 9,
        ..Default::default()
    };
    addr.set_sin6(&six);
    assert_eq!(addr.sin6(), six);
}

#[test]
fn qp_modify_names_its_qp_and_leaves_the_attributes_in_place() {
    let mut input = [0u8; 192];
    input[..8].copy_from_slice(&0x77u64.to_ne_bytes());
    assert_eq!(
        decode(ioctl::WV_IOCTL_QP_MODIFY, &input, 0),
        Ok(Request::QpModify {
            id: 0x77,
            output_len: 0
        })
    );
    assert_eq!(
        decode(ioctl::WV_IOCTL_QP_MODIFY, &input[..191], 0),
        Err(NtStatus::BUFFER_TOO_SMALL)
    );
}
