//! `wvharness pingpong`: libibverbs' `ibv_rc_pingpong` / `ibv_uc_pingpong` / `ibv_ud_pingpong`.
//!
//! The transport is chosen with `-C RC|UC|UD` instead of three programs; the other options are
//! the examples' (`-s`, `-n`, `-r`, `-e`, `-g`, `-c`/`--chk`). Both sides run in this process,
//! as two threads on two devices (each with its own handle on the driver, as two processes
//! would have); they exchange `LID:QPN:PSN:GID` through a channel instead of TCP, then run
//! rc_pingpong's loop and print its lines (the client's view): the address lines as the
//! example of the transport prints them (ud_pingpong's local line has `PSN …: GID`), the GID
//! `::` unless `-g` names a GID index (as the examples: on a RoCE port, such as the soft
//! HCA's, a connection needs `-g`, which the driver's refusal of a path without a GRH says),
//! and with `-c` the client's bytes checked where the examples check them: by the server, on
//! the last message it received, after the timed loop. Sends go inline when the QP's granted
//! inline size (the examples ask for none and read back what the device gave) covers the
//! message.

use std::io::{self, Write};
use std::net::Ipv6Addr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use wv_client::verbs::{Provider, WorkCompletion, WrOpcode};
use wv_inproc::StackConfig;

use crate::perftest::Connection;
use crate::perftest::endpoint::{
    DataPath, Dest, Rendezvous, Shared, Side, SideConfig, aborted, poll_some,
};
use crate::target::{
    DeviceSpec, Opener, Target, TargetArgs, TargetTask, joined, other_device, resolve_device,
};

/// Options of `wvharness pingpong` (rc_pingpong's, where they apply).
#[derive(Args, Clone, Debug)]
pub struct PingpongArgs {
    /// Transport: RC (ibv_rc_pingpong), UC (ibv_uc_pingpong) or UD (ibv_ud_pingpong).
    #[arg(short = 'C', long = "connection", value_enum, default_value_t = Connection::Rc, ignore_case = true)]
    pub connection: Connection,
    /// Size of message to exchange (default 4096; UD: default 1024, at most the port's MTU).
    #[arg(short = 's', long = "size")]
    pub size: Option<u64>,
    /// Local port GID index (default: none, the GID `::`; a RoCE port needs one).
    #[arg(short = 'g', long = "gid-idx")]
    pub gid_idx: Option<u32>,
    /// Number of exchanges.
    #[arg(short = 'n', long = "iters", default_value_t = 1000)]
    pub iters: u64,
    /// Number of receives to post at a time.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500)]
    pub rx_depth: u32,
    /// Sleep on CQ events (default poll).
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// Use a shared receive queue.
    #[arg(long)]
    pub srq: bool,
    /// Validate the received buffer (after the timed loop, as the examples do).
    #[arg(short = 'c', long = "chk")]
    pub chk: bool,
    /// Print the results as JSON instead of rc_pingpong's lines.
    #[arg(long)]
    pub json: bool,
    /// Which driver and device to run on.
    #[command(flatten)]
    pub target: TargetArgs,
}

const SEND_WRID: u64 = 1;
const RECV_WRID: u64 = 2;

/// What a run measured (the client's side).
#[derive(Clone, Debug, Serialize)]
pub struct PingpongResult {
    /// The client's address.
    pub local: String,
    /// The server's address.
    pub remote: String,
    /// Bytes moved both ways.
    pub bytes: u64,
    /// Seconds.
    pub seconds: f64,
    /// Mbit/s.
    pub mbit_per_sec: f64,
    /// Iterations.
    pub iters: u64,
    /// Microseconds per iteration (a full round trip).
    pub usec_per_iter: f64,
    /// Whether received bytes were verified (`-c`).
    pub checked: bool,
    /// Pages of the last message the server received that did not hold the client's bytes
    /// (`-c`; the examples' server checks, the client does not).
    pub invalid_pages: Vec<usize>,
    /// The inline size the client's QP was granted (`max_inline_data` read back after
    /// creating it with none asked for).
    pub max_inline_data: u32,
    /// Whether the sends went inline (the grant covers the message).
    pub inline: bool,
}

/// The example's address line: rc/uc_pingpong's `…, PSN 0x%06x, GID %s`; ud_pingpong's local
/// line says `…, PSN 0x%06x: GID %s`.
fn address_line(side: &str, d: &Dest, connection: Connection) -> String {
    let sep = if connection == Connection::Ud && side == "local" {
        ":"
    } else {
        ","
    };
    format!(
        "  {:<16}LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}{sep} GID {}",
        format!("{side} address:"),
        d.lid,
        d.qpn,
        d.psn,
        Ipv6Addr::from(d.gid)
    )
}

/// The byte `j` of the client's message (`-c`), so that a server that received nothing, or
/// stale bytes, shows.
fn pattern(j: usize) -> u8 {
    (j.wrapping_mul(7) as u8).wrapping_add(0xa5)
}

/// With `-c`, which side checks what it received: the examples' server (the side without a
/// server name) checks the client's bytes; the client checks nothing.
fn checks_received(client: bool) -> bool {
    !client
}

/// Runs `pingpong`.
pub fn run(args: &PingpongArgs) -> io::Result<ExitCode> {
    if let Err(e) = validate(args, None) {
        eprintln!("wvharness pingpong: {e}");
        return Ok(ExitCode::FAILURE);
    }
    let (target, device) = Target::open(&args.target, StackConfig::default())?;
    // The address lines as the client prints them, before anything can fail after them.
    let lines = std::sync::Mutex::new(Vec::new());
    let result = target.run(
        PingpongTask {
            args,
            lines: &lines,
        },
        device,
    );
    let mut out = io::stdout().lock();
    if !args.json {
        for line in lines.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            writeln!(out, "{line}")?;
        }
    }
    match result {
        Ok(r) => {
            if args.json {
                serde_json::to_writer_pretty(&mut out, &r).map_err(io::Error::other)?;
                writeln!(out)?;
            } else {
                writeln!(
                    out,
                    "{} bytes in {:.2} seconds = {:.2} Mbit/sec",
                    r.bytes, r.seconds, r.mbit_per_sec
                )?;
                writeln!(
                    out,
                    "{} iters in {:.2} seconds = {:.2} usec/iter",
                    r.iters, r.seconds, r.usec_per_iter
                )?;
                for page in &r.invalid_pages {
                    writeln!(out, "invalid data in page {page}")?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("wvharness pingpong: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The message size: `-s`, or the examples' defaults (4096; ud_pingpong: 1024).
fn size_of(a: &PingpongArgs) -> u64 {
    a.size.unwrap_or(if a.connection == Connection::Ud {
        1024
    } else {
        4096
    })
}

/// Checks the options; with the port's MTU (`mtu`, once the device is open) also a UD size.
fn validate(a: &PingpongArgs, mtu: Option<u64>) -> Result<(), String> {
    let size = size_of(a);
    if size == 0 {
        return Err("size must be at least 1 byte".into());
    }
    if size > 1 << 30 {
        return Err("size must be at most 1 GiB".into());
    }
    if let Some(mtu) = mtu
        && a.connection == Connection::Ud
        && size > mtu
    {
        // ud_pingpong's check against the port's active MTU.
        return Err(format!("Requested size larger than port MTU ({mtu})"));
    }
    if a.iters == 0 {
        return Err("iters must be at least 1".into());
    }
    if a.rx_depth < 2 {
        return Err("rx-depth must be at least 2".into());
    }
    Ok(())
}

struct PingpongTask<'a> {
    args: &'a PingpongArgs,
    lines: &'a std::sync::Mutex<Vec<String>>,
}

impl TargetTask for PingpongTask<'_> {
    type Output = Result<PingpongResult, String>;

    fn run<O: Opener>(self, opener: &O, device: Option<DeviceSpec>) -> Self::Output {
        let a = self.args;
        let provider = Provider::new(opener.open_file().map_err(|e| e.0)?);
        let guids = provider
            .device_guids()
            .map_err(|e| format!("listing devices: {e}"))?;
        let server_ix = resolve_device(&guids, device).map_err(|e| e.0)?;
        let client_ix = other_device(guids.len(), server_ix);
        let port = provider
            .open_device(guids[server_ix])
            .and_then(|d| d.query_port(1))
            .map_err(|e| format!("Couldn't get port info: {e}"))?;
        validate(
            a,
            Some(u64::from(crate::perftest::endpoint::mtu_bytes(
                port.ActiveMtu,
            ))),
        )?;
        drop(provider);
        let cfg = SideConfig {
            connection: a.connection,
            tx_depth: 1,
            rx_depth: a.rx_depth,
            // The examples ask for no inline data; what the device grants anyway is read back
            // after the QP is created.
            inline_size: 0,
            buf_size: size_of(a) as usize,
            srq: a.srq,
            split_cqs: false,
            out_reads: 1,
        };
        let sh = Shared {
            abort: AtomicBool::new(false),
            stop: AtomicU64::new(0),
            sync: Rendezvous::default(),
            origin: Instant::now(),
            wait_every_poll: false,
        };
        let (to_client, from_server) = mpsc::channel::<Dest>();
        let (to_server, from_client) = mpsc::channel::<Dest>();
        let lines = self.lines;
        let body = |client: bool, guid: u64, tx: mpsc::Sender<Dest>, rx: mpsc::Receiver<Dest>| {
            let r = side_main(opener, guid, cfg, a, client, tx, rx, &sh, lines);
            if r.is_err() {
                sh.abort.store(true, Ordering::Relaxed);
            }
            r
        };
        let (server, client) = std::thread::scope(|s| {
            let server = s.spawn(|| body(false, guids[server_ix], to_client, from_client));
            let client = s.spawn(|| body(true, guids[client_ix], to_server, from_server));
            (joined(server, "server"), joined(client, "client"))
        });
        match (client, server) {
            (Ok(mut r), Ok(s)) => {
                // The server's check is the one the examples make; report its findings.
                r.invalid_pages = s.invalid_pages;
                Ok(r)
            }
            (Err(e), _) | (_, Err(e)) if e != aborted() => Err(e),
            (Err(e), _) | (_, Err(e)) => Err(e),
        }
    }
}

/// One side of rc_pingpong: set up, exchange addresses, run the loop, measure, then (with
/// `-c`) check the data received.
#[allow(clippy::too_many_arguments)]
fn side_main<O: Opener>(
    opener: &O,
    guid: u64,
    cfg: SideConfig,
    a: &PingpongArgs,
    client: bool,
    tx: mpsc::Sender<Dest>,
    rx: mpsc::Receiver<Dest>,
    sh: &Shared,
    lines: &std::sync::Mutex<Vec<String>>,
) -> Result<PingpongResult, String> {
    let provider = Provider::new(opener.open_file().map_err(|e| e.0)?);
    let mut side = Side::open(&provider, guid, cfg, u32::from(client))?;
    let size = size_of(a) as usize;
    // rc_pingpong and ud_pingpong read the QP's capabilities back after creating it and send
    // inline when the granted max_inline_data covers the message.
    let max_inline_data = side.qp.max_inline();
    side.inline_size = if max_inline_data as usize >= size {
        max_inline_data
    } else {
        0
    };
    // Without -g the examples exchange no GID (`::`).
    match a.gid_idx {
        None => side.local.gid = [0; 16],
        Some(i) => side.local.gid = side.gid(i)?,
    }
    let payload = side.recv_payload_offset();
    let local = address_line("local", &side.local, a.connection);
    if client {
        lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(local.clone());
    }
    tx.send(side.local).map_err(|_| aborted())?;
    let remote = rx
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| aborted())?;
    let remote_line = address_line("remote", &remote, a.connection);
    if client {
        lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(remote_line.clone());
    }
    side.connect(remote)?;
    // Receives are posted once the QP has left RESET; the peer sends only after the
    // rendezvous below.
    for _ in 0..a.rx_depth {
        side.post_recv(RECV_WRID)?;
    }
    let mut routs = u64::from(a.rx_depth);
    // Armed before the peer can send, as rc_pingpong requests notification before the address
    // exchange: an arm covers the next completion only, so one that raced ahead of the arm
    // would never raise an event.
    if a.events {
        side.send_cq.arm()?;
    }
    if a.chk && client {
        // As the examples, the client fills its buffer once before the first send.
        let msg: Vec<u8> = (0..size).map(pattern).collect();
        side.buf.write(0, &msg).map_err(|e| e.to_string())?;
    }
    // Both QPs are ready before the first send (rc_pingpong's "done" exchange).
    sh.sync.meet(&sh.abort)?;
    let start = Instant::now();
    let mut pending = RECV_WRID;
    let (mut scnt, mut rcnt) = (0u64, 0u64);
    let send = || side.post(SEND_WRID, WrOpcode::Send, size, true);
    if client {
        send()?;
        pending |= SEND_WRID;
    }
    let mut wc = [WorkCompletion::default(); 2];
    while rcnt < a.iters || scnt < a.iters {
        let ne = if a.events {
            side.send_cq.wait(&sh.abort).map_err(|e| {
                format!(
                    "{e} ({} side: {scnt} of {} sends and {rcnt} of {} receives completed)",
                    if client { "client" } else { "server" },
                    a.iters,
                    a.iters
                )
            })?;
            side.send_cq.poll(&mut wc)
        } else {
            poll_some(&*side.send_cq, &mut wc, false, sh, usize::MAX)?
        };
        for w in &wc[..ne] {
            if w.status != wv_client::verbs::WcStatus::Success {
                return Err(format!(
                    "Failed status {:?} ({}) for wr_id {}",
                    w.status, w.status as u8, w.wr_id
                ));
            }
            match w.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    rcnt += 1;
                    routs -= 1;
                    if routs <= 1 {
                        while routs < u64::from(a.rx_depth) {
                            side.post_recv(RECV_WRID)?;
                            routs += 1;
                        }
                    }
                }
                other => return Err(format!("Completion for unknown wr_id {other}")),
            }
            pending &= !w.wr_id;
            if scnt < a.iters && pending == 0 {
                send()?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    // After the timed loop, as the examples: the last message the server received is the
    // client's bytes, page by page (every byte of each page, where the examples look at its
    // first).
    let mut invalid_pages = Vec::new();
    if a.chk && checks_received(client) {
        let mut got = vec![0u8; size];
        side.buf
            .read(side.land_off + payload, &mut got)
            .map_err(|e| e.to_string())?;
        for (page, chunk) in got.chunks(4096).enumerate() {
            if chunk
                .iter()
                .enumerate()
                .any(|(k, &b)| b != pattern(page * 4096 + k))
            {
                invalid_pages.push(page);
            }
        }
    }
    // Neither side tears down while the other may still be reaping.
    sh.sync.meet(&sh.abort)?;
    let bytes = size as u64 * a.iters * 2;
    Ok(PingpongResult {
        local,
        remote: remote_line,
        bytes,
        seconds,
        mbit_per_sec: bytes as f64 * 8.0 / seconds / 1_000_000.0,
        iters: a.iters,
        usec_per_iter: seconds * 1_000_000.0 / a.iters as f64,
        checked: a.chk,
        invalid_pages,
        max_inline_data,
        inline: side.inline_size > 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_server_checks_the_received_data() {
        assert!(
            checks_received(false),
            "the server checks the client's bytes"
        );
        assert!(!checks_received(true), "the client checks nothing");
    }

    #[test]
    fn address_line_matches_rc_pingpong() {
        let d = Dest {
            lid: 1,
            qpn: 0x12,
            psn: 0xabcdef,
            gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            rkey: 0,
            vaddr: 0,
            out_reads: 1,
        };
        assert_eq!(
            address_line("local", &d, Connection::Rc),
            "  local address:  LID 0x0001, QPN 0x000012, PSN 0xabcdef, GID fe80::1"
        );
        // ud_pingpong's local line has a colon before the GID; its remote line does not.
        let none = Dest { gid: [0; 16], ..d };
        assert_eq!(
            address_line("local", &none, Connection::Ud),
            "  local address:  LID 0x0001, QPN 0x000012, PSN 0xabcdef: GID ::"
        );
        assert_eq!(
            address_line("remote", &none, Connection::Ud),
            "  remote address: LID 0x0001, QPN 0x000012, PSN 0xabcdef, GID ::"
        );
    }
}
