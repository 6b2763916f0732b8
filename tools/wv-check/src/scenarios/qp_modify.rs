//! QP_MODIFY, which this driver runs on a work item (FIFO per QP), or in the caller's thread
//! while the device's commands measure much shorter than a hand-off to a worker: it pends or
//! completes at once, several modifies apply in issue order, and QP_CANCEL / CancelIoEx end the
//! ones still queued with CANCELLED. Cancellation races the work item, so the checks are the
//! invariants that hold whatever the timing: every request ends exactly once with SUCCESS or
//! CANCELLED, the successes are a prefix of the issue order, and the QP's final state is the
//! target of the last successful modify.
use wv_abi::consts::*;
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_QP_ATTRIBUTES};
use wv_client::raw::{IoStatus, RawFile, RawIo};

use super::raw::*;
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "qp-modify-order",
            run: modify_order,
            clock: Clock::Own,
        },
        Scenario {
            name: "qp-modify-cancel",
            run: modify_cancel,
            clock: Clock::Own,
        },
    ]
}

fn state_name(s: u8) -> &'static str {
    match s {
        WV_IO_QP_STATE_RESET => "RESET",
        WV_IO_QP_STATE_INIT => "INIT",
        WV_IO_QP_STATE_RTR => "RTR",
        WV_IO_QP_STATE_RTS => "RTS",
        WV_IO_QP_STATE_SQD => "SQD",
        WV_IO_QP_STATE_SQERROR => "SQE",
        WV_IO_QP_STATE_ERROR => "ERR",
        _ => "?",
    }
}

fn check_state<F: RawFile>(f: &F, qp: u64, want: u8, what: &str) -> Result<(), String> {
    let attr: WV_IO_QP_ATTRIBUTES = query_qp(f, qp)?;
    ensure!(
        attr.QpState == want && attr.CurrentQpState == want,
        "{what}: QP_QUERY says {} (current {}), want {}",
        state_name(attr.QpState),
        state_name(attr.CurrentQpState),
        state_name(want)
    );
    Ok(())
}

/// The soft HCA's user-mode provider gets its QP-state word in the modify output (the first
/// four bytes: the new `WV_IO_QP_STATE_*`); other providers' bytes are opaque to us.
fn soft_uvp<F: RawFile>(f: &F, guid: u64) -> Result<bool, String> {
    let st = ok(f, WV_IOCTL_LIBRARY_QUERY, &u64_in(guid), 28)?;
    Ok(st.output.starts_with(b"softhcau\0"))
}

/// INIT, RTR and RTS issued back to back without waiting (the RTR needs the INIT applied
/// first, the RTS the RTR): each pends or completes at once, all succeed with Information = output length, and the
/// QP ends in RTS; an illegal transition afterwards fails and changes nothing.
fn modify_order<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let guid = env.guid(&f)?;
    let o = objects(&f, guid)?;
    let gid = gid0(&f, o.dev)?;
    let qpn = u32::from_be(query_qp(&f, o.qp)?.Qpn);
    let soft = soft_uvp(&f, guid)?;
    check_state(&f, o.qp, WV_IO_QP_STATE_RESET, "new QP")?;
    let steps = [WV_IO_QP_STATE_INIT, WV_IO_QP_STATE_RTR, WV_IO_QP_STATE_RTS];
    let mut ios = Vec::new();
    let mut pended = 0;
    for &to in &steps {
        let io = submit(
            &f,
            WV_IOCTL_QP_MODIFY,
            &modify_in(o.qp, to, Some((qpn, gid))),
            8,
        );
        pended += usize::from(io.pending());
        ios.push((to, io));
    }
    for (to, io) in ios {
        let what = format!("QP_MODIFY(→{})", state_name(to));
        let st = wait(io, &what)?;
        expect_info(&st, NtStatus::SUCCESS, 8, &what)?;
        if soft {
            let word = st.output.get(..4).map(|b| b[0]);
            ensure!(
                word == Some(to),
                "{what}: UVP QP-state bytes {:?} do not say {}",
                st.output,
                state_name(to)
            );
        }
    }
    check_state(&f, o.qp, WV_IO_QP_STATE_RTS, "after INIT, RTR, RTS")?;
    // RTS → RTR is not a legal transition: the controller refuses, the QP stays in RTS.
    let st = modify(&f, o.qp, WV_IO_QP_STATE_RTR, Some((qpn, gid)), 8)?;
    expect(&st, NtStatus::UNSUCCESSFUL, "QP_MODIFY(RTS → RTR)")?;
    check_state(&f, o.qp, WV_IO_QP_STATE_RTS, "after a refused modify")?;
    // An empty output buffer is accepted (Information 0).
    let st = modify(&f, o.qp, WV_IO_QP_STATE_ERROR, None, 0)?;
    expect_info(&st, NtStatus::SUCCESS, 0, "QP_MODIFY(→ERR, no output)")?;
    check_state(&f, o.qp, WV_IO_QP_STATE_ERROR, "after →ERR")?;
    Ok(format!(
        "INIT, RTR, RTS issued without waiting ({pended} of 3 pended): each ends SUCCESS with \
         Information 8{}, QP_QUERY says RTS; RTS→RTR → UNSUCCESSFUL and the state stays RTS; \
         →ERR with no output buffer → SUCCESS, Information 0",
        if soft {
            " and the UVP state word of its target"
        } else {
            ""
        }
    ))
}

/// Checks a batch of modifies that were racing a cancel: each ended once with SUCCESS or
/// CANCELLED, successes first. Returns how many succeeded.
fn settle<I: RawIo>(ios: Vec<(u8, I)>) -> Result<(usize, Option<u8>), String> {
    let mut results: Vec<(u8, IoStatus)> = Vec::new();
    for (to, io) in ios {
        let what = format!("QP_MODIFY(→{})", state_name(to));
        results.push((to, wait(io, &what)?));
    }
    let mut successes = 0;
    let mut last = None;
    let mut seen_cancel = false;
    for (i, (to, st)) in results.iter().enumerate() {
        match NtStatus(st.status) {
            NtStatus::SUCCESS => {
                ensure!(
                    !seen_cancel,
                    "modify #{i} succeeded after an earlier one was cancelled: not FIFO"
                );
                successes += 1;
                last = Some(*to);
            }
            NtStatus::CANCELLED => seen_cancel = true,
            other => {
                return Err(format!(
                    "modify #{i} (→{}) ended with {other}, want SUCCESS or CANCELLED",
                    state_name(*to)
                ));
            }
        }
    }
    Ok((successes, last))
}

/// 16 modifies (INIT, RESET, INIT, …) issued on one QP, then QP_CANCEL at once; then the same
/// with CancelIoEx of the last one. Those that completed at once are successes like those the
/// work item ran before the cancel.
fn modify_cancel<E: Env>(env: &E) -> Outcome {
    let (f, o) = open_objects(env)?;
    const N: usize = 16;
    let target = |i: usize| {
        if i.is_multiple_of(2) {
            WV_IO_QP_STATE_INIT
        } else {
            WV_IO_QP_STATE_RESET
        }
    };
    let mut ios = Vec::new();
    for i in 0..N {
        ios.push((
            target(i),
            submit(&f, WV_IOCTL_QP_MODIFY, &modify_in(o.qp, target(i), None), 8),
        ));
    }
    ok(&f, WV_IOCTL_QP_CANCEL, &u64_in(o.qp), 0)?;
    let (done, last) = settle(ios)?;
    let want = last.unwrap_or(WV_IO_QP_STATE_RESET);
    check_state(&f, o.qp, want, "after QP_CANCEL")?;

    // CancelIoEx of the last of four: the others run; the last runs or ends CANCELLED.
    let start = if want == WV_IO_QP_STATE_INIT { 1 } else { 0 };
    let mut ios = Vec::new();
    for i in start..start + 4 {
        ios.push((
            target(i),
            submit(&f, WV_IOCTL_QP_MODIFY, &modify_in(o.qp, target(i), None), 8),
        ));
    }
    let cancelled_last = ios.last().is_some_and(|(_, io)| f.cancel_io_ex(io));
    let (done2, last2) = settle(ios)?;
    ensure!(
        done2 >= 3,
        "CancelIoEx of the last modify also ended an earlier one ({done2} of 4 succeeded)"
    );
    check_state(
        &f,
        o.qp,
        last2.unwrap_or(want),
        "after CancelIoEx of the last modify",
    )?;
    // The QP still takes modifies.
    let st = modify(&f, o.qp, WV_IO_QP_STATE_RESET, None, 8)?;
    expect(
        &st,
        NtStatus::SUCCESS,
        "QP_MODIFY(→RESET) after the cancels",
    )?;
    check_state(&f, o.qp, WV_IO_QP_STATE_RESET, "after →RESET")?;
    Ok(format!(
        "{N} modifies then QP_CANCEL: {done} ran, {} ended CANCELLED, successes a \
         prefix, final state = last success's target ({}); CancelIoEx of the last of 4 ({}): \
         the other 3 ran; each request ended once with SUCCESS or CANCELLED",
        N - done,
        state_name(want),
        if cancelled_last && done2 == 3 {
            "cancelled while queued"
        } else {
            "it had already started"
        }
    ))
}

/// QP_MODIFY of `qp` to `state` (the attributes of [`modify_in`]) with `out_len` bytes of
/// output, and its final status whether it pended or not (for modifies whose inline/pending
/// behaviour is not what is being checked).
fn modify<F: RawFile>(
    f: &F,
    qp: u64,
    state: u8,
    peer: Option<(u32, [u8; 16])>,
    out_len: usize,
) -> Result<IoStatus, String> {
    let io = f.device_io_control(WV_IOCTL_QP_MODIFY, &modify_in(qp, state, peer), out_len);
    wait(io, "QP_MODIFY")
}
