//! Connection endpoints (spec §2.4, §3.8): the handshake, data and disconnect from either side,
//! reject with private data, a connection nobody answers or nobody listens for, a listener
//! destroyed with requests queued on it, a handle closed and a device removed while a CONNECT
//! waits, and the cancel of every EP request that parks.
//!
//! Each side has its own handle on the driver (as two processes would), the server on the
//! chosen device and the client on the other one; addresses, routes and ports come from the
//! machine's address service ([`Machine::addresses`]: the in-process stack's fabric plays
//! IBAT's role), so on Windows, where this harness does not reach IBAT, the scenarios SKIP.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use wv_abi::NtStatus;
use wv_abi::ioctl::WV_IOCTL_EP_DESTROY;
use wv_client::raw::RawFile;
use wv_client::verbs::{
    AddressService, ConnectParam, Device, Endpoint, Pending, Provider, QpState, RecvWr, WcOpcode,
    WcStatus, WrOpcode,
};

use super::fixture::{ACCESS_ALL, device, verr};
use super::raw;
use crate::conn_side::{ConnSide, next_completion, rdma_cm_param};
use crate::env::{Env, Machine};
use crate::runner::Clock;
use crate::runner::{Outcome, Problem, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "ep-connect-data-disconnect-active",
            run: connect_data_disconnect_active,
            clock: Clock::Own,
        },
        Scenario {
            name: "ep-connect-data-disconnect-passive",
            run: connect_data_disconnect_passive,
            clock: Clock::Own,
        },
        Scenario {
            name: "ep-reject-with-private-data",
            run: reject_with_private_data,
            clock: Clock::Own,
        },
        Scenario {
            name: "ep-connect-without-listener-refused",
            run: connect_without_listener_refused,
            clock: Clock::Own,
        },
        Scenario {
            name: "ep-connect-nobody-answers-timeout",
            run: connect_nobody_answers_timeout,
            clock: Clock::Injected,
        },
        Scenario {
            name: "ep-listener-destroyed-with-queued-requests",
            run: listener_destroyed_with_queued_requests,
            clock: Clock::Own,
        },
        Scenario {
            name: "ep-close-during-connect",
            run: close_during_connect,
            clock: Clock::Own,
        },
        Scenario {
            name: "ep-device-removal-during-connect",
            run: device_removal_during_connect,
            clock: Clock::Own,
        },
        Scenario {
            name: "ep-cancel-parked-requests",
            run: cancel_parked_requests,
            clock: Clock::Own,
        },
    ]
}

/// The server's port.
const PORT: u16 = 7400;
/// A hang guard for each step; each normally takes microseconds.
const GUARD: Duration = Duration::from_secs(10);

/// The machine, whose address service answers what IBAT does on Windows.
fn machine<E: Env>(env: &E) -> Result<&dyn Machine, Problem> {
    env.machine().ok_or_else(|| {
        Problem::Skip(
            "needs the address service (IBAT on Windows, which this harness does not reach)".into(),
        )
    })
}

/// How a pended request ended: its NTSTATUS.
fn ended<T>(p: Pending<T>, what: &str) -> Result<NtStatus, String> {
    match p.wait_timeout(GUARD) {
        Some(Ok(_)) => Ok(NtStatus::SUCCESS),
        Some(Err(e)) => Ok(e.status),
        None => Err(format!(
            "{what}: never completed (waited {} s)",
            GUARD.as_secs()
        )),
    }
}

/// A pended request that must end with `want`.
/// An operation the endpoint no longer allows (`what`): refused with NOT_SUPPORTED, when it is
/// issued or when it ends.
fn refused_as_not_supported<T>(
    r: Result<Pending<T>, wv_client::verbs::VerbsError>,
    what: &str,
) -> Result<(), String> {
    match r.map(|p| ended(p, what)) {
        Err(e) if e.status == NtStatus::NOT_SUPPORTED => Ok(()),
        Ok(Ok(s)) if s == NtStatus::NOT_SUPPORTED => Ok(()),
        other => Err(format!("{what}: {other:?}")),
    }
}

fn ends_with<T>(p: Pending<T>, want: NtStatus, what: &str) -> Result<(), String> {
    let got = ended(p, what)?;
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "{what}: got {}, want {}",
            raw::st_name(got.0),
            raw::st_name(want.0)
        ))
    }
}

/// Waits (bounded) until `cond` holds.
fn wait_until(cond: impl Fn() -> bool, what: &str) -> Result<(), String> {
    let start = std::time::Instant::now();
    while !cond() {
        if start.elapsed() > GUARD {
            return Err(format!("waited {} s for {what}", GUARD.as_secs()));
        }
        std::thread::yield_now();
    }
    Ok(())
}

/// Two handles on the driver (server and client) and their addresses.
struct World<'s, F: RawFile + Send + Sync + 'static> {
    machine: &'s dyn Machine,
    net: &'s dyn AddressService,
    server: Provider<F>,
    client: Provider<F>,
    server_dev: Device<F>,
    client_dev: Device<F>,
    server_ip: IpAddr,
    client_ip: IpAddr,
}

fn world<E: Env>(env: &E) -> Result<World<'_, E::File>, Problem> {
    let machine = machine(env)?;
    let server = Provider::new(env.open()?);
    let client = Provider::new(env.open()?);
    let f = server.file();
    let (sguid, cguid) = (env.guid(f)?, env.other_guid(f)?);
    Ok(World {
        machine,
        net: machine.addresses(),
        server_ip: machine.address(env.device_index(sguid)?, 1),
        client_ip: machine.address(env.device_index(cguid)?, 1),
        server_dev: device(&server, sguid)?,
        client_dev: device(&client, cguid)?,
        server,
        client,
    })
}

/// A connected pair: endpoints and QPs of both sides.
struct Connected<F: RawFile + Send + Sync + 'static> {
    server_ep: Endpoint<F>,
    client_ep: Endpoint<F>,
    server: ConnSide<F>,
    client: ConnSide<F>,
}

impl<F: RawFile + Send + Sync + 'static> World<'_, F> {
    fn server_addr(&self) -> SocketAddr {
        SocketAddr::new(self.server_ip, PORT)
    }

    /// A listening endpoint on the server's address.
    fn listener(&self, backlog: u64) -> Result<Endpoint<F>, String> {
        let l = self.server.create_endpoint().map_err(verr("EP_CREATE"))?;
        l.bind(self.server_addr(), self.net).map_err(verr("bind"))?;
        l.listen(backlog).map_err(verr("EP_LISTEN"))?;
        Ok(l)
    }

    /// A client endpoint bound to a free port, with its route and a QP in INIT.
    fn client_ep(&self) -> Result<(Endpoint<F>, ConnSide<F>), String> {
        let ep = self.client.create_endpoint().map_err(verr("EP_CREATE"))?;
        ep.bind(SocketAddr::new(self.client_ip, 0), self.net)
            .map_err(verr("bind"))?;
        ep.resolve_route(self.client_ip, self.server_ip, self.net)
            .map_err(verr("route"))?;
        let side = ConnSide::new(&self.client_dev, 1, 4, 4).map_err(verr("client QP"))?;
        Ok((ep, side))
    }

    fn server_side(&self) -> Result<ConnSide<F>, String> {
        ConnSide::new(&self.server_dev, 1, 4, 4).map_err(verr("server QP"))
    }

    /// A client's CONNECT with `private` data, taken by a new server endpoint from `listener`
    /// (EP_GET_REQUEST ended): the server endpoint, and the client's endpoint, side and
    /// CONNECT, which waits for the server's answer.
    #[allow(clippy::type_complexity)]
    fn request(
        &self,
        listener: &Endpoint<F>,
        private: &[u8],
    ) -> Result<(Endpoint<F>, Endpoint<F>, ConnSide<F>, Pending<()>), String> {
        let server_ep = self.server.create_endpoint().map_err(verr("EP_CREATE"))?;
        let request = listener
            .get_request(&server_ep)
            .map_err(verr("EP_GET_REQUEST"))?;
        let (client_ep, client) = self.client_ep()?;
        let connecting = client_ep
            .connect(&client.qp, self.server_addr(), &rdma_cm_param(private))
            .map_err(verr("EP_CONNECT"))?;
        ends_with(request, NtStatus::SUCCESS, "EP_GET_REQUEST")?;
        Ok((server_ep, client_ep, client, connecting))
    }

    /// The whole handshake with private data both ways; checks what each side learnt.
    fn connect(&self, listener: &Endpoint<F>) -> Result<Connected<F>, String> {
        let (server_ep, client_ep, client, connecting) = self.request(listener, b"req data")?;
        let got = server_ep.query().map_err(verr("EP_QUERY"))?;
        let client_addr = client_ep.query().map_err(verr("EP_QUERY"))?.local;
        if got.peer != client_addr || got.local.map(|a| a.ip()) != Some(self.server_ip) {
            return Err(format!(
                "EP_QUERY on the passive side: local {:?}, peer {:?}; want {}, {client_addr:?}",
                got.local, got.peer, self.server_ip
            ));
        }
        if !got.param.private_data.starts_with(b"req data") {
            return Err(format!(
                "the REQ's private data after the IP-CM header: {:?}",
                got.param.private_data
            ));
        }
        let server = self.server_side()?;
        let accepting = server_ep
            .accept(&server.qp, &rdma_cm_param(b"rep data"))
            .map_err(verr("EP_ACCEPT (passive)"))?;
        ends_with(connecting, NtStatus::SUCCESS, "EP_CONNECT")?;
        let got = client_ep.query().map_err(verr("EP_QUERY"))?;
        if !got.param.private_data.starts_with(b"rep data") {
            return Err(format!(
                "the REP's private data: {:?}",
                got.param.private_data
            ));
        }
        let established = client_ep
            .accept(&client.qp, &rdma_cm_param(&[]))
            .map_err(verr("EP_ACCEPT (active)"))?;
        ends_with(established, NtStatus::SUCCESS, "EP_ACCEPT (active)")?;
        ends_with(accepting, NtStatus::SUCCESS, "EP_ACCEPT (passive, the RTU)")?;
        for (side, qp) in [("client", &client.qp), ("server", &server.qp)] {
            if qp.state() != QpState::Rts {
                return Err(format!("{side} QP in {:?} after the handshake", qp.state()));
            }
        }
        Ok(Connected {
            server_ep,
            client_ep,
            server,
            client,
        })
    }
}

/// Polls one completion with the guard.
fn one<F: RawFile + Send + Sync + 'static>(
    side: &ConnSide<F>,
    what: &str,
) -> Result<wv_client::verbs::WorkCompletion, String> {
    let abort = std::sync::atomic::AtomicBool::new(false);
    next_completion(&side.cq, &abort, || false)
        .map_err(|e| format!("{what}: {e}"))?
        .ok_or_else(|| format!("{what}: no completion"))
}

/// An RDMA write from the client and a send back from the server over the connection.
fn traffic<F: RawFile + Send + Sync + 'static>(c: &Connected<F>) -> Result<(), String> {
    let sdev = c.server.pd.device();
    let cdev = c.client.pd.device();
    let (sbuf, cbuf) = (sdev.alloc_buffer(64), cdev.alloc_buffer(64));
    let smr = c
        .server
        .pd
        .reg_mr(&sbuf, ACCESS_ALL)
        .map_err(verr("reg_mr"))?;
    let cmr = c
        .client
        .pd
        .reg_mr(&cbuf, ACCESS_ALL)
        .map_err(verr("reg_mr"))?;
    cbuf.write(0, b"written by the client")
        .map_err(|e| e.to_string())?;
    c.client
        .post_signaled(
            1,
            WrOpcode::RdmaWrite,
            cmr.sge(0, 21),
            (smr.addr(), smr.rkey()),
        )
        .map_err(|e| format!("post RDMA write: {e:?}"))?;
    let wc = one(&c.client, "RDMA write")?;
    if wc.status != WcStatus::Success || wc.opcode != WcOpcode::RdmaWrite {
        return Err(format!(
            "RDMA write completion {:?} {:?}",
            wc.status, wc.opcode
        ));
    }
    if sbuf.to_vec()[..21] != *b"written by the client" {
        return Err("the RDMA write did not land in the server's buffer".into());
    }
    c.client
        .qp
        .post_recv(&RecvWr {
            wr_id: 7,
            sg_list: &[cmr.sge(32, 32)],
        })
        .map_err(|e| format!("post recv: {e:?}"))?;
    c.server
        .post_signaled(2, WrOpcode::Send, smr.sge(0, 21), (0, 0))
        .map_err(|e| format!("post send: {e:?}"))?;
    let wc = one(&c.client, "receive")?;
    if wc.status != WcStatus::Success || wc.byte_len != 21 || wc.wr_id != 7 {
        return Err(format!("receive completion {wc:?}"));
    }
    if cbuf.to_vec()[32..53] != *b"written by the client" {
        return Err("the send did not land in the client's receive".into());
    }
    Ok(())
}

/// Disconnects from `first`'s side: the other side's DISCONNECT_NOTIFY completes, its
/// DISCONNECT answers, both QPs end in ERROR.
fn disconnect<F: RawFile + Send + Sync + 'static>(
    c: &Connected<F>,
    active_first: bool,
) -> Result<(), String> {
    let (first, first_side, second, second_side) = if active_first {
        (&c.client_ep, &c.client, &c.server_ep, &c.server)
    } else {
        (&c.server_ep, &c.server, &c.client_ep, &c.client)
    };
    let notified = second
        .notify_disconnect()
        .map_err(verr("EP_DISCONNECT_NOTIFY"))?;
    let going = first
        .disconnect(Some(&first_side.qp))
        .map_err(verr("EP_DISCONNECT (DREQ)"))?;
    ends_with(notified, NtStatus::SUCCESS, "EP_DISCONNECT_NOTIFY")?;
    let answer = second
        .disconnect(Some(&second_side.qp))
        .map_err(verr("EP_DISCONNECT (DREP)"))?;
    ends_with(answer, NtStatus::SUCCESS, "EP_DISCONNECT (DREP)")?;
    ends_with(going, NtStatus::SUCCESS, "EP_DISCONNECT (DREQ)")?;
    for (side, qp) in [("client", &c.client.qp), ("server", &c.server.qp)] {
        if qp.state() != QpState::Error {
            return Err(format!(
                "{side} QP in {:?} after the disconnect",
                qp.state()
            ));
        }
    }
    Ok(())
}

fn connect_data_disconnect<E: Env>(env: &E, active_first: bool) -> Outcome {
    let w = world(env)?;
    let listener = w.listener(0)?;
    let c = w.connect(&listener)?;
    traffic(&c)?;
    disconnect(&c, active_first)?;
    // The listener takes the next connection as well.
    let c = w.connect(&listener)?;
    disconnect(&c, !active_first)?;
    Ok(format!(
        "bind/route/listen/GET_REQUEST/CONNECT/ACCEPT with private data both ways and the \
         IP-CM addresses in EP_QUERY; an RDMA write and a send over the QPs; DISCONNECT from the \
         {} side ends the peer's DISCONNECT_NOTIFY, its DISCONNECT answers, both QPs in ERROR; \
         the listener then takes a second connection",
        if active_first { "active" } else { "passive" }
    ))
}

fn connect_data_disconnect_active<E: Env>(env: &E) -> Outcome {
    connect_data_disconnect(env, true)
}

fn connect_data_disconnect_passive<E: Env>(env: &E) -> Outcome {
    connect_data_disconnect(env, false)
}

fn reject_with_private_data<E: Env>(env: &E) -> Outcome {
    let w = world(env)?;
    let listener = w.listener(0)?;
    let (server_ep, client_ep, _client, connecting) = w.request(&listener, b"let me in")?;
    server_ep.reject(b"not today").map_err(verr("EP_REJECT"))?;
    ends_with(connecting, NtStatus::CONNECTION_REFUSED, "EP_CONNECT")?;
    let got = client_ep.query().map_err(verr("EP_QUERY"))?;
    if !got.param.private_data.starts_with(b"not today") {
        return Err(format!("the REJ's private data: {:?}", got.param.private_data).into());
    }
    // A rejected endpoint cannot accept any more.
    refused_as_not_supported(
        server_ep.accept(&w.server_side()?.qp, &ConnectParam::default()),
        "EP_ACCEPT after EP_REJECT",
    )?;
    Ok(
        "EP_REJECT with private data: the CONNECT ends with STATUS_CONNECTION_REFUSED and \
         EP_QUERY shows the REJ's private data; the rejected endpoint refuses ACCEPT"
            .into(),
    )
}

fn connect_without_listener_refused<E: Env>(env: &E) -> Outcome {
    let w = world(env)?;
    let (ep, side) = w.client_ep()?;
    let p = ep
        .connect(&side.qp, w.server_addr(), &ConnectParam::default())
        .map_err(verr("EP_CONNECT"))?;
    ends_with(p, NtStatus::CONNECTION_REFUSED, "EP_CONNECT")?;
    // The endpoint is disconnected: a second CONNECT needs a new endpoint.
    refused_as_not_supported(
        ep.connect(&side.qp, w.server_addr(), &ConnectParam::default()),
        "a second CONNECT",
    )?;
    Ok(
        "a REQ to a port nobody listens on is rejected by the peer's CM (invalid service \
         id): STATUS_CONNECTION_REFUSED, and the endpoint refuses another CONNECT"
            .into(),
    )
}

/// The CM's wait for a REP as the driver sets it up: `IB_CMA_CM_RESPONSE_TIMEOUT` (20) plus
/// two packet lifetimes of the path (`4.096 µs × 2^n` each), for the first try and 15 retries.
fn req_timeout_ns(path_packet_life: u8) -> u64 {
    let response = 4096u64 << 20;
    let packet_life = 4096u64 << (path_packet_life & 0x3F);
    16 * (response + 2 * packet_life)
}

/// On a machine with an injected clock ([`Clock::Injected`]): its timers fire when the scenario
/// says, so the CM's retries of many seconds take no time.
fn connect_nobody_answers_timeout<E: Env>(s: &E) -> Outcome {
    let m = machine(s)?;
    let clock = m
        .clock()
        .ok_or("the machine built on an injected clock has none")?;
    let net = m.addresses();
    let p = Provider::new(s.open().map_err(|e| format!("open: {e}"))?);
    let guids = p.device_guids().map_err(verr("GUID_QUERY"))?;
    let dev = device(&p, guids[1])?;
    let ep = p.create_endpoint().map_err(verr("EP_CREATE"))?;
    let (local, peer) = (m.address(1, 1), m.address(0, 1));
    ep.bind(SocketAddr::new(local, 0), net)
        .map_err(verr("bind"))?;
    // A route to a GID nobody owns: every REQ is lost.
    let mut path = net
        .resolve_path(local, peer)
        .ok_or("no path between the stack's own addresses")?;
    path.dgid[15] ^= 0x5A;
    ep.set_route(&path).map_err(verr("EP_MODIFY route"))?;
    let side = ConnSide::new(&dev, 1, 4, 4).map_err(verr("QP"))?;
    let t0 = clock.now_ns();
    let connecting = ep
        .connect(
            &side.qp,
            SocketAddr::new(peer, PORT),
            &ConnectParam::default(),
        )
        .map_err(verr("EP_CONNECT"))?;
    clock.run_until_idle();
    let mut fired = 0;
    while !connecting.is_complete() && fired < 64 && clock.run_next_timer() {
        fired += 1;
    }
    let elapsed = clock.now_ns() - t0;
    ends_with(connecting, NtStatus::TIMEOUT, "EP_CONNECT")?;
    let want = req_timeout_ns(path.pkt_life);
    if elapsed != want || fired != 16 {
        return Err(format!(
            "the CONNECT ended after {fired} timer(s) and {elapsed} ns; want 16 and {} ns \
             (15 resends of the REQ, each waiting 4.096 µs × 2^20 + 2 packet lifetimes)",
            want
        )
        .into());
    }
    Ok(format!(
        "a REQ nobody answers is resent 15 times on the platform's clock; after {:.1} s of \
         injected time the CONNECT ends with STATUS_TIMEOUT",
        elapsed as f64 / 1e9
    ))
}

fn listener_destroyed_with_queued_requests<E: Env>(env: &E) -> Outcome {
    let w = world(env)?;
    let f = w.server.file();
    // GET_REQUESTs parked with their endpoints queued on the listener.
    let listener = w.listener(4)?;
    let (a, b) = (
        w.server.create_endpoint().map_err(verr("EP_CREATE"))?,
        w.server.create_endpoint().map_err(verr("EP_CREATE"))?,
    );
    let ga = listener.get_request(&a).map_err(verr("EP_GET_REQUEST"))?;
    let gb = listener.get_request(&b).map_err(verr("EP_GET_REQUEST"))?;
    // A queued endpoint belongs to the listener: it cannot be destroyed.
    raw::call_expect(
        &**f,
        WV_IOCTL_EP_DESTROY,
        &raw::u64_in(a.id()),
        0,
        NtStatus::ACCESS_DENIED,
        "EP_DESTROY of a queued endpoint",
    )?;
    raw::call_expect(
        &**f,
        WV_IOCTL_EP_DESTROY,
        &raw::u64_in(listener.id()),
        0,
        NtStatus::SUCCESS,
        "EP_DESTROY of the listener",
    )?;
    ends_with(ga, NtStatus::CANCELLED, "first GET_REQUEST")?;
    ends_with(gb, NtStatus::CANCELLED, "second GET_REQUEST")?;
    // Both endpoints are Idle again: they bind.
    a.bind(SocketAddr::new(w.server_ip, 0), w.net)
        .map_err(verr("EP_BIND of a returned endpoint"))?;
    b.bind(SocketAddr::new(w.server_ip, 0), w.net)
        .map_err(verr("EP_BIND of a returned endpoint"))?;
    drop(listener);

    // Connection requests the CM still holds for a listener that goes are refused.
    let listener = w.listener(4)?;
    let (ep, side) = w.client_ep()?;
    let connecting = ep
        .connect(&side.qp, w.server_addr(), &ConnectParam::default())
        .map_err(verr("EP_CONNECT"))?;
    // The REQ reaches the listener before it goes: a GET_REQUEST takes it.
    let taker = w.server.create_endpoint().map_err(verr("EP_CREATE"))?;
    ends_with(
        listener
            .get_request(&taker)
            .map_err(verr("EP_GET_REQUEST"))?,
        NtStatus::SUCCESS,
        "EP_GET_REQUEST",
    )?;
    let (ep2, side2) = w.client_ep()?;
    let queued = ep2
        .connect(&side2.qp, w.server_addr(), &ConnectParam::default())
        .map_err(verr("EP_CONNECT"))?;
    // Once the second request is in the server's CM (a third CM id there, beside the
    // listener's and the taken one's), the listener goes: that request must be refused.
    let server_ix = env.device_index(env.guid(&**f)?)?;
    w.machine.cm_ids(server_ix).ok_or("no server device")?;
    wait_until(
        || w.machine.cm_ids(server_ix) == Some(3),
        "the second REQ to reach the server's CM",
    )?;
    drop(listener);
    ends_with(queued, NtStatus::CONNECTION_REFUSED, "queued EP_CONNECT")?;
    taker.reject(&[]).map_err(verr("EP_REJECT"))?;
    ends_with(connecting, NtStatus::CONNECTION_REFUSED, "taken EP_CONNECT")?;
    Ok(
        "destroying a listener ends its GET_REQUESTs with STATUS_CANCELLED and gives their \
         endpoints back Idle (EP_DESTROY of a queued endpoint answers ACCESS_DENIED; once \
         given back they bind); a request the CM still held for it is refused"
            .into(),
    )
}

fn close_during_connect<E: Env>(env: &E) -> Outcome {
    let w = world(env)?;
    let listener = w.listener(4)?;
    // A client on a handle of its own, which it closes while its CONNECT waits for the REP.
    // It connects to a listener that never takes the request, so the withdrawn request cannot
    // meet the GET_REQUEST of the connection that follows.
    let quiet = w.server.create_endpoint().map_err(verr("EP_CREATE"))?;
    let quiet_addr = SocketAddr::new(w.server_ip, PORT + 1);
    quiet.bind(quiet_addr, w.net).map_err(verr("bind"))?;
    quiet.listen(4).map_err(verr("EP_LISTEN"))?;
    let doomed = Provider::new(env.open()?);
    let dev = device(&doomed, env.other_guid(&**w.server.file())?)?;
    let ep = doomed.create_endpoint().map_err(verr("EP_CREATE"))?;
    ep.bind(SocketAddr::new(w.client_ip, 0), w.net)
        .map_err(verr("bind"))?;
    ep.resolve_route(w.client_ip, w.server_ip, w.net)
        .map_err(verr("route"))?;
    let side = ConnSide::new(&dev, 1, 4, 4).map_err(verr("QP"))?;
    let connecting = ep
        .connect(&side.qp, quiet_addr, &ConnectParam::default())
        .map_err(verr("EP_CONNECT"))?;
    drop((ep, side, dev, doomed));
    ends_with(
        connecting,
        NtStatus::CANCELLED,
        "EP_CONNECT of a closed handle",
    )?;
    drop(quiet);
    // Another client connects.
    let c = w.connect(&listener)?;
    disconnect(&c, true)?;
    Ok(
        "closing the client's handle while its CONNECT waits for the REP (or while its work \
         item runs) ends it with STATUS_CANCELLED; another client then connects"
            .into(),
    )
}

fn device_removal_during_connect<E: Env>(env: &E) -> Outcome {
    let w = world(env)?;
    let machine = w.machine;
    let listener = w.listener(4)?;
    let (ep, side) = w.client_ep()?;
    let connecting = ep
        .connect(&side.qp, w.server_addr(), &ConnectParam::default())
        .map_err(verr("EP_CONNECT"))?;
    let parked_get = {
        let spare = w.server.create_endpoint().map_err(verr("EP_CREATE"))?;
        // The listener's GET_REQUEST would take the request: let it wait for a second one.
        let first = w.server.create_endpoint().map_err(verr("EP_CREATE"))?;
        let taken = listener
            .get_request(&first)
            .map_err(verr("EP_GET_REQUEST"))?;
        ends_with(taken, NtStatus::SUCCESS, "EP_GET_REQUEST")?;
        (
            listener
                .get_request(&spare)
                .map_err(verr("EP_GET_REQUEST"))?,
            spare,
            first,
        )
    };
    let f = w.server.file();
    let client_ix = env.device_index(env.other_guid(&**f)?)?;
    let server_ix = env.device_index(env.guid(&**f)?)?;
    if !machine.remove_device(client_ix) {
        return Err("the client's device could not be removed".into());
    }
    ends_with(connecting, NtStatus::DEVICE_REMOVED, "EP_CONNECT")?;
    if !machine.remove_device(server_ix) {
        return Err("the server's device could not be removed".into());
    }
    ends_with(
        parked_get.0,
        NtStatus::DEVICE_REMOVED,
        "the listener's GET_REQUEST",
    )?;
    Ok(
        "removing the client's device ends its waiting CONNECT with STATUS_DEVICE_REMOVED; \
         removing the server's ends the listener's parked GET_REQUEST the same way"
            .into(),
    )
}

fn cancel_parked_requests<E: Env>(env: &E) -> Outcome {
    let w = world(env)?;
    let listener = w.listener(4)?;

    // GET_REQUEST: EP_CANCEL on the listener, and CancelIoEx.
    let ep = w.server.create_endpoint().map_err(verr("EP_CREATE"))?;
    let g = listener.get_request(&ep).map_err(verr("EP_GET_REQUEST"))?;
    listener.cancel().map_err(verr("EP_CANCEL"))?;
    ends_with(g, NtStatus::CANCELLED, "GET_REQUEST after EP_CANCEL")?;
    let g = listener.get_request(&ep).map_err(verr("EP_GET_REQUEST"))?;
    if !g.cancel() {
        return Err("CancelIoEx found no parked GET_REQUEST".into());
    }
    ends_with(g, NtStatus::CANCELLED, "GET_REQUEST after CancelIoEx")?;

    // CONNECT waiting for the REP: to a listener of its own that never takes the request, so
    // the withdrawn request cannot meet a later GET_REQUEST.
    let quiet = w.server.create_endpoint().map_err(verr("EP_CREATE"))?;
    let quiet_addr = SocketAddr::new(w.server_ip, PORT + 1);
    quiet.bind(quiet_addr, w.net).map_err(verr("bind"))?;
    quiet.listen(4).map_err(verr("EP_LISTEN"))?;
    let (cep, cside) = w.client_ep()?;
    let c = cep
        .connect(&cside.qp, quiet_addr, &ConnectParam::default())
        .map_err(verr("EP_CONNECT"))?;
    cep.cancel().map_err(verr("EP_CANCEL"))?;
    ends_with(c, NtStatus::CANCELLED, "CONNECT after EP_CANCEL")?;
    drop((cep, cside, quiet));

    // A passive ACCEPT waiting for the RTU (the client never sends it).
    let sep = w.server.create_endpoint().map_err(verr("EP_CREATE"))?;
    let g = listener.get_request(&sep).map_err(verr("EP_GET_REQUEST"))?;
    let (cep, cside) = w.client_ep()?;
    let c = cep
        .connect(&cside.qp, w.server_addr(), &ConnectParam::default())
        .map_err(verr("EP_CONNECT"))?;
    ends_with(g, NtStatus::SUCCESS, "GET_REQUEST")?;
    let sside = w.server_side()?;
    let a = sep
        .accept(&sside.qp, &ConnectParam::default())
        .map_err(verr("EP_ACCEPT"))?;
    ends_with(c, NtStatus::SUCCESS, "CONNECT")?;
    sep.cancel().map_err(verr("EP_CANCEL"))?;
    ends_with(a, NtStatus::CANCELLED, "passive ACCEPT after EP_CANCEL")?;
    drop((sep, sside, cep, cside));

    // DISCONNECT_NOTIFY while connected, and a DISCONNECT waiting for the DREP.
    let conn = w.connect(&listener)?;
    let n = conn
        .server_ep
        .notify_disconnect()
        .map_err(verr("EP_DISCONNECT_NOTIFY"))?;
    conn.server_ep.cancel().map_err(verr("EP_CANCEL"))?;
    ends_with(n, NtStatus::CANCELLED, "DISCONNECT_NOTIFY after EP_CANCEL")?;
    let d = conn
        .client_ep
        .disconnect(Some(&conn.client.qp))
        .map_err(verr("EP_DISCONNECT"))?;
    // The server never answers the DREQ.
    conn.client_ep.cancel().map_err(verr("EP_CANCEL"))?;
    ends_with(d, NtStatus::CANCELLED, "DISCONNECT after EP_CANCEL")?;
    Ok(
        "EP_CANCEL ends each parked EP request with STATUS_CANCELLED: GET_REQUEST (and by \
         CancelIoEx), a CONNECT waiting for the REP, a passive ACCEPT waiting for the RTU, \
         DISCONNECT_NOTIFY, a DISCONNECT waiting for the DREP"
            .into(),
    )
}
