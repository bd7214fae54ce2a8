//! `CYCLES_RUNTIME_WORKERS` sizes core's runtime; a bad value is a clear RUNTIME error on
//! every call. The runtime is process-wide and built once, so each case runs in a child
//! process of this test binary.

mod common;

use std::process::Command;

use common::{child_args, child_spec};
use cycles_core::runtime::{self, DEFAULT_WORKERS, WORKERS_ENV};
use cycles_core::ErrorKind;

const CHILD_ENV: &str = "CYCLES_WORKERS_CHILD";

/// Not a test on its own: the body of each child. Its spec says what the runtime must be.
#[test]
#[ignore = "child process of runtime_workers' tests; runs only when one of them starts it"]
fn runtime_workers_child() {
    let want = child_spec(
        CHILD_ENV,
        "runtime_workers_child",
        "the_worker_count_comes_from_the_environment",
    );
    match want.as_str() {
        "error" => {
            let e = runtime::handle().expect_err("a bad worker count fails");
            assert_eq!(*e.kind(), ErrorKind::Runtime);
            assert!(e.to_string().contains(WORKERS_ENV), "{e}");
        }
        n => {
            let n: usize = n.parse().unwrap();
            let h = runtime::handle().expect("runtime");
            assert_eq!(h.metrics().num_workers(), n);
            assert_eq!(h.block_on(async { 40 + 2 }), 42);
        }
    }
}

fn run_child(spec: &str, workers: Option<&str>) {
    run_child_with(spec, workers, None);
}

fn run_child_with(spec: &str, workers: Option<&str>, tokio_workers: Option<&str>) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(child_args("runtime_workers_child"))
        .env(CHILD_ENV, spec);
    match workers {
        Some(w) => cmd.env(WORKERS_ENV, w),
        None => cmd.env_remove(WORKERS_ENV),
    };
    match tokio_workers {
        Some(w) => cmd.env("TOKIO_WORKER_THREADS", w),
        None => cmd.env_remove("TOKIO_WORKER_THREADS"),
    };
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("1 passed"),
        "child {spec} ({workers:?}) failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_worker_count_comes_from_the_environment() {
    run_child("1", Some("1"));
    run_child("3", Some(" 3 "));
    run_child(&DEFAULT_WORKERS.to_string(), None);
    run_child("error", Some("0"));
    run_child("error", Some("two"));
}

#[test]
fn the_default_is_one_worker_and_tokio_worker_threads_still_counts() {
    assert_eq!(DEFAULT_WORKERS, 1);
    run_child_with("1", None, None);
    // tokio's own variable is honoured when core's is unset, and core's wins over it.
    run_child_with("3", None, Some("3"));
    run_child_with("2", Some("2"), Some("3"));
}
