//! `cycles-matrix`: one behaviour in every language, proven in one run. Every face (the Rust
//! core, Python, Node, JVM, C; the official Python SDK `runcycles` for the journal) answers the
//! same requests (`conformance/matrix/PROTOCOL.md`): the shared vectors, the reference-server
//! corpus, a seeded differential of the timing math and journal helpers against the Rust face,
//! and a journal matrix where every face drains every other face's records. The recovery
//! column reads each face's conformance report. The face-by-check table is printed last and
//! written to (or checked against) docs/matrix.md. Exit status 1 on any failed cell.

mod checks;
mod contract;
mod crashloop;
mod crashloop_journal;
mod disks;
mod face;
mod gen;
mod journal_matrix;
mod load;
mod recovery;
mod rust_face;
mod rust_work;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use serde_json::Value;

use crate::face::Face;
use crate::table::Table;

#[derive(Parser)]
#[command(about = "The cross-language matrix (scripts/matrix.sh runs it)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the protocol as the Rust face (stdin/stdout).
    Face,
    /// Run the matrix.
    Run(Box<Run>),
    /// The crash loop across languages (scripts/crashloop.sh).
    Crashloop(Crashloop),
    /// Load with faults: concurrent guarded actions per face, then the ledger check.
    Load(LoadArgs),
}

#[derive(clap::Args)]
struct LoadArgs {
    /// A face: NAME=PROGRAM (its run.sh); `rust=builtin` is this binary's face subcommand.
    #[arg(long = "face", value_parser = pair, required = true)]
    faces: Vec<(String, String)>,
    /// Concurrent guarded actions per face.
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    /// Where the faces' journals go (a fresh directory is made inside).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    work: PathBuf,
}

#[derive(clap::Args)]
struct Crashloop {
    /// Everything (faces, actions, kill points, faults) is drawn from this seed.
    #[arg(long)]
    seed: u64,
    /// Writer/drainer pairs to run.
    #[arg(long, default_value_t = 15)]
    iterations: usize,
    /// A face: NAME=PROGRAM (its run.sh); `rust=builtin` is this binary. All six (rust, python,
    /// node, jvm, c, kotlin) are required.
    #[arg(long = "face", value_parser = pair)]
    faces: Vec<(String, String)>,
    /// Where the journals and the writers' logs go (a fresh directory is made inside).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    work: PathBuf,
    /// Test-only: skip the drain (known actuals stay unapplied), so the run must fail.
    #[arg(long)]
    skip_drain: bool,
    /// Journal to a Redis the loop starts itself (`redis-server` on PATH) instead of a
    /// directory: writers' own directories are removed after their kill, Redis is restarted
    /// between kill and drain or mid-drain when an iteration draws it.
    #[arg(long)]
    redis: bool,
}

#[derive(clap::Args)]
struct Run {
    /// A face: NAME=PROGRAM (its run.sh); `rust` is built in. Order is column order.
    #[arg(long = "face", value_parser = pair)]
    faces: Vec<(String, String)>,
    /// A face that only takes part in the journal matrix (the official SDK): NAME=PROGRAM.
    #[arg(long = "journal-face", value_parser = pair)]
    journal_faces: Vec<(String, String)>,
    /// A recovery conformance report: NAME=PATH.
    #[arg(long = "report", value_parser = pair)]
    reports: Vec<(String, String)>,
    /// The shared report schema.
    #[arg(long, default_value = "../shared/spec/report.schema.json")]
    schema: PathBuf,
    /// The shared vectors directory.
    #[arg(long, default_value = "conformance/vectors")]
    vectors: PathBuf,
    /// The reference-server corpus.
    #[arg(
        long,
        default_value = "../shared/fixtures/reference-server/exchanges.jsonl"
    )]
    corpus: PathBuf,
    /// Differential seed.
    #[arg(long, default_value_t = 14)]
    seed: u64,
    /// Inputs per timing function and per planner.
    #[arg(long, default_value_t = 10_000)]
    count: usize,
    /// Only these parts (vectors, differential, contract, journal, recovery); default all.
    #[arg(long = "only")]
    only: Vec<String>,
    /// Where the journal matrix writes (a fresh directory is made inside).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    work: PathBuf,
    /// Write the table to this Markdown file.
    #[arg(long)]
    write_doc: Option<PathBuf>,
    /// Fail when this Markdown file differs from the table.
    #[arg(long)]
    check_doc: Option<PathBuf>,
    /// A file (README.md) whose table between `<!-- matrix:begin -->` and
    /// `<!-- matrix:end -->` is written with --write-doc and checked with --check-doc.
    #[arg(long)]
    readme: Option<PathBuf>,
}

const BEGIN: &str = "<!-- matrix:begin -->\n";
const END: &str = "<!-- matrix:end -->";

/// `text` with the part between the matrix markers replaced by `table`.
fn with_table(text: &str, table: &str) -> Result<String, String> {
    let start = text.find(BEGIN).ok_or("no <!-- matrix:begin --> marker")? + BEGIN.len();
    let end = text[start..]
        .find(END)
        .ok_or("no <!-- matrix:end --> marker")?
        + start;
    Ok(format!("{}{table}{}", &text[..start], &text[end..]))
}

fn pair(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .ok_or_else(|| format!("expected NAME=VALUE, got {s:?}"))
}

fn read_json(p: &PathBuf) -> Result<Value, String> {
    let b = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", p.display()))
}

fn spawn(name: &str, program: &str) -> Result<Face, String> {
    if program == "builtin" {
        let me = std::env::current_exe().map_err(|e| e.to_string())?;
        Face::spawn(name, &[me.to_string_lossy().into_owned(), "face".into()])
    } else {
        Face::spawn(name, &[program.to_string()])
    }
}

fn doc(run: &Run, table: &Table, known: &std::collections::BTreeSet<&str>) -> String {
    let mut deviations = String::new();
    if !known.is_empty() {
        deviations.push_str(
            "\n## Known deviations of the official SDK\n\nThese cases are left out of the \
             `runcycles` column's counts (they are the official SDK's behaviour, not ours); \
             anything else it gets wrong fails the matrix.\n\n",
        );
        for k in known {
            deviations.push_str(&format!("- {k}\n"));
        }
    }
    format!(
        "# The cross-language matrix\n\n\
         Generated by `scripts/matrix.sh` (do not edit; CI fails when this copy is stale). Every \
         face answers the same requests through its own public API \
         ([protocol](../conformance/matrix/PROTOCOL.md)): the shared vectors and the \
         reference-server corpus against their expected values; a seeded differential \
         (seed {}, {} inputs per timing function and per planner, weighted toward edges) \
         against the Rust face, byte for byte in canonical JSON; the lifecycle contract, one \
         table of guarded actions (defaults, settle, release, missing actual, caps, denial, \
         keys a header cannot carry) run through every face's guard API against one local \
         server, and one table of client options passed in each face's own names and units \
         (the same error, or the same guarded action), answers and ledger checked; the \
         journal matrix, where \
         every face drains every other face's pending records against one local server \
         (applied once, bodies byte-faithful, nothing left); and each face's recovery \
         conformance report (durable claim, schema-checked). A cell counts the cases that \
         agreed; `-` is a check that does not apply to that face (`runcycles`, the official \
         Python SDK, takes part in the journal only).\n\n{}{}",
        run.seed,
        run.count,
        table.markdown(),
        deviations
    )
}

fn main() -> ExitCode {
    match Cli::parse().cmd {
        Cmd::Face => match rust_face::serve() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("rust face: {e}");
                ExitCode::FAILURE
            }
        },
        Cmd::Crashloop(c) => match crashloop::run(&crashloop::Opts {
            seed: c.seed,
            iterations: c.iterations,
            faces: c.faces,
            work: c.work,
            skip_drain: c.skip_drain,
            redis: c.redis,
        }) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("crash loop: {e}");
                ExitCode::FAILURE
            }
        },
        Cmd::Load(args) => match load_faces(&args) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("load: {e}");
                ExitCode::FAILURE
            }
        },
        Cmd::Run(run) => match matrix(&run) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("matrix: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn load_faces(args: &LoadArgs) -> Result<bool, String> {
    let t = Instant::now();
    let root = args
        .work
        .join(format!("cycles-load-{}", std::process::id()));
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let mut runs = Vec::new();
    for (name, program) in &args.faces {
        let run = rt.block_on(load::run_face(
            name,
            || spawn(name, program),
            args.count,
            &root,
        ))?;
        eprintln!(
            "== load: {name}: {:.1} s, outcomes {:?}, drained {}, faults {:?} ({:.1} s)",
            run.wall_s,
            run.outcomes,
            run.drained,
            run.faults,
            t.elapsed().as_secs_f64()
        );
        for p in &run.problems {
            eprintln!("FAIL {name}: {p}");
        }
        runs.push(run);
    }
    let _ = std::fs::remove_dir_all(&root);
    println!("\n{}", load::table(&runs));
    Ok(runs.iter().all(|r| r.problems.is_empty()))
}

fn part(run: &Run, name: &str) -> bool {
    run.only.is_empty() || run.only.iter().any(|o| o == name)
}

fn step(what: &str, t: Instant) {
    eprintln!("== matrix: {what} ({:.1} s)", t.elapsed().as_secs_f64());
}

fn matrix(run: &Run) -> Result<bool, String> {
    let t = Instant::now();
    let mut columns: Vec<String> = run.faces.iter().map(|(n, _)| n.clone()).collect();
    columns.extend(run.journal_faces.iter().map(|(n, _)| n.clone()));
    if columns.first().map(String::as_str) != Some("rust") {
        return Err("the first --face must be rust=builtin (the reference)".into());
    }
    let mut table = Table::new(&columns);
    let mut faces = run
        .faces
        .iter()
        .map(|(n, p)| spawn(n, p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut failures: Vec<String> = Vec::new();
    let mut known = std::collections::BTreeSet::new();

    if part(run, "vectors") {
        let heartbeat = checks::heartbeat_vectors(&read_json(&run.vectors.join("heartbeat.json"))?);
        let journal = checks::journal_vectors(&read_json(&run.vectors.join("journal.json"))?);
        let pricing = checks::pricing_vectors(&read_json(&run.vectors.join("pricing.json"))?);
        let text = std::fs::read_to_string(&run.corpus).map_err(|e| {
            format!(
                "the reference-server corpus is missing: {} ({e})",
                run.corpus.display()
            )
        })?;
        let lines: Vec<Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("corpus: {e}"))?;
        let corpus = checks::corpus(&lines);
        for (label, cases) in [
            ("vectors: heartbeat", &heartbeat),
            ("vectors: journal", &journal),
            ("vectors: pricing", &pricing),
            ("reference-server corpus", &corpus),
        ] {
            for f in faces.iter_mut() {
                let answers = f.batch(cases.iter().map(|c| c.request.clone()).collect())?;
                let passed = checks::score(&f.name, cases, &answers);
                table.add(label, &f.name, passed, cases.len() as u64);
            }
        }
        step("vectors and corpus", t);
    }

    if part(run, "differential") {
        let diff = checks::Differential::generate(run.seed, run.count);
        for (label, requests) in &diff.groups {
            let mut answers = Vec::new();
            for f in faces.iter_mut() {
                let started = Instant::now();
                answers.push(f.batch(requests.clone())?);
                if std::env::var_os("CYCLES_MATRIX_TIMES").is_some() {
                    eprintln!(
                        "  {label} {}: {:.2} s",
                        f.name,
                        started.elapsed().as_secs_f64()
                    );
                }
            }
            let reference = &answers[0];
            let kinds = checks::answer_kinds(reference);
            let sane = reference.iter().filter(|r| r.get("ok").is_some()).count() as u64;
            table.add(label, "rust", sane, requests.len() as u64);
            if sane < requests.len() as u64 {
                failures.push(format!("{label}: the Rust face answered {kinds:?}"));
            }
            for (f, got) in faces.iter().zip(&answers).skip(1) {
                let (agreed, mismatch) = checks::compare(requests, reference, got);
                table.add(label, &f.name, agreed, requests.len() as u64);
                if let Some(m) = mismatch {
                    failures.push(format!(
                        "{label}: {} differs on {} input(s); smallest:\n    input  {}\n    rust   {}\n    {:<6} {}",
                        f.name, m.count, m.smallest.0, m.smallest.1, f.name, m.smallest.2
                    ));
                }
            }
        }
        step("differential", t);
    }

    if part(run, "contract") {
        let root = run
            .work
            .join(format!("cycles-matrix-contract-{}", std::process::id()));
        std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
        let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
        failures.extend(rt.block_on(contract::run(&mut faces, &mut table, &root)));
        let _ = std::fs::remove_dir_all(&root);
        step("lifecycle contract", t);
    }

    if part(run, "journal") {
        for (n, p) in &run.journal_faces {
            faces.push(spawn(n, p)?);
        }
        let root = run
            .work
            .join(format!("cycles-matrix-{}", std::process::id()));
        std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
        let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
        let outcome = rt.block_on(journal_matrix::run(&mut faces, &mut table, &root));
        failures.extend(outcome.failures);
        known.extend(outcome.known);
        let _ = std::fs::remove_dir_all(&root);
        step("journal matrix", t);
    }

    for f in faces {
        if let Err(e) = f.close() {
            failures.push(e);
        }
    }

    if part(run, "recovery") {
        let schema = read_json(&run.schema)?;
        for (n, p) in &run.reports {
            let (passed, total, problems) = recovery::check(&PathBuf::from(p), &schema);
            let ok = problems.is_empty();
            table.add(
                "recovery: durable claim",
                n,
                if ok { passed } else { 0 },
                total,
            );
            failures.extend(problems);
        }
    }

    for f in &failures {
        eprintln!("FAIL {f}");
    }
    let text = doc(run, &table, &known);
    println!("\n{}", table.markdown());
    let (_, failed) = table.counts();
    let mut ok = failed == 0 && failures.is_empty();
    if let Some(p) = &run.write_doc {
        std::fs::write(p, &text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some(p) = &run.readme {
        let old = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let new =
            with_table(&old, &table.markdown()).map_err(|e| format!("{}: {e}", p.display()))?;
        if run.write_doc.is_some() {
            std::fs::write(p, &new).map_err(|e| format!("{}: {e}", p.display()))?;
        } else if run.check_doc.is_some() && new != old {
            eprintln!(
                "the matrix table in {} is stale: regenerate it with `scripts/matrix.sh --write-doc`",
                p.display()
            );
            ok = false;
        }
    }
    if let Some(p) = &run.check_doc {
        if std::fs::read_to_string(p).ok().as_deref() != Some(text.as_str()) {
            eprintln!(
                "{} is stale: regenerate it with `scripts/matrix.sh --write-doc` and commit it",
                p.display()
            );
            ok = false;
        }
    }
    step(if ok { "all agree" } else { "FAILED" }, t);
    Ok(ok)
}
