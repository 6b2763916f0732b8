//! Helpers for raw-IOCTL scenarios: request bytes, issuing with an expectation about
//! inline-vs-pending, and comparisons that say exactly what differed.
//!
//! Nothing here panics: the profile aborts on panic, and a conformance tool must report a
//! driver's wrong answer as a FAIL line, not die on it.

use std::time::Duration;

use wv_abi::consts::*;
use wv_abi::ioctl::Ioctl;
use wv_abi::{
    NtStatus, WV_IO_AH_CREATE, WV_IO_DEVICE_PORT_QUERY, WV_IO_ID, WV_IO_QP_ATTRIBUTES,
    WV_IO_QP_CREATE, WV_IO_SRQ_ATTRIBUTES,
};
use wv_client::raw::{IoStatus, RawFile, RawIo};
use zerocopy::{FromBytes, IntoBytes};

use crate::env::Env;

/// How long a wait for a request that should end soon may take before the scenario reports it
/// as never completed. Generous: everything here normally ends in microseconds.
pub const WAIT: Duration = Duration::from_secs(10);

/// Returns `Err(format!(..))` from the scenario unless the condition holds.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err(format!($($arg)+).into());
        }
    };
}
pub(crate) use ensure;

/// The name of an IOCTL code for messages (`DEVICE_OPEN`, or the hex code if unknown).
pub fn code_name(code: u32) -> String {
    match Ioctl::from_code(code) {
        Some(i) => i.name().trim_start_matches("WV_IOCTL_").to_string(),
        None => format!("IOCTL {code:#010x}"),
    }
}

/// A status for messages: `STATUS_NOT_FOUND` (or the hex value).
pub fn st_name(status: u32) -> String {
    match NtStatus(status).name() {
        Some(n) => n.to_string(),
        None => format!("NTSTATUS {status:#010x}"),
    }
}

/// `WV_IO_ID` bytes.
pub use wv_client::verbs::id_bytes as id_in;

/// A `UINT64` id.
pub fn u64_in(v: u64) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

/// `WV_IO_DEVICE_PORT_QUERY` bytes.
pub fn port_in(dev: u64, port: u8) -> Vec<u8> {
    WV_IO_DEVICE_PORT_QUERY {
        Id: dev,
        PortNumber: port,
        Reserved: [0; 7],
    }
    .as_bytes()
    .to_vec()
}

/// `WV_IO_SRQ_ATTRIBUTES` bytes.
pub fn srq_in(id: u64, max_wr: u32, max_sge: u32, limit: u32) -> Vec<u8> {
    WV_IO_SRQ_ATTRIBUTES {
        Id: WV_IO_ID::new(id, 0),
        MaxWr: max_wr,
        MaxSge: max_sge,
        SrqLimit: limit,
        Reserved: 0,
    }
    .as_bytes()
    .to_vec()
}

/// `WV_IO_QP_CREATE` for an RC (`qp_type` 0) or UD (3) QP with small queues.
pub fn qp_create_in(pd: u64, send_cq: u64, recv_cq: u64, srq: u64, qp_type: u8) -> Vec<u8> {
    WV_IO_QP_CREATE {
        Id: WV_IO_ID::new(pd, 0),
        SendCqId: send_cq,
        ReceiveCqId: recv_cq,
        SrqId: srq,
        SendDepth: 8,
        SendSge: 1,
        ReceiveDepth: if srq == 0 { 8 } else { 0 },
        ReceiveSge: if srq == 0 { 1 } else { 0 },
        MaxInlineSend: 0,
        InitiatorDepth: 1,
        ResponderResources: 1,
        QpType: qp_type,
        QpFlags: WV_IO_QP_SIGNAL_SENDS as u8,
        Reserved: 0,
    }
    .as_bytes()
    .to_vec()
}

/// `WV_IO_AH_CREATE` on port 1 towards `dgid` (a global route).
pub fn ah_in(pd: u64, dgid: [u8; 16]) -> Vec<u8> {
    let mut ah = WV_IO_AH_CREATE::default();
    ah.Id.Id = pd;
    ah.AddressVector.NetworkRouteValid = 1;
    ah.AddressVector.HopLimit = 64;
    ah.AddressVector.DGid = dgid;
    ah.AddressVector.SGid = dgid;
    ah.AddressVector.PortNumber = 1;
    ah.as_bytes().to_vec()
}

/// `WV_IO_QP_ATTRIBUTES` for a transition of an RC QP to `state`, with the attributes
/// rc_pingpong uses (INIT: port, pkey index, access; RTR: path, peer QPN, PSN, responder
/// resources, RNR timer; RTS: PSN, timeouts, retry counts, initiator depth).
pub fn modify_in(qp: u64, state: u8, peer: Option<(u32, [u8; 16])>) -> Vec<u8> {
    WV_IO_QP_ATTRIBUTES::rc_step(qp, state, peer)
        .as_bytes()
        .to_vec()
}

/// Reads a struct from the front of output bytes.
pub fn read<T: FromBytes>(bytes: &[u8], what: &str) -> Result<T, String> {
    T::read_from_prefix(bytes)
        .map(|(v, _)| v)
        .map_err(|_| format!("{what}: only {} output bytes", bytes.len()))
}

/// Issues a request the driver must complete inline, and returns how it ended.
pub fn call<F: RawFile>(
    f: &F,
    code: u32,
    input: &[u8],
    out_len: usize,
) -> Result<IoStatus, String> {
    let io = f.device_io_control(code, input, out_len);
    if io.pending() {
        // Still collect it, so the report can say how it ended.
        let how = match io.wait_timeout(WAIT) {
            Some(st) => format!("it later ended with {}", st_name(st.status)),
            None => "it never ended".to_string(),
        };
        return Err(format!(
            "{} pended but must complete inline ({how})",
            code_name(code)
        ));
    }
    wait(io, &code_name(code))
}

/// Issues a request that may pend or complete at once (QP_MODIFY: on a work item, or in the
/// caller's thread while the device's commands measure shorter than a hand-off to one); either
/// is what an overlapped DeviceIoControl gives a WinVerbs client.
pub fn submit<F: RawFile>(f: &F, code: u32, input: &[u8], out_len: usize) -> F::Io {
    f.device_io_control(code, input, out_len)
}

/// Issues a request the driver must park (pend), and returns it still in flight.
pub fn park<F: RawFile>(f: &F, code: u32, input: &[u8], out_len: usize) -> Result<F::Io, String> {
    let io = f.device_io_control(code, input, out_len);
    if !io.pending() {
        let st = io.wait_timeout(WAIT);
        return Err(format!(
            "{} completed inline ({}) but must pend",
            code_name(code),
            st.map_or("?".to_string(), |s| st_name(s.status))
        ));
    }
    Ok(io)
}

/// Waits (bounded) for a request.
pub fn wait<I: RawIo>(io: I, what: &str) -> Result<IoStatus, String> {
    match io.wait_timeout(WAIT) {
        Some(st) => Ok(st),
        None => Err(format!(
            "{what}: never completed (waited {} s)",
            WAIT.as_secs()
        )),
    }
}

/// Waits (bounded) for a request and compares how it ended; `what` names it in either error.
pub fn ends_as<I: RawIo>(io: I, want: NtStatus, what: &str) -> Result<(), String> {
    expect(&wait(io, what)?, want, what)
}

/// Compares a status.
pub fn expect(st: &IoStatus, want: NtStatus, what: &str) -> Result<(), String> {
    if st.status == want.0 {
        Ok(())
    } else {
        Err(format!(
            "{what}: got {}, want {}",
            st_name(st.status),
            st_name(want.0)
        ))
    }
}

/// Compares a status and `Information`.
pub fn expect_info(st: &IoStatus, want: NtStatus, info: usize, what: &str) -> Result<(), String> {
    expect(st, want, what)?;
    if st.information != info {
        return Err(format!(
            "{what}: Information {}, want {info}",
            st.information
        ));
    }
    Ok(())
}

/// Inline request that must end with `want`.
pub fn call_expect<F: RawFile>(
    f: &F,
    code: u32,
    input: &[u8],
    out_len: usize,
    want: NtStatus,
    what: &str,
) -> Result<IoStatus, String> {
    let st = call(f, code, input, out_len)?;
    expect(&st, want, what)?;
    Ok(st)
}

/// Inline request that must succeed; returns the output.
pub fn ok<F: RawFile>(f: &F, code: u32, input: &[u8], out_len: usize) -> Result<IoStatus, String> {
    let what = code_name(code);
    call_expect(f, code, input, out_len, NtStatus::SUCCESS, &what)
}

/// All node GUIDs, through GUID_QUERY with room for 64 devices.
pub fn guids<F: RawFile>(f: &F) -> Result<Vec<u64>, String> {
    let st = ok(f, wv_abi::ioctl::WV_IOCTL_GUID_QUERY, &[], 8 + 8 * 64)?;
    let count: u64 = read(&st.output, "GUID_QUERY")?;
    let n = count.min(64) as usize;
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let at = 8 + 8 * i;
        let g: u64 = read(st.output.get(at..).unwrap_or(&[]), "GUID_QUERY")?;
        v.push(g);
    }
    Ok(v)
}

/// DEVICE_OPEN by GUID (no vendor bytes); returns the device id.
pub fn open_dev<F: RawFile>(f: &F, guid: u64) -> Result<u64, String> {
    new_id(
        f,
        wv_abi::ioctl::WV_IOCTL_DEVICE_OPEN,
        guid,
        0,
        "DEVICE_OPEN",
    )
}

/// Issues `code` with a `WV_IO_ID` input (`id`, `data`) that must succeed inline, and returns
/// the id of the object it made (the `WV_IO_ID` at the front of the output).
fn new_id<F: RawFile>(f: &F, code: u32, id: u64, data: u32, what: &str) -> Result<u64, String> {
    let st = ok(f, code, &id_in(id, 0, data), 16)?;
    Ok(read::<WV_IO_ID>(&st.output, what)?.Id)
}

/// PD_ALLOCATE; returns the PD id.
pub fn alloc_pd<F: RawFile>(f: &F, dev: u64) -> Result<u64, String> {
    new_id(
        f,
        wv_abi::ioctl::WV_IOCTL_PD_ALLOCATE,
        dev,
        0,
        "PD_ALLOCATE",
    )
}

/// CQ_CREATE with `entries`; returns the CQ id.
pub fn create_cq<F: RawFile>(f: &F, dev: u64, entries: u32) -> Result<u64, String> {
    new_id(
        f,
        wv_abi::ioctl::WV_IOCTL_CQ_CREATE,
        dev,
        entries,
        "CQ_CREATE",
    )
}

/// SRQ_CREATE; returns the SRQ id.
pub fn create_srq<F: RawFile>(f: &F, pd: u64) -> Result<u64, String> {
    let st = ok(
        f,
        wv_abi::ioctl::WV_IOCTL_SRQ_CREATE,
        &srq_in(pd, 8, 1, 0),
        32,
    )?;
    Ok(read::<WV_IO_SRQ_ATTRIBUTES>(&st.output, "SRQ_CREATE")?
        .Id
        .Id)
}

/// QP_CREATE (RC unless `qp_type` says otherwise); returns the QP id.
pub fn create_qp<F: RawFile>(
    f: &F,
    pd: u64,
    send_cq: u64,
    recv_cq: u64,
    srq: u64,
    qp_type: u8,
) -> Result<u64, String> {
    let st = ok(
        f,
        wv_abi::ioctl::WV_IOCTL_QP_CREATE,
        &qp_create_in(pd, send_cq, recv_cq, srq, qp_type),
        72,
    )?;
    Ok(read::<WV_IO_QP_CREATE>(&st.output, "QP_CREATE")?.Id.Id)
}

/// QP_QUERY; returns the attributes.
pub fn query_qp<F: RawFile>(f: &F, qp: u64) -> Result<WV_IO_QP_ATTRIBUTES, String> {
    let st = ok(f, wv_abi::ioctl::WV_IOCTL_QP_QUERY, &u64_in(qp), 192)?;
    read(&st.output, "QP_QUERY")
}

/// Port 1's GID 0 of a device, through DEVICE_GID_QUERY.
pub fn gid0<F: RawFile>(f: &F, dev: u64) -> Result<[u8; 16], String> {
    let st = call(
        f,
        wv_abi::ioctl::WV_IOCTL_DEVICE_GID_QUERY,
        &port_in(dev, 1),
        16,
    )?;
    ensure!(
        NtStatus(st.status).is_success() && st.output.len() >= 16,
        "DEVICE_GID_QUERY(port 1): {} with {} bytes",
        st_name(st.status),
        st.output.len()
    );
    let mut g = [0u8; 16];
    g.copy_from_slice(&st.output[..16]);
    Ok(g)
}

/// A device, PD, CQ and RC QP on `guid`, created through raw IOCTLs without vendor bytes (the
/// soft HCA accepts that as a kernel consumer would; a vendor controller may refuse it).
pub struct Objects {
    /// Device id.
    pub dev: u64,
    /// PD id.
    pub pd: u64,
    /// CQ id.
    pub cq: u64,
    /// QP id.
    pub qp: u64,
}

/// A file on `env` with the environment's device open: where most scenarios start.
pub fn open_device<E: Env>(env: &E) -> Result<(E::File, u64), String> {
    let f = env.open()?;
    let dev = open_dev(&f, env.guid(&f)?)?;
    Ok((f, dev))
}

/// A file on `env` with [`Objects`] on the environment's device.
pub fn open_objects<E: Env>(env: &E) -> Result<(E::File, Objects), String> {
    let f = env.open()?;
    let o = objects(&f, env.guid(&f)?)?;
    Ok((f, o))
}

/// Creates [`Objects`].
pub fn objects<F: RawFile>(f: &F, guid: u64) -> Result<Objects, String> {
    let dev = open_dev(f, guid)?;
    let pd = alloc_pd(f, dev)?;
    let cq = create_cq(f, dev, 16)?;
    let qp = create_qp(f, pd, cq, cq, 0, 0)?;
    Ok(Objects { dev, pd, cq, qp })
}
