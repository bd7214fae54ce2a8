//! `java/src/main/java/dev/cycles/<Result>.java`: one record per result model, with core's
//! members in core's order (camelCase), a package-private `from` (and `list`) that decodes
//! the bridge's JSON, and the JVM's idioms as rules: free-form members as JSON text
//! (`<name>Json`), a model that keeps unknown members carries the whole object as `json`,
//! lists are never null, and an accessor renamed to core's name keeps its old name as a
//! deprecated alias.

use std::fmt::Write;

use crate::ir::{Field, Ir, Model, Ty};
use crate::table::{JAVA_ALIASES, JAVA_HAND_WRITTEN};

/// The JVM name of a core model.
pub fn java_name(core: &str) -> &str {
    match core {
        "ReservationCreateResponse" => "ReservationResult",
        "CommitResponse" => "CommitResult",
        "ReleaseResponse" => "ReleaseResult",
        "ReservationExtendResponse" => "ExtendResult",
        "DecisionResponse" => "DecisionResult",
        "EventCreateResponse" => "EventResult",
        "BalanceResponse" => "Balances",
        "ReservationListResponse" => "ReservationPage",
        // The JVM's Amount holds a long: a negative amount fits.
        "SignedAmount" => "Amount",
        other => other,
    }
}

/// `(path, text)` of every generated record.
pub fn emit(ir: &Ir) -> Result<Vec<(String, String)>, String> {
    let mut names: Vec<String> = Vec::new();
    fn visit(ir: &Ir, name: &str, out: &mut Vec<String>) {
        if out.iter().any(|n| n == name) || JAVA_HAND_WRITTEN.contains(&java_name(name)) {
            return;
        }
        out.push(name.to_string());
        for f in &ir.model(name).fields {
            if let Some(m) = f.ty.model() {
                visit(ir, m, out);
            }
        }
    }
    for op in &ir.ops {
        visit(ir, &op.response, &mut names);
    }
    names
        .iter()
        .map(|n| {
            Ok((
                format!("java/src/main/java/dev/cycles/{}.java", java_name(n)),
                record(ir.model(n))?,
            ))
        })
        .collect()
}

fn camel(s: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in s.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A component: its name, type and decoding expression.
struct Component {
    name: String,
    ty: String,
    decode: String,
    doc: String,
}

fn component(f: &Field) -> Result<Component, String> {
    let k = &f.name;
    let name = camel(k);
    let (name, ty, decode) = match &f.ty {
        Ty::Str => (name, "String".to_string(), format!("Json.str(m, \"{k}\")")),
        Ty::Int64 => (
            name,
            if f.required { "long" } else { "Long" }.to_string(),
            format!("Json.lng(m, \"{k}\")"),
        ),
        Ty::Bool => (
            name,
            if f.required { "boolean" } else { "Boolean" }.to_string(),
            format!("Json.bool(m, \"{k}\")"),
        ),
        Ty::Any | Ty::Object => (
            format!("{name}Json"),
            "String".to_string(),
            format!("Json.text(m, \"{k}\")"),
        ),
        Ty::Model(r) => (
            name,
            java_name(r).to_string(),
            format!("{}.from(Json.obj(m, \"{k}\"))", java_name(r)),
        ),
        Ty::List(t) => match t.as_ref() {
            Ty::Str => (
                name,
                "List<String>".to_string(),
                format!("Json.strings(m, \"{k}\")"),
            ),
            Ty::Model(r) => (
                name,
                format!("List<{}>", java_name(r)),
                format!("{}.list(Json.list(m, \"{k}\"))", java_name(r)),
            ),
            other => return Err(format!("{k}: a list of {other:?} has no JVM rule")),
        },
        other => return Err(format!("{k}: {other:?} has no JVM rule")),
    };
    let mut doc = javadoc(&f.doc);
    if ty == "String" && matches!(f.ty, Ty::Any | Ty::Object) {
        doc = format!("{} (JSON text)", doc.trim_end_matches('.'));
    }
    if matches!(f.ty, Ty::List(_)) {
        doc = format!("{}; empty when absent", doc.trim_end_matches('.'));
    } else if !f.required {
        doc = format!("{}; null when absent", doc.trim_end_matches('.'));
    }
    Ok(Component {
        name,
        ty,
        decode,
        doc,
    })
}

fn record(m: &Model) -> Result<String, String> {
    let name = java_name(&m.name);
    let mut comps: Vec<Component> = m
        .fields
        .iter()
        .map(component)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}.{e}", m.name))?;
    if m.extra {
        comps.push(Component {
            name: "json".into(),
            ty: "String".into(),
            decode: "Json.write(m)".into(),
            doc: "the whole object as JSON text, as core decoded it (every member, also unknown ones)"
                .into(),
        });
    }
    let mut out = String::from(
        "// Generated by bindings/codegen from core's wire types (`cargo run -p cycles-codegen`): do not edit.\n\
         package dev.cycles;\n\nimport dev.cycles.internal.Json;\nimport java.util.List;\nimport java.util.Map;\n\n/**\n",
    );
    // A result's doc names its operation already ("Success body of `commitReservation`").
    let doc = javadoc(&m.doc);
    for l in crate::text::wrap(&doc, 96).lines() {
        writeln!(out, " * {l}").unwrap();
    }
    out.push_str(" *\n");
    for c in &comps {
        let line = format!("@param {} {}", c.name, c.doc);
        for (i, l) in crate::text::wrap(&line, 96).lines().enumerate() {
            let pad = if i == 0 { "" } else { "        " };
            writeln!(out, " * {pad}{l}").unwrap();
        }
    }
    out.push_str(" */\n");
    let params: Vec<String> = comps
        .iter()
        .map(|c| format!("{} {}", c.ty, c.name))
        .collect();
    let head = format!("public record {name}(");
    let wrapped = wrap_list(&head, &params, "        ", 120);
    writeln!(out, "{wrapped}) {{").unwrap();
    for (model, old, field) in JAVA_ALIASES {
        if *model != m.name {
            continue;
        }
        let c = comps
            .iter()
            .find(|c| c.name == camel(field))
            .ok_or_else(|| format!("{model}: no member {field} for the alias {old}"))?;
        write!(
            out,
            "    /**\n     * The former name of {{@link #{n}()}}.\n     *\n     * @return {{@link #{n}()}}\n     * @deprecated renamed to core's name, {{@link #{n}()}}\n     */\n    @Deprecated\n    public {t} {old}() {{\n        return {n};\n    }}\n\n",
            n = c.name,
            t = c.ty,
        )
        .unwrap();
    }
    let args: Vec<String> = comps.iter().map(|c| c.decode.clone()).collect();
    let call = wrap_list(
        &format!("        return m == null ? null : new {name}("),
        &args,
        "                ",
        120,
    );
    write!(
        out,
        "    static {name} from(Map<String, Object> m) {{\n{call});\n    }}\n\n    \
         @SuppressWarnings(\"unchecked\")\n    static List<{name}> list(List<Object> rows) {{\n        \
         return Json.each(rows, o -> from((Map<String, Object>) o));\n    }}\n}}\n"
    )
    .unwrap();
    Ok(out)
}

/// `head` followed by `items` joined with ", ", wrapped at `width` with `indent`.
fn wrap_list(head: &str, items: &[String], indent: &str, width: usize) -> String {
    let mut out = head.to_string();
    let mut line_len = head.len();
    for (i, item) in items.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        if i > 0 && line_len + sep.len() + item.len() > width {
            out.push_str(",\n");
            out.push_str(indent);
            line_len = indent.len();
        } else {
            out.push_str(sep);
            line_len += sep.len();
        }
        out.push_str(item);
        line_len += item.len();
    }
    out
}

/// Rustdoc Markdown to Javadoc: `code` and links to `{@code code}`, HTML escaped outside.
fn javadoc(s: &str) -> String {
    let text = crate::text::md(s);
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            write!(out, "{{@code {part}}}").unwrap();
        } else {
            out.push_str(
                &part
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
                    .replace('@', "&#64;"),
            );
        }
    }
    out.replace('\n', " ")
}
