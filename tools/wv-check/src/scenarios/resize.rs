//! CQ and SRQ resize (rdma-core tests/test_cq.py resize, test_srq.py resize): up and down, the
//! completions and receives waiting carried over in order, the sizes that cannot work refused.

use wv_abi::NtStatus;
use wv_abi::consts::WV_IO_SRQ_RESIZE;
use wv_client::verbs::{QpInit, QpType, RecvWr, SendWr, WcStatus, WrOpcode, send_flags};

use super::fixture::*;
use super::raw::ensure;
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "cq-resize-keeps-completions",
            run: cq_resize,
            clock: Clock::Own,
        },
        Scenario {
            name: "srq-resize-keeps-receives",
            run: srq_resize,
            clock: Clock::Own,
        },
    ]
}

/// Posts signalled 8-byte `opcode` work requests with the ids `ids` from `a` to its peer `to`
/// (an RDMA write lands at the start of `to`'s region), waiting while the send queue is full.
fn burst<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    a: &End<F>,
    to: &End<F>,
    opcode: WrOpcode,
    ids: std::ops::Range<u64>,
) -> Result<(), String> {
    let sg = [a.mr.sge(0, 8)];
    for i in ids {
        let mut wr = SendWr::new(i, opcode);
        wr.sg_list = &sg;
        wr.send_flags = send_flags::SIGNALED;
        if opcode == WrOpcode::RdmaWrite {
            wr.remote_addr = to.mr.addr();
            wr.rkey = to.mr.rkey();
        }
        post_send_waiting(&a.qp, &wr).map_err(|e| format!("{opcode:?} {i}: {e:?}"))?;
    }
    Ok(())
}

/// Ten RDMA writes complete into A's CQ and stay unpolled; CQ_RESIZE down to 16 and up to
/// 512 keeps them; 8 (fewer than waiting) and more than MaxCqEntries are refused; then 60 more
/// completions fit that the original 64 entries would not have held with the first ten.
fn cq_resize<E: Env>(env: &E) -> Outcome {
    let (_p, a, b) = rc_pair(env)?;
    let before = a.cq.entries();
    let post = |from: u64, n: u64| burst(&a, &b, WrOpcode::RdmaWrite, from..from + n);
    post(0, 10)?;
    let small = a.cq.resize(16).map_err(verr("CQ_RESIZE(16)"))?;
    ensure!(small >= 16 && small < before, "CQ_RESIZE(16) → {small}");
    match a.cq.resize(8) {
        Err(e) if e.status == NtStatus::UNSUCCESSFUL => {}
        other => return Err(format!("CQ_RESIZE(8) with 10 waiting: {other:?}").into()),
    }
    let max =
        a.pd.device()
            .query()
            .map_err(verr("DEVICE_QUERY"))?
            .MaxCqEntries;
    match a.cq.resize(max.saturating_add(1)) {
        Err(e) if e.status == NtStatus::UNSUCCESSFUL => {}
        other => return Err(format!("CQ_RESIZE(MaxCqEntries + 1): {other:?}").into()),
    }
    let big = a.cq.resize(512).map_err(verr("CQ_RESIZE(512)"))?;
    ensure!(big >= 512, "CQ_RESIZE(512) → {big}");
    post(10, 60)?;
    ensure!(!a.cq.overrun(), "the CQ overran after growing");
    let ids: Vec<u64> = poll_n(&a.cq, 70, "A's CQ")?
        .iter()
        .map(|w| w.wr_id)
        .collect();
    ensure!(
        ids == (0..70).collect::<Vec<_>>(),
        "completions out of order after the resizes: {ids:?}"
    );
    Ok(format!(
        "10 completions waiting in {before} entries: resized to {small}, 8 and MaxCqEntries + 1 \
         refused (UNSUCCESSFUL), resized to {big}; 60 more; all 70 polled in order"
    ))
}

/// An SRQ of 4 with 4 receives posted grows to 64 (SRQ_MODIFY with MaxWr; WV_IO_SRQ_RESIZE
/// advertised): the four stay, 20 more are posted, 24 sends land in order; then it shrinks to
/// 8 with 2 waiting, and refuses 1.
fn srq_resize<E: Env>(env: &E) -> Outcome {
    let (_p, a, b) = pair(env, Shape::rc())?;
    let flags =
        b.pd.device()
            .query()
            .map_err(verr("DEVICE_QUERY"))?
            .CapabilityFlags;
    ensure!(
        flags & WV_IO_SRQ_RESIZE != 0,
        "CapabilityFlags {flags:#x} without WV_IO_SRQ_RESIZE"
    );
    let srq = b.pd.create_srq(4, 1, 0).map_err(verr("SRQ_CREATE"))?;
    let mut init = QpInit::new(QpType::Rc, &b.cq, &b.cq);
    init.srq = Some(&srq);
    let qb = b.pd.create_qp(&init).map_err(verr("QP_CREATE(SRQ)"))?;
    let b2 = End {
        pd: b.pd.clone(),
        cq: b.cq.clone(),
        qp: qb,
        buf: b.buf.clone(),
        mr: b
            .pd
            .reg_mr(&b.buf, ACCESS_ALL)
            .map_err(verr("MEMORY_REGISTER"))?,
        gid: b.gid,
    };
    connect_rc(&a, &b2)?;
    let post = |from: u64, n: u64| -> Result<(), String> {
        for i in from..from + n {
            let sg = [b2.mr.sge(i as usize * 16, 16)];
            srq.post_recv(&RecvWr {
                wr_id: i,
                sg_list: &sg,
            })
            .map_err(|e| format!("SRQ receive {i}: {e:?}"))?;
        }
        Ok(())
    };
    let send = |from: u64, n: u64| burst(&a, &b2, WrOpcode::Send, from..from + n);
    post(0, 4)?;
    srq.modify(64, 0).map_err(verr("SRQ_MODIFY(64)"))?;
    let q = srq.query().map_err(verr("SRQ_QUERY"))?;
    ensure!(
        q.MaxWr >= 64,
        "SRQ_QUERY MaxWr {} after growing to 64",
        q.MaxWr
    );
    post(4, 20)?;
    send(0, 24)?;
    poll_n(&a.cq, 24, "A's sends")?;
    let wcs = poll_n(&b2.cq, 24, "SRQ receives")?;
    let ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
    ensure!(
        ids == (0..24).collect::<Vec<_>>() && wcs.iter().all(|w| w.status == WcStatus::Success),
        "receives after growing: {ids:?}"
    );
    post(24, 2)?;
    match srq.modify(1, 0) {
        Err(e) if e.status == NtStatus::UNSUCCESSFUL => {}
        other => return Err(format!("SRQ_MODIFY(1) with 2 waiting: {other:?}").into()),
    }
    srq.modify(8, 0).map_err(verr("SRQ_MODIFY(8)"))?;
    send(24, 2)?;
    poll_n(&a.cq, 2, "A's sends")?;
    let ids: Vec<u64> = poll_n(&b2.cq, 2, "SRQ receives")?
        .iter()
        .map(|w| w.wr_id)
        .collect();
    ensure!(ids == vec![24, 25], "receives after shrinking: {ids:?}");
    Ok(format!(
        "WV_IO_SRQ_RESIZE advertised; SRQ of 4 with 4 receives grown to {} (the 4 kept, 20 more \
         posted, 24 sends received in order); shrunk to 8 with 2 waiting (kept); 1 refused \
         (UNSUCCESSFUL)",
        q.MaxWr
    ))
}
