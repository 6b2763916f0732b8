//! `wvharness bench`: every benchmark of the stack beside the machine's limits measured in the
//! same run, as ratios with the goals they are held to.
//!
//! The goals are reported (met / not met), never enforced: on a shared 2-core machine a number
//! can miss because another build ran, and performance never decides a verdict. Every limit is
//! a per-iteration median with its 99th percentile (`baseline`; the mutex, the small copies and
//! the SPSC ring's messages, below the clock's resolution, are timed in batches and their rows
//! say so), and every row names the limit it is divided by. Every row with a goal is measured
//! in rounds that alternate with rounds of its own limit, and reports the median of the
//! per-round ratios with their spread (`rounds`). A row whose event never sleeps (read_lat `-e`: the read
//! completes within its own doorbell) is divided by the polling run of the same size instead
//! of a wake. Event-mode send_lat also counts the process's context switches per message (a
//! message is one send and its completion; a round trip is two) against the futex ping-pong's
//! per wake, counted the same way (`ctx_switches`). Polling benchmarks pin their two spinning threads to different CPUs (on 2
//! CPUs an unpinned spin pair can end up sharing one and degrade to the scheduler tick).
//!
//! `--json` prints the rows as JSON; `--out DIR` also writes `DIR/bench.json`, latency CDFs as
//! SVG and `DIR/PERFORMANCE.md` (the figures of this run, with `--notes FILE` appended: the
//! analysis of the goals the run missed).

mod direct;
mod glue;
mod measure;
mod report;
mod rounds;
#[cfg(target_os = "linux")]
mod two_process;

#[cfg(target_os = "linux")]
pub use two_process::copy_target;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use serde::Serialize;

use crate::progress::run_parts;
use crate::target::TargetArgs;

pub use measure::Plan;

/// Options of `wvharness bench`.
#[derive(Args, Clone, Debug, Default)]
pub struct BenchArgs {
    /// A reduced workload for CI (under 3 minutes on 2 CPUs); the numbers are noisier.
    #[arg(long)]
    pub quick: bool,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write a report into this directory: bench.json, the latency CDFs (SVG) and
    /// PERFORMANCE.md.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// A Markdown file appended to PERFORMANCE.md (the analysis of the goals the run missed).
    #[arg(long, value_name = "FILE")]
    pub notes: Option<PathBuf>,
    /// Run only the parts whose name contains this text (the machine limits always run), e.g.
    /// to profile one part under `perf record`.
    #[arg(long, value_name = "TEXT")]
    pub only: Option<String>,
    /// Which driver and device to run on.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// A goal a row is held to (reported, never enforced).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", content = "ratio", rename_all = "snake_case")]
pub enum Goal {
    /// The ratio must not exceed this.
    AtMost(f64),
    /// The ratio must reach at least this.
    AtLeast(f64),
    /// The ratio must lie within 1 ± this.
    Within(f64),
}

impl Goal {
    /// Whether `ratio` meets the goal.
    pub fn met(self, ratio: f64) -> bool {
        match self {
            Goal::AtMost(g) => ratio <= g,
            Goal::AtLeast(g) => ratio >= g,
            Goal::Within(g) => (ratio - 1.0).abs() <= g,
        }
    }

    /// "≤ 4×", "≥ 80 %", "±2 %".
    pub fn text(self) -> String {
        match self {
            Goal::AtMost(g) => format!("≤ {g}×"),
            Goal::AtLeast(g) if g < 1.0 => format!("≥ {:.0} %", g * 100.0),
            Goal::AtLeast(g) => format!("≥ {g}×"),
            Goal::Within(g) => format!("±{:.0} %", g * 100.0),
        }
    }
}

/// One row of the benchmark: a measurement, the limit it is compared with, their ratio and the
/// goal. The JSON form has the fields `name, value, unit, baseline, baseline_value, ratio, goal,
/// met, spread` (and the 99th percentiles, the group and, where the goal needs one, the
/// confidence interval of the ratio beside them).
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    /// The section of the report.
    pub group: &'static str,
    /// What was measured.
    pub name: String,
    /// The median (latency, rate) or average (bandwidth) in `unit`; `None` when the row could
    /// not be measured (see `note`).
    pub value: Option<f64>,
    /// The 99th percentile in `unit`, where the row has per-iteration samples.
    pub p99: Option<f64>,
    /// The unit of `value` and `baseline_value`.
    pub unit: &'static str,
    /// What the row is compared with.
    pub baseline: String,
    /// Its median in `unit`.
    pub baseline_value: Option<f64>,
    /// Its 99th percentile in `unit`.
    pub baseline_p99: Option<f64>,
    /// `value / baseline_value`.
    pub ratio: Option<f64>,
    /// The goal, as text ("≤ 4×"); `None` for rows without one.
    pub goal: Option<String>,
    /// Whether the ratio meets the goal.
    pub met: Option<bool>,
    /// Why a value is missing, or how it was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// For a row measured in rounds alternating with its baseline's: how the per-round
    /// numbers spread (`rounds.rs`).
    pub spread: Option<rounds::Spread>,
    /// The 95 % confidence interval of the ratio, where the row's goal needs one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<rounds::Interval>,
}

impl BenchRow {
    /// A row from its parts; the ratio and `met` are computed.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        group: &'static str,
        name: impl Into<String>,
        value: f64,
        p99: Option<f64>,
        unit: &'static str,
        baseline: impl Into<String>,
        base: (f64, Option<f64>),
        goal: Option<Goal>,
    ) -> BenchRow {
        let ratio = (base.0 > 0.0 && base.0.is_finite()).then(|| value / base.0);
        BenchRow {
            group,
            name: name.into(),
            value: Some(value),
            p99,
            unit,
            baseline: baseline.into(),
            baseline_value: Some(base.0),
            baseline_p99: base.1,
            ratio,
            goal: goal.map(Goal::text),
            met: goal.zip(ratio).map(|(g, r)| g.met(r)),
            note: None,
            spread: None,
            interval: None,
        }
    }

    /// With a note.
    pub fn with_note(mut self, note: impl Into<String>) -> BenchRow {
        self.note = Some(note.into());
        self
    }
}

/// A set of latency samples to draw as a CDF.
#[derive(Clone, Debug, Serialize)]
pub struct Cdf {
    /// File stem of the SVG.
    pub file: &'static str,
    /// Chart title.
    pub title: String,
    /// Each curve: label and sorted samples (ns).
    pub curves: Vec<(String, Vec<f64>)>,
}

/// Everything a run produced.
#[derive(Debug, Default, Serialize)]
pub struct BenchRun {
    /// Commit, date and machine.
    pub run: RunInfo,
    /// The rows, in report order.
    pub rows: Vec<BenchRow>,
    /// Parts that could not run.
    pub errors: Vec<String>,
    /// Wall time of the run, seconds.
    pub seconds: f64,
    /// The CDFs (not in the JSON: they are the SVGs).
    #[serde(skip)]
    pub cdfs: Vec<Cdf>,
}

/// Where and when a run happened.
#[derive(Debug, Default, Serialize)]
pub struct RunInfo {
    /// `git rev-parse --short HEAD` (with `-dirty` for local changes), or "unknown".
    pub commit: String,
    /// UTC date and time.
    pub date: String,
    /// CPU count and model, kernel.
    pub machine: String,
    /// Quick mode.
    pub quick: bool,
    /// The CPUs the two threads of each latency benchmark are pinned to.
    pub cpus: Option<(usize, usize)>,
}

/// Runs `wvharness bench`.
pub fn run(args: &BenchArgs) -> io::Result<ExitCode> {
    let started = Instant::now();
    let plan = Plan::new(args.quick);
    let mut out = BenchRun {
        run: RunInfo::current(args.quick, plan.cpus),
        ..BenchRun::default()
    };
    let text = !args.json;
    let mut stdout = io::stdout().lock();
    if text {
        writeln!(
            stdout,
            "wvharness bench{} — commit {}, {}, {}",
            if args.quick { " --quick" } else { "" },
            out.run.commit,
            out.run.date,
            out.run.machine
        )?;
        writeln!(
            stdout,
            "Ratios are against limits measured in this run (per-iteration median; p99 beside it). A goal row alternates rounds with its baseline's: its ratio is the median of the per-round ratios, their range beside it. Goals are reported, not enforced."
        )?;
        stdout.flush()?;
    }
    let parts: Vec<_> = measure::parts()
        .into_iter()
        .enumerate()
        .filter(|(i, (name, _))| {
            *i == 0 || args.only.as_ref().is_none_or(|o| name.contains(o.as_str()))
        })
        .map(|(_, p)| p)
        .collect();
    let mut ctx = measure::Context::new(&plan, &args.target);
    (out.rows, out.errors) = run_parts(
        "bench",
        text,
        &mut stdout,
        parts,
        |part| part(&mut ctx),
        report::text_row,
    )?;
    out.cdfs = std::mem::take(&mut ctx.cdfs);
    out.seconds = started.elapsed().as_secs_f64();
    let goals = out.rows.iter().filter(|r| r.met.is_some()).count();
    let met = out.rows.iter().filter(|r| r.met == Some(true)).count();
    if text {
        writeln!(stdout)?;
        writeln!(
            stdout,
            "{} rows; goals met: {met} of {goals}; {} parts failed to run; {:.0} s",
            out.rows.len(),
            out.errors.len(),
            out.seconds
        )?;
    } else {
        serde_json::to_writer_pretty(&mut stdout, &out).map_err(io::Error::other)?;
        writeln!(stdout)?;
    }
    if let Some(dir) = &args.out {
        report::write_dir(dir, &out, args.notes.as_deref())?;
        if text {
            writeln!(stdout, "report written to {}", dir.display())?;
        }
    }
    // Performance never fails the command; a part that could not run does.
    Ok(if out.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

impl RunInfo {
    fn current(quick: bool, cpus: Option<(usize, usize)>) -> RunInfo {
        let cmd = |c: &str, a: &[&str]| {
            std::process::Command::new(c)
                .args(a)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        };
        let mut commit =
            cmd("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
        if cmd("git", &["status", "--porcelain", "--untracked-files=no"])
            .is_some_and(|s| !s.is_empty())
        {
            commit.push_str("-dirty");
        }
        let date = cmd("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_default();
        let model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_owned())
            })
            .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
        let cpus_n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let kernel = cmd("uname", &["-sr"]).unwrap_or_else(|| std::env::consts::OS.to_owned());
        RunInfo {
            commit,
            date,
            machine: format!("{cpus_n} CPUs ({model}), {kernel}"),
            quick,
            cpus,
        }
    }
}
