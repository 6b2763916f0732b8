//! The rdma-core bad-flow conformance cases (device-model-and-perftest.md §6, tests/test_qpex.py,
//! test_mr.py, test_atomic.py): posting in the wrong state, a full receive queue, too many SGEs,
//! bad keys ending in error completions and a flushed QP, and MR access rules.

use wv_abi::NtStatus;
use wv_client::verbs::{
    PostError, QpAttr, QpState, RecvWr, SendWr, Sge, WV_ACCESS_LOCAL_WRITE,
    WV_ACCESS_REMOTE_ATOMIC, WV_ACCESS_REMOTE_READ, WcStatus, WrOpcode,
};

use super::fixture::*;
use super::raw::ensure;
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Scenario};

/// errno values `ibv_post_*` return.
const EINVAL: i32 = 22;
const ENOMEM: i32 = 12;

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "badflow-post-in-reset",
            run: post_in_reset,
            clock: Clock::Own,
        },
        Scenario {
            name: "badflow-rq-full",
            run: rq_full,
            clock: Clock::Own,
        },
        Scenario {
            name: "badflow-too-many-sge",
            run: too_many_sge,
            clock: Clock::Own,
        },
        Scenario {
            name: "badflow-bad-lkey",
            run: bad_lkey,
            clock: Clock::Own,
        },
        Scenario {
            name: "badflow-bad-rkey",
            run: bad_rkey,
            clock: Clock::Own,
        },
        Scenario {
            name: "badflow-mr-access",
            run: mr_access,
            clock: Clock::Own,
        },
    ]
}

fn errno_of(r: Result<(), PostError>, what: &str, want: i32) -> Result<PostError, String> {
    match r {
        Ok(()) => Err(format!("{what}: accepted, want errno {want}")),
        Err(e) if e.errno() == want => Ok(e),
        Err(e) => Err(format!(
            "{what}: {e:?} (errno {}), want errno {want}",
            e.errno()
        )),
    }
}

/// A post (`what`) with more SGEs than the queue takes was refused with EINVAL, as
/// `TooManySge`.
fn too_many_sge_refused(r: Result<(), PostError>, what: &str) -> Result<(), String> {
    let e = errno_of(r, what, EINVAL)?;
    ensure!(
        e == PostError::TooManySge,
        "{what}: refused as {e:?}, want TooManySge"
    );
    Ok(())
}

/// post_recv and post_send on a RESET QP → EINVAL (test_qpex.py post_rq/sq_state_bad_flow);
/// post_send in INIT and RTR too (sends need RTS), while post_recv in INIT is allowed.
fn post_in_reset<E: Env>(env: &E) -> Outcome {
    let (_p, a, b) = pair(env, Shape::rc())?;
    let sge = [a.mr.sge(0, 64)];
    let recv = RecvWr {
        wr_id: 1,
        sg_list: &sge,
    };
    let mut send = SendWr::new(2, WrOpcode::Send);
    send.sg_list = &sge;
    ensure!(a.qp.state() == QpState::Reset, "new QP not in RESET");
    errno_of(a.qp.post_recv(&recv), "post_recv in RESET", EINVAL)?;
    errno_of(a.qp.post_send(&send), "post_send in RESET", EINVAL)?;
    a.qp.modify(&QpAttr::init(1, 0, 0))
        .map_err(verr("QP_MODIFY(INIT)"))?;
    errno_of(a.qp.post_send(&send), "post_send in INIT", EINVAL)?;
    a.qp.post_recv(&recv)
        .map_err(|e| format!("post_recv in INIT refused: {e:?}"))?;
    cq_empty(&a.cq, "after refused posts")?;
    let _ = b;
    Ok(
        "post_recv and post_send in RESET → EINVAL, post_send in INIT → EINVAL, post_recv in \
        INIT accepted; refused posts leave no completion"
            .into(),
    )
}

/// Posting one receive more than the queue holds → ENOMEM (test_qpex.py full_rq_bad_flow).
fn rq_full<E: Env>(env: &E) -> Outcome {
    let (_p, a, _b) = pair(env, Shape::rc())?;
    a.qp.modify(&QpAttr::init(1, 0, 0))
        .map_err(verr("QP_MODIFY(INIT)"))?;
    let depth = a.qp.query().map_err(verr("QP_QUERY"))?.ReceiveDepth;
    ensure!(depth >= 1, "QP_QUERY: ReceiveDepth 0");
    let sge = [a.mr.sge(0, 64)];
    for i in 0..depth {
        a.qp.post_recv(&RecvWr {
            wr_id: u64::from(i),
            sg_list: &sge,
        })
        .map_err(|e| format!("receive {i} of {depth}: {e:?}"))?;
    }
    errno_of(
        a.qp.post_recv(&RecvWr {
            wr_id: 999,
            sg_list: &sge,
        }),
        &format!("receive {} into a queue of {depth}", depth + 1),
        ENOMEM,
    )?;
    Ok(format!(
        "{depth} receives (QP_QUERY's ReceiveDepth) accepted, receive {} → ENOMEM",
        depth + 1
    ))
}

/// More SGEs than the queue was created with → EINVAL (test_qpex.py
/// create_rq_with_larger_sgl_bad_flow), for receives and for sends.
fn too_many_sge<E: Env>(env: &E) -> Outcome {
    let (_p, a, _b) = rc_pair(env)?;
    let attr = a.qp.query().map_err(verr("QP_QUERY"))?;
    let (rs, ss) = (attr.ReceiveSge as usize, attr.SendSge as usize);
    let sges: Vec<Sge> = (0..rs.max(ss) + 1).map(|i| a.mr.sge(64 * i, 8)).collect();
    too_many_sge_refused(
        a.qp.post_recv(&RecvWr {
            wr_id: 1,
            sg_list: &sges[..rs + 1],
        }),
        &format!("post_recv with {} SGEs (max {rs})", rs + 1),
    )?;
    let mut send = SendWr::new(2, WrOpcode::Send);
    send.sg_list = &sges[..ss + 1];
    too_many_sge_refused(
        a.qp.post_send(&send),
        &format!("post_send with {} SGEs (max {ss})", ss + 1),
    )?;
    // Exactly the maximum is fine.
    a.qp.post_recv(&RecvWr {
        wr_id: 3,
        sg_list: &sges[..rs],
    })
    .map_err(|e| format!("post_recv with {rs} SGEs: {e:?}"))?;
    cq_empty(&a.cq, "after refused posts")?;
    Ok(format!(
        "post_recv with {} SGEs (max {rs}) and post_send with {} (max {ss}) → EINVAL \
         (TooManySge); exactly the maximum accepted",
        rs + 1,
        ss + 1
    ))
}

/// A send with a bad lkey completes with LOC_PROT_ERR, the QP goes to ERR, and the rest of its
/// work (later sends, posted receives) is flushed with WR_FLUSH_ERR.
fn bad_lkey<E: Env>(env: &E) -> Outcome {
    let (_p, a, b) = rc_pair(env)?;
    b.post_recv(50, 0, 4096, "B post_recv")?;
    a.post_recv(60, 8192, 64, "A post_recv")?;
    let bad = [Sge {
        addr: a.buf.addr(),
        length: 64,
        lkey: a.mr.lkey() ^ 0x5A5A_0000,
    }];
    let good = [a.mr.sge(0, 64)];
    let mut first = SendWr::new(1, WrOpcode::Send);
    first.sg_list = &bad;
    let mut second = SendWr::new(2, WrOpcode::Send);
    second.sg_list = &good;
    let mut third = SendWr::new(3, WrOpcode::Send);
    third.sg_list = &good;
    a.qp.post_send_list(&[first, second, third])
        .map_err(|(i, e)| format!("post_send_list: request {i} refused: {e:?}"))?;
    let wcs = poll_n(&a.cq, 4, "A's CQ")?;
    let mut got: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    got.sort_by_key(|g| g.0);
    let want = vec![
        (1, WcStatus::LocProtErr),
        (2, WcStatus::WrFlushErr),
        (3, WcStatus::WrFlushErr),
        (60, WcStatus::WrFlushErr),
    ];
    ensure!(
        got == want,
        "completions (wr_id, status) {got:?}, want {want:?}"
    );
    ensure!(
        wcs[0].wr_id == 1,
        "the LOC_PROT_ERR completion is not first: {:?}",
        wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>()
    );
    let state = a.qp.query().map_err(verr("QP_QUERY"))?.QpState;
    ensure!(
        state == QpState::Error as u8,
        "QP state {state} after a local protection error, want ERR (6)"
    );
    // Posts in ERR are accepted and flushed at once.
    let mut late = SendWr::new(4, WrOpcode::Send);
    late.sg_list = &good;
    a.qp.post_send(&late)
        .map_err(|e| format!("post_send in ERR refused: {e:?}"))?;
    let w = poll_one(&a.cq, "send posted in ERR")?;
    ensure!(
        (w.wr_id, w.status) == (4, WcStatus::WrFlushErr),
        "send posted in ERR: ({}, {:?}), want (4, WrFlushErr)",
        w.wr_id,
        w.status
    );
    cq_empty(&b.cq, "B (nothing was delivered)")?;
    Ok(
        "send with a bad lkey → LOC_PROT_ERR first, the 2 later sends and the posted receive → \
        WR_FLUSH_ERR, QP_QUERY says ERR, a send posted in ERR is flushed at once, the peer \
        received nothing"
            .into(),
    )
}

/// An RDMA write with a bad rkey completes with REM_ACCESS_ERR at the requester, which goes
/// to ERR and flushes the rest.
fn bad_rkey<E: Env>(env: &E) -> Outcome {
    let (_p, a, b) = rc_pair(env)?;
    b.buf.fill(0xEE);
    let src = [a.mr.sge(0, 256)];
    let mut w1 = SendWr::new(1, WrOpcode::RdmaWrite);
    w1.sg_list = &src;
    w1.remote_addr = b.mr.addr();
    w1.rkey = b.mr.rkey() ^ 0x0100_0000;
    let mut w2 = SendWr::new(2, WrOpcode::RdmaWrite);
    w2.sg_list = &src;
    w2.remote_addr = b.mr.addr();
    w2.rkey = b.mr.rkey();
    a.qp.post_send_list(&[w1, w2])
        .map_err(|(i, e)| format!("post_send_list: request {i} refused: {e:?}"))?;
    let wcs = poll_n(&a.cq, 2, "A's CQ")?;
    let got: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    let want = vec![(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)];
    ensure!(got == want, "completions {got:?}, want {want:?}");
    let state = a.qp.query().map_err(verr("QP_QUERY"))?.QpState;
    ensure!(
        state == QpState::Error as u8,
        "requester QP state {state} after a remote access error, want ERR (6)"
    );
    ensure!(
        b.buf.to_vec()[..256].iter().all(|&x| x == 0xEE),
        "the target buffer changed although both writes failed"
    );
    Ok(
        "RDMA write with a bad rkey → REM_ACCESS_ERR, the next write → WR_FLUSH_ERR, requester \
        in ERR, target memory untouched"
            .into(),
    )
}

/// MR access rules (ib_check_mr_access, test_mr.py bad flags): remote write or remote atomic
/// without local write is refused; remote read alone and local write alone are fine.
fn mr_access<E: Env>(env: &E) -> Outcome {
    let (_p, a, _b) = pair(env, Shape::rc())?;
    // IB_AC_RDMA_WRITE alone (the user-side WV_ACCESS_REMOTE_WRITE already adds local write).
    const RDMA_WRITE_ONLY: u32 = 0x2;
    for (access, what) in [
        (RDMA_WRITE_ONLY, "remote write without local write"),
        (WV_ACCESS_REMOTE_ATOMIC, "remote atomic without local write"),
    ] {
        match a.pd.reg_mr(&a.buf, access) {
            Ok(_) => return Err(format!("MEMORY_REGISTER({what}) accepted").into()),
            Err(e) => ensure!(
                e.status == NtStatus::UNSUCCESSFUL,
                "MEMORY_REGISTER({what}): {e}, want STATUS_UNSUCCESSFUL"
            ),
        }
    }
    for (access, what) in [
        (WV_ACCESS_REMOTE_READ, "remote read"),
        (WV_ACCESS_LOCAL_WRITE, "local write"),
        (
            RDMA_WRITE_ONLY | WV_ACCESS_LOCAL_WRITE,
            "remote + local write",
        ),
        (0, "no access"),
    ] {
        a.pd.reg_mr(&a.buf, access)
            .map_err(|e| format!("MEMORY_REGISTER({what}): {e}"))?;
    }
    Ok(
        "MEMORY_REGISTER with remote write or remote atomic but no local write → UNSUCCESSFUL; \
        remote read, local write, remote+local write and no access accepted"
            .into(),
    )
}
