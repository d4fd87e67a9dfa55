//! What the generators write from: the OpenAPI document's component schemas read into a small
//! model of named types (objects, string enums, unions) and field types. Anything the model
//! cannot say is refused with the schema's name, so a new kind of schema in the document
//! fails generation instead of coming out wrong.

use anyhow::{Context as _, bail};
use serde_json::{Map, Value};

/// A field's or an alias's type.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    /// Text.
    Str,
    /// A whole number; `wide`: 64-bit (`int64`), else 32-bit.
    Int {
        /// `format: int64`.
        wide: bool,
    },
    /// A floating-point number.
    Num,
    /// `true` / `false`.
    Bool,
    /// Any JSON value: free by design (a payload, a result).
    Json,
    /// Any JSON object.
    Object,
    /// Another named type.
    Ref(String),
    /// A list.
    Array(Box<Ty>),
    /// An object of string keys.
    Map(Box<Ty>),
    /// One of these (e.g. a time: ms or RFC 3339 text).
    Union(Vec<Ty>),
}

/// One property of an object.
#[derive(Debug, Clone)]
pub struct Field {
    /// Its wire name.
    pub name: String,
    /// Its type without the null.
    pub ty: Ty,
    /// Always present.
    pub required: bool,
    /// May be `null`.
    pub nullable: bool,
    /// Its description.
    pub doc: String,
}

/// One variant of a tagged union: its tag's value and its other fields.
#[derive(Debug, Clone)]
pub struct Variant {
    /// The tag's value (`"fixed"`).
    pub tag_value: String,
    /// The variant's fields besides the tag.
    pub fields: Vec<Field>,
    /// Its description.
    pub doc: String,
}

/// What a named schema is.
#[derive(Debug, Clone)]
pub enum Kind {
    /// An object: the objects it includes (`allOf`), then its own fields.
    Object {
        /// Named objects whose fields it has too.
        bases: Vec<String>,
        /// Its own fields.
        fields: Vec<Field>,
    },
    /// Text limited to these values.
    Enum(Vec<String>),
    /// Objects told apart by one string field.
    Tagged {
        /// The tag field's name (`kind`).
        tag: String,
        /// The variants, in the document's order.
        variants: Vec<Variant>,
    },
    /// Another name for a type (a union of a value and a list, of a number and text).
    Alias(Ty),
}

/// A named schema.
#[derive(Debug, Clone)]
pub struct Def {
    /// Its name in the document.
    pub name: String,
    /// Its description.
    pub doc: String,
    /// What it is.
    pub kind: Kind,
}

impl Def {
    /// A schema named `…Patch` is a partial update: an absent field keeps its stored value,
    /// `null` clears it. Generators keep the two apart where the language's null does not.
    pub fn is_patch(&self) -> bool {
        self.name.ends_with("Patch")
    }
}

/// Every component schema of `doc`, in the document's order, each after the objects it
/// includes.
pub fn read(doc: &Value) -> anyhow::Result<Vec<Def>> {
    let schemas = doc
        .pointer("/components/schemas")
        .and_then(Value::as_object)
        .context("the document has no components.schemas")?;
    let mut defs = Vec::new();
    for (name, schema) in schemas {
        defs.push(def(name, schema).with_context(|| format!("schema {name}"))?);
    }
    Ok(bases_first(defs))
}

fn doc_of(v: &Value) -> String {
    v.get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string()
}

fn def(name: &str, s: &Value) -> anyhow::Result<Def> {
    let doc = doc_of(s);
    let kind = if let Some(parts) = s.get("allOf").and_then(Value::as_array) {
        let mut bases = Vec::new();
        let mut fields = Vec::new();
        for p in parts {
            if let Some(r) = ref_name(p) {
                bases.push(r);
            } else if p.get("properties").is_some() {
                fields.extend(fields_of(p)?);
            } else {
                bail!("an allOf part that is neither a reference nor an object");
            }
        }
        Kind::Object { bases, fields }
    } else if let Some(vals) = s.get("enum").and_then(Value::as_array) {
        Kind::Enum(
            vals.iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .context("a non-text enum value")
                })
                .collect::<anyhow::Result<_>>()?,
        )
    } else if let Some(alts) = s.get("oneOf").and_then(Value::as_array) {
        match tagged(alts)? {
            Some((tag, variants)) => Kind::Tagged { tag, variants },
            None => Kind::Alias(ty(s)?),
        }
    } else if s.get("type").and_then(Value::as_str) == Some("object") {
        Kind::Object {
            bases: Vec::new(),
            fields: fields_of(s)?,
        }
    } else {
        Kind::Alias(ty(s)?)
    };
    Ok(Def {
        name: name.to_string(),
        doc,
        kind,
    })
}

/// `oneOf` objects that each fix one shared string property to one value: a tagged union.
fn tagged(alts: &[Value]) -> anyhow::Result<Option<(String, Vec<Variant>)>> {
    let fixed = |a: &Value| -> Option<(String, String)> {
        let props = a.get("properties")?.as_object()?;
        props.iter().find_map(|(k, p)| {
            let e = p.get("enum")?.as_array()?;
            (e.len() == 1).then(|| (k.clone(), e[0].as_str().unwrap_or("").to_string()))
        })
    };
    let Some((tag, _)) = alts.first().and_then(fixed) else {
        return Ok(None);
    };
    let mut variants = Vec::new();
    for a in alts {
        match fixed(a) {
            Some((t, value)) if t == tag => variants.push(Variant {
                tag_value: value,
                fields: fields_of(a)?
                    .into_iter()
                    .filter(|f| f.name != tag)
                    .collect(),
                doc: doc_of(a),
            }),
            _ => return Ok(None),
        }
    }
    Ok(Some((tag, variants)))
}

fn ref_name(v: &Value) -> Option<String> {
    v.get("$ref")?
        .as_str()?
        .strip_prefix("#/components/schemas/")
        .map(str::to_string)
}

fn fields_of(s: &Value) -> anyhow::Result<Vec<Field>> {
    let empty = Map::new();
    let props = s
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    props
        .iter()
        .map(|(name, p)| {
            let (ty, nullable, doc) = field_ty(p).with_context(|| format!("field {name}"))?;
            Ok(Field {
                name: name.clone(),
                ty,
                required: required.contains(&name.as_str()),
                nullable,
                doc,
            })
        })
        .collect()
}

/// A property's type, whether it may be null, and its description (a `$ref` inside
/// `oneOf: [ref, null]` carries the description).
fn field_ty(p: &Value) -> anyhow::Result<(Ty, bool, String)> {
    if let Some(alts) = p.get("oneOf").and_then(Value::as_array) {
        let null = |a: &Value| a.get("type").and_then(Value::as_str) == Some("null");
        if alts.len() == 2 && alts.iter().any(null) {
            let other = alts.iter().find(|a| !null(a)).expect("two alternatives");
            let doc = [doc_of(p), doc_of(other)].concat();
            return Ok((ty(other)?, true, doc));
        }
    }
    let nullable = p
        .get("type")
        .and_then(Value::as_array)
        .is_some_and(|t| t.iter().any(|t| t == "null"));
    Ok((ty(p)?, nullable, doc_of(p)))
}

/// A schema's type, without its null.
fn ty(s: &Value) -> anyhow::Result<Ty> {
    if let Some(r) = ref_name(s) {
        return Ok(Ty::Ref(r));
    }
    if let Some(alts) = s.get("oneOf").and_then(Value::as_array) {
        return Ok(Ty::Union(
            alts.iter().map(ty).collect::<anyhow::Result<_>>()?,
        ));
    }
    let t = match s.get("type") {
        None => return Ok(Ty::Json),
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => {
            let named: Vec<&str> = ts
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            match named[..] {
                [one] => one,
                _ => bail!("a type list other than [T, null]: {ts:?}"),
            }
        }
        Some(other) => bail!("a type that is not text: {other}"),
    };
    Ok(match t {
        "string" => Ty::Str,
        "integer" => Ty::Int {
            wide: s.get("format").and_then(Value::as_str) == Some("int64"),
        },
        "number" => Ty::Num,
        "boolean" => Ty::Bool,
        "array" => Ty::Array(Box::new(ty(s
            .get("items")
            .context("an array without items")?)?)),
        "object" => match s.get("additionalProperties") {
            Some(v @ Value::Object(_)) => Ty::Map(Box::new(ty(v)?)),
            _ if s.get("properties").is_some() => bail!("an object inside a field: name it"),
            _ => Ty::Object,
        },
        other => bail!("type {other}"),
    })
}

/// `defs` with every object after the objects it includes (Python's classes need their bases
/// first), otherwise in their order.
fn bases_first(defs: Vec<Def>) -> Vec<Def> {
    let mut out: Vec<Def> = Vec::with_capacity(defs.len());
    let mut left = defs;
    while !left.is_empty() {
        let before = left.len();
        let mut rest = Vec::new();
        for d in left {
            let ready = match &d.kind {
                Kind::Object { bases, .. } => {
                    bases.iter().all(|b| out.iter().any(|o| &o.name == b))
                }
                _ => true,
            };
            if ready { out.push(d) } else { rest.push(d) }
        }
        left = rest;
        assert!(left.len() < before, "objects that include each other");
    }
    out
}

/// `snake_case` or `lower` text as `CamelCase`.
pub fn camel(s: &str) -> String {
    s.split(['_', '-', ' '])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}
