//! `wvd`: the WinVerbs device service.
//!
//! On Windows every process reaches the one `winverbs.sys` through `\\.\WinVerbs`. Here that
//! role is a service: `wvd` hosts the driver stack (the WinVerbs driver core on the host model
//! of KMDF above soft HCAs joined on one fabric) and serves every process of the machine over a
//! Unix socket, one connection per file handle. `libibverbs.so.1` uses it when it runs (or when
//! told to, starting it on first use), so two processes — `ibv_rc_pingpong`'s server and
//! client, perftest's two sides — share one fabric.
//!
//! ```text
//! wvd [--socket PATH] [--devices N] [--ports N] [--link-layer ethernet|ib] [--identity N]
//!     [--allow-uid UID]... [--allow-any-user] [--idle-exit SECS] [--background]
//! ```
//!
//! Modules: [`server`] (the socket, who may connect), [`conn`] (a connection: a file handle,
//! its requests, its close), [`arena`] (the memory shared with a client: rings and doorbells),
//! [`host`] (the hosted stack, behind a small seam).

mod arena;
mod conn;
mod host;
mod server;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use wv_inproc::LinkLayer;

/// The link layer of the soft HCAs' ports.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Link {
    /// RoCE (Ethernet ports, GIDs from MACs and IP addresses).
    Ethernet,
    /// InfiniBand (LIDs).
    Ib,
}

/// The WinVerbs device service: the driver stack for every process of this machine.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The socket to listen on (default: $WVD_SOCKET, else $XDG_RUNTIME_DIR/wvd/socket, else
    /// /tmp/wvd-<uid>/socket).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Soft HCAs on the fabric.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=16))]
    devices: u16,
    /// Ports per soft HCA (1 or 2).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    ports: u8,
    /// The ports' link layer.
    #[arg(long, value_enum, default_value_t = Link::Ethernet)]
    link_layer: Link,
    /// Mixed into the devices' MACs, node GUIDs and GIDs.
    #[arg(long, default_value_t = 0)]
    identity: u16,
    /// Also admit this user (repeatable); the socket then becomes 0666 and its directory
    /// 0711. The service reaches client memory through process_vm_readv/writev, which needs
    /// the service to be allowed to trace that user's processes (root, or CAP_SYS_PTRACE).
    #[arg(long = "allow-uid")]
    allow_uid: Vec<u32>,
    /// Admit every user (same conditions as --allow-uid).
    #[arg(long)]
    allow_any_user: bool,
    /// Exit after this many seconds without clients (default: run until killed).
    #[arg(long)]
    idle_exit: Option<u64>,
    /// Detach: return once the service listens, leaving it running in its own process group
    /// (what the library does to start the service on first use). Its messages go to
    /// <socket>.log.
    #[arg(long)]
    background: bool,
    /// Microseconds a doorbell thread keeps polling after work before it sleeps.
    #[arg(long, default_value_t = 200)]
    spin_us: u64,
    /// MiB of shared memory per connection (rings of its CQs, QPs and SRQs).
    #[arg(long, default_value_t = 256)]
    shared_mib: u64,
    /// PASSIVE_LEVEL worker threads of the hosted platform.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Internal: the process --background started, which reports readiness on stdout.
    #[arg(long, hide = true)]
    detached: bool,
    /// Ask the running service what it holds (connections, shared memory, the driver's
    /// handles and requests, the soft HCAs' objects), print it and exit. The counts include
    /// this connection's own handle (1 driver file, 1 shared memory).
    #[arg(long, conflicts_with_all = ["stop", "background"])]
    stats: bool,
    /// Stop the running service: it closes every handle's objects, unloads the driver and
    /// reports its verifier's findings, printed here (exit status 1 if there are any).
    #[arg(long, conflicts_with = "background")]
    stop: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let socket = args
        .socket
        .clone()
        .unwrap_or_else(wv_client::service::default_socket_path);
    if args.background {
        return background(&socket);
    }
    if args.stats || args.stop {
        return ask(&socket, args.stop);
    }
    let policy = server::Policy {
        socket: socket.clone(),
        allow_uids: args.allow_uid.clone(),
        allow_any: args.allow_any_user,
        idle_exit: args.idle_exit.map(Duration::from_secs),
    };
    let listening = match server::listen(policy) {
        Ok(Some(l)) => l,
        Ok(None) => {
            eprintln!(
                "wvd: another service already listens on {}",
                socket.display()
            );
            // Started on first use by two clients at once: the other one serves both.
            if args.detached {
                println!("ready");
            }
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("wvd: cannot listen on {}: {e}", socket.display());
            return ExitCode::FAILURE;
        }
    };
    let host = host::Host::new(host::HostConfig {
        devices: usize::from(args.devices),
        ports: args.ports,
        link_layer: match args.link_layer {
            Link::Ethernet => LinkLayer::Ethernet,
            Link::Ib => LinkLayer::InfiniBand,
        },
        identity: args.identity,
        workers: args.workers.max(1),
    });
    let shared = Arc::new(conn::Shared {
        host,
        shared_bytes: args.shared_mib.clamp(1, 1 << 16) << 20,
        spin: Duration::from_micros(args.spin_us),
        owner_uid: wv_client::service::os::euid(),
        stopping: AtomicBool::new(false),
        live: std::sync::Mutex::new(Vec::new()),
    });
    let detached = args.detached;
    let ready = move || {
        eprintln!(
            "wvd: pid {} listening on {} ({} soft HCAs)",
            std::process::id(),
            socket.display(),
            args.devices
        );
        if detached {
            println!("ready");
            let _ = std::io::stdout().flush();
        }
    };
    match listening.serve(shared, ready) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wvd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--stats` / `--stop`: asks the running service.
fn ask(socket: &std::path::Path, stop: bool) -> ExitCode {
    use wv_client::service::proto::{Admin, AdminReply};
    let file = match wv_client::service::File::connect(socket) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("wvd: no service on {}: {e}", socket.display());
            return ExitCode::FAILURE;
        }
    };
    let question = if stop { Admin::Unload } else { Admin::Stats };
    match file.admin(&question) {
        Ok(AdminReply::Counts(c)) => {
            for (name, n) in c {
                println!("{name}: {n}");
            }
            ExitCode::SUCCESS
        }
        Ok(AdminReply::Lines(l)) if l.is_empty() => {
            println!("wvd: stopped; the verifier found nothing");
            ExitCode::SUCCESS
        }
        Ok(AdminReply::Lines(l)) => {
            for line in l {
                println!("{line}");
            }
            ExitCode::FAILURE
        }
        Ok(other) => {
            eprintln!("wvd: unexpected answer {other:?}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("wvd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Starts this program again, detached, and returns once it listens (it says "ready" on its
/// standard output) or has failed.
fn background(socket: &std::path::Path) -> ExitCode {
    let Ok(me) = std::env::current_exe() else {
        eprintln!("wvd: cannot find this program to start it in the background");
        return ExitCode::FAILURE;
    };
    let args: Vec<_> = std::env::args_os()
        .skip(1)
        .filter(|a| a != "--background")
        .collect();
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::DirBuilder::new().recursive(true).create(dir);
    }
    let log_path = PathBuf::from(format!("{}.log", socket.display()));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path);
    let mut cmd = Command::new(me);
    cmd.args(args)
        .arg("--detached")
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    if let Ok(log) = log {
        cmd.stderr(log);
    }
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("wvd: cannot start the service: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    if line.trim() == "ready" {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "wvd: the service did not start (see {})",
            log_path.display()
        );
        ExitCode::FAILURE
    }
}
