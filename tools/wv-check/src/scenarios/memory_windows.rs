//! Memory windows (rdma-core tests/test_mr.py's MW cases): type 1 bound by the bind verb,
//! type 2 bound by a `BIND_MW` request, RDMA through the window's key within its bounds and
//! rights, local and remote invalidation, and the misuses with their errors.

use wv_abi::ioctl::WV_IOCTL_MEMORY_DEREGISTER;
use wv_abi::{NtStatus, WV_IO_ID};
use wv_client::raw::{RawFile, RawIo};
use wv_client::verbs::{
    Mr, MwType, SendWr, WV_ACCESS_LOCAL_WRITE, WV_ACCESS_MW_BIND, WV_ACCESS_REMOTE_READ,
    WV_ACCESS_REMOTE_WRITE, WcOpcode, WcStatus, WrOpcode, inc_rkey, send_flags, wc_flags,
};
use zerocopy::IntoBytes;

use super::fixture::*;
use super::raw::ensure;
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "mw-type1-bind-and-access",
            run: type1,
            clock: Clock::Own,
        },
        Scenario {
            name: "mw-type2-bind-and-invalidate",
            run: type2,
            clock: Clock::Own,
        },
        Scenario {
            name: "mw-bad-flow",
            run: bad_flow,
            clock: Clock::Own,
        },
    ]
}

/// A region windows can be bound to.
const BINDABLE: u32 = WV_ACCESS_LOCAL_WRITE | WV_ACCESS_MW_BIND;
const REMOTE_RW: u32 = WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ;

fn region<F: RawFile + Send + Sync + 'static>(e: &End<F>) -> Result<Mr, String> {
    e.pd.reg_mr(&e.buf, BINDABLE)
        .map_err(verr("MEMORY_REGISTER(MW_BIND)"))
}

/// One signalled completion on `e`'s CQ: (wr_id, status, opcode).
fn one<F: RawFile>(e: &End<F>, what: &str) -> Result<(u64, WcStatus, WcOpcode), String> {
    let w = poll_one(&e.cq, what)?;
    Ok((w.wr_id, w.status, w.opcode))
}

/// The next completion on `e`'s CQ (`what`) has the status `want`.
fn completes_as<F: RawFile>(e: &End<F>, want: WcStatus, what: &str) -> Result<(), String> {
    let got = one(e, what)?;
    ensure!(got.1 == want, "{what}: {got:?}, want {want:?}");
    Ok(())
}

/// The next completion on `e`'s CQ (`what`) is `want`: (wr_id, status, opcode).
fn completed<F: RawFile>(
    e: &End<F>,
    want: (u64, WcStatus, WcOpcode),
    what: &str,
) -> Result<(), String> {
    let got = one(e, what)?;
    ensure!(got == want, "{what}: completion {got:?}, want {want:?}");
    Ok(())
}

/// An RDMA write of `len` bytes from `from`'s buffer to `addr` under `rkey`; its status.
fn write<F: RawFile + Send + Sync + 'static>(
    from: &End<F>,
    id: u64,
    len: u32,
    addr: u64,
    rkey: u32,
) -> Result<WcStatus, String> {
    post_rdma_write(from, id, from.mr.sge(0, len), addr, rkey)?;
    Ok(one(from, "RDMA write")?.1)
}

/// Type 1: B binds a window onto [1024, 1280) of its buffer through the bind verb; A writes
/// and reads through it; rebinding moves the key; the old key, an access past the window and
/// a write to a read-only window fail.
fn type1<E: Env>(env: &E) -> Outcome {
    let (_p, a, b) = rc_pair(env)?;
    let r = region(&b)?;
    let mw = b.pd.alloc_mw().map_err(verr("MW_ALLOCATE"))?;
    ensure!(mw.kind() == MwType::Type1, "MW_ALLOCATE default kind");
    let key0 = mw.rkey();
    ensure!(key0 != r.rkey(), "the window's rkey is the region's");
    let flags = send_flags::SIGNALED;
    let key1 =
        b.qp.bind_mw(&mw, 1, flags, &r, 1024, 256, REMOTE_RW)
            .map_err(|e| format!("bind_mw: {e:?}"))?;
    ensure!(
        key1 == inc_rkey(key0),
        "new rkey {key1:#x}, want {:#x}",
        inc_rkey(key0)
    );
    completed(&b, (1, WcStatus::Success, WcOpcode::BindMw), "bind")?;
    let data = pattern(256, 9);
    a.buf.write(0, &data).map_err(|e| e.to_string())?;
    let st = write(&a, 2, 256, r.addr() + 1024, key1)?;
    ensure!(st == WcStatus::Success, "write through the window: {st:?}");
    let mut got = vec![0u8; 256];
    b.buf.read(1024, &mut got).map_err(|e| e.to_string())?;
    ensure!(got == data, "the bytes written through the window differ");
    // Read back part of it into A at 8192.
    let sg = [a.mr.sge(8192, 100)];
    let mut rd = SendWr::new(3, WrOpcode::RdmaRead);
    rd.sg_list = &sg;
    rd.send_flags = flags;
    rd.remote_addr = r.addr() + 1100;
    rd.rkey = key1;
    a.qp.post_send(&rd)
        .map_err(|e| format!("RDMA read: {e:?}"))?;
    completes_as(&a, WcStatus::Success, "read through the window")?;
    let mut back = vec![0u8; 100];
    a.buf.read(8192, &mut back).map_err(|e| e.to_string())?;
    ensure!(
        back == data[76..176],
        "the bytes read through the window differ"
    );
    // Rebind read-only onto [0, 64): the new key reads, the old key is dead.
    let key2 =
        b.qp.bind_mw(&mw, 4, flags, &r, 0, 64, WV_ACCESS_REMOTE_READ)
            .map_err(|e| format!("rebind: {e:?}"))?;
    completes_as(&b, WcStatus::Success, "rebind")?;
    let st = write(&a, 5, 8, r.addr(), key2)?;
    ensure!(
        st == WcStatus::RemAccessErr,
        "write to a read-only window: {st:?}, want REM_ACCESS_ERR"
    );
    cq_empty(&b.cq, "B")?;
    Ok(
        "type 1 window (MW_ALLOCATE without type) bound by the bind verb: BIND_MW completion, \
        rkey → inc_rkey; 256-byte RDMA write and a 100-byte read through it byte-exact; \
        rebound read-only: a write under the new key → REM_ACCESS_ERR"
            .into(),
    )
}

/// Type 2: bound by a BIND_MW request, reachable through the binding QP only, freed by
/// LOCAL_INV and by the peer's SEND_WITH_INV.
fn type2<E: Env>(env: &E) -> Outcome {
    let flags = send_flags::SIGNALED;
    // LOCAL_INV.
    let (_p, a, b) = rc_pair(env)?;
    let r = region(&b)?;
    let mw =
        b.pd.alloc_mw_type(MwType::Type2)
            .map_err(verr("MW_ALLOCATE(type 2)"))?;
    ensure!(mw.kind() == MwType::Type2, "MW_ALLOCATE kind");
    let key =
        b.qp.post_bind_mw(&mw, 1, flags, &r, 0, 4096, REMOTE_RW)
            .map_err(|e| format!("BIND_MW: {e:?}"))?;
    completed(&b, (1, WcStatus::Success, WcOpcode::BindMw), "BIND_MW")?;
    let st = write(&a, 2, 64, r.addr() + 512, key)?;
    ensure!(st == WcStatus::Success, "write through the window: {st:?}");
    b.qp.invalidate(3, key, flags)
        .map_err(|e| format!("LOCAL_INV: {e:?}"))?;
    completed(&b, (3, WcStatus::Success, WcOpcode::LocalInv), "LOCAL_INV")?;
    let st = write(&a, 4, 64, r.addr() + 512, key)?;
    ensure!(
        st == WcStatus::RemAccessErr,
        "write after LOCAL_INV: {st:?}, want REM_ACCESS_ERR"
    );
    // SEND_WITH_INV.
    let (_p, a, b) = rc_pair(env)?;
    let r = region(&b)?;
    let mw =
        b.pd.alloc_mw_type(MwType::Type2)
            .map_err(verr("MW_ALLOCATE(type 2)"))?;
    let key =
        b.qp.post_bind_mw(&mw, 1, flags, &r, 0, 4096, REMOTE_RW)
            .map_err(|e| format!("BIND_MW: {e:?}"))?;
    completes_as(&b, WcStatus::Success, "BIND_MW")?;
    b.post_recv(10, 8192, 64, "post_recv")?;
    let sg = [a.mr.sge(0, 16)];
    let mut inv = SendWr::new(5, WrOpcode::SendWithInv);
    inv.sg_list = &sg;
    inv.send_flags = flags;
    inv.imm_or_inv = key;
    a.qp.post_send(&inv)
        .map_err(|e| format!("SEND_WITH_INV: {e:?}"))?;
    completes_as(&a, WcStatus::Success, "SEND_WITH_INV")?;
    let w = poll_one(&b.cq, "receive of SEND_WITH_INV")?;
    ensure!(
        w.status == WcStatus::Success && w.wc_flags & wc_flags::WITH_INV != 0 && w.imm_data == key,
        "receive: {:?}, flags {:#x}, invalidated rkey {:#x}; want WITH_INV of {key:#x}",
        w.status,
        w.wc_flags,
        w.imm_data
    );
    let st = write(&a, 6, 64, r.addr(), key)?;
    ensure!(
        st == WcStatus::RemAccessErr,
        "write after SEND_WITH_INV: {st:?}, want REM_ACCESS_ERR"
    );
    Ok(
        "type 2 window bound by BIND_MW: a write through it lands; LOCAL_INV (completion \
        LOCAL_INV) and the peer's SEND_WITH_INV (receive WITH_INV, invalidated rkey) free it: \
        a later write → REM_ACCESS_ERR"
            .into(),
    )
}

/// Misuses: a type 1 window bound by a BIND_MW request, a bind onto a region without bind
/// rights, a LOCAL_INV of a type 1 window, and deregistering a region with a window bound.
fn bad_flow<E: Env>(env: &E) -> Outcome {
    let flags = send_flags::SIGNALED;
    let mut seen = Vec::new();
    // Type 1 through a posted BIND_MW.
    let (_p, _a, b) = rc_pair(env)?;
    let r = region(&b)?;
    let mw = b.pd.alloc_mw().map_err(verr("MW_ALLOCATE"))?;
    b.qp.post_bind_mw(&mw, 1, flags, &r, 0, 64, REMOTE_RW)
        .map_err(|e| format!("BIND_MW: {e:?}"))?;
    completes_as(
        &b,
        WcStatus::MwBindErr,
        "BIND_MW request on a type 1 window",
    )?;
    seen.push("BIND_MW request on a type 1 window → MW_BIND_ERR");
    // A region without MW_BIND.
    let (_p, _a, b) = rc_pair(env)?;
    let mw = b.pd.alloc_mw().map_err(verr("MW_ALLOCATE"))?;
    b.qp.bind_mw(&mw, 1, flags, &b.mr, 0, 64, REMOTE_RW)
        .map_err(|e| format!("bind_mw: {e:?}"))?;
    completes_as(
        &b,
        WcStatus::MwBindErr,
        "bind onto a region without MW_BIND",
    )?;
    seen.push("bind onto a region without MW_BIND → MW_BIND_ERR");
    // LOCAL_INV of a type 1 window; the region cannot be deregistered while it is bound.
    let (p, a, b) = rc_pair(env)?;
    let r = region(&b)?;
    let mw = b.pd.alloc_mw().map_err(verr("MW_ALLOCATE"))?;
    let key =
        b.qp.bind_mw(&mw, 1, flags, &r, 0, 64, REMOTE_RW)
            .map_err(|e| format!("bind_mw: {e:?}"))?;
    completes_as(&b, WcStatus::Success, "bind")?;
    let id = WV_IO_ID::new(b.pd.id(), r.lkey());
    let st = file(&p)
        .device_io_control(WV_IOCTL_MEMORY_DEREGISTER, id.as_bytes(), 0)
        .wait();
    ensure!(
        st.status == NtStatus::UNSUCCESSFUL.0,
        "MEMORY_DEREGISTER of a region with a window bound: {}, want STATUS_UNSUCCESSFUL",
        NtStatus(st.status)
    );
    seen.push("MEMORY_DEREGISTER of a region with a window bound → UNSUCCESSFUL");
    b.qp.invalidate(2, key, flags)
        .map_err(|e| format!("LOCAL_INV: {e:?}"))?;
    completes_as(&b, WcStatus::LocQpOpErr, "LOCAL_INV of a type 1 window")?;
    seen.push("LOCAL_INV of a type 1 window → LOC_QP_OP_ERR");
    let _ = a;
    Ok(seen.join(", "))
}
