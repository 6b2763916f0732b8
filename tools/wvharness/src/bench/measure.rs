//! The parts of `wvharness bench`, each measuring a group of rows beside its limits.

use std::time::{Duration, Instant};

use wv_client::raw::{RawFile, RawIo};
use wv_core::QpModifyMode;
use wv_inproc::StackConfig;

use super::{BenchRow, Cdf, Goal};
use crate::baseline::{self, Measured};
use crate::perftest::{self, Measurement, PerftestArgs, Row, Test};
use crate::qp_cycle::{self, CyclingQps};
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
}

impl Plan {
    /// The plan for a full or quick run.
    pub fn new(quick: bool) -> Plan {
        Plan {
            quick,
            limit_budget: Duration::from_millis(if quick { 150 } else { 1000 }),
            cpus: baseline::bench_cpus(),
        }
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
    /// This run's in-process polling send_lat 2 B (t_typical and p99, ns): the baseline of the
    /// two-process row.
    send_lat_2b: Option<(f64, Option<f64>)>,
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
            send_lat_2b: None,
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
        ("notify path", notify_path),
        ("inline IOCTL round trip", inline_ioctl),
        ("QP transitions", qp_transitions),
        ("connection rate", connection_rate),
        ("filter overhead", filter_overhead),
        #[cfg(target_os = "linux")]
        ("two processes through wvd", two_processes),
    ]
}

/// Perftest's binaries between two processes through the device service, beside this run's
/// in-process send_lat 2 B and memcpy 64 KiB.
#[cfg(target_os = "linux")]
fn two_processes(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    let send_lat = match cx.send_lat_2b {
        Some(s) => s,
        None => {
            // The latency part did not run (--only): measure the baseline here.
            let args = PerftestArgs {
                size: Some(2),
                iters: Some(cx.plan.lat_iters(2, false)),
                cpus: cx.plan.cpus,
                target: cx.target.clone(),
                ..PerftestArgs::default()
            };
            let sizes = [(2, cx.plan.lat_iters(2, false))];
            let m = perftest::measure_sizes(
                Test::SendLat,
                &args,
                Some(&sizes),
                StackConfig::default(),
            )?;
            match m.first().map(|m| &m.row) {
                Some(Row::Latency {
                    t_typical,
                    percentile_99,
                    ..
                }) => (t_typical * 1000.0, Some(percentile_99 * 1000.0)),
                _ => return Err("no in-process send_lat 2 B".into()),
            }
        }
    };
    let memcpy = cx
        .limits
        .memcpy_at(64 << 10)
        .ok_or("no memcpy 64 KiB limit")?
        .clone();
    super::two_process::rows(cx.plan.quick, send_lat, &memcpy)
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
        if test == Test::SendLat && !events && bytes == 2 {
            cx.send_lat_2b = Some((t_typical * 1000.0, Some(percentile_99 * 1000.0)));
        }
        let goal = match (test, events, bytes) {
            (Test::SendLat, false, 2) => Some(Goal::AtMost(4.0)),
            (Test::SendLat, true, 2) => Some(Goal::AtMost(1.2)),
            _ => None,
        };
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
            goal,
        ));
        if test == Test::SendLat && bytes == 2 {
            let samples = Measured::new(m.iteration_ns.clone());
            if events {
                rows.push(switches_row(cx, &m));
                // Nobody spins in event mode, so both sides may share a CPU: each message is
                // then a hand-off on one CPU, the same-CPU futex wake's case.
                if let Some((_, c)) = cx.plan.cpus {
                    let args = PerftestArgs {
                        size: Some(2),
                        iters: Some(cx.plan.lat_iters(2, true)),
                        events: true,
                        cpus: Some((c, c)),
                        target: cx.target.clone(),
                        ..PerftestArgs::default()
                    };
                    let one = perftest::measure_sizes(
                        Test::SendLat,
                        &args,
                        None,
                        StackConfig::default(),
                    )?;
                    if let Some(Row::Latency {
                        t_typical,
                        percentile_99,
                        ..
                    }) = one.first().map(|m| &m.row)
                    {
                        rows.push(BenchRow::new(
                            "latency, events",
                            format!("send_lat -e 2 B (t_typical), both sides on CPU {c}"),
                            t_typical * 1000.0,
                            Some(percentile_99 * 1000.0),
                            "ns",
                            format!("futex wake same CPU ({c}), one way"),
                            stat(&cx.limits.futex_same),
                            Some(Goal::AtMost(2.0)),
                        ));
                    }
                }
                cx.cdfs.push(Cdf {
                    file: "cdf-send-lat-events",
                    title: "send_lat -e 2 B vs futex wake (one way)".into(),
                    curves: vec![
                        ("send_lat -e 2 B".into(), samples.samples.clone()),
                        (
                            "futex wake cross-CPU".into(),
                            cx.limits.futex_cross.samples.clone(),
                        ),
                        (
                            "futex wake same CPU".into(),
                            cx.limits.futex_same.samples.clone(),
                        ),
                    ],
                });
            } else {
                cx.cdfs.push(Cdf {
                    file: "cdf-send-lat-polling",
                    title: "send_lat 2 B vs cache-line ping-pong (one way)".into(),
                    curves: vec![
                        ("send_lat 2 B".into(), samples.samples.clone()),
                        (
                            "cache-line ping-pong".into(),
                            cx.limits.cache_line.samples.clone(),
                        ),
                    ],
                });
            }
        }
    }
    Ok(rows)
}

/// Messages of a send_lat run of `iterations`: each iteration is a round trip, two messages
/// (one send and its completion is a message).
fn messages(iterations: u64) -> u64 {
    2 * iterations
}

/// Context switches per message of event-mode send_lat, beside the futex ping-pong's switches
/// per wake counted the same way (the whole process, over the timed part).
fn switches_row(cx: &Context<'_>, m: &perftest::Measurement) -> BenchRow {
    const NAME: &str = "send_lat -e 2 B: context switches per message (a message is one send \
                        and its completion; a round trip is two)";
    const BASE: &str = "futex wake cross-CPU: context switches per wake";
    let Row::Latency { iterations, .. } = m.row else {
        unreachable!("a latency row")
    };
    let per_message = m
        .context_switches
        .map(|n| n as f64 / messages(iterations) as f64);
    match (per_message, cx.limits.futex_switches) {
        (Some(v), Some(base)) => BenchRow::new(
            "latency, events",
            NAME,
            v,
            None,
            "switches",
            cx.placed(BASE),
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
            name: NAME.into(),
            value: None,
            p99: None,
            unit: "switches",
            baseline: cx.placed(BASE),
            baseline_value: cx.limits.futex_switches,
            baseline_p99: None,
            ratio: None,
            goal: Some(Goal::AtMost(1.1).text()),
            met: None,
            note: Some("this system's /proc does not count context switches".into()),
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
            let goal = (test == Test::WriteBw && bytes == 64 << 10).then_some(Goal::AtLeast(0.8));
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
                goal,
            ));
        }
    }
    Ok(rows)
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
    let (target, device) = Target::open(cx.target, StackConfig::default()).map_err(|e| e.0)?;
    let m = target.run(
        InlineIoctl {
            iters: if cx.plan.quick { 20_000 } else { 200_000 },
        },
        device,
    )?;
    Ok(vec![
        BenchRow::new(
            "control path",
            "inline IOCTL round trip (GUID_QUERY)",
            m.median(),
            Some(m.p99()),
            "ns",
            MUTEX_ROW,
            stat(&cx.limits.mutex),
            Some(Goal::AtMost(60.0)),
        )
        .with_note(format!(
            "{} calls, each timed alone (one clock read, {:.0} ns, in each sample)",
            m.samples.len(),
            cx.limits.clock.median()
        )),
    ])
}

/// QP transitions per second: `qps` RC QPs cycled RESET → INIT → RTR → RTS → RESET by
/// `threads` threads, each keeping `in_flight` modifies outstanding (overlapped requests).
struct ModifyTask {
    qps: usize,
    rounds: usize,
    threads: usize,
    in_flight: usize,
}

impl TargetTask for ModifyTask {
    type Output = Result<f64, String>;

    fn run<O: Opener>(self, opener: &O, device: Option<DeviceSpec>) -> Self::Output {
        let rig = CyclingQps::open(opener, device, self.qps)?;
        let (qps, e) = (&rig.qps, qp_cycle::context);
        let per_thread = qps.len().div_ceil(self.threads.max(1));
        let started = Instant::now();
        let transitions = std::thread::scope(|s| {
            let handles: Vec<_> = qps
                .chunks(per_thread)
                .map(|mine| {
                    let rig = &rig;
                    s.spawn(move || -> Result<u64, String> {
                        // A sliding window: `in_flight` modifies outstanding at every moment
                        // (each QP's own modifies stay in order: the driver runs them FIFO).
                        let mut window = std::collections::VecDeque::new();
                        let mut n = 0u64;
                        for _ in 0..self.rounds {
                            for step in 0..qp_cycle::STEPS {
                                for qp in mine {
                                    let attr = rig.attr(step, qp);
                                    window
                                        .push_back(qp.modify_async(&attr).map_err(e("QP_MODIFY"))?);
                                    if window.len() >= self.in_flight.max(1)
                                        && let Some(p) = window.pop_front()
                                    {
                                        p.wait().map_err(e("QP_MODIFY"))?;
                                        n += 1;
                                    }
                                }
                            }
                        }
                        for p in window {
                            p.wait().map_err(e("QP_MODIFY"))?;
                            n += 1;
                        }
                        Ok(n)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a modify thread panicked".into()))
                })
                .sum::<Result<u64, String>>()
        })?;
        Ok(transitions as f64 / started.elapsed().as_secs_f64())
    }
}

/// The firmware command latency of the QP-transition rows. The soft HCA keeps
/// `wv_softhca::DEFAULT_COMMAND_SLOTS` commands in flight (as mlx4/mlx5 firmware takes several),
/// more than the rows' 8, so each modify in flight is at the device for its whole latency.
const COMMAND_LATENCY_NS: u64 = 20_000;

fn qp_transitions(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    let rounds = if cx.plan.quick { 2 } else { 10 };
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
                rounds,
                threads,
                in_flight,
            },
            device,
        )
    };
    let mut rows = Vec::new();
    let us = COMMAND_LATENCY_NS / 1000;
    let slots = wv_softhca::DEFAULT_COMMAND_SLOTS;
    // One thread: inline modifies are one at a time; asynchronous ones 8 in flight.
    let inline1 = rate(QpModifyMode::Inline, 1, 1, COMMAND_LATENCY_NS)?;
    let async1 = rate(QpModifyMode::Async, 1, 8, COMMAND_LATENCY_NS)?;
    rows.push(BenchRow::new(
        "control path",
        format!("QP transitions/s, async, 1 thread, 8 in flight, {us} µs commands, {slots} slots"),
        async1,
        None,
        "/s",
        format!("QP_MODIFY inline (as OFW), 1 thread, {us} µs commands, {slots} slots"),
        (inline1, None),
        Some(Goal::AtLeast(4.0)),
    ));
    // Several threads: 8 threads with one modify each in flight, both ways.
    let inline8 = rate(QpModifyMode::Inline, 8, 1, COMMAND_LATENCY_NS)?;
    let async8 = rate(QpModifyMode::Async, 8, 1, COMMAND_LATENCY_NS)?;
    rows.push(BenchRow::new(
        "control path",
        format!("QP transitions/s, async, 8 threads, {us} µs commands, {slots} slots"),
        async8,
        None,
        "/s",
        format!("QP_MODIFY inline, 8 threads, {us} µs commands, {slots} slots"),
        (inline8, None),
        None,
    ));
    // Commands answered at once (the data-path benchmarks' device): the work-item hop alone.
    let inline0 = rate(QpModifyMode::Inline, 1, 1, 0)?;
    let async0 = rate(QpModifyMode::Async, 1, 8, 0)?;
    rows.push(BenchRow::new(
        "control path",
        "QP transitions/s, async, 1 thread, 8 in flight, instant commands",
        async0,
        None,
        "/s",
        "QP_MODIFY inline, 1 thread, instant commands",
        (inline0, None),
        None,
    ));
    Ok(rows)
}

/// The connection-rate row: one connection after the other through the endpoint IOCTLs
/// (`wvharness conn -t 1`: endpoint, bind, route, QP, CONNECT, ACCEPT, DISCONNECT, with a
/// server thread taking each), per-connection median and 99th percentile as rates, beside the
/// TCP loopback limit.
fn connection_rate(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    let n = if cx.plan.quick { 200 } else { 2000 };
    let r = crate::summary::measure_connections(cx.target, n)?;
    let tcp = &cx.limits.tcp;
    let mut row = BenchRow::new(
        "control path",
        "connection rate (connect+accept+disconnect)",
        1e6 / r.total.p50_us,
        Some(1e6 / r.total.p99_us),
        "/s",
        "TCP loopback connect+accept+close",
        (1e9 / tcp.median(), Some(1e9 / tcp.p99())),
        Some(Goal::AtLeast(0.5)),
    );
    row.note = Some(format!(
        "{n} connections; p50 µs: setup {:.0}, connect {:.0}, establish {:.0}, disconnect {:.0}",
        r.setup.p50_us, r.connect.p50_us, r.establish.p50_us, r.disconnect.p50_us
    ));
    Ok(vec![row])
}

/// Our stack against a baseline that drives the soft HCA's data path and its interrupt
/// without the driver core, with the same loop and work requests (`direct.rs`). The two
/// alternate four times (stack, direct, …), each round on fresh devices with half the
/// iterations, and each side's samples are pooled, so a change in the machine's load hits both
/// alike; the first tenth of each round (caches and branch predictors warming up) is left out
/// of both.
fn filter_overhead(cx: &mut Context<'_>) -> Result<Vec<BenchRow>, String> {
    const ROUNDS: usize = 4;
    let warm = |v: Vec<f64>| v[v.len() / 10..].to_vec();
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
        let (mut ours, mut direct) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let m = perftest::measure_sizes(Test::SendLat, &args, None, StackConfig::default())?;
            ours.extend(warm(m.into_iter().flat_map(|m| m.iteration_ns).collect()));
            direct.extend(warm(super::direct::send_lat(&args)?.samples));
        }
        let (ours, direct) = (Measured::new(ours), Measured::new(direct));
        rows.push(BenchRow::new(
            "filter overhead",
            format!(
                "send_lat{} 2 B through the driver (per-iteration median)",
                if events { " -e" } else { "" }
            ),
            ours.median(),
            Some(ours.p99()),
            "ns",
            cx.placed(if events {
                "the soft HCA driven directly, its DPC waking the waiter"
            } else {
                "the soft HCA driven directly, polling"
            }),
            stat(&direct),
            Some(if events {
                Goal::AtMost(1.2)
            } else {
                Goal::Within(0.02)
            }),
        ));
    }
    Ok(rows)
}
