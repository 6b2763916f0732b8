//! Stacks plugged in from outside the crate through the public API alone, as the other runners
//! (the emulated KMDF, the PE loader) plug theirs in: one with an admin side and an injected
//! clock runs every scenario; one without an admin side skips exactly what the installed
//! driver on Windows skips, for the same reasons; a verifier's findings are attributed to their
//! scenario.

use std::any::Any;
use std::collections::BTreeMap;

use wv_check::{
    DeviceSpec, Env, Machine, VERIFIER_SCENARIO, Verdict, run_suite, scenario_names, summary_line,
};
use wv_inproc::{File, Stack, StackConfig, process_memory};

fn stack(deterministic: bool) -> Stack {
    Stack::new(StackConfig {
        devices: 2,
        ports_per_device: if deterministic { 1 } else { 2 },
        deterministic,
        ..StackConfig::default()
    })
}

fn buffer(len: usize) -> (u64, Box<dyn Any>) {
    let b = process_memory().alloc(len);
    (b.addr(), Box::new(b))
}

/// Handles and memory only, like the installed driver: no admin side, no injected clock, no
/// close racing an IOCTL, no verifier.
struct Bare(Stack);

impl Env for Bare {
    type Config = ();
    type File = File;

    fn create(_: &()) -> Result<Self, String> {
        Ok(Bare(stack(false)))
    }
    fn verifier(_: &()) -> Option<String> {
        None
    }
    fn open(&self) -> Result<File, String> {
        self.0.open().map_err(|s| s.to_string())
    }
    fn device_spec(&self) -> Option<DeviceSpec> {
        None
    }
    fn buffer(&self, len: usize) -> (u64, Box<dyn Any>) {
        buffer(len)
    }
    fn finish(self) -> Vec<String> {
        self.0.unload()
    }
}

/// Everything an `Env` can offer: the bare stack's handles and memory, with the stack as its
/// admin side and injected clock (the library's `Machine` and `InjectedClock` for `Stack`; the
/// other runners implement both over their own stacks).
struct Full(Bare);

impl Env for Full {
    type Config = ();
    type File = File;

    fn create(_: &()) -> Result<Self, String> {
        Bare::create(&()).map(Full)
    }
    fn verifier(_: &()) -> Option<String> {
        Some("a stack plugged in from outside".into())
    }
    fn open(&self) -> Result<File, String> {
        self.0.open()
    }
    fn device_spec(&self) -> Option<DeviceSpec> {
        None
    }
    fn machine(&self) -> Option<&dyn Machine> {
        Some(&self.0.0)
    }
    fn create_on_injected_clock(_: &()) -> Option<Result<Self, String>> {
        Some(Ok(Full(Bare(stack(true)))))
    }
    fn close_racing_ioctl(
        &self,
        file: File,
        code: u32,
        input: &[u8],
        output_len: usize,
    ) -> Option<wv_client::raw::IoStatus> {
        Some(file.close_racing_ioctl(code, input, output_len).wait())
    }
    fn buffer(&self, len: usize) -> (u64, Box<dyn Any>) {
        self.0.buffer(len)
    }
    fn finish(self) -> Vec<String> {
        self.0.finish()
    }
}

/// A verifier that finds one thing on every machine.
struct Noisy(Bare);

impl Env for Noisy {
    type Config = ();
    type File = File;

    fn create(_: &()) -> Result<Self, String> {
        Ok(Noisy(Bare::create(&())?))
    }
    fn verifier(_: &()) -> Option<String> {
        Some("noisy".into())
    }
    fn open(&self) -> Result<File, String> {
        self.0.open()
    }
    fn device_spec(&self) -> Option<DeviceSpec> {
        None
    }
    fn buffer(&self, len: usize) -> (u64, Box<dyn Any>) {
        buffer(len)
    }
    fn finish(self) -> Vec<String> {
        let mut found = self.0.finish();
        found.push("a planted violation".into());
        found
    }
}

#[test]
fn a_stack_with_an_admin_side_runs_every_scenario() {
    let results = run_suite::<Full>(&(), None, &mut |_| {});
    let names: Vec<_> = results.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, scenario_names::<Full>(&()));
    for r in &results {
        assert_eq!(r.verdict, Verdict::Pass, "{}", r.line());
    }
    let last = results.last().unwrap();
    assert_eq!(last.name, VERIFIER_SCENARIO);
    assert!(
        last.detail.ends_with(&format!(
            "in the {} stacks the scenarios ran on (a stack plugged in from outside)",
            results.len() - 1
        )),
        "{}",
        last.line()
    );
}

#[test]
fn without_an_admin_side_the_scenarios_skip_as_on_windows() {
    let results = run_suite::<Bare>(&(), None, &mut |_| {});
    let skipped: BTreeMap<_, _> = results
        .iter()
        .filter(|r| r.verdict == Verdict::Skip)
        .map(|r| (r.name.as_str(), r.detail.as_str()))
        .collect();
    let address_service =
        "needs the address service (IBAT on Windows, which this harness does not reach)";
    let mut want = BTreeMap::from([
        (
            "status-file-closed",
            "this transport cannot deliver an IOCTL after CloseHandle",
        ),
        (
            "port-event-flags",
            "needs the admin action port down/up (in-process stack only)",
        ),
        (
            "device-removal-with-requests-parked",
            "needs surprise removal and hot add (in-process stack only)",
        ),
    ]);
    for r in results.iter().filter(|r| r.name.starts_with("ep-")) {
        want.insert(r.name.as_str(), address_service);
    }
    // Its machine must run on an injected clock, which such a stack does not have.
    want.insert(
        "ep-connect-nobody-answers-timeout",
        "needs a machine on an injected clock (this stack has none)",
    );
    assert_eq!(want.len(), 12, "the endpoint scenarios are 9");
    assert_eq!(skipped, want);
    for r in results.iter().filter(|r| r.verdict != Verdict::Skip) {
        assert_eq!(r.verdict, Verdict::Pass, "{}", r.line());
    }
    assert!(
        results.iter().all(|r| r.name != VERIFIER_SCENARIO),
        "a stack without a verifier got a verifier line"
    );
    assert!(
        !scenario_names::<Bare>(&()).contains(&VERIFIER_SCENARIO),
        "scenario_names lists a verifier line for a stack without one"
    );
    let n = results.len();
    assert_eq!(
        summary_line(&results),
        format!("{} passed, 0 failed, 12 skipped", n - 12)
    );
}

#[test]
fn each_violation_is_attributed_to_its_scenario() {
    let results = run_suite::<Noisy>(&(), Some("abi-guid-query"), &mut |_| {});
    let lines: Vec<_> = results.iter().map(|r| r.line()).collect();
    assert_eq!(
        lines,
        [
            results[0].line(),
            "FAIL  host-verifier: 1 violation(s): [abi-guid-query] a planted violation".to_string()
        ]
    );
    assert_eq!(results[0].verdict, Verdict::Pass, "{}", results[0].line());
    assert_eq!(summary_line(&results), "1 passed, 1 failed");
}
