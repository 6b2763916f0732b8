//! The glue row: an inline IOCTL through the driver glue on the emulated KMDF against the same
//! IOCTL through the host model.
//!
//! The glue builds only in the emulator's own workspace (`tools/wdf-emu`, with the WDF bindings
//! generated there), so this crate cannot link it. The row runs that workspace's benchmark
//! (`scenarios/tests/ioctl_cost.rs`, release) in a child `cargo test`, which alternates the
//! two paths round by round in one process and writes each round's figures to the file named
//! by `WV_GLUE_COST_JSON`; the row is formed from those rounds like every other goal row. Where
//! the source tree or cargo is not there (an installed binary), or the build fails, the row
//! says so instead of a number.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::rounds::{Round, Stat};
use super::{BenchRow, Goal};

const NAME: &str = "inline IOCTL round trip through the glue on the emulated KMDF";
const BASELINE: &str = "the same IOCTL through the host model (wv-inproc), alternating rounds";
const GOAL: Goal = Goal::AtMost(1.2);

/// The emulator's workspace: `WV_GLUE_WORKSPACE` if set (a binary installed away from its
/// checkout names one; a directory without the benchmark leaves the row unmeasured), else the
/// one of the checkout this binary was built from.
fn workspace() -> PathBuf {
    match std::env::var_os("WV_GLUE_WORKSPACE") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../wdf-emu"),
    }
}

/// The row, measured, or with the reason it could not be.
pub fn row() -> BenchRow {
    match measure(&workspace()) {
        Ok(rounds) => BenchRow::from_rounds(
            "control path",
            NAME,
            "ns",
            BASELINE,
            &rounds,
            Some(GOAL),
        )
        .with_interval(&rounds, GOAL)
        .with_note(format!(
            "GUID_QUERY completed inline, {} rounds alternating the two paths in one process; \
             run by tools/wdf-emu's ioctl_cost benchmark (release build)",
            rounds.len()
        )),
        Err(why) => BenchRow {
            group: "control path",
            name: NAME.into(),
            value: None,
            p99: None,
            unit: "ns",
            baseline: BASELINE.into(),
            baseline_value: None,
            baseline_p99: None,
            ratio: None,
            goal: Some(GOAL.text()),
            met: None,
            note: Some(format!("not measured: {why}")),
            spread: None,
            interval: None,
        },
    }
}

fn measure(dir: &Path) -> Result<Vec<Round>, String> {
    if !dir.join("scenarios/tests/ioctl_cost.rs").is_file() {
        return Err(format!("no emulator workspace at {}", dir.display()));
    }
    let out = std::env::temp_dir().join(format!("wv-glue-cost-{}.json", std::process::id()));
    eprintln!("glue row: building and running tools/wdf-emu's ioctl_cost benchmark (release) ...");
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(dir)
        // The emulator's own target directory and flags, as `tools/wdf-emu/run` uses them.
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env("WV_GLUE_COST_JSON", &out)
        .args([
            "test",
            "--locked",
            "--release",
            "-q",
            "-p",
            "wdf-emu-scenarios",
        ])
        .args(["--test", "ioctl_cost", "--", "--ignored", "--exact"])
        .arg("glue_inline_ioctl_round_trip_against_the_host_model")
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    let text = std::fs::read_to_string(&out);
    let _ = std::fs::remove_file(&out);
    if !status.success() {
        return Err(format!("the emulator's benchmark failed ({status})"));
    }
    parse(&text.map_err(|e| format!("the benchmark wrote no figures: {e}"))?)
}

/// The rounds from the benchmark's JSON: the glue is the row's side, the host model the
/// baseline's.
fn parse(text: &str) -> Result<Vec<Round>, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("unreadable figures: {e}"))?;
    let field = |r: &serde_json::Value, k: &str| {
        r.get(k)
            .and_then(serde_json::Value::as_f64)
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| format!("a round without a positive `{k}`"))
    };
    let rounds = v
        .get("rounds")
        .and_then(serde_json::Value::as_array)
        .ok_or("no `rounds` in the figures")?
        .iter()
        .map(|r| {
            Ok(Round {
                value: Stat {
                    mid: field(r, "glue_ns")?,
                    tail: Some(field(r, "glue_p99_ns")?),
                },
                base: Stat {
                    mid: field(r, "model_ns")?,
                    tail: Some(field(r, "model_p99_ns")?),
                },
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    if rounds.len() < 2 {
        return Err(format!("{} rounds; at least 2 are needed", rounds.len()));
    }
    Ok(rounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_become_a_row_with_the_median_ratio_and_its_interval() {
        let rounds = parse(
            r#"{"calls_per_round":4000,"rounds":[
                {"glue_ns":300,"glue_p99_ns":900,"model_ns":100,"model_p99_ns":200},
                {"glue_ns":400,"glue_p99_ns":800,"model_ns":100,"model_p99_ns":300},
                {"glue_ns":500,"glue_p99_ns":700,"model_ns":125,"model_p99_ns":250}]}"#,
        )
        .unwrap();
        let row = BenchRow::from_rounds("g", NAME, "ns", BASELINE, &rounds, Some(GOAL))
            .with_interval(&rounds, GOAL);
        assert_eq!(row.ratio, Some(4.0));
        assert_eq!(row.value, Some(400.0));
        assert_eq!(row.baseline_value, Some(100.0));
        assert_eq!(row.p99, Some(800.0));
        assert_eq!(row.met, Some(false));
        let i = row.interval.expect("an interval from three rounds");
        assert!(i.low < 4.0 && i.high > 3.0, "{i:?}");
    }

    #[test]
    fn figures_with_a_missing_or_zero_time_are_refused() {
        for bad in [
            r#"{"rounds":[{"glue_ns":1,"glue_p99_ns":1,"model_ns":0,"model_p99_ns":1},
                          {"glue_ns":1,"glue_p99_ns":1,"model_ns":1,"model_p99_ns":1}]}"#,
            r#"{"rounds":[{"glue_ns":1,"model_ns":1}]}"#,
            r#"{"rounds":[{"glue_ns":1,"glue_p99_ns":1,"model_ns":1,"model_p99_ns":1}]}"#,
            r#"{"nothing":[]}"#,
            "not json",
        ] {
            assert!(parse(bad).is_err(), "accepted {bad}");
        }
    }

    #[test]
    fn no_workspace_is_a_reason_not_a_number() {
        let err = measure(Path::new("/nonexistent/wdf-emu")).unwrap_err();
        assert!(err.contains("no emulator workspace"), "{err}");
    }
}
