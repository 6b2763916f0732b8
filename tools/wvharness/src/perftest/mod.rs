//! perftest-compatible benchmarks: `send_lat`, `write_lat`, `read_lat`, `send_bw`, `write_bw`,
//! `read_bw`.
//!
//! Options, defaults, loops, header block, column text and math follow linux-rdma/perftest
//! (`perftest_parameters.[ch]`, `perftest_resources.c`), so the output of `wvharness send_lat`
//! parses like `ib_send_lat`'s. perftest runs a server and a client connected over TCP; here
//! both sides run in this process, as two threads, each with its own open file on the driver
//! (as two processes would have) and its own device, and they exchange their addresses through
//! a channel instead of a socket.

pub mod report;

pub(crate) mod cqe_poll;
pub(crate) mod endpoint;
mod read;
pub(crate) mod send;
mod write;

use std::time::Duration;

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::target::TargetArgs;
use endpoint::DataPath;
use report::{BwUnits, RttFactor};

pub use endpoint::{Measurement, measure, measure_sizes, run_test};

/// The six tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// `ib_send_lat`.
    SendLat,
    /// `ib_write_lat`.
    WriteLat,
    /// `ib_read_lat`.
    ReadLat,
    /// `ib_send_bw`.
    SendBw,
    /// `ib_write_bw`.
    WriteBw,
    /// `ib_read_bw`.
    ReadBw,
}

/// The operation a test measures (perftest's `VerbType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Send / receive.
    Send,
    /// RDMA write.
    Write,
    /// RDMA read.
    Read,
}

impl Test {
    /// The command name (`send_lat`, …).
    pub fn name(self) -> &'static str {
        match self {
            Test::SendLat => "send_lat",
            Test::WriteLat => "write_lat",
            Test::ReadLat => "read_lat",
            Test::SendBw => "send_bw",
            Test::WriteBw => "write_bw",
            Test::ReadBw => "read_bw",
        }
    }

    /// The verb it measures.
    pub fn verb(self) -> Verb {
        match self {
            Test::SendLat | Test::SendBw => Verb::Send,
            Test::WriteLat | Test::WriteBw => Verb::Write,
            Test::ReadLat | Test::ReadBw => Verb::Read,
        }
    }

    /// Latency (true) or bandwidth test.
    pub fn is_latency(self) -> bool {
        matches!(self, Test::SendLat | Test::WriteLat | Test::ReadLat)
    }

    /// perftest's verb string in the header ("Send", "RDMA_Write", "RDMA_Read").
    fn verb_str(self) -> &'static str {
        match self.verb() {
            Verb::Send => "Send",
            Verb::Write => "RDMA_Write",
            Verb::Read => "RDMA_Read",
        }
    }

    /// Send and write latency report half a round trip; read latency the whole operation.
    fn rtt(self) -> RttFactor {
        if self.verb() == Verb::Read {
            RttFactor::Whole
        } else {
            RttFactor::HalfRoundTrip
        }
    }
}

/// perftest's connection types that apply here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Serialize)]
#[value(rename_all = "UPPER")]
pub enum Connection {
    /// Reliable connected.
    #[default]
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram (send tests only).
    Ud,
}

impl Connection {
    /// "RC", "UC" or "UD".
    pub fn as_str(self) -> &'static str {
        match self {
            Connection::Rc => "RC",
            Connection::Uc => "UC",
            Connection::Ud => "UD",
        }
    }
}

/// perftest's `MAX_SIZE`: `-a` runs sizes 2 … 2^23.
pub const MAX_SIZE: u64 = 8 << 20;
/// perftest's `MIN_ITER`.
const MIN_ITER: u64 = 5;
/// perftest's `DEF_CQ_MOD`.
const DEF_CQ_MOD: u32 = 100;
/// perftest's `MSG_SIZE_CQ_MOD_LIMIT`: above it CQ moderation is disabled (unless asked for).
const MSG_SIZE_CQ_MOD_LIMIT: u64 = 8192;
/// perftest's `DEF_RX_SEND`.
const DEF_RX_SEND: u32 = 512;
/// The soft HCA's largest inline payload (`wv_softhca::engine::MAX_INLINE`); perftest's own
/// limit is `MAX_INLINE` 1024, but a device's limit wins (`ctx_set_max_inline`).
const MAX_INLINE: u32 = 256;
/// perftest's `MAX_INLINE_UD`-style bound for UD: the GRH takes 40 of the device's bytes.
const MAX_INLINE_UD: u32 = MAX_INLINE - 40;
/// Bytes moved per size in a `--fast_sweep` sweep: iterations for large messages are scaled
/// down to this, so that a whole sweep takes seconds (a plain `-a` keeps `-n` for every size, as
/// perftest does, which on a software device takes minutes for the 8 MiB messages).
const SWEEP_BYTES_PER_SIZE: u64 = 64 << 20;
/// perftest's notice when it turns the peak-bandwidth calculation off by itself
/// (`force_dependecies` in `perftest_parameters.c`).
pub const PEAK_WARNING: &str = " WARNING: BW peak won't be measured in this run.";
/// perftest's refusals of duration mode with `-e` and `-a`: it prints them after
/// [`PEAK_WARNING`], in the same check.
const DURATION_REFUSALS: [&str; 2] = [
    "Duration mode doesn't work with events.",
    "Duration mode currently doesn't support running on all sizes.",
];

/// perftest's largest iteration count for which a bandwidth test still computes its peak.
const PEAK_MAX_ITERS: u64 = 20_000;

/// Whether perftest prints [`PEAK_WARNING`] while checking duration mode: a bandwidth test in
/// duration mode whose peak `-N` did not already cancel.
fn warns_peak(test: Test, a: &PerftestArgs) -> bool {
    !test.is_latency() && a.duration.is_some() && !a.no_peak
}

/// Whether perftest cancels the peak of an iteration run itself (and prints [`PEAK_WARNING`]):
/// a bandwidth test of more than [`PEAK_MAX_ITERS`] iterations, in its last checks.
fn too_many_iters_for_peak(test: Test, a: &PerftestArgs, iters: u64) -> bool {
    !test.is_latency() && a.duration.is_none() && !a.no_peak && iters > PEAK_MAX_ITERS
}

/// Whether perftest printed [`PEAK_WARNING`] before refusing these options with `error`:
/// only the refusals made in its duration-mode check come after the warning.
pub fn warned_before(test: Test, a: &PerftestArgs, error: &str) -> bool {
    warns_peak(test, a) && DURATION_REFUSALS.contains(&error)
}

/// Options shared by the six tests (perftest's names and defaults).
#[derive(Args, Clone, Debug, Default)]
pub struct PerftestArgs {
    /// Size of message to exchange (default 2 for latency tests, 65536 for bandwidth tests).
    #[arg(short = 's', long = "size")]
    pub size: Option<u64>,
    /// Number of exchanges (at least 5; default 1000, 5000 for write_bw).
    #[arg(short = 'n', long = "iters")]
    pub iters: Option<u64>,
    /// Run sizes from 2 till 2^23 (8 MiB), powers of two, each with the `-n` iterations.
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// With `-a`: run fewer iterations for large sizes (at most 64 MiB moved per size, never
    /// fewer than 5 iterations), so a whole sweep takes seconds on the software device. Not a
    /// perftest option; off by default.
    #[arg(long = "fast_sweep", requires = "all")]
    pub fast_sweep: bool,
    /// Sleep on CQ events (default poll). Not available for write tests.
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// Connection type RC, UC or UD (UD only for send tests, UC not for read tests).
    #[arg(short = 'c', long = "connection", value_enum, default_value_t = Connection::Rc, ignore_case = true)]
    pub connection: Connection,
    /// Size of the send queue (default 1 for latency tests, 128 for bandwidth tests).
    #[arg(short = 't', long = "tx-depth")]
    pub tx_depth: Option<u32>,
    /// Receive queue depth for send tests (default 512).
    #[arg(short = 'r', long = "rx-depth")]
    pub rx_depth: Option<u32>,
    /// Max size of message to be sent inline (latency tests: 220 write, 236 send RC/UC, 188
    /// send UD; bandwidth tests 0).
    #[arg(short = 'I', long = "inline_size")]
    pub inline_size: Option<u32>,
    /// Run the test for a customized period of seconds (instead of -n).
    #[arg(short = 'D', long = "duration")]
    pub duration: Option<u64>,
    /// Generate a completion only every N sends (bandwidth tests; default 100).
    #[arg(short = 'Q', long = "cq-mod")]
    pub cq_mod: Option<u32>,
    /// Report Max/Average BW in Gbit/sec (instead of MiB/sec): MiB = 2^20 bytes, Gb = 10^9
    /// bits.
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Cancel the peak-bandwidth calculation (it is also off in duration mode and beyond 20000
    /// iterations).
    #[arg(short = 'N', long = "noPeak")]
    pub no_peak: bool,
    /// Number of outstanding read/atomic requests (read tests; default: the device's
    /// max_qp_rd_atom).
    #[arg(short = 'o', long = "outs")]
    pub outs: Option<u32>,
    /// Completions a bandwidth test polls at once (1..65535; default 16, or perftest's dynamic
    /// batch where it applies). Turns dynamic polling off.
    #[arg(long = "cqe_poll", value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub cqe_poll: Option<u16>,
    /// Poll a fixed batch even where perftest would adapt it (bandwidth runs of 3000
    /// iterations or more, duration runs).
    #[arg(long = "disable_dynamic_polling")]
    pub disable_dynamic_polling: bool,
    /// Save the report in a JSON file, in perftest's schema (see --out_json_file).
    #[arg(long = "out_json")]
    pub out_json: bool,
    /// Name of the report JSON file (default perftest_out.json in the working directory).
    #[arg(long = "out_json_file", value_name = "FILE")]
    pub out_json_file: Option<std::path::PathBuf>,
    /// Print the results as JSON (same numbers) instead of perftest's text.
    #[arg(long)]
    pub json: bool,
    /// Pin the server and client threads to these CPUs (`SERVER,CLIENT`, like running each
    /// side under `taskset`). Latency depends on whether a wake-up crosses CPUs, so
    /// comparisons pin the benchmark and its baseline the same way.
    #[arg(long, value_name = "SERVER,CLIENT", value_parser = parse_cpus)]
    pub cpus: Option<(usize, usize)>,
    /// Which driver and device to run on.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// The parameters of one run after perftest's defaults and dependencies are applied.
#[derive(Clone, Debug)]
pub struct Params {
    /// The test.
    pub test: Test,
    /// Message sizes to run, with the iterations for each.
    pub sizes: Vec<(u64, u64)>,
    /// Send queue depth.
    pub tx_depth: u32,
    /// Receive queue depth (send tests).
    pub rx_depth: u32,
    /// Inline threshold.
    pub inline_size: u32,
    /// Signal every `cq_mod`-th send (bandwidth tests).
    pub cq_mod: u32,
    /// Wait on CQ events.
    pub events: bool,
    /// Transport.
    pub connection: Connection,
    /// Duration mode: total time (the first and last quarter are warm-up and cool-down).
    pub duration: Option<Duration>,
    /// Units.
    pub units: BwUnits,
    /// Compute the peak bandwidth.
    pub peak: bool,
    /// CPUs the server and client threads are pinned to.
    pub cpus: Option<(usize, usize)>,
    /// Reads and atomics in flight (`-o`; 0 until the device's max_qp_rd_atom is known):
    /// perftest's `out_reads`, 1 for the tests that issue none.
    pub out_reads: u32,
    /// Where `--out_json` writes perftest's report.
    pub out_json: Option<std::path::PathBuf>,
    /// The fixed CQE poll batch of the bandwidth loops (`--cqe_poll`).
    pub cqe_poll: u16,
    /// Whether the bandwidth loops start with perftest's dynamic poll batch.
    pub dynamic_cqe_poll: bool,
    /// Whether perftest prints `Disabling dynamic polling` for these options.
    pub disabling_notice: bool,
    /// Whether perftest prints [`PEAK_WARNING`]: a bandwidth test in duration mode, or of more
    /// than 20000 iterations, whose peak was not already cancelled with `-N`.
    pub peak_warning: bool,
}

impl Params {
    /// The largest message size of the run (buffers are allocated for it once).
    pub fn max_size(&self) -> u64 {
        self.sizes.iter().map(|&(s, _)| s).max().unwrap_or(1)
    }
}

/// Parses `--cpus SERVER,CLIENT`.
fn parse_cpus(s: &str) -> Result<(usize, usize), String> {
    let (server, client) = s
        .split_once(',')
        .ok_or_else(|| format!("--cpus wants SERVER,CLIENT (two CPU numbers), not {s:?}"))?;
    let cpu = |v: &str| {
        v.trim()
            .parse::<usize>()
            .map_err(|_| format!("--cpus: {v:?} is not a CPU number"))
    };
    Ok((cpu(server)?, cpu(client)?))
}

/// Pins the calling thread to `cpu`.
///
/// # Errors
/// The CPU does not exist or the system refused.
pub fn pin_to(cpu: usize) -> Result<(), String> {
    // Not checked against `get_core_ids`: that lists the calling thread's current affinity,
    // which excludes every other CPU once the thread is pinned.
    if core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
        Ok(())
    } else {
        Err(format!(
            "--cpus: could not pin a thread to CPU {cpu} (no such CPU, or not allowed)"
        ))
    }
}

/// Applies perftest's defaults, limits and dependencies; the error is the message perftest
/// prints for the same mistake, where it has one.
/// `ud_mtu` is the port's active MTU in bytes, which bounds a UD message (perftest sizes UD
/// messages at most one MTU, the one its header prints).
pub fn params(test: Test, a: &PerftestArgs, ud_mtu: u64) -> Result<Params, String> {
    let verb = test.verb();
    if a.connection == Connection::Ud && verb != Verb::Send {
        return Err("UD connection only possible in SEND verb".into());
    }
    if a.connection == Connection::Uc && verb == Verb::Read {
        return Err("UC connection not possible in READ/ATOMIC verbs".into());
    }
    if a.events && verb == Verb::Write {
        return Err("Events feature not available on WRITE verb".into());
    }
    if a.duration.is_some() && a.events {
        return Err(DURATION_REFUSALS[0].into());
    }
    if a.duration.is_some() && a.all {
        return Err(DURATION_REFUSALS[1].into());
    }
    if a.duration == Some(0) {
        return Err("duration must be at least 1 second".into());
    }
    if a.rx_depth.is_some() && verb != Verb::Send {
        return Err("-r/--rx-depth applies to send tests only".into());
    }
    let default_size = if test.is_latency() { 2 } else { 65536 };
    let size = a.size.unwrap_or(default_size);
    if a.size.is_some() && a.all {
        return Err("-s and -a are exclusive: -a runs every size from 2 to 8388608".into());
    }
    if size == 0 || size > MAX_SIZE {
        return Err(format!(
            "Size must be between 1 and {MAX_SIZE} bytes (got {size})"
        ));
    }
    let default_iters = if test == Test::WriteBw { 5000 } else { 1000 };
    let iters = a.iters.unwrap_or(default_iters);
    if iters < MIN_ITER {
        return Err(format!(
            "Number of exchanges must be at least {MIN_ITER} (got {iters})"
        ));
    }
    let mut tx_depth = a
        .tx_depth
        .unwrap_or(if test.is_latency() { 1 } else { 128 });
    if tx_depth == 0 {
        return Err("tx depth must be at least 1".into());
    }
    // A latency test keeps one message in flight whatever -t says (perftest ignores it there).
    if a.duration.is_none() && u64::from(tx_depth) > iters {
        tx_depth = iters as u32;
    }
    // Unreliable transports drop a message that finds no receive, so perftest posts one per
    // message up front (up to UC_MAX_RX) unless -r says otherwise.
    let mut rx_depth = a.rx_depth.unwrap_or(if a.connection == Connection::Rc {
        DEF_RX_SEND
    } else {
        iters.min(16_000) as u32
    });
    if rx_depth == 0 {
        return Err("rx depth must be at least 1".into());
    }
    if a.duration.is_none() && u64::from(rx_depth) > iters {
        rx_depth = iters as u32;
    }
    let inline_default = if !test.is_latency() {
        0
    } else {
        match (verb, a.connection) {
            (Verb::Write, _) => 220,
            (Verb::Send, Connection::Ud) => 188,
            (Verb::Send, _) => 236,
            (Verb::Read, _) => 0,
        }
    };
    // Reads carry no payload in the request (perftest forces 0).
    let inline_size = if verb == Verb::Read {
        0
    } else {
        a.inline_size.unwrap_or(inline_default)
    };
    let inline_max = if a.connection == Connection::Ud {
        MAX_INLINE_UD
    } else {
        MAX_INLINE
    };
    if inline_size > inline_max {
        return Err(format!(
            "inline size {inline_size} is above this device's limit of {inline_max} bytes"
        ));
    }
    let mut cq_mod = a.cq_mod.unwrap_or(DEF_CQ_MOD);
    if !(1..=1024).contains(&cq_mod) {
        return Err("CQ moderation must be between 1 and 1024".into());
    }
    // perftest disables moderation for large messages, which need no batching, except for UD,
    // -a and events.
    if a.cq_mod.is_none()
        && size > MSG_SIZE_CQ_MOD_LIMIT
        && a.connection != Connection::Ud
        && !a.all
        && !a.events
    {
        cq_mod = 1;
    }
    cq_mod = cq_mod.min(tx_depth);
    // perftest: --cqe_poll and --disable_dynamic_polling turn dynamic polling off while the
    // options are parsed; its dependencies then turn it off (and say so) for latency tests and
    // short iteration runs.
    let disabling_notice = cqe_poll::disables_dynamic(test, iters, a.duration.is_some());
    let dynamic_cqe_poll = a.cqe_poll.is_none() && !a.disable_dynamic_polling && !disabling_notice;
    let sizes = if a.all {
        (1..=23)
            .map(|i| 1u64 << i)
            // UD messages are at most one MTU (perftest stops the sweep there too).
            .filter(|&s| a.connection != Connection::Ud || s <= ud_mtu)
            .map(|s| {
                let n = if a.fast_sweep {
                    fast_sweep_iters(iters, s)
                } else {
                    iters
                };
                (s, n)
            })
            .collect()
    } else {
        let size = if a.connection == Connection::Ud {
            size.min(ud_mtu)
        } else {
            size
        };
        vec![(size, iters)]
    };
    Ok(Params {
        test,
        sizes,
        tx_depth,
        rx_depth,
        inline_size,
        cq_mod,
        events: a.events,
        connection: a.connection,
        duration: a.duration.map(Duration::from_secs),
        units: if a.report_gbits {
            BwUnits::GbitPerSec
        } else {
            BwUnits::MibPerSec
        },
        // perftest turns the peak off in duration mode and beyond 20000 iterations.
        peak: !a.no_peak && a.duration.is_none() && !too_many_iters_for_peak(test, a, iters),
        cpus: a.cpus,
        out_reads: if verb == Verb::Read {
            a.outs.unwrap_or(0)
        } else {
            1
        },
        out_json: a.out_json.then(|| {
            a.out_json_file
                .clone()
                .unwrap_or_else(|| "perftest_out.json".into())
        }),
        cqe_poll: a.cqe_poll.unwrap_or(cqe_poll::CTX_POLL_BATCH),
        dynamic_cqe_poll,
        disabling_notice,
        peak_warning: warns_peak(test, a) || too_many_iters_for_peak(test, a, iters),
    })
}

/// Iterations for one size of a `--fast_sweep` sweep: `-n`, reduced for big messages so that
/// at most `SWEEP_BYTES_PER_SIZE` move per size.
fn fast_sweep_iters(iters: u64, size: u64) -> u64 {
    iters.min((SWEEP_BYTES_PER_SIZE / size).max(MIN_ITER))
}

/// RDMA write or read bandwidth (`opcode`): the client streams them; the server, whose CPU a
/// one-sided operation does not involve, only waits.
pub(crate) fn one_sided_bw<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    step: endpoint::Step<'_, endpoint::Side<F>>,
    opcode: wv_client::verbs::WrOpcode,
) -> Result<Samples, String> {
    let (side, role, p, run, sh) = step.parts();
    sh.sync.meet(&sh.abort)?;
    match role {
        endpoint::Role::Client => bw_client(side, p, run, sh, opcode),
        endpoint::Role::Server => Ok(Samples::default()),
    }
}

/// The sending side of every bandwidth test (perftest's `run_iter_bw`): keep `tx_depth`
/// requests outstanding, signal every `cq_mod`-th and the last, and timestamp each post and
/// each signalled completion (the completion of message `k` covers every message up to `k`).
pub(crate) fn bw_client<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    side: &endpoint::Side<F>,
    p: &Params,
    run: endpoint::Run,
    sh: &endpoint::Shared,
    opcode: wv_client::verbs::WrOpcode,
) -> Result<Samples, String> {
    let (mut window, iters) = endpoint::Window::for_run(p, run);
    let n = if window.is_some() {
        0
    } else {
        run.iters as usize
    };
    let (mut posted, mut completed) = (vec![0u64; n], vec![0u64; n]);
    let (tx, cq_mod) = (u64::from(p.tx_depth), u64::from(p.cq_mod));
    let mut wc =
        vec![wv_client::verbs::WorkCompletion::default(); usize::from(cqe_poll::DYNAMIC_MAX)];
    let mut batch = cqe_poll::CqePoll::new(p, run.iters, &side.dynamic_poll);
    let (mut scnt, mut ccnt) = (0u64, 0u64);
    let mut last_signaled = None;
    let mut stopping = false;
    while ccnt < scnt || (!stopping && scnt < iters) {
        while !stopping && scnt < iters && scnt - ccnt < tx {
            let signaled = scnt % cq_mod == cq_mod - 1 || scnt + 1 == iters;
            if let Some(slot) = posted.get_mut(scnt as usize) {
                *slot = sh.now();
            }
            side.post(scnt, opcode, run.size, signaled)?;
            if signaled {
                last_signaled = Some(scnt);
            }
            scnt += 1;
        }
        // Block only when nothing more may be posted; otherwise peek and keep posting.
        let must_wait = stopping || scnt == iters || scnt - ccnt >= tx;
        let got = if must_wait {
            if last_signaled.is_none_or(|l| l < ccnt) {
                // Only unsignalled requests are left (a stopped duration run): nothing to reap.
                break;
            }
            endpoint::poll_batch(
                &*side.send_cq,
                &mut wc,
                Some((&mut batch, ccnt)),
                p.events,
                sh,
                usize::MAX,
            )?
        } else {
            let n = side.send_cq.poll(&mut wc[..batch.batch()]);
            batch.observe(n, ccnt);
            n
        };
        let now = sh.now();
        for w in &wc[..got] {
            if w.status != wv_client::verbs::WcStatus::Success {
                return Err(format!(
                    "Completion with error: status {:?} for wr_id {}",
                    w.status, w.wr_id
                ));
            }
            ccnt = ccnt.max(w.wr_id + 1);
            if let Some(slot) = completed.get_mut(w.wr_id as usize) {
                *slot = now;
            }
        }
        if let Some(w) = &mut window
            && !stopping
            && !w.tick(ccnt)
        {
            stopping = true;
            // Nothing is owed for requests posted after the last signalled one.
            scnt = last_signaled.map_or(ccnt, |l| (l + 1).max(ccnt));
        }
    }
    Ok(Samples {
        posted,
        completed,
        window: window.and_then(|w| w.result()),
        switches: None,
    })
}

/// One result row, with the same numbers the text shows, for `--json`.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Row {
    /// A latency row.
    Latency {
        /// Message size.
        bytes: u64,
        /// Iterations.
        iterations: u64,
        /// µs.
        t_min: f64,
        /// µs.
        t_max: f64,
        /// µs (median).
        t_typical: f64,
        /// µs.
        t_avg: f64,
        /// µs.
        t_stdev: f64,
        /// µs.
        percentile_99: f64,
        /// µs.
        percentile_99_9: f64,
    },
    /// A duration-mode latency row.
    LatencyDuration {
        /// Message size.
        bytes: u64,
        /// Iterations in the sampling window.
        iterations: u64,
        /// µs.
        t_avg: f64,
        /// Transactions per second.
        tps_average: f64,
    },
    /// A bandwidth row.
    Bandwidth {
        /// Message size.
        bytes: u64,
        /// Messages.
        iterations: u64,
        /// In `units`.
        bw_peak: f64,
        /// In `units`.
        bw_average: f64,
        /// Million messages per second.
        msg_rate_mpps: f64,
        /// "MiB/sec" or "Gb/sec".
        units: &'static str,
    },
}

impl Row {
    fn from_lat(r: &report::LatencyRow) -> Row {
        Row::Latency {
            bytes: r.bytes,
            iterations: r.iterations,
            t_min: r.t_min,
            t_max: r.t_max,
            t_typical: r.t_typical,
            t_avg: r.t_avg,
            t_stdev: r.t_stdev,
            percentile_99: r.p99,
            percentile_99_9: r.p99_9,
        }
    }
    fn from_lat_dur(r: &report::LatencyDurationRow) -> Row {
        Row::LatencyDuration {
            bytes: r.bytes,
            iterations: r.iterations,
            t_avg: r.t_avg,
            tps_average: r.tps,
        }
    }
    fn from_bw(r: &report::BandwidthRow, units: BwUnits) -> Row {
        Row::Bandwidth {
            bytes: r.bytes,
            iterations: r.iterations,
            bw_peak: r.bw_peak,
            bw_average: r.bw_avg,
            msg_rate_mpps: r.msg_rate,
            units: match units {
                BwUnits::MibPerSec => "MiB/sec",
                BwUnits::GbitPerSec => "Gb/sec",
            },
        }
    }
}

/// What one side's loop measured for one size: post and completion times in nanoseconds since
/// a common origin, or a duration-mode count.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// Post time of each message (latency: each post of the measuring side).
    pub posted: Vec<u64>,
    /// Completion time of each message (bandwidth; only moderated indices are meaningful).
    pub completed: Vec<u64>,
    /// Duration mode: iterations completed in the sampling window and its length.
    pub window: Option<(u64, u64)>,
    /// Context switches of the whole process while the client ran this size (its receives
    /// posted, the start rendezvous and the loop), where `/proc` counts them.
    pub switches: Option<u64>,
}

/// Turns samples into a row, as perftest's `print_report_*` would.
pub fn row_for(p: &Params, size: u64, s: &Samples) -> Result<(String, Row), String> {
    if let Some((iters, ns)) = s.window {
        if p.test.is_latency() {
            let r = report::latency_duration_row(size, iters, ns, p.test.rtt());
            return Ok((
                report::format_latency_duration_row(&r),
                Row::from_lat_dur(&r),
            ));
        }
        // Bandwidth in duration mode: the average over the window, no peak.
        let r = report::BandwidthRow {
            bytes: size,
            iterations: iters,
            bw_peak: 0.0,
            bw_avg: size as f64 * iters as f64 * 1e9 / (ns.max(1) as f64 * units_factor(p.units)),
            msg_rate: iters as f64 * 1e9 / (ns.max(1) as f64 * 1e6),
        };
        return Ok((
            report::format_bandwidth_row_in(&r, p.units),
            Row::from_bw(&r, p.units),
        ));
    }
    if p.test.is_latency() {
        let r = report::latency_row(size, &s.posted, p.test.rtt())
            .ok_or_else(|| format!("too few samples for size {size}"))?;
        Ok((report::format_latency_row(&r), Row::from_lat(&r)))
    } else {
        let r = report::bandwidth_row_moderated(
            size,
            &s.posted,
            &s.completed,
            p.cq_mod as usize,
            p.units,
            p.peak,
        )
        .ok_or_else(|| format!("no samples for size {size}"))?;
        Ok((
            report::format_bandwidth_row_in(&r, p.units),
            Row::from_bw(&r, p.units),
        ))
    }
}

fn units_factor(u: BwUnits) -> f64 {
    match u {
        BwUnits::MibPerSec => 1_048_576.0,
        BwUnits::GbitPerSec => 125_000_000.0,
    }
}

/// The column header line for a run.
pub fn column_header(p: &Params) -> &'static str {
    match (p.test.is_latency(), p.duration.is_some()) {
        (true, false) => report::RESULT_FMT_LAT,
        (true, true) => report::RESULT_FMT_LAT_DUR,
        (false, _) => p.units.header(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> PerftestArgs {
        PerftestArgs::default()
    }

    #[test]
    fn defaults_follow_perftest() {
        let p = params(Test::SendLat, &args(), 4096).unwrap();
        assert_eq!(
            (p.sizes.clone(), p.tx_depth, p.inline_size),
            (vec![(2, 1000)], 1, 236)
        );
        let p = params(Test::WriteBw, &args(), 4096).unwrap();
        assert_eq!(
            (p.sizes.clone(), p.tx_depth, p.inline_size),
            (vec![(65536, 5000)], 128, 0)
        );
        assert_eq!(p.cq_mod, 1, "large messages disable moderation");
        let p = params(
            Test::SendBw,
            &PerftestArgs {
                size: Some(64),
                ..args()
            },
            4096,
        )
        .unwrap();
        assert_eq!(p.cq_mod, 100);
        let p = params(Test::WriteLat, &args(), 4096).unwrap();
        assert_eq!(p.inline_size, 220);
        let p = params(
            Test::SendLat,
            &PerftestArgs {
                connection: Connection::Ud,
                ..args()
            },
            4096,
        )
        .unwrap();
        assert_eq!(p.inline_size, 188);
        assert_eq!(params(Test::ReadLat, &args(), 4096).unwrap().inline_size, 0);
    }

    #[test]
    fn perftest_rejections() {
        let ud = PerftestArgs {
            connection: Connection::Ud,
            ..args()
        };
        assert_eq!(
            params(Test::WriteLat, &ud, 4096).unwrap_err(),
            "UD connection only possible in SEND verb"
        );
        let ev = PerftestArgs {
            events: true,
            ..args()
        };
        assert_eq!(
            params(Test::WriteBw, &ev, 4096).unwrap_err(),
            "Events feature not available on WRITE verb"
        );
        let uc = PerftestArgs {
            connection: Connection::Uc,
            ..args()
        };
        assert!(params(Test::ReadBw, &uc, 4096).is_err());
        assert!(
            params(
                Test::SendLat,
                &PerftestArgs {
                    size: Some(0),
                    ..args()
                },
                4096
            )
            .is_err()
        );
        assert!(
            params(
                Test::SendLat,
                &PerftestArgs {
                    iters: Some(4),
                    ..args()
                },
                4096
            )
            .is_err()
        );
    }

    #[test]
    fn sweep_covers_2_to_8_mib_with_the_n_iterations_for_every_size() {
        let all = PerftestArgs {
            all: true,
            ..args()
        };
        let p = params(Test::WriteBw, &all, 4096).unwrap();
        let sizes: Vec<u64> = p.sizes.iter().map(|s| s.0).collect();
        assert_eq!(sizes.first(), Some(&2));
        assert_eq!(sizes.last(), Some(&MAX_SIZE));
        assert_eq!(sizes.len(), 23);
        assert!(p.sizes.iter().all(|&(_, n)| n == 5000), "{:?}", p.sizes);
        let fast = PerftestArgs {
            fast_sweep: true,
            ..all
        };
        let p = params(Test::WriteBw, &fast, 4096).unwrap();
        assert_eq!(p.sizes.len(), 23);
        for &(s, n) in &p.sizes {
            assert!(n >= MIN_ITER && (s * n <= SWEEP_BYTES_PER_SIZE || n == MIN_ITER));
        }
        assert!(p.sizes.last().unwrap().1 < 5000, "--fast_sweep scales down");
        let ud = PerftestArgs {
            all: true,
            connection: Connection::Ud,
            ..args()
        };
        let p = params(Test::SendBw, &ud, 4096).unwrap();
        assert_eq!(p.sizes.last().unwrap().0, 4096, "UD stops at the port MTU");
    }

    #[test]
    fn duration_bandwidth_runs_warn_that_the_peak_is_off() {
        let d = |test, no_peak| {
            params(
                test,
                &PerftestArgs {
                    duration: Some(2),
                    no_peak,
                    ..args()
                },
                4096,
            )
            .unwrap()
        };
        let p = d(Test::WriteBw, false);
        assert!(p.peak_warning && !p.peak);
        assert!(
            !d(Test::WriteBw, true).peak_warning,
            "-N already cancelled it"
        );
        assert!(
            !d(Test::WriteLat, false).peak_warning,
            "latency tests have no peak"
        );
        assert!(!params(Test::WriteBw, &args(), 4096).unwrap().peak_warning);
        let n = |iters| PerftestArgs {
            iters: Some(iters),
            ..args()
        };
        let p = params(Test::SendBw, &n(20_001), 4096).unwrap();
        assert!(p.peak_warning && !p.peak, "beyond 20000 iterations");
        let p = params(Test::SendBw, &n(20_000), 4096).unwrap();
        assert!(!p.peak_warning && p.peak);
        assert!(
            !params(Test::SendLat, &n(20_001), 4096)
                .unwrap()
                .peak_warning
        );
    }
}
