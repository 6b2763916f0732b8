//! `wvharness check`: the conformance suite.
//!
//! Every scenario compares what the driver did against the exact status, `Information` and
//! bytes the spec (`winverbs-spec.md` §2, §3.7, §7.1) and the rdma-core conformance cases
//! (`device-model-and-perftest.md` §6) require, and prints one line:
//!
//! ```text
//! PASS  <name>: <what it checked>
//! FAIL  <name>: <what differed>
//! SKIP  <name>: <why it could not run on this transport>
//! ```
//!
//! then `N passed, M failed` alone on a line. The exit code is non-zero if anything failed.
//!
//! Scenarios are plain functions over a [`target::Env`], so the raw-IOCTL ones run on every
//! transport (the in-process stack and, on Windows, the real `\\.\WinVerbs`). Each scenario runs
//! on its own thread with its own environment (a fresh in-process stack), under a time limit:
//! a request that never completes makes that scenario FAIL instead of hanging the suite.
//!
//! Other commands (the default command's progress bar) use [`run_all`] / [`scenario_names`].

mod abi;
mod atomics;
mod badflow;
mod client_modify;
mod endpoint;
mod env;
mod fixture;
mod lifetime;
mod notify;
mod ports;
mod qp_modify;
mod raw;
mod resize;
mod teardown;
mod traffic;
mod windows;

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

pub use env::CheckTarget;
use env::Env;

use crate::target::TargetArgs;
#[cfg(windows)]
use crate::target::Transport;

/// Options of `wvharness check`.
#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// `--transport` (inproc: a fresh built-in soft HCA stack with 2 devices per scenario;
    /// windows: the real `\\.\WinVerbs`) and `--device` (the device single-device scenarios
    /// use).
    #[command(flatten)]
    pub target: TargetArgs,
    /// Run only the scenarios whose name contains this text.
    #[arg(long)]
    pub filter: Option<String>,
    /// Print a JSON array of `{name, passed, skipped, detail}` instead of lines.
    #[arg(long)]
    pub json: bool,
    /// List the scenario names and exit.
    #[arg(long)]
    pub list: bool,
}

/// How one scenario ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Everything compared equal.
    Pass,
    /// Something differed (the detail says what).
    Fail,
    /// Not applicable on this transport (for instance admin actions on Windows).
    Skip,
}

/// The result of one scenario, as printed and as `--json` reports it.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioResult {
    /// Scenario name (stable; `--filter` matches it).
    pub name: String,
    /// `true` for PASS and SKIP: a skipped scenario does not fail the run.
    pub passed: bool,
    /// `true` for SKIP.
    pub skipped: bool,
    /// What was checked (PASS), what differed (FAIL) or why it was skipped (SKIP).
    pub detail: String,
    /// Verdict (not serialized: `passed`/`skipped` carry it).
    #[serde(skip)]
    pub verdict: Verdict,
}

impl ScenarioResult {
    fn new(name: &str, verdict: Verdict, detail: String) -> Self {
        ScenarioResult {
            name: name.to_string(),
            passed: verdict != Verdict::Fail,
            skipped: verdict == Verdict::Skip,
            detail,
            verdict,
        }
    }

    /// The one human-readable line: `PASS  name: detail`.
    pub fn line(&self) -> String {
        let tag = match self.verdict {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "SKIP",
        };
        format!("{tag}  {}: {}", self.name, self.detail)
    }
}

/// Why a scenario did not pass. `?` on a `Result<_, String>` turns the message into a failure.
#[derive(Debug)]
pub enum Problem {
    /// A comparison failed.
    Fail(String),
    /// The scenario does not apply to this transport.
    Skip(String),
}

impl From<String> for Problem {
    fn from(s: String) -> Self {
        Problem::Fail(s)
    }
}

impl From<&str> for Problem {
    fn from(s: &str) -> Self {
        Problem::Fail(s.to_string())
    }
}

/// What a scenario function returns: the PASS detail, or why not.
pub type Outcome = Result<String, Problem>;

/// One scenario: a name and a function over an environment.
pub struct Scenario<E: Env> {
    /// Stable name.
    pub name: &'static str,
    /// The check.
    pub run: fn(&E) -> Outcome,
}

/// How long one scenario may take before it is declared hung. Every scenario normally takes
/// milliseconds; this only bounds a driver that never completes a request.
const SCENARIO_TIME_LIMIT: Duration = Duration::from_secs(30);

/// Every scenario, in the order they run.
fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    let mut all = Vec::new();
    all.extend(abi::scenarios());
    all.extend(lifetime::scenarios());
    all.extend(notify::scenarios());
    all.extend(ports::scenarios());
    all.extend(qp_modify::scenarios());
    all.extend(client_modify::scenarios());
    all.extend(teardown::scenarios());
    all.extend(badflow::scenarios());
    all.extend(traffic::scenarios());
    all.extend(atomics::scenarios());
    all.extend(windows::scenarios());
    all.extend(resize::scenarios());
    all.extend(endpoint::scenarios());
    all
}

/// Name of the extra result that reports the host verifier's findings after the suite.
pub const VERIFIER_SCENARIO: &str = "host-verifier";

/// The names of the scenarios [`run_all`] runs for `target` (including the final
/// [`VERIFIER_SCENARIO`] line when the target has a verifier), so a caller can size a progress
/// bar before starting.
pub fn scenario_names(target: &CheckTarget) -> Vec<&'static str> {
    let mut names = match target.transport() {
        #[cfg(windows)]
        Transport::Windows => names_of::<env::WindowsEnv>(),
        _ => names_of::<env::InprocEnv>(),
    };
    if target.has_verifier() {
        names.push(VERIFIER_SCENARIO);
    }
    names
}

fn names_of<E: Env>() -> Vec<&'static str> {
    scenarios::<E>().iter().map(|s| s.name).collect()
}

/// Runs the whole suite against `target`, calling `progress` after each scenario (in order),
/// and returns every result, the host verifier's line last. Never panics on a driver fault:
/// a failing or hung scenario is a FAIL result.
pub fn run_all(
    target: &CheckTarget,
    progress: &mut dyn FnMut(&ScenarioResult),
) -> Vec<ScenarioResult> {
    run_filtered(target, None, progress)
}

/// [`run_all`] restricted to the scenarios whose name contains `filter`.
pub fn run_filtered(
    target: &CheckTarget,
    filter: Option<&str>,
    progress: &mut dyn FnMut(&ScenarioResult),
) -> Vec<ScenarioResult> {
    match target.transport() {
        #[cfg(windows)]
        Transport::Windows => run_suite::<env::WindowsEnv>(target, filter, progress),
        // `CheckTarget::new` refuses the Windows transport on other systems.
        _ => run_suite::<env::InprocEnv>(target, filter, progress),
    }
}

fn run_suite<E: Env>(
    target: &CheckTarget,
    filter: Option<&str>,
    progress: &mut dyn FnMut(&ScenarioResult),
) -> Vec<ScenarioResult> {
    let mut results = Vec::new();
    let mut violations = Vec::new();
    let mut checked_envs = 0usize;
    for scenario in scenarios::<E>() {
        if filter.is_some_and(|f| !scenario.name.contains(f)) {
            continue;
        }
        let (result, found) = run_one(target, &scenario, SCENARIO_TIME_LIMIT);
        if let Some(found) = found {
            checked_envs += 1;
            violations.extend(
                found
                    .into_iter()
                    .map(|v| format!("[{}] {v}", scenario.name)),
            );
        }
        progress(&result);
        results.push(result);
    }
    if target.has_verifier() && !results.is_empty() {
        let result = if violations.is_empty() {
            ScenarioResult::new(
                VERIFIER_SCENARIO,
                Verdict::Pass,
                format!(
                    "no KMDF-model violations (double/missing completion, IRQL, locks, leaks) \
                     in the {checked_envs} stacks the scenarios ran on ({})",
                    target.lower_edge_text().unwrap_or("installed driver")
                ),
            )
        } else {
            ScenarioResult::new(
                VERIFIER_SCENARIO,
                Verdict::Fail,
                format!(
                    "{} violation(s): {}",
                    violations.len(),
                    violations.join("; ")
                ),
            )
        };
        progress(&result);
        results.push(result);
    }
    results
}

/// Runs one scenario on its own thread with a fresh environment. Returns the result and the
/// environment's verifier violations (`None` when the scenario never finished, so its
/// environment could not be torn down and inspected).
pub(crate) fn run_one<E: Env>(
    target: &CheckTarget,
    scenario: &Scenario<E>,
    limit: Duration,
) -> (ScenarioResult, Option<Vec<String>>) {
    let (tx, rx) = mpsc::channel();
    let config = target.clone();
    let run = scenario.run;
    let spawned = std::thread::Builder::new()
        .name(format!("check:{}", scenario.name))
        .spawn(move || {
            let outcome = match E::create(&config) {
                Ok(env) => {
                    let outcome = run(&env);
                    let violations = env.finish();
                    (outcome, Some(violations))
                }
                Err(e) => (Err(Problem::Fail(format!("could not set up: {e}"))), None),
            };
            // The receiver may have given up (time limit); nothing to do then.
            let _ = tx.send(outcome);
        });
    if let Err(e) = spawned {
        let r = ScenarioResult::new(
            scenario.name,
            Verdict::Fail,
            format!("could not start a thread: {e}"),
        );
        return (r, None);
    }
    let started = Instant::now();
    match rx.recv_timeout(limit) {
        Ok((outcome, violations)) => {
            let result = match outcome {
                Ok(detail) => ScenarioResult::new(scenario.name, Verdict::Pass, detail),
                Err(Problem::Fail(detail)) => {
                    ScenarioResult::new(scenario.name, Verdict::Fail, detail)
                }
                Err(Problem::Skip(detail)) => {
                    ScenarioResult::new(scenario.name, Verdict::Skip, detail)
                }
            };
            (result, violations)
        }
        // The thread is left behind (a thread cannot be killed); the process exits after the
        // suite anyway. Its stack is never inspected, which the detail says.
        Err(mpsc::RecvTimeoutError::Timeout) => (
            ScenarioResult::new(
                scenario.name,
                Verdict::Fail,
                format!(
                    "did not finish within {} s: a request never completed (or the driver hung)",
                    started.elapsed().as_secs()
                ),
            ),
            None,
        ),
        // The thread ended without sending: it panicked (only possible with unwinding).
        Err(mpsc::RecvTimeoutError::Disconnected) => (
            ScenarioResult::new(scenario.name, Verdict::Fail, "the scenario panicked".into()),
            None,
        ),
    }
}

/// Counts of a result list: (passed, failed, skipped).
pub fn tally(results: &[ScenarioResult]) -> (usize, usize, usize) {
    let count = |v| results.iter().filter(|r| r.verdict == v).count();
    (
        count(Verdict::Pass),
        count(Verdict::Fail),
        count(Verdict::Skip),
    )
}

/// The summary line: `N passed, M failed` (`, K skipped` only when something was skipped).
pub fn summary_line(results: &[ScenarioResult]) -> String {
    let (passed, failed, skipped) = tally(results);
    if skipped == 0 {
        format!("{passed} passed, {failed} failed")
    } else {
        format!("{passed} passed, {failed} failed, {skipped} skipped")
    }
}

/// `wvharness check`.
pub fn run(args: &CheckArgs) -> io::Result<ExitCode> {
    let target = match CheckTarget::new(&args.target) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("wvharness check: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if args.list {
        let mut out = io::stdout().lock();
        for name in scenario_names(&target) {
            writeln!(out, "{name}")?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let filter = args.filter.as_deref();
    let results = if args.json {
        run_filtered(&target, filter, &mut |_| {})
    } else {
        let out = io::stdout();
        let mut write_error = None;
        let results = run_filtered(&target, filter, &mut |r| {
            // Print as we go so a person sees progress; remember a write error (closed pipe)
            // and report it after the suite instead of panicking in the callback.
            if write_error.is_none() {
                let mut lock = out.lock();
                if let Err(e) = writeln!(lock, "{}", r.line()).and_then(|()| lock.flush()) {
                    write_error = Some(e);
                }
            }
        });
        if let Some(e) = write_error {
            return Err(e);
        }
        results
    };
    if results.is_empty() {
        eprintln!(
            "wvharness check: no scenario matches --filter {:?} (see --list)",
            filter.unwrap_or("")
        );
        return Ok(ExitCode::from(2));
    }
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &results).map_err(io::Error::other)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", summary_line(&results))?;
    }
    let (_, failed, _) = tally(&results);
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::TargetArgs;
    use env::InprocEnv;
    use wv_abi::NtStatus;
    use wv_abi::ioctl::WV_IOCTL_GUID_QUERY;

    fn target() -> CheckTarget {
        CheckTarget::new(&TargetArgs::default()).unwrap()
    }

    /// A deliberately wrong expectation: GUID_QUERY with a 15-byte buffer is
    /// BUFFER_TOO_SMALL, the scenario claims SUCCESS.
    fn wrong_expectation(env: &InprocEnv) -> Outcome {
        let f = env.open()?;
        raw::call_expect(
            &f,
            WV_IOCTL_GUID_QUERY,
            &[],
            15,
            NtStatus::SUCCESS,
            "GUID_QUERY",
        )?;
        Ok("unreachable".into())
    }

    fn hangs(_: &InprocEnv) -> Outcome {
        std::thread::sleep(Duration::from_secs(5));
        Ok("too late".into())
    }

    fn skips(_: &InprocEnv) -> Outcome {
        Err(Problem::Skip("not here".into()))
    }

    #[test]
    fn a_failing_comparison_is_a_fail_line() {
        let s = Scenario {
            name: "deliberate",
            run: wrong_expectation,
        };
        let (r, violations) = run_one(&target(), &s, SCENARIO_TIME_LIMIT);
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(!r.passed);
        assert!(
            r.line()
                .starts_with("FAIL  deliberate: GUID_QUERY: got STATUS_BUFFER_TOO_SMALL"),
            "{}",
            r.line()
        );
        assert_eq!(violations, Some(vec![]));
    }

    #[test]
    fn a_hung_scenario_fails_instead_of_hanging_the_suite() {
        let s = Scenario {
            name: "hangs",
            run: hangs,
        };
        let (r, violations) = run_one(&target(), &s, Duration::from_millis(200));
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(r.detail.contains("did not finish"), "{}", r.detail);
        assert!(violations.is_none());
    }

    #[test]
    fn a_skip_does_not_fail() {
        let s = Scenario {
            name: "skips",
            run: skips,
        };
        let (r, _) = run_one(&target(), &s, SCENARIO_TIME_LIMIT);
        assert_eq!(
            (r.verdict, r.passed, r.skipped),
            (Verdict::Skip, true, true)
        );
        assert_eq!(r.line(), "SKIP  skips: not here");
        assert_eq!(summary_line(&[r]), "0 passed, 0 failed, 1 skipped");
    }

    #[test]
    fn names_are_unique_and_the_verifier_comes_last() {
        let names = scenario_names(&target());
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert_eq!(names.last(), Some(&VERIFIER_SCENARIO));
    }

    #[test]
    fn summary_formats() {
        let results = vec![
            ScenarioResult::new("a", Verdict::Pass, "ok".into()),
            ScenarioResult::new("b", Verdict::Fail, "bad".into()),
        ];
        assert_eq!(summary_line(&results), "1 passed, 1 failed");
        assert_eq!(results[0].line(), "PASS  a: ok");
        assert_eq!(results[1].line(), "FAIL  b: bad");
        let json = serde_json::to_value(&results).unwrap();
        assert_eq!(json[1]["passed"], false);
        assert_eq!(json[1]["detail"], "bad");
    }
}
