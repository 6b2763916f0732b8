//! The default run (no command): the conformance suite with a progress bar, a short benchmark
//! summary, and a verdict.
//!
//! The verdict is about correctness only: it fails (and the exit status is non-zero) when a
//! check fails or a benchmark cannot run. Performance is reported, never judged here: every
//! number stands next to a baseline measured in the same run, as a ratio, beside the target the
//! design aims for, because on a shared 2-core machine absolute times drift more than
//! the differences that matter.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use wv_core::QpModifyMode;
use wv_inproc::StackConfig;

use crate::baseline;
use crate::conn::{ConnArgs, ConnResult, ConnTask};
use crate::perftest::{self, Connection, PerftestArgs, Row, Test};
use crate::progress::{Progress, run_parts};
use crate::qp_cycle::{ModifyTask, Overlap};
use crate::target::{Target, TargetArgs};

/// Options of the default run.
#[derive(Args, Clone, Debug, Default)]
pub struct SummaryArgs {
    /// A reduced workload (fewer iterations, shorter baselines), for smoke tests and debug
    /// builds. The numbers are noisier.
    #[arg(long)]
    pub quick: bool,
    /// Print the results as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Skip the conformance checks (benchmark summary only).
    #[arg(long)]
    pub no_check: bool,
    /// Which driver and device to run on.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// How much work each part does.
struct Workload {
    lat_iters: u64,
    event_iters: u64,
    bw_iters: u64,
    baseline_budget: Duration,
    /// CPUs the latency benchmarks and their baselines pin their two threads to (server or
    /// echo side, client or measuring side), so both wake-ups cross CPUs the same way; `None`
    /// on a one-CPU machine or where pinning is refused.
    cpus: Option<(usize, usize)>,
    modify_qps: usize,
    modify_rounds: usize,
    connections: u64,
}

impl Workload {
    fn new(quick: bool) -> Workload {
        // Two threads on two different CPUs: the placement of a client and a server on a real
        // system, and the same for the baselines.
        let cpus = baseline::bench_cpus();
        if quick {
            Workload {
                lat_iters: 2_000,
                event_iters: 500,
                bw_iters: 200,
                baseline_budget: Duration::from_millis(50),
                cpus,
                modify_qps: 8,
                modify_rounds: 2,
                connections: 100,
            }
        } else {
            Workload {
                lat_iters: 100_000,
                event_iters: 20_000,
                bw_iters: 20_000,
                baseline_budget: Duration::from_secs(1),
                cpus,
                modify_qps: 8,
                modify_rounds: 50,
                connections: 1000,
            }
        }
    }
}

/// One benchmark of the summary: its comparisons, or why it could not run.
type Part = fn(&SummaryArgs, &Workload) -> Result<Vec<Comparison>, String>;

/// One line of the summary: a measured number, its same-run baseline, their ratio and the
/// design target.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// What was measured.
    pub what: String,
    /// The measurement, in `unit`.
    pub value: f64,
    /// The baseline, in `unit`.
    pub baseline: f64,
    /// What the baseline is.
    pub baseline_what: String,
    /// The unit of both.
    pub unit: String,
    /// `value / baseline` (for a bandwidth, the fraction of the baseline reached).
    pub ratio: f64,
    /// The target, as text ("≤ 10×"), informational.
    pub target: String,
    /// Whether the ratio meets the target (informational: never fails the run).
    pub meets_target: Option<bool>,
}

/// Everything the default run found.
#[derive(Debug, Default, Serialize)]
struct Outcome {
    checks_passed: usize,
    checks_failed: usize,
    checks_skipped: usize,
    failed_checks: Vec<String>,
    endpoint_checks: String,
    check_gap: Option<String>,
    comparisons: Vec<Comparison>,
    benchmark_errors: Vec<String>,
    verdict: String,
    passed: bool,
    seconds: f64,
}

/// Runs the default command.
pub fn run(args: &SummaryArgs) -> io::Result<ExitCode> {
    let started = Instant::now();
    let work = Workload::new(args.quick);
    let mut out = Outcome::default();
    let text = !args.json;
    let mut stdout = io::stdout().lock();

    // 1. Conformance.
    if args.no_check {
        out.check_gap = Some("skipped with --no-check".into());
    } else {
        run_checks(args, text, &mut out, &mut stdout)?;
    }

    // 2. Benchmarks, each beside its baseline.
    if text {
        writeln!(stdout)?;
        writeln!(
            stdout,
            "Benchmark summary (informational: ratios to baselines measured in this run; targets are the design's aims)"
        )?;
        stdout.flush()?;
    }
    let parts: [(&str, Part); 5] = [
        ("polling send latency", polling_latency),
        ("event send latency", event_latency),
        ("64 KiB RDMA write bandwidth", write_bandwidth),
        ("QP_MODIFY async vs inline", qp_modify_throughput),
        ("connection rate", connection_rate),
    ];
    (out.comparisons, out.benchmark_errors) = run_parts(
        "benchmarks",
        text,
        &mut stdout,
        parts.into(),
        |part| part(args, &work),
        format_comparison,
    )?;

    // 3. Verdict.
    out.seconds = started.elapsed().as_secs_f64();
    out.passed = out.checks_failed == 0 && out.benchmark_errors.is_empty();
    out.verdict = verdict_line(&out);
    if text {
        writeln!(stdout)?;
        writeln!(stdout, "{}", out.verdict)?;
    } else {
        serde_json::to_writer_pretty(&mut stdout, &out).map_err(io::Error::other)?;
        writeln!(stdout)?;
    }
    Ok(if out.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The last line: the verdict, the counts, and the time taken.
fn verdict_line(out: &Outcome) -> String {
    let checks = if let Some(gap) = &out.check_gap {
        format!("conformance checks not run ({gap})")
    } else if out.checks_failed == 0 {
        format!(
            "{} checks passed{}",
            out.checks_passed,
            if out.checks_skipped > 0 {
                format!(", {} skipped", out.checks_skipped)
            } else {
                String::new()
            }
        )
    } else {
        format!(
            "{} of {} checks FAILED ({})",
            out.checks_failed,
            out.checks_passed + out.checks_failed,
            out.failed_checks.join(", ")
        )
    };
    let bench = if out.benchmark_errors.is_empty() {
        format!("{} benchmark comparisons", out.comparisons.len())
    } else {
        format!("{} benchmarks FAILED to run", out.benchmark_errors.len())
    };
    format!(
        "VERDICT: {} — {checks}; {bench}; {:.1} s",
        if out.passed { "PASS" } else { "FAIL" },
        out.seconds
    )
}

/// `  label ......  value unit  vs  baseline unit (what)  = ratio  [target ...]`
fn format_comparison(c: &Comparison) -> String {
    let ratio = if c.unit == "GB/s" {
        format!("{:.0} % of baseline", c.ratio * 100.0)
    } else {
        format!("{:.2}× baseline", c.ratio)
    };
    let mark = match c.meets_target {
        Some(true) => "meets",
        Some(false) => "misses",
        None => "",
    };
    format!(
        "  {:<34} {:>10} {:<6} vs {:>10} {:<6} {:<34} = {:<18} target {} {}",
        c.what,
        format_value(c.value),
        c.unit,
        format_value(c.baseline),
        c.unit,
        format!("({})", c.baseline_what),
        ratio,
        c.target,
        mark
    )
}

fn format_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn run_checks(
    args: &SummaryArgs,
    text: bool,
    out: &mut Outcome,
    stdout: &mut impl Write,
) -> io::Result<()> {
    let target = crate::check::CheckTarget::new(&args.target)?;
    let total = crate::check::scenario_names(&target).len() as u64;
    if text {
        match target.lower_edge_text() {
            Some(edge) => writeln!(stdout, "Conformance checks ({total} scenarios; {edge})")?,
            None => writeln!(stdout, "Conformance checks ({total} scenarios)")?,
        }
        stdout.flush()?;
    }
    let mut bar = Progress::new("checks", total, text);
    // Only failures are printed as they happen: a person reads the bar and the failures, and
    // `wvharness check` lists every scenario.
    let mut failures = Vec::new();
    let results = crate::check::run_all(&target, &mut |r| {
        if !r.passed {
            failures.push(r.line());
        }
        bar.step(&r.name);
    });
    bar.finish();
    drop(bar);
    let (passed, failed, skipped) = crate::check::tally(&results);
    out.checks_passed = passed;
    out.checks_failed = failed;
    out.checks_skipped = skipped;
    out.failed_checks = results
        .iter()
        .filter(|r| !r.passed)
        .map(|r| r.name.clone())
        .collect();
    // The endpoint scenarios on a line of their own: connections are what applications
    // built on rdma_cm or NetworkDirect need first.
    let endpoints: Vec<_> = results
        .iter()
        .filter(|r| r.name.starts_with("ep-"))
        .collect();
    out.endpoint_checks = format!(
        "{} of {} endpoint scenarios passed",
        endpoints.iter().filter(|r| r.passed && !r.skipped).count(),
        endpoints.len()
    );
    if text {
        for f in &failures {
            writeln!(stdout, "  {f}")?;
        }
        writeln!(stdout, "  {}", crate::check::summary_line(&results))?;
        writeln!(
            stdout,
            "  endpoints (connect/accept/data/disconnect, reject, timeout, cancel, removal): {}",
            out.endpoint_checks
        )?;
    }
    Ok(())
}

/// A baseline's description with the CPU placement both sides of the comparison used.
fn placed(what: &str, cpus: Option<(usize, usize)>) -> String {
    match cpus {
        Some((a, b)) => format!("{what}, CPUs {a}↔{b}"),
        None => format!("{what}, unpinned"),
    }
}

/// The perftest options of a summary measurement.
fn bench_args(args: &SummaryArgs, size: u64, iters: u64, events: bool) -> PerftestArgs {
    PerftestArgs {
        size: Some(size),
        iters: Some(iters),
        events,
        cpus: None,
        connection: Connection::Rc,
        target: args.target.clone(),
        ..PerftestArgs::default()
    }
}

fn polling_latency(args: &SummaryArgs, w: &Workload) -> Result<Vec<Comparison>, String> {
    send_latency(args, w, false, 4.0, "cache-line ping-pong, one way", || {
        baseline::cache_line_one_way(w.baseline_budget, w.cpus).median()
    })
}

fn event_latency(args: &SummaryArgs, w: &Workload) -> Result<Vec<Comparison>, String> {
    send_latency(args, w, true, 1.2, "futex wake, one way", || {
        baseline::futex_wake_one_way(w.baseline_budget, w.cpus).median()
    })
}

/// `send_lat` of 2 bytes, polling or with events (`-e`), on the workload's CPUs: its typical
/// one-way latency against `baseline_ns` (what `baseline_what` names, measured after it on the
/// same CPUs), with the target of at most `max_ratio` times it.
fn send_latency(
    args: &SummaryArgs,
    w: &Workload,
    events: bool,
    max_ratio: f64,
    baseline_what: &str,
    baseline_ns: impl FnOnce() -> f64,
) -> Result<Vec<Comparison>, String> {
    let iters = if events { w.event_iters } else { w.lat_iters };
    let bench = PerftestArgs {
        cpus: w.cpus,
        ..bench_args(args, 2, iters, events)
    };
    let rows = perftest::measure(Test::SendLat, &bench)?;
    let t = typical(&rows)?;
    let base_ns = baseline_ns();
    let ratio = t * 1000.0 / base_ns;
    let mode = if events { "events -e" } else { "polling" };
    Ok(vec![Comparison {
        what: format!("send_lat 2 B, {mode} (t_typical)"),
        value: t * 1000.0,
        baseline: base_ns,
        baseline_what: placed(baseline_what, w.cpus),
        unit: "ns".into(),
        ratio,
        target: format!("≤ {max_ratio}×"),
        meets_target: Some(ratio <= max_ratio),
    }])
}

fn write_bandwidth(args: &SummaryArgs, w: &Workload) -> Result<Vec<Comparison>, String> {
    let size = 64 << 10;
    let rows = perftest::measure(Test::WriteBw, &bench_args(args, size, w.bw_iters, false))?;
    let avg_mib = match rows.first() {
        Some(Row::Bandwidth { bw_average, .. }) => *bw_average,
        _ => return Err("write_bw produced no row".into()),
    };
    let bw = avg_mib * 1_048_576.0 / 1e9;
    let base = baseline::memcpy_rate(size as usize, w.baseline_budget).median() / 1e9;
    let ratio = bw / base;
    Ok(vec![Comparison {
        what: "write_bw 64 KiB (BW average)".into(),
        value: bw,
        baseline: base,
        baseline_what: "memcpy of 64 KiB buffers".into(),
        unit: "GB/s".into(),
        ratio,
        target: "≥ 80 %".into(),
        meets_target: Some(ratio >= 0.8),
    }])
}

fn qp_modify_throughput(args: &SummaryArgs, w: &Workload) -> Result<Vec<Comparison>, String> {
    let rate = |mode| -> Result<f64, String> {
        let config = StackConfig {
            qp_modify: mode,
            // A controller whose commands take time, as the asynchronous model assumes, and
            // enough workers for the modifies in flight to reach it together.
            command_latency_ns: 20_000,
            workers: 8,
            ..StackConfig::default()
        };
        let (target, device) = Target::open(&args.target, config).map_err(|e| e.0)?;
        target.run(
            ModifyTask {
                qps: w.modify_qps,
                rounds: w.modify_rounds,
                overlap: Overlap::PerStep,
            },
            device,
        )
    };
    let inline = rate(QpModifyMode::Inline)?;
    let asynchronous = rate(QpModifyMode::Async)?;
    Ok(vec![Comparison {
        what: format!(
            "QP_MODIFY async (20 µs commands, {} command slots)",
            wv_softhca::DEFAULT_COMMAND_SLOTS
        ),
        value: asynchronous,
        baseline: inline,
        baseline_what: "QP_MODIFY inline, as OFW".into(),
        unit: "/s".into(),
        ratio: asynchronous / inline,
        target: "≥ 4×".into(),
        meets_target: Some(asynchronous / inline >= 4.0),
    }])
}

/// `wvharness conn` with one client thread (and one server thread): the whole life of a
/// connection — endpoint, bind, route, QP, CONNECT, ACCEPT, DISCONNECT — one after the other,
/// per-connection median beside one loopback TCP connection's connect, accept and close.
fn connection_rate(args: &SummaryArgs, w: &Workload) -> Result<Vec<Comparison>, String> {
    let r = measure_connections(&args.target, w.connections)?;
    let tcp_rate = 1e9 / baseline::tcp_loopback_connect(w.baseline_budget).median();
    let rate = 1e6 / r.total.p50_us;
    Ok(vec![Comparison {
        what: format!(
            "conn -t 1 (connect p50 {:.0} µs, disconnect p50 {:.0} µs)",
            r.connect.p50_us, r.disconnect.p50_us
        ),
        value: rate,
        baseline: tcp_rate,
        baseline_what: "TCP loopback connect+accept+close, median".into(),
        unit: "/s".into(),
        ratio: rate / tcp_rate,
        target: "≥ 0.5×".into(),
        meets_target: Some(rate / tcp_rate >= 0.5),
    }])
}

/// `n` connections on one client thread, as `wvharness conn -t 1 -n <n>`.
pub fn measure_connections(target: &TargetArgs, n: u64) -> Result<ConnResult, String> {
    let conn_args = ConnArgs {
        threads: 1,
        connections: n,
        json: false,
        target: target.clone(),
    };
    let (opened, device) = Target::open(target, StackConfig::default()).map_err(|e| e.0)?;
    opened.run(ConnTask { args: conn_args }, device)
}

fn typical(rows: &[Row]) -> Result<f64, String> {
    match rows.first() {
        Some(Row::Latency { t_typical, .. }) => Ok(*t_typical),
        _ => Err("send_lat produced no row".into()),
    }
}
