//! The shared client conformance suite (`clients/conformance`) as the Rust tests read it: a
//! file of the suite, and the deep subset match every runner applies to what a step answered
//! (clients/conformance/README.md).

use serde_json::Value;

/// A file of `clients/conformance` (`scenarios.json`, `workers.json`, `webhooks.json`).
pub fn suite(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../clients/conformance")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Deep subset match: an object matches when every key given matches (others ignored), a list
/// when it has the same length and every item matches, a number by value, anything else when
/// equal.
pub fn matches(expect: &Value, got: &Value) -> bool {
    match (expect, got) {
        (Value::Object(e), Value::Object(g)) => e
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| matches(v, gv))),
        (Value::Array(e), Value::Array(g)) => {
            e.len() == g.len() && e.iter().zip(g).all(|(a, b)| matches(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => expect == got,
    }
}

#[cfg(test)]
mod tests {
    use super::matches;
    use serde_json::json;

    #[test]
    fn a_subset_matches_and_a_difference_does_not() {
        let got = json!({"id": "a", "attempt": 1, "tags": [1, 2], "extra": true});
        assert!(matches(
            &json!({"id": "a", "attempt": 1.0, "tags": [1, 2]}),
            &got
        ));
        assert!(!matches(&json!({"tags": [1]}), &got));
        assert!(!matches(&json!({"missing": null}), &got));
        assert!(!matches(&json!({"attempt": 2}), &got));
    }
}
