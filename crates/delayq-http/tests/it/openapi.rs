//! The OpenAPI document passes a standard validator (`openapi-spec-validator` from PyPI, which
//! scripts/test installs in a virtual environment and names in `DELAYQ_OPENAPI_VALIDATOR`):
//! every response described, every operation id unique, every parameter where it says it is.

use std::process::Command;

/// The validator: `DELAYQ_OPENAPI_VALIDATOR`, else `openapi-spec-validator` on the PATH.
fn validator() -> String {
    std::env::var("DELAYQ_OPENAPI_VALIDATOR").unwrap_or_else(|_| "openapi-spec-validator".into())
}

#[test]
fn the_openapi_document_passes_a_standard_validator() {
    let doc = serde_json::to_string_pretty(&delayq_http::openapi()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openapi.json");
    std::fs::write(&path, &doc).unwrap();
    let out = Command::new(validator()).arg(&path).output().unwrap_or_else(|e| {
        panic!(
            "{} not runnable ({e}): scripts/test installs it (pip install openapi-spec-validator)",
            validator()
        )
    });
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && said.contains("OK"), "{said}");
}

#[test]
fn the_validator_refuses_what_it_should() {
    // A document with a response lacking its description, as /v1/claim's 200 had: the check
    // above can fail.
    let mut doc = serde_json::to_value(delayq_http::openapi()).unwrap();
    doc["paths"]["/v1/claim"]["post"]["responses"]["200"]
        .as_object_mut()
        .unwrap()
        .remove("description");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openapi.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let out = Command::new(validator()).arg(&path).output().unwrap();
    assert!(
        !out.status.success(),
        "a response without a description passed"
    );
}
