//! Object lifetime (spec §2.3, §2.4, §3.5, §3.6): ids per handle and per type, starting at 1
//! and reused most-recently-freed first; destroy while referenced → ACCESS_DENIED; handle close
//! destroys everything.

use wv_abi::consts::*;
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_AH_CREATE, WV_IO_ID, WV_IO_MEMORY_KEYS, WV_IO_MEMORY_REGISTER};
use wv_client::raw::RawFile;
use zerocopy::IntoBytes;

use super::raw::*;
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "lifetime-ids",
            run: ids,
            clock: Clock::Own,
        },
        Scenario {
            name: "lifetime-ids-per-handle",
            run: ids_per_handle,
            clock: Clock::Own,
        },
        Scenario {
            name: "lifetime-destroy-while-referenced",
            run: destroy_referenced,
            clock: Clock::Own,
        },
        Scenario {
            name: "lifetime-cleanup-on-close",
            run: cleanup_on_close,
            clock: Clock::Own,
        },
    ]
}

fn mw<F: RawFile>(f: &F, pd: u64) -> Result<u64, String> {
    let st = ok(f, WV_IOCTL_MW_ALLOCATE, &id_in(pd, 0, 0), 16)?;
    Ok(read::<WV_IO_ID>(&st.output, "MW_ALLOCATE")?.Id)
}

fn ah<F: RawFile>(f: &F, pd: u64, gid: [u8; 16]) -> Result<u64, String> {
    let st = ok(f, WV_IOCTL_AH_CREATE, &ah_in(pd, gid), 64)?;
    Ok(read::<WV_IO_AH_CREATE>(&st.output, "AH_CREATE")?.Id.Id)
}

/// Registers `len` bytes of `env` memory on `pd`; returns (lkey, keep-alive).
pub fn reg_mr<E: Env>(
    env: &E,
    f: &E::File,
    pd: u64,
    len: usize,
    access: u32,
) -> Result<(u32, Box<dyn std::any::Any>), String> {
    let (addr, keep) = env.buffer(len);
    let mr = WV_IO_MEMORY_REGISTER {
        Id: pd,
        Address: addr,
        BufferLength: len as u64,
        AccessFlags: access,
        Reserved: 0,
    };
    let st = ok(f, WV_IOCTL_MEMORY_REGISTER, mr.as_bytes(), 8)?;
    ensure!(
        st.information == 8,
        "MEMORY_REGISTER: Information {}, want 8",
        st.information
    );
    let keys: WV_IO_MEMORY_KEYS = read(&st.output, "MEMORY_REGISTER")?;
    Ok((keys.Lkey, keep))
}

/// Every type's first id is 1, types are independent, freed ids come back most recent first.
fn ids<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let guid = env.guid(&f)?;
    let gid = {
        let dev = open_dev(&f, guid)?;
        ensure!(dev == 1, "first DEVICE_OPEN: id {dev}, want 1");
        gid0(&f, dev)?
    };
    let pd = alloc_pd(&f, 1)?;
    let cq = create_cq(&f, 1, 8)?;
    let srq = create_srq(&f, pd)?;
    let qp = create_qp(&f, pd, cq, cq, 0, 0)?;
    let mw = mw(&f, pd)?;
    let ah = ah(&f, pd, gid)?;
    let firsts = [
        ("PD", pd),
        ("CQ", cq),
        ("SRQ", srq),
        ("QP", qp),
        ("MW", mw),
        ("AH", ah),
    ];
    for (what, id) in firsts {
        ensure!(id == 1, "first {what}: id {id}, want 1 (ids are per type)");
    }
    // PDs 2 and 3, freed 2 then 3: the next two allocations get 3 then 2.
    let p2 = alloc_pd(&f, 1)?;
    let p3 = alloc_pd(&f, 1)?;
    ensure!((p2, p3) == (2, 3), "PD ids {p2}, {p3}, want 2, 3");
    ok(&f, WV_IOCTL_PD_DEALLOCATE, &u64_in(2), 0)?;
    ok(&f, WV_IOCTL_PD_DEALLOCATE, &u64_in(3), 0)?;
    let again = (alloc_pd(&f, 1)?, alloc_pd(&f, 1)?);
    ensure!(
        again == (3, 2),
        "after freeing PD 2 then 3, new PDs got {again:?}, want (3, 2): most recently freed first"
    );
    let p4 = alloc_pd(&f, 1)?;
    ensure!(p4 == 4, "a fresh PD after reuse: id {p4}, want 4");
    // A second device handle on the same file is device 2; closing it frees 2 for reuse.
    let d2 = open_dev(&f, guid)?;
    ok(&f, WV_IOCTL_DEVICE_CLOSE, &u64_in(d2), 0)?;
    let d2b = open_dev(&f, guid)?;
    ensure!(
        (d2, d2b) == (2, 2),
        "device ids {d2} then (after close) {d2b}, want 2 and 2"
    );
    Ok(
        "device, PD, CQ, SRQ, QP, MW and AH each start at 1 on one handle; freed PDs 2, 3 \
        come back as 3, 2 (LIFO), then 4; a closed device id is reused"
            .into(),
    )
}

/// Ids belong to the handle: two handles both get device 1, and one cannot use the other's.
fn ids_per_handle<E: Env>(env: &E) -> Outcome {
    let a = env.open()?;
    let b = env.open()?;
    let guid = env.guid(&a)?;
    let (da, db) = (open_dev(&a, guid)?, open_dev(&b, guid)?);
    ensure!(
        (da, db) == (1, 1),
        "device ids on two handles: {da}, {db}, want 1, 1"
    );
    let pd = alloc_pd(&a, da)?;
    call_expect(
        &b,
        WV_IOCTL_PD_DEALLOCATE,
        &u64_in(pd),
        0,
        NtStatus::NOT_FOUND,
        "PD_DEALLOCATE of the other handle's PD",
    )?;
    call_expect(
        &b,
        WV_IOCTL_DEVICE_CLOSE,
        &u64_in(db),
        0,
        NtStatus::SUCCESS,
        "DEVICE_CLOSE(handle B's device 1 while A's device 1 has a PD)",
    )?;
    call_expect(
        &a,
        WV_IOCTL_DEVICE_CLOSE,
        &u64_in(da),
        0,
        NtStatus::ACCESS_DENIED,
        "DEVICE_CLOSE(handle A's device with a PD)",
    )?;
    Ok(
        "two handles both get device 1; B cannot free A's PD (NOT_FOUND); B's device 1 \
        closes while A's (with a PD) is ACCESS_DENIED"
            .into(),
    )
}

/// Destroying a parent that children reference → ACCESS_DENIED; children first, then SUCCESS;
/// a second destroy → NOT_FOUND / NO_SUCH_DEVICE. MRs hold no PD reference.
fn destroy_referenced<E: Env>(env: &E) -> Outcome {
    let (f, dev) = open_device(env)?;
    let gid = gid0(&f, dev)?;
    // A CQ alone keeps the device busy.
    let lone = create_cq(&f, dev, 4)?;
    let denied = |what: &str, code: u32, id: u64| {
        call_expect(&f, code, &u64_in(id), 0, NtStatus::ACCESS_DENIED, what).map(|_| ())
    };
    denied("DEVICE_CLOSE(device with a CQ)", WV_IOCTL_DEVICE_CLOSE, dev)?;
    ok(&f, WV_IOCTL_CQ_DESTROY, &u64_in(lone), 0)?;
    let pd = alloc_pd(&f, dev)?;
    denied("DEVICE_CLOSE(device with a PD)", WV_IOCTL_DEVICE_CLOSE, dev)?;
    let scq = create_cq(&f, dev, 8)?;
    let rcq = create_cq(&f, dev, 8)?;
    let srq = create_srq(&f, pd)?;
    let qp = create_qp(&f, pd, scq, rcq, srq, 0)?;
    denied("PD_DEALLOCATE(PD with a QP)", WV_IOCTL_PD_DEALLOCATE, pd)?;
    denied("CQ_DESTROY(send CQ of a QP)", WV_IOCTL_CQ_DESTROY, scq)?;
    denied("CQ_DESTROY(receive CQ of a QP)", WV_IOCTL_CQ_DESTROY, rcq)?;
    denied("SRQ_DESTROY(SRQ of a QP)", WV_IOCTL_SRQ_DESTROY, srq)?;
    // The refusals changed nothing: the QP still answers.
    query_qp(&f, qp)?;
    ok(&f, WV_IOCTL_QP_DESTROY, &u64_in(qp), 0)?;
    denied("PD_DEALLOCATE(PD with an SRQ)", WV_IOCTL_PD_DEALLOCATE, pd)?;
    ok(&f, WV_IOCTL_SRQ_DESTROY, &u64_in(srq), 0)?;
    let mw = mw(&f, pd)?;
    denied("PD_DEALLOCATE(PD with an MW)", WV_IOCTL_PD_DEALLOCATE, pd)?;
    ok(&f, WV_IOCTL_MW_DEALLOCATE, &u64_in(mw), 0)?;
    let ah = ah(&f, pd, gid)?;
    denied("PD_DEALLOCATE(PD with an AH)", WV_IOCTL_PD_DEALLOCATE, pd)?;
    ok(&f, WV_IOCTL_AH_DESTROY, &u64_in(ah), 0)?;
    // An MR does not hold its PD; deallocating the PD deregisters it.
    let (lkey, _mem) = reg_mr(env, &f, pd, 4096, WV_ACCESS_LOCAL_WRITE)?;
    call_expect(
        &f,
        WV_IOCTL_PD_DEALLOCATE,
        &u64_in(pd),
        0,
        NtStatus::SUCCESS,
        "PD_DEALLOCATE(PD with only an MR)",
    )?;
    call_expect(
        &f,
        WV_IOCTL_MEMORY_DEREGISTER,
        &id_in(pd, 0, lkey),
        0,
        NtStatus::NOT_FOUND,
        "MEMORY_DEREGISTER after its PD was deallocated",
    )?;
    for (code, id, what) in [
        (WV_IOCTL_CQ_DESTROY, scq, "CQ_DESTROY"),
        (WV_IOCTL_CQ_DESTROY, rcq, "CQ_DESTROY"),
        (WV_IOCTL_DEVICE_CLOSE, dev, "DEVICE_CLOSE"),
    ] {
        call_expect(&f, code, &u64_in(id), 0, NtStatus::SUCCESS, what)?;
    }
    for (code, id, want, what) in [
        (
            WV_IOCTL_QP_DESTROY,
            qp,
            NtStatus::NOT_FOUND,
            "second QP_DESTROY",
        ),
        (
            WV_IOCTL_SRQ_DESTROY,
            srq,
            NtStatus::NOT_FOUND,
            "second SRQ_DESTROY",
        ),
        (
            WV_IOCTL_MW_DEALLOCATE,
            mw,
            NtStatus::NOT_FOUND,
            "second MW_DEALLOCATE",
        ),
        (
            WV_IOCTL_AH_DESTROY,
            ah,
            NtStatus::NOT_FOUND,
            "second AH_DESTROY",
        ),
        (
            WV_IOCTL_PD_DEALLOCATE,
            pd,
            NtStatus::NOT_FOUND,
            "second PD_DEALLOCATE",
        ),
        (
            WV_IOCTL_CQ_DESTROY,
            scq,
            NtStatus::NOT_FOUND,
            "second CQ_DESTROY",
        ),
        (
            WV_IOCTL_DEVICE_CLOSE,
            dev,
            NtStatus::NO_SUCH_DEVICE,
            "second DEVICE_CLOSE",
        ),
    ] {
        call_expect(&f, code, &u64_in(id), 0, want, what)?;
    }
    Ok(
        "ACCESS_DENIED for device with CQ / PD, PD with QP / SRQ / MW / AH, send and receive \
        CQ and SRQ of a QP; children first then SUCCESS; an MR does not hold its PD; second \
        destroys NOT_FOUND / NO_SUCH_DEVICE"
            .into(),
    )
}

/// Closing a handle with every kind of object destroys them all: a new handle starts again at
/// id 1 for every type, and (in-process) the verifier finds nothing leaked at unload.
fn cleanup_on_close<E: Env>(env: &E) -> Outcome {
    let mut rounds = Vec::new();
    for round in 0..2 {
        let (f, o) = open_objects(env)?;
        let gid = gid0(&f, o.dev)?;
        let srq = create_srq(&f, o.pd)?;
        let mw = mw(&f, o.pd)?;
        let ah = ah(&f, o.pd, gid)?;
        let (_lkey, mem) = reg_mr(env, &f, o.pd, 4096, WV_ACCESS_LOCAL_WRITE)?;
        let second_dev = open_dev(&f, env.other_guid(&f)?)?;
        let ids = [o.dev, o.pd, o.cq, o.qp, srq, mw, ah];
        ensure!(
            ids == [1; 7] && second_dev == 2,
            "round {round}: ids (dev, pd, cq, qp, srq, mw, ah) = {ids:?}, second device \
             {second_dev}; want all 1 and 2 on a fresh handle"
        );
        rounds.push(ids);
        drop(f);
        drop(mem);
    }
    Ok(
        "a handle with a device on each HCA, PD, CQ, RC QP, SRQ, MW, AH and MR closed with \
        everything alive; the next handle's ids all start at 1 again"
            .into(),
    )
}
