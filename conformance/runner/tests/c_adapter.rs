//! The C adapter's committed maps: `c-map.json` (the journal in a directory) and
//! `c-redis-map.json` (the journal in Redis, run with `CYCLES_TEST_JOURNAL_STORE=redis` by
//! scripts/matrix.sh). The adapter itself runs the mapped tests from the CTest tree that
//! bindings/c/scripts/tests-tree.sh builds; this checks, without building it, that a renamed or
//! removed test cannot stay mapped.

mod common;

use common::*;

fn read(rel: &str) -> String {
    let path = manifest_dir().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The recovery tests CTest registers: `RECOVERY_TESTS` of bindings/c/tests/CMakeLists.txt.
fn registered() -> Vec<String> {
    let cmake = read("../../bindings/c/tests/CMakeLists.txt");
    let (_, list) = cmake
        .split_once("set(RECOVERY_TESTS")
        .expect("CMakeLists.txt sets RECOVERY_TESTS");
    let (list, _) = list.split_once(')').unwrap();
    list.split_whitespace().map(str::to_string).collect()
}

#[test]
fn committed_maps_name_every_scenario_and_only_registered_recovery_tests() {
    let registered = registered();
    // Each test program entry of test_recovery.c's TESTS starts `{ "<name>",`.
    let program = read("../../bindings/c/tests/test_recovery.c");
    for file in ["c-map.json", "c-redis-map.json"] {
        for (id, entries) in committed_map(file) {
            for e in &entries {
                let name = e
                    .strip_prefix("recovery_")
                    .unwrap_or_else(|| panic!("{file}: {id}: {e} is not a recovery test"));
                assert!(
                    registered.iter().any(|r| r == name),
                    "{file}: {id}: {e} is not registered with CTest"
                );
                assert!(
                    program.contains(&format!("{{ \"{name}\",")),
                    "{file}: {id}: {e} is not a test of test_recovery.c"
                );
            }
        }
    }
}
