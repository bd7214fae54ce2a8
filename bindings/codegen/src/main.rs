//! `cycles-codegen`: writes the host models (Python, TypeScript, the JVM, Kotlin, the C docs)
//! from core's wire types (schemars reflection of core's serde models, feature `schema`), so no
//! host keeps a hand-written copy of a shape core defines. `--check` writes nothing and fails when a committed file differs (CI runs it).

mod c_docs;
mod ir;
mod java;
mod java_parts;
mod kotlin;
mod methods;
mod python;
mod table;
mod text;
mod typescript;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Every generated file, relative to the repository root, and its text.
fn outputs() -> Result<Vec<(String, String)>, String> {
    let ir = ir::load()?;
    let c_client = "bindings/c/src/client.rs";
    let c_source = std::fs::read_to_string(root().join(c_client))
        .map_err(|e| format!("cannot read {c_client}: {e}"))?;
    let mut out = vec![
        ("python/cycles/models.py".to_string(), python::emit(&ir)?),
        ("node/src/models.ts".to_string(), typescript::emit(&ir)?),
        (c_client.to_string(), c_docs::rewrite(&c_source, &ir)?),
    ];
    out.push((
        "python/cycles/_operations.py".to_string(),
        methods::python(&ir)?,
    ));
    let ts_client = "node/src/client.ts";
    out.push((
        ts_client.to_string(),
        methods::splice(
            ts_client,
            &read(ts_client)?,
            methods::TS_BEGIN,
            methods::TS_END,
            &methods::typescript(&ir)?,
        )?,
    ));
    let java_client = "java/src/main/java/dev/cycles/CyclesClient.java";
    out.push((
        java_client.to_string(),
        methods::splice(
            java_client,
            &read(java_client)?,
            methods::JAVA_BEGIN,
            methods::JAVA_END,
            &methods::java(&ir)?,
        )?,
    ));
    out.extend(java::emit(&ir)?);
    out.extend(java_parts::emit(&ir, &root())?);
    out.push((kotlin::PATH.to_string(), kotlin::emit(&ir)?));
    let kotlin_client = "kotlin/src/main/kotlin/dev/cycles/kotlin/CyclesClient.kt";
    out.push((
        kotlin_client.to_string(),
        methods::splice(
            kotlin_client,
            &read(kotlin_client)?,
            methods::KOTLIN_BEGIN,
            methods::KOTLIN_END,
            &methods::kotlin(&ir)?,
        )?,
    ));
    Ok(out)
}

fn read(rel: &str) -> Result<String, String> {
    std::fs::read_to_string(root().join(rel)).map_err(|e| format!("cannot read {rel}: {e}"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The folders the generator writes one file per model into: a file there that carries the
/// generated header but is no longer generated (its model was removed or renamed) is stale.
const ONE_FILE_PER_MODEL: &[&str] = &["java/src/main/java/dev/cycles"];

/// Generated files (by their header) under [`ONE_FILE_PER_MODEL`] that `outputs` no longer
/// writes, relative to the repository root.
fn stale(outputs: &[(String, String)]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for dir in ONE_FILE_PER_MODEL {
        let entries =
            std::fs::read_dir(root().join(dir)).map_err(|e| format!("cannot list {dir}: {e}"))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot list {dir}: {e}"))?;
            let rel = format!("{dir}/{}", entry.file_name().to_string_lossy());
            if outputs.iter().any(|(p, _)| *p == rel) {
                continue;
            }
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            if text.starts_with(java::HEADER) {
                out.push(rel);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Refuses to replace a hand-written file in a folder of generated ones: a model or enum of
/// core named like a hand-written JVM class is a clash to resolve, not to overwrite.
fn hand_written(rel: &str, old: &str) -> Option<String> {
    let in_generated_dir = ONE_FILE_PER_MODEL.iter().any(|d| {
        rel.strip_prefix(d)
            .is_some_and(|r| r.starts_with('/') && !r[1..].contains('/'))
    });
    // A hand-written file with a generated region (`CyclesClient.java`) is rewritten there only.
    let spliced = old.contains(methods::JAVA_BEGIN);
    (in_generated_dir && !old.is_empty() && !old.starts_with(java::HEADER) && !spliced).then(|| {
        format!("{rel} is hand-written (no generated header): rename one of the two, or remove it")
    })
}

fn main() -> ExitCode {
    let check = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--check") => true,
        Some(other) => {
            eprintln!("usage: cycles-codegen [--check] (unknown argument {other:?})");
            return ExitCode::from(2);
        }
    };
    let outputs = match outputs() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("cycles-codegen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stale = match stale(&outputs) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cycles-codegen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut drift = 0;
    for rel in stale {
        if check {
            eprintln!("{rel}: generated, but core has no such model any more");
            drift += 1;
        } else if let Err(e) = std::fs::remove_file(root().join(&rel)) {
            eprintln!("cycles-codegen: cannot remove {rel}: {e}");
            return ExitCode::FAILURE;
        } else {
            println!("removed {rel}");
        }
    }
    for (rel, text) in outputs {
        let path = root().join(&rel);
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        if old == text {
            continue;
        }
        if let Some(e) = hand_written(&rel, &old) {
            eprintln!("cycles-codegen: {e}");
            return ExitCode::FAILURE;
        }
        if check {
            eprintln!("{rel}: differs from what core's types generate");
            drift += 1;
        } else if let Err(e) = std::fs::write(&path, text) {
            eprintln!("cycles-codegen: cannot write {rel}: {e}");
            return ExitCode::FAILURE;
        } else {
            println!("wrote {rel}");
        }
    }
    if drift > 0 {
        eprintln!(
            "{drift} generated file(s) drifted: run `cargo run -p cycles-codegen` and commit"
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_has_its_result_in_every_host() {
        let ir = ir::load().unwrap();
        let py = python::emit(&ir).unwrap();
        let ts = typescript::emit(&ir).unwrap();
        assert_eq!(ir.ops.len(), 11);
        for op in &ir.ops {
            let name = table::host_name(&op.response);
            assert!(py.contains(&format!("class {name}(_Model):")), "{name}");
            assert!(py.contains(&format!("\"{}\": {name},", op.operation_id)));
            assert!(
                ts.contains(&format!("export interface {name} extends WithMeta {{"))
                    || ts.contains(&format!("export interface {name}Result extends {name}")),
                "{name}"
            );
        }
    }

    /// Core's operation table (method, path) is the spec's: every host method and the C
    /// docs are generated from it, so it is checked against the pinned spec itself.
    #[test]
    fn core_operations_are_the_specs() {
        use cycles_core::transport::decode::Operation;
        let path = root().join("../shared/spec/cycles-protocol-v0.yaml");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("missing ../shared/spec/cycles-protocol-v0.yaml ({e})"));
        let spec: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
        let mut seen = Vec::new();
        for (p, ops) in spec["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                let Some(id) = op.get("operationId").and_then(|v| v.as_str()) else {
                    continue;
                };
                let core = Operation::from_operation_id(id)
                    .unwrap_or_else(|| panic!("core has no operation {id}"));
                assert_eq!(core.path(), p, "{id}");
                assert_eq!(core.http_method(), method.to_uppercase(), "{id}");
                seen.push(core);
            }
        }
        assert_eq!(
            seen.len(),
            Operation::ALL.len(),
            "an operation the spec does not have"
        );
    }

    #[test]
    fn every_operation_has_a_method_in_every_host() {
        let ir = ir::load().unwrap();
        let py = methods::python(&ir).unwrap();
        let ts = methods::typescript(&ir).unwrap();
        let java = methods::java(&ir).unwrap();
        for op in &ir.ops {
            assert!(
                py.contains(&format!("    def {}(", op.method)),
                "{}",
                op.method
            );
            assert!(
                py.contains(&format!("    async def {}(", op.method)),
                "{}",
                op.method
            );
            let camel = text::camel(op.method);
            assert!(ts.contains(&format!("  {camel}(")), "{camel}");
            assert!(java.contains(&format!(" {camel}(")), "{camel}");
            assert!(java.contains(&format!(" {camel}Async(")), "{camel}");
        }
    }

    #[test]
    fn a_region_is_rewritten_between_its_markers_only() {
        let src = "a\n  // BEGIN x\n  old\n  // END x\nb\n";
        let out = methods::splice("f", src, "// BEGIN x", "// END x", "  new\n").unwrap();
        assert_eq!(out, "a\n  // BEGIN x\n  new\n  // END x\nb\n");
        assert!(methods::splice("f", "a\n", "// BEGIN x", "// END x", "").is_err());
    }

    #[test]
    fn a_generated_file_no_longer_generated_is_stale() {
        let mut outs = outputs().unwrap();
        assert!(
            stale(&outs).unwrap().is_empty(),
            "the committed tree has a stale file"
        );
        let gone = outs
            .iter()
            .position(|(p, _)| p.ends_with("/CommitResult.java"))
            .unwrap();
        let (rel, _) = outs.remove(gone);
        // Only files with the generated header: the hand-written ones beside them are not.
        assert_eq!(stale(&outs).unwrap(), vec![rel]);
    }

    #[test]
    fn a_hand_written_jvm_file_is_never_overwritten() {
        let dir = ONE_FILE_PER_MODEL[0];
        let generated = format!("{}\npackage dev.cycles;\n", java::HEADER);
        let rel = format!("{dir}/Unit.java");
        assert!(hand_written(&rel, "package dev.cycles;\n").is_some());
        assert!(hand_written(&rel, &generated).is_none());
        assert!(hand_written(&rel, "").is_none(), "a new file");
        assert!(hand_written("python/cycles/models.py", "x = 1\n").is_none());
        assert!(hand_written(&format!("{dir}/internal/Native.java"), "x").is_none());
    }

    #[test]
    fn free_form_members_are_never_renamed() {
        let ts = typescript::emit(&ir::load().unwrap()).unwrap();
        let set = &ts[ts.find("export const OPAQUE_MEMBERS").unwrap()..];
        for m in [
            "metadata",
            "committed_metadata",
            "committedMetadata",
            "custom",
            "dimensions",
            "details",
            "payload",
            "keys",
        ] {
            assert!(set.contains(&format!("\"{m}\",")), "{m}");
        }
        assert!(!set.contains("\"tenant\""));
    }

    #[test]
    fn optional_members_are_optional_and_int64_is_exact() {
        let ir = ir::load().unwrap();
        let py = python::emit(&ir).unwrap();
        let ts = typescript::emit(&ir).unwrap();
        assert!(py.contains("    remaining_ttl_ms: int | None = None\n"));
        assert!(ts.contains("  remainingTtlMs?: Int64;\n"));
        assert!(ts.contains("  expiresAtMs: Int64;\n"));
        assert!(ts.contains("  limit?: number;\n"));
        // A request's subject defaults to the client's tenant.
        assert!(ts.contains("  subject?: Subject;\n"));
    }

    #[test]
    fn every_operation_has_its_jvm_record_and_hand_written_ones_are_left() {
        let ir = ir::load().unwrap();
        let files = java::emit(&ir).unwrap();
        for op in &ir.ops {
            let name = java::java_name(&op.response);
            assert!(
                files
                    .iter()
                    .any(|(p, t)| p.ends_with(&format!("/{name}.java"))
                        && t.contains(&format!("public record {name}("))),
                "{name}"
            );
        }
        for e in &ir.enums {
            let (_, text) = files
                .iter()
                .find(|(p, _)| p.ends_with(&format!("/{}.java", e.name)))
                .unwrap_or_else(|| panic!("no JVM class of {}", e.name));
            assert!(text.starts_with(java::HEADER));
            assert!(text.contains(&format!("public final class {} {{", e.name)));
            for (value, _) in &e.values {
                let line = format!(
                    "public static final String {} = \"{value}\";",
                    value.to_uppercase()
                );
                assert!(text.contains(&line), "{}: {line}", e.name);
            }
        }
        for other in table::JAVA_REQUEST_PARTS
            .iter()
            .chain(table::JAVA_NO_RECORD)
        {
            assert!(!files
                .iter()
                .any(|(p, _)| p.ends_with(&format!("/{other}.java"))));
        }
        let commit = &files
            .iter()
            .find(|(p, _)| p.ends_with("/CommitResult.java"))
            .unwrap()
            .1;
        assert!(commit.contains("EvidenceRef cyclesEvidence)"));
        // A member that takes an open enum's values names the class of its constants.
        assert!(commit.contains("@param status"));
        assert!(commit.contains("success; known values:\n *         {@link ReservationStatus}\n"));
        assert!(commit.contains("@Deprecated\n    public EvidenceRef evidence()"));
    }

    #[test]
    fn every_operation_has_its_kotlin_classes_and_method() {
        let ir = ir::load().unwrap();
        let models = kotlin::emit(&ir).unwrap();
        let methods = methods::kotlin(&ir).unwrap();
        assert!(models.starts_with(kotlin::HEADER));
        for op in &ir.ops {
            let result = kotlin::kotlin_name(&op.response);
            assert!(
                models.contains(&format!("data class {result}(")),
                "{result}"
            );
            assert!(models.contains(&format!(
                "    \"{}\" to {result}.serializer(),",
                op.operation_id
            )));
            if let Some(req) = &op.request {
                let class = kotlin::kotlin_name(req);
                assert!(models.contains(&format!("data class {class}(")), "{class}");
            }
            let name = text::camel(op.method);
            assert!(
                methods.contains(&format!("    suspend fun {name}(")),
                "{name}"
            );
            assert!(methods.contains(&format!("): Reply<{result}> =")), "{name}");
        }
        // No line longer than ktlint's.
        for l in models.lines().chain(methods.lines()) {
            assert!(l.len() <= kotlin::MAX_LINE, "{l}");
        }
    }

    #[test]
    fn kotlin_open_enums_keep_unknown_values_and_unit_does_not_shadow_kotlins() {
        let ir = ir::load().unwrap();
        let models = kotlin::emit(&ir).unwrap();
        assert!(!models.contains("value class Unit("));
        assert!(models.contains("@Serializable\n@JvmInline\nvalue class BudgetUnit(\n"));
        assert!(models.contains("        val TOKENS = BudgetUnit(\"TOKENS\")\n"));
        assert!(models.contains("    val isKnown: Boolean get() = this in known\n"));
        for e in &ir.enums {
            let name = kotlin::kotlin_name(&e.name);
            assert!(models.contains(&format!("value class {name}(")), "{name}");
        }
        // Members take the enum's class, lists of tokens too; SignedAmount is the one Amount.
        assert!(models.contains("    val unit: BudgetUnit,\n"));
        assert!(models.contains("    val include: List<ListInclude>? = null,\n"));
        assert!(!models.contains("class SignedAmount("));
        assert!(models.contains("    val remaining: Amount,\n"));
        // Every class ignores unknown members; those core keeps carry the whole object.
        assert_eq!(
            models.matches("data class ").count(),
            models
                .matches("@JsonIgnoreUnknownKeys\ndata class ")
                .count()
                + models.matches("@Serializable(with = ").count()
        );
        assert!(models.contains(
            "@Serializable(with = EvidenceJwks.Serializer::class)\ndata class EvidenceJwks("
        ));
        assert!(models.contains("    val json: JsonObject = JsonObject(emptyMap()),\n"));
        // A request's subject may be left out (the client's tenant); a result's may not.
        let create = &models[models.find("data class CreateReservationRequest(").unwrap()..];
        assert!(
            create[..create.find("\n)\n").unwrap()].contains("    val subject: Subject? = null,\n")
        );
        let detail = &models[models.find("data class ReservationDetail(").unwrap()..];
        assert!(detail[..detail.find("\n)\n").unwrap()].contains("    val subject: Subject,\n"));
        assert!(models
            .contains("    @SerialName(\"idempotency_key\")\n    val idempotencyKey: String,\n"));
    }

    #[test]
    fn jvm_request_parts_are_generated_with_their_idioms() {
        let files = java_parts::emit(&ir::load().unwrap(), &root()).unwrap();
        let text = |name: &str| {
            &files
                .iter()
                .find(|(p, _)| p.ends_with(&format!("/{name}.java")))
                .unwrap_or_else(|| panic!("no {name}"))
                .1
        };
        assert_eq!(files.len(), table::JAVA_REQUEST_PARTS.len());
        let subject = text("Subject");
        assert!(subject.starts_with(java::HEADER));
        // Core's members, a request's null rules, the idioms spliced in whole.
        assert!(subject.contains("public record Subject(String tenant, String workspace, String app, String workflow, String agent, String toolset,\n        Map<String, String> dimensions) {"));
        assert!(subject.contains(
            "        if (agent != null) {\n            m.put(\"agent\", agent);\n        }\n"
        ));
        assert!(subject.contains("    public static Subject tenant(String tenant) {\n"));
        assert!(subject.contains("Collections.unmodifiableMap(new LinkedHashMap<>(dimensions))"));
        let amount = text("Amount");
        assert!(amount.contains("public record Amount(String unit, long amount) {"));
        assert!(amount.contains("        m.put(\"amount\", amount);\n"));
        assert!(amount.contains(" * <p>The JVM's one amount record"));
        assert!(amount.contains("known values: {@link Unit}"));
        assert!(text("Action").contains("tags = tags == null ? null : List.copyOf(tags);"));
        // A part without a fragment is the shape alone.
        let caps = text("Caps");
        assert!(caps.contains("public record Caps(Long maxTokens, Long maxStepsRemaining"));
        assert!(caps.contains("static Caps from(Map<String, Object> m) {"));
    }
}
