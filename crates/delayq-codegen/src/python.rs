//! The Python wire types (`clients/python/src/delayq/_wire.py`): a `TypedDict` per object (the
//! objects it includes as bases), a `Literal` per enum, a `Union` of `TypedDict`s per tagged
//! union; keys as the wire spells them, so `mypy --strict` checks every key the client reads
//! or writes.

use std::fmt::Write as _;

use crate::model::{Def, Field, Kind, Ty, camel};

/// Python's keywords: a field named so cannot be a class attribute.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// The text of `_wire.py`, or the name of a field Python cannot spell as an attribute.
pub fn generate(defs: &[Def], header: &str) -> anyhow::Result<String> {
    let mut out = String::new();
    for line in header.lines() {
        writeln!(out, "# {line}").unwrap();
    }
    out.push_str(concat!(
        "\n\"\"\"The JSON of delayq's HTTP API, as the server's OpenAPI document says it.\"\"\"\n\n",
                "from typing import Any, Dict, List, Literal, NotRequired, Optional, TypedDict, Union\n\n",
        "Json = Any\n\"\"\"Any JSON value: free by design (a payload, a result).\"\"\"\n",
    ));
    let mut aliases = String::new();
    for d in defs {
        out.push_str("\n\n");
        match &d.kind {
            Kind::Object { bases, fields } => {
                class(&mut out, &d.name, bases, &d.doc, fields, None)?;
            }
            Kind::Enum(values) => {
                let vals: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
                writeln!(out, "{} = Literal[{}]", d.name, vals.join(", ")).unwrap();
                docstring(&mut out, &d.doc, "");
            }
            Kind::Tagged { tag, variants } => {
                let names: Vec<String> = variants
                    .iter()
                    .map(|v| format!("{}{}", d.name, camel(&v.tag_value)))
                    .collect();
                for (v, name) in variants.iter().zip(&names) {
                    class(
                        &mut out,
                        name,
                        &[],
                        &v.doc,
                        &v.fields,
                        Some((tag, &v.tag_value)),
                    )?;
                    out.push_str("\n\n");
                }
                writeln!(out, "{} = Union[{}]", d.name, names.join(", ")).unwrap();
                docstring(&mut out, &d.doc, "");
            }
            Kind::Alias(t) => {
                // After every class: an alias is evaluated when the module loads.
                aliases.push_str("\n\n");
                writeln!(aliases, "{} = {}", d.name, ty(t, false)).unwrap();
                docstring(&mut aliases, &d.doc, "");
                out.truncate(out.len() - 2);
            }
        }
    }
    out.push_str(&aliases);
    Ok(out)
}

fn class(
    out: &mut String,
    name: &str,
    bases: &[String],
    doc: &str,
    fields: &[Field],
    tag: Option<(&String, &String)>,
) -> anyhow::Result<()> {
    let bases = if bases.is_empty() {
        "TypedDict".to_string()
    } else {
        bases.join(", ")
    };
    writeln!(out, "class {name}({bases}):").unwrap();
    docstring(out, if doc.is_empty() { name } else { doc }, "    ");
    if let Some((tag, value)) = tag {
        writeln!(out, "    {tag}: Literal[{value:?}]").unwrap();
    }
    for f in fields {
        if KEYWORDS.contains(&f.name.as_str()) {
            anyhow::bail!("{name}.{} is a Python keyword", f.name);
        }
        let mut t = ty(&f.ty, true);
        if f.nullable {
            t = format!("Optional[{t}]");
        }
        if !f.required {
            t = format!("NotRequired[{t}]");
        }
        writeln!(out, "    {}: {t}", f.name).unwrap();
        docstring(out, &f.doc, "    ");
    }
    Ok(())
}

/// A type's annotation; `quote`: named types as text (a class may name one defined after it).
fn ty(t: &Ty, quote: bool) -> String {
    let ty = |t: &Ty| ty(t, quote);
    match t {
        Ty::Str => "str".into(),
        Ty::Int { .. } => "int".into(),
        Ty::Num => "float".into(),
        Ty::Bool => "bool".into(),
        Ty::Json => "Json".into(),
        Ty::Object => "Dict[str, Any]".into(),
        Ty::Ref(n) if quote => format!("{n:?}"),
        Ty::Ref(n) => n.clone(),
        Ty::Array(i) => format!("List[{}]", ty(i)),
        Ty::Map(v) => format!("Dict[str, {}]", ty(v)),
        Ty::Union(alts) => format!(
            "Union[{}]",
            alts.iter().map(&ty).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn docstring(out: &mut String, doc: &str, indent: &str) {
    if doc.is_empty() {
        return;
    }
    let doc = doc.replace('\\', "\\\\").replace("\"\"\"", "\\\"\\\"\\\"");
    let mut lines = doc.lines();
    let first = lines.next().unwrap_or("");
    let rest: Vec<&str> = lines.collect();
    if rest.is_empty() {
        writeln!(out, "{indent}\"\"\"{first}\"\"\"").unwrap();
        return;
    }
    writeln!(out, "{indent}\"\"\"{first}").unwrap();
    for l in rest {
        if l.is_empty() {
            out.push('\n');
        } else {
            writeln!(out, "{indent}{l}").unwrap();
        }
    }
    writeln!(out, "{indent}\"\"\"").unwrap();
}
