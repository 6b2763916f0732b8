//! `wvharness devinfo`: the RDMA devices below the driver, like `ibv_devinfo`.
//!
//! Everything comes from raw IOCTLs (GUID_QUERY, LIBRARY_QUERY, DEVICE_OPEN without vendor
//! bytes, DEVICE_QUERY, DEVICE_PORT_QUERY, DEVICE_GID_QUERY, DEVICE_PKEY_QUERY), so it needs no
//! user-mode provider and works on any transport. The text is ibv_devinfo's (rdma-core 44): the
//! device and its ports' basic lines by default; with `-v` the device limits, the block
//! ibv_devinfo takes from `ibv_query_device_ex` (ODP, timestamps, TSO, RSS, packet pacing, tag
//! matching, completion vectors), the ports' extended lines and the GID tables. GUIDs print as
//! `0257:5600:0000:0001`, RoCE v1 GIDs as eight groups of four hex digits with `, RoCE v1` on an
//! Ethernet port. One line of ibv_devinfo's is not printed: `board_id`, which it reads from the
//! device's sysfs directory; no WinVerbs IOCTL carries a board id (the libibverbs over WinVerbs
//! answers that file with a fixed text of its own). `--json` reports the same values (and the
//! GIDs in IPv6 notation too).

use std::io::{self, Write};
use std::net::Ipv6Addr;
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_DEVICE_ATTRIBUTES, WV_IO_ID, WV_IO_PORT_ATTRIBUTES};
use wv_check::port_in;
use wv_client::raw::{IoStatus, RawFile, RawIo};
use wv_inproc::StackConfig;
use zerocopy::{FromBytes, IntoBytes};

use crate::target::{
    DeviceSpec, Opener, Target, TargetArgs, TargetError, TargetTask, format_guid, resolve_device,
};

/// Options of `wvharness devinfo`.
#[derive(Args, Debug, Clone)]
pub struct DevinfoArgs {
    /// `--transport` and `--device` (only that device is listed; default: all).
    #[command(flatten)]
    pub target: TargetArgs,
    /// Print JSON (an array of devices) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also print the device limits, the ports' extended attributes and their GID tables
    /// (`ibv_devinfo -v`).
    #[arg(short, long)]
    pub verbose: bool,
}

/// One device, as printed and as `--json` reports it.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceInfo {
    /// Position in GUID_QUERY order (what `--device` takes).
    pub index: usize,
    /// The device name (`hca_id`): the provider library's name and the index, as the
    /// benchmarks' headers name it (`softhca0`).
    pub name: String,
    /// Node GUID, ibv_devinfo form.
    pub node_guid: String,
    /// System image GUID, ibv_devinfo form.
    pub sys_image_guid: String,
    /// The user-mode provider library LIBRARY_QUERY names (without `.dll`).
    pub library: String,
    /// Firmware version, `major.minor.sub` from the 64-bit value (16 bits each, as OFW packs it).
    pub fw_ver: String,
    /// `DeviceType`: `InfiniBand`, `iWARP` or `unknown`.
    pub transport: String,
    /// PCI vendor id.
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Device limits.
    pub limits: Limits,
    /// `CapabilityFlags`.
    pub device_cap_flags: u32,
    /// Its bits by ibv_devinfo's names (`SRQ_RESIZE`, `PORT_ACTIVE_EVENT`, ...).
    pub device_caps: Vec<&'static str>,
    /// The attributes `ibv_query_device_ex` adds.
    pub extended: ExtendedAttrs,
    /// Ports, 1-based.
    pub ports: Vec<PortInfo>,
}

/// The device limits ibv_devinfo -v prints.
#[derive(Clone, Debug, Serialize)]
#[allow(missing_docs)]
pub struct Limits {
    pub max_mr_size: u64,
    pub page_size_cap: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub max_sge: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_mw: u32,
    pub max_ah: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_qp_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub max_inline_send: u32,
    pub max_fmr: u32,
    pub max_map_per_fmr: u32,
    pub max_mcast_grp: u32,
    pub max_mcast_qp_attach: u32,
    pub max_total_mcast_qp_attach: u32,
    pub max_pkeys: u32,
    pub local_ca_ack_delay: u8,
    pub atomic_cap: String,
}

/// What `ibv_query_device_ex` adds to the device attributes, in the order ibv_devinfo -v
/// prints it. WinVerbs' DEVICE_QUERY has no field for any of them: a WinVerbs device offers no
/// on-demand paging, completion timestamps, raw packet offloads, TSO, RSS, work queues, packet
/// pacing, tag matching, CQ moderation or device memory, so each is zero, as the libibverbs
/// over WinVerbs reports it too. The exception is the completion vector count.
#[derive(Clone, Debug, Default, Serialize)]
#[allow(missing_docs)]
pub struct ExtendedAttrs {
    pub odp_general_caps: u64,
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
    pub xrc_odp_caps: u32,
    pub completion_timestamp_mask: u64,
    /// kHz.
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    pub max_tso: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    pub rx_hash_function: u32,
    pub rx_hash_fields_mask: u64,
    pub max_wq_type_rq: u32,
    /// kbps.
    pub qp_rate_limit_min: u32,
    /// kbps.
    pub qp_rate_limit_max: u32,
    /// Tag matching: zero means none (ibv_devinfo then prints no other tag-matching line).
    pub max_num_tags: u32,
    pub max_cq_count: u32,
    /// Microseconds.
    pub max_cq_period: u32,
    pub max_dm_size: u64,
    /// One: a WinVerbs CQ has no completion vector to choose (CQ_CREATE carries none), so
    /// every CQ signals through the one vector 0, which is what the libibverbs over WinVerbs
    /// reports in `ibv_context::num_comp_vectors`.
    pub num_comp_vectors: u32,
}

impl ExtendedAttrs {
    /// A WinVerbs device's: none of the extended features, one completion vector.
    fn winverbs() -> ExtendedAttrs {
        ExtendedAttrs {
            num_comp_vectors: 1,
            ..ExtendedAttrs::default()
        }
    }
}

/// One port.
#[derive(Clone, Debug, Serialize)]
pub struct PortInfo {
    /// Port number (1-based).
    pub port: u8,
    /// `PORT_ACTIVE (4)` etc.
    pub state: String,
    /// Numeric state.
    pub state_num: u32,
    /// Largest MTU in bytes.
    pub max_mtu: u32,
    /// Active MTU in bytes.
    pub active_mtu: u32,
    /// LID (host order).
    pub lid: u16,
    /// SM LID (host order).
    pub sm_lid: u16,
    /// LMC.
    pub lmc: u8,
    /// `InfiniBand`, `iWARP` or `Ethernet` (RoCE).
    pub link_layer: String,
    /// Largest message.
    pub max_msg_sz: u32,
    /// Port capability flags.
    pub port_cap_flags: u32,
    /// GID table length as the port reports it.
    pub gid_tbl_len: u32,
    /// P_Key table length as the port reports it.
    pub pkey_tbl_len: u16,
    /// Non-zero GID table entries: (index, IPv6 text).
    pub gids: Vec<GidEntry>,
    /// P_Keys (host order), every entry.
    pub pkeys: Vec<u16>,
    /// Bad P_Key counter.
    pub bad_pkey_cntr: u32,
    /// Q_Key violation counter.
    pub qkey_viol_cntr: u32,
    /// Virtual lanes (`max_vl_num`).
    pub max_vl_num: u8,
    /// SM service level.
    pub sm_sl: u8,
    /// Subnet timeout.
    pub subnet_timeout: u8,
    /// InitTypeReply.
    pub init_type_reply: u8,
    /// Active link width (the IB encoding: 1, 2, 4, 8, 16).
    pub active_width: u8,
    /// Active link speed (the IB encoding: 1, 2, 4, …).
    pub active_speed: u8,
    /// Physical port state (5: LINK_UP).
    pub phys_state: u8,
}

/// One GID table entry.
#[derive(Clone, Debug, Serialize)]
pub struct GidEntry {
    /// Index in the table.
    pub index: usize,
    /// IPv6 notation (`fe80::…`, `::ffff:a.b.c.d`).
    pub gid: String,
    /// `MAC` (link-local EUI-64), `IPv4` (IPv4-mapped) or `other`.
    pub kind: &'static str,
    /// The GID type ibv_devinfo names on an Ethernet port (`RoCE v1`: the soft HCA's GIDs are
    /// MAC- and IPv4-based); `None` on InfiniBand.
    pub gid_type: Option<&'static str>,
}

/// ibv_devinfo's test for an unused GID table entry: only the interface id (bytes 8–15) is
/// looked at, so an entry with a subnet prefix and a zero interface id is not listed either.
fn null_gid(raw: &[u8; 16]) -> bool {
    raw[8..].iter().all(|&b| b == 0)
}

/// A GID in IPv6 notation; RoCE's IPv4-based GIDs come out as `::ffff:a.b.c.d`.
pub fn format_gid(raw: [u8; 16]) -> String {
    Ipv6Addr::from(raw).to_string()
}

/// A GID as ibv_devinfo prints an IB or RoCE v1 GID: eight groups of four hex digits.
pub fn format_gid_v1(raw: [u8; 16]) -> String {
    raw.chunks_exact(2)
        .map(|p| format!("{:02x}{:02x}", p[0], p[1]))
        .collect::<Vec<_>>()
        .join(":")
}

/// ibv_devinfo's `width_str`: the lane count of an IB width code.
fn width_str(width: u8) -> &'static str {
    match width {
        1 => "1",
        2 => "4",
        4 => "8",
        8 => "12",
        16 => "2",
        _ => "invalid width",
    }
}

/// ibv_devinfo's `speed_str`.
fn speed_str(speed: u8) -> &'static str {
    match speed {
        1 => "2.5 Gbps",
        2 => "5.0 Gbps",
        4 | 8 => "10.0 Gbps",
        16 => "14.0 Gbps",
        32 => "25.0 Gbps",
        64 => "50.0 Gbps",
        128 => "100.0 Gbps",
        _ => "invalid speed",
    }
}

/// ibv_devinfo's `vl_str`.
fn vl_str(vls: u8) -> &'static str {
    match vls {
        1 => "1",
        2 => "2",
        3 => "4",
        4 => "8",
        5 => "15",
        _ => "invalid value",
    }
}

/// ibv_devinfo's `port_phy_state_str`.
fn phys_state_str(state: u8) -> &'static str {
    match state {
        1 => "SLEEP",
        2 => "POLLING",
        3 => "DISABLED",
        4 => "PORT_CONFIGURATION TRAINNING",
        5 => "LINK_UP",
        6 => "LINK_ERROR_RECOVERY",
        7 => "PHY TEST",
        _ => "invalid physical state",
    }
}

/// ibv_devinfo's `mtu_str` of an MTU given in bytes.
fn mtu_str(bytes: u32) -> &'static str {
    match bytes {
        256 => "256",
        512 => "512",
        1024 => "1024",
        2048 => "2048",
        4096 => "4096",
        _ => "invalid MTU",
    }
}

fn gid_kind(raw: [u8; 16]) -> &'static str {
    if raw[..2] == [0xfe, 0x80] {
        "MAC"
    } else if raw[..10] == [0; 10] && raw[10..12] == [0xff, 0xff] {
        "IPv4"
    } else {
        "other"
    }
}

/// The `WV_IO_*` device capability bits by the names ibv_devinfo prints for the same
/// `IBV_DEVICE_*` bits (WinVerbs' `BATCH_NOTIFY_CQ` is ibverbs' `N_NOTIFY_CQ`).
const DEVICE_CAPS: [(u32, &str); 15] = [
    (0x0001, "RESIZE_MAX_WR"),
    (0x0002, "BAD_PKEY_CNTR"),
    (0x0004, "BAD_QKEY_CNTR"),
    (0x0008, "RAW_MULTI"),
    (0x0010, "AUTO_PATH_MIG"),
    (0x0020, "CHANGE_PHY_PORT"),
    (0x0040, "UD_AV_PORT_ENFORCE"),
    (0x0080, "CURR_QP_STATE_MOD"),
    (0x0100, "SHUTDOWN_PORT"),
    (0x0200, "INIT_TYPE"),
    (0x0400, "PORT_ACTIVE_EVENT"),
    (0x0800, "SYS_IMAGE_GUID"),
    (0x1000, "RC_RNR_NAK_GEN"),
    (0x2000, "SRQ_RESIZE"),
    (0x4000, "N_NOTIFY_CQ"),
];

/// The names of the known capability bits set in `flags`, in bit order.
fn device_cap_names(flags: u32) -> Vec<&'static str> {
    DEVICE_CAPS
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, name)| *name)
        .collect()
}

/// `PORT_ACTIVE (4)`, as ibv_devinfo names the states.
fn port_state(s: u32) -> String {
    let name = match s {
        0 => "PORT_NOP",
        1 => "PORT_DOWN",
        2 => "PORT_INIT",
        3 => "PORT_ARMED",
        4 => "PORT_ACTIVE",
        5 => "PORT_ACTIVE_DEFER",
        _ => "PORT_UNKNOWN",
    };
    format!("{name} ({s})")
}

/// ibv_devinfo's MTU enum value for a byte count (0 for a count that is no IB MTU).
fn mtu_enum(bytes: u32) -> u32 {
    wv_hal::Mtu::from_bytes(bytes).map_or(0, |m| m as u32)
}

/// Sends an IOCTL and waits for it.
fn ioctl<F: RawFile>(f: &F, code: u32, input: &[u8], out: usize) -> IoStatus {
    f.device_io_control(code, input, out).wait()
}

/// An IOCTL that must succeed; the error names it and its status.
fn must<F: RawFile>(f: &F, code: u32, input: &[u8], out: usize) -> Result<IoStatus, String> {
    let st = ioctl(f, code, input, out);
    if NtStatus(st.status).is_success() {
        Ok(st)
    } else {
        let name = Ioctl::from_code(code).map_or("IOCTL", |i| i.name());
        Err(format!("{name} failed: {}", NtStatus(st.status)))
    }
}

fn read<T: FromBytes>(bytes: &[u8], what: &str) -> Result<T, String> {
    T::read_from_prefix(bytes)
        .map(|(v, _)| v)
        .map_err(|_| format!("{what}: short output ({} bytes)", bytes.len()))
}

/// A whole GID or P_Key table: asks again with room for all entries the port reports, and more
/// while the driver says MORE_ENTRIES.
fn table<F: RawFile>(
    f: &F,
    code: u32,
    dev: u64,
    port: u8,
    item: usize,
    len: usize,
) -> Result<Vec<u8>, String> {
    let mut entries = len.max(1);
    loop {
        let st = must(f, code, &port_in(dev, port), entries * item)?;
        if st.status != NtStatus::MORE_ENTRIES.0 || entries >= 1 << 16 {
            return Ok(st.output);
        }
        entries *= 2;
    }
}

/// Everything about one device, through a device handle opened and closed here. GUIDs are
/// NET64 (the bytes in memory are the big-endian GUID), so they print via `from_be`, as
/// ibv_devinfo prints `be64toh(node_guid)`.
fn device_info<F: RawFile>(f: &F, index: usize, guid: u64) -> Result<DeviceInfo, String> {
    let library = crate::target::library_name(f, guid)?;
    let id_in = WV_IO_ID {
        Id: guid,
        VerbInfo: 0,
        Data: 0,
    };
    let st = must(f, WV_IOCTL_DEVICE_OPEN, id_in.as_bytes(), 16)?;
    let dev = read::<WV_IO_ID>(&st.output, "DEVICE_OPEN")?.Id;
    let result = describe(f, index, dev, library);
    // Close the device handle whatever happened; its failure changes nothing for the report.
    let _ = ioctl(f, WV_IOCTL_DEVICE_CLOSE, &dev.to_ne_bytes(), 0);
    result
}

fn describe<F: RawFile>(
    f: &F,
    index: usize,
    dev: u64,
    library: String,
) -> Result<DeviceInfo, String> {
    let st = must(f, WV_IOCTL_DEVICE_QUERY, &dev.to_ne_bytes(), 152)?;
    let a: WV_IO_DEVICE_ATTRIBUTES = read(&st.output, "DEVICE_QUERY")?;
    let mut ports = Vec::new();
    for port in 1..=a.PhysPortCount {
        let st = must(f, WV_IOCTL_DEVICE_PORT_QUERY, &port_in(dev, port), 52)?;
        let p: WV_IO_PORT_ATTRIBUTES = read(&st.output, "DEVICE_PORT_QUERY")?;
        let ethernet = p.Transport == 2;
        let gids = table(
            f,
            WV_IOCTL_DEVICE_GID_QUERY,
            dev,
            port,
            16,
            p.GidTableLength as usize,
        )?
        .chunks_exact(16)
        .enumerate()
        .filter_map(|(index, c)| {
            let raw: [u8; 16] = c.try_into().ok()?;
            (!null_gid(&raw)).then(|| GidEntry {
                index,
                gid: format_gid(raw),
                kind: gid_kind(raw),
                gid_type: ethernet.then_some("RoCE v1"),
            })
        })
        .collect();
        let pkeys = table(
            f,
            WV_IOCTL_DEVICE_PKEY_QUERY,
            dev,
            port,
            2,
            usize::from(p.PkeyTableLength),
        )?
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
        ports.push(PortInfo {
            port,
            state: port_state(p.State),
            state_num: p.State,
            max_mtu: p.MaxMtu,
            active_mtu: p.ActiveMtu,
            lid: u16::from_be(p.Lid),
            sm_lid: u16::from_be(p.SmLid),
            lmc: p.Lmc,
            link_layer: match p.Transport {
                0 => "InfiniBand",
                1 => "iWARP",
                2 => "Ethernet",
                _ => "unknown",
            }
            .into(),
            max_msg_sz: p.MaxMessageSize,
            port_cap_flags: p.PortCabilityFlags,
            gid_tbl_len: p.GidTableLength,
            pkey_tbl_len: p.PkeyTableLength,
            gids,
            pkeys,
            bad_pkey_cntr: p.BadPkeyCounter,
            qkey_viol_cntr: p.QkeyViolationCounter,
            max_vl_num: p.MaxVls,
            sm_sl: p.SmSl,
            subnet_timeout: p.SubnetTimeout,
            init_type_reply: p.InitTypeReply,
            active_width: p.ActiveWidth,
            active_speed: p.ActiveSpeed,
            phys_state: p.PhysicalState,
        });
    }
    let fw = a.FwVersion;
    Ok(DeviceInfo {
        index,
        name: crate::target::device_name(&library, index),
        node_guid: format_guid(u64::from_be(a.NodeGuid)),
        sys_image_guid: format_guid(u64::from_be(a.SystemImageGuid)),
        library,
        fw_ver: format!("{}.{}.{}", fw >> 32, (fw >> 16) & 0xffff, fw & 0xffff),
        transport: match a.DeviceType {
            1 => "InfiniBand",
            2 => "iWARP",
            _ => "unknown",
        }
        .into(),
        vendor_id: a.VendorId,
        vendor_part_id: a.VendorPartId,
        hw_ver: a.HwVersion,
        device_cap_flags: a.CapabilityFlags,
        device_caps: device_cap_names(a.CapabilityFlags),
        extended: ExtendedAttrs::winverbs(),
        limits: Limits {
            max_mr_size: a.MaxMrSize,
            page_size_cap: a.PageSizeCapabilityFlags,
            max_qp: a.MaxQp,
            max_qp_wr: a.MaxQpWr,
            max_sge: a.MaxSge,
            max_cq: a.MaxCq,
            max_cqe: a.MaxCqEntries,
            max_mr: a.MaxMr,
            max_pd: a.MaxPd,
            max_mw: a.MaxMw,
            max_ah: a.MaxAh,
            max_srq: a.MaxSrq,
            max_srq_wr: a.MaxSrqWr,
            max_srq_sge: a.MaxSrqSge,
            max_qp_rd_atom: a.MaxQpResponderResources,
            max_res_rd_atom: a.MaxResponderResources,
            max_qp_init_rd_atom: a.MaxQpInitiatorDepth,
            max_inline_send: a.MaxInlineSend,
            max_fmr: a.MaxFmr,
            max_map_per_fmr: a.MaxMapPerFmr,
            max_mcast_grp: a.MaxMulticast,
            max_mcast_qp_attach: a.MaxQpAttach,
            max_total_mcast_qp_attach: a.MaxMulticastQp,
            max_pkeys: a.MaxPkeys,
            local_ca_ack_delay: a.LocalAckDelay,
            atomic_cap: match a.AtomicCapability {
                0 => "ATOMIC_NONE (0)",
                1 => "ATOMIC_HCA (1)",
                2 => "ATOMIC_GLOB (2)",
                _ => "unknown",
            }
            .into(),
        },
        ports,
    })
}

/// Collects the devices (all, or the `--device` one) through `opener`.
struct Collect;

impl TargetTask for Collect {
    type Output = Result<Vec<DeviceInfo>, TargetError>;

    fn run<O: Opener>(self, opener: &O, device: Option<DeviceSpec>) -> Self::Output {
        let f = opener.open_file()?;
        let st = ioctl(&f, WV_IOCTL_GUID_QUERY, &[], 8 + 8 * 256);
        if !NtStatus(st.status).is_success() {
            return Err(TargetError(format!(
                "GUID_QUERY failed: {}",
                NtStatus(st.status)
            )));
        }
        let guids: Vec<u64> = st
            .output
            .get(8..)
            .unwrap_or_default()
            .chunks_exact(8)
            .filter_map(|c| c.try_into().ok().map(u64::from_ne_bytes))
            .collect();
        let chosen: Vec<usize> = match device {
            None if guids.is_empty() => {
                return Err(TargetError(
                    "no RDMA device found (GUID_QUERY returned none)".into(),
                ));
            }
            None => (0..guids.len()).collect(),
            Some(spec) => vec![resolve_device(&guids, Some(spec))?],
        };
        chosen
            .into_iter()
            .map(|i| {
                device_info(&f, i, guids[i]).map_err(|e| {
                    TargetError(format!("device {i} ({}): {e}", format_guid(guids[i])))
                })
            })
            .collect()
    }
}

/// A device line `\t{name}:{tabs}{value}` with ibv_devinfo's tabs (its format strings put
/// the values at column 40 with tab stops of 8: a line starts with one tab).
fn field(out: &mut impl Write, name: &str, value: impl std::fmt::Display) -> io::Result<()> {
    let tabs = "\t".repeat(5usize.saturating_sub((8 + name.len() + 1) / 8).max(1));
    writeln!(out, "\t{name}:{tabs}{value}")
}

/// ibv_devinfo's `print_odp_trans_caps`: the bits of one transport's ODP capabilities.
fn odp_transport_caps(out: &mut impl Write, caps: u32) -> io::Result<()> {
    const NAMES: [(u32, &str); 6] = [
        (1 << 0, "SUPPORT_SEND"),
        (1 << 1, "SUPPORT_RECV"),
        (1 << 2, "SUPPORT_WRITE"),
        (1 << 3, "SUPPORT_READ"),
        (1 << 4, "SUPPORT_ATOMIC"),
        (1 << 5, "SUPPORT_SRQ"),
    ];
    if caps == 0 {
        return writeln!(out, "\t\t\t\t\tNO SUPPORT");
    }
    for (bit, name) in NAMES {
        if caps & bit != 0 {
            writeln!(out, "\t\t\t\t\t{name}")?;
        }
    }
    let unknown = NAMES.iter().fold(caps, |c, (bit, _)| c & !bit);
    if unknown != 0 {
        writeln!(out, "\t\t\t\t\tUnknown flags: 0x{unknown:X}")?;
    }
    Ok(())
}

/// The lines ibv_devinfo -v prints from `ibv_query_device_ex` after the device limits, with
/// its tabs. The lists a non-zero capability would open (`supported_qp:` under TSO, RSS and
/// packet pacing, the flag names of `device_cap_flags_ex`, tag matching's limits) are not
/// modelled: WinVerbs reports none of those capabilities.
fn write_extended(out: &mut impl Write, x: &ExtendedAttrs) -> io::Result<()> {
    writeln!(out, "\tgeneral_odp_caps:")?;
    for (bit, name) in [(1u64, "ODP_SUPPORT"), (2, "ODP_SUPPORT_IMPLICIT")] {
        if x.odp_general_caps & bit != 0 {
            writeln!(out, "\t\t\t\t\t{name}")?;
        }
    }
    for (name, caps) in [
        ("rc", x.rc_odp_caps),
        ("uc", x.uc_odp_caps),
        ("ud", x.ud_odp_caps),
        ("xrc", x.xrc_odp_caps),
    ] {
        writeln!(out, "\t{name}_odp_caps:")?;
        odp_transport_caps(out, caps)?;
    }
    if x.completion_timestamp_mask != 0 {
        writeln!(
            out,
            "\tcompletion timestamp_mask:\t\t\t0x{:016x}",
            x.completion_timestamp_mask
        )?;
    } else {
        writeln!(out, "\tcompletion_timestamp_mask not supported")?;
    }
    if x.hca_core_clock != 0 {
        writeln!(out, "\thca_core_clock:\t\t\t{}kHZ", x.hca_core_clock)?;
    } else {
        writeln!(out, "\tcore clock not supported")?;
    }
    writeln!(
        out,
        "\tdevice_cap_flags_ex:\t\t0x{:X}",
        x.device_cap_flags_ex
    )?;
    writeln!(out, "\ttso_caps:")?;
    writeln!(out, "\t\tmax_tso:\t\t\t{}", x.max_tso)?;
    writeln!(out, "\trss_caps:")?;
    writeln!(
        out,
        "\t\tmax_rwq_indirection_tables:\t\t\t{}",
        x.max_rwq_indirection_tables
    )?;
    writeln!(
        out,
        "\t\tmax_rwq_indirection_table_size:\t\t\t{}",
        x.max_rwq_indirection_table_size
    )?;
    writeln!(
        out,
        "\t\trx_hash_function:\t\t\t\t0x{:x}",
        x.rx_hash_function
    )?;
    writeln!(
        out,
        "\t\trx_hash_fields_mask:\t\t\t\t0x{:X}",
        x.rx_hash_fields_mask
    )?;
    writeln!(out, "\tmax_wq_type_rq:\t\t\t{}", x.max_wq_type_rq)?;
    writeln!(out, "\tpacket_pacing_caps:")?;
    writeln!(out, "\t\tqp_rate_limit_min:\t{}kbps", x.qp_rate_limit_min)?;
    writeln!(out, "\t\tqp_rate_limit_max:\t{}kbps", x.qp_rate_limit_max)?;
    if x.max_num_tags == 0 {
        writeln!(out, "\ttag matching not supported")?;
    } else {
        writeln!(out, "\tmax_num_tags:\t\t\t{}", x.max_num_tags)?;
    }
    // ibv_devinfo prints CQ moderation only when both limits are set, and device memory only
    // when there is some.
    if x.max_cq_count != 0 && x.max_cq_period != 0 {
        writeln!(out, "\n\tcq moderation caps:")?;
        writeln!(out, "\t\tmax_cq_count:\t{}", x.max_cq_count)?;
        writeln!(out, "\t\tmax_cq_period:\t{} us\n", x.max_cq_period)?;
    }
    if x.max_dm_size != 0 {
        writeln!(
            out,
            "\tmaximum available device memory:\t{}Bytes\n",
            x.max_dm_size
        )?;
    }
    writeln!(out, "\tnum_comp_vectors:\t\t{}", x.num_comp_vectors)
}

/// The text ibv_devinfo prints, for one device (`print_hca_cap`).
fn write_text(out: &mut impl Write, d: &DeviceInfo, verbose: bool) -> io::Result<()> {
    let l = &d.limits;
    writeln!(out, "hca_id:\t{}", d.name)?;
    writeln!(
        out,
        "\ttransport:\t\t\t{} ({})",
        d.transport,
        if d.transport == "iWARP" { 1 } else { 0 }
    )?;
    writeln!(out, "\tfw_ver:\t\t\t\t{}", d.fw_ver)?;
    writeln!(out, "\tnode_guid:\t\t\t{}", d.node_guid)?;
    writeln!(out, "\tsys_image_guid:\t\t\t{}", d.sys_image_guid)?;
    writeln!(out, "\tvendor_id:\t\t\t{:#06x}", d.vendor_id)?;
    writeln!(out, "\tvendor_part_id:\t\t\t{}", d.vendor_part_id)?;
    writeln!(out, "\thw_ver:\t\t\t\t{:#X}", d.hw_ver)?;
    // ibv_devinfo's `board_id` line would come here; no WinVerbs IOCTL carries a board id.
    writeln!(out, "\tphys_port_cnt:\t\t\t{}", d.ports.len())?;
    if verbose {
        field(out, "max_mr_size", format_args!("{:#x}", l.max_mr_size))?;
        field(out, "page_size_cap", format_args!("{:#x}", l.page_size_cap))?;
        field(out, "max_qp", l.max_qp)?;
        field(out, "max_qp_wr", l.max_qp_wr)?;
        writeln!(out, "\tdevice_cap_flags:\t\t{:#010x}", d.device_cap_flags)?;
        // The bits by name under the value, one per line.
        for cap in &d.device_caps {
            writeln!(out, "\t\t\t\t\t{cap}")?;
        }
        let unknown = DEVICE_CAPS
            .iter()
            .fold(d.device_cap_flags, |f, (bit, _)| f & !bit);
        if unknown != 0 {
            writeln!(out, "\t\t\t\t\tUnknown flags: 0x{unknown:X}")?;
        }
        field(out, "max_sge", l.max_sge)?;
        // WinVerbs has one SGE limit; the soft HCA reads with as many SGEs as it sends.
        field(out, "max_sge_rd", l.max_sge)?;
        field(out, "max_cq", l.max_cq)?;
        field(out, "max_cqe", l.max_cqe)?;
        field(out, "max_mr", l.max_mr)?;
        field(out, "max_pd", l.max_pd)?;
        field(out, "max_qp_rd_atom", l.max_qp_rd_atom)?;
        field(out, "max_ee_rd_atom", 0)?;
        field(out, "max_res_rd_atom", l.max_res_rd_atom)?;
        field(out, "max_qp_init_rd_atom", l.max_qp_init_rd_atom)?;
        field(out, "max_ee_init_rd_atom", 0)?;
        field(out, "atomic_cap", &l.atomic_cap)?;
        field(out, "max_ee", 0)?;
        field(out, "max_rdd", 0)?;
        field(out, "max_mw", l.max_mw)?;
        field(out, "max_raw_ipv6_qp", 0)?;
        field(out, "max_raw_ethy_qp", 0)?;
        field(out, "max_mcast_grp", l.max_mcast_grp)?;
        field(out, "max_mcast_qp_attach", l.max_mcast_qp_attach)?;
        field(
            out,
            "max_total_mcast_qp_attach",
            l.max_total_mcast_qp_attach,
        )?;
        field(out, "max_ah", l.max_ah)?;
        field(out, "max_fmr", l.max_fmr)?;
        if l.max_fmr != 0 {
            field(out, "max_map_per_fmr", l.max_map_per_fmr)?;
        }
        field(out, "max_srq", l.max_srq)?;
        if l.max_srq != 0 {
            field(out, "max_srq_wr", l.max_srq_wr)?;
            field(out, "max_srq_sge", l.max_srq_sge)?;
        }
        field(out, "max_pkeys", l.max_pkeys)?;
        field(out, "local_ca_ack_delay", l.local_ca_ack_delay)?;
        write_extended(out, &d.extended)?;
    }
    for p in &d.ports {
        writeln!(out, "\t\tport:\t{}", p.port)?;
        writeln!(out, "\t\t\tstate:\t\t\t{}", p.state)?;
        writeln!(
            out,
            "\t\t\tmax_mtu:\t\t{} ({})",
            mtu_str(p.max_mtu),
            mtu_enum(p.max_mtu)
        )?;
        writeln!(
            out,
            "\t\t\tactive_mtu:\t\t{} ({})",
            mtu_str(p.active_mtu),
            mtu_enum(p.active_mtu)
        )?;
        writeln!(out, "\t\t\tsm_lid:\t\t\t{}", p.sm_lid)?;
        writeln!(out, "\t\t\tport_lid:\t\t{}", p.lid)?;
        writeln!(out, "\t\t\tport_lmc:\t\t{:#04x}", p.lmc)?;
        writeln!(out, "\t\t\tlink_layer:\t\t{}", p.link_layer)?;
        if verbose {
            writeln!(out, "\t\t\tmax_msg_sz:\t\t{:#x}", p.max_msg_sz)?;
            writeln!(out, "\t\t\tport_cap_flags:\t\t{:#010x}", p.port_cap_flags)?;
            // WinVerbs reports no second capability word.
            writeln!(out, "\t\t\tport_cap_flags2:\t0x0000")?;
            writeln!(
                out,
                "\t\t\tmax_vl_num:\t\t{} ({})",
                vl_str(p.max_vl_num),
                p.max_vl_num
            )?;
            writeln!(out, "\t\t\tbad_pkey_cntr:\t\t{:#x}", p.bad_pkey_cntr)?;
            writeln!(out, "\t\t\tqkey_viol_cntr:\t\t{:#x}", p.qkey_viol_cntr)?;
            writeln!(out, "\t\t\tsm_sl:\t\t\t{}", p.sm_sl)?;
            writeln!(out, "\t\t\tpkey_tbl_len:\t\t{}", p.pkey_tbl_len)?;
            writeln!(out, "\t\t\tgid_tbl_len:\t\t{}", p.gid_tbl_len)?;
            writeln!(out, "\t\t\tsubnet_timeout:\t\t{}", p.subnet_timeout)?;
            writeln!(out, "\t\t\tinit_type_reply:\t{}", p.init_type_reply)?;
            writeln!(
                out,
                "\t\t\tactive_width:\t\t{}X ({})",
                width_str(p.active_width),
                p.active_width
            )?;
            writeln!(
                out,
                "\t\t\tactive_speed:\t\t{} ({})",
                speed_str(p.active_speed),
                p.active_speed
            )?;
            // Every WinVerbs device is an InfiniBand transport (RoCE included), where
            // ibv_devinfo prints the physical state.
            if d.transport == "InfiniBand" {
                writeln!(
                    out,
                    "\t\t\tphys_state:\t\t{} ({})",
                    phys_state_str(p.phys_state),
                    p.phys_state
                )?;
            }
            for g in &p.gids {
                let raw: [u8; 16] = g
                    .gid
                    .parse::<Ipv6Addr>()
                    .map(|a| a.octets())
                    .unwrap_or_default();
                let suffix = g.gid_type.map(|t| format!(", {t}")).unwrap_or_default();
                writeln!(
                    out,
                    "\t\t\tGID[{:>3}]:\t\t{}{suffix}",
                    g.index,
                    format_gid_v1(raw)
                )?;
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

/// `wvharness devinfo`.
pub fn run(args: &DevinfoArgs) -> io::Result<ExitCode> {
    let devices = Target::open(&args.target, StackConfig::default())
        .and_then(|(target, device)| target.run(Collect, device));
    let devices = match devices {
        Ok(d) => d,
        Err(e) => {
            eprintln!("wvharness devinfo: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &devices).map_err(|e| {
            // Keep the kind (a closed pipe is not an error worth reporting).
            e.io_error_kind()
                .map_or_else(|| io::Error::other(e), io::Error::from)
        })?;
        writeln!(out)?;
    } else {
        for d in &devices {
            write_text(&mut out, d, args.verbose)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gids_print_as_ipv6() {
        let mut mac = [0u8; 16];
        mac[..2].copy_from_slice(&[0xfe, 0x80]);
        mac[8..].copy_from_slice(&[0x00, 0x57, 0x56, 0xff, 0xfe, 0x00, 0x00, 0x01]);
        assert_eq!(format_gid(mac), "fe80::57:56ff:fe00:1");
        assert_eq!(gid_kind(mac), "MAC");
        let mut v4 = [0u8; 16];
        v4[10..12].copy_from_slice(&[0xff, 0xff]);
        v4[12..].copy_from_slice(&[192, 168, 1, 7]);
        assert_eq!(format_gid(v4), "::ffff:192.168.1.7");
        assert_eq!(gid_kind(v4), "IPv4");
        assert_eq!(
            format_gid_v1(mac),
            "fe80:0000:0000:0000:0057:56ff:fe00:0001",
            "ibv_devinfo's RoCE v1 form"
        );
    }

    #[test]
    fn a_gid_is_unused_when_its_interface_id_is_zero() {
        let mut prefix_only = [0u8; 16];
        prefix_only[..8].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
        assert!(
            null_gid(&prefix_only),
            "ibv_devinfo skips a bare subnet prefix"
        );
        assert!(null_gid(&[0; 16]));
        let mut id_only = [0u8; 16];
        id_only[15] = 1;
        assert!(!null_gid(&id_only));
    }

    #[test]
    fn port_strings_as_ibv_devinfo() {
        assert_eq!(width_str(1), "1");
        assert_eq!(width_str(2), "4");
        assert_eq!(speed_str(1), "2.5 Gbps");
        assert_eq!(speed_str(128), "100.0 Gbps");
        assert_eq!(vl_str(1), "1");
        assert_eq!(phys_state_str(5), "LINK_UP");
        assert_eq!(mtu_str(4096), "4096");
    }

    #[test]
    fn capability_bits_by_name() {
        assert_eq!(
            device_cap_names(0x0000_7400),
            vec![
                "PORT_ACTIVE_EVENT",
                "RC_RNR_NAK_GEN",
                "SRQ_RESIZE",
                "N_NOTIFY_CQ"
            ]
        );
        assert!(device_cap_names(0x8000).is_empty());
    }

    #[test]
    fn states_and_mtus() {
        assert_eq!(port_state(4), "PORT_ACTIVE (4)");
        assert_eq!(port_state(1), "PORT_DOWN (1)");
        assert_eq!(mtu_enum(1024), 3);
        assert_eq!(mtu_enum(4096), 5);
    }
}
