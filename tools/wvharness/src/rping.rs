//! `wvharness rping`: librdmacm's `rping` over WinVerbs connection endpoints.
//!
//! The client advertises a source buffer; the server RDMA-reads it, says "go ahead", the
//! client advertises its sink, the server RDMA-writes the data back and says "go ahead" again;
//! the client compares the two buffers — `-C` times — then disconnects. The connection is made
//! with EP_BIND / EP_MODIFY (route) / EP_LISTEN / EP_GET_REQUEST / EP_CONNECT / EP_ACCEPT and
//! ended with EP_DISCONNECT, so every step of an rdma_cm application runs through the driver.
//!
//! Both sides run in this process, each with its own handle on the driver (as two processes
//! would have): the server on the `--device` device, the client on the next one. `-s` prints
//! the server's lines, `-c` (the default) the client's, in rping's words: with `-v` the client
//! prints `ping data: rdma-ping-<n>: …` for every ping, the server `server ping data: …`;
//! the DISCONNECT events go to standard error, on the server followed by rping's report of the
//! wait the disconnect ended (`wait for RDMA_READ_ADV state 10`). Data is always verified
//! (rping's `-V`).
//! rping's `-d` (debug prints) would clash with `--device`'s `-d`: it is `--debug` here.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use clap::Args;
use wv_client::raw::RawFile;
use wv_client::verbs::{
    Buffer, Mr, Provider, WV_ACCESS_LOCAL_WRITE, WV_ACCESS_REMOTE_READ, WV_ACCESS_REMOTE_WRITE,
    WcOpcode, WcStatus, WrOpcode,
};
use wv_inproc::StackConfig;

use crate::target::{
    DeviceSpec, Opener, Target, TargetArgs, TargetTask, joined, server_and_client,
};
use wv_check::conn_side::{ConnSide, STEP_GUARD, next_completion, rdma_cm_param};

/// rping's default port.
pub const DEFAULT_PORT: u16 = 7174;
/// `RPING_MSG_FMT` with the largest `int`, and its NUL: the smallest ping.
const MIN_SIZE: usize = "2147483647\0".len() + "rdma-ping-%d: \0".len();
/// `RPING_BUFSIZE - 1`.
const MAX_SIZE: usize = 64 * 1024 - 1;
/// `RPING_SQ_DEPTH`, and the two receives rping posts.
const SQ_DEPTH: u32 = 16;
const RQ_DEPTH: u32 = 2;
/// `struct rping_rdma_info`: buffer address, rkey and size, big-endian.
const INFO_LEN: usize = 16;
/// rping's `DISCONNECTED` test state, which its server prints when the client's disconnect
/// ends a wait.
const DISCONNECTED: u32 = 10;

/// Options of `wvharness rping` (rping's).
#[derive(Args, Clone, Debug)]
pub struct RpingArgs {
    /// Print the server side's lines.
    #[arg(short = 's', conflicts_with = "client")]
    pub server: bool,
    /// Print the client side's lines (the default).
    #[arg(short = 'c')]
    pub client: bool,
    /// Address: the server binds to it, the client connects to it (default: the server binds
    /// to any address and the client connects to the server device's address).
    #[arg(short = 'a', value_name = "ADDR")]
    pub addr: Option<IpAddr>,
    /// Source address the client binds to (default: its device's address).
    #[arg(short = 'I', value_name = "ADDR")]
    pub source: Option<IpAddr>,
    /// Port.
    #[arg(short = 'p', default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Ping count (0: until interrupted, as rping).
    #[arg(short = 'C', default_value_t = 0)]
    pub count: u64,
    /// Ping data size.
    #[arg(short = 'S', default_value_t = 64)]
    pub size: usize,
    /// Display ping data to stdout.
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Validate ping data (always on here).
    #[arg(short = 'V')]
    pub validate: bool,
    /// rping's debug prints (`-d` there).
    #[arg(long)]
    pub debug: bool,
    /// Which driver and device to run on.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Runs `rping`.
pub fn run(args: &RpingArgs) -> io::Result<ExitCode> {
    if !(MIN_SIZE..=MAX_SIZE).contains(&args.size) {
        eprintln!(
            "Invalid size {} (valid range is {MIN_SIZE} to {})",
            args.size,
            MAX_SIZE + 1
        );
        return Ok(ExitCode::FAILURE);
    }
    let (target, device) = Target::open(&args.target, StackConfig::default())?;
    match target.run(RpingTask { args }, device) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("wvharness rping: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

struct RpingTask<'a> {
    args: &'a RpingArgs,
}

/// Where the two sides are.
struct Plan {
    server_bind: SocketAddr,
    server_addr: SocketAddr,
    client_source: IpAddr,
}

impl TargetTask for RpingTask<'_> {
    type Output = Result<(), String>;

    fn run<O: Opener>(self, opener: &O, device: Option<DeviceSpec>) -> Self::Output {
        let a = self.args;
        let (server_ix, client_ix) = server_and_client(opener, device)?;
        let no_address = || {
            "this transport has no address service (IBAT): rping needs --transport inproc"
                .to_string()
        };
        let server_ip = match a.addr {
            Some(ip) => ip,
            None => opener.device_address(server_ix).ok_or_else(no_address)?,
        };
        let plan = Plan {
            server_bind: SocketAddr::new(
                a.addr.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
                a.port,
            ),
            server_addr: SocketAddr::new(server_ip, a.port),
            client_source: match a.source {
                Some(ip) => ip,
                None => opener.device_address(client_ix).ok_or_else(no_address)?,
            },
        };
        let abort = AtomicBool::new(false);
        let (listening, ready) = mpsc::channel::<()>();
        let (server, client) = std::thread::scope(|s| {
            let server = s.spawn(|| {
                let r = server_main(opener, a, &plan, &abort, listening);
                if r.is_err() {
                    abort.store(true, Ordering::Relaxed);
                }
                r
            });
            let client = s.spawn(|| {
                let r = client_main(opener, a, &plan, &abort, ready);
                if r.is_err() {
                    abort.store(true, Ordering::Relaxed);
                }
                r
            });
            (joined(server, "server"), joined(client, "client"))
        });
        // The side that failed first says why; the other one only saw the abort.
        match (client, server) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(c), Err(s)) if c.contains("other side") => Err(format!("server: {s}")),
            (Err(c), _) => Err(format!("client: {c}")),
            (_, Err(s)) => Err(format!("server: {s}")),
        }
    }
}

/// One registered buffer.
struct Region {
    buf: Buffer,
    mr: Mr,
}

impl Region {
    fn new<F: RawFile + Send + Sync + 'static>(
        side: &ConnSide<F>,
        len: usize,
        access: u32,
    ) -> Result<Region, String> {
        let buf = side.pd.device().alloc_buffer(len);
        let mr = side
            .pd
            .reg_mr(&buf, access)
            .map_err(|e| format!("reg_mr: {e}"))?;
        Ok(Region { buf, mr })
    }

    /// rping's `rping_rdma_info` for this buffer.
    fn info(&self, size: usize) -> [u8; INFO_LEN] {
        let mut i = [0u8; INFO_LEN];
        i[..8].copy_from_slice(&self.buf.addr().to_be_bytes());
        i[8..12].copy_from_slice(&self.mr.rkey().to_be_bytes());
        i[12..].copy_from_slice(&(size as u32).to_be_bytes());
        i
    }
}

/// The buffers and work requests of one side (rping's `rping_setup_buffers` and `_wr`).
struct Rping<'a, F: RawFile + Send + Sync + 'static> {
    side: &'a ConnSide<F>,
    recv: Region,
    send: Region,
    rdma: Region,
    abort: &'a AtomicBool,
}

impl<'a, F: RawFile + Send + Sync + 'static> Rping<'a, F> {
    fn new(side: &'a ConnSide<F>, size: usize, abort: &'a AtomicBool) -> Result<Self, String> {
        Ok(Rping {
            side,
            recv: Region::new(side, INFO_LEN, WV_ACCESS_LOCAL_WRITE)?,
            send: Region::new(side, INFO_LEN, 0)?,
            rdma: Region::new(
                side,
                size,
                WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_READ | WV_ACCESS_REMOTE_WRITE,
            )?,
            abort,
        })
    }

    fn post_recv(&self) -> Result<(), String> {
        self.side
            .qp
            .post_recv(&wv_client::verbs::RecvWr {
                wr_id: 0,
                sg_list: &[self.recv.mr.sge(0, INFO_LEN as u32)],
            })
            .map_err(|e| format!("post recv error {e:?}"))
    }

    /// Sends the 16 bytes in the send buffer (an advertisement or a "go ahead").
    fn post_send(&self) -> Result<(), String> {
        let sge = self.send.mr.sge(0, INFO_LEN as u32);
        self.side
            .post_signaled(1, WrOpcode::Send, sge, (0, 0))
            .map_err(|e| format!("post send error {e:?}"))
    }

    fn post_rdma(&self, op: WrOpcode, len: usize, remote: (u64, u32)) -> Result<(), String> {
        let sge = self.rdma.mr.sge(0, len as u32);
        self.side
            .post_signaled(2, op, sge, remote)
            .map_err(|e| format!("post send error {e:?}"))
    }

    /// The next completion other than a send's (rping's CQ handler ignores those): a receive
    /// (reposted at once) or an RDMA read/write. `None` when `disconnected` says the peer
    /// left, or the queue was flushed by the disconnect.
    fn next(&self, mut disconnected: impl FnMut() -> bool) -> Result<Option<WcOpcode>, String> {
        loop {
            let Some(wc) = next_completion(&self.side.cq, self.abort, &mut disconnected)? else {
                return Ok(None);
            };
            if wc.status == WcStatus::WrFlushErr {
                return Ok(None);
            }
            if wc.status != WcStatus::Success {
                return Err(format!("cq completion failed status {}", wc.status as u32));
            }
            match wc.opcode {
                WcOpcode::Send => continue,
                WcOpcode::Recv => {
                    if wc.byte_len as usize != INFO_LEN {
                        return Err(format!("Received bogus data, size {}", wc.byte_len));
                    }
                    self.post_recv()?;
                    return Ok(Some(WcOpcode::Recv));
                }
                op @ (WcOpcode::RdmaRead | WcOpcode::RdmaWrite) => return Ok(Some(op)),
                _ => return Err("unknown!!!!! completion".into()),
            }
        }
    }

    /// The peer's advertisement in the receive buffer: address, rkey, length.
    fn remote(&self) -> Result<(u64, u32, usize), String> {
        let mut b = [0u8; INFO_LEN];
        self.recv.buf.read(0, &mut b).map_err(|e| e.to_string())?;
        let addr = u64::from_be_bytes(b[..8].try_into().unwrap_or_default());
        let rkey = u32::from_be_bytes(b[8..12].try_into().unwrap_or_default());
        let len = u32::from_be_bytes(b[12..].try_into().unwrap_or_default()) as usize;
        Ok((addr, rkey, len))
    }
}

/// A NUL-terminated string in a buffer, as `printf("%s")` prints it.
fn c_string(buf: &Buffer) -> String {
    let bytes = buf.to_vec();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// rping's ping `n`: `rdma-ping-<n>: ` then letters from `A` (shifted by one per ping) up to
/// `z` and around again, NUL-terminated at the last byte.
pub fn ping_data(n: u64, size: usize) -> Vec<u8> {
    let mut data = format!("rdma-ping-{n}: ").into_bytes();
    data.truncate(size);
    let mut c = 65 + (n % 58) as u8;
    while data.len() < size {
        data.push(c);
        c += 1;
        if c > 122 {
            c = 65;
        }
    }
    if let Some(last) = data.last_mut() {
        *last = 0;
    }
    data
}

fn say(enabled: bool, line: std::fmt::Arguments<'_>) {
    if enabled {
        let _ = writeln!(io::stdout().lock(), "{line}");
    }
}

fn debug(a: &RpingArgs, line: std::fmt::Arguments<'_>) {
    if a.debug {
        let _ = writeln!(io::stdout().lock(), "{line}");
    }
}

/// The server: bind, listen (backlog 3, as rping), take the request, accept it on the device
/// it came to, then serve pings until the client disconnects.
fn server_main<O: Opener>(
    opener: &O,
    a: &RpingArgs,
    plan: &Plan,
    abort: &AtomicBool,
    listening: mpsc::Sender<()>,
) -> Result<(), String> {
    let net = opener.addresses().ok_or("no address service")?;
    let prints = a.server;
    let provider = Provider::new(opener.open_file().map_err(|e| e.0)?);
    let listener = provider
        .create_endpoint()
        .map_err(|e| format!("rdma_create_id: {e}"))?;
    listener
        .bind(plan.server_bind, net)
        .map_err(|e| format!("rdma_bind_addr: {e}"))?;
    debug(a, format_args!("rdma_bind_addr successful"));
    listener
        .listen(3)
        .map_err(|e| format!("rdma_listen: {e}"))?;
    debug(a, format_args!("rdma_listen"));
    let child = provider
        .create_endpoint()
        .map_err(|e| format!("rdma_create_id: {e}"))?;
    let request = listener
        .get_request(&child)
        .map_err(|e| format!("rdma_get_request: {e}"))?;
    let _ = listening.send(());
    wait_step(&request, abort)?.map_err(|e| format!("wait for CONNECT_REQUEST: {e}"))?;
    let attr = child.query().map_err(|e| format!("rdma_query: {e}"))?;
    let dev = provider
        .open_device(attr.device.device_guid)
        .map_err(|e| format!("setup_qp failed: {e}"))?;
    let side = ConnSide::new(&dev, attr.device.port, SQ_DEPTH, RQ_DEPTH)
        .map_err(|e| format!("setup_qp failed: {e}"))?;
    let rp = Rping::new(&side, a.size, abort)?;
    rp.post_recv()?;
    debug(a, format_args!("accepting client connection request"));
    let accept = child
        .accept(&side.qp, &rdma_cm_param(&[]))
        .map_err(|e| format!("rdma_accept: {e}"))?;
    wait_step(&accept, abort)?.map_err(|e| format!("rdma_accept: {e}"))?;
    // Connected: from now on the client's DREQ completes this (librdmacm's DISCONNECTED).
    let notify = child
        .notify_disconnect()
        .map_err(|e| format!("rdma_notify: {e}"))?;

    let peer_left = || notify.is_complete();
    // Each wait of rping's server loop: the completion it waits for, or the client's
    // disconnect, which ends the loop at that wait (rping then reports the wait it was in).
    let wait = |step: &'static str, want: WcOpcode| -> Result<Option<&'static str>, String> {
        match rp.next(peer_left)? {
            Some(op) if op == want => Ok(None),
            None => Ok(Some(step)),
            Some(op) => Err(format!("wait for {step}: {op:?}")),
        }
    };
    let left_in = loop {
        // The client's source advertisement, or its disconnect.
        if let Some(step) = wait("RDMA_READ_ADV", WcOpcode::Recv)? {
            break step;
        }
        let (addr, rkey, len) = rp.remote()?;
        if len > a.size {
            return Err(format!(
                "the client advertised {len} bytes, more than -S {}",
                a.size
            ));
        }
        rp.post_rdma(WrOpcode::RdmaRead, len, (addr, rkey))?;
        if let Some(step) = wait("RDMA_READ_COMPLETE", WcOpcode::RdmaRead)? {
            break step;
        }
        say(
            prints && a.verbose > 0,
            format_args!("server ping data: {}", c_string(&rp.rdma.buf)),
        );
        rp.post_send()?;
        // The client's sink advertisement.
        if let Some(step) = wait("RDMA_WRITE_ADV", WcOpcode::Recv)? {
            break step;
        }
        let (addr, rkey, _) = rp.remote()?;
        let len = c_string(&rp.rdma.buf).len() + 1;
        rp.post_rdma(WrOpcode::RdmaWrite, len, (addr, rkey))?;
        if let Some(step) = wait("RDMA_WRITE_COMPLETE", WcOpcode::RdmaWrite)? {
            break step;
        }
        rp.post_send()?;
    };
    wait_step(&notify, abort)?.map_err(|e| format!("rdma_notify: {e}"))?;
    if prints {
        // rping's CM thread reports the event, then its main thread the wait the event ended
        // (in the state DISCONNECTED, 10), which it counts as a clean end.
        eprintln!("server DISCONNECT EVENT...");
        eprintln!("wait for {left_in} state {DISCONNECTED}");
    }
    let bye = child
        .disconnect(Some(&side.qp))
        .map_err(|e| format!("rdma_disconnect: {e}"))?;
    wait_step(&bye, abort)?.map_err(|e| format!("rdma_disconnect: {e}"))?;
    Ok(())
}

/// The client: bind to its source, resolve the route, connect, then ping `-C` times and
/// disconnect.
fn client_main<O: Opener>(
    opener: &O,
    a: &RpingArgs,
    plan: &Plan,
    abort: &AtomicBool,
    ready: mpsc::Receiver<()>,
) -> Result<(), String> {
    let net = opener.addresses().ok_or("no address service")?;
    let prints = !a.server;
    let provider = Provider::new(opener.open_file().map_err(|e| e.0)?);
    let located = net
        .locate(plan.client_source)
        .ok_or_else(|| format!("rdma_resolve_addr: no device owns {}", plan.client_source))?;
    let dev = provider
        .open_device(located.device_guid)
        .map_err(|e| format!("setup_qp failed: {e}"))?;
    let ep = provider
        .create_endpoint()
        .map_err(|e| format!("rdma_create_id: {e}"))?;
    ep.bind(SocketAddr::new(plan.client_source, 0), net)
        .map_err(|e| format!("rdma_resolve_addr: {e}"))?;
    ep.resolve_route(plan.client_source, plan.server_addr.ip(), net)
        .map_err(|e| format!("rdma_resolve_route: {e}"))?;
    debug(
        a,
        format_args!("rdma_resolve_addr - rdma_resolve_route successful"),
    );
    let side = ConnSide::new(&dev, located.port, SQ_DEPTH, RQ_DEPTH)
        .map_err(|e| format!("setup_qp failed: {e}"))?;
    let rp = Rping::new(&side, a.size, abort)?;
    let start = Region::new(
        &side,
        a.size,
        WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_READ | WV_ACCESS_REMOTE_WRITE,
    )?;
    rp.post_recv()?;
    // The server listens before the REQ leaves (rping is started on the server first).
    ready
        .recv_timeout(STEP_GUARD)
        .map_err(|_| "the server never listened".to_string())?;
    let param = rdma_cm_param(&[]);
    let connect = ep
        .connect(&side.qp, plan.server_addr, &param)
        .map_err(|e| format!("rdma_connect: {e}"))?;
    wait_step(&connect, abort)?.map_err(|e| format!("rdma_connect: {e}"))?;
    let established = ep
        .accept(&side.qp, &param)
        .map_err(|e| format!("rdma_connect: {e}"))?;
    wait_step(&established, abort)?.map_err(|e| format!("rdma_connect: {e}"))?;
    debug(a, format_args!("rdma_connect successful"));

    let mut ping = 0u64;
    while a.count == 0 || ping < a.count {
        let data = ping_data(ping, a.size);
        start.buf.write(0, &data).map_err(|e| e.to_string())?;
        rp.send
            .buf
            .write(0, &start.info(a.size))
            .map_err(|e| e.to_string())?;
        rp.post_send()?;
        if rp.next(|| false)? != Some(WcOpcode::Recv) {
            return Err("wait for RDMA_WRITE_ADV".into());
        }
        rp.send
            .buf
            .write(0, &rp.rdma.info(a.size))
            .map_err(|e| e.to_string())?;
        rp.post_send()?;
        if rp.next(|| false)? != Some(WcOpcode::Recv) {
            return Err("wait for RDMA_WRITE_COMPLETE".into());
        }
        if rp.rdma.buf.to_vec() != data {
            return Err("data mismatch!".into());
        }
        say(
            prints && a.verbose > 0,
            format_args!("ping data: {}", c_string(&rp.rdma.buf)),
        );
        ping += 1;
    }
    let bye = ep
        .disconnect(Some(&side.qp))
        .map_err(|e| format!("rdma_disconnect: {e}"))?;
    wait_step(&bye, abort)?.map_err(|e| format!("rdma_disconnect: {e}"))?;
    if prints {
        eprintln!("client DISCONNECT EVENT...");
    }
    Ok(())
}

/// Waits for a connection step, with the hang guard and the other side's abort.
fn wait_step<T>(
    p: &wv_client::verbs::Pending<T>,
    abort: &AtomicBool,
) -> Result<wv_client::verbs::Result<T>, String> {
    let step = Duration::from_millis(10);
    let mut waited = Duration::ZERO;
    loop {
        if let Some(r) = p.wait_timeout(step) {
            return Ok(r);
        }
        if abort.load(Ordering::Relaxed) {
            return Err("the other side failed".into());
        }
        waited += step;
        if waited > STEP_GUARD {
            return Err(format!(
                "{} did not complete in {} s",
                p.op(),
                STEP_GUARD.as_secs()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_data_is_rpings() {
        let d = ping_data(0, 64);
        assert_eq!(d.len(), 64);
        assert_eq!(
            std::str::from_utf8(&d[..63]).unwrap(),
            "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"
        );
        assert_eq!(d[63], 0);
        // Each ping starts one letter later.
        assert!(ping_data(1, 64).starts_with(b"rdma-ping-1: BCD"));
        // Past 'z' the letters start again at 'A'.
        let long = ping_data(0, 200);
        assert_eq!(long[13 + 58], b'A');
        assert_eq!(MIN_SIZE, 26);
    }
}
