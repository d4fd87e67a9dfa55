//! The Go wire types (`clients/go/internal/wire/wire.go`): one struct per object (the objects
//! it includes embedded, so encoding/json flattens them as the server does), a string type with
//! constants per enum, one struct with every variant's fields per tagged union.
//!
//! Optional fields are pointers with `omitempty` (absent and null read the same); a patch's
//! optional field is a pointer to a pointer, so a patch can send `null` (clear) as well as
//! leave the field out (keep).

use std::fmt::Write as _;

use crate::model::{Def, Field, Kind, Ty, camel};

/// The text of `wire.go`.
pub fn generate(defs: &[Def], header: &str) -> String {
    // Aliases of `any` (unions): a field holds them by value, as `any` is nil-able already.
    let any: Vec<&str> = defs
        .iter()
        .filter(|d| matches!(&d.kind, Kind::Alias(t) if ty(t) == "any"))
        .map(|d| d.name.as_str())
        .collect();
    let mut body = String::new();
    for d in defs {
        body.push('\n');
        comment(&mut body, &format!("{}: {}", d.name, d.doc), "");
        match &d.kind {
            Kind::Object { bases, fields } => {
                writeln!(body, "type {} struct {{", d.name).unwrap();
                for b in bases {
                    writeln!(body, "\t{b}").unwrap();
                }
                for f in fields {
                    field(&mut body, f, d.is_patch(), &any);
                }
                body.push_str("}\n");
            }
            Kind::Enum(values) => {
                writeln!(body, "type {} string\n", d.name).unwrap();
                writeln!(body, "// The values of {}.\nconst (", d.name).unwrap();
                for v in values {
                    writeln!(body, "\t{}{} {} = {v:?}", d.name, camel(v), d.name).unwrap();
                }
                body.push_str(")\n");
            }
            Kind::Tagged { tag, variants } => {
                writeln!(body, "//\n// Its variants, by {tag}:").unwrap();
                for v in variants {
                    writeln!(
                        body,
                        "//   - {:?}: {}",
                        v.tag_value,
                        v.doc.replace('\n', " ")
                    )
                    .unwrap();
                }
                writeln!(body, "type {} struct {{", d.name).unwrap();
                writeln!(body, "\t{} string `json:\"{tag}\"`", go_name(tag)).unwrap();
                let mut seen: Vec<&str> = Vec::new();
                for v in variants {
                    for f in &v.fields {
                        if !seen.contains(&f.name.as_str()) {
                            seen.push(&f.name);
                            let optional = Field {
                                required: false,
                                ..f.clone()
                            };
                            field(&mut body, &optional, false, &any);
                        }
                    }
                }
                body.push_str("}\n");
            }
            Kind::Alias(t) => {
                writeln!(body, "type {} = {}", d.name, ty(t)).unwrap();
            }
        }
    }
    let mut out = String::new();
    for line in header.lines() {
        writeln!(out, "// {line}").unwrap();
    }
    out.push_str("\n// Package wire is the JSON of delayq's HTTP API, as the server's OpenAPI document says it.\npackage wire\n");
    if body.contains("json.RawMessage") {
        out.push_str("\nimport \"encoding/json\"\n");
    }
    out.push_str(&body);
    out
}

fn field(out: &mut String, f: &Field, patch: bool, any: &[&str]) {
    comment(out, &f.doc, "\t");
    let t = ty(&f.ty);
    let by_value = matches!(f.ty, Ty::Array(_) | Ty::Map(_) | Ty::Json | Ty::Object)
        || t == "any"
        || any.contains(&t.as_str());
    let (t, tag) = if f.required && !f.nullable {
        (t, "")
    } else if f.required {
        (if by_value { t } else { format!("*{t}") }, "")
    } else if patch && f.nullable {
        (format!("**{t}"), ",omitempty")
    } else {
        (if by_value { t } else { format!("*{t}") }, ",omitempty")
    };
    writeln!(out, "\t{} {t} `json:\"{}{tag}\"`", go_name(&f.name), f.name).unwrap();
}

fn ty(t: &Ty) -> String {
    match t {
        Ty::Str => "string".into(),
        Ty::Int { wide: true } => "int64".into(),
        Ty::Int { wide: false } => "int".into(),
        Ty::Num => "float64".into(),
        Ty::Bool => "bool".into(),
        Ty::Json => "json.RawMessage".into(),
        Ty::Object => "map[string]any".into(),
        Ty::Ref(n) => n.clone(),
        Ty::Array(i) => format!("[]{}", ty(i)),
        Ty::Map(v) => format!("map[string]{}", ty(v)),
        // Go has no unions: the alternatives are told apart by their JSON.
        Ty::Union(_) => "any".into(),
    }
}

/// A wire name as a Go field name: `lease_ms` → `LeaseMs`, with Go's initialisms.
fn go_name(wire: &str) -> String {
    wire.split('_')
        .map(|p| match p {
            "id" => "ID".to_string(),
            "url" => "URL".to_string(),
            "b64" => "B64".to_string(),
            _ => camel(p),
        })
        .collect()
}

fn comment(out: &mut String, doc: &str, indent: &str) {
    for l in doc.lines() {
        if l.is_empty() {
            writeln!(out, "{indent}//").unwrap();
        } else {
            writeln!(out, "{indent}// {l}").unwrap();
        }
    }
}
