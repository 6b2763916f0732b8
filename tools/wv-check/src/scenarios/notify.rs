//! Notify/cancel ordering, ndcq-style (spec §3.7, nd-and-style.md §A.8–A.9): two CQs on one
//! handle, `*_CANCEL` completes exactly its own object's waiters inside the call, CancelIoEx
//! ends one request once, destroy and close end parked requests, BatchNotify (spec §7.1-a).

use wv_abi::NtStatus;
use wv_abi::consts::*;
use wv_abi::ioctl::*;
use wv_client::raw::{RawFile, RawIo};

use super::raw::*;
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "notify-cq-cancel-isolation",
            run: cq_cancel_isolation,
            clock: Clock::Own,
        },
        Scenario {
            name: "notify-cancel-io-ex",
            run: cancel_io_ex,
            clock: Clock::Own,
        },
        Scenario {
            name: "notify-batch-notify",
            run: batch_notify,
            clock: Clock::Own,
        },
        Scenario {
            name: "notify-srq-cancel",
            run: srq_cancel,
            clock: Clock::Own,
        },
        Scenario {
            name: "notify-destroy-ends-waiters",
            run: destroy_ends_waiters,
            clock: Clock::Own,
        },
        Scenario {
            name: "notify-device-cancel",
            run: device_cancel,
            clock: Clock::Own,
        },
    ]
}

/// Parks a CQ_NOTIFY of `kind` on `cq`.
fn cq_notify<F: RawFile>(f: &F, cq: u64, kind: u32) -> Result<F::Io, String> {
    park(f, WV_IOCTL_CQ_NOTIFY, &id_in(cq, 0, kind), 0)
}

/// Each request must already have ended (no wait) with CANCELLED, no output bytes, and
/// Information 0 (CQ/SRQ notifies have no output; spec §2.4).
pub fn ended_cancelled<I: RawIo>(ios: Vec<I>, what: &str) -> Result<(), String> {
    for (n, io) in ios.into_iter().enumerate() {
        ensure!(
            io.is_complete(),
            "{what} #{n}: still parked after the cancel returned (must complete inside it)"
        );
        let st = wait(io, what)?;
        expect_info(&st, NtStatus::CANCELLED, 0, &format!("{what} #{n}"))?;
        ensure!(st.output.is_empty(), "{what} #{n}: output with CANCELLED");
    }
    Ok(())
}

/// Two CQs on one handle: CQ_CANCEL of one completes every waiter of that CQ (both queues)
/// before it returns, with CANCELLED, while the other CQ's waiters stay parked; then the
/// reverse order.
fn cq_cancel_isolation<E: Env>(env: &E) -> Outcome {
    let (f, dev) = open_device(env)?;
    let cq1 = create_cq(&f, dev, 8)?;
    let cq2 = create_cq(&f, dev, 8)?;
    for (first, second) in [(cq1, cq2), (cq2, cq1)] {
        let mine = vec![
            cq_notify(&f, first, WV_CQ_NEXT_COMPLETION)?,
            cq_notify(&f, first, WV_CQ_NEXT_COMPLETION)?,
            cq_notify(&f, first, WV_CQ_SOLICITED)?,
            cq_notify(&f, first, WV_CQ_ERROR)?,
        ];
        let others = vec![
            cq_notify(&f, second, WV_CQ_NEXT_COMPLETION)?,
            cq_notify(&f, second, WV_CQ_ERROR)?,
        ];
        ok(&f, WV_IOCTL_CQ_CANCEL, &u64_in(first), 0)?;
        ensure!(
            others.iter().all(|io| !io.is_complete()),
            "CQ_CANCEL({first}) also ended a waiter of CQ {second}"
        );
        ended_cancelled(mine, &format!("CQ {first} notify"))?;
        ensure!(
            others.iter().all(|io| !io.is_complete()),
            "CQ {second}'s waiters ended without a cancel"
        );
        ok(&f, WV_IOCTL_CQ_CANCEL, &u64_in(second), 0)?;
        ended_cancelled(others, &format!("CQ {second} notify"))?;
    }
    // Nothing parked: still SUCCESS, and the CQ takes new waiters.
    ok(&f, WV_IOCTL_CQ_CANCEL, &u64_in(cq1), 0)?;
    let again = cq_notify(&f, cq1, WV_CQ_NEXT_COMPLETION)?;
    ok(&f, WV_IOCTL_CQ_CANCEL, &u64_in(cq1), 0)?;
    ended_cancelled(vec![again], "re-armed notify")?;
    Ok(
        "two CQs on one handle, both orders: CQ_CANCEL ends all 4 waiters of its CQ (next ×2, \
        solicited, error) with CANCELLED, Information 0, before it returns; the other CQ's 2 \
        stay parked until their own cancel; an idle cancel is SUCCESS"
            .into(),
    )
}

/// CancelIoEx ends exactly the named request, once; the object keeps working.
fn cancel_io_ex<E: Env>(env: &E) -> Outcome {
    let (f, o) = open_objects(env)?;
    let srq = create_srq(&f, o.pd)?;
    let x = cq_notify(&f, o.cq, WV_CQ_NEXT_COMPLETION)?;
    let y = cq_notify(&f, o.cq, WV_CQ_NEXT_COMPLETION)?;
    ensure!(
        f.cancel_io_ex(&x),
        "CancelIoEx of a parked CQ_NOTIFY found nothing"
    );
    let st = wait(x, "cancelled CQ_NOTIFY")?;
    expect_info(&st, NtStatus::CANCELLED, 0, "CQ_NOTIFY after CancelIoEx")?;
    ensure!(
        !y.is_complete(),
        "CancelIoEx of one CQ_NOTIFY also ended the other one"
    );
    ensure!(
        f.cancel_io_ex(&y),
        "CancelIoEx of the second parked CQ_NOTIFY found nothing"
    );
    ends_as(y, NtStatus::CANCELLED, "second CQ_NOTIFY")?;
    // A finished request is not cancellable any more: it ended exactly once.
    let z = cq_notify(&f, o.cq, WV_CQ_ERROR)?;
    ensure!(
        f.cancel_io_ex(&z),
        "CancelIoEx of an error notify found nothing"
    );
    ensure!(
        z.wait_timeout(WAIT).is_some(),
        "cancelled error notify never ended"
    );
    ensure!(
        !f.cancel_io_ex(&z),
        "a second CancelIoEx of an ended request still found it"
    );
    // Every parked kind.
    let kinds = [
        (
            "DEVICE_NOTIFY",
            park(&f, WV_IOCTL_DEVICE_NOTIFY, &id_in(o.dev, 0, 1), 4)?,
        ),
        (
            "SRQ_NOTIFY",
            park(&f, WV_IOCTL_SRQ_NOTIFY, &u64_in(srq), 0)?,
        ),
    ];
    for (what, io) in kinds {
        ensure!(
            f.cancel_io_ex(&io),
            "CancelIoEx of a parked {what} found nothing"
        );
        let st = wait(io, what)?;
        expect(
            &st,
            NtStatus::CANCELLED,
            &format!("{what} after CancelIoEx"),
        )?;
        ensure!(
            st.output.is_empty(),
            "{what}: output came back with CANCELLED"
        );
    }
    // The CQ still parks new waiters.
    let w = cq_notify(&f, o.cq, WV_CQ_NEXT_COMPLETION)?;
    ok(&f, WV_IOCTL_CQ_CANCEL, &u64_in(o.cq), 0)?;
    ends_as(w, NtStatus::CANCELLED, "CQ_NOTIFY after CQ_CANCEL")?;
    Ok(
        "CancelIoEx ends only the named CQ_NOTIFY with CANCELLED (the sibling stays parked), \
        a second CancelIoEx finds nothing (ended once); DEVICE_NOTIFY and SRQ_NOTIFY likewise \
        with no output; the CQ still parks new waiters"
            .into(),
    )
}

/// IWVCompletionQueue::BatchNotify sends only the 8-byte CQ id (spec §7.1-a): this driver
/// parks it as a next-completion notify; other short lengths keep BUFFER_TOO_SMALL.
fn batch_notify<E: Env>(env: &E) -> Outcome {
    let (f, dev) = open_device(env)?;
    let cq = create_cq(&f, dev, 8)?;
    let io = park(&f, WV_IOCTL_CQ_NOTIFY, &u64_in(cq), 0)?;
    for len in [0usize, 7, 9, 15] {
        call_expect(
            &f,
            WV_IOCTL_CQ_NOTIFY,
            &vec![0; len],
            0,
            NtStatus::BUFFER_TOO_SMALL,
            &format!("CQ_NOTIFY({len}-byte input)"),
        )?;
    }
    call_expect(
        &f,
        WV_IOCTL_CQ_NOTIFY,
        &u64_in(cq + 100),
        0,
        NtStatus::NOT_FOUND,
        "8-byte CQ_NOTIFY(unknown CQ)",
    )?;
    ensure!(!io.is_complete(), "the 8-byte notify ended by itself");
    ok(&f, WV_IOCTL_CQ_CANCEL, &u64_in(cq), 0)?;
    ended_cancelled(vec![io], "8-byte CQ_NOTIFY")?;
    Ok(
        "an 8-byte CQ_NOTIFY (BatchNotify) parks and ends CANCELLED on CQ_CANCEL; 0/7/9/15 \
        bytes → BUFFER_TOO_SMALL; unknown CQ → NOT_FOUND"
            .into(),
    )
}

/// SRQ_NOTIFY parks (broadcast queue), SRQ_CANCEL ends every waiter.
fn srq_cancel<E: Env>(env: &E) -> Outcome {
    let (f, dev) = open_device(env)?;
    let pd = alloc_pd(&f, dev)?;
    let s1 = create_srq(&f, pd)?;
    let s2 = create_srq(&f, pd)?;
    let mine = vec![
        park(&f, WV_IOCTL_SRQ_NOTIFY, &u64_in(s1), 0)?,
        park(&f, WV_IOCTL_SRQ_NOTIFY, &u64_in(s1), 0)?,
    ];
    let other = park(&f, WV_IOCTL_SRQ_NOTIFY, &u64_in(s2), 0)?;
    ok(&f, WV_IOCTL_SRQ_CANCEL, &u64_in(s1), 0)?;
    ensure!(
        !other.is_complete(),
        "SRQ_CANCEL of SRQ {s1} ended SRQ {s2}'s waiter"
    );
    ended_cancelled(mine, "SRQ_NOTIFY")?;
    ok(&f, WV_IOCTL_SRQ_CANCEL, &u64_in(s2), 0)?;
    ended_cancelled(vec![other], "other SRQ's SRQ_NOTIFY")?;
    Ok(
        "two SRQ_NOTIFYs on one SRQ end CANCELLED inside SRQ_CANCEL; another SRQ's waiter \
        stays parked until its own cancel"
            .into(),
    )
}

/// Destroying an object (or closing a device) ends the requests parked on it with CANCELLED:
/// parked requests hold no reference, so the destroy is not refused.
fn destroy_ends_waiters<E: Env>(env: &E) -> Outcome {
    let (f, dev) = open_device(env)?;
    let pd = alloc_pd(&f, dev)?;
    let cq = create_cq(&f, dev, 8)?;
    let srq = create_srq(&f, pd)?;
    let cq_waiters = vec![
        cq_notify(&f, cq, WV_CQ_NEXT_COMPLETION)?,
        cq_notify(&f, cq, WV_CQ_ERROR)?,
    ];
    ok(&f, WV_IOCTL_CQ_DESTROY, &u64_in(cq), 0)?;
    ended_cancelled(cq_waiters, "CQ_NOTIFY across CQ_DESTROY")?;
    let srq_waiter = park(&f, WV_IOCTL_SRQ_NOTIFY, &u64_in(srq), 0)?;
    ok(&f, WV_IOCTL_SRQ_DESTROY, &u64_in(srq), 0)?;
    ended_cancelled(vec![srq_waiter], "SRQ_NOTIFY across SRQ_DESTROY")?;
    ok(&f, WV_IOCTL_PD_DEALLOCATE, &u64_in(pd), 0)?;
    let dev_waiter = park(&f, WV_IOCTL_DEVICE_NOTIFY, &id_in(dev, 0, 1), 4)?;
    ok(&f, WV_IOCTL_DEVICE_CLOSE, &u64_in(dev), 0)?;
    ensure!(
        dev_waiter.is_complete(),
        "DEVICE_NOTIFY still parked after DEVICE_CLOSE returned"
    );
    ends_as(
        dev_waiter,
        NtStatus::CANCELLED,
        "DEVICE_NOTIFY across DEVICE_CLOSE",
    )?;
    Ok(
        "CQ_DESTROY, SRQ_DESTROY and DEVICE_CLOSE succeed with requests parked on the object \
        and end them with CANCELLED before returning"
            .into(),
    )
}

/// DEVICE_CANCEL ends every port's DEVICE_NOTIFY waiters with CANCELLED.
fn device_cancel<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let guid = env.guid(&f)?;
    let dev = open_dev(&f, guid)?;
    let ports = {
        let st = ok(&f, WV_IOCTL_DEVICE_QUERY, &u64_in(dev), 152)?;
        read::<wv_abi::WV_IO_DEVICE_ATTRIBUTES>(&st.output, "DEVICE_QUERY")?.PhysPortCount
    };
    let other_dev = open_dev(&f, guid)?;
    let other = park(&f, WV_IOCTL_DEVICE_NOTIFY, &id_in(other_dev, 0, 1), 4)?;
    let mut mine = Vec::new();
    for port in 1..=ports {
        mine.push(park(
            &f,
            WV_IOCTL_DEVICE_NOTIFY,
            &id_in(dev, 0, u32::from(port)),
            4,
        )?);
        mine.push(park(
            &f,
            WV_IOCTL_DEVICE_NOTIFY,
            &id_in(dev, 0, u32::from(port)),
            4,
        )?);
    }
    let n = mine.len();
    ok(&f, WV_IOCTL_DEVICE_CANCEL, &u64_in(dev), 0)?;
    for (i, io) in mine.into_iter().enumerate() {
        ensure!(
            io.is_complete(),
            "DEVICE_NOTIFY #{i} still parked after DEVICE_CANCEL"
        );
        let st = wait(io, "DEVICE_NOTIFY")?;
        expect(&st, NtStatus::CANCELLED, &format!("DEVICE_NOTIFY #{i}"))?;
        ensure!(
            st.output.is_empty(),
            "DEVICE_NOTIFY #{i}: output with CANCELLED"
        );
    }
    ensure!(
        !other.is_complete(),
        "DEVICE_CANCEL ended a waiter of another device handle"
    );
    // Nothing was pending on the ports: the next notify parks again.
    let again = park(&f, WV_IOCTL_DEVICE_NOTIFY, &id_in(dev, 0, 1), 4)?;
    ok(&f, WV_IOCTL_DEVICE_CANCEL, &u64_in(dev), 0)?;
    ok(&f, WV_IOCTL_DEVICE_CANCEL, &u64_in(other_dev), 0)?;
    ensure!(
        again.is_complete(),
        "re-parked DEVICE_NOTIFY survived DEVICE_CANCEL"
    );
    ends_as(again, NtStatus::CANCELLED, "re-parked DEVICE_NOTIFY")?;
    ends_as(other, NtStatus::CANCELLED, "other device's DEVICE_NOTIFY")?;
    Ok(format!(
        "{n} DEVICE_NOTIFYs over {ports} port(s) end CANCELLED (no output) inside \
         DEVICE_CANCEL; another device handle's waiter stays parked; the next notify parks again"
    ))
}
