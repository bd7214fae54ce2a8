//! `java/src/main/java/dev/cycles/<Part>.java` for the parts a caller builds or reads back
//! (`Amount`, `Subject`, `Action`, `Caps`): a record of core's members as the result records
//! have them, but with a request's null rules (an unset member is null and not sent, a list
//! or map is null or a read-only copy), a package-private `toJson` that sends what is set, and
//! `from`.
//! The idioms a caller writes (`Amount.usdMicrocents`, `Subject.tenant(...).withAgent(...)`)
//! are a hand-written fragment per part, `bindings/codegen/java/<Part>.java.in`, spliced in:
//! its leading `/// ` lines are one more Javadoc paragraph, the rest are record members.

use std::fmt::Write;
use std::path::Path;

use crate::ir::{Field, Ir, Model, Ty};
use crate::java::{self, javadoc, wrap_list, HEADER};
use crate::table::JAVA_REQUEST_PARTS;
use crate::text::camel;

/// `(path, text)` of every request part.
pub fn emit(ir: &Ir, root: &Path) -> Result<Vec<(String, String)>, String> {
    JAVA_REQUEST_PARTS
        .iter()
        .map(|name| {
            let rel = format!("bindings/codegen/java/{name}.java.in");
            let fragment = match std::fs::read_to_string(root.join(&rel)) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => return Err(format!("cannot read {rel}: {e}")),
            };
            let m = ir
                .models
                .get(*name)
                .ok_or_else(|| format!("{name}: core has no such model"))?;
            Ok((
                format!("java/src/main/java/dev/cycles/{name}.java"),
                part(m, &fragment)?,
            ))
        })
        .collect()
}

/// One component: its Java type, how `from` decodes it, and how the canonical constructor
/// copies it (lists and maps only).
struct Component<'a> {
    field: &'a Field,
    name: String,
    ty: &'static str,
    decode: String,
    copy: Option<String>,
}

fn component(f: &Field) -> Result<Component<'_>, String> {
    let k = &f.name;
    let name = camel(k);
    let (ty, decode, copy) = match &f.ty {
        Ty::Str => ("String", format!("Json.str(m, \"{k}\")"), None),
        Ty::Int64 if f.required => ("long", format!("Json.lng(m, \"{k}\")"), None),
        Ty::Int64 => ("Long", format!("Json.lng(m, \"{k}\")"), None),
        Ty::List(t) if **t == Ty::Str => (
            "List<String>",
            format!("(List<String>) (List<?>) Json.list(m, \"{k}\")"),
            Some(format!("{name} == null ? null : List.copyOf({name})")),
        ),
        Ty::StrMap => (
            "Map<String, String>",
            format!("(Map<String, String>) (Map<String, ?>) Json.obj(m, \"{k}\")"),
            Some(format!(
                "{name} == null ? null : Collections.unmodifiableMap(new LinkedHashMap<>({name}))"
            )),
        ),
        other => return Err(format!("{k}: {other:?} has no rule for a JVM request part")),
    };
    Ok(Component {
        field: f,
        name,
        ty,
        decode,
        copy,
    })
}

/// The doc of one `@param`: core's, the open enum's constants, and the null rule.
fn param_doc(c: &Component) -> String {
    let f = c.field;
    let mut doc = javadoc(&f.doc).trim_end_matches('.').to_string();
    if let Some(e) = &f.open_enum {
        doc = format!("{doc}; known values: {{@link {e}}}");
    }
    if c.copy.is_some() {
        doc = format!("{doc}; a read-only copy");
    }
    if !f.required {
        doc = format!("{doc}; null when not set (and then not sent)");
    }
    doc
}

fn part(m: &Model, fragment: &str) -> Result<String, String> {
    let name = m.name.as_str();
    let comps: Vec<Component> = m
        .fields
        .iter()
        .map(component)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{name}.{e}"))?;
    let note: Vec<&str> = fragment
        .lines()
        .map_while(|l| l.strip_prefix("/// "))
        .collect();
    let members: String = fragment
        .lines()
        .skip(note.len())
        .map(|l| format!("{l}\n"))
        .collect();
    let uses = |t: &str| comps.iter().any(|c| c.ty.contains(t)) || members.contains(t);
    let mut out = format!("{HEADER}\npackage dev.cycles;\n\nimport dev.cycles.internal.Json;\n");
    if comps.iter().any(|c| c.ty.starts_with("Map")) {
        out.push_str("import java.util.Collections;\n");
    }
    out.push_str("import java.util.LinkedHashMap;\n");
    if uses("List<") {
        out.push_str("import java.util.List;\n");
    }
    out.push_str("import java.util.Map;\n\n/**\n");
    for l in crate::text::wrap(&javadoc(&m.doc), 96).lines() {
        writeln!(out, " * {l}").unwrap();
    }
    if !note.is_empty() {
        out.push_str(" *\n * <p>");
        out.push_str(&note.join("\n * "));
        out.push('\n');
    }
    out.push_str(" *\n");
    java::param_docs(
        &mut out,
        comps.iter().map(|c| (c.name.as_str(), param_doc(c))),
    );
    out.push_str(" */\n");
    let head = java::record_head(name, comps.iter().map(|c| (c.ty, c.name.as_str())));
    writeln!(out, "{head}) {{").unwrap();
    let copies: Vec<&Component> = comps.iter().filter(|c| c.copy.is_some()).collect();
    if !copies.is_empty() {
        out.push_str("    /** The lists and maps are read-only copies, in their given order. */\n");
        writeln!(out, "    public {name} {{").unwrap();
        for c in copies {
            writeln!(out, "        {} = {};", c.name, c.copy.as_deref().unwrap()).unwrap();
        }
        out.push_str("    }\n\n");
    }
    if !members.trim().is_empty() {
        out.push_str(members.trim_end_matches('\n'));
        out.push_str("\n\n");
    }
    out.push_str("    Map<String, Object> toJson() {\n        Map<String, Object> m = new LinkedHashMap<>();\n");
    for c in &comps {
        let put = format!("m.put(\"{}\", {});", c.field.name, c.name);
        if c.field.required {
            writeln!(out, "        {put}").unwrap();
        } else {
            writeln!(
                out,
                "        if ({} != null) {{\n            {put}\n        }}",
                c.name
            )
            .unwrap();
        }
    }
    out.push_str("        return m;\n    }\n\n");
    if comps.iter().any(|c| c.decode.starts_with('(')) {
        out.push_str("    @SuppressWarnings(\"unchecked\")\n");
    }
    let args: Vec<String> = comps.iter().map(|c| c.decode.clone()).collect();
    let call = wrap_list(
        &format!("        return m == null ? null : new {name}("),
        &args,
        "                ",
        120,
    );
    writeln!(
        out,
        "    static {name} from(Map<String, Object> m) {{\n{call});\n    }}\n}}"
    )
    .unwrap();
    Ok(out)
}
