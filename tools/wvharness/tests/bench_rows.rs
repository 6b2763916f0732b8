//! `bench --json`'s rows: what each compares with. Shapes only: no figure is asserted (goals
//! are reported, never enforced).

mod common;

use common::json;

fn rows(only: &str) -> Vec<serde_json::Value> {
    let v = json(&["bench", "--quick", "--json", "--only", only]);
    v["rows"].as_array().expect("rows").clone()
}

/// The text field `field` of `row` (which must have it).
fn text<'a>(row: &'a serde_json::Value, field: &str) -> &'a str {
    row[field].as_str().unwrap()
}

fn named<'a>(rows: &'a [serde_json::Value], start: &str) -> Vec<&'a serde_json::Value> {
    rows.iter()
        .filter(|r| r["name"].as_str().is_some_and(|n| n.starts_with(start)))
        .collect()
}

#[test]
fn event_rows_count_switches_and_reads_compare_with_polling() {
    let rows = rows("latency, events");
    // The limits always run: the clock read, and the mutex named as the batch mean it is.
    assert_eq!(
        named(&rows, "clock read (Instant::now)").len(),
        1,
        "{rows:?}"
    );
    let mutex = named(&rows, "mutex lock+unlock, uncontended (batch mean");
    assert_eq!(mutex.len(), 1, "{rows:?}");
    // Context switches per message of send_lat -e 2 B, beside the futex's per wake.
    let sw = named(&rows, "send_lat -e 2 B: context switches per message");
    assert_eq!(sw.len(), 1, "{rows:?}");
    let sw = sw[0];
    assert!(text(sw, "name").contains("a round trip is two"), "{sw}");
    assert_eq!(sw["unit"], "switches");
    assert!(text(sw, "baseline").starts_with("futex wake cross-CPU: context switches per wake"));
    assert_eq!(sw["goal"], "≤ 1.1×");
    if std::path::Path::new("/proc/self/task").exists() {
        assert!(sw["value"].as_f64().is_some_and(|v| v >= 0.0), "{sw}");
        assert!(sw["baseline_value"].as_f64().is_some(), "{sw}");
        assert!(sw["met"].is_boolean(), "{sw}");
    }
    // read_lat -e: its wait never sleeps, so it is compared with the polling read of its size.
    let reads = named(&rows, "read_lat -e ");
    assert!(!reads.is_empty(), "{rows:?}");
    for r in reads {
        let base = text(r, "baseline");
        assert!(base.starts_with("read_lat polling "), "{r}");
        assert!(!base.contains("futex"), "{r}");
        assert!(r["goal"].is_null(), "{r}");
    }
}

/// A goal row's rounds: how many, how the ratio is formed, and the ratio inside their range.
fn assert_rounds(r: &serde_json::Value) {
    let s = &r["spread"];
    assert!(s["rounds"].as_u64().is_some_and(|n| n >= 1), "{r}");
    assert_eq!(s["ratio_of"], "median of per-round ratios", "{r}");
    let (lo, hi) = (
        s["ratio"][0].as_f64().unwrap(),
        s["ratio"][1].as_f64().unwrap(),
    );
    let ratio = r["ratio"].as_f64().expect("a ratio");
    assert!(lo <= ratio && ratio <= hi, "{r}");
    assert!(r["met"].is_boolean(), "{r}");
}

#[test]
fn the_message_rate_row_compares_send_bw_with_an_spsc_ring_in_rounds() {
    let rows = rows("message rate");
    // The ring is a limit of its own.
    let limit = named(&rows, "SPSC ring message rate");
    assert_eq!(limit.len(), 1, "{rows:?}");
    assert_eq!(limit[0]["unit"], "M msg/s");
    let row = named(&rows, "send_bw 64 B message rate");
    assert_eq!(row.len(), 1, "{rows:?}");
    let row = row[0];
    assert!(
        text(row, "baseline").starts_with("SPSC ring message rate"),
        "{row}"
    );
    assert_eq!(row["goal"], "≥ 25 %");
    assert_eq!(row["spread"]["rounds"], 5);
    assert_rounds(row);
}

#[test]
fn filter_overhead_rows_give_the_interval_their_goal_needs() {
    let rows = rows("filter overhead");
    let both = named(&rows, "send_lat");
    assert_eq!(both.len(), 2, "{rows:?}");
    for r in both {
        assert_eq!(r["goal"], "±2 %", "{r}");
        assert_rounds(r);
        let i = &r["interval"];
        assert_eq!(i["level"], 0.95, "{r}");
        let (low, high) = (i["low"].as_f64().unwrap(), i["high"].as_f64().unwrap());
        assert!(low <= high, "{r}");
        // Met only if the interval excludes a cost above 2 %.
        if r["met"] == true {
            assert!(high <= 1.02, "{r}");
        }
    }
}

/// Without the emulator's workspace (an installed binary), the glue row keeps its goal and says
/// why it has no number. (Where the workspace is there, the row builds and runs the emulator's
/// benchmark: `tools/wdf-emu/run` and CI's quick bench do that; its parsing is unit-tested.)
#[test]
fn the_glue_row_without_the_emulator_says_why_it_has_no_number() {
    let v = common::json_with(
        &["bench", "--quick", "--json", "--only", "glue"],
        &[("WV_GLUE_WORKSPACE", "/nonexistent/wdf-emu")],
    );
    let rows = v["rows"].as_array().expect("rows").clone();
    let glue = named(&rows, "inline IOCTL round trip through the glue");
    assert_eq!(glue.len(), 1, "{rows:?}");
    let g = glue[0];
    assert!(
        g["value"].is_null() && g["ratio"].is_null() && g["met"].is_null(),
        "{g}"
    );
    assert_eq!(g["goal"], "≤ 1.2×");
    assert!(
        text(g, "note").starts_with("not measured: no emulator workspace at /nonexistent/wdf-emu"),
        "{g}"
    );
}
