//! Oracles written from the spec and the OFW handlers, independent of the crate's own tables.
#![allow(dead_code)]

use wv_abi::{NtStatus, Request, Vendor};

/// Extra input checks an OFW handler makes before any lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extra {
    None,
    /// EP_MODIFY: `Data` (bytes 12..16) must be 1, then the input must hold 16 + 64 bytes.
    EpModifyRoute,
    /// EP_CONNECT / EP_ACCEPT: the `DataLength` byte at this offset must be ≤ 56.
    DataLength(usize),
}

/// One row: code, C name, input minimum, output minimum, UMV fixed size, extra check.
pub struct Row {
    pub code: u32,
    pub name: &'static str,
    pub min_in: usize,
    pub min_out: usize,
    pub vendor_fixed: Option<usize>,
    pub extra: Extra,
}

const fn row(code: u32, name: &'static str, min_in: usize, min_out: usize) -> Row {
    Row {
        code,
        name,
        min_in,
        min_out,
        vendor_fixed: None,
        extra: Extra::None,
    }
}

const fn umv(code: u32, name: &'static str, fixed: usize) -> Row {
    Row {
        code,
        name,
        min_in: fixed,
        min_out: fixed,
        vendor_fixed: Some(fixed),
        extra: Extra::None,
    }
}

const fn extra(code: u32, name: &'static str, min_in: usize, extra: Extra) -> Row {
    Row {
        code,
        name,
        min_in,
        min_out: 0,
        vendor_fixed: None,
        extra,
    }
}

/// Spec §2.2 codes with the minimums read from each OFW handler.
pub const TABLE: [Row; 53] = [
    row(0x003BE004, "WV_IOCTL_GUID_QUERY", 0, 16),
    row(0x003BE008, "WV_IOCTL_LIBRARY_QUERY", 8, 1),
    umv(0x003BE00C, "WV_IOCTL_DEVICE_OPEN", 16),
    row(0x003BE010, "WV_IOCTL_DEVICE_CLOSE", 8, 0),
    row(0x003BE014, "WV_IOCTL_DEVICE_QUERY", 8, 152),
    row(0x003BE018, "WV_IOCTL_DEVICE_PORT_QUERY", 16, 52),
    row(0x003BE01C, "WV_IOCTL_DEVICE_GID_QUERY", 16, 16),
    row(0x003BE020, "WV_IOCTL_DEVICE_PKEY_QUERY", 16, 2),
    row(0x003BE024, "WV_IOCTL_DEVICE_NOTIFY", 16, 4),
    row(0x003BE028, "WV_IOCTL_DEVICE_CANCEL", 8, 0),
    umv(0x003BE02C, "WV_IOCTL_PD_ALLOCATE", 16),
    row(0x003BE030, "WV_IOCTL_PD_DEALLOCATE", 8, 0),
    row(0x003BE034, "WV_IOCTL_MEMORY_REGISTER", 32, 8),
    row(0x003BE038, "WV_IOCTL_MEMORY_DEREGISTER", 16, 0),
    umv(0x003BE03C, "WV_IOCTL_MW_ALLOCATE", 16),
    row(0x003BE040, "WV_IOCTL_MW_DEALLOCATE", 8, 0),
    umv(0x003BE044, "WV_IOCTL_AH_CREATE", 64),
    row(0x003BE048, "WV_IOCTL_AH_DESTROY", 8, 0),
    umv(0x003BE04C, "WV_IOCTL_CQ_CREATE", 16),
    row(0x003BE050, "WV_IOCTL_CQ_DESTROY", 8, 0),
    umv(0x003BE054, "WV_IOCTL_CQ_RESIZE", 16),
    row(0x003BE058, "WV_IOCTL_CQ_NOTIFY", 16, 0),
    row(0x003BE05C, "WV_IOCTL_CQ_CANCEL", 8, 0),
    umv(0x003BE060, "WV_IOCTL_SRQ_CREATE", 32),
    row(0x003BE064, "WV_IOCTL_SRQ_DESTROY", 8, 0),
    umv(0x003BE068, "WV_IOCTL_SRQ_QUERY", 32),
    umv(0x003BE06C, "WV_IOCTL_SRQ_MODIFY", 32),
    row(0x003BE070, "WV_IOCTL_SRQ_NOTIFY", 8, 0),
    row(0x003BE074, "WV_IOCTL_SRQ_CANCEL", 8, 0),
    umv(0x003BE078, "WV_IOCTL_QP_CREATE", 72),
    row(0x003BE07C, "WV_IOCTL_QP_DESTROY", 8, 0),
    row(0x003BE080, "WV_IOCTL_QP_QUERY", 8, 192),
    row(0x003BE084, "WV_IOCTL_QP_MODIFY", 192, 0),
    row(0x003BE088, "WV_IOCTL_QP_ATTACH", 32, 0),
    row(0x003BE08C, "WV_IOCTL_QP_DETACH", 32, 0),
    row(0x003BE090, "WV_IOCTL_QP_CANCEL", 8, 0),
    row(0x003BE094, "WV_IOCTL_EP_CREATE", 8, 8),
    row(0x003BE098, "WV_IOCTL_EP_DESTROY", 8, 0),
    extra(0x003BE09C, "WV_IOCTL_EP_MODIFY", 16, Extra::EpModifyRoute),
    row(0x003BE0A0, "WV_IOCTL_EP_BIND", 56, 56),
    row(0x003BE0A4, "WV_IOCTL_EP_REJECT", 16, 0),
    extra(
        0x003BE0A8,
        "WV_IOCTL_EP_CONNECT",
        128,
        Extra::DataLength(48 + 18),
    ),
    extra(
        0x003BE0AC,
        "WV_IOCTL_EP_ACCEPT",
        96,
        Extra::DataLength(16 + 18),
    ),
    row(0x003BE0B0, "WV_IOCTL_EP_DISCONNECT", 16, 0),
    row(0x003BE0B4, "WV_IOCTL_EP_DISCONNECT_NOTIFY", 8, 0),
    row(0x003BE0B8, "WV_IOCTL_EP_QUERY", 8, 160),
    row(0x003BE0BC, "WV_IOCTL_EP_LOOKUP", 0, 0),
    row(0x003BE0C0, "WV_IOCTL_EP_MULTICAST_JOIN", 0, 0),
    row(0x003BE0C4, "WV_IOCTL_EP_MULTICAST_LEAVE", 0, 0),
    row(0x003BE0C8, "WV_IOCTL_EP_CANCEL", 8, 0),
    row(0x003BE0CC, "WV_IOCTL_EP_LISTEN", 16, 0),
    row(0x003BE0D0, "WV_IOCTL_EP_GET_REQUEST", 16, 0),
    row(0x003BE0D4, "WV_IOCTL_PD_CANCEL", 8, 0),
];

pub fn row_for(code: u32) -> Option<&'static Row> {
    TABLE.iter().find(|r| r.code == code)
}

/// The status OFW completes with before any object lookup, or `Ok` when it would go on.
pub fn expected(code: u32, input: &[u8], output_len: usize) -> Result<(), NtStatus> {
    let Some(row) = row_for(code) else {
        return Err(NtStatus(0xC000_007A));
    };
    if input.len() < row.min_in || output_len < row.min_out {
        return Err(NtStatus(0xC000_0023));
    }
    match row.extra {
        Extra::None => Ok(()),
        Extra::EpModifyRoute => {
            let data = u32::from_le_bytes(input[12..16].try_into().unwrap());
            if data != 1 {
                Err(NtStatus(0xC000_000D))
            } else if input.len() < 80 {
                Err(NtStatus(0xC000_0023))
            } else {
                Ok(())
            }
        }
        Extra::DataLength(at) => {
            if input[at] > 56 {
                Err(NtStatus(0xC000_0206))
            } else {
                Ok(())
            }
        }
    }
}

/// A struct layout from the hand-written spec table.
pub struct SpecStruct {
    pub name: String,
    pub size: usize,
    pub align: usize,
    pub fields: Vec<(String, usize, usize)>,
}

pub const SPEC_LAYOUT: &str = include_str!("../spec_layout.txt");

pub fn spec_structs() -> Vec<SpecStruct> {
    let mut out: Vec<SpecStruct> = Vec::new();
    for line in SPEC_LAYOUT.lines() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        let nums = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
        if line.starts_with(' ') {
            out.last_mut()
                .unwrap()
                .fields
                .push((parts[0].to_string(), nums.0, nums.1));
        } else {
            out.push(SpecStruct {
                name: parts[0].to_string(),
                size: nums.0,
                align: nums.1,
                fields: Vec::new(),
            });
        }
    }
    out
}

/// The vendor (UVP) part of a decoded request, for the requests that carry one.
pub fn vendor_of(req: &Request) -> Option<Vendor> {
    match *req {
        Request::DeviceOpen { vendor, .. }
        | Request::PdAllocate { vendor, .. }
        | Request::MwAllocate { vendor, .. }
        | Request::AhCreate { vendor, .. }
        | Request::CqCreate { vendor, .. }
        | Request::CqResize { vendor, .. }
        | Request::SrqCreate { vendor, .. }
        | Request::SrqQuery { vendor, .. }
        | Request::SrqModify { vendor, .. }
        | Request::QpCreate { vendor, .. } => Some(vendor),
        _ => None,
    }
}
