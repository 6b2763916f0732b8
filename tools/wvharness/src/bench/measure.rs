//! The parts of `wvharness bench`, each measuring a group of rows beside its limits.

use std::time::{Duration, Instant};

use wv_client::raw::{RawFile, RawIo};
use wv_core::QpModifyMode;
use wv_inproc::StackConfig;

use super::rounds::{self, Round, Stat, alternate};
use super::{BenchRow, Cdf, Goal};
use crate::baseline::{self, Measured};
use crate::perftest::{self, Measurement, PerftestArgs, Row, Test};
use crate::qp_cycle::{ModifyTask, Overlap};
use crate::target::{DeviceSpec, Opener, Target, TargetArgs, TargetTask};

/// The message sizes of the perftest rows.
pub const SIZES: [u64; 5] = [2, 64, 4096, 64 << 10, 1 << 20];

/// How much work each part does.
pub struct Plan {
    /// Quick mode (CI).
    pub quick: bool,
    /// Time budget of each limit.
    pub limit_budget: Duration,
    /// The CPUs of the two threads of each latency benchmark (server/echo, client/measuring).
    pub cpus: Option<(usize, usize)>,
    /// Rounds of each goal row, alternating with rounds of its baseline (`rounds.rs`).
    pub rounds: usize,
    /// Rounds of the filter-overhead rows, whose confidence interval narrows with them.
    pub overhead_rounds: usize,
}

impl Plan {
    /// The plan for a full or quick run.
    pub fn new(quick: bool) -> Plan {
        Plan {
            quick,
            limit_budget: Duration::from_millis(if quick { 150 } else { 1000 }),
            cpus: baseline::bench_cpus(),
            rounds: if quick { 5 } else { 9 },
            overhead_rounds: if quick { 8 } else { 16 },
        }
    }

    /// The time budget of one baseline round of a goal row.
    fn round_budget(&self) -> Duration {
        self.limit_budget / 2
    }

    /// Iterations of one round of a latency goal row.
    fn round_lat_iters(&self, size: u64, events: bool) -> u64 {
        (self.lat_iters(size, events) / 2).max(100)
    }

    /// Iterations of a latency test at `size` (polling or events).
    fn lat_iters(&self, size: u64, events: bool) -> u64 {
        let base: u64 = match (self.quick, events) {
            (true, false) => 5_000,
            (true, true) => 1_000,
            (false, false) => 50_000,
            (false, true) => 10_000,
        };
        if size >= 1 << 20 {
            (base / 50).max(50)
        } else if size >= 64 << 10 {
            (base / 10).max(100)
        } else {
            base
        }
    }

    /// Messages of a bandwidth test at `size`.
    fn bw_iters(&self, size: u64) -> u64 {
        let base: u64 = if self.quick { 5_000 } else { 50_000 };
        if size >= 1 << 20 {
            (base / 50).max(50)
        } else if size >= 64 << 10 {
            base / 10
        } else {
            base
        }
    }
}

/// The limits measured at the start of the run.
#[derive(Default)]
pub struct Limits {
    cache_line: Measured,
    futex_cross: Measured,
    /// Context switches per wake of the cross-CPU futex ping-pong.
    futex_switches: Option<f64>,
    futex_same: Measured,
    clock: Measured,
    mutex: Measured,
    tcp: Measured,
    memcpy: Vec<(u64, Measured)>,
    /// The SPSC ring's message rate (messages per second).
    ring: Measured,
}

impl Limits {
    fn memcpy_at(&self, size: u64) -> Option<&Measured> {
        self.memcpy.iter().find(|(s, _)| *s == size).map(|(_, m)| m)
    }
}

/// What the parts share.
pub struct Context<'a> {
    plan: &'a Plan,
    target: &'a TargetArgs,
    limits: Limits,
    /// The CDFs to draw.
    pub cdfs: Vec<Cdf>,
    /// Polling read_lat of each size of this run (t_typical and 99th percentile, ns): the
    /// baseline of the `-e` read rows.
    polled_reads: Vec<(u64, (f64, Option<f64>))>,
}

impl<'a> Context<'a> {
    /// A context for one run.
    pub fn new(plan: &'a Plan, target: &'a TargetArgs) -> Self {
        Context {
            plan,
            target,
            limits: Limits::default(),
            cdfs: Vec::new(),
            polled_reads: Vec::new(),
        }
    }

    fn placed(&self, what: &str) -> String {
        match self.plan.cpus {
            Some((a, b)) => format!("{what}, CPUs {a}↔{b}"),
            None => format!("{what}, unpinned"),
        }
    }
}

/// One part: a name for the progress bar and the function that measures it.
pub type Part = (
    &'static str,
    fn(&mut Context<'_>) -> Result<Vec<BenchRow>, String>,
);

/// The parts, in report order.
pub fn parts() -> Vec<Part> {
    vec![
        ("machine limits", limits),
        ("perftest latency, polling", latency_polling),
        ("perftest latency, events", latency_events),
        ("perftest bandwidth", bandwidth),
        ("message rate", message_rate),
        ("notify path", notify_path),
        ("inline IOCTL round trip", inline_ioctl),
        ("QP transitions", qp_transitions),
        ("connection rate", connection_rate),
        ("filter overhead", filter_overhead),
        ("glue on the emulated KMDF", glue_row),
        #[cfg(target_os = "linux")]
        ("two processes through wvd", two_processes),
    ]
}

/// Perftest's binaries between two processes through the device service, in rounds
/// alternating with the in-process send_lat 2 B and memcpy 64 KiB.
#[cfg(target_os = "linux")]
fn two_processes(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    let cx = &*cx;
    let b = cx.plan.round_budget() / 2;
    let memcpy = cx
        .limits
        .memcpy_at(64 << 10)
        .ok_or("no memcpy 64 KiB limit")?
        .clone();
    let send_lat = || lat_round(cx, Test::SendLat, false, 2, cx.plan.cpus).map(|m| lat_stat(&m));
    let copy = || Stat::rates(&baseline::memcpy_rate(64 << 10, b), 1e-9);
    // Each round starts two tools and the service (about 2 s a round): fewer rounds in quick
    // mode keep CI's run short.
    let rounds = if cx.plan.quick { 3 } else { cx.plan.rounds };
    super::two_process::rows(
        cx.plan.quick,
        rounds,
        &super::two_process::Baselines {
            send_lat: &send_lat,
            memcpy: &copy,
        },
        &memcpy,
    )
}

/// The mutex limit's name: it is the one limit timed in batches, and says so.
const MUTEX_ROW: &str =
    "mutex lock+unlock, uncontended (batch mean: one pair is below the clock's step)";

fn stat(m: &Measured) -> (f64, Option<f64>) {
    (m.median(), Some(m.p99()))
}

fn size_text(size: u64) -> String {
    match size {
        s if s >= 1 << 20 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

/// The machine's limits, each a row of its own (their ratio is to themselves: none).
fn limits(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    let b = cx.plan.limit_budget;
    let cpus = cx.plan.cpus;
    let placed = |w: &str| cx.placed(w);
    let (cl_name, fx_name) = (
        placed("cache-line ping-pong, one way"),
        placed("futex wake, one way, cross-CPU"),
    );
    let l = &mut cx.limits;
    l.cache_line = baseline::cache_line_one_way(b, cpus);
    (l.futex_cross, l.futex_switches) = baseline::futex_wake_counted(b, cpus);
    l.futex_same = baseline::futex_wake_same_cpu(b, cpus.map_or(0, |c| c.1));
    l.clock = baseline::clock_read(b);
    l.mutex = baseline::mutex_lock_unlock(b);
    l.tcp = baseline::tcp_loopback_connect(b);
    l.memcpy = SIZES
        .iter()
        .map(|&s| (s, baseline::memcpy_rate(s as usize, b / 4)))
        .collect();
    l.ring = baseline::spsc_ring_rate(b, cpus);
    let limit = |name: String, m: &Measured, unit: &'static str, scale: f64| BenchRow {
        group: "limits",
        name,
        value: Some(m.median() * scale),
        p99: Some(m.p99() * scale),
        unit,
        baseline: "(a limit of the machine)".into(),
        baseline_value: None,
        baseline_p99: None,
        ratio: None,
        goal: None,
        met: None,
        note: Some(format!("{} samples", m.samples.len())),
        spread: None,
        interval: None,
    };
    let mut rows = vec![
        limit(cl_name, &l.cache_line, "ns", 1.0),
        limit(fx_name, &l.futex_cross, "ns", 1.0),
        limit(
            format!(
                "futex wake, one way, same CPU ({})",
                cpus.map_or(0, |c| c.1)
            ),
            &l.futex_same,
            "ns",
            1.0,
        ),
        limit(
            "clock read (Instant::now), back to back".into(),
            &l.clock,
            "ns",
            1.0,
        )
        .with_note(format!(
            "{} samples, the shortest {:.0} ns; every per-iteration sample includes one read",
            l.clock.samples.len(),
            l.clock.samples.first().copied().unwrap_or(f64::NAN)
        )),
        limit(MUTEX_ROW.into(), &l.mutex, "ns", 1.0).with_note(format!(
            "{} samples, each the mean of {} lock+unlock pairs",
            l.mutex.samples.len(),
            baseline::MUTEX_BATCH
        )),
        limit(
            "TCP loopback connect+accept+close".into(),
            &l.tcp,
            "ns",
            1.0,
        ),
    ];
    for (s, m) in &l.memcpy {
        // For a rate the slow end is the 1st percentile of the rates.
        let mut r = limit(format!("memcpy {}", size_text(*s)), m, "GB/s", 1e-9);
        r.p99 = Some(m.p1() * 1e-9);
        r.note = Some(format!(
            "{} samples; p99 column: 1st percentile of the rates",
            m.samples.len()
        ));
        rows.push(r);
    }
    let mut ring = limit(ring_name(cpus), &l.ring, "M msg/s", 1e-6);
    ring.p99 = Some(l.ring.p1() * 1e-6);
    ring.note = Some(format!(
        "{} samples, each the rate over {} messages; p99 column: 1st percentile of the rates",
        l.ring.samples.len(),
        baseline::RING_BATCH
    ));
    rows.push(ring);
    cx.cdfs.push(Cdf {
        file: "cdf-limits",
        title: "Limits of the machine (one way)".into(),
        curves: vec![
            ("cache-line ping-pong".into(), l.cache_line.samples.clone()),
            ("futex wake cross-CPU".into(), l.futex_cross.samples.clone()),
            ("futex wake same CPU".into(), l.futex_same.samples.clone()),
        ],
    });
    Ok(rows)
}

/// Runs one perftest test over every size of [`SIZES`] it applies to.
fn perftest_run(
    cx: &Context<'_>,
    test: Test,
    events: bool,
    config: StackConfig,
) -> Result<Vec<Measurement>, String> {
    let sizes: Vec<(u64, u64)> = SIZES
        .iter()
        .map(|&s| {
            let n = if test.is_latency() {
                cx.plan.lat_iters(s, events)
            } else {
                cx.plan.bw_iters(s)
            };
            (s, n)
        })
        .collect();
    let args = PerftestArgs {
        size: Some(2),
        iters: Some(1000),
        events,
        cpus: cx.plan.cpus,
        target: cx.target.clone(),
        ..PerftestArgs::default()
    };
    perftest::measure_sizes(test, &args, Some(&sizes), config)
}

fn lat_rows(cx: &mut Context<'_>, test: Test, events: bool) -> Result<Vec<BenchRow>, String> {
    if test == Test::ReadLat && events {
        return read_event_rows(cx);
    }
    let runs = perftest_run(cx, test, events, StackConfig::default())?;
    let whole = test == Test::ReadLat;
    let (base, base_name) = if events {
        (&cx.limits.futex_cross, "futex wake cross-CPU")
    } else {
        (&cx.limits.cache_line, "cache-line")
    };
    // A read is a whole round trip; send and write report half of one.
    let k = if whole { 2.0 } else { 1.0 };
    let base_stat = (base.median() * k, Some(base.p99() * k));
    let base_text = cx.placed(&format!(
        "{base_name} {}",
        if whole { "round trip" } else { "one way" }
    ));
    let mut rows = Vec::new();
    for m in runs {
        let Row::Latency {
            bytes,
            t_typical,
            percentile_99,
            ..
        } = m.row
        else {
            continue;
        };
        if test == Test::ReadLat {
            cx.polled_reads
                .push((bytes, (t_typical * 1000.0, Some(percentile_99 * 1000.0))));
        }
        if test == Test::SendLat && bytes == 2 {
            // The goal rows: measured again in rounds alternating with their baselines.
            if events {
                rows.extend(send_lat_events_goal_rows(cx, &m)?);
            } else {
                rows.push(send_lat_polling_goal_row(cx, &base_text)?);
            }
            send_lat_cdf(cx, events, &m);
            continue;
        }
        let name = format!(
            "{}{} {} (t_typical)",
            test.name(),
            if events { " -e" } else { "" },
            size_text(bytes)
        );
        rows.push(BenchRow::new(
            if events {
                "latency, events"
            } else {
                "latency, polling"
            },
            name,
            t_typical * 1000.0,
            Some(percentile_99 * 1000.0),
            "ns",
            base_text.clone(),
            base_stat,
            None,
        ));
    }
    Ok(rows)
}

/// One round of a latency goal row: perftest's `test` at `size` on a fresh stack.
fn lat_round(
    cx: &Context<'_>,
    test: Test,
    events: bool,
    size: u64,
    cpus: Option<(usize, usize)>,
) -> Result<perftest::Measurement, String> {
    let args = PerftestArgs {
        size: Some(size),
        iters: Some(cx.plan.round_lat_iters(size, events)),
        events,
        cpus,
        target: cx.target.clone(),
        ..PerftestArgs::default()
    };
    perftest::measure_sizes(test, &args, None, StackConfig::default())?
        .into_iter()
        .next()
        .ok_or_else(|| format!("{} produced no row", test.name()))
}

/// A latency row's per-iteration median and 99th percentile, in ns.
fn lat_stat(m: &perftest::Measurement) -> Stat {
    match m.row {
        Row::Latency {
            t_typical,
            percentile_99,
            ..
        } => Stat {
            mid: t_typical * 1000.0,
            tail: Some(percentile_99 * 1000.0),
        },
        _ => Stat::plain(f64::NAN),
    }
}

/// send_lat 2 B polling against the cache line, in alternating rounds.
fn send_lat_polling_goal_row(cx: &Context<'_>, base_text: &str) -> Result<BenchRow, String> {
    let (b, cpus) = (cx.plan.round_budget(), cx.plan.cpus);
    let rounds: Vec<Round> = alternate(
        cx.plan.rounds,
        |_| lat_round(cx, Test::SendLat, false, 2, cpus).map(|m| lat_stat(&m)),
        |_| Ok(Stat::times(&baseline::cache_line_one_way(b, cpus), 1.0)),
    )?
    .into_iter()
    .map(|(value, base)| Round { value, base })
    .collect();
    Ok(BenchRow::from_rounds(
        "latency, polling",
        "send_lat 2 B (t_typical)",
        "ns",
        base_text,
        &rounds,
        Some(Goal::AtMost(2.5)),
    ))
}

/// send_lat -e 2 B against the cross-CPU futex wake (its latency and its context switches per
/// message, from the same rounds), and with both sides on one CPU against the same-CPU wake.
fn send_lat_events_goal_rows(
    cx: &Context<'_>,
    sweep: &perftest::Measurement,
) -> Result<Vec<BenchRow>, String> {
    let (b, cpus) = (cx.plan.round_budget(), cx.plan.cpus);
    let pairs = alternate(
        cx.plan.rounds,
        |_| lat_round(cx, Test::SendLat, true, 2, cpus),
        |_| Ok(baseline::futex_wake_counted(b, cpus)),
    )?;
    let latency: Vec<Round> = pairs
        .iter()
        .map(|(m, (wake, _))| Round {
            value: lat_stat(m),
            base: Stat::times(wake, 1.0),
        })
        .collect();
    let mut rows = vec![BenchRow::from_rounds(
        "latency, events",
        "send_lat -e 2 B (t_typical)",
        "ns",
        cx.placed("futex wake cross-CPU one way"),
        &latency,
        Some(Goal::AtMost(1.2)),
    )];
    let switches: Option<Vec<Round>> = pairs
        .iter()
        .map(|(m, (_, per_wake))| {
            let Row::Latency { iterations, .. } = m.row else {
                return None;
            };
            let per_message = m.context_switches? as f64 / messages(iterations) as f64;
            Some(Round {
                value: Stat::plain(per_message),
                base: Stat::plain((*per_wake)?),
            })
        })
        .collect();
    rows.push(match switches {
        Some(s) => BenchRow::from_rounds(
            "latency, events",
            SWITCHES_ROW,
            "switches",
            cx.placed(SWITCHES_BASE),
            &s,
            Some(Goal::AtMost(1.1)),
        )
        .with_note(
            "context switches (voluntary + involuntary, every thread of the process) per \
             message of each round",
        ),
        None => switches_row(cx, sweep),
    });
    // Nobody spins in event mode, so both sides may share a CPU: each message is then a
    // hand-off on one CPU, the same-CPU futex wake's case.
    if let Some((_, c)) = cpus {
        let same: Vec<Round> = alternate(
            cx.plan.rounds,
            |_| lat_round(cx, Test::SendLat, true, 2, Some((c, c))).map(|m| lat_stat(&m)),
            |_| Ok(Stat::times(&baseline::futex_wake_same_cpu(b, c), 1.0)),
        )?
        .into_iter()
        .map(|(value, base)| Round { value, base })
        .collect();
        rows.push(BenchRow::from_rounds(
            "latency, events",
            format!("send_lat -e 2 B (t_typical), both sides on CPU {c}"),
            "ns",
            format!("futex wake same CPU ({c}), one way"),
            &same,
            Some(Goal::AtMost(2.0)),
        ));
    }
    Ok(rows)
}

/// The CDF of send_lat 2 B (the sweep's samples) beside its limits.
fn send_lat_cdf(cx: &mut Context<'_>, events: bool, m: &perftest::Measurement) {
    let samples = Measured::new(m.iteration_ns.clone());
    let cdf = if events {
        Cdf {
            file: "cdf-send-lat-events",
            title: "send_lat -e 2 B vs futex wake (one way)".into(),
            curves: vec![
                ("send_lat -e 2 B".into(), samples.samples),
                (
                    "futex wake cross-CPU".into(),
                    cx.limits.futex_cross.samples.clone(),
                ),
                (
                    "futex wake same CPU".into(),
                    cx.limits.futex_same.samples.clone(),
                ),
            ],
        }
    } else {
        Cdf {
            file: "cdf-send-lat-polling",
            title: "send_lat 2 B vs cache-line ping-pong (one way)".into(),
            curves: vec![
                ("send_lat 2 B".into(), samples.samples),
                (
                    "cache-line ping-pong".into(),
                    cx.limits.cache_line.samples.clone(),
                ),
            ],
        }
    };
    cx.cdfs.push(cdf);
}
/// Messages of a send_lat run of `iterations`: each iteration is a round trip, two messages
/// (one send and its completion is a message).
fn messages(iterations: u64) -> u64 {
    2 * iterations
}

/// The context-switch row's name.
const SWITCHES_ROW: &str = "send_lat -e 2 B: context switches per message (a message is one \
                            send and its completion; a round trip is two)";
/// Its baseline's name.
const SWITCHES_BASE: &str = "futex wake cross-CPU: context switches per wake";

/// Context switches per message of event-mode send_lat, beside the futex ping-pong's switches
/// per wake counted the same way (the whole process, over the timed part).
fn switches_row(cx: &Context<'_>, m: &perftest::Measurement) -> BenchRow {
    let Row::Latency { iterations, .. } = m.row else {
        unreachable!("a latency row")
    };
    let per_message = m
        .context_switches
        .map(|n| n as f64 / messages(iterations) as f64);
    match (per_message, cx.limits.futex_switches) {
        (Some(v), Some(base)) => BenchRow::new(
            "latency, events",
            SWITCHES_ROW,
            v,
            None,
            "switches",
            cx.placed(SWITCHES_BASE),
            (base, None),
            Some(Goal::AtMost(1.1)),
        )
        .with_note(format!(
            "{} context switches (voluntary + involuntary, every thread of the process) over \
             {iterations} round trips",
            m.context_switches.unwrap_or(0)
        )),
        _ => BenchRow {
            group: "latency, events",
            name: SWITCHES_ROW.into(),
            value: None,
            p99: None,
            unit: "switches",
            baseline: cx.placed(SWITCHES_BASE),
            baseline_value: cx.limits.futex_switches,
            baseline_p99: None,
            ratio: None,
            goal: Some(Goal::AtMost(1.1).text()),
            met: None,
            note: Some("this system's /proc does not count context switches".into()),
            spread: None,
            interval: None,
        },
    }
}

/// read_lat -e: each read completes inside its own doorbell (the engine runs in the posting
/// thread, on the peer device too), so its CQ event is there before the wait, which never
/// sleeps: there is no wake to compare with. The baseline is the polling read of the same size
/// from this run; the ratio is what the CQ_NOTIFY round trip and the re-arm add, and the note
/// counts the context switches per read that show no sleep happened.
fn read_event_rows(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    if cx.polled_reads.is_empty() {
        // The polling rows did not run (--only): measure their baseline here.
        lat_rows(cx, Test::ReadLat, false)?;
    }
    let runs = perftest_run(cx, Test::ReadLat, true, StackConfig::default())?;
    let mut rows = Vec::new();
    for m in runs {
        let Row::Latency {
            bytes,
            iterations,
            t_typical,
            percentile_99,
            ..
        } = m.row
        else {
            continue;
        };
        let Some(&(_, base)) = cx.polled_reads.iter().find(|(s, _)| *s == bytes) else {
            continue;
        };
        let mut row = BenchRow::new(
            "latency, events",
            format!("read_lat -e {} (t_typical)", size_text(bytes)),
            t_typical * 1000.0,
            Some(percentile_99 * 1000.0),
            "ns",
            cx.placed(&format!(
                "read_lat polling {} (no wake to compare with: the wait finds its event)",
                size_text(bytes)
            )),
            base,
            None,
        );
        if let Some(n) = m.context_switches {
            row = row.with_note(format!(
                "{:.3} context switches per read ({n} over {iterations} reads)",
                n as f64 / iterations as f64
            ));
        }
        rows.push(row);
    }
    Ok(rows)
}

fn latency_polling(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    let mut rows = lat_rows(cx, Test::SendLat, false)?;
    rows.extend(lat_rows(cx, Test::WriteLat, false)?);
    rows.extend(lat_rows(cx, Test::ReadLat, false)?);
    Ok(rows)
}

fn latency_events(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    let mut rows = lat_rows(cx, Test::SendLat, true)?;
    rows.extend(lat_rows(cx, Test::ReadLat, true)?);
    Ok(rows)
}

fn bandwidth(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    let mut rows = Vec::new();
    for (test, events) in [
        (Test::SendBw, false),
        (Test::WriteBw, false),
        (Test::ReadBw, false),
        (Test::SendBw, true),
        (Test::ReadBw, true),
    ] {
        for m in perftest_run(cx, test, events, StackConfig::default())? {
            let Row::Bandwidth {
                bytes, bw_average, ..
            } = m.row
            else {
                continue;
            };
            let gbs = bw_average * 1_048_576.0 / 1e9;
            let Some(base) = cx.limits.memcpy_at(bytes) else {
                continue;
            };
            if test == Test::WriteBw && !events && bytes == 64 << 10 {
                rows.push(write_bw_goal_row(cx)?);
                continue;
            }
            rows.push(BenchRow::new(
                if events {
                    "bandwidth, events"
                } else {
                    "bandwidth, polling"
                },
                format!(
                    "{}{} {} (BW average)",
                    test.name(),
                    if events { " -e" } else { "" },
                    size_text(bytes)
                ),
                gbs,
                None,
                "GB/s",
                format!("memcpy {}", size_text(bytes)),
                (base.median() * 1e-9, Some(base.p1() * 1e-9)),
                None,
            ));
        }
    }
    Ok(rows)
}

/// One round of a bandwidth goal row: perftest's `test` at `size`, `iters` messages, with
/// perftest's defaults otherwise (send queue 128, CQ moderation 100, one work request per
/// post), on a fresh stack.
fn bw_round(cx: &Context<'_>, test: Test, size: u64, iters: u64) -> Result<(f64, f64), String> {
    let args = PerftestArgs {
        size: Some(size),
        iters: Some(iters),
        cpus: cx.plan.cpus,
        target: cx.target.clone(),
        ..PerftestArgs::default()
    };
    match perftest::measure_sizes(test, &args, None, StackConfig::default())?
        .first()
        .map(|m| &m.row)
    {
        Some(Row::Bandwidth {
            bw_average,
            msg_rate_mpps,
            ..
        }) => Ok((bw_average * 1_048_576.0 / 1e9, *msg_rate_mpps)),
        _ => Err(format!("{} produced no bandwidth row", test.name())),
    }
}

/// write_bw 64 KiB against memcpy 64 KiB, in alternating rounds.
fn write_bw_goal_row(cx: &Context<'_>) -> Result<BenchRow, String> {
    const SIZE: u64 = 64 << 10;
    let iters = cx.plan.bw_iters(SIZE);
    let b = cx.plan.round_budget() / 2;
    let rounds: Vec<Round> = alternate(
        cx.plan.rounds,
        |_| bw_round(cx, Test::WriteBw, SIZE, iters).map(|(gbs, _)| Stat::plain(gbs)),
        |_| Ok(Stat::rates(&baseline::memcpy_rate(SIZE as usize, b), 1e-9)),
    )?
    .into_iter()
    .map(|(value, base)| Round { value, base })
    .collect();
    Ok(BenchRow::from_rounds(
        "bandwidth, polling",
        "write_bw 64 KiB (BW average)",
        "GB/s",
        "memcpy 64 KiB",
        &rounds,
        Some(Goal::AtLeast(0.95)),
    )
    .with_note("each round: perftest's BW average of one run beside the median memcpy rate"))
}

/// The limit row's name of the SPSC ring.
fn ring_name(cpus: Option<(usize, usize)>) -> String {
    let what = format!(
        "SPSC ring message rate, {} slots of 64 B",
        baseline::RING_SLOTS
    );
    match cpus {
        Some((rx, tx)) => format!("{what}, CPUs {tx}→{rx}"),
        None => format!("{what}, unpinned"),
    }
}

/// send_bw 64 B as perftest runs it (`send_bw -s 64`: send queue 128, CQ moderation 100, one
/// work request per post), its message rate beside the SPSC ring's between the same two CPUs
/// (the sender where send_bw's client runs, the receiver where its server runs), in
/// alternating rounds.
fn message_rate(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    const SIZE: u64 = 64;
    let iters = 2 * cx.plan.bw_iters(SIZE);
    let (b, cpus) = (cx.plan.round_budget(), cx.plan.cpus);
    let cx = &*cx;
    let rounds: Vec<Round> = alternate(
        cx.plan.rounds,
        |_| bw_round(cx, Test::SendBw, SIZE, iters).map(|(_, mpps)| Stat::plain(mpps)),
        |_| Ok(Stat::rates(&baseline::spsc_ring_rate(b, cpus), 1e-6)),
    )?
    .into_iter()
    .map(|(value, base)| Round { value, base })
    .collect();
    Ok(vec![
        BenchRow::from_rounds(
            "bandwidth, polling",
            "send_bw 64 B message rate (perftest defaults: tx depth 128, CQ moderation 100, post list 1)",
            "M msg/s",
            ring_name(cpus),
            &rounds,
            Some(Goal::AtLeast(0.25)),
        )
        .with_note(format!(
            "each round: {iters} messages of send_bw (its MsgRate) beside the ring's median \
             rate over batches of {} messages",
            baseline::RING_BATCH
        )),
    ])
}

/// The event path broken down: send_lat -e 2 B with the host model's probe on.
fn notify_path(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    wv_host::probe::enable(true);
    let args = PerftestArgs {
        size: Some(2),
        iters: Some(cx.plan.lat_iters(2, true)),
        events: true,
        cpus: cx.plan.cpus,
        target: cx.target.clone(),
        ..PerftestArgs::default()
    };
    let r = perftest::measure_sizes(Test::SendLat, &args, None, StackConfig::default());
    let traces = wv_host::probe::take();
    wv_host::probe::enable(false);
    r?;
    if traces.is_empty() {
        return Err("no event was traced".into());
    }
    let stage = |f: &dyn Fn(&wv_host::probe::NotifyTrace) -> u64| {
        Measured::new(traces.iter().map(|t| f(t) as f64).collect())
    };
    let stages: [(&str, Measured, bool); 6] = [
        (
            "interrupt → ISR queued the DPC",
            stage(&|t| t.dpc_queued - t.interrupt),
            false,
        ),
        (
            "DPC queued → DPC running",
            stage(&|t| t.dpc_started - t.dpc_queued),
            false,
        ),
        (
            "DPC → driver core completes the request",
            stage(&|t| t.completed - t.dpc_started),
            false,
        ),
        (
            "completion → waiter woken (status set, unpark)",
            stage(&|t| t.wake_issued - t.completed),
            false,
        ),
        (
            "wake → waiting thread runs",
            stage(&|t| t.woken - t.wake_issued),
            true,
        ),
        (
            "interrupt → waiting thread runs (total)",
            stage(&|t| t.woken - t.interrupt),
            true,
        ),
    ];
    let mutex = stat(&cx.limits.mutex);
    let futex = stat(&cx.limits.futex_cross);
    let mut rows = Vec::new();
    for (name, m, wake) in &stages {
        let (base_text, base) = if *wake {
            (cx.placed("futex wake cross-CPU, one way"), futex)
        } else {
            (MUTEX_ROW.to_owned(), mutex)
        };
        rows.push(
            BenchRow::new(
                "notify path",
                format!("notify: {name}"),
                m.median(),
                Some(m.p99()),
                "ns",
                base_text,
                base,
                None,
            )
            .with_note(format!("{} events traced", m.samples.len())),
        );
    }
    cx.cdfs.push(Cdf {
        file: "cdf-notify-path",
        title: "Event path: interrupt → waiting thread runs".into(),
        curves: vec![
            (
                "interrupt → waiter runs".into(),
                stages[5].1.samples.clone(),
            ),
            ("wake → waiter runs".into(), stages[4].1.samples.clone()),
            (
                "futex wake cross-CPU".into(),
                cx.limits.futex_cross.samples.clone(),
            ),
        ],
    });
    Ok(rows)
}

/// An IOCTL the driver completes inline (GUID_QUERY), timed per call.
struct InlineIoctl {
    iters: usize,
}

impl TargetTask for InlineIoctl {
    type Output = Result<Measured, String>;
    fn run<O: Opener>(self, opener: &O, _device: Option<DeviceSpec>) -> Self::Output {
        let file = opener.open_file().map_err(|e| e.0)?;
        let code = wv_abi::ioctl::Ioctl::GuidQuery.code();
        for _ in 0..1000 {
            let _ = file.device_io_control(code, &[], 64).wait();
        }
        let mut stamps = baseline::stamp_buffer(self.iters + 1);
        for _ in 0..self.iters {
            stamps.push(Instant::now());
            let io = file.device_io_control(code, &[], 64);
            if io.pending() {
                return Err("GUID_QUERY did not complete inline".into());
            }
            let _ = io.wait();
        }
        stamps.push(Instant::now());
        Ok(Measured::new(
            stamps
                .windows(2)
                .map(|w| (w[1] - w[0]).as_nanos() as f64)
                .collect(),
        ))
    }
}

fn inline_ioctl(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    let iters = if cx.plan.quick { 20_000 } else { 200_000 } / cx.plan.rounds;
    let b = cx.plan.round_budget();
    let cx = &*cx;
    let pairs = alternate(
        cx.plan.rounds,
        |_| {
            let (target, device) =
                Target::open(cx.target, StackConfig::default()).map_err(|e| e.0)?;
            target.run(InlineIoctl { iters }, device)
        },
        |_| Ok(baseline::mutex_lock_unlock(b)),
    )?;
    let rounds: Vec<Round> = pairs
        .iter()
        .map(|(m, mutex)| Round {
            value: Stat::times(m, 1.0),
            base: Stat::times(mutex, 1.0),
        })
        .collect();
    Ok(vec![
        BenchRow::from_rounds(
            "control path",
            "inline IOCTL round trip (GUID_QUERY)",
            "ns",
            MUTEX_ROW,
            &rounds,
            Some(Goal::AtMost(60.0)),
        )
        .with_note(format!(
            "{iters} calls a round, each timed alone (one clock read, {:.0} ns, in each sample)",
            cx.limits.clock.median()
        )),
    ])
}

/// The firmware command latency of the QP-transition rows. The soft HCA keeps
/// `wv_softhca::DEFAULT_COMMAND_SLOTS` commands in flight (as mlx4/mlx5 firmware takes several),
/// more than the rows' 8, so each modify in flight is at the device for its whole latency.
const COMMAND_LATENCY_NS: u64 = 20_000;

fn qp_transitions(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    // Enough cycles that a round is not only thread start-up (a quick round of instant
    // commands is still a few milliseconds).
    let cycles = if cx.plan.quick { 6 } else { 10 };
    let cx = &*cx;
    let rate = |mode, threads: usize, in_flight: usize, latency: u64| -> Result<f64, String> {
        let config = StackConfig {
            qp_modify: mode,
            // Enough workers for every modify in flight to be at the device at once.
            workers: 8,
            command_latency_ns: latency,
            ..StackConfig::default()
        };
        let (target, device) = Target::open(cx.target, config).map_err(|e| e.0)?;
        target.run(
            ModifyTask {
                qps: 32,
                rounds: cycles,
                overlap: Overlap::Window { threads, in_flight },
            },
            device,
        )
    };
    // Asynchronous against inline modifies with the same threads, in alternating rounds: one
    // thread keeps 8 asynchronous modifies in flight (inline ones go one at a time), 8 threads
    // keep one each.
    let versus = |threads: usize, latency: u64| -> Result<Vec<Round>, String> {
        let in_flight = if threads == 1 { 8 } else { 1 };
        Ok(alternate(
            cx.plan.rounds,
            |_| rate(QpModifyMode::Async, threads, in_flight, latency).map(Stat::plain),
            |_| rate(QpModifyMode::Inline, threads, 1, latency).map(Stat::plain),
        )?
        .into_iter()
        .map(|(value, base)| Round { value, base })
        .collect())
    };
    // What "async" names: the driver's default mode, in which a modify goes to a work item
    // unless the device's commands measure far shorter than a hand-off to one.
    const ASYNC_NOTE: &str = "async is the driver's default mode: each modify on a work item, \
        or in the caller's thread while eight of the device's commands measure shorter than a \
        hand-off to a worker (instant commands, once both are measured)";
    let mut rows = Vec::new();
    let us = COMMAND_LATENCY_NS / 1000;
    let slots = wv_softhca::DEFAULT_COMMAND_SLOTS;
    let one_20us = versus(1, COMMAND_LATENCY_NS)?;
    // What 8 modifies in flight allow when each is at the device for a whole command: the
    // same async rounds, against that bound.
    const IN_FLIGHT: u64 = 8;
    let bound = IN_FLIGHT as f64 * 1e9 / COMMAND_LATENCY_NS as f64;
    let against_bound: Vec<Round> = one_20us
        .iter()
        .map(|r| Round {
            value: r.value,
            base: Stat::plain(bound),
        })
        .collect();
    rows.push(BenchRow::from_rounds(
        "control path",
        format!("QP transitions/s, async, 1 thread, {IN_FLIGHT} in flight, {us} µs commands, {slots} slots"),
        "/s",
        format!("the in-flight limit: {IN_FLIGHT} in flight ÷ {us} µs per command"),
        &against_bound,
        Some(Goal::AtLeast(0.5)),
    ));
    rows.push(BenchRow::from_rounds(
        "control path",
        format!(
            "QP transitions/s, async vs inline, 1 thread, {IN_FLIGHT} in flight, {us} µs commands, {slots} slots"
        ),
        "/s",
        format!("QP_MODIFY inline (as OFW), 1 thread, {us} µs commands, {slots} slots"),
        &one_20us,
        Some(Goal::AtLeast(1.0)),
    ));
    for (threads, latency) in [(8, COMMAND_LATENCY_NS), (1, 0), (8, 0)] {
        let commands = if latency == 0 {
            "instant commands".to_owned()
        } else {
            format!("{us} µs commands, {slots} slots")
        };
        let how = if threads == 1 {
            "1 thread, 8 in flight".to_owned()
        } else {
            format!("{threads} threads")
        };
        rows.push(
            BenchRow::from_rounds(
                "control path",
                format!("QP transitions/s, async vs inline, {how}, {commands}"),
                "/s",
                format!(
                    "QP_MODIFY inline, {threads} thread{}, {commands}",
                    if threads == 1 { "" } else { "s" }
                ),
                &versus(threads, latency)?,
                Some(Goal::AtLeast(1.0)),
            )
            .with_note(ASYNC_NOTE),
        );
    }
    Ok(rows)
}

/// The connection-rate rows: one connection after the other through the endpoint IOCTLs
/// (`wvharness conn -t 1`: endpoint, bind, route, QP, CONNECT, ACCEPT, DISCONNECT, with a
/// server thread taking each), per-connection median and 99th percentile as rates, beside the
/// TCP loopback limit in alternating rounds; and the tail of the connection time against its
/// own median.
fn connection_rate(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    let n = if cx.plan.quick { 200 } else { 2000 };
    let b = cx.plan.round_budget();
    let cx = &*cx;
    let pairs = alternate(
        cx.plan.rounds,
        |_| crate::summary::measure_connections(cx.target, n),
        |_| Ok(baseline::tcp_loopback_connect(b)),
    )?;
    let rate: Vec<Round> = pairs
        .iter()
        .map(|(r, tcp)| Round {
            value: Stat {
                mid: 1e6 / r.total.p50_us,
                tail: Some(1e6 / r.total.p99_us),
            },
            base: Stat {
                mid: 1e9 / tcp.median(),
                tail: Some(1e9 / tcp.p99()),
            },
        })
        .collect();
    let tail: Vec<Round> = pairs
        .iter()
        .map(|(r, _)| Round {
            value: Stat::plain(r.total.p99_us),
            base: Stat::plain(r.total.p50_us),
        })
        .collect();
    let p50 = |f: fn(&crate::conn::ConnResult) -> f64| {
        rounds::median(&pairs.iter().map(|(r, _)| f(r)).collect::<Vec<_>>())
    };
    Ok(vec![
        BenchRow::from_rounds(
            "control path",
            "connection rate (connect+accept+disconnect)",
            "/s",
            "TCP loopback connect+accept+close",
            &rate,
            Some(Goal::AtLeast(0.5)),
        )
        .with_note(format!(
            "{n} connections a round; p50 µs: setup {:.0}, connect {:.0}, establish {:.0}, \
             disconnect {:.0}",
            p50(|r| r.setup.p50_us),
            p50(|r| r.connect.p50_us),
            p50(|r| r.establish.p50_us),
            p50(|r| r.disconnect.p50_us)
        )),
        BenchRow::from_rounds(
            "control path",
            "connection time, 99th percentile",
            "µs",
            "its median (the same connections)",
            &tail,
            Some(Goal::AtMost(5.0)),
        ),
    ])
}

/// Our stack against a baseline that drives the soft HCA's data path and its interrupt
/// without the driver core, with the same loop and work requests (`direct.rs`). The two
/// alternate in rounds (stack, direct, direct, stack, …), each round on fresh devices, and
/// each round gives one ratio of per-iteration medians; the first tenth of each round's
/// samples (caches and branch predictors warming up) is left out on both sides. Held to "no
/// difference" (±2 %), so the row also gives the 95 % interval of the ratio, and meets its
/// goal only if that interval excludes a cost above 2 %.
fn filter_overhead(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    let warm = |v: Vec<f64>| Measured::new(v[v.len() / 10..].to_vec());
    let cpus = cx.plan.cpus;
    let mut rows = Vec::new();
    for events in [false, true] {
        let iters = cx.plan.lat_iters(2, events) / 2;
        let args = PerftestArgs {
            size: Some(2),
            iters: Some(iters),
            events,
            cpus,
            target: cx.target.clone(),
            ..PerftestArgs::default()
        };
        let rounds: Vec<Round> = alternate(
            cx.plan.overhead_rounds,
            |_| {
                let m =
                    perftest::measure_sizes(Test::SendLat, &args, None, StackConfig::default())?;
                Ok(Stat::times(
                    &warm(m.into_iter().flat_map(|m| m.iteration_ns).collect()),
                    1.0,
                ))
            },
            |_| {
                Ok(Stat::times(
                    &warm(super::direct::send_lat(&args)?.samples),
                    1.0,
                ))
            },
        )?
        .into_iter()
        .map(|(value, base)| Round { value, base })
        .collect();
        let goal = Goal::Within(0.02);
        let row = BenchRow::from_rounds(
            "filter overhead",
            format!(
                "send_lat{} 2 B through the driver (per-iteration median)",
                if events { " -e" } else { "" }
            ),
            "ns",
            cx.placed(if events {
                "the soft HCA driven directly, its DPC waking the waiter"
            } else {
                "the soft HCA driven directly, polling"
            }),
            &rounds,
            Some(goal),
        )
        .with_interval(&rounds, goal);
        let note = row.interval.as_ref().map(|i| {
            format!(
                "{iters} iterations a side a round; 95 % interval of the ratio {:.3}–{:.3} \
                 (Student t on the per-round log-ratios)",
                i.low, i.high
            )
        });
        rows.push(match note {
            Some(n) => row.with_note(n),
            None => row,
        });
    }
    Ok(rows)
}

/// The glue's IOCTL round trip on the emulated KMDF against the same through the host model.
fn glue_row(_cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    Ok(vec![super::glue::row()])
}
