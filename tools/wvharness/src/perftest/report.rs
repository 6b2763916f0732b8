//! perftest's report math and text, so that our latency and bandwidth output parses with the
//! same column headers and means the same numbers as `ib_*_lat` / `ib_*_bw`.
//!
//! perftest works in CPU cycles; we time with a monotonic nanosecond clock, so one "cycle" here
//! is one nanosecond (1000 per microsecond, 10^9 per second). Everything else — the trimming of
//! the two largest samples, the median rule, the integer-truncated deviations of the standard
//! deviation, the percentile indices, the MiB (2^20 bytes) versus Gb (10^9 bits) factors, the
//! peak window search — follows perftest's `print_report_lat` and `print_report_bw`.

use std::fmt::Write as _;

/// The separator line perftest prints around the results.
pub const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------";

/// Latency column headers (`RESULT_FMT_LAT`).
pub const RESULT_FMT_LAT: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";

/// Latency column headers in duration mode (`RESULT_FMT_LAT_DUR`, with `-D`).
pub const RESULT_FMT_LAT_DUR: &str = " #bytes        #iterations       t_avg[usec]    tps average";

/// Bandwidth column headers in MiB/s (`RESULT_FMT`).
pub const RESULT_FMT_BW: &str =
    " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]";

/// Bandwidth column headers in Gb/s (`RESULT_FMT_G`, with `--report_gbits`).
pub const RESULT_FMT_BW_GBITS: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";

/// Samples perftest drops from the top of the sorted latencies (`LAT_MEASURE_TAIL`).
const LAT_MEASURE_TAIL: usize = 2;

/// Nanoseconds per microsecond: our "cycles per usec".
const NS_PER_USEC: f64 = 1000.0;

/// Nanoseconds per second: our "cycles per second".
const NS_PER_SEC: f64 = 1_000_000_000.0;

/// One latency row.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyRow {
    /// Message size.
    pub bytes: u64,
    /// Iterations run.
    pub iterations: u64,
    /// Smallest sample, µs.
    pub t_min: f64,
    /// Largest kept sample, µs (after dropping the top two).
    pub t_max: f64,
    /// Median, µs.
    pub t_typical: f64,
    /// Mean, µs.
    pub t_avg: f64,
    /// Standard deviation as perftest computes it, µs.
    pub t_stdev: f64,
    /// 99th percentile, µs.
    pub p99: f64,
    /// 99.9th percentile, µs.
    pub p99_9: f64,
}

/// Which side of a round trip a latency test measures: send and write latency tests report half
/// of a ping-pong round trip, read (and atomic) tests the whole operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RttFactor {
    /// Report half the interval between posts (`ib_send_lat`, `ib_write_lat`).
    HalfRoundTrip = 2,
    /// Report the whole interval (`ib_read_lat`).
    Whole = 1,
}

/// Computes a latency row from the post timestamps (ns) of one run, as `print_report_lat`:
/// sample `i` is `posted[i + 1] - posted[i]`. Returns `None` with fewer than
/// `LAT_MEASURE_TAIL + 2` timestamps (perftest requires at least 5 iterations).
pub fn latency_row(bytes: u64, posted_ns: &[u64], rtt: RttFactor) -> Option<LatencyRow> {
    if posted_ns.len() < LAT_MEASURE_TAIL + 2 {
        return None;
    }
    let mut delta: Vec<u64> = posted_ns
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .collect();
    delta.sort_unstable();
    let measure_cnt = delta.len() - LAT_MEASURE_TAIL;
    let quotient = NS_PER_USEC * rtt as u8 as f64;
    let median = median(measure_cnt, &delta);
    let average = delta[..measure_cnt]
        .iter()
        .map(|&d| d as f64 / quotient)
        .sum::<f64>()
        / measure_cnt as f64;
    // perftest truncates each deviation, and its square, to an int before summing.
    let stdev_sum: f64 = delta[..measure_cnt]
        .iter()
        .map(|&d| {
            let deviation = (average - d as f64 / quotient) as i64;
            (deviation * deviation) as f64
        })
        .sum();
    let index_99 = ((measure_cnt as f64) * 0.99).ceil() as usize;
    let index_99_9 = ((measure_cnt as f64) * 0.999).ceil() as usize;
    Some(LatencyRow {
        bytes,
        iterations: posted_ns.len() as u64,
        t_min: delta[0] as f64 / quotient,
        t_max: delta[measure_cnt] as f64 / quotient,
        t_typical: median as f64 / quotient,
        t_avg: average,
        t_stdev: (stdev_sum / measure_cnt as f64).sqrt(),
        p99: delta[index_99.min(delta.len() - 1)] as f64 / quotient,
        p99_9: delta[index_99_9.min(delta.len() - 1)] as f64 / quotient,
    })
}

/// perftest's median of the first `n` sorted samples (its `get_median`, integer arithmetic).
fn median(n: usize, delta: &[u64]) -> u64 {
    if n == 0 {
        return delta[0];
    }
    if (n - 1) % 2 == 1 {
        (delta[n / 2] + delta[n / 2 - 1]) / 2
    } else {
        delta[n / 2]
    }
}

/// Formats a latency row exactly as `REPORT_FMT_LAT` does (without the trailing newline).
pub fn format_latency_row(row: &LatencyRow) -> String {
    format!(
        " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
        row.bytes,
        row.iterations,
        row.t_min,
        row.t_max,
        row.t_typical,
        row.t_avg,
        row.t_stdev,
        row.p99,
        row.p99_9
    )
}

/// One latency row of a duration run (`-D`): the mean over the sampling window.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyDurationRow {
    /// Message size.
    pub bytes: u64,
    /// Iterations completed in the sampling window.
    pub iterations: u64,
    /// Mean latency, µs (half the round trip for send/write, as `print_report_lat_duration`).
    pub t_avg: f64,
    /// Transactions per second.
    pub tps: f64,
}

/// Computes a duration-mode latency row from the sampling window's length and iteration count.
pub fn latency_duration_row(
    bytes: u64,
    iterations: u64,
    window_ns: u64,
    rtt: RttFactor,
) -> LatencyDurationRow {
    let window = window_ns.max(1) as f64;
    let iters = iterations.max(1) as f64;
    LatencyDurationRow {
        bytes,
        iterations,
        t_avg: window / NS_PER_USEC / f64::from(rtt as u8) / iters,
        tps: iterations as f64 / (window / NS_PER_SEC),
    }
}

/// Formats a duration-mode latency row exactly as `REPORT_FMT_LAT_DUR` does.
pub fn format_latency_duration_row(row: &LatencyDurationRow) -> String {
    format!(
        " {:<7}       {}            {:<7.2}        {:<7.2}",
        row.bytes, row.iterations, row.t_avg, row.tps
    )
}

/// Bandwidth units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BwUnits {
    /// MiB/s (2^20 bytes per second), perftest's default.
    MibPerSec,
    /// Gb/s (10^9 bits per second), `--report_gbits`.
    GbitPerSec,
}

impl BwUnits {
    /// Bytes per second in one unit (perftest's `format_factor`).
    fn factor(self) -> f64 {
        match self {
            BwUnits::MibPerSec => 1_048_576.0,
            BwUnits::GbitPerSec => 125_000_000.0,
        }
    }
    /// The column headers for these units.
    pub fn header(self) -> &'static str {
        match self {
            BwUnits::MibPerSec => RESULT_FMT_BW,
            BwUnits::GbitPerSec => RESULT_FMT_BW_GBITS,
        }
    }
}

/// One bandwidth row.
#[derive(Clone, Debug, PartialEq)]
pub struct BandwidthRow {
    /// Message size.
    pub bytes: u64,
    /// Messages.
    pub iterations: u64,
    /// Best rate over any window of consecutive messages, in the chosen units (0 with `-N`).
    pub bw_peak: f64,
    /// Average rate, in the chosen units.
    pub bw_avg: f64,
    /// Million messages per second.
    pub msg_rate: f64,
}

/// Computes a bandwidth row as `print_report_bw` does, from each message's post and completion
/// timestamps (ns), with every completion timestamp meaningful (CQ moderation 1). `peak` false
/// is perftest's `-N`.
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "the benchmarks use the moderated form")
)]
pub fn bandwidth_row(
    bytes: u64,
    posted_ns: &[u64],
    completed_ns: &[u64],
    units: BwUnits,
    peak: bool,
) -> Option<BandwidthRow> {
    bandwidth_row_moderated(bytes, posted_ns, completed_ns, 1, units, peak)
}

/// [`bandwidth_row`] for a run with CQ moderation `cq_mod`: only every `cq_mod`-th message (index
/// `k * cq_mod - 1`) and the last one are signalled, so only those completion timestamps are
/// real, and perftest's peak search looks at exactly those (`j = ROUND_UP(i + 1, cq_mod) - 1`,
/// stepping by `cq_mod`, plus the last message).
pub fn bandwidth_row_moderated(
    bytes: u64,
    posted_ns: &[u64],
    completed_ns: &[u64],
    cq_mod: usize,
    units: BwUnits,
    peak: bool,
) -> Option<BandwidthRow> {
    let iters = posted_ns.len().min(completed_ns.len());
    if iters == 0 {
        return None;
    }
    let cq_mod = cq_mod.max(1);
    let format_factor = units.factor();
    // With -N perftest records only the end time; the last completion is that same instant.
    let test_ns = completed_ns[iters - 1].saturating_sub(posted_ns[0]).max(1) as f64;
    let bw_avg = bytes as f64 * iters as f64 * NS_PER_SEC / (test_ns * format_factor);
    let msg_rate = iters as f64 * NS_PER_SEC / (test_ns * 1_000_000.0);
    let bw_peak = if peak {
        // The smallest per-message time over every window [i, j] ending at a signalled
        // message, in integer nanoseconds (perftest divides integer cycles).
        let per_msg =
            |i: usize, j: usize| completed_ns[j].saturating_sub(posted_ns[i]) / (j - i + 1) as u64;
        let mut opt_delta = u64::MAX;
        for i in 0..iters {
            let mut j = (i + 1).div_ceil(cq_mod) * cq_mod - 1;
            while j < iters {
                opt_delta = opt_delta.min(per_msg(i, j));
                j += cq_mod;
            }
            if !iters.is_multiple_of(cq_mod) {
                opt_delta = opt_delta.min(per_msg(i, iters - 1));
            }
        }
        (bytes as f64 * NS_PER_SEC) / (opt_delta.max(1) as f64 * format_factor)
    } else {
        0.0
    };
    Some(BandwidthRow {
        bytes,
        iterations: iters as u64,
        bw_peak,
        bw_avg,
        msg_rate,
    })
}

/// Formats a bandwidth row exactly as `REPORT_FMT` does (without the trailing newline).
pub fn format_bandwidth_row(row: &BandwidthRow) -> String {
    format!(
        " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t     {:<7.6}",
        row.bytes, row.iterations, row.bw_peak, row.bw_avg, row.msg_rate
    )
}

/// Formats a bandwidth row as perftest prints it in `units`: with `--report_gbits` an average
/// below 0.1 Gb/s switches to the extended format (`REPORT_FMT_EXT`, six decimals), so small
/// messages do not print as 0.00.
pub fn format_bandwidth_row_in(row: &BandwidthRow, units: BwUnits) -> String {
    if units == BwUnits::GbitPerSec && row.bw_avg < 0.1 {
        format!(
            " {:<7}    {}           {:<7.6}            {:<7.6}            {:<7.6}",
            row.bytes, row.iterations, row.bw_peak, row.bw_avg, row.msg_rate
        )
    } else {
        format_bandwidth_row(row)
    }
}

/// perftest's header block (`ctx_print_test_info`, the lines that apply to us).
pub struct TestInfo<'a> {
    /// "Send", "RDMA_Write" or "RDMA_Read".
    pub verb: &'a str,
    /// Latency or bandwidth test.
    pub latency: bool,
    /// Device name.
    pub device: &'a str,
    /// "RC", "UC" or "UD".
    pub connection: &'a str,
    /// Whether an SRQ is used.
    pub srq: bool,
    /// Send queue depth.
    pub tx_depth: u32,
    /// Receive queue depth (send tests).
    pub rx_depth: Option<u32>,
    /// CQ moderation (bandwidth tests).
    pub cq_mod: Option<u32>,
    /// The CQE poll batch of a bandwidth test: `None` when it is dynamic.
    pub cqe_poll: Option<u16>,
    /// Whether perftest announces `Disabling dynamic polling` (printed while it parses the
    /// options, so before the header).
    pub disabling_notice: bool,
    /// Whether perftest warns that the peak is not measured (also printed while it parses
    /// the options: the first line of the output).
    pub peak_warning: bool,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// Inline size (send/write) or outstanding reads (read).
    pub inline_or_outstanding: u32,
    /// Whether completions are waited for with CQ events (`-e`).
    pub events: bool,
    /// The port's link layer as perftest names it ("IB" or "Ethernet").
    pub link: &'a str,
}

/// Formats the header block that precedes the results.
pub fn format_test_info(info: &TestInfo<'_>) -> String {
    let mut out = String::new();
    let kind = if info.latency { "Latency" } else { "BW" };
    // perftest's force_dependecies prints it while checking duration mode. It never comes
    // with the dynamic-polling notice: a duration bandwidth run keeps dynamic polling.
    if info.peak_warning {
        let _ = writeln!(out, "{}", super::PEAK_WARNING);
    }
    if info.disabling_notice {
        let _ = writeln!(out, "Disabling dynamic polling");
    }
    let _ = writeln!(out, "{RESULT_LINE}");
    let _ = writeln!(out, "                    {} {} Test", info.verb, kind);
    if info.events {
        let _ = writeln!(out, " Test with events. Using {}_comp0", info.device);
    }
    let _ = writeln!(
        out,
        " Dual-port       : OFF\t\tDevice         : {}",
        info.device
    );
    let _ = writeln!(out, " Number of qps   : 1\t\tTransport type : IB");
    let _ = writeln!(
        out,
        " Connection type : {}\t\tUsing SRQ      : {}",
        info.connection,
        if info.srq { "ON" } else { "OFF" }
    );
    // No PCIe below a soft HCA: relaxed ordering is unsupported (perftest's line without RO
    // support); locks kept; the classic post verbs, not ibv_wr_*.
    let _ = writeln!(
        out,
        " PCIe relax order: Unsupported\t\tLock-free      : OFF"
    );
    let _ = writeln!(
        out,
        " ibv_wr* API     : OFF\t\tUsing Enhanced Reorder      : OFF"
    );
    // The report is the client's (the measuring side), which prints its TX depth; the RX
    // depth is the server's line.
    let _ = writeln!(out, " TX depth        : {}", info.tx_depth);
    if let Some(rx) = info.rx_depth {
        let _ = writeln!(out, " RX depth        : {rx}");
    }
    if let Some(cq_mod) = info.cq_mod {
        let _ = writeln!(out, " CQ Moderation   : {cq_mod}");
        match info.cqe_poll {
            None => {
                let _ = writeln!(out, " CQE Poll Batch  : Dynamic");
            }
            Some(n) => {
                let _ = writeln!(out, " CQE Poll Batch  : {n}");
            }
        }
    }
    let _ = writeln!(out, " Mtu             : {}[B]", info.mtu);
    let _ = writeln!(out, " Link type       : {}", info.link);
    // On RoCE perftest picks GID index 0 itself and says so.
    if info.link == "Ethernet" {
        let _ = writeln!(out, " GID index       : 0");
    }
    if info.verb == "RDMA_Read" {
        let _ = writeln!(out, " Outstand reads  : {}", info.inline_or_outstanding);
    } else {
        let _ = writeln!(out, " Max inline data : {}[B]", info.inline_or_outstanding);
    }
    let _ = writeln!(out, " rdma_cm QPs\t : OFF");
    let _ = writeln!(out, " Data ex. method : Ethernet");
    let _ = write!(out, "{RESULT_LINE}");
    out
}

/// The `test_info` object perftest's `--out_json` writes (`write_test_info_to_file`), as
/// perftest writes it: one member per line, in its order, with its names and its quirks (the
/// space before `PCIe_relax_order` in a build without relaxed-ordering support).
pub fn json_test_info(info: &TestInfo<'_>) -> String {
    let mut out = String::new();
    let kind = if info.latency { "Latency" } else { "BW" };
    let _ = writeln!(out, "\"test_info\": {{");
    let _ = writeln!(out, "\"test\": \"{}_{kind}_Test\",", info.verb);
    if info.events {
        let _ = writeln!(
            out,
            "\"Test with events\": \"Using_{}_comp0\",",
            info.device
        );
    }
    let _ = writeln!(
        out,
        "\"Dual_port\": \"OFF\",\n\"Device\": \"{}\",",
        info.device
    );
    let _ = writeln!(out, "\"Number_of_qps\": 1,\n\"Transport_type\": \"IB\",");
    let _ = writeln!(
        out,
        "\"Connection_type\": \"{}\",\n\"Using_SRQ\": \"{}\",",
        info.connection,
        if info.srq { "ON" } else { "OFF" }
    );
    let _ = writeln!(out, " \"PCIe_relax_order\": \"Unsupported\",");
    let _ = writeln!(out, "\"ibv_wr_API\": \"OFF\",");
    let _ = writeln!(out, "\"TX_depth\": {},", info.tx_depth);
    if let Some(rx) = info.rx_depth {
        let _ = writeln!(out, "\"RX_depth\": {rx},");
    }
    if let Some(cq_mod) = info.cq_mod {
        let _ = writeln!(out, "\"CQ_Moderation\": {cq_mod},");
    }
    let _ = writeln!(out, "\"Mtu\": {},", info.mtu);
    let _ = writeln!(out, "\"Link_type\": \"{}\",", info.link);
    if info.link == "Ethernet" {
        let _ = writeln!(out, "\"GID_index\": 0,");
    }
    if info.verb == "RDMA_Read" {
        let _ = writeln!(out, "\"Outstand_reads\": {},", info.inline_or_outstanding);
    } else {
        let _ = writeln!(out, "\"Max_inline_data\": {},", info.inline_or_outstanding);
    }
    let _ = writeln!(out, "\"rdma_cm_QPs\": \"OFF\",");
    let _ = writeln!(out, "\"Use_ROCm_memory\": \"OFF\",");
    let _ = writeln!(out, "\"Use_MUSA_memory\": \"OFF\",");
    let _ = write!(out, "\"Data_ex_method\": \"Ethernet\"");
    let _ = writeln!(out, "\n}},");
    out
}

/// The whole file perftest's `--out_json` writes for one report: `{`, the test info, the
/// results of one size (`REPORT_FMT_LAT_JSON`, `REPORT_FMT_LAT_DUR_JSON`, `REPORT_FMT_JSON`
/// or, below 0.1 Gb/s with `--report_gbits`, `REPORT_FMT_EXT_JSON`), `}`.
pub fn json_report(test_info: &str, row: &super::Row) -> String {
    let mut out = String::from("{\n");
    out.push_str(test_info);
    out.push_str("\"results\": {\n");
    match row {
        super::Row::Latency {
            bytes,
            iterations,
            t_min,
            t_max,
            t_typical,
            t_avg,
            t_stdev,
            percentile_99,
            percentile_99_9,
        } => {
            let _ = write!(
                out,
                "\"MsgSize\": {bytes},\n\"n_iterations\": {iterations},\n\"t_min\": {t_min:.2},\n\"t_max\": {t_max:.2},\n\"t_typical\": {t_typical:.2},\n\"t_avg\": {t_avg:.2},\n\"t_stdev\": {t_stdev:.2},\n\"percentile_99\": {percentile_99:.2},\n\"percentile_99.9\": {percentile_99_9:.2}"
            );
        }
        super::Row::LatencyDuration {
            bytes,
            iterations,
            t_avg,
            tps_average,
        } => {
            let _ = write!(
                out,
                "\"MsgSize\": {bytes},\n\"n_iterations\": {iterations},\n\"t_avg\": {t_avg:.2},\n\"tps_average\": {tps_average:.2}"
            );
        }
        super::Row::Bandwidth {
            bytes,
            iterations,
            bw_peak,
            bw_average,
            msg_rate_mpps,
            units,
        } => {
            if *units == "Gb/sec" && *bw_average < 0.1 {
                let _ = write!(
                    out,
                    "\"MsgSize\": {bytes},\n\"n_iterations\": {iterations},\n\"BW_peak\": {bw_peak:.6},\n\"BW_average\": {bw_average:.6},\n\"MsgRate\": {msg_rate_mpps:.6}"
                );
            } else {
                let _ = write!(
                    out,
                    "\"MsgSize\": {bytes},\n\"n_iterations\": {iterations},\n\"BW_peak\": {bw_peak:.2},\n\"BW_average\": {bw_average:.2},\n\"MsgRate\": {msg_rate_mpps:.6}"
                );
            }
        }
    }
    out.push_str("\n}\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Post times 0, 10, 30, 60, … µs give samples 10, 20, 30, … µs.
    fn ramp(n: u64) -> Vec<u64> {
        let mut t = 0;
        (0..n)
            .map(|i| {
                t += i * 10_000;
                t
            })
            .collect()
    }

    #[test]
    fn latency_trims_the_two_largest_samples_and_halves_round_trips() {
        // 6 posts → samples 10..50 µs (5 samples); drop 2 → 10, 20, 30 kept.
        let row = latency_row(2, &ramp(6), RttFactor::Whole).unwrap();
        assert_eq!(row.iterations, 6);
        assert_eq!(row.t_min, 10.0);
        assert_eq!(
            row.t_max, 40.0,
            "t_max is delta[measure_cnt], one past the kept samples"
        );
        assert_eq!(row.t_typical, 20.0);
        assert_eq!(row.t_avg, 20.0);
        // deviations 10, 0, -10 → squares 100, 0, 100 → sqrt(200/3)
        assert!((row.t_stdev - (200.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(row.p99, 40.0, "ceil(3 * 0.99) = 3");
        let half = latency_row(2, &ramp(6), RttFactor::HalfRoundTrip).unwrap();
        assert_eq!(half.t_typical, 10.0);
    }

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_pair() {
        // 7 posts → 6 samples, 4 kept: 10, 20, 30, 40 → (20 + 30) / 2
        let row = latency_row(2, &ramp(7), RttFactor::Whole).unwrap();
        assert_eq!(row.t_typical, 25.0);
    }

    #[test]
    fn sub_microsecond_jitter_prints_zero_deviation_as_perftest_does() {
        let posted: Vec<u64> = (0..100u64).map(|i| i * 1_000 + (i % 3) * 100).collect();
        let row = latency_row(2, &posted, RttFactor::Whole).unwrap();
        assert_eq!(row.t_stdev, 0.0);
    }

    #[test]
    fn too_few_samples_give_no_row() {
        assert!(latency_row(2, &[0, 1, 2], RttFactor::Whole).is_none());
    }

    #[test]
    fn latency_row_text_matches_perftest_format() {
        let row = LatencyRow {
            bytes: 2,
            iterations: 1000,
            t_min: 1.0,
            t_max: 2.5,
            t_typical: 1.25,
            t_avg: 1.3,
            t_stdev: 0.1,
            p99: 2.0,
            p99_9: 2.4,
        };
        assert_eq!(
            format_latency_row(&row),
            " 2       1000          1.00           2.50         1.25     \t       1.30        \t0.10   \t\t2.00    \t\t2.40   "
        );
    }

    #[test]
    fn bandwidth_average_peak_and_rate() {
        // 4 messages of 1 MiB, each posted at 0 and completed 1 ms apart: 4 MiB in 4 ms.
        let posted = [0, 0, 0, 0];
        let completed = [1_000_000, 2_000_000, 3_000_000, 4_000_000];
        let row = bandwidth_row(1 << 20, &posted, &completed, BwUnits::MibPerSec, true).unwrap();
        assert!((row.bw_avg - 1000.0).abs() < 1e-9);
        assert!((row.msg_rate - 0.001).abs() < 1e-12);
        // Best window: any [0, j] gives 1 ms per message → 1000 MiB/s.
        assert!((row.bw_peak - 1000.0).abs() < 1e-9);
        let gbits =
            bandwidth_row(1 << 20, &posted, &completed, BwUnits::GbitPerSec, false).unwrap();
        assert_eq!(gbits.bw_peak, 0.0);
        // 4 MiB in 4 ms, in Gb/s.
        assert!((gbits.bw_avg - 1_048_576.0 * 1000.0 / 125_000_000.0).abs() < 1e-9);
    }

    #[test]
    fn moderated_peak_only_looks_at_signalled_completions() {
        // 4 messages, cq_mod 2: only completions 1 and 3 are real; 0 and 2 are never written.
        let posted = [0, 10, 20, 30];
        let completed = [0, 1_000, 0, 2_000];
        let row = bandwidth_row_moderated(1000, &posted, &completed, 2, BwUnits::MibPerSec, true)
            .unwrap();
        // Best window: [0, 1] or [0, 3] → 500 ns per message; the zero timestamps of the
        // unsignalled messages 0 and 2 (which would give 0 ns) are never looked at.
        let want = 1000.0 * 1e9 / (500.0 * 1_048_576.0);
        assert!(
            (row.bw_peak - want).abs() < 1e-9,
            "{} vs {want}",
            row.bw_peak
        );
    }

    #[test]
    fn duration_row_text_matches_perftest_format() {
        let row = latency_duration_row(2, 1000, 4_000_000, RttFactor::HalfRoundTrip);
        assert_eq!(row.t_avg, 2.0);
        assert_eq!(row.tps, 250_000.0);
        assert_eq!(
            format_latency_duration_row(&row),
            " 2             1000            2.00           250000.00"
        );
    }

    #[test]
    fn report_gbits_switches_to_the_extended_format_below_a_tenth() {
        let row = BandwidthRow {
            bytes: 2,
            iterations: 5000,
            bw_peak: 0.050986,
            bw_avg: 0.048851,
            msg_rate: 3.053158,
        };
        assert_eq!(
            format_bandwidth_row_in(&row, BwUnits::GbitPerSec),
            " 2          5000           0.050986            0.048851            3.053158"
        );
        let fast = BandwidthRow {
            bw_avg: 0.5,
            ..row.clone()
        };
        assert_eq!(
            format_bandwidth_row_in(&fast, BwUnits::GbitPerSec),
            format_bandwidth_row(&fast)
        );
        assert_eq!(
            format_bandwidth_row_in(&row, BwUnits::MibPerSec),
            format_bandwidth_row(&row)
        );
    }

    #[test]
    fn bandwidth_row_text_matches_perftest_format() {
        let row = BandwidthRow {
            bytes: 65536,
            iterations: 5000,
            bw_peak: 1234.5,
            bw_avg: 1200.25,
            msg_rate: 0.019204,
        };
        assert_eq!(
            format_bandwidth_row(&row),
            " 65536      5000             1234.50            1200.25\t\t     0.019204"
        );
    }
}
