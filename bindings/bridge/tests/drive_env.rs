//! `CYCLES_DRIVE_ON_CALLER`, read once per process: each case runs this test binary again as a
//! child with the variable set (`DRIVE_ENV_CASE` names the case the child checks).

#![allow(clippy::result_large_err)] // ErrorFields: see the crate root

use std::process::Command;

use cycles_bridge::task::{self, DRIVE_FROM_CALL};
use cycles_core::runtime::caller;

const CASE: &str = "DRIVE_ENV_CASE";

/// In the child: what each case must see.
fn check(case: &str) {
    match case {
        "off" => {
            for _ in 0..DRIVE_FROM_CALL + 2 {
                let s = task::start(async { 1 }).unwrap();
                assert!(!s.driven_here(), "CYCLES_DRIVE_ON_CALLER=0 drove a call");
                assert_eq!(s.finish().unwrap(), 1);
            }
        }
        "on" => {
            let driven: Vec<bool> = (0..DRIVE_FROM_CALL)
                .map(|_| task::start(async {}).unwrap().driven_here())
                .collect();
            assert_eq!(driven.last(), Some(&true), "{driven:?}");
        }
        "bad" => {
            // From the first call on, not only once calls would be driven.
            let e = task::start(async {}).err().unwrap();
            assert_eq!(e.name, "CONFIG", "{e:?}");
            assert!(e.message.contains(caller::ENV), "{}", e.message);
        }
        other => panic!("unknown case {other}"),
    }
}

#[test]
fn the_variable_turns_driving_off_and_a_bad_value_is_a_config_error() {
    if let Ok(case) = std::env::var(CASE) {
        check(&case);
        return;
    }
    for (case, value) in [("off", "0"), ("on", "1"), ("bad", "yes")] {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "the_variable_turns_driving_off_and_a_bad_value_is_a_config_error",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CASE, case)
            .env(caller::ENV, value)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "case {case}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The child really ran the test (a filter that matched nothing would pass too).
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "case {case}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
