//! Runs a loom model and reports how many interleavings it explored: on stderr, and as a
//! `name=n` line of `$WV_FIGURES_DIR/loom.txt` (the figures of docs/VERIFICATION.md). The
//! models of the host model, the driver core and the soft HCA all run through it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Checks `f` in every interleaving loom explores with `builder`, with `preemptions` as the
/// preemption bound unless `LOOM_MAX_PREEMPTIONS` sets one.
pub fn check(
    name: &str,
    mut builder: loom::model::Builder,
    preemptions: usize,
    f: impl Fn() + Sync + Send + 'static,
) {
    if std::env::var("LOOM_MAX_PREEMPTIONS").is_err() {
        builder.preemption_bound = Some(preemptions);
    }
    let explored = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&explored);
    builder.check(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        f();
    });
    let n = explored.load(Ordering::SeqCst);
    eprintln!("loom model {name}: {n} interleavings");
    if let Ok(dir) = std::env::var("WV_FIGURES_DIR") {
        use std::io::Write;
        std::fs::create_dir_all(&dir).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(std::path::Path::new(&dir).join("loom.txt"))
            .unwrap();
        writeln!(file, "{name}={n}").unwrap();
    }
}

/// [`check`] with loom's default builder.
pub fn model(name: &str, preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    check(name, loom::model::Builder::new(), preemptions, f);
}
