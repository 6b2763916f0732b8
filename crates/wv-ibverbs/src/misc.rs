//! The verbs that need no device: strings, rates, fork support, sysfs, address helpers.

use core::ffi::{CStr, c_char, c_int, c_void};
use core::ptr;

use crate::abi::*;
use crate::errno::{self, EINVAL, ENOENT, EOPNOTSUPP};

fn cstr(s: &'static CStr) -> *const c_char {
    s.as_ptr()
}

/// `ibv_node_type_str`.
pub extern "C" fn ibv_node_type_str(t: c_int) -> *const c_char {
    cstr(match t {
        1 => c"InfiniBand channel adapter",
        2 => c"InfiniBand switch",
        3 => c"InfiniBand router",
        4 => c"iWARP NIC",
        5 => c"usNIC",
        6 => c"usNIC UDP",
        7 => c"unspecified",
        _ => c"unknown",
    })
}

/// `ibv_port_state_str`.
pub extern "C" fn ibv_port_state_str(s: c_int) -> *const c_char {
    cstr(match s {
        0 => c"PORT_NOP",
        1 => c"PORT_DOWN",
        2 => c"PORT_INIT",
        3 => c"PORT_ARMED",
        4 => c"PORT_ACTIVE",
        5 => c"PORT_ACTIVE_DEFER",
        _ => c"unknown",
    })
}

/// `ibv_event_type_str`.
pub extern "C" fn ibv_event_type_str(e: c_int) -> *const c_char {
    const NAMES: [&CStr; 20] = [
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
        c"WQ fatal",
    ];
    cstr(
        usize::try_from(e)
            .ok()
            .and_then(|i| NAMES.get(i))
            .copied()
            .unwrap_or(c"unknown"),
    )
}

/// `ibv_wc_status_str`.
pub extern "C" fn ibv_wc_status_str(s: c_int) -> *const c_char {
    const NAMES: [&CStr; 24] = [
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory management operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
        c"TM error",
        c"TM software rendezvous",
    ];
    cstr(
        usize::try_from(s)
            .ok()
            .and_then(|i| NAMES.get(i))
            .copied()
            .unwrap_or(c"unknown"),
    )
}

/// `enum ibv_rate` → multiple of 2.5 Gb/s (the values of the IB spec's table).
const MULT: [(c_int, c_int); 10] = [
    (2, 1),
    (5, 2),
    (3, 4),
    (6, 8),
    (7, 12),
    (8, 16),
    (4, 24),
    (9, 32),
    (10, 48),
    (11, 64),
];
/// `enum ibv_rate` → Mb/s.
const MBPS: [(c_int, c_int); 19] = [
    (2, 2500),
    (5, 5000),
    (3, 10000),
    (6, 20000),
    (7, 30000),
    (8, 40000),
    (4, 60000),
    (9, 80000),
    (10, 120000),
    (11, 14062),
    (12, 56250),
    (13, 112500),
    (14, 168750),
    (15, 25781),
    (16, 103125),
    (17, 206250),
    (18, 309375),
    (19, 50000),
    (20, 400000),
];

/// `ibv_rate_to_mult`.
pub extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    MULT.iter().find(|m| m.0 == rate).map_or(-1, |m| m.1)
}
/// `mult_to_ibv_rate`.
pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    MULT.iter().find(|m| m.1 == mult).map_or(0, |m| m.0)
}
/// `ibv_rate_to_mbps`.
pub extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    MBPS.iter().find(|m| m.0 == rate).map_or(-1, |m| m.1)
}
/// `mbps_to_ibv_rate`.
pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    MBPS.iter().find(|m| m.1 == mbps).map_or(0, |m| m.0)
}

/// `ibv_fork_init`: registrations never pin pages here (the device copies through the
/// kernel into this process's current pages), so a fork cannot break them: nothing to do.
pub extern "C" fn ibv_fork_init() -> c_int {
    0
}
/// `ibv_is_fork_initialized`: `IBV_FORK_UNNEEDED` (see [`ibv_fork_init`]).
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    2
}
/// `ibv_dontfork_range`: nothing is pinned, nothing to protect.
pub extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}
/// `ibv_dofork_range`.
pub extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `ibv_get_sysfs_path`.
pub extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    cstr(c"/sys")
}

/// The files this library answers for its own devices' sysfs directories (there is no kernel
/// device behind them).
fn virtual_sysfs(dir: &str, file: &str) -> Option<String> {
    let rt = crate::runtime::get().ok()?;
    let dev = rt
        .devices
        .iter()
        .find(|d| dir.trim_end_matches('/') == format!("/sys/class/infiniband/{}", d.name))?;
    Some(match file {
        "board_id" => "WinVerbs soft HCA".to_string(),
        "node_desc" => format!("{} (WinVerbs soft HCA)", dev.name),
        "node_type" => "1: CA".to_string(),
        "node_guid" => wv_client::verbs::format_guid(dev.guid),
        f if f.starts_with("ports/") && f.contains("/gid_attrs/types/") => "IB/RoCE v1".to_string(),
        _ => return None,
    })
}

/// `ibv_read_sysfs_file`: `dir/file`'s first line (without the newline) into `buf`; the
/// length, or -1. The library's own devices are answered from [`virtual_sysfs`].
///
/// # Safety
/// `dir`, `file` are C strings; `buf` holds `size` writable bytes.
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
        return -1;
    }
    // SAFETY: a C string by the contract.
    let d = unsafe { CStr::from_ptr(dir) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: a C string by the contract.
    let f = unsafe { CStr::from_ptr(file) }
        .to_string_lossy()
        .into_owned();
    let text = match virtual_sysfs(&d, &f) {
        Some(t) => t,
        None => match std::fs::read_to_string(format!("{d}/{f}")) {
            Ok(t) => t,
            Err(_) => {
                errno::set(ENOENT);
                return -1;
            }
        },
    };
    let line = text.trim_end_matches('\n');
    let n = line.len().min(size - 1);
    // SAFETY: `n < size` bytes of `buf`.
    unsafe { ptr::copy_nonoverlapping(line.as_ptr(), buf.cast::<u8>(), n) };
    // SAFETY: byte `n < size` of `buf`.
    unsafe { buf.wrapping_add(n).write(0) };
    n as c_int
}

/// `ibv_read_ibdev_sysfs_file` (private): `file` of the device's sysfs directory.
///
/// # Safety
/// `buf` holds `size` writable bytes; `dev` is a device of the list; `fmt` a C string
/// (only formats without conversions are supported, which is how providers call it for
/// fixed names; the variadic arguments are not read).
pub unsafe extern "C" fn ibv_read_ibdev_sysfs_file(
    buf: *mut c_char,
    size: usize,
    dev: *mut ibv_device,
    fmt: *const c_char,
) -> c_int {
    if dev.is_null() {
        return -1;
    }
    // SAFETY: a device of the list.
    let path = unsafe { (*dev).ibdev_path.as_ptr().cast::<c_char>() };
    // SAFETY: forwarded.
    unsafe { ibv_read_sysfs_file(path, fmt, buf, size) }
}

/// `ibv_init_ah_from_wc`: the address of a UD receive's sender, from its completion and GRH.
///
/// # Safety
/// `c` live; `wc`, `grh` readable (`grh` with `IBV_WC_GRH`); `ah_attr` writable.
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    c: *mut ibv_context,
    port: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    if c.is_null() || wc.is_null() || ah_attr.is_null() {
        return errno::ret_minus1(Err(EINVAL));
    }
    // SAFETY: readable by the contract.
    let w = unsafe { *wc };
    // SAFETY: all-zero is a valid ibv_ah_attr.
    let mut a: ibv_ah_attr = unsafe { core::mem::zeroed() };
    a.dlid = w.slid;
    a.sl = w.sl;
    a.src_path_bits = w.dlid_path_bits;
    a.port_num = port;
    if w.wc_flags & wv_client::verbs::wc_flags::GRH != 0 {
        if grh.is_null() {
            return errno::ret_minus1(Err(EINVAL));
        }
        // SAFETY: readable by the contract.
        let g = unsafe { *grh };
        // SAFETY: the context is live.
        let cx = unsafe { crate::context::ctx(c) };
        // SAFETY: 16 plain bytes.
        let dgid = unsafe { g.dgid.raw };
        let gids = match cx.dev.query_gids(port) {
            Ok(t) => t,
            Err(e) => return errno::ret_minus1(Err(errno::of(&e))),
        };
        let Some(index) = gids.iter().position(|x| *x == dgid) else {
            return errno::ret_minus1(Err(ENOENT));
        };
        let flow = u32::from_be(g.version_tclass_flow);
        a.is_global = 1;
        a.grh = ibv_global_route {
            dgid: g.sgid,
            flow_label: flow & 0xfffff,
            sgid_index: index as u8,
            hop_limit: 0xff,
            traffic_class: (flow >> 20) as u8,
        };
    }
    // SAFETY: writable.
    unsafe { *ah_attr = a };
    0
}

/// `ibv_create_ah_from_wc`.
///
/// # Safety
/// As [`ibv_init_ah_from_wc`], with a live PD.
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    p: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port: u8,
) -> *mut ibv_ah {
    if p.is_null() {
        return errno::ret_ptr(Err(EINVAL));
    }
    // SAFETY: all-zero is a valid ibv_ah_attr.
    let mut a: ibv_ah_attr = unsafe { core::mem::zeroed() };
    // SAFETY: a live PD.
    let context = unsafe { (*p).context };
    // SAFETY: forwarded; the PD's context is live.
    if unsafe { ibv_init_ah_from_wc(context, port, wc, grh, &mut a) } != 0 {
        return ptr::null_mut();
    }
    // SAFETY: forwarded.
    unsafe { crate::objects::ibv_create_ah(p, &mut a) }
}

/// `ibv_resolve_eth_l2_from_gid`: no neighbour tables behind the soft HCA's RoCE ports
/// (`EOPNOTSUPP`; rdma-core resolves through netlink, which has nothing for these devices).
pub extern "C" fn ibv_resolve_eth_l2_from_gid() -> c_int {
    errno::set(EOPNOTSUPP);
    -EOPNOTSUPP
}
