//! ABI round trips and every IOCTL's error statuses (spec §2.2–§2.4, §2.6).

use std::collections::BTreeSet;

use wv_abi::consts::*;
use wv_abi::ioctl::*;
use wv_abi::{
    NtStatus, WV_IO_DEVICE_ATTRIBUTES, WV_IO_ID, WV_IO_MEMORY_REGISTER, WV_IO_PORT_ATTRIBUTES,
    WV_IO_QP_MULTICAST,
};
use wv_client::raw::{IoStatus, RawFile};
use zerocopy::IntoBytes;

use super::raw::*;
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Problem, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "abi-guid-query",
            run: guid_query,
            clock: Clock::Own,
        },
        Scenario {
            name: "abi-library-query",
            run: library_query,
            clock: Clock::Own,
        },
        Scenario {
            name: "abi-device-open-query",
            run: device_open_query,
            clock: Clock::Own,
        },
        Scenario {
            name: "abi-port-gid-pkey-query",
            run: port_gid_pkey,
            clock: Clock::Own,
        },
        Scenario {
            name: "status-short-buffers",
            run: short_buffers,
            clock: Clock::Own,
        },
        Scenario {
            name: "status-bad-ids",
            run: bad_ids,
            clock: Clock::Own,
        },
        Scenario {
            name: "status-unknown-codes",
            run: unknown_codes,
            clock: Clock::Own,
        },
        Scenario {
            name: "status-endpoint-codes",
            run: endpoint_codes,
            clock: Clock::Own,
        },
        Scenario {
            name: "status-file-closed",
            run: file_closed,
            clock: Clock::Own,
        },
    ]
}

/// GUID_QUERY: Count is the total, Information = 8 + 8·copied, truncation is SUCCESS.
fn guid_query<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let st = ok(&f, WV_IOCTL_GUID_QUERY, &[], 8 + 8 * 64)?;
    let count: u64 = read(&st.output, "GUID_QUERY")?;
    ensure!(count >= 1, "GUID_QUERY: Count 0, want at least one device");
    ensure!(count <= 64, "GUID_QUERY: Count {count} is implausible");
    let n = count as usize;
    ensure!(
        st.information == 8 + 8 * n,
        "GUID_QUERY(520-byte buffer, {n} devices): Information {}, want {}",
        st.information,
        8 + 8 * n
    );
    let all = guids(&f)?;
    let distinct: BTreeSet<u64> = all.iter().copied().collect();
    ensure!(
        distinct.len() == n && !distinct.contains(&0),
        "GUID_QUERY: GUIDs not distinct and non-zero: {all:x?}"
    );
    if let Some(machine) = env.machine() {
        let want = machine.device_guids();
        ensure!(
            want == all,
            "GUID_QUERY lists {all:x?}, the stack has {want:x?}"
        );
    }
    // The minimum buffer holds one GUID; Count still says how many exist.
    let st = ok(&f, WV_IOCTL_GUID_QUERY, &[], 16)?;
    ensure!(
        st.information == 16,
        "GUID_QUERY(16 bytes): Information {}, want 16 (8 + 8·1 copied)",
        st.information
    );
    let count16: u64 = read(&st.output, "GUID_QUERY")?;
    let first: u64 = read(st.output.get(8..).unwrap_or(&[]), "GUID_QUERY")?;
    ensure!(
        count16 == count && first == all[0],
        "GUID_QUERY(16 bytes): Count {count16} GUID {first:#x}, want Count {count} GUID {:#x}",
        all[0]
    );
    // A spare slot is not reported as copied.
    let st = ok(&f, WV_IOCTL_GUID_QUERY, &[], 8 + 8 * n + 8)?;
    ensure!(
        st.information == 8 + 8 * n,
        "GUID_QUERY(one spare slot): Information {}, want {}",
        st.information,
        8 + 8 * n
    );
    let st = call(&f, WV_IOCTL_GUID_QUERY, &[], 15)?;
    expect(&st, NtStatus::BUFFER_TOO_SMALL, "GUID_QUERY(15 bytes)")?;
    ensure!(
        st.output.is_empty(),
        "GUID_QUERY(15 bytes): {} output bytes came back with an error status",
        st.output.len()
    );
    Ok(format!(
        "Count {n}, Information 8+8·copied (16-byte buffer: 1 of {n}), spare slot not counted, \
         15 bytes → BUFFER_TOO_SMALL"
    ))
}

/// LIBRARY_QUERY: NUL-terminated name, Information = strlen + 1, unknown GUID, short buffers.
fn library_query<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let all = guids(&f)?;
    let mut names = Vec::new();
    for &guid in &all {
        let st = ok(&f, WV_IOCTL_LIBRARY_QUERY, &u64_in(guid), 28)?;
        let nul = st.output.iter().position(|&b| b == 0);
        ensure!(
            nul == Some(st.output.len().saturating_sub(1)) && st.output.len() > 1,
            "LIBRARY_QUERY({guid:#x}): output {:?} is not one non-empty NUL-terminated name",
            st.output
        );
        ensure!(
            st.information == st.output.len(),
            "LIBRARY_QUERY: Information {} for a {}-byte name",
            st.information,
            st.output.len()
        );
        let name = String::from_utf8_lossy(&st.output[..st.output.len() - 1]).into_owned();
        // One byte short of name + NUL.
        let short = st.output.len() - 1;
        let st = call(&f, WV_IOCTL_LIBRARY_QUERY, &u64_in(guid), short)?;
        expect(
            &st,
            NtStatus::BUFFER_TOO_SMALL,
            &format!("LIBRARY_QUERY({short}-byte buffer for {name:?})"),
        )?;
        ensure!(
            st.output.is_empty(),
            "LIBRARY_QUERY(short): output came back with an error status"
        );
        names.push(name);
    }
    let unknown = (0..u64::MAX)
        .map(|i| 0xDEAD_0000_0000_0000 | i)
        .find(|g| !all.contains(g))
        .unwrap_or(1);
    call_expect(
        &f,
        WV_IOCTL_LIBRARY_QUERY,
        &u64_in(unknown),
        28,
        NtStatus::NO_SUCH_DEVICE,
        "LIBRARY_QUERY(unknown GUID)",
    )?;
    call_expect(
        &f,
        WV_IOCTL_LIBRARY_QUERY,
        &[0; 4],
        28,
        NtStatus::BUFFER_TOO_SMALL,
        "LIBRARY_QUERY(4-byte input)",
    )?;
    call_expect(
        &f,
        WV_IOCTL_LIBRARY_QUERY,
        &u64_in(all[0]),
        0,
        NtStatus::BUFFER_TOO_SMALL,
        "LIBRARY_QUERY(no output)",
    )?;
    Ok(format!(
        "names {names:?}, Information = strlen+1, one byte short → BUFFER_TOO_SMALL, \
         unknown GUID → NO_SUCH_DEVICE"
    ))
}

/// DEVICE_OPEN / DEVICE_QUERY / DEVICE_CLOSE round trip.
fn device_open_query<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let all = guids(&f)?;
    let guid = all[0];
    let st = ok(&f, WV_IOCTL_DEVICE_OPEN, &id_in(guid, 0, 0x5A5A), 16)?;
    ensure!(
        st.information == 16,
        "DEVICE_OPEN: Information {}, want 16 (the output length)",
        st.information
    );
    let out: WV_IO_ID = read(&st.output, "DEVICE_OPEN")?;
    ensure!(out.Id == 1, "DEVICE_OPEN: first id {}, want 1", out.Id);
    ensure!(
        out.Data == 0x5A5A,
        "DEVICE_OPEN: Data {:#x} not echoed (METHOD_BUFFERED aliasing)",
        out.Data
    );
    let second = open_dev(&f, *all.last().unwrap_or(&guid))?;
    ensure!(second == 2, "second DEVICE_OPEN: id {second}, want 2");
    call_expect(
        &f,
        WV_IOCTL_DEVICE_OPEN,
        &id_in(!guid, 0, 0),
        16,
        NtStatus::NO_SUCH_DEVICE,
        "DEVICE_OPEN(unknown GUID)",
    )?;

    let st = ok(&f, WV_IOCTL_DEVICE_QUERY, &u64_in(1), 152)?;
    ensure!(
        st.information == 152,
        "DEVICE_QUERY: Information {}, want 152",
        st.information
    );
    let attr: WV_IO_DEVICE_ATTRIBUTES = read(&st.output, "DEVICE_QUERY")?;
    ensure!(
        attr.NodeGuid == guid,
        "DEVICE_QUERY: NodeGuid {:#x}, opened {guid:#x}",
        attr.NodeGuid
    );
    ensure!(
        attr.DeviceType == WV_DEVICE_INFINIBAND,
        "DEVICE_QUERY: DeviceType {}, want 1 (WV_DEVICE_INFINIBAND, always)",
        attr.DeviceType
    );
    let caps = WV_IO_RC_RNR_NAK_GENERATION | WV_IO_BATCH_NOTIFY_CQ;
    ensure!(
        attr.CapabilityFlags & caps == caps,
        "DEVICE_QUERY: CapabilityFlags {:#x} lack RC_RNR_NAK_GENERATION|BATCH_NOTIFY_CQ",
        attr.CapabilityFlags
    );
    ensure!(
        attr.PhysPortCount >= 1
            && attr.MaxQp > 0
            && attr.MaxCq > 0
            && attr.MaxPd > 0
            && attr.MaxQpWr > 0
            && attr.MaxSge > 0,
        "DEVICE_QUERY: implausible limits (ports {}, max_qp {}, max_cq {}, max_pd {}, \
         max_qp_wr {}, max_sge {})",
        attr.PhysPortCount,
        attr.MaxQp,
        attr.MaxCq,
        attr.MaxPd,
        attr.MaxQpWr,
        attr.MaxSge
    );
    ensure!(
        attr.Reserved == [0, 0],
        "DEVICE_QUERY: Reserved {:?} not zero",
        attr.Reserved
    );
    call_expect(
        &f,
        WV_IOCTL_DEVICE_QUERY,
        &u64_in(1),
        151,
        NtStatus::BUFFER_TOO_SMALL,
        "DEVICE_QUERY(151 bytes)",
    )?;
    call_expect(
        &f,
        WV_IOCTL_DEVICE_CLOSE,
        &u64_in(2),
        0,
        NtStatus::SUCCESS,
        "DEVICE_CLOSE(2)",
    )?;
    call_expect(
        &f,
        WV_IOCTL_DEVICE_QUERY,
        &u64_in(2),
        152,
        NtStatus::NO_SUCH_DEVICE,
        "DEVICE_QUERY(closed id)",
    )?;
    Ok(format!(
        "open → id 1 then 2, Information 16, Data echoed; query: Information 152, NodeGuid, \
         DeviceType 1, RNR_NAK|BATCH_NOTIFY caps, {} port(s), max_qp {}; 151 bytes → \
         BUFFER_TOO_SMALL; closed id → NO_SUCH_DEVICE",
        attr.PhysPortCount, attr.MaxQp
    ))
}

/// PORT/GID/PKEY queries on every port: sizes, Information, MORE_ENTRIES on truncation, port
/// numbers out of range.
fn port_gid_pkey<E: Env>(env: &E) -> Outcome {
    let (f, dev) = open_device(env)?;
    let attr: WV_IO_DEVICE_ATTRIBUTES = read(
        &ok(&f, WV_IOCTL_DEVICE_QUERY, &u64_in(dev), 152)?.output,
        "DEVICE_QUERY",
    )?;
    let ports = attr.PhysPortCount;
    let mut truncations = Vec::new();
    for port in 1..=ports {
        let st = ok(&f, WV_IOCTL_DEVICE_PORT_QUERY, &port_in(dev, port), 52)?;
        ensure!(
            st.information == 52,
            "PORT_QUERY(port {port}): Information {}, want 52",
            st.information
        );
        let pa: WV_IO_PORT_ATTRIBUTES = read(&st.output, "PORT_QUERY")?;
        ensure!(
            (WV_IO_PORT_DOWN..=WV_IO_PORT_ACTIVEDEFER).contains(&pa.State),
            "PORT_QUERY(port {port}): State {}",
            pa.State
        );
        ensure!(
            [256, 512, 1024, 2048, 4096].contains(&pa.ActiveMtu),
            "PORT_QUERY(port {port}): ActiveMtu {} is not 256..4096",
            pa.ActiveMtu
        );
        let gids = pa.GidTableLength as usize;
        let pkeys = pa.PkeyTableLength as usize;
        ensure!(
            gids >= 1 && pkeys >= 1,
            "PORT_QUERY(port {port}): {gids} GIDs, {pkeys} pkeys"
        );
        // Whole GID table, and a spare entry that must not be counted.
        let gid = Table {
            code: WV_IOCTL_DEVICE_GID_QUERY,
            name: "GID_QUERY",
            entry: "GID",
            size: 16,
            entries: gids,
        };
        let (full, truncated) = gid.query(&f, dev, port, &mut truncations)?;
        let spare = ok(
            &f,
            WV_IOCTL_DEVICE_GID_QUERY,
            &port_in(dev, port),
            16 * gids + 16,
        )?;
        ensure!(
            spare.information == 16 * gids && spare.output == full.output,
            "GID_QUERY(port {port}, one spare entry): Information {}, want {}",
            spare.information,
            16 * gids
        );
        if let Some(st) = truncated {
            ensure!(
                st.output[..] == full.output[..16],
                "GID_QUERY(truncated): first GID differs"
            );
        }
        let pkey = Table {
            code: WV_IOCTL_DEVICE_PKEY_QUERY,
            name: "PKEY_QUERY",
            entry: "pkey",
            size: 2,
            entries: pkeys,
        };
        let (full, _) = pkey.query(&f, dev, port, &mut truncations)?;
        ensure!(
            full.output.get(..2) == Some(&0xFFFFu16.to_be_bytes()[..]),
            "PKEY_QUERY(port {port}): pkey 0 is {:02x?}, want the default FF FF",
            full.output.get(..2)
        );
    }
    for bad in [0u8, ports + 1, 255] {
        for (code, out) in [
            (WV_IOCTL_DEVICE_PORT_QUERY, 52),
            (WV_IOCTL_DEVICE_GID_QUERY, 16),
            (WV_IOCTL_DEVICE_PKEY_QUERY, 2),
        ] {
            call_expect(
                &f,
                code,
                &port_in(dev, bad),
                out,
                NtStatus::INVALID_PORT_HANDLE,
                &format!("{}(port {bad})", code_name(code)),
            )?;
        }
    }
    if truncations.is_empty() {
        truncations.push("tables of one entry: MORE_ENTRIES not reachable".into());
    }
    Ok(format!(
        "{ports} port(s): PORT_QUERY Information 52, whole GID/pkey tables with exact \
         Information (spare entry not counted), {}; port 0/{}/255 → INVALID_PORT_HANDLE",
        truncations.join(", "),
        ports + 1
    ))
}

/// The endpoint IOCTLs (their own scenarios live in `endpoint.rs`).
/// A port's table that a query returns whole: GIDs (DEVICE_GID_QUERY) or P_Keys
/// (DEVICE_PKEY_QUERY).
struct Table {
    code: u32,
    /// The query, for messages.
    name: &'static str,
    /// An entry, for the truncation note.
    entry: &'static str,
    /// Bytes of an entry.
    size: usize,
    /// Entries the port reports.
    entries: usize,
}

impl Table {
    /// The whole table, Information its length; where it has more than one entry, room for one
    /// must give MORE_ENTRIES with Information one entry (noted in `truncations`). Returns the
    /// whole table's answer and the truncated one.
    fn query<F: RawFile>(
        &self,
        f: &F,
        dev: u64,
        port: u8,
        truncations: &mut Vec<String>,
    ) -> Result<(IoStatus, Option<IoStatus>), Problem> {
        let (name, size, entries) = (self.name, self.size, self.entries);
        let full = ok(f, self.code, &port_in(dev, port), size * entries)?;
        ensure!(
            full.information == size * entries,
            "{name}(port {port}, {entries} entries): Information {}, want {}",
            full.information,
            size * entries
        );
        if entries < 2 {
            return Ok((full, None));
        }
        let st = call_expect(
            f,
            self.code,
            &port_in(dev, port),
            size,
            NtStatus::MORE_ENTRIES,
            &format!("{name}(port {port}, room for 1 of {entries})"),
        )?;
        ensure!(
            st.information == size,
            "{name}(truncated): Information {}, want {size}",
            st.information
        );
        let entry = self.entry;
        truncations.push(format!(
            "port {port}: {entry} 1 of {entries} → MORE_ENTRIES"
        ));
        Ok((full, Some(st)))
    }
}

fn is_endpoint(i: Ioctl) -> bool {
    (Ioctl::EpCreate.index()..=Ioctl::EpGetRequest.index()).contains(&i.index())
}

/// Every IOCTL: one byte short of the input minimum, then one byte short of the output
/// minimum → BUFFER_TOO_SMALL, inline, before any id is looked up (the inputs name id 0).
fn short_buffers<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let mut checked = 0;
    let mut problems = Vec::new();
    for i in Ioctl::ALL {
        let (min_in, min_out) = (i.min_input(), i.min_output());
        // (input bytes, output bytes, the side one byte short, its length)
        let short_input = (min_in > 0).then(|| (min_in - 1, min_out.max(16), "input", min_in - 1));
        let short_output = (min_out > 0).then(|| (min_in, min_out - 1, "output", min_out - 1));
        for (input, output, side, len) in [short_input, short_output].into_iter().flatten() {
            let st = call(&f, i.code(), &vec![0; input], output)?;
            if st.status != NtStatus::BUFFER_TOO_SMALL.0 {
                problems.push(format!(
                    "{}({len} {side} bytes): {}",
                    code_name(i.code()),
                    st_name(st.status)
                ));
            }
            checked += 1;
        }
    }
    if !problems.is_empty() {
        return Err(Problem::Fail(format!(
            "want BUFFER_TOO_SMALL: {}",
            problems.join("; ")
        )));
    }
    Ok(format!(
        "{checked} short input/output buffers over all {} IOCTLs → BUFFER_TOO_SMALL inline, \
         checked before any id lookup",
        Ioctl::ALL.len()
    ))
}

/// One row of the bad-id table.
struct Row {
    code: u32,
    what: &'static str,
    input: Vec<u8>,
    out: usize,
    want: NtStatus,
}

/// Every non-endpoint IOCTL naming an object that does not exist (ids 0 and 99, and the wrong
/// second-level object) → the exact status of spec §2.4: NO_SUCH_DEVICE for device ids in
/// open/close/query/PD/CQ creation, NOT_FOUND for notify/cancel and every other object,
/// INVALID_PORT_HANDLE for port numbers.
fn bad_ids<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let guid = env.guid(&f)?;
    let o = objects(&f, guid)?;
    let srq = create_srq(&f, o.pd)?;
    let mut rows = Vec::new();
    // Requests naming the same kind of missing object, answered with the same status.
    let mut group = |what, want, reqs: Vec<(u32, Vec<u8>, usize)>| {
        rows.extend(reqs.into_iter().map(|(code, input, out)| Row {
            code,
            what,
            input,
            out,
            want,
        }))
    };
    for bad in [0u64, 99] {
        use NtStatus as S;
        let mr = WV_IO_MEMORY_REGISTER {
            Id: bad,
            Address: 0x1000,
            BufferLength: 64,
            AccessFlags: WV_ACCESS_LOCAL_WRITE,
            Reserved: 0,
        };
        let mc = WV_IO_QP_MULTICAST {
            Id: WV_IO_ID::new(bad, u32::from(0xC001u16.to_be())),
            Gid: wv_abi::WV_IO_GID { Raw: [0xFF; 16] },
        };
        group(
            "device",
            S::NO_SUCH_DEVICE,
            vec![
                (WV_IOCTL_DEVICE_CLOSE, u64_in(bad), 0),
                (WV_IOCTL_DEVICE_QUERY, u64_in(bad), 152),
                (WV_IOCTL_DEVICE_PORT_QUERY, port_in(bad, 1), 52),
                (WV_IOCTL_DEVICE_GID_QUERY, port_in(bad, 1), 16),
                (WV_IOCTL_DEVICE_PKEY_QUERY, port_in(bad, 1), 2),
                (WV_IOCTL_PD_ALLOCATE, id_in(bad, 0, 0), 16),
                (WV_IOCTL_CQ_CREATE, id_in(bad, 0, 4), 16),
            ],
        );
        group(
            "device",
            S::NOT_FOUND,
            vec![
                (WV_IOCTL_DEVICE_NOTIFY, id_in(bad, 0, 1), 4),
                (WV_IOCTL_DEVICE_CANCEL, u64_in(bad), 0),
            ],
        );
        group(
            "pd",
            S::NOT_FOUND,
            vec![
                (WV_IOCTL_PD_DEALLOCATE, u64_in(bad), 0),
                (WV_IOCTL_PD_CANCEL, u64_in(bad), 0),
                (WV_IOCTL_MEMORY_REGISTER, mr.as_bytes().to_vec(), 8),
                (WV_IOCTL_MEMORY_DEREGISTER, id_in(bad, 0, 1), 0),
                (WV_IOCTL_MW_ALLOCATE, id_in(bad, 0, 0), 16),
                (WV_IOCTL_AH_CREATE, ah_in(bad, [0; 16]), 64),
                (WV_IOCTL_SRQ_CREATE, srq_in(bad, 8, 1, 0), 32),
                (WV_IOCTL_QP_CREATE, qp_create_in(bad, o.cq, o.cq, 0, 0), 72),
            ],
        );
        group(
            "mw",
            S::NOT_FOUND,
            vec![(WV_IOCTL_MW_DEALLOCATE, u64_in(bad), 0)],
        );
        group(
            "ah",
            S::NOT_FOUND,
            vec![(WV_IOCTL_AH_DESTROY, u64_in(bad), 0)],
        );
        group(
            "cq",
            S::NOT_FOUND,
            vec![
                (WV_IOCTL_CQ_DESTROY, u64_in(bad), 0),
                (WV_IOCTL_CQ_RESIZE, id_in(bad, 0, 8), 16),
                (WV_IOCTL_CQ_NOTIFY, id_in(bad, 0, WV_CQ_NEXT_COMPLETION), 0),
                (WV_IOCTL_CQ_CANCEL, u64_in(bad), 0),
            ],
        );
        group(
            "srq",
            S::NOT_FOUND,
            vec![
                (WV_IOCTL_SRQ_DESTROY, u64_in(bad), 0),
                (WV_IOCTL_SRQ_QUERY, srq_in(bad, 0, 0, 0), 32),
                (WV_IOCTL_SRQ_MODIFY, srq_in(bad, 8, 1, 0), 32),
                (WV_IOCTL_SRQ_NOTIFY, u64_in(bad), 0),
                (WV_IOCTL_SRQ_CANCEL, u64_in(bad), 0),
            ],
        );
        group(
            "send cq",
            S::NOT_FOUND,
            vec![(WV_IOCTL_QP_CREATE, qp_create_in(o.pd, bad, o.cq, 0, 0), 72)],
        );
        group(
            "receive cq",
            S::NOT_FOUND,
            vec![(WV_IOCTL_QP_CREATE, qp_create_in(o.pd, o.cq, bad, 0, 0), 72)],
        );
        group(
            "qp",
            S::NOT_FOUND,
            vec![
                (WV_IOCTL_QP_DESTROY, u64_in(bad), 0),
                (WV_IOCTL_QP_QUERY, u64_in(bad), 192),
                (
                    WV_IOCTL_QP_MODIFY,
                    modify_in(bad, WV_IO_QP_STATE_INIT, None),
                    8,
                ),
                (WV_IOCTL_QP_ATTACH, mc.as_bytes().to_vec(), 0),
                (WV_IOCTL_QP_DETACH, mc.as_bytes().to_vec(), 0),
                (WV_IOCTL_QP_CANCEL, u64_in(bad), 0),
            ],
        );
        if bad != 0 {
            // SrqId 0 means "no SRQ", so only a non-zero unknown SRQ is an error.
            group(
                "srq",
                S::NOT_FOUND,
                vec![(
                    WV_IOCTL_QP_CREATE,
                    qp_create_in(o.pd, o.cq, o.cq, bad, 0),
                    72,
                )],
            );
        }
    }
    let unknown_guid = !guid;
    group(
        "GUID",
        NtStatus::NO_SUCH_DEVICE,
        vec![
            (WV_IOCTL_LIBRARY_QUERY, u64_in(unknown_guid), 28),
            (WV_IOCTL_DEVICE_OPEN, id_in(unknown_guid, 0, 0), 16),
        ],
    );
    group(
        "lkey",
        NtStatus::NOT_FOUND,
        vec![(WV_IOCTL_MEMORY_DEREGISTER, id_in(o.pd, 0, 0xDEAD), 0)],
    );
    group(
        "port",
        NtStatus::INVALID_PORT_HANDLE,
        vec![
            (WV_IOCTL_DEVICE_NOTIFY, id_in(o.dev, 0, 0), 4),
            (WV_IOCTL_DEVICE_NOTIFY, id_in(o.dev, 0, 200), 4),
        ],
    );
    let mc = WV_IO_QP_MULTICAST {
        Id: WV_IO_ID::new(o.qp, 0),
        Gid: wv_abi::WV_IO_GID { Raw: [0xFF; 16] },
    };
    group(
        "group",
        NtStatus::NOT_FOUND,
        vec![(WV_IOCTL_QP_DETACH, mc.as_bytes().to_vec(), 0)],
    );
    // The table must cover every non-endpoint IOCTL that takes an id (all but GUID_QUERY).
    let covered: BTreeSet<u32> = rows.iter().map(|r| r.code).collect();
    let missing: Vec<String> = Ioctl::ALL
        .into_iter()
        .filter(|i| !is_endpoint(*i) && *i != Ioctl::GuidQuery && !covered.contains(&i.code()))
        .map(|i| i.name().to_string())
        .collect();
    ensure!(missing.is_empty(), "table misses {missing:?}");
    let mut problems = Vec::new();
    for r in &rows {
        let st = call(&f, r.code, &r.input, r.out)?;
        if st.status != r.want.0 {
            problems.push(format!(
                "{}(bad {}): {}, want {}",
                code_name(r.code),
                r.what,
                st_name(st.status),
                st_name(r.want.0)
            ));
        }
    }
    // Nothing was damaged by the bad calls: the real objects still answer.
    query_qp(&f, o.qp)?;
    call_expect(
        &f,
        WV_IOCTL_SRQ_QUERY,
        &srq_in(srq, 0, 0, 0),
        32,
        NtStatus::SUCCESS,
        "SRQ_QUERY(real srq)",
    )?;
    if !problems.is_empty() {
        return Err(Problem::Fail(problems.join("; ")));
    }
    Ok(format!(
        "{} requests naming missing objects over all 36 id-taking IOCTLs: NO_SUCH_DEVICE / \
         NOT_FOUND / INVALID_PORT_HANDLE, each the status OFW's handler of that IOCTL returns, \
         all inline",
        rows.len()
    ))
}

/// Codes outside the table → PROCEDURE_NOT_FOUND.
fn unknown_codes<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let codes = [
        (wv_ioctl(WV_IOCTL_MIN), "WV_IOCTL(MIN)"),
        (wv_ioctl(WV_IOCTL_MAX), "WV_IOCTL(MAX)"),
        (wv_ioctl(WV_IOCTL_MAX + 1), "WV_IOCTL(MAX+1)"),
        (WV_IOCTL_GUID_QUERY | 3, "GUID_QUERY with METHOD_NEITHER"),
        (
            WV_IOCTL_GUID_QUERY & !0xC000,
            "GUID_QUERY with FILE_ANY_ACCESS",
        ),
        (
            (0x22 << 16) | (WV_IOCTL_GUID_QUERY & 0xFFFF),
            "GUID_QUERY function, FILE_DEVICE_UNKNOWN",
        ),
        (0x1234, "0x1234"),
    ];
    for (code, what) in codes {
        call_expect(&f, code, &[0; 16], 16, NtStatus::PROCEDURE_NOT_FOUND, what)?;
    }
    Ok(format!(
        "{} codes outside the table (MIN, MAX, MAX+1, other method/access/device type) → \
         PROCEDURE_NOT_FOUND inline",
        codes.len()
    ))
}

/// The endpoint codes before any endpoint exists: each id-taking one with a well-sized
/// request naming no endpoint → NOT_FOUND inline; EP_LOOKUP and the multicast pair →
/// NOT_IMPLEMENTED inline, as OFW's (the datagram endpoint was never implemented).
fn endpoint_codes<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let mut n = 0;
    for i in Ioctl::ALL.into_iter().filter(|i| is_endpoint(*i)) {
        let mut input = vec![0u8; i.min_input().max(8)];
        input[..8].copy_from_slice(&77u64.to_ne_bytes());
        if i == Ioctl::EpModify {
            // A valid option (ROUTE) with its 64-byte path record, so the decoder's own
            // INVALID_PARAMETER / BUFFER_TOO_SMALL checks pass.
            input = id_in(77, 0, WV_IO_EP_OPTION_ROUTE);
            input.resize(16 + 64, 0);
        }
        let want = match i {
            Ioctl::EpLookup | Ioctl::EpMulticastJoin | Ioctl::EpMulticastLeave => {
                NtStatus::NOT_IMPLEMENTED
            }
            // EpType 77 is no endpoint type.
            Ioctl::EpCreate => NtStatus::INVALID_PARAMETER,
            _ => NtStatus::NOT_FOUND,
        };
        call_expect(
            &f,
            i.code(),
            &input,
            i.min_output().max(16),
            want,
            &code_name(i.code()),
        )?;
        n += 1;
    }
    Ok(format!(
        "all {n} endpoint IOCTLs answer inline: unknown endpoint → NOT_FOUND, unknown EpType \
         → INVALID_PARAMETER, EP_LOOKUP/EP_MULTICAST_JOIN/LEAVE → NOT_IMPLEMENTED"
    ))
}

/// An IOCTL that reaches the driver after the file's cleanup → FILE_CLOSED.
fn file_closed<E: Env>(env: &E) -> Outcome {
    let (f, dev) = open_device(env)?;
    match env.close_racing_ioctl(f, WV_IOCTL_DEVICE_QUERY, &u64_in(dev), 152) {
        None => Err(Problem::Skip(
            "this transport cannot deliver an IOCTL after CloseHandle".into(),
        )),
        Some(st) => {
            expect(&st, NtStatus::FILE_CLOSED, "DEVICE_QUERY after cleanup")?;
            Ok("DEVICE_QUERY racing CloseHandle (after cleanup) → FILE_CLOSED".into())
        }
    }
}
