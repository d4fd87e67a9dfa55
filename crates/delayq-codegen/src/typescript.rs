//! The TypeScript wire types (`clients/typescript/src/wire.ts`): one interface per object, a
//! string-literal union per enum, a union of interfaces per tagged union; field names as the
//! wire spells them.

use std::fmt::Write as _;

use crate::model::{Def, Field, Kind, Ty, camel};

/// The text of `wire.ts`.
pub fn generate(defs: &[Def], header: &str) -> String {
    let mut out = String::new();
    for line in header.lines() {
        writeln!(out, "// {line}").unwrap();
    }
    out.push_str("\n/** Any JSON value: free by design (a payload, a result). */\nexport type Json = unknown;\n");
    for d in defs {
        out.push('\n');
        comment(&mut out, &d.doc, "");
        match &d.kind {
            Kind::Object { bases, fields } => {
                let ext = if bases.is_empty() {
                    String::new()
                } else {
                    format!(" extends {}", bases.join(", "))
                };
                writeln!(out, "export interface {}{ext} {{", d.name).unwrap();
                for f in fields {
                    field(&mut out, f, d.is_patch());
                }
                out.push_str("}\n");
            }
            Kind::Enum(values) => {
                let vals: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
                writeln!(out, "export type {} = {};", d.name, vals.join(" | ")).unwrap();
            }
            Kind::Tagged { tag, variants } => {
                let names: Vec<String> = variants
                    .iter()
                    .map(|v| format!("{}{}", d.name, camel(&v.tag_value)))
                    .collect();
                writeln!(out, "export type {} = {};", d.name, names.join(" | ")).unwrap();
                for (v, name) in variants.iter().zip(&names) {
                    out.push('\n');
                    comment(&mut out, &v.doc, "");
                    writeln!(out, "export interface {name} {{").unwrap();
                    writeln!(out, "  {tag}: {:?};", v.tag_value).unwrap();
                    for f in &v.fields {
                        field(&mut out, f, false);
                    }
                    out.push_str("}\n");
                }
            }
            Kind::Alias(t) => {
                writeln!(out, "export type {} = {};", d.name, ty(t)).unwrap();
            }
        }
    }
    out
}

fn field(out: &mut String, f: &Field, patch: bool) {
    comment(out, &f.doc, "  ");
    let opt = if f.required { "" } else { "?" };
    // A response's absent and null mean the same, so an optional field takes either; a
    // patch's null clears the stored value.
    let null = if f.nullable || (patch && !f.required) {
        " | null"
    } else {
        ""
    };
    writeln!(out, "  {}{opt}: {}{null};", f.name, ty(&f.ty)).unwrap();
}

fn ty(t: &Ty) -> String {
    match t {
        Ty::Str => "string".into(),
        Ty::Int { .. } | Ty::Num => "number".into(),
        Ty::Bool => "boolean".into(),
        Ty::Json => "Json".into(),
        Ty::Object => "Record<string, unknown>".into(),
        Ty::Ref(n) => n.clone(),
        Ty::Array(i) => match **i {
            Ty::Union(_) => format!("({})[]", ty(i)),
            _ => format!("{}[]", ty(i)),
        },
        Ty::Map(v) => format!("Record<string, {}>", ty(v)),
        Ty::Union(alts) => alts.iter().map(ty).collect::<Vec<_>>().join(" | "),
    }
}

fn comment(out: &mut String, doc: &str, indent: &str) {
    if doc.is_empty() {
        return;
    }
    let lines: Vec<&str> = doc.lines().collect();
    if lines.len() == 1 {
        writeln!(out, "{indent}/** {} */", lines[0].replace("*/", "*\\/")).unwrap();
        return;
    }
    writeln!(out, "{indent}/**").unwrap();
    for l in lines {
        let l = l.replace("*/", "*\\/");
        if l.is_empty() {
            writeln!(out, "{indent} *").unwrap();
        } else {
            writeln!(out, "{indent} * {l}").unwrap();
        }
    }
    writeln!(out, "{indent} */").unwrap();
}
