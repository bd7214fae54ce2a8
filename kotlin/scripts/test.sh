#!/usr/bin/env bash
# The Kotlin face's tests: build libcycles_uniffi (cargo, debug profile, honouring
# $CARGO_TARGET_DIR); check that the committed generated Kotlin and Swift are what uniffi-bindgen
# writes from it (bindings/uniffi/scripts/generate.sh --check; the models bindings/codegen writes,
# Models.kt and CyclesClient.kt's operations, are checked with every other host's by
# `cycles-codegen --check` in scripts/test-all.sh); lint the Kotlin with ktlint
# (kotlin/scripts/lint.sh, any error fails; in the background while the suite runs, which
# mostly waits on servers and child JVMs); extract docs/kotlin.md's quick
# start; compile everything with the Kotlin compiler from Maven Central (kotlin-maven-plugin)
# and run the JUnit suite on the JVM against the local server (spec mode; the recovery
# conformance suites Recovery*Test and JournalRedisTest included), then the operations,
# lifecycle and boundary suites again against its reference mode; Surefire's XML is checked
# for exactly the expected tests per class, all passed (a filter matching nothing still says
# BUILD SUCCESS). Last, the jar carrying libcycles_uniffi (scripts/package.sh OUT kotlin, dev
# profile) and its install check (kotlin/scripts/install-check.sh: the quick start compiled and
# run in a fresh folder against that jar and its declared dependencies only).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
K="$ROOT/kotlin"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
log() { printf '== kotlin: %s (%ds)\n' "$*" "$SECONDS" >&2; }
# BoundaryTest panics in the native library on purpose (it must surface as INTERNAL): the
# panic's message is enough in the log, without a backtrace (as python/scripts/test.sh and CTest).
export RUST_BACKTRACE=0
# Tests per class; a new test needs its count here.
declare -A EXPECTED=([OperationsTest]=7 [LifecycleTest]=11 [VectorsTest]=3 [ReferenceCorpusTest]=2
    [ModelsTest]=3 [OperationVectorsTest]=1 [BoundaryTest]=5 [ExitTest]=2 [RecoveryCoreTest]=7 [RecoveryJournalTest]=3
    [RecoveryProcessTest]=6 [JournalRedisTest]=1)

# A JDK 17+ and Maven; a bare image gets them from apt.
if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then
    log "installing a JDK and Maven"
    SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null
fi
# The Redis journal tests (JournalRedisTest, and the recovery tests with
# CYCLES_TEST_JOURNAL_STORE=redis) start their own redis-server and read it with redis-cli.
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    log "installing redis-server (Debian's package)"
    SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
fi

check_reports() {
    python3 - "$K/target/surefire-reports" "$@" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
reports, want = sys.argv[1], dict(a.split("=") for a in sys.argv[2:])
got = {}
for f in glob.glob(reports + "/TEST-*.xml"):
    s = ET.parse(f).getroot()
    name = s.get("name").rsplit(".", 1)[-1]
    bad = int(s.get("failures")) + int(s.get("errors")) + int(s.get("skipped"))
    if bad:
        sys.exit(f"{name}: {bad} test(s) failed, errored or skipped")
    got[name] = int(s.get("tests"))
want = {k: int(v) for k, v in want.items()}
if got != want:
    sys.exit(f"surefire ran {got}, expected {want}")
print(f"kotlin: {sum(got.values())} passed, 0 failed ({len(got)} classes)")
PY
}

log "libcycles_uniffi (cargo build -p cycles-uniffi)"
(cd "$ROOT" && cargo build -q -p cycles-uniffi --locked)
log "generated Kotlin and Swift against uniffi-bindgen's output"
# The generator is a workspace of its own, outside the root's cargo fmt.
(cd "$ROOT" && cargo fmt --manifest-path bindings/uniffi/bindgen/Cargo.toml -- --check)
bash "$ROOT/bindings/uniffi/scripts/generate.sh" --check

log "docs/kotlin.md's quick start"
mkdir -p "$K/target/quickstart"
python3 - "$ROOT/docs/kotlin.md" "$K/target/quickstart/QuickStart.kt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = text.split("## Quick start", 1)[1]
open(sys.argv[2], "w").write(re.search(r"```kotlin\n(.*?)```", section, re.S).group(1))
PY

# Offline once Maven's cache has the plugins and libraries (the first run downloads them);
# keyed by the pom's Kotlin version (the compiler and its serialization plugin) and the console
# launcher's and dependency plugin's versions, so a version bump goes online once.
kv="$(sed -n 's:.*<kotlin.version>\(.*\)</kotlin.version>.*:\1:p' "$K/pom.xml")"
m2="$HOME/.m2/repository"
MVN=(mvn -B -q)
[[ -d "$m2/org/jetbrains/kotlin/kotlin-maven-plugin/$kv" && -d "$m2/org/junit/platform/junit-platform-console/6.1.3" &&
    -d "$m2/org/jetbrains/kotlin/kotlin-serialization-compiler-plugin-embeddable/$kv" &&
    -d "$m2/org/apache/maven/plugins/maven-dependency-plugin/3.8.1" ]] && MVN+=(-o)
# ktlint's class path first (Maven, the first time), so the background run never shares
# Maven's local repository with the build's own Maven.
bash "$K/scripts/lint.sh" --version >/dev/null
lint_log="$(mktemp)"
bash "$K/scripts/lint.sh" >"$lint_log" 2>&1 &
lint_pid=$!
log "compile (kotlin-maven-plugin) and the JUnit suite; ktlint (kotlin/scripts/lint.sh) beside it"
rm -rf "$K/target/surefire-reports"
(cd "$K" && "${MVN[@]}" test -Dcycles.native.dir="$TARGET/debug") >&2
args=(); for k in "${!EXPECTED[@]}"; do args+=("$k=${EXPECTED[$k]}"); done
check_reports "${args[@]}"
if wait "$lint_pid"; then
    log "ktlint: no errors"
else
    cat "$lint_log" >&2
    echo "ktlint found errors (above; kotlin/scripts/lint.sh --format fixes most)" >&2
    exit 1
fi
rm -f "$lint_log"

log "operations, lifecycle and boundary suites against the local server's reference mode"
rm -rf "$K/target/surefire-reports"
(cd "$K" && "${MVN[@]}" surefire:test -Dcycles.native.dir="$TARGET/debug" -Dcycles.test.server.mode=reference \
    -Dtest='OperationsTest,LifecycleTest,BoundaryTest' -Dsurefire.failIfNoSpecifiedTests=true) >&2
check_reports "OperationsTest=${EXPECTED[OperationsTest]}" "LifecycleTest=${EXPECTED[LifecycleTest]}" \
    "BoundaryTest=${EXPECTED[BoundaryTest]}"
log "the jar with libcycles_uniffi (scripts/package.sh, dev profile) and its install check"
CYCLES_PACKAGE_PROFILE=dev bash "$ROOT/scripts/package.sh" "$TARGET/kotlin-package-check" kotlin
bash "$K/scripts/install-check.sh" "$TARGET"/kotlin-package-check/kotlin/cycles-kotlin-*[0-9].jar
log "a package run whose Maven build fails leaves no staging behind"
failing="$TARGET/kotlin-package-failing"
rm -rf "$failing" && mkdir -p "$failing/bin"
printf '#!/bin/sh\necho "mvn: failing on purpose" >&2\nexit 1\n' >"$failing/bin/mvn" && chmod +x "$failing/bin/mvn"
if PATH="$failing/bin:$PATH" CYCLES_PACKAGE_PROFILE=dev bash "$ROOT/scripts/package.sh" "$failing/out" kotlin 2>"$failing/err"; then
    echo "scripts/package.sh succeeded with a failing mvn" >&2
    exit 1
fi
grep -q "failing on purpose" "$failing/err" || { cat "$failing/err" >&2; echo "the package run did not reach mvn" >&2; exit 1; }
[[ ! -e "$failing/out/.kotlin-staging" ]] || { echo "a failed package run left $failing/out/.kotlin-staging" >&2; exit 1; }
rm -rf "$failing"
log "all Kotlin tests passed"
