//! `bench --json`'s rows: what each compares with. Shapes only: no figure is asserted (goals
//! are reported, never enforced).

mod common;

use common::json;

fn rows(only: &str) -> Vec<serde_json::Value> {
    let v = json(&["bench", "--quick", "--json", "--only", only]);
    v["rows"].as_array().expect("rows").clone()
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
    assert!(
        sw["name"].as_str().unwrap().contains("a round trip is two"),
        "{sw}"
    );
    assert_eq!(sw["unit"], "switches");
    assert!(
        sw["baseline"]
            .as_str()
            .unwrap()
            .starts_with("futex wake cross-CPU: context switches per wake")
    );
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
        let base = r["baseline"].as_str().unwrap();
        assert!(base.starts_with("read_lat polling "), "{r}");
        assert!(!base.contains("futex"), "{r}");
        assert!(r["goal"].is_null(), "{r}");
    }
}
