//! `wvharness check`: the conformance suite of the `wv-check` library on the transport the
//! shared options name, printed as it runs:
//!
//! ```text
//! PASS  <name>: <what it checked>
//! FAIL  <name>: <what differed>
//! SKIP  <name>: <why it could not run on this transport>
//! ```
//!
//! then `N passed, M failed` alone on a line. The exit code is non-zero if anything failed.
//!
//! The in-process transport gives every scenario a fresh stack ([`wv_check::InprocEnv`]); the
//! Windows transport drives the installed `\\.\WinVerbs` (`wv_check::WindowsEnv`), where the
//! scenarios that need admin actions or the soft UVP skip. Other commands (the default
//! command's progress bar) use [`run_all`] / [`scenario_names`].

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Args;
use wv_check::{InprocConfig, InprocEnv};
pub use wv_check::{ScenarioResult, summary_line, tally};

use crate::target::{TargetArgs, TargetError, Transport};

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

/// The validated `--transport` / `--device` choice of a check run, as the library's
/// configuration of the stack it names. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CheckTarget {
    transport: Transport,
    inproc: InprocConfig,
    #[cfg(target_os = "linux")]
    service: wv_check::ServiceConfig,
}

impl CheckTarget {
    /// Validates the shared target options: the Windows transport exists only in Windows builds,
    /// and `--device` must name a device the target has (checked on a throw-away stack for
    /// `inproc`).
    ///
    /// # Errors
    /// A message for the user, naming what exists.
    pub fn new(args: &TargetArgs) -> Result<CheckTarget, TargetError> {
        let target = CheckTarget {
            transport: args.transport,
            inproc: InprocConfig {
                device: args.device,
                lower: args.lower.edge(),
                link_layer: args.link_layer.layer(),
            },
            #[cfg(target_os = "linux")]
            service: wv_check::ServiceConfig {
                wvd: args
                    .wvd
                    .clone()
                    .unwrap_or_else(wv_check::ServiceConfig::beside_this_program),
                device: args.device,
                link_layer: args.link_layer.layer(),
            },
        };
        match args.transport {
            Transport::Inproc => target.inproc.validate().map_err(TargetError)?,
            #[cfg(target_os = "linux")]
            Transport::Service => {
                if !target.service.wvd.is_file() {
                    return Err(TargetError(format!(
                        "no wvd at {}: build it (cargo build -p wvd) or name it with --wvd",
                        target.service.wvd.display()
                    )));
                }
            }
            #[cfg(not(target_os = "linux"))]
            Transport::Service => return Err(TargetError::no_service_transport()),
            #[cfg(windows)]
            Transport::Windows => {}
            #[cfg(not(windows))]
            Transport::Windows => return Err(TargetError::no_windows_transport()),
        }
        Ok(target)
    }

    /// How the in-process driver reached the soft HCAs, in words (`None` on Windows, where the
    /// real controller's table is used).
    pub fn lower_edge_text(&self) -> Option<&'static str> {
        match self.transport {
            Transport::Inproc => Some(self.inproc.describe()),
            Transport::Service => {
                Some("the device service wvd, its driver → soft HCAs through their C verbs tables")
            }
            Transport::Windows => None,
        }
    }

    #[cfg(windows)]
    fn installed(&self) -> wv_check::InstalledConfig {
        wv_check::InstalledConfig {
            device: self.inproc.device,
        }
    }
}

/// The names of the results [`run_all`] returns for `target` (the host verifier's line last
/// when the target has one), so a caller can size a progress bar before starting.
pub fn scenario_names(target: &CheckTarget) -> Vec<&'static str> {
    match target.transport {
        #[cfg(windows)]
        Transport::Windows => wv_check::scenario_names::<wv_check::WindowsEnv>(&target.installed()),
        #[cfg(target_os = "linux")]
        Transport::Service => wv_check::scenario_names::<wv_check::ServiceEnv>(&target.service),
        // `CheckTarget::new` refuses the Windows transport on other systems.
        _ => wv_check::scenario_names::<InprocEnv>(&target.inproc),
    }
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
    match target.transport {
        #[cfg(windows)]
        Transport::Windows => {
            wv_check::run_suite::<wv_check::WindowsEnv>(&target.installed(), filter, progress)
        }
        #[cfg(target_os = "linux")]
        Transport::Service => {
            wv_check::run_suite::<wv_check::ServiceEnv>(&target.service, filter, progress)
        }
        _ => wv_check::run_suite::<InprocEnv>(&target.inproc, filter, progress),
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
        writeln!(out, "{}", wv_check::to_json(&results))?;
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
