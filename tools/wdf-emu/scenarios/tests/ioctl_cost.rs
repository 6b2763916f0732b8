//! What the glue costs: an IOCTL the driver completes inline (GUID_QUERY) timed through the
//! glue on the emulated KMDF and through the host model (wv-inproc, the same driver core
//! without KMDF), in alternating rounds in one sitting.
//!
//! Reporting only, as every benchmark of the project: the test prints the ratio (the median of
//! the per-round ratios of per-call medians), the spread of the per-round ratios and a 95 %
//! Student-t interval on the per-round log-ratios, beside the goal (at most 1.2×); it fails
//! only if a call fails. It is ignored by the workspace's test run (a debug build would time
//! the compiler's unoptimised code) and run by `tools/wdf-emu/run` in release, and by
//! `wvharness bench`, which sets `WV_GLUE_COST_JSON` to a file and reads the per-round
//! figures from it for its glue row.

use std::time::Instant;

use wdf_emu::{EmuStack, EmuStackConfig};
use wdf_emu_scenarios::winverbs_entry;
use wv_client::raw::{RawFile, RawIo};

const ROUNDS: usize = 12;
const CALLS: usize = 4000;
const GOAL: f64 = 1.2;

/// The median and 99th percentile, in ns, of one round's per-call times.
#[derive(Clone, Copy)]
struct RoundTimes {
    median: f64,
    p99: f64,
}

/// Per-call times of `CALLS` GUID_QUERY round trips on `file`.
fn round<F: RawFile>(file: &F) -> RoundTimes {
    let code = wv_abi::ioctl::WV_IOCTL_GUID_QUERY;
    let mut stamps = Vec::with_capacity(CALLS + 1);
    for _ in 0..CALLS {
        stamps.push(Instant::now());
        let status = file.device_io_control(code, &[], 64).wait();
        assert_eq!(status.status, 0, "GUID_QUERY failed");
    }
    stamps.push(Instant::now());
    let mut ns: Vec<f64> = stamps
        .windows(2)
        .map(|w| (w[1] - w[0]).as_nanos() as f64)
        .collect();
    let median = median(&mut ns);
    // `median` sorted `ns`.
    let p99 = ns[(ns.len() * 99).div_ceil(100) - 1];
    RoundTimes { median, p99 }
}

/// The per-round figures as JSON, for `wvharness bench`'s glue row.
fn rounds_json(glue: &[RoundTimes], model: &[RoundTimes]) -> String {
    let rounds: Vec<String> = glue
        .iter()
        .zip(model)
        .map(|(g, m)| {
            format!(
                "{{\"glue_ns\":{},\"glue_p99_ns\":{},\"model_ns\":{},\"model_p99_ns\":{}}}",
                g.median, g.p99, m.median, m.p99
            )
        })
        .collect();
    format!(
        "{{\"calls_per_round\":{CALLS},\"rounds\":[{}]}}\n",
        rounds.join(",")
    )
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The two-sided 97.5 % quantile of Student's t with `ROUNDS - 1` degrees of freedom.
const T_975_DF11: f64 = 2.201;

#[test]
#[ignore = "a benchmark: tools/wdf-emu/run runs it in release"]
fn glue_inline_ioctl_round_trip_against_the_host_model() {
    let emu = EmuStack::new(EmuStackConfig::default(), winverbs_entry()).expect("emulated stack");
    let glue = emu.open().expect("open through the glue");
    let host = wv_inproc::Stack::new(wv_inproc::StackConfig::default());
    let model = host.open().expect("open through the host model");
    // Warm up both paths (allocator, caches, lazily created queues).
    let _ = round(&glue);
    let _ = round(&model);
    let mut ratios = Vec::with_capacity(ROUNDS);
    let (mut glue_rounds, mut model_rounds) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS {
        // Glue first in even rounds, the model first in odd ones: a drift in the machine's
        // load over the sitting falls on both alike.
        let (g, m) = if i % 2 == 0 {
            let g = round(&glue);
            (g, round(&model))
        } else {
            let m = round(&model);
            (round(&glue), m)
        };
        assert!(
            g.median > 0.0 && m.median > 0.0,
            "a round took no time: {} {}",
            g.median,
            m.median
        );
        ratios.push(g.median / m.median);
        glue_rounds.push(g);
        model_rounds.push(m);
    }
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let mean = logs.iter().sum::<f64>() / ROUNDS as f64;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (ROUNDS - 1) as f64;
    let half = T_975_DF11 * (var / ROUNDS as f64).sqrt();
    let (lo, hi) = ratios
        .iter()
        .fold((f64::INFINITY, 0f64), |(l, h), &r| (l.min(r), h.max(r)));
    let ratio = median(&mut ratios.clone());
    let mut glue_ns: Vec<f64> = glue_rounds.iter().map(|r| r.median).collect();
    let mut model_ns: Vec<f64> = model_rounds.iter().map(|r| r.median).collect();
    if let Some(path) = std::env::var_os("WV_GLUE_COST_JSON") {
        std::fs::write(&path, rounds_json(&glue_rounds, &model_rounds))
            .expect("writing the per-round figures to WV_GLUE_COST_JSON");
    }
    println!(
        "glue IOCTL round trip (GUID_QUERY, inline): {:.0} ns through the glue on the emulated \
         KMDF vs {:.0} ns through the host model = {ratio:.2}× (median of {ROUNDS} per-round \
         ratios, {lo:.2}–{hi:.2}×; 95 % CI {:.2}–{:.2}×, Student t on the per-round \
         log-ratios); goal ≤ {GOAL}× {}",
        median(&mut glue_ns),
        median(&mut model_ns),
        (mean - half).exp(),
        (mean + half).exp(),
        if ratio <= GOAL { "met" } else { "NOT MET" }
    );
    drop(glue);
    drop(model);
    emu.unload().assert_clean();
}
