//! Every answer the HTTP tests receive is checked against the OpenAPI document the server
//! serves (`delayq_http::openapi()`): its route and method must be documented, its status too
//! (exactly, or by its class: `4XX`), and a JSON body must match the schema documented for that
//! status. So the document cannot drift from the server: a field the server writes that the
//! document types otherwise, a status it does not list, or an undocumented `/v1` route fails
//! the test that met it.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use serde_json::Value;

/// The document, as JSON.
static DOC: LazyLock<Value> =
    LazyLock::new(|| serde_json::to_value(delayq_http::openapi()).expect("the document"));

/// A compiled validator per response schema (by its place in the document).
static VALIDATORS: LazyLock<Mutex<HashMap<String, std::sync::Arc<jsonschema::Validator>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The documented path template that `path` (without its query) is an instance of.
fn template_of(path: &str) -> Option<String> {
    let segs: Vec<&str> = path.split('/').collect();
    let paths = DOC["paths"].as_object()?;
    // A literal segment wins over a parameter (`/v1/queues/{q}/dead/requeue` over
    // `/v1/queues/{q}/dead/{id}`): the template with most literal segments that matches.
    paths
        .keys()
        .filter(|t| {
            let ts: Vec<&str> = t.split('/').collect();
            ts.len() == segs.len()
                && ts
                    .iter()
                    .zip(&segs)
                    .all(|(t, s)| (t.starts_with('{') && !s.is_empty()) || t == s)
        })
        .max_by_key(|t| t.split('/').filter(|s| !s.starts_with('{')).count())
        .cloned()
}

/// The validator of `schema`, found at JSON pointer `at` in the document.
fn validator(at: &str, schema: &Value) -> std::sync::Arc<jsonschema::Validator> {
    let mut cache = VALIDATORS.lock().unwrap();
    if let Some(v) = cache.get(at) {
        return v.clone();
    }
    // The document itself is the schema's root (its components resolve as `#/components/…`;
    // the keywords of OpenAPI beside them are not JSON Schema keywords and are ignored), with
    // the response's schema as its one definition to check against.
    let mut root = DOC.clone();
    let root_obj = root.as_object_mut().unwrap();
    root_obj.insert(
        "$schema".into(),
        "https://json-schema.org/draft/2020-12/schema".into(),
    );
    root_obj.insert("$defs".into(), serde_json::json!({ "answer": schema }));
    root_obj.insert("$ref".into(), "#/$defs/answer".into());
    let v = std::sync::Arc::new(
        jsonschema::validator_for(&root)
            .unwrap_or_else(|e| panic!("the schema at {at} does not compile: {e}")),
    );
    cache.insert(at.to_owned(), v.clone());
    v
}

/// Escapes a key for a JSON pointer.
fn escaped(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Checks one answer: `status` and `body` of `method path` (a `/v1` route; others pass).
pub(crate) fn check(method: &str, path: &str, status: u16, body: &str) {
    let path = path.split('?').next().unwrap_or(path);
    if !path.starts_with("/v1/") {
        return;
    }
    let Some(template) = template_of(path) else {
        // No route: the router's own 404 (an unknown path) is not an API answer.
        assert_eq!(
            status, 404,
            "{method} {path}: no route in the OpenAPI document"
        );
        return;
    };
    let method = method.to_ascii_lowercase();
    let Some(op) = DOC["paths"][&template].get(&method) else {
        assert_eq!(
            status, 405,
            "{method} {template}: not in the OpenAPI document"
        );
        return;
    };
    let responses = &op["responses"];
    let class = format!("{}XX", status / 100);
    let key = [status.to_string(), class, "default".into()]
        .into_iter()
        .find(|k| responses.get(k).is_some())
        .unwrap_or_else(|| {
            panic!(
                "{method} {template} answered {status}, which the OpenAPI document does not list"
            )
        });
    let Some(schema) = responses[&key]["content"]["application/json"].get("schema") else {
        return;
    };
    if schema.is_null() || body.is_empty() {
        return;
    }
    let instance: Value = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("{method} {template} {status}: not JSON ({e}): {body}"));
    let at = format!(
        "/paths/{}/{method}/responses/{key}/content/application~1json/schema",
        escaped(&template)
    );
    let v = validator(&at, schema);
    let errors: Vec<String> = v
        .iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{method} {template} {status}: the answer does not match the OpenAPI document: {}\n{body}",
        errors.join("; ")
    );
}

#[test]
fn a_wrong_answer_is_caught() {
    // The check can fail: a job read with a state no schema allows, and a status not listed.
    let bad = r#"{"id":"j","state":"sleeping","attempt":0,"max_attempts":1,"due_at":0,"created_at":0,"priority":5}"#;
    let caught = std::panic::catch_unwind(|| check("GET", "/v1/queues/q/jobs/j", 200, bad));
    assert!(caught.is_err(), "a state outside the enum passed");
    let caught = std::panic::catch_unwind(|| check("GET", "/v1/queues/q/jobs/j", 302, ""));
    assert!(caught.is_err(), "an unlisted status passed");
    let good = r#"{"id":"j","state":"due","attempt":0,"max_attempts":1,"due_at":0,"created_at":0,"priority":5,"payload":[1,"x"]}"#;
    check("GET", "/v1/queues/q/jobs/j", 200, good);
    check(
        "GET",
        "/v1/queues/q/jobs/j",
        404,
        r#"{"code":"not_found","message":"no"}"#,
    );
    let caught = std::panic::catch_unwind(|| {
        check(
            "GET",
            "/v1/queues/q/jobs/j",
            404,
            r#"{"code":"no_such_code","message":"no"}"#,
        )
    });
    assert!(caught.is_err(), "an error code outside the table passed");
}
