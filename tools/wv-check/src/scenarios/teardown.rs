//! Requests parked when the handle closes (spec §3.5: cleanup ends them with CANCELLED; an
//! OVERLAPPED outlives CloseHandle) and when the device goes away (spec §3.9 and the fix of
//! §7.1-e: wv-core completes them with `STATUS_DEVICE_REMOVED`, later calls fail as OFW's
//! `Acquire` does, destroys still succeed, a re-added device opens again).

use wv_abi::consts::*;
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_MEMORY_REGISTER};
use wv_client::raw::{RawFile, RawIo};
use zerocopy::IntoBytes;

use super::lifetime::reg_mr;
use super::raw::*;
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Problem, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "close-with-requests-parked",
            run: close_with_parked,
            clock: Clock::Own,
        },
        Scenario {
            name: "device-removal-with-requests-parked",
            run: removal,
            clock: Clock::Own,
        },
    ]
}

/// Named parked notifies, and queued QP modifies.
type Parked<I> = (Vec<(&'static str, I)>, Vec<I>);

/// One parked request of every kind on `o` (plus `srq`), and a burst of QP modifies (queued
/// for the work item, or run at once while the device's commands measure shorter than a
/// hand-off).
fn park_everything<F: RawFile>(f: &F, o: &Objects, srq: u64) -> Result<Parked<F::Io>, String> {
    let notifies = vec![
        (
            "DEVICE_NOTIFY",
            park(f, WV_IOCTL_DEVICE_NOTIFY, &id_in(o.dev, 0, 1), 4)?,
        ),
        (
            "CQ_NOTIFY(next)",
            park(
                f,
                WV_IOCTL_CQ_NOTIFY,
                &id_in(o.cq, 0, WV_CQ_NEXT_COMPLETION),
                0,
            )?,
        ),
        (
            "CQ_NOTIFY(error)",
            park(f, WV_IOCTL_CQ_NOTIFY, &id_in(o.cq, 0, WV_CQ_ERROR), 0)?,
        ),
        (
            "CQ_NOTIFY(8-byte)",
            park(f, WV_IOCTL_CQ_NOTIFY, &u64_in(o.cq), 0)?,
        ),
        ("SRQ_NOTIFY", park(f, WV_IOCTL_SRQ_NOTIFY, &u64_in(srq), 0)?),
    ];
    let mut modifies = Vec::new();
    for i in 0..8u32 {
        let to = if i.is_multiple_of(2) {
            WV_IO_QP_STATE_INIT
        } else {
            WV_IO_QP_STATE_RESET
        };
        modifies.push(submit(f, WV_IOCTL_QP_MODIFY, &modify_in(o.qp, to, None), 8));
    }
    Ok((notifies, modifies))
}

/// Every parked notify ends with `want`; every queued modify with SUCCESS or `want`.
fn all_end<I: RawIo>(
    notifies: Vec<(&'static str, I)>,
    modifies: Vec<I>,
    want: NtStatus,
) -> Result<(usize, usize), String> {
    let n = notifies.len();
    for (what, io) in notifies {
        let st = wait(io, what)?;
        expect(&st, want, what)?;
        ensure!(st.output.is_empty(), "{what}: output with {want}");
    }
    let mut ran = 0;
    for (i, io) in modifies.into_iter().enumerate() {
        let st = wait(io, "QP_MODIFY")?;
        match NtStatus(st.status) {
            NtStatus::SUCCESS => ran += 1,
            s if s == want => {}
            // A modify already at the controller when the hardware vanished fails there, with
            // the status every verbs failure maps to.
            NtStatus::UNSUCCESSFUL if want == NtStatus::DEVICE_REMOVED => ran += 1,
            s => {
                return Err(format!(
                    "queued QP_MODIFY #{i} ended with {s}, want SUCCESS or {want}"
                ));
            }
        }
    }
    Ok((n, ran))
}

/// CloseHandle with every kind of request parked: each ends CANCELLED (waited for after the
/// handle is gone), queued modifies run or end CANCELLED, and a new handle works.
fn close_with_parked<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let guid = env.guid(&f)?;
    let o = objects(&f, guid)?;
    let srq = create_srq(&f, o.pd)?;
    let (notifies, modifies) = park_everything(&f, &o, srq)?;
    drop(f);
    let (n, ran) = all_end(notifies, modifies, NtStatus::CANCELLED)?;
    let g = env.open()?;
    let dev = open_dev(&g, guid)?;
    ensure!(dev == 1, "device id on a new handle: {dev}, want 1");
    Ok(format!(
        "CloseHandle with {n} notifies (device, CQ next/error/8-byte, SRQ) and 8 queued QP \
         modifies: every notify ended CANCELLED with no output, waited for after the handle \
         was gone; {ran} modifies had run, the rest CANCELLED; a new handle opens the device \
         as id 1"
    ))
}

fn removal<E: Env>(env: &E) -> Outcome {
    let Some(machine) = env.machine() else {
        return Err(Problem::Skip(
            "needs surprise removal and hot add (in-process stack only)".into(),
        ));
    };
    let f = env.open()?;
    let g = env.open()?;
    let guid = env.guid(&f)?;
    let other = env.other_guid(&f)?;
    ensure!(other != guid, "needs two devices");
    let index = env.device_index(guid)?;
    let before = guids(&f)?.len();
    let o = objects(&f, guid)?;
    let gid = gid0(&f, o.dev)?;
    let srq = create_srq(&f, o.pd)?;
    ok(&f, WV_IOCTL_MW_ALLOCATE, &id_in(o.pd, 0, 0), 16)?;
    ok(&f, WV_IOCTL_AH_CREATE, &ah_in(o.pd, gid), 64)?;
    let (lkey, _mem) = reg_mr(env, &f, o.pd, 4096, WV_ACCESS_LOCAL_WRITE)?;
    // The other device, on another handle and on this one, must not notice.
    let survivor = objects(&g, other)?;
    let bystander = park(
        &g,
        WV_IOCTL_CQ_NOTIFY,
        &id_in(survivor.cq, 0, WV_CQ_NEXT_COMPLETION),
        0,
    )?;
    let same_file_other_dev = open_dev(&f, other)?;
    let (notifies, modifies) = park_everything(&f, &o, srq)?;

    ensure!(
        machine.remove_device(index),
        "remove_device({index}) refused"
    );
    // Removal completes the parked requests before it returns (no cancel, no close needed).
    for (what, io) in &notifies {
        ensure!(
            io.is_complete(),
            "{what} still parked after the device was removed"
        );
    }
    let (n, ran) = all_end(notifies, modifies, NtStatus::DEVICE_REMOVED)?;
    ensure!(
        !bystander.is_complete(),
        "removing one device ended a CQ_NOTIFY on the other device"
    );

    // Later calls fail the way OFW's Acquire does.
    let mr = WV_IO_MEMORY_REGISTER {
        Id: o.pd,
        Address: 0x1000,
        BufferLength: 64,
        AccessFlags: WV_ACCESS_LOCAL_WRITE,
        Reserved: 0,
    };
    let later = [
        (
            WV_IOCTL_DEVICE_QUERY,
            u64_in(o.dev),
            152,
            NtStatus::NO_SUCH_DEVICE,
        ),
        (
            WV_IOCTL_DEVICE_PORT_QUERY,
            port_in(o.dev, 1),
            52,
            NtStatus::NO_SUCH_DEVICE,
        ),
        (
            WV_IOCTL_DEVICE_NOTIFY,
            id_in(o.dev, 0, 1),
            4,
            NtStatus::NOT_FOUND,
        ),
        (
            WV_IOCTL_PD_ALLOCATE,
            id_in(o.dev, 0, 0),
            16,
            NtStatus::NO_SUCH_DEVICE,
        ),
        (
            WV_IOCTL_CQ_CREATE,
            id_in(o.dev, 0, 4),
            16,
            NtStatus::NO_SUCH_DEVICE,
        ),
        (
            WV_IOCTL_CQ_NOTIFY,
            id_in(o.cq, 0, 1),
            0,
            NtStatus::NOT_FOUND,
        ),
        (WV_IOCTL_QP_QUERY, u64_in(o.qp), 192, NtStatus::NOT_FOUND),
        (
            WV_IOCTL_QP_MODIFY,
            modify_in(o.qp, WV_IO_QP_STATE_INIT, None),
            8,
            NtStatus::NOT_FOUND,
        ),
        (WV_IOCTL_SRQ_NOTIFY, u64_in(srq), 0, NtStatus::NOT_FOUND),
        (
            WV_IOCTL_MEMORY_REGISTER,
            mr.as_bytes().to_vec(),
            8,
            NtStatus::NOT_FOUND,
        ),
        (
            WV_IOCTL_LIBRARY_QUERY,
            u64_in(guid),
            28,
            NtStatus::NO_SUCH_DEVICE,
        ),
        (
            WV_IOCTL_DEVICE_OPEN,
            id_in(guid, 0, 0),
            16,
            NtStatus::NO_SUCH_DEVICE,
        ),
    ];
    for (code, input, out, want) in &later {
        call_expect(
            &f,
            *code,
            input,
            *out,
            *want,
            &format!("{} after removal", code_name(*code)),
        )?;
    }
    let now = guids(&f)?;
    ensure!(
        now.len() + 1 == before && !now.contains(&guid),
        "GUID_QUERY after removal lists {now:x?} (had {before} devices)"
    );
    // Destroys still succeed, children first.
    let destroys = [
        (WV_IOCTL_AH_DESTROY, 1, NtStatus::SUCCESS),
        (WV_IOCTL_MW_DEALLOCATE, 1, NtStatus::SUCCESS),
        (WV_IOCTL_PD_DEALLOCATE, o.pd, NtStatus::ACCESS_DENIED),
        (WV_IOCTL_QP_DESTROY, o.qp, NtStatus::SUCCESS),
        (WV_IOCTL_SRQ_DESTROY, srq, NtStatus::SUCCESS),
        (WV_IOCTL_PD_DEALLOCATE, o.pd, NtStatus::SUCCESS),
        (WV_IOCTL_CQ_DESTROY, o.cq, NtStatus::SUCCESS),
        (WV_IOCTL_DEVICE_CLOSE, o.dev, NtStatus::SUCCESS),
        (WV_IOCTL_DEVICE_CLOSE, o.dev, NtStatus::NO_SUCH_DEVICE),
    ];
    for (code, id, want) in destroys {
        call_expect(
            &f,
            code,
            &u64_in(id),
            0,
            want,
            &format!("{}({id}) after removal", code_name(code)),
        )?;
    }
    let _ = lkey;
    // The other device still works, on both handles.
    ok(&f, WV_IOCTL_DEVICE_QUERY, &u64_in(same_file_other_dev), 152)?;
    query_qp(&g, survivor.qp)?;
    ok(&g, WV_IOCTL_CQ_CANCEL, &u64_in(survivor.cq), 0)?;
    ends_as(bystander, NtStatus::CANCELLED, "other device's CQ_NOTIFY")?;
    // Hot add: a new device appears and opens on the old handle.
    let added = machine.add_device();
    let new_guid = machine
        .device_guid(added)
        .ok_or("the added device has no GUID")?;
    let listed = guids(&f)?;
    ensure!(
        listed.len() == before && listed.contains(&new_guid),
        "GUID_QUERY after hot add lists {listed:x?}, missing {new_guid:#x}"
    );
    let dev = open_dev(&f, new_guid)?;
    let pd = alloc_pd(&f, dev)?;
    ensure!(
        pd == 1,
        "first PD on the re-added device: {pd}, want 1 (freed ids reused)"
    );
    Ok(format!(
        "surprise removal with {n} notifies and 8 queued modifies parked: notifies ended \
         DEVICE_REMOVED with no output before removal returned, {ran} modifies had reached the \
         controller, the rest DEVICE_REMOVED; the other device's waiter stayed parked; {} later calls → \
         NO_SUCH_DEVICE / NOT_FOUND, GUID_QUERY drops it; destroys succeed (PD still \
         ACCESS_DENIED while its QP lives); a hot-added device opens on the same handle",
        later.len()
    ))
}
