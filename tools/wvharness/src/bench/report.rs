//! The forms of a benchmark run: a table line per row, the report directory (JSON, latency
//! CDFs as SVG, PERFORMANCE.md).

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use plotters::prelude::*;

use super::{BenchRow, BenchRun, Cdf};

/// A number with the precision its size deserves.
fn num(v: f64) -> String {
    if !v.is_finite() {
        "—".into()
    } else if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), num)
}

/// The ratio as text: `3.21×`.
fn ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "—".into(), |r| format!("{r:.2}×"))
}

/// The spread of a row measured in rounds, and its interval: `rounds 5: 2.10–2.60×; 95 % CI
/// 0.98–1.03×`.
fn spread(r: &BenchRow) -> String {
    let mut t = String::new();
    if let Some(s) = &r.spread {
        let _ = write!(
            t,
            "{} rounds: {:.2}–{:.2}×",
            s.rounds, s.ratio[0], s.ratio[1]
        );
    }
    if let Some(i) = &r.interval {
        let _ = write!(t, "; 95 % CI {:.3}–{:.3}×", i.low, i.high);
    }
    t
}

fn met(m: Option<bool>) -> &'static str {
    match m {
        Some(true) => "met",
        Some(false) => "NOT MET",
        None => "",
    }
}

/// One line of the text table.
pub fn text_row(r: &BenchRow) -> String {
    let value = match (r.value, r.p99) {
        (Some(v), Some(p)) => format!("{} {} (p99 {})", num(v), r.unit, num(p)),
        (Some(v), None) => format!("{} {}", num(v), r.unit),
        (None, _) => "not measured".into(),
    };
    if r.baseline_value.is_none() && r.ratio.is_none() && r.goal.is_none() {
        return format!("  {:<62} {:>28}", r.name, value);
    }
    let base = match (r.baseline_value, r.baseline_p99) {
        (Some(v), Some(p)) => format!("{} (p99 {})", num(v), num(p)),
        (Some(v), None) => num(v),
        (None, _) => "—".into(),
    };
    let goal = r
        .goal
        .as_ref()
        .map(|g| format!("goal {g} {}", met(r.met)))
        .unwrap_or_default();
    let spread = spread(r);
    let goal = if spread.is_empty() {
        goal
    } else {
        format!("{goal} ({spread})")
    };
    let mut line = format!(
        "  {:<62} {:>28}  vs {:>22}  [{}]  = {:>8}  {}",
        r.name,
        value,
        base,
        r.baseline,
        ratio(r.ratio),
        goal
    );
    if r.value.is_none()
        && let Some(n) = &r.note
    {
        let _ = write!(line, " ({n})");
    }
    line
}

/// The folder under the report directory that holds the JSON and the SVGs.
const FIGURES: &str = "perf";

/// Writes `PERFORMANCE.md` into `dir`, and `bench.json` and one SVG per CDF into `dir/perf/`.
pub fn write_dir(dir: &Path, run: &BenchRun, notes: Option<&Path>) -> io::Result<()> {
    let figures = dir.join(FIGURES);
    std::fs::create_dir_all(&figures)?;
    let json = serde_json::to_string_pretty(run).map_err(io::Error::other)?;
    std::fs::write(figures.join("bench.json"), json + "\n")?;
    for cdf in &run.cdfs {
        draw_cdf(&figures.join(format!("{}.svg", cdf.file)), cdf)?;
    }
    let notes = match notes {
        Some(p) => Some(std::fs::read_to_string(p)?),
        None => None,
    };
    std::fs::write(dir.join("PERFORMANCE.md"), markdown(run, notes.as_deref()))?;
    Ok(())
}

/// A latency CDF: x = nanoseconds (log scale), y = fraction of samples at or below.
fn draw_cdf(path: &Path, cdf: &Cdf) -> io::Result<()> {
    let err = |e: String| io::Error::other(format!("drawing {}: {e}", path.display()));
    let all: Vec<f64> = cdf
        .curves
        .iter()
        .flat_map(|(_, s)| s.iter().copied())
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    if all.is_empty() {
        return Ok(());
    }
    let lo = all.iter().copied().fold(f64::MAX, f64::min).max(1.0) * 0.9;
    // The 99.9th percentile of each curve bounds the plot, so one outlier does not squash it.
    let hi = cdf
        .curves
        .iter()
        .filter(|(_, s)| !s.is_empty())
        .map(|(_, s)| s[((s.len() as f64 * 0.999) as usize).min(s.len() - 1)])
        .fold(lo * 2.0, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&cdf.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..1f64)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("nanoseconds (log scale)")
        .y_desc("fraction of iterations")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    let colors = [RED, BLUE, GREEN, MAGENTA, BLACK, CYAN];
    for (i, (label, samples)) in cdf.curves.iter().enumerate() {
        if samples.is_empty() {
            continue;
        }
        let n = samples.len();
        // At most 2000 points per curve.
        let step = (n / 2000).max(1);
        let points: Vec<(f64, f64)> = samples
            .iter()
            .enumerate()
            .step_by(step)
            .map(|(k, &v)| (v.clamp(lo, hi), (k + 1) as f64 / n as f64))
            .collect();
        let color = colors[i % colors.len()];
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

fn md_row(r: &BenchRow) -> String {
    let value = match r.value {
        Some(v) => format!("{} {}", num(v), r.unit),
        None => "not measured".into(),
    };
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        r.name,
        value,
        opt(r.p99),
        r.baseline,
        opt(r.baseline_value),
        opt(r.baseline_p99),
        ratio(r.ratio),
        r.goal.clone().unwrap_or_default(),
        met(r.met)
    )
}

/// PERFORMANCE.md: the run's identity, every row by group, the CDFs, then the notes.
pub fn markdown(run: &BenchRun, notes: Option<&str>) -> String {
    let mut s = String::new();
    let r = &run.run;
    let _ = writeln!(s, "# Performance\n");
    let _ = writeln!(
        s,
        "Generated by `wvharness bench{} --out docs --notes docs/performance-notes.md` from \
         commit `{}` on {}, on {} ({}). Every figure in the tables and plots comes from that one \
         run (its rows are in `{FIGURES}/bench.json`); every ratio divides by a limit measured \
         in the same run (a per-iteration median, with its 99th percentile beside it); a goal \
         row and its limit are measured in alternating rounds, the ratio being the median of \
         the per-round ratios, with their range beside it. Goals are \
         reported, never enforced. The machine is shared with other builds, so absolute numbers \
         drift between runs; the ratios drift less. Run time {:.0} s.\n",
        if r.quick { " --quick" } else { "" },
        r.commit,
        r.date,
        r.machine,
        match r.cpus {
            Some((a, b)) =>
                format!("latency benchmarks pinned to CPUs {a} (server) and {b} (client)"),
            None => "unpinned".into(),
        },
        run.seconds
    );
    let goals: Vec<&BenchRow> = run.rows.iter().filter(|r| r.met.is_some()).collect();
    let _ = writeln!(s, "## Goals\n");
    let _ = writeln!(
        s,
        "| row | value | baseline | baseline value | ratio | spread across rounds | goal | |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for g in &goals {
        let _ = writeln!(
            s,
            "| {} | {} {} | {} | {} | {} | {} | {} | {} |",
            g.name,
            opt(g.value),
            g.unit,
            g.baseline,
            opt(g.baseline_value),
            ratio(g.ratio),
            spread(g),
            g.goal.clone().unwrap_or_default(),
            met(g.met)
        );
    }
    for r in run.rows.iter().filter(|r| r.value.is_none()) {
        let _ = writeln!(
            s,
            "| {} | not measured | {} | {} | — | — | {} | ({}) |",
            r.name,
            r.baseline,
            opt(r.baseline_value),
            r.goal.clone().unwrap_or_default(),
            r.note.clone().unwrap_or_default()
        );
    }
    let mut group = "";
    for row in &run.rows {
        if row.group != group {
            group = row.group;
            let _ = writeln!(s, "\n## {}\n", capitalise(group));
            let _ = writeln!(
                s,
                "| row | value | p99 | baseline | baseline value | baseline p99 | ratio | goal | |"
            );
            let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
        }
        let _ = writeln!(s, "{}", md_row(row));
    }
    if !run.errors.is_empty() {
        let _ = writeln!(s, "\n## Parts that failed to run\n");
        for e in &run.errors {
            let _ = writeln!(s, "- {e}");
        }
    }
    if !run.cdfs.is_empty() {
        let _ = writeln!(s, "\n## Latency distributions\n");
        for c in &run.cdfs {
            let _ = writeln!(s, "![{}]({FIGURES}/{}.svg)\n", c.title, c.file);
        }
    }
    if let Some(n) = notes {
        let _ = writeln!(s, "\n{}", n.trim_end());
    }
    s
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
