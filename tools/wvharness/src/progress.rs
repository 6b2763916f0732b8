//! Progress on stderr for long runs (the default run, `-a` sweeps, `-D` durations).
//!
//! Progress goes to stderr so that stdout keeps exactly the text perftest or the conformance
//! suite prints (scripts parse it). On a terminal the bar redraws in place; when stderr is a
//! file or a pipe (CI logs, tests) each step is one plain line instead, because carriage
//! returns make logs unreadable.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Width of the bar in characters.
const BAR_WIDTH: usize = 30;

/// A progress indicator for `total` steps.
pub struct Progress {
    label: String,
    total: u64,
    done: u64,
    tty: bool,
    enabled: bool,
    started: Instant,
    last_draw: Option<Instant>,
    drawn: bool,
}

impl Progress {
    /// A progress indicator labelled `label` for `total` steps; `enabled` false draws nothing
    /// (JSON output, or a caller that prints its own lines).
    pub fn new(label: &str, total: u64, enabled: bool) -> Progress {
        Progress {
            label: label.to_owned(),
            total: total.max(1),
            done: 0,
            tty: std::io::stderr().is_terminal(),
            enabled,
            started: Instant::now(),
            last_draw: None,
            drawn: false,
        }
    }

    /// Marks one more step done; `what` names it (shown on a terminal, and as the line text
    /// otherwise).
    pub fn step(&mut self, what: &str) {
        self.done = (self.done + 1).min(self.total);
        self.draw(what);
    }

    /// Shows `what` as the step in progress without counting it (for a terminal only: a log
    /// gets a line when the step ends).
    pub fn working_on(&mut self, what: &str) {
        if self.tty {
            self.draw(what);
        }
    }

    fn draw(&mut self, what: &str) {
        if !self.enabled {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.tty {
            // Redraw at most every 50 ms (and always for the last step): a terminal that
            // scrolls thousands of updates slows the benchmark it reports on.
            let now = Instant::now();
            let due = self
                .last_draw
                .is_none_or(|t| now.duration_since(t) >= Duration::from_millis(50));
            if !due && self.done < self.total {
                return;
            }
            self.last_draw = Some(now);
            let filled = (self.done as usize * BAR_WIDTH) / self.total as usize;
            let bar: String = "#".repeat(filled) + &"-".repeat(BAR_WIDTH - filled);
            let mut text = format!(
                "\r{} [{bar}] {}/{} {:>5.1}s {what}",
                self.label,
                self.done,
                self.total,
                self.started.elapsed().as_secs_f64()
            );
            // Pad so a shorter step name erases the previous one.
            text.push_str("\x1b[K");
            let _ = err.write_all(text.as_bytes());
            self.drawn = true;
        } else {
            let _ = writeln!(
                err,
                "{}: {}/{} {what} ({:.1}s)",
                self.label,
                self.done,
                self.total,
                self.started.elapsed().as_secs_f64()
            );
        }
        let _ = err.flush();
    }

    /// Ends the bar: erases it from a terminal so the results print on a clean line.
    pub fn finish(&mut self) {
        if self.enabled && self.tty && self.drawn {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
            self.drawn = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Runs the named `parts` one after the other with `run`, under a bar labelled `label`: what
/// a part measured is printed at once when `text` (a line each, by `line`) and returned; a
/// part that fails to run is printed as such and its error returned as `name: error`. Returns
/// the results and the errors, in order.
///
/// # Errors
/// Writing to `stdout` failed.
pub fn run_parts<P, T>(
    label: &str,
    text: bool,
    stdout: &mut impl Write,
    parts: Vec<(&str, P)>,
    mut run: impl FnMut(P) -> Result<Vec<T>, String>,
    line: impl Fn(&T) -> String,
) -> std::io::Result<(Vec<T>, Vec<String>)> {
    let (mut results, mut errors) = (Vec::new(), Vec::new());
    let mut bar = Progress::new(label, parts.len() as u64, text);
    for (name, part) in parts {
        bar.working_on(name);
        let result = run(part);
        bar.finish();
        match result {
            Ok(mut got) => {
                if text {
                    for r in &got {
                        writeln!(stdout, "{}", line(r))?;
                    }
                    stdout.flush()?;
                }
                results.append(&mut got);
            }
            Err(e) => {
                if text {
                    writeln!(stdout, "  {name}: FAILED to run: {e}")?;
                }
                errors.push(format!("{name}: {e}"));
            }
        }
        bar.step(name);
    }
    bar.finish();
    Ok((results, errors))
}
