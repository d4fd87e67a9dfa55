//! The build of this binary: release, git commit and build date (set by `build.rs`).

/// The release.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit it was built from.
pub(crate) const COMMIT: &str = env!("DELAYQ_GIT_COMMIT");
/// The build date (UTC).
pub(crate) const BUILT: &str = env!("DELAYQ_BUILD_DATE");
/// `delayq --version`: `0.1.0 (commit abc123def456, built 2026-12-02)`.
pub(crate) const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("DELAYQ_GIT_COMMIT"),
    ", built ",
    env!("DELAYQ_BUILD_DATE"),
    ")"
);

/// Tells the HTTP layer what `/healthz` reports.
pub(crate) fn register() {
    delayq_http::ops::set_build(delayq_http::ops::Build {
        version: VERSION.to_owned(),
        commit: COMMIT.to_owned(),
        built: BUILT.to_owned(),
    });
}
