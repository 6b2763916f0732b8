//! `wvharness conn`: connection rate, like NetworkDirect's `ndconn` test.
//!
//! `-t` client threads make `-n` connections in all, one after the other on each thread: an
//! endpoint bound to a free port, the route, a fresh RC QP, CONNECT, ACCEPT (the RTU), then
//! DISCONNECT. As many server threads take them from one listener: GET_REQUEST, a fresh QP,
//! ACCEPT, and DISCONNECT once the client's DREQ came. Prints the connections per second over
//! the whole run and each client phase's median and 99th percentile in microseconds:
//!
//! * `setup`: endpoint, bind, route and QP;
//! * `connect`: CONNECT until the REP (the server's GET_REQUEST and ACCEPT included);
//! * `establish`: ACCEPT on the client (the RTU) until it completes;
//! * `disconnect`: DISCONNECT until the DREP came and the QP is in ERROR;
//! * `total`: the whole connection, setup to disconnect.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use wv_client::verbs::{Pending, Provider};
use wv_inproc::StackConfig;

use crate::target::{DeviceSpec, Opener, Target, TargetArgs, TargetTask, server_and_client};
use wv_check::conn_side::{ConnSide, STEP_GUARD, rdma_cm_param};

/// The listener's port.
const PORT: u16 = 7175;

/// Options of `wvharness conn`.
#[derive(Args, Clone, Debug)]
pub struct ConnArgs {
    /// Client threads (and as many server threads).
    #[arg(short = 't', long = "threads", default_value_t = 1)]
    pub threads: usize,
    /// Connections in all.
    #[arg(short = 'n', long = "connections", default_value_t = 1000)]
    pub connections: u64,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Which driver and device to run on.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// One phase's percentiles, in microseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Phase {
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
}

/// What a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct ConnResult {
    /// Client threads.
    pub threads: usize,
    /// Connections made.
    pub connections: u64,
    /// Seconds from the first connection's start to the last one's end.
    pub seconds: f64,
    /// Connections per second.
    pub connections_per_sec: f64,
    /// Endpoint, bind, route and QP.
    pub setup: Phase,
    /// CONNECT until the REP.
    pub connect: Phase,
    /// The active ACCEPT (RTU).
    pub establish: Phase,
    /// DISCONNECT until the DREP.
    pub disconnect: Phase,
    /// A whole connection, setup to disconnect.
    pub total: Phase,
}

/// Runs `conn`.
pub fn run(args: &ConnArgs) -> io::Result<ExitCode> {
    if args.threads == 0 || args.connections == 0 {
        eprintln!("wvharness conn: threads and connections must be at least 1");
        return Ok(ExitCode::FAILURE);
    }
    let (target, device) = Target::open(&args.target, StackConfig::default())?;
    match target.run(ConnTask { args: args.clone() }, device) {
        Ok(r) => {
            let mut out = io::stdout().lock();
            if args.json {
                serde_json::to_writer_pretty(&mut out, &r).map_err(io::Error::other)?;
                writeln!(out)?;
            } else {
                print_text(&mut out, &r)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("wvharness conn: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn print_text(out: &mut impl Write, r: &ConnResult) -> io::Result<()> {
    writeln!(
        out,
        "{} connections on {} thread(s) in {:.3} s = {:.0} connections/s",
        r.connections, r.threads, r.seconds, r.connections_per_sec
    )?;
    writeln!(out, "{:<12}{:>12}{:>12}", "phase", "p50 [us]", "p99 [us]")?;
    for (name, p) in [
        ("setup", r.setup),
        ("connect", r.connect),
        ("establish", r.establish),
        ("disconnect", r.disconnect),
        ("total", r.total),
    ] {
        writeln!(out, "{name:<12}{:>12.1}{:>12.1}", p.p50_us, p.p99_us)?;
    }
    Ok(())
}

/// The connection-rate run as a task on any target (the default run calls it too).
pub struct ConnTask {
    pub args: ConnArgs,
}

/// Per-connection phase times of one client thread, in nanoseconds.
#[derive(Default)]
struct Times {
    setup: Vec<u64>,
    connect: Vec<u64>,
    establish: Vec<u64>,
    disconnect: Vec<u64>,
    total: Vec<u64>,
}

/// The `q` quantile of `v` (sorted in place), in microseconds.
fn quantile_us(v: &mut [u64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
    v[i] as f64 / 1000.0
}

fn phase(v: &mut [u64]) -> Phase {
    Phase {
        p50_us: quantile_us(v, 0.50),
        p99_us: quantile_us(v, 0.99),
    }
}

impl TargetTask for ConnTask {
    type Output = Result<ConnResult, String>;

    fn run<O: Opener>(self, opener: &O, device: Option<DeviceSpec>) -> Self::Output {
        let a = &self.args;
        let (server_ix, client_ix) = server_and_client(opener, device)?;
        let no_address =
            || "this transport has no address service (IBAT): conn needs --transport inproc";
        let server_ip = opener.device_address(server_ix).ok_or_else(no_address)?;
        let client_ip = opener.device_address(client_ix).ok_or_else(no_address)?;
        let net = opener.addresses().ok_or_else(no_address)?;

        let server = Provider::new(opener.open_file().map_err(|e| e.0)?);
        let listener = server
            .create_endpoint()
            .map_err(|e| format!("EP_CREATE: {e}"))?;
        listener
            .bind(
                SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), PORT),
                net,
            )
            .map_err(|e| format!("bind: {e}"))?;
        listener
            .listen(a.connections.min(4096))
            .map_err(|e| format!("listen: {e}"))?;

        let abort = AtomicBool::new(false);
        let left_to_accept = AtomicU64::new(a.connections);
        let threads = a.threads;
        let per_thread = |i: usize| {
            a.connections / threads as u64 + u64::from((i as u64) < a.connections % threads as u64)
        };
        let (started_tx, started_rx) = mpsc::channel::<Instant>();
        let results: Vec<Result<Times, String>> = std::thread::scope(|s| {
            for _ in 0..threads {
                let (server, listener) = (&server, &listener);
                let (abort, left) = (&abort, &left_to_accept);
                s.spawn(move || {
                    let r = serve(server, listener, left, abort);
                    if r.is_err() {
                        abort.store(true, Ordering::Relaxed);
                    }
                    r
                });
            }
            let clients: Vec<_> = (0..threads)
                .map(|i| {
                    let (abort, started) = (&abort, started_tx.clone());
                    s.spawn(move || {
                        let r = connect_many(
                            opener,
                            client_ip,
                            server_ip,
                            per_thread(i),
                            abort,
                            started,
                        );
                        if r.is_err() {
                            abort.store(true, Ordering::Relaxed);
                        }
                        r
                    })
                })
                .collect();
            clients
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a client thread panicked".into()))
                })
                .collect()
        });
        let end = Instant::now();
        drop(started_tx);
        let first = started_rx.iter().min().unwrap_or(end);
        let mut all = Times::default();
        for r in results {
            let t = r?;
            all.setup.extend(t.setup);
            all.connect.extend(t.connect);
            all.establish.extend(t.establish);
            all.disconnect.extend(t.disconnect);
            all.total.extend(t.total);
        }
        let seconds = end.duration_since(first).as_secs_f64().max(1e-9);
        Ok(ConnResult {
            threads,
            connections: a.connections,
            seconds,
            connections_per_sec: a.connections as f64 / seconds,
            setup: phase(&mut all.setup),
            connect: phase(&mut all.connect),
            establish: phase(&mut all.establish),
            disconnect: phase(&mut all.disconnect),
            total: phase(&mut all.total),
        })
    }
}

/// Waits for a step with the hang guard and the other threads' abort.
fn wait<T>(p: Pending<T>, abort: &AtomicBool) -> Result<T, String> {
    let start = Instant::now();
    loop {
        if let Some(r) = p.wait_timeout(Duration::from_millis(5)) {
            return r.map_err(|e| e.to_string());
        }
        if abort.load(Ordering::Relaxed) {
            return Err("another thread failed".into());
        }
        if start.elapsed() > STEP_GUARD {
            return Err(format!(
                "{} did not complete in {} s",
                p.op(),
                STEP_GUARD.as_secs()
            ));
        }
    }
}

/// A server thread: takes connections until none is left to take.
fn serve<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    p: &Provider<F>,
    listener: &wv_client::verbs::Endpoint<F>,
    left: &AtomicU64,
    abort: &AtomicBool,
) -> Result<(), String> {
    let mut pd = None;
    while left
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .is_ok()
    {
        let ep = p.create_endpoint().map_err(|e| e.to_string())?;
        wait(listener.get_request(&ep).map_err(|e| e.to_string())?, abort)?;
        let attr = ep.query().map_err(|e| e.to_string())?;
        // One PD for every connection of this thread, on the device the first one came to.
        let pd = match &mut pd {
            Some(pd) => pd,
            slot @ None => {
                let dev = p
                    .open_device(attr.device.device_guid)
                    .map_err(|e| e.to_string())?;
                slot.insert(dev.alloc_pd().map_err(|e| e.to_string())?)
            }
        };
        let side = ConnSide::on(pd, attr.device.port, 1, 1).map_err(|e| e.to_string())?;
        wait(
            ep.accept(&side.qp, &rdma_cm_param(&[]))
                .map_err(|e| e.to_string())?,
            abort,
        )?;
        wait(ep.notify_disconnect().map_err(|e| e.to_string())?, abort)?;
        wait(
            ep.disconnect(Some(&side.qp)).map_err(|e| e.to_string())?,
            abort,
        )?;
    }
    Ok(())
}

/// A client thread: `n` connections, one after the other.
fn connect_many<O: Opener>(
    opener: &O,
    local: IpAddr,
    server: IpAddr,
    n: u64,
    abort: &AtomicBool,
    started: mpsc::Sender<Instant>,
) -> Result<Times, String> {
    let net = opener.addresses().ok_or("no address service")?;
    let p = Provider::new(opener.open_file().map_err(|e| e.0)?);
    let located = net
        .locate(local)
        .ok_or("no device owns the client address")?;
    let dev = p
        .open_device(located.device_guid)
        .map_err(|e| e.to_string())?;
    let pd = dev.alloc_pd().map_err(|e| e.to_string())?;
    let mut times = Times::default();
    let param = rdma_cm_param(&[]);
    let _ = started.send(Instant::now());
    let ns = |t: Instant| t.elapsed().as_nanos() as u64;
    for _ in 0..n {
        let whole = Instant::now();
        let t = Instant::now();
        let ep = p.create_endpoint().map_err(|e| e.to_string())?;
        ep.bind(SocketAddr::new(local, 0), net)
            .map_err(|e| e.to_string())?;
        ep.resolve_route(local, server, net)
            .map_err(|e| e.to_string())?;
        let side = ConnSide::on(&pd, located.port, 1, 1).map_err(|e| e.to_string())?;
        times.setup.push(ns(t));
        let t = Instant::now();
        wait(
            ep.connect(&side.qp, SocketAddr::new(server, PORT), &param)
                .map_err(|e| e.to_string())?,
            abort,
        )?;
        times.connect.push(ns(t));
        let t = Instant::now();
        wait(
            ep.accept(&side.qp, &param).map_err(|e| e.to_string())?,
            abort,
        )?;
        times.establish.push(ns(t));
        let t = Instant::now();
        wait(
            ep.disconnect(Some(&side.qp)).map_err(|e| e.to_string())?,
            abort,
        )?;
        times.disconnect.push(ns(t));
        times.total.push(ns(whole));
    }
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let mut v: Vec<u64> = (1..=100).map(|x| x * 1000).collect();
        assert_eq!(quantile_us(&mut v, 0.5), 50.0);
        assert_eq!(quantile_us(&mut v, 0.99), 99.0);
        assert_eq!(quantile_us(&mut [], 0.5), 0.0);
        assert_eq!(quantile_us(&mut [7000], 0.99), 7.0);
    }
}
