//! RC and UD traffic with byte checks, polled and event-driven (CQ notify), and the CQ notify
//! semantics that need real completions: broadcast to every parked waiter, and the sticky CQ
//! error after an overrun (spec §7.1-d).

use wv_abi::NtStatus;
use wv_abi::consts::{WV_CQ_ERROR, WV_CQ_NEXT_COMPLETION, WV_CQ_SOLICITED};
use wv_abi::ioctl::WV_IOCTL_CQ_NOTIFY;
use wv_client::raw::{RawFile, RawIo};
use wv_client::verbs::{GRH_BYTES, SendWr, WcOpcode, WcStatus, WrOpcode, send_flags, wc_flags};

use super::fixture::*;
use super::raw::{ends_as, ensure, expect, id_in, park, u64_in, wait};
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "traffic-rc-send-recv",
            run: rc_send_recv,
            clock: Clock::Own,
        },
        Scenario {
            name: "traffic-rc-rdma-write-read",
            run: rc_rdma,
            clock: Clock::Own,
        },
        Scenario {
            name: "traffic-ud-send-recv",
            run: ud_send_recv,
            clock: Clock::Own,
        },
        Scenario {
            name: "traffic-rc-events",
            run: rc_events,
            clock: Clock::Own,
        },
        Scenario {
            name: "notify-completion-broadcast",
            run: broadcast,
            clock: Clock::Own,
        },
        Scenario {
            name: "notify-sticky-cq-error",
            run: sticky_error,
            clock: Clock::Own,
        },
    ]
}

fn check_wc(
    w: &wv_client::verbs::WorkCompletion,
    wr_id: u64,
    opcode: WcOpcode,
    len: Option<u32>,
    what: &str,
) -> Result<(), String> {
    ensure!(
        w.wr_id == wr_id && w.status == WcStatus::Success && w.opcode == opcode,
        "{what}: completion (wr_id {}, {:?}, {:?}), want ({wr_id}, Success, {opcode:?})",
        w.wr_id,
        w.status,
        w.opcode
    );
    if let Some(len) = len {
        ensure!(
            w.byte_len == len,
            "{what}: byte_len {}, want {len}",
            w.byte_len
        );
    }
    Ok(())
}

/// Polls one completion from `cq` and checks it ([`check_wc`]); returns it for what else the
/// caller checks.
fn next_wc<F: RawFile>(
    cq: &wv_client::verbs::Cq<F>,
    wr_id: u64,
    opcode: WcOpcode,
    len: Option<u32>,
    what: &str,
) -> Result<wv_client::verbs::WorkCompletion, String> {
    let w = poll_one(cq, what)?;
    check_wc(&w, wr_id, opcode, len, what)?;
    Ok(w)
}

/// Posts `wr` on `from`'s QP and checks the sender's completion of it (`opcode`, and the
/// `len` the opcode reports, if any).
fn post_completes<F: RawFile + Send + Sync + 'static>(
    from: &End<F>,
    wr: &SendWr<'_>,
    opcode: WcOpcode,
    len: Option<u32>,
    what: &str,
) -> Result<(), String> {
    from.qp
        .post_send(wr)
        .map_err(|e| format!("{what}: post_send: {e:?}"))?;
    next_wc(&from.cq, wr.wr_id, opcode, len, what).map(drop)
}

/// RDMA `opcode` (write or read) `wr_id` of the local `sge` against `len` bytes of `target`'s
/// region at `offset`; checks the initiator's completion (a read reports its length).
fn rdma<F: RawFile + Send + Sync + 'static>(
    from: &End<F>,
    target: &End<F>,
    wr_id: u64,
    opcode: WrOpcode,
    sge: wv_client::verbs::Sge,
    offset: u64,
) -> Result<(), String> {
    let (completion, len, what) = match opcode {
        WrOpcode::RdmaRead => (WcOpcode::RdmaRead, Some(sge.length), "RDMA read"),
        _ => (WcOpcode::RdmaWrite, None, "RDMA write"),
    };
    let sg = [sge];
    let mut wr = SendWr::new(wr_id, opcode);
    wr.sg_list = &sg;
    wr.remote_addr = target.mr.addr() + offset;
    wr.rkey = target.mr.rkey();
    post_completes(from, &wr, completion, len, what)
}

/// RC SEND/RECV between two devices: a 4 KiB gather of two SGEs, and a small inline send; the
/// receiver's bytes equal the sender's.
fn rc_send_recv<E: Env>(env: &E) -> Outcome {
    let (_p, a, b) = rc_pair(env)?;
    let data = pattern(4096, 7);
    a.buf.write(0, &data).map_err(|e| e.to_string())?;
    b.post_recv(100, 1000, 8192, "post_recv")?;
    let sge = [a.mr.sge(0, 1000), a.mr.sge(1000, 3096)];
    let mut wr = SendWr::new(1, WrOpcode::Send);
    wr.sg_list = &sge;
    post_completes(&a, &wr, WcOpcode::Send, None, "A send")?;
    let w = next_wc(&b.cq, 100, WcOpcode::Recv, Some(4096), "B recv")?;
    ensure!(
        w.qp_num == b.qp.qpn(),
        "recv completion qp_num {:#x}, want {:#x}",
        w.qp_num,
        b.qp.qpn()
    );
    let mut got = vec![0u8; 4096];
    b.buf.read(1000, &mut got).map_err(|e| e.to_string())?;
    ensure!(got == data, "received bytes differ from the 4096 sent");
    // Inline: the payload is copied at post time, so overwriting it afterwards is harmless.
    let small = b"inline payload, 31 bytes long!!";
    b.post_recv(101, 0, 64, "post_recv")?;
    let mut wr = SendWr::new(2, WrOpcode::Send);
    wr.inline_data = Some(small);
    wr.send_flags = send_flags::INLINE;
    post_completes(&a, &wr, WcOpcode::Send, None, "A inline send")?;
    next_wc(
        &b.cq,
        101,
        WcOpcode::Recv,
        Some(small.len() as u32),
        "B inline recv",
    )?;
    let mut got = vec![0u8; small.len()];
    b.buf.read(0, &mut got).map_err(|e| e.to_string())?;
    ensure!(got == small, "inline bytes differ");
    cq_empty(&a.cq, "A")?;
    cq_empty(&b.cq, "B")?;
    Ok(
        "RC between two devices: 4096-byte send from 2 SGEs lands byte-exact at offset 1000 \
        (RECV, byte_len 4096, qp_num), a 31-byte inline send likewise; one completion each"
            .into(),
    )
}

/// RDMA WRITE of 8 KiB into the peer, then RDMA READ of it back into another place; both
/// byte-checked, and the target sees no completion for either.
fn rc_rdma<E: Env>(env: &E) -> Outcome {
    let (_p, a, b) = rc_pair(env)?;
    let data = pattern(8192, 42);
    a.buf.write(0, &data).map_err(|e| e.to_string())?;
    rdma(&a, &b, 1, WrOpcode::RdmaWrite, a.mr.sge(0, 8192), 4096)?;
    let mut got = vec![0u8; 8192];
    b.buf.read(4096, &mut got).map_err(|e| e.to_string())?;
    ensure!(got == data, "RDMA-written bytes differ at the target");
    // Read it back into A at offset 32 KiB.
    rdma(&a, &b, 2, WrOpcode::RdmaRead, a.mr.sge(32768, 8192), 4096)?;
    let mut back = vec![0u8; 8192];
    a.buf.read(32768, &mut back).map_err(|e| e.to_string())?;
    ensure!(back == data, "RDMA-read bytes differ from the target's");
    cq_empty(&b.cq, "target (one-sided operations)")?;
    Ok(
        "8192-byte RDMA write lands byte-exact in the peer, RDMA read brings it back \
        byte-exact (byte_len 8192); the target's CQ stays empty"
            .into(),
    )
}

/// UD through an AH: the receiver gets a GRH (40 bytes) then the payload, with the sender's
/// QPN as src_qp.
fn ud_send_recv<E: Env>(env: &E) -> Outcome {
    let (_p, a, b) = pair(env, Shape::ud())?;
    ud_to_rts(&a)?;
    ud_to_rts(&b)?;
    let ah = a.pd.create_ah(&av(&a, &b)).map_err(verr("AH_CREATE"))?;
    let len = 1024u32;
    let data = pattern(len as usize, 9);
    a.buf.write(0, &data).map_err(|e| e.to_string())?;
    b.post_recv(7, 0, len + GRH_BYTES as u32, "post_recv")?;
    let sge = [a.mr.sge(0, len)];
    let mut wr = SendWr::new(8, WrOpcode::Send);
    wr.sg_list = &sge;
    wr.ud = Some(ah.ud(b.qp.qpn(), QKEY));
    post_completes(&a, &wr, WcOpcode::Send, None, "UD send")?;
    let w = next_wc(
        &b.cq,
        7,
        WcOpcode::Recv,
        Some(len + GRH_BYTES as u32),
        "UD recv",
    )?;
    ensure!(
        w.src_qp == a.qp.qpn() && w.wc_flags & wc_flags::GRH != 0,
        "UD recv: src_qp {:#x} (want {:#x}), wc_flags {:#x} (want GRH)",
        w.src_qp,
        a.qp.qpn(),
        w.wc_flags
    );
    let mut got = vec![0u8; len as usize];
    b.buf.read(GRH_BYTES, &mut got).map_err(|e| e.to_string())?;
    ensure!(got == data, "UD payload after the GRH differs");
    // A wrong Q_Key is dropped silently: no receive completion.
    b.post_recv(9, 0, len + GRH_BYTES as u32, "post_recv")?;
    let mut wr = SendWr::new(10, WrOpcode::Send);
    wr.sg_list = &sge;
    wr.ud = Some(ah.ud(b.qp.qpn(), QKEY ^ 1));
    post_completes(&a, &wr, WcOpcode::Send, None, "UD send (bad qkey)")?;
    cq_empty(&b.cq, "receiver after a wrong Q_Key")?;
    Ok(format!(
        "UD send through an AH to the other device: {len}-byte payload lands after the \
         {GRH_BYTES}-byte GRH (byte_len {}, GRH flag, src_qp); a wrong Q_Key is dropped",
        len + GRH_BYTES as u32
    ))
}

/// rc_pingpong -e: 16 round trips where each side waits on CQ_NOTIFY (queued, then armed)
/// instead of spinning; then an armed CQ with nothing coming stays parked until cancelled.
fn rc_events<E: Env>(env: &E) -> Outcome {
    let (_p, a, b) = rc_pair(env)?;
    const ITERS: u64 = 16;
    let size = 256u32;
    let mut events = 0;
    for i in 0..ITERS {
        let (tx, rx) = if i.is_multiple_of(2) {
            (&a, &b)
        } else {
            (&b, &a)
        };
        let payload = pattern(size as usize, i as u8);
        tx.buf.write(0, &payload).map_err(|e| e.to_string())?;
        rx.post_recv(1000 + i, 4096, size, "post_recv")?;
        let rx_event = rx.cq.notify(false).map_err(verr("CQ_NOTIFY"))?;
        let tx_event = tx.cq.notify(false).map_err(verr("CQ_NOTIFY"))?;
        ensure!(
            rx_event.pended() && tx_event.pended(),
            "CQ_NOTIFY completed inline with an empty CQ"
        );
        let sge = [tx.mr.sge(0, size)];
        let mut wr = SendWr::new(i, WrOpcode::Send);
        wr.sg_list = &sge;
        tx.qp
            .post_send(&wr)
            .map_err(|e| format!("post_send: {e:?}"))?;
        for (ev, who) in [(rx_event, "receiver"), (tx_event, "sender")] {
            match ev.wait_timeout(std::time::Duration::from_secs(5)) {
                Some(Ok(())) => events += 1,
                Some(Err(e)) => return Err(format!("{who} event, round {i}: {e}").into()),
                None => {
                    return Err(
                        format!("{who} event never came, round {i} (no CQ interrupt?)").into(),
                    );
                }
            }
        }
        // After the event the completion is there without spinning.
        let mut wc = [wv_client::verbs::WorkCompletion::default(); 2];
        ensure!(
            rx.cq.poll(&mut wc) == 1,
            "receiver event fired without a completion in the CQ (round {i})"
        );
        check_wc(&wc[0], 1000 + i, WcOpcode::Recv, Some(size), "evented recv")?;
        let mut got = vec![0u8; size as usize];
        rx.buf.read(4096, &mut got).map_err(|e| e.to_string())?;
        ensure!(got == payload, "round {i}: received bytes differ");
        ensure!(
            tx.cq.poll(&mut wc) == 1,
            "sender event fired without a completion in the CQ (round {i})"
        );
        check_wc(&wc[0], i, WcOpcode::Send, None, "evented send")?;
    }
    // Armed with nothing to come: the event stays parked, then CQ_CANCEL ends it.
    let idle = a.cq.notify(false).map_err(verr("CQ_NOTIFY"))?;
    ensure!(
        idle.wait_timeout(std::time::Duration::from_millis(20))
            .is_none(),
        "CQ_NOTIFY on an idle armed CQ completed"
    );
    a.cq.cancel().map_err(verr("CQ_CANCEL"))?;
    match idle.wait_timeout(std::time::Duration::from_secs(5)) {
        Some(Err(e)) if e.status == NtStatus::CANCELLED => {}
        other => {
            return Err(format!("idle notify after CQ_CANCEL: {other:?}, want CANCELLED").into());
        }
    }
    Ok(format!(
        "{ITERS} RC round trips of {size} bytes in event mode: CQ_NOTIFY queued then armed, \
         {events} events each followed by exactly its completion and byte-exact data; an idle \
         armed CQ stays parked until CQ_CANCEL → CANCELLED"
    ))
}

/// One completion fires every parked NEXT/SOLICITED waiter of the CQ (broadcast), not the
/// error waiter; each waiter ends once.
fn broadcast<E: Env>(env: &E) -> Outcome {
    let (p, a, b) = rc_pair(env)?;
    let f = file(&p);
    let cq = b.cq.id();
    let extra = vec![
        park(
            &**f,
            WV_IOCTL_CQ_NOTIFY,
            &id_in(cq, 0, WV_CQ_NEXT_COMPLETION),
            0,
        )?,
        park(&**f, WV_IOCTL_CQ_NOTIFY, &id_in(cq, 0, WV_CQ_SOLICITED), 0)?,
        park(&**f, WV_IOCTL_CQ_NOTIFY, &u64_in(cq), 0)?,
    ];
    let error_waiter = park(&**f, WV_IOCTL_CQ_NOTIFY, &id_in(cq, 0, WV_CQ_ERROR), 0)?;
    // The verbs notify queues one more waiter and arms the CQ through the UVP.
    let armed = b.cq.notify(false).map_err(verr("CQ_NOTIFY"))?;
    b.post_recv(1, 0, 64, "post_recv")?;
    let sge = [a.mr.sge(0, 64)];
    let mut wr = SendWr::new(2, WrOpcode::Send);
    wr.sg_list = &sge;
    a.qp.post_send(&wr)
        .map_err(|e| format!("post_send: {e:?}"))?;
    match armed.wait_timeout(std::time::Duration::from_secs(5)) {
        Some(Ok(())) => {}
        other => return Err(format!("armed notify: {other:?}, want success").into()),
    }
    let n = extra.len() + 1;
    for (i, io) in extra.into_iter().enumerate() {
        let st = wait(io, "parked CQ_NOTIFY")?;
        expect(&st, NtStatus::SUCCESS, &format!("parked waiter #{i}"))?;
    }
    ensure!(
        !error_waiter.is_complete(),
        "a completion ended the CQ's error waiter"
    );
    next_wc(&b.cq, 1, WcOpcode::Recv, Some(64), "recv")?;
    b.cq.cancel().map_err(verr("CQ_CANCEL"))?;
    ends_as(
        error_waiter,
        NtStatus::CANCELLED,
        "error waiter after CQ_CANCEL",
    )?;
    Ok(format!(
        "{n} waiters parked on one CQ (next ×2, solicited, 8-byte) all end SUCCESS on one \
         completion; the error waiter stays parked until CQ_CANCEL → CANCELLED"
    ))
}

/// Overrunning a CQ raises the CQ error: the parked error waiter ends with
/// UNEXPECTED_IO_ERROR, and every later notify of any kind fails at once with it (spec
/// §7.1-d: OFW lost that error when nobody was waiting).
fn sticky_error<E: Env>(env: &E) -> Outcome {
    let shape = Shape {
        cq_entries: 4,
        send_wr: 64,
        recv_wr: 64,
        ..Shape::rc()
    };
    let (p, a, b) = pair(env, shape)?;
    connect_rc(&a, &b)?;
    let f = file(&p);
    let entries = a.cq.entries();
    let error_waiter = a.cq.error_notify().map_err(verr("CQ_NOTIFY(error)"))?;
    let next_waiter = a.cq.notify(false).map_err(verr("CQ_NOTIFY"))?;
    let sends = entries + 2;
    ensure!(
        sends <= 64,
        "CQ of {entries} entries is too large to overrun with 64 sends"
    );
    // RDMA writes complete only at the sender: entries + 2 of them overrun A's CQ.
    let sge = [a.mr.sge(0, 8)];
    for i in 0..u64::from(sends) {
        let mut wr = SendWr::new(i, WrOpcode::RdmaWrite);
        wr.sg_list = &sge;
        wr.remote_addr = b.mr.addr();
        wr.rkey = b.mr.rkey();
        a.qp.post_send(&wr)
            .map_err(|e| format!("RDMA write {i}: {e:?}"))?;
    }
    match error_waiter.wait_timeout(std::time::Duration::from_secs(5)) {
        Some(Err(e)) if e.status == NtStatus::UNEXPECTED_IO_ERROR => {}
        other => {
            return Err(format!(
                "error waiter after overrunning a {entries}-entry CQ with {sends} completions: \
                 {other:?}, want UNEXPECTED_IO_ERROR"
            )
            .into());
        }
    }
    // The next-completion waiter ended too: with SUCCESS if the first completion's event came
    // before the error, else with the error.
    match next_waiter.wait_timeout(std::time::Duration::from_secs(5)) {
        Some(Ok(())) => {}
        Some(Err(e)) if e.status == NtStatus::UNEXPECTED_IO_ERROR => {}
        other => return Err(format!("next-completion waiter: {other:?}").into()),
    }
    ensure!(a.cq.overrun(), "the UVP does not report the CQ overrun");
    let cq = a.cq.id();
    for (input, what) in [
        (id_in(cq, 0, WV_CQ_ERROR), "error"),
        (id_in(cq, 0, WV_CQ_NEXT_COMPLETION), "next"),
        (id_in(cq, 0, WV_CQ_SOLICITED), "solicited"),
        (u64_in(cq), "8-byte"),
    ] {
        let io = f.device_io_control(WV_IOCTL_CQ_NOTIFY, &input, 0);
        ensure!(
            !io.pending(),
            "CQ_NOTIFY({what}) on a CQ in error parked instead of failing at once"
        );
        ends_as(
            io,
            NtStatus::UNEXPECTED_IO_ERROR,
            &format!("CQ_NOTIFY({what}) after the CQ error"),
        )?;
    }
    let state = a.qp.query().map_err(verr("QP_QUERY"))?.QpState;
    Ok(format!(
        "{sends} RDMA writes into a {entries}-entry CQ: the parked error waiter ends \
         UNEXPECTED_IO_ERROR, the UVP sees the overrun, and later notifies (error, next, \
         solicited, 8-byte) fail inline with UNEXPECTED_IO_ERROR (QP state now {state})"
    ))
}
