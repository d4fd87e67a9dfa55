//! The clients' committed wire types are what the generator writes from this build's OpenAPI
//! document, and a change to the document changes every client's.

use delayq_codegen::{GO, OPENAPI, PYTHON, TYPESCRIPT, generate, stale, unasync};

#[test]
fn the_committed_files_are_a_fresh_generation() {
    let stale = stale().unwrap();
    assert!(
        stale.is_empty(),
        "stale generated files (run `cargo run -p delayq-codegen` and commit): {stale:?}"
    );
}

#[test]
fn a_renamed_wire_field_changes_every_clients_types() {
    let mut doc = serde_json::to_value(delayq_http::openapi()).unwrap();
    let props = doc
        .pointer_mut("/components/schemas/JobFacts/properties")
        .unwrap()
        .as_object_mut()
        .unwrap();
    let attempt = props.remove("attempt").unwrap();
    props.insert("attempt_number".into(), attempt);
    let before = generate(&serde_json::to_value(delayq_http::openapi()).unwrap()).unwrap();
    let after = generate(&doc).unwrap();
    for ((path, old), (_, new)) in before.iter().zip(&after) {
        assert_ne!(old, new, "{path} did not follow the rename");
        assert!(new.contains("attempt_number"), "{path} lacks the new name");
    }
}

#[test]
fn every_schema_of_the_document_is_in_every_client() {
    let doc = serde_json::to_value(delayq_http::openapi()).unwrap();
    let names: Vec<String> = doc["components"]["schemas"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert!(names.len() > 40, "{names:?}");
    let files = generate(&doc).unwrap();
    for (path, text) in files.iter().filter(|(p, _)| *p != OPENAPI) {
        for n in &names {
            let declared = match *path {
                TYPESCRIPT => [format!("interface {n} "), format!("type {n} =")],
                GO => [format!("type {n} struct"), format!("type {n} ")],
                PYTHON => [format!("class {n}("), format!("{n} = ")],
                _ => unreachable!(),
            };
            assert!(
                declared.iter().any(|d| text.contains(d.as_str())),
                "{path} does not declare {n}"
            );
        }
    }
}

#[test]
fn a_schema_the_model_cannot_say_is_refused_by_name() {
    let mut doc = serde_json::to_value(delayq_http::openapi()).unwrap();
    doc["components"]["schemas"]["Odd"] = serde_json::json!({"type": ["string", "integer"]});
    let err = generate(&doc).unwrap_err();
    assert!(format!("{err:#}").contains("schema Odd"), "{err:#}");
}

#[test]
fn the_sync_calls_are_the_async_ones_without_async() {
    let source = "\"\"\"Doc.\"\"\"\n\nclass AsyncOps:\n    async def get(self) -> AsyncIterator[int]:\n        x = await self._call()\n";
    let out = unasync::generate(source, "generated").unwrap();
    assert!(
        out.contains(
            "class SyncOps:\n    def get(self) -> Iterator[int]:\n        x = self._call()"
        ),
        "{out}"
    );
    assert!(!out.contains("Doc."), "{out}");
    let odd = "\"\"\"Doc.\"\"\"\nasync  def f(): pass\n";
    assert!(unasync::generate(odd, "generated").is_err());
}
