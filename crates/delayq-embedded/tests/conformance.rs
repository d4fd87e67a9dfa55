//! The conformance suite on the embedded backend.

async fn setup() -> (tempfile::TempDir, delayq_embedded::EmbeddedBackend) {
    let dir = tempfile::tempdir().unwrap();
    let b = delayq_embedded::EmbeddedBackend::open(dir.path()).unwrap();
    (dir, b)
}

delayq::conformance_tests!(setup);
