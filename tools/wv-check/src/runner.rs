//! The runner: each scenario on its own thread with a fresh [`Env`] and a time limit, results
//! as lines, a tally and JSON, and the verifier's line built from what each machine reported.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::env::Env;
use crate::scenarios::scenarios;

/// How one scenario ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Everything compared equal.
    Pass,
    /// Something differed (the detail says what).
    Fail,
    /// Not applicable to this stack (for instance admin actions on Windows).
    Skip,
}

/// The result of one scenario: [`ScenarioResult::line`] prints it, [`to_json`] serialises a
/// list of them as `{name, passed, skipped, detail}` objects.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioResult {
    /// Scenario name (stable; [`run_suite`]'s filter matches it).
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
    /// A result; `passed` and `skipped` follow from `verdict`.
    pub fn new(name: &str, verdict: Verdict, detail: String) -> Self {
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
    /// The scenario does not apply to this stack.
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

/// One scenario: a name, a function over an environment, and the clock its machine runs on.
pub struct Scenario<E: Env> {
    /// Stable name.
    pub name: &'static str,
    /// The check.
    pub run: fn(&E) -> Outcome,
    /// Which machine the runner builds for it.
    pub clock: Clock,
}

/// The clock a scenario's machine runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Its own: work and timers run by themselves, as on a live system ([`Env::create`]).
    Own,
    /// Injected: deferred work and timers run only when the scenario drives them through
    /// [`Machine::clock`](crate::Machine::clock), for timeouts of many seconds checked in no
    /// time ([`Env::create_on_injected_clock`]). A stack without one SKIPs the scenario.
    Injected,
}

/// How long one scenario may take in [`run_suite`] before it is declared hung. Every scenario
/// normally takes milliseconds; this only bounds a driver that never completes a request.
pub const SCENARIO_TIME_LIMIT: Duration = Duration::from_secs(30);

/// Name of the extra result that reports the host verifier's findings after the suite.
pub const VERIFIER_SCENARIO: &str = "host-verifier";

/// The names of the results [`run_suite`] returns for `config` without a filter, in order (the
/// final [`VERIFIER_SCENARIO`] line included when the machines have a verifier), so a caller
/// can size a progress bar before starting.
pub fn scenario_names<E: Env>(config: &E::Config) -> Vec<&'static str> {
    let mut names: Vec<_> = scenarios::<E>().iter().map(|s| s.name).collect();
    if E::verifier(config).is_some() {
        names.push(VERIFIER_SCENARIO);
    }
    names
}

/// Runs every scenario whose name contains `filter` (all of them without one) on machines of
/// `E` built from `config`, one fresh machine per scenario, calling `progress` after each
/// result (in order). When `E` has a verifier ([`Env::verifier`]) and any scenario ran, a last
/// [`VERIFIER_SCENARIO`] result sums up the violations each machine reported, each tagged with
/// its scenario's name. Never panics on a driver fault: a failing or hung scenario is a FAIL
/// result.
pub fn run_suite<E: Env>(
    config: &E::Config,
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
        let (result, found) = run_one(config, &scenario, SCENARIO_TIME_LIMIT);
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
    if let Some(watched) = E::verifier(config)
        && !results.is_empty()
    {
        let result = if violations.is_empty() {
            ScenarioResult::new(
                VERIFIER_SCENARIO,
                Verdict::Pass,
                format!(
                    "no KMDF-model violations (double/missing completion, IRQL, locks, leaks) \
                     in the {checked_envs} stacks the scenarios ran on ({watched})"
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

/// Runs one scenario on its own thread with a fresh machine built from `config`, waiting at
/// most `limit`. Returns the result and the machine's verifier violations (`None` when the
/// scenario never finished or the machine could not be built, so there was nothing to tear
/// down and inspect).
pub fn run_one<E: Env>(
    config: &E::Config,
    scenario: &Scenario<E>,
    limit: Duration,
) -> (ScenarioResult, Option<Vec<String>>) {
    let (tx, rx) = mpsc::channel();
    let config = config.clone();
    let run = scenario.run;
    let clock = scenario.clock;
    let spawned = std::thread::Builder::new()
        .name(format!("check:{}", scenario.name))
        .spawn(move || {
            let env = match clock {
                Clock::Own => Some(E::create(&config)),
                Clock::Injected => E::create_on_injected_clock(&config),
            };
            let outcome = match env {
                Some(Ok(env)) => {
                    let outcome = run(&env);
                    let violations = env.finish();
                    (outcome, Some(violations))
                }
                Some(Err(e)) => (Err(Problem::Fail(format!("could not set up: {e}"))), None),
                None => (
                    Err(Problem::Skip(
                        "needs a machine on an injected clock (this stack has none)".into(),
                    )),
                    None,
                ),
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

/// The results as a pretty-printed JSON array of `{name, passed, skipped, detail}` (what
/// `wvharness check --json` prints).
pub fn to_json(results: &[ScenarioResult]) -> String {
    // Strings and booleans only: serialising them cannot fail.
    serde_json::to_string_pretty(results).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inproc::{InprocConfig, InprocEnv};
    use crate::scenarios::raw;
    use wv_abi::NtStatus;
    use wv_abi::ioctl::WV_IOCTL_GUID_QUERY;

    fn target() -> InprocConfig {
        InprocConfig::default()
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

    /// Runs `run` as a scenario `name` on its own machine, with the time limit `limit`.
    fn run_alone(
        name: &'static str,
        run: fn(&InprocEnv) -> Outcome,
        limit: Duration,
    ) -> (ScenarioResult, Option<Vec<String>>) {
        let s = Scenario {
            name,
            run,
            clock: Clock::Own,
        };
        run_one(&target(), &s, limit)
    }

    #[test]
    fn a_failing_comparison_is_a_fail_line() {
        let (r, violations) = run_alone("deliberate", wrong_expectation, SCENARIO_TIME_LIMIT);
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
        let (r, violations) = run_alone("hangs", hangs, Duration::from_millis(200));
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(r.detail.contains("did not finish"), "{}", r.detail);
        assert!(violations.is_none());
    }

    #[test]
    fn a_skip_does_not_fail() {
        let (r, _) = run_alone("skips", skips, SCENARIO_TIME_LIMIT);
        assert_eq!(
            (r.verdict, r.passed, r.skipped),
            (Verdict::Skip, true, true)
        );
        assert_eq!(r.line(), "SKIP  skips: not here");
        assert_eq!(summary_line(&[r]), "0 passed, 0 failed, 1 skipped");
    }

    #[test]
    fn names_are_unique_and_the_verifier_comes_last() {
        let names = scenario_names::<InprocEnv>(&target());
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
        let json: serde_json::Value = serde_json::from_str(&to_json(&results)).unwrap();
        assert_eq!(json[1]["passed"], false);
        assert_eq!(json[1]["detail"], "bad");
    }
}
