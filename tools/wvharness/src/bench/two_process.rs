//! The device service's rows: perftest's own binaries (Debian's `ib_send_lat` and
//! `ib_write_bw`) between two processes through `wvd`, on this build's `libibverbs.so.1`,
//! in rounds alternating with the in-process send_lat and memcpy; and the copy the service makes
//! between two client processes (`process_vm_readv` + `process_vm_writev` through a bounce
//! buffer), timed alone, as the limit its bandwidth runs into.
//!
//! The library and the service are the ones `tools/ibverbs/build --release` installs
//! (`target/release/wv-ibverbs/`, or `$WV_IBVERBS_DIR`). Nothing is pinned: the service's
//! doorbell threads need processors as much as the two tools do.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wv_softhca::dma::Client;

use super::rounds::{Round, Stat, alternate, median};
use super::{BenchRow, Goal};
use crate::baseline::Measured;

/// Where the library and `wvd` are.
fn library_dir() -> Result<PathBuf, String> {
    let dir = match std::env::var_os("WV_IBVERBS_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .parent()
            .ok_or("no directory for this program")?
            .join("wv-ibverbs"),
    };
    for f in ["libibverbs.so.1", "wvd"] {
        if !dir.join(f).is_file() {
            return Err(format!(
                "{} not found: build it with tools/ibverbs/build --release (or name its \
                 directory with WV_IBVERBS_DIR)",
                dir.join(f).display()
            ));
        }
    }
    Ok(dir)
}

/// A `wvd` on a private socket, stopped on drop.
struct Service {
    child: std::process::Child,
    dir: PathBuf,
    socket: PathBuf,
}

impl Service {
    fn start(lib: &Path) -> Result<Service, String> {
        let dir = std::env::temp_dir().join(format!("wvharness-wvd-{}", std::process::id()));
        let socket = dir.join("socket");
        let child = Command::new(lib.join("wvd"))
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("wvd: {e}"))?;
        let svc = Service { child, dir, socket };
        let start = Instant::now();
        while !svc.socket.exists() {
            if start.elapsed() > Duration::from_secs(10) {
                return Err("wvd never listened".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(svc)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `tool args` as server and client through the service; the client's output.
fn pair(
    lib: &Path,
    svc: &Service,
    tool: &str,
    args: &[String],
    port: u16,
) -> Result<String, String> {
    let run = |client: bool| {
        let mut c = Command::new(tool);
        c.args(args)
            .args(["-p", &port.to_string()])
            .env("LD_LIBRARY_PATH", lib)
            .env("WVD_SOCKET", &svc.socket)
            .env("WV_IBVERBS_TRANSPORT", "service")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if client {
            c.arg("localhost");
        }
        c.spawn()
            .map_err(|e| format!("{tool}: {e} (apt-get install perftest)"))
    };
    let server = run(false)?;
    std::thread::sleep(Duration::from_millis(300));
    let client = run(true)?.wait_with_output().map_err(|e| e.to_string())?;
    let server = server.wait_with_output().map_err(|e| e.to_string())?;
    let out = String::from_utf8_lossy(&client.stdout).into_owned();
    if !client.status.success() || !server.status.success() {
        return Err(format!(
            "{tool} {}: client {}, server {}: {}",
            args.join(" "),
            client.status,
            server.status,
            String::from_utf8_lossy(&client.stderr)
        ));
    }
    Ok(out)
}

/// The numbers of the result line under perftest's `#bytes` header.
fn result_line(out: &str) -> Result<Vec<f64>, String> {
    let mut lines = out
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"));
    lines.next();
    let line = lines.next().ok_or("no result line")?;
    line.split_whitespace()
        .map(|w| {
            w.parse::<f64>()
                .map_err(|_| format!("result line {line:?}"))
        })
        .collect()
}

/// A process holding a buffer (this program's hidden `copy-target` command): its pid and
/// the buffer's address; it lives until dropped.
struct Target {
    child: std::process::Child,
    addr: u64,
}

impl Target {
    fn start(len: usize) -> Result<Target, String> {
        let mut child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
            .args(["copy-target", &len.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let mut line = String::new();
        let out = child.stdout.as_mut().ok_or("no stdout")?;
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line)
            .map_err(|e| e.to_string())?;
        let addr = line
            .trim()
            .parse()
            .map_err(|_| format!("copy-target said {line:?}"))?;
        Ok(Target { child, addr })
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The service's copy of `len` bytes between two other processes, per iteration (bytes/s).
fn service_copy(len: usize, iters: usize) -> Result<Measured, String> {
    let (a, b) = (Target::start(len)?, Target::start(len)?);
    let (ca, cb) = (
        Client::new(a.child.id() as i32, None),
        Client::new(b.child.id() as i32, None),
    );
    let copy = || {
        wv_softhca::dma::process::copy_between(&ca, a.addr, &cb, b.addr, len)
            .map_err(|e| format!("copy between two processes: {e:?}"))
    };
    for _ in 0..iters / 10 + 1 {
        copy()?;
    }
    let mut rates = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        copy()?;
        rates.push(len as f64 / t.elapsed().as_secs_f64());
    }
    Ok(Measured::new(rates))
}

/// What the two-process goal rows are compared with, one round at a time: the in-process
/// send_lat 2 B (t_typical and p99, ns) and memcpy of 64 KiB (GB/s).
pub struct Baselines<'a> {
    /// One round of the in-process send_lat 2 B.
    pub send_lat: &'a dyn Fn() -> Result<Stat, String>,
    /// One round of memcpy 64 KiB.
    pub memcpy: &'a dyn Fn() -> Stat,
}

/// The rows: Debian's ib_send_lat and ib_write_bw through the service in rounds alternating
/// with their in-process baselines, then the service's copies beside this run's limits
/// (`memcpy`: its memcpy 64 KiB, bytes/s).
pub fn rows(
    quick: bool,
    rounds: usize,
    base: &Baselines<'_>,
    memcpy: &Measured,
) -> Result<Vec<BenchRow>, String> {
    const GROUP: &str = "two processes (wvd)";
    let lib = library_dir()?;
    // The service runs only while a tool runs through it: its threads would otherwise share
    // the CPUs with the in-process baseline's rounds.
    let through_service = |tool: &str, args: &[String], port: u16| -> Result<String, String> {
        let svc = Service::start(&lib)?;
        pair(&lib, &svc, tool, args, port)
    };
    let lat_iters = if quick { 2_000 } else { 20_000 };
    let bw_iters = if quick { 2_000 } else { 20_000 };
    let mut rows = Vec::new();

    // Each round on a port of its own: the previous round's may still be in TIME_WAIT.
    let lat: Vec<Round> = alternate(
        rounds,
        |i| {
            let out = through_service(
                "ib_send_lat",
                &["-s".into(), "2".into(), "-n".into(), lat_iters.to_string()],
                18_901 + 2 * i as u16,
            )?;
            let r = result_line(&out)?;
            Ok(Stat {
                mid: r.get(4).copied().ok_or("t_typical")? * 1000.0,
                tail: r.get(7).map(|p| p * 1000.0),
            })
        },
        |_| (base.send_lat)(),
    )?
    .into_iter()
    .map(|(value, base)| Round { value, base })
    .collect();
    let send_lat = (
        median(&lat.iter().map(|r| r.base.mid).collect::<Vec<_>>()),
        lat.iter()
            .map(|r| r.base.tail)
            .collect::<Option<Vec<_>>>()
            .map(|t| median(&t)),
    );
    rows.push(
        BenchRow::from_rounds(
            GROUP,
            "ib_send_lat 2 B between two processes through wvd (t_typical)",
            "ns",
            "send_lat 2 B in one process (t_typical)",
            &lat,
            Some(Goal::AtMost(2.0)),
        )
        .with_note(format!(
            "Debian's ib_send_lat, {lat_iters} iterations a round, unpinned"
        )),
    );

    let bw: Vec<Round> = alternate(
        rounds,
        |i| {
            let out = through_service(
                "ib_write_bw",
                &[
                    "-s".into(),
                    "65536".into(),
                    "-n".into(),
                    bw_iters.to_string(),
                ],
                18_902 + 2 * i as u16,
            )?;
            let r = result_line(&out)?;
            Ok(Stat::plain(
                r.get(3).copied().ok_or("BW average")? * 1_048_576.0 / 1e9,
            ))
        },
        |_| Ok((base.memcpy)()),
    )?
    .into_iter()
    .map(|(value, base)| Round { value, base })
    .collect();
    rows.push(
        BenchRow::from_rounds(
            GROUP,
            "ib_write_bw 64 KiB between two processes through wvd (BW average)",
            "GB/s",
            "memcpy 64 KiB",
            &bw,
            Some(Goal::AtLeast(0.5)),
        )
        .with_note(format!(
            "Debian's ib_write_bw, {bw_iters} iterations a round, unpinned"
        )),
    );

    // What the service pays per message for the bytes alone: a 2-byte copy between two
    // client processes is two system calls.
    let small = service_copy(2, if quick { 5_000 } else { 50_000 })?;
    let per_copy = Measured::new(small.samples.iter().map(|r| 2.0 / r * 1e9).collect());
    rows.push(
        BenchRow::new(
            GROUP,
            "the service's copy of 2 B between two client processes (process_vm_readv + process_vm_writev)",
            per_copy.median(),
            Some(per_copy.p99()),
            "ns",
            "send_lat 2 B in one process (t_typical)",
            send_lat,
            None,
        )
        .with_note("per copy: the bytes of one 2-byte send, without the rest of the service"),
    );
    let copy = service_copy(64 << 10, if quick { 2_000 } else { 20_000 })?;
    rows.push(
        BenchRow::new(
            GROUP,
            "the service's copy of 64 KiB between two client processes (process_vm_readv + process_vm_writev)",
            copy.median() * 1e-9,
            Some(copy.p1() * 1e-9),
            "GB/s",
            "memcpy 64 KiB",
            (memcpy.median() * 1e-9, Some(memcpy.p1() * 1e-9)),
            None,
        )
        .with_note("the bytes of one RDMA write of 64 KiB, without the rest of the service"),
    );
    Ok(rows)
}

/// The hidden `copy-target LEN` command: holds a buffer of `LEN` bytes, prints its address
/// and waits until its standard input closes.
pub fn copy_target(len: usize) {
    let buf = vec![0x5au8; len.max(1)];
    println!("{}", buf.as_ptr() as u64);
    let mut sink = String::new();
    let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut sink);
    drop(buf);
}
