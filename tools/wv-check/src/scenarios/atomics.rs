//! Remote atomics (rdma-core tests/test_atomic.py): compare-and-swap and fetch-and-add traffic
//! both ways with the original values checked, and the bad flows — a misaligned target, a
//! region or QP without remote atomic access, bad keys, a local buffer that is not 8 bytes.
//! A device that reports `ATOMIC_NONE` is skipped, as rdma-core skips it.

use wv_client::raw::RawFile;
use wv_client::verbs::{
    Buffer, Mr, PostError, Sge, WV_ACCESS_LOCAL_WRITE, WV_ACCESS_REMOTE_ATOMIC,
    WV_ACCESS_REMOTE_READ, WV_ACCESS_REMOTE_WRITE, WcOpcode, WcStatus, send_flags,
};

use super::fixture::*;
use super::raw::ensure;
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Problem, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "atomic-cas-fetch-add",
            run: traffic,
            clock: Clock::Own,
        },
        Scenario {
            name: "atomic-bad-flow",
            run: bad_flow,
            clock: Clock::Own,
        },
    ]
}

/// The QPs' remote access for atomic traffic.
const QP_ATOMIC: u32 = WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ | WV_ACCESS_REMOTE_ATOMIC;
/// A target region's access.
const MR_ATOMIC: u32 = WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_ATOMIC;

/// Two ends connected for atomics, after checking the device advertises them.
fn atomic_pair<E: Env>(env: &E, qp_access: u32) -> Result<Pair<E::File>, Problem> {
    let (p, a, b) = pair(env, Shape::rc())?;
    let attr = a.pd.device().query().map_err(verr("DEVICE_QUERY"))?;
    if attr.AtomicCapability == 0 {
        return Err(Problem::Skip(
            "the device reports ATOMIC_NONE (rdma-core skips atomics then)".into(),
        ));
    }
    connect_rc_with(&a, &b, qp_access, 4)?;
    Ok((p, a, b))
}

/// A second registration of an end's buffer, for the atomic target.
fn target<F: RawFile + Send + Sync + 'static>(e: &End<F>, access: u32) -> Result<Mr, String> {
    e.pd.reg_mr(&e.buf, access)
        .map_err(verr("MEMORY_REGISTER(atomic)"))
}

fn word(buf: &Buffer, off: usize) -> Result<u64, String> {
    let mut w = [0u8; 8];
    buf.read(off, &mut w).map_err(|e| e.to_string())?;
    Ok(u64::from_ne_bytes(w))
}

fn set_word(buf: &Buffer, off: usize, v: u64) -> Result<(), String> {
    buf.write(off, &v.to_ne_bytes()).map_err(|e| e.to_string())
}

/// Ten rounds each way, as rdma-core's atomic_traffic: fetch-and-add, a compare-and-swap that
/// matches and one that does not; every original value and the final memory checked.
fn traffic<E: Env>(env: &E) -> Outcome {
    let (_p, a, b) = atomic_pair(env, QP_ATOMIC)?;
    let flags = send_flags::SIGNALED;
    for (from, to, name) in [(&a, &b, "A→B"), (&b, &a, "B→A")] {
        let t = target(to, MR_ATOMIC)?;
        // The word at offset 4096 of the peer's buffer; results land at 0.. of ours.
        let at = t.addr() + 4096;
        set_word(&to.buf, 4096, 1000)?;
        let mut want = 1000u64;
        for round in 0..10u64 {
            let id = round * 3;
            // Fetch-and-add wraps modulo 2^64, as the swapped values below make it do.
            let after = want.wrapping_add(round + 1);
            from.qp
                .fetch_add(id, from.mr.sge(0, 8), at, t.rkey(), round + 1, flags)
                .map_err(|e| format!("{name}: fetch_add: {e:?}"))?;
            from.qp
                .compare_swap(
                    id + 1,
                    from.mr.sge(8, 8),
                    at,
                    t.rkey(),
                    after,
                    !round,
                    flags,
                )
                .map_err(|e| format!("{name}: compare_swap: {e:?}"))?;
            from.qp
                .compare_swap(id + 2, from.mr.sge(16, 8), at, t.rkey(), 7, 8, flags)
                .map_err(|e| format!("{name}: compare_swap: {e:?}"))?;
            let wcs = poll_n(&from.cq, 3, name)?;
            let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
            let expect = vec![
                (id, WcStatus::Success, WcOpcode::FetchAdd),
                (id + 1, WcStatus::Success, WcOpcode::CompSwap),
                (id + 2, WcStatus::Success, WcOpcode::CompSwap),
            ];
            ensure!(
                got == expect,
                "{name} round {round}: {got:?}, want {expect:?}"
            );
            let (fa, cs, miss) = (
                word(&from.buf, 0)?,
                word(&from.buf, 8)?,
                word(&from.buf, 16)?,
            );
            ensure!(
                (fa, cs, miss) == (want, after, !round),
                "{name} round {round}: original values {fa}, {cs}, {miss}; want {want}, \
                 {after}, {}",
                !round
            );
            // The matching compare-and-swap stored !round; the next round adds to it.
            want = !round;
            ensure!(
                word(&to.buf, 4096)? == want,
                "{name} round {round}: target {} after the swap, want {want}",
                word(&to.buf, 4096)?
            );
        }
        cq_empty(&to.cq, "target (one-sided)")?;
    }
    Ok(
        "ATOMIC_HCA advertised; ten rounds each way of fetch-and-add, a matching and a \
        mismatching compare-and-swap: FETCH_ADD/COMP_SWAP completions in order, every original \
        value and the target word exact, nothing at the target's CQ"
            .into(),
    )
}

/// One bad atomic on a fresh connection: its completion status, and the requester in ERR.
fn one_bad<E: Env>(
    env: &E,
    qp_access: u32,
    mr_access: u32,
    misalign: u64,
    mangle: Mangle,
) -> Result<WcStatus, Problem> {
    let (_p, a, b) = atomic_pair(env, qp_access)?;
    let t = target(&b, mr_access)?;
    let mut sge = a.mr.sge(0, 8);
    let mut rkey = t.rkey();
    mangle(&mut sge, &mut rkey);
    a.qp.fetch_add(
        1,
        sge,
        t.addr() + 64 + misalign,
        rkey,
        1,
        send_flags::SIGNALED,
    )
    .map_err(|e| format!("fetch_add: {e:?}"))?;
    let w = poll_one(&a.cq, "bad atomic")?;
    ensure!(
        word(&b.buf, 64)? == 0 && word(&b.buf, 68)? == 0,
        "the target changed although the atomic failed"
    );
    Ok(w.status)
}

/// Spoils a request's local SGE or rkey (or leaves them).
type Mangle = fn(&mut Sge, &mut u32);

/// What a bad-flow case changes: its name, the QP and region access, the target's
/// misalignment, the key spoiler, and the completion status it must end with.
type BadCase = (&'static str, u32, u32, u64, Mangle, WcStatus);

fn bad_flow<E: Env>(env: &E) -> Outcome {
    let keep = |_: &mut Sge, _: &mut u32| {};
    let cases: [BadCase; 5] = [
        (
            "misaligned target",
            QP_ATOMIC,
            MR_ATOMIC,
            4,
            keep,
            WcStatus::RemInvReqErr,
        ),
        (
            "region without remote atomic",
            QP_ATOMIC,
            WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_READ,
            0,
            keep,
            WcStatus::RemAccessErr,
        ),
        (
            "QP without remote atomic",
            WV_ACCESS_REMOTE_WRITE,
            MR_ATOMIC,
            0,
            keep,
            WcStatus::RemAccessErr,
        ),
        (
            "bad rkey",
            QP_ATOMIC,
            MR_ATOMIC,
            0,
            |_, rkey| *rkey ^= 0x100,
            WcStatus::RemAccessErr,
        ),
        (
            "bad lkey",
            QP_ATOMIC,
            MR_ATOMIC,
            0,
            |sge, _| sge.lkey ^= 0x100,
            WcStatus::LocProtErr,
        ),
    ];
    let mut seen = Vec::new();
    for (what, qp, mr, misalign, mangle, want) in cases {
        let got = one_bad(env, qp, mr, misalign, mangle)?;
        ensure!(got == want, "{what}: {got:?}, want {want:?}");
        seen.push(format!("{what} → {want:?}"));
    }
    // The local buffer of an atomic is 8 bytes (EINVAL at post time).
    let (_p, a, b) = atomic_pair(env, QP_ATOMIC)?;
    let t = target(&b, MR_ATOMIC)?;
    let r = a.qp.fetch_add(
        1,
        a.mr.sge(0, 4),
        t.addr(),
        t.rkey(),
        1,
        send_flags::SIGNALED,
    );
    ensure!(
        r == Err(PostError::AtomicLength) && PostError::AtomicLength.errno() == 22,
        "fetch_add into 4 bytes: {r:?}, want EINVAL (AtomicLength)"
    );
    Ok(format!(
        "{}; a 4-byte result buffer → EINVAL at post; the target unchanged each time",
        seen.join(", ")
    ))
}
