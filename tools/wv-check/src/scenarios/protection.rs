//! Protection domains end to end: a region serves only QPs of the PD it was registered in. The
//! driver hands the keys to the device untouched (the data path never passes through it), so
//! this is the device's check, seen from an application through the whole stack.

use wv_client::verbs::{Buffer, Mr, Pd, Sge, WcStatus};

use super::fixture::*;
use super::raw::ensure;
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![Scenario {
        name: "keys-of-another-pd-refused",
        run: keys_of_another_pd,
        clock: Clock::Own,
    }]
}

const LEN: usize = 256;
const FILL: u8 = 0x5A;

/// An RDMA write of 8 bytes from `sge` to `addr` under `rkey` by `from`; its status.
fn write<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    from: &End<F>,
    sge: Sge,
    addr: u64,
    rkey: u32,
) -> Result<WcStatus, String> {
    post_rdma_write(from, 1, sge, addr, rkey)?;
    Ok(poll_one(&from.cq, "RDMA write")?.status)
}

/// A second PD on `e`'s device with a region of `LEN` bytes filled with `FILL`.
fn second_pd<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    e: &End<F>,
) -> Result<(Pd<F>, Buffer, Mr), String> {
    let dev = e.pd.device();
    let pd = dev.alloc_pd().map_err(verr("PD_ALLOCATE"))?;
    let buf = dev.alloc_buffer(LEN);
    buf.write(0, &[FILL; LEN]).map_err(|e| e.to_string())?;
    let mr = pd
        .reg_mr(&buf, ACCESS_ALL)
        .map_err(verr("MEMORY_REGISTER"))?;
    Ok((pd, buf, mr))
}

/// The RDMA write `what` ended with `want`, and the other PD's `region` still holds `FILL`
/// throughout.
fn refused(st: WcStatus, want: WcStatus, what: &str, region: &Buffer) -> Result<(), String> {
    ensure!(st == want, "{what}: {st:?}, want {want:?}");
    ensure!(
        region.to_vec().iter().all(|&x| x == FILL),
        "{what}: the region of the other PD changed"
    );
    Ok(())
}

/// An RDMA write whose rkey names a region of another PD than the target QP's is a remote
/// access error; one whose gather entry names a region of another PD than the sending QP's is
/// a local protection error. Neither region changes.
fn keys_of_another_pd<E: Env>(env: &E) -> Outcome {
    let (_p, a, b) = rc_pair(env)?;
    let (_pd, theirs, mr) = second_pd(&b)?;
    refused(
        write(&a, a.mr.sge(0, 8), theirs.addr() + 8, mr.rkey())?,
        WcStatus::RemAccessErr,
        "RDMA write with an rkey of another PD than the target QP's",
        &theirs,
    )?;

    let (_p, a, b) = rc_pair(env)?;
    let (_pd, mine, mr) = second_pd(&a)?;
    refused(
        write(&a, mr.sge(0, 8), b.mr.addr(), b.mr.rkey())?,
        WcStatus::LocProtErr,
        "RDMA write gathering from a region of another PD than the QP's",
        &mine,
    )?;
    Ok("rkey of another PD: REM_ACCESS_ERR; lkey of another PD: LOC_PROT_ERR".into())
}
