//! The end of every edge test (the verbs and the CM one alike): the filter's side released
//! first, then the export, and nothing may be left behind.

use std::fmt::Debug;

use wv_host::HostPlatform;

/// Drops the filter's side, checks that the export holds no consumer reference (the
/// interface reference was released), drops the export, lets `p` settle, then checks that the
/// fake behind the export holds nothing (`leftover`, named `what`) and the verifier saw no
/// violation.
pub fn finish_edge<F, E, L: Debug + PartialEq>(
    p: &HostPlatform,
    (filter, export): (F, E),
    consumers: impl FnOnce(&E) -> usize,
    leftover: impl FnOnce() -> Vec<L>,
    what: &str,
) {
    drop(filter);
    assert_eq!(
        consumers(&export),
        0,
        "the interface reference was released"
    );
    drop(export);
    p.run_until_idle();
    assert_eq!(leftover(), Vec::new(), "{what}");
    assert_eq!(p.verifier().violations(), Vec::<String>::new());
}
