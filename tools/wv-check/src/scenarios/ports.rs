//! Port event flags (spec §2.4 DEVICE_NOTIFY, §3.7): a parked DEVICE_NOTIFY completes with the
//! event's flags on a port change; flags accumulate while nobody waits and the next notify
//! returns them at once. Needs the admin action "port down/up" (in-process only).

use wv_abi::consts::*;
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_PORT_ATTRIBUTES};
use wv_client::raw::{IoStatus, RawFile, RawIo};

use super::raw::*;
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Problem, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![Scenario {
        name: "port-event-flags",
        run: port_event_flags,
        clock: Clock::Own,
    }]
}

fn port_state<F: RawFile>(f: &F, dev: u64, port: u8) -> Result<u32, String> {
    let st = ok(f, WV_IOCTL_DEVICE_PORT_QUERY, &port_in(dev, port), 52)?;
    Ok(read::<WV_IO_PORT_ATTRIBUTES>(&st.output, "PORT_QUERY")?.State)
}

/// A completed DEVICE_NOTIFY must be SUCCESS, Information 4, flags exactly `want`.
fn flags(st: &IoStatus, want: u32, what: &str) -> Result<(), String> {
    expect_info(st, NtStatus::SUCCESS, 4, what)?;
    let got = st
        .output
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_ne_bytes);
    ensure!(
        got == Some(want),
        "{what}: event flags {got:#x?}, want {want:#x}"
    );
    Ok(())
}

/// Waits (bounded) for a DEVICE_NOTIFY and checks it ended with the flags `want` ([`flags`]).
fn notified<I: RawIo>(io: I, want: u32, what: &str) -> Result<(), String> {
    flags(&wait(io, "DEVICE_NOTIFY")?, want, what)
}

fn port_event_flags<E: Env>(env: &E) -> Outcome {
    let Some(machine) = env.machine() else {
        return Err(Problem::Skip(
            "needs the admin action port down/up (in-process stack only)".into(),
        ));
    };
    let f = env.open()?;
    let guid = env.guid(&f)?;
    let index = env.device_index(guid)?;
    let dev = open_dev(&f, guid)?;
    ensure!(
        port_state(&f, dev, 1)? == WV_IO_PORT_ACTIVE,
        "port 1 not ACTIVE at start"
    );
    let admin = |port: u8, up: bool| {
        machine
            .set_port_state(index, port, up)
            .map_err(|e| format!("set_port_state({index}, {port}, {up}): {e}"))
    };

    // Two waiters on port 1 and one on port 2: a port-1 event completes both port-1 waiters
    // (broadcast) and leaves port 2's parked.
    let a = park(&f, WV_IOCTL_DEVICE_NOTIFY, &id_in(dev, 0, 1), 4)?;
    let b = park(&f, WV_IOCTL_DEVICE_NOTIFY, &id_in(dev, 0, 1), 4)?;
    let p2 = park(&f, WV_IOCTL_DEVICE_NOTIFY, &id_in(dev, 0, 2), 4)?;
    admin(1, false)?;
    notified(a, WV_IO_EVENT_STATE, "port 1 down, waiter 1")?;
    notified(b, WV_IO_EVENT_STATE, "port 1 down, waiter 2")?;
    ensure!(
        !p2.is_complete(),
        "a port-1 event completed a port-2 DEVICE_NOTIFY"
    );
    let down = port_state(&f, dev, 1)?;
    ensure!(
        down == WV_IO_PORT_DOWN,
        "PORT_QUERY after port down: State {down}, want {WV_IO_PORT_DOWN} (DOWN)"
    );

    // Nobody waits on port 1 while it comes back up: the flags stay pending. Port 2's event,
    // raised after it through the same event ring, tells when port 1's has been handled.
    admin(1, true)?;
    admin(2, false)?;
    notified(p2, WV_IO_EVENT_STATE, "port 2 down")?;
    let io = f.device_io_control(WV_IOCTL_DEVICE_NOTIFY, &id_in(dev, 0, 1), 4);
    ensure!(
        !io.pending(),
        "DEVICE_NOTIFY with a port event pending parked instead of completing at once"
    );
    notified(io, WV_IO_EVENT_STATE, "accumulated port 1 up")?;
    ensure!(
        port_state(&f, dev, 1)? == WV_IO_PORT_ACTIVE,
        "port 1 not ACTIVE after up"
    );

    // The flags were consumed: the next notify parks, and DEVICE_CANCEL ends it.
    let c = park(&f, WV_IOCTL_DEVICE_NOTIFY, &id_in(dev, 0, 1), 4)?;
    ok(&f, WV_IOCTL_DEVICE_CANCEL, &u64_in(dev), 0)?;
    let st = wait(c, "DEVICE_NOTIFY")?;
    expect(
        &st,
        NtStatus::CANCELLED,
        "DEVICE_NOTIFY after DEVICE_CANCEL",
    )?;
    admin(2, true)?;
    // Port 2 came back while nobody waited: the flag is there for the next notify.
    let p2 = f.device_io_control(WV_IOCTL_DEVICE_NOTIFY, &id_in(dev, 0, 2), 4);
    let st = wait(p2, "DEVICE_NOTIFY")?;
    flags(&st, WV_IO_EVENT_STATE, "port 2 up")?;
    Ok(
        "DEVICE_NOTIFY pends; port down completes both port-1 waiters with STATE (0x2), \
        Information 4, port 2's stays parked; PORT_QUERY says DOWN; an up event with nobody \
        waiting is kept and the next notify returns STATE at once; then it parks again and \
        DEVICE_CANCEL → CANCELLED"
            .into(),
    )
}
