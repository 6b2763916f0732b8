//! The malformed-input matrix: each of the 53 codes (and codes outside the range) with short,
//! exact and oversized inputs and outputs, with its object id replaced by 0, by an id no
//! object has, and by an id that only another open file has, and (for the codes that carry
//! vendor bytes) with vendor input and output of every size from 0 to 128 and 64 bytes, and
//! 4 KiB. Each case must end with the documented NTSTATUS (spec §2.4/§2.6: the OFW handlers'
//! buffer checks first, input before output, then the lookup's status), and the stack must be
//! healthy afterwards: the canary request succeeds, no lower-device object appeared or
//! vanished, and the verifier's teardown check passes.
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

mod common;

use common::*;
use wv_abi::NtStatus;
use wv_abi::ioctl::*;

const UNKNOWN_ID: u64 = 999;
/// An id that exists in the other file only (this file's tables stop below it).
const OTHER_FILE_ID: u64 = 5;

/// The status a lookup failure of `code` answers (`None`: the code looks nothing up).
fn not_found(code: Ioctl) -> Option<NtStatus> {
    use Ioctl as I;
    match code {
        I::GuidQuery => None,
        I::LibraryQuery
        | I::DeviceOpen
        | I::DeviceClose
        | I::DeviceQuery
        | I::DevicePortQuery
        | I::DeviceGidQuery
        | I::DevicePkeyQuery
        | I::PdAllocate
        | I::CqCreate => Some(NtStatus::NO_SUCH_DEVICE),
        // EP_CREATE names no object; OFW answers the datagram-only ones before any lookup.
        I::EpCreate | I::EpLookup | I::EpMulticastJoin | I::EpMulticastLeave => None,
        // Every other endpoint code looks its endpoint up with `WvEpAcquire` (GET_REQUEST: the
        // listener), which fails the same way for 0, an unknown id and another file's.
        _ => Some(NtStatus::NOT_FOUND),
    }
}

/// The final status of a valid request of `code`.
fn valid_status(code: Ioctl) -> NtStatus {
    use Ioctl as I;
    match code {
        // Parked; nothing signals them in the matrix, so `issue` cancels them.
        I::DeviceNotify | I::CqNotify | I::SrqNotify => NtStatus::CANCELLED,
        // Endpoint codes name an Idle endpoint (the endpoint tests cover the other states):
        // OFW's state checks refuse what an Idle endpoint cannot do, and the datagram-only
        // ones OFW never had.
        I::EpModify | I::EpReject | I::EpConnect | I::EpAccept | I::EpListen => {
            NtStatus::NOT_SUPPORTED
        }
        I::EpDisconnectNotify => NtStatus::NOT_SUPPORTED,
        I::EpDisconnect => NtStatus::INVALID_DEVICE_STATE,
        // The "listener" is the Idle endpoint.
        I::EpGetRequest => NtStatus::NOT_SUPPORTED,
        I::EpLookup | I::EpMulticastJoin | I::EpMulticastLeave => NtStatus::NOT_IMPLEMENTED,
        _ => NtStatus::SUCCESS,
    }
}

fn carries_vendor_bytes(code: Ioctl) -> bool {
    use Ioctl as I;
    matches!(
        code,
        I::DeviceOpen
            | I::PdAllocate
            | I::MwAllocate
            | I::AhCreate
            | I::CqCreate
            | I::CqResize
            | I::SrqCreate
            | I::SrqQuery
            | I::SrqModify
            | I::QpCreate
    )
}

/// Undoes a successful creation (so repeated cases do not pile objects up), or tells the
/// caller to rebuild the stack (a destroy consumed its spare object).
fn undo(code: Ioctl, fx: &Fx, f: &WvFile, s: &Full, input: &[u8], st: &wv_host::IoStatus) -> bool {
    use Ioctl as I;
    let created = || out::<u64>(st);
    let destroy = |code: u32, input: Vec<u8>| {
        expect_ioctl(f, code, &input, 0, NtStatus::SUCCESS);
    };
    match code {
        I::DeviceOpen => destroy(WV_IOCTL_DEVICE_CLOSE, u64_in(created())),
        I::EpCreate => destroy(WV_IOCTL_EP_DESTROY, u64_in(created())),
        I::PdAllocate => destroy(WV_IOCTL_PD_DEALLOCATE, u64_in(created())),
        I::MwAllocate => destroy(WV_IOCTL_MW_DEALLOCATE, u64_in(created())),
        I::AhCreate => destroy(WV_IOCTL_AH_DESTROY, u64_in(created())),
        I::CqCreate => destroy(WV_IOCTL_CQ_DESTROY, u64_in(created())),
        I::SrqCreate => destroy(WV_IOCTL_SRQ_DESTROY, u64_in(created())),
        I::QpCreate => destroy(WV_IOCTL_QP_DESTROY, u64_in(created())),
        I::MemoryRegister => {
            let lkey = out::<u32>(st);
            destroy(WV_IOCTL_MEMORY_DEREGISTER, id(s.pd, 0, lkey));
        }
        I::QpAttach => destroy(WV_IOCTL_QP_DETACH, input.to_vec()),
        I::DeviceClose
        | I::PdDeallocate
        | I::MemoryDeregister
        | I::MwDeallocate
        | I::AhDestroy
        | I::CqDestroy
        | I::SrqDestroy
        | I::QpDestroy
        | I::QpDetach
        | I::EpDestroy
        // Bound now: the next case needs the Idle endpoint again.
        | I::EpBind => return true,
        _ => {}
    }
    let _ = fx;
    false
}

/// A stack for one code's cases: this file's full stack, and another file whose tables hold
/// ids up to [`OTHER_FILE_ID`].
struct Bench {
    // Files close before the driver unloads (fields drop in order).
    f: WvFile,
    _other: WvFile,
    fx: Fx,
    s: Full,
    baseline: usize,
}

impl Bench {
    fn new() -> Bench {
        let fx = Fx::new();
        let other = fx.open();
        let odev = open_device(&fx, &other);
        let opd = alloc_pd(&other, odev);
        let ocq = cq(&other, odev, 8);
        for _ in 0..4 {
            open_device(&fx, &other);
            alloc_pd(&other, odev);
            cq(&other, odev, 8);
        }
        for _ in 0..5 {
            common::ep::ep_create(&other);
            srq(&other, opd);
            qp(&other, opd, ocq, ocq, 0);
            mw_allocate(&other, opd, NtStatus::SUCCESS);
            ah_create(&other, opd, NtStatus::SUCCESS);
        }
        let f = fx.open();
        let s = full_stack(&fx, &f);
        let baseline = fx.hca.live_objects().len();
        Bench {
            fx,
            f,
            s,
            _other: other,
            baseline,
        }
    }

    fn healthy(&self, what: &str) {
        expect(
            &ioctl(&self.f, WV_IOCTL_DEVICE_QUERY, &u64_in(self.s.dev), 152),
            NtStatus::SUCCESS,
        );
        assert_eq!(
            self.fx.hca.live_objects().len(),
            self.baseline,
            "{what}: lower-device objects changed"
        );
    }
}

#[test]
fn every_code_with_every_malformation() {
    let mut cases = 0u64;
    for code in Ioctl::ALL {
        let mut bench = Bench::new();
        let (v_in, v_out) = valid_request(code, &bench.s);
        let (min_in, min_out) = (code.min_input(), code.min_output());
        // (input, output length, expected status, what)
        let mut plan: Vec<(Vec<u8>, usize, NtStatus, String)> = Vec::new();
        let valid = valid_status(code);
        let sized = |input_len: usize, out_len: usize| {
            if input_len < min_in || out_len < min_out {
                // The 8-byte CQ_NOTIFY is BatchNotify's (§7.1-a): a next-completion notify.
                if code == Ioctl::CqNotify && input_len == 8 && out_len >= min_out {
                    return NtStatus::CANCELLED;
                }
                NtStatus::BUFFER_TOO_SMALL
            } else {
                valid
            }
        };
        let mut in_lens = vec![0, v_in.len(), v_in.len() + 64, v_in.len() + 4096];
        if min_in > 0 {
            in_lens.push(min_in - 1);
        }
        if code == Ioctl::CqNotify {
            in_lens.push(8);
        }
        let mut out_lens = vec![0, v_out, v_out + 4096];
        if min_out > 0 {
            out_lens.push(min_out - 1);
        }
        for &il in &in_lens {
            for &ol in &out_lens {
                let mut input = v_in.clone();
                input.resize(il, 0);
                plan.push((input, ol, sized(il, ol), format!("in {il} out {ol}")));
            }
        }
        if let Some(missing) = not_found(code) {
            let other_guid = 0x0BAD_0BAD_u64;
            for (what, value) in [
                ("id 0", 0),
                ("unknown id", UNKNOWN_ID),
                ("other file's id", OTHER_FILE_ID),
            ] {
                let mut input = v_in.clone();
                let value = match code {
                    Ioctl::DeviceOpen | Ioctl::LibraryQuery if value == OTHER_FILE_ID => other_guid,
                    _ => value,
                };
                input[..8].copy_from_slice(&value.to_ne_bytes());
                plan.push((input, v_out, missing, what.to_owned()));
            }
        }
        if carries_vendor_bytes(code) {
            for extra in (0..=128).chain([4096]) {
                let mut input = v_in.clone();
                input.extend((0..extra).map(|i| i as u8));
                plan.push((input, v_out, valid, format!("vendor input {extra}")));
            }
            for extra in (1..=64).chain([4096]) {
                plan.push((
                    v_in.clone(),
                    v_out + extra,
                    valid,
                    format!("vendor output {extra}"),
                ));
            }
        }
        for (input, out_len, want, what) in plan {
            let st = issue(&bench.fx, &bench.f, code.code(), &input, out_len);
            assert_eq!(status(&st), want, "{} {what}: {st:?}", code.name());
            cases += 1;
            if status(&st) == NtStatus::SUCCESS
                && undo(code, &bench.fx, &bench.f, &bench.s, &input, &st)
            {
                bench = Bench::new();
                continue;
            }
            bench.healthy(&format!("{} {what}", code.name()));
        }
    }
    // Codes outside the 53: the sentinels and beyond.
    let bench = Bench::new();
    for function in [0u32, 54, 55, 0x100, 0x1000] {
        let code = wv_ioctl(WV_IOCTL_MIN + function);
        let st = issue(&bench.fx, &bench.f, code, &u64_in(bench.s.dev), 64);
        expect(&st, NtStatus::PROCEDURE_NOT_FOUND);
        cases += 1;
        bench.healthy("unknown code");
    }
    eprintln!("malformed-input matrix: {cases} cases, 0 failures");
    figures("matrix", &[("cases", cases)]);
}
