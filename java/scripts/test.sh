#!/usr/bin/env bash
# The JVM binding's tests: build libcycles_jvm (cargo, debug profile, honouring
# $CARGO_TARGET_DIR), package the jar with it (scripts/package.sh OUT java: Maven copies the
# library into native/<os>-<arch>/, runs the JUnit suite through Surefire with -Xcheck:jni,
# and writes the jar, sources and javadoc jars), check Surefire's XML for exactly the expected
# number of tests run and passed (a filter matching nothing still says BUILD SUCCESS), rerun
# the client, lifecycle and operations suites against the local server's reference mode, then
# with plain `java` (not Surefire, whose fork calls System.exit): the exit test and the README.md Java
# quick start compiled with plain `javac` against the jar alone, each of which must print its
# line and exit by itself within a time limit; both also on the newest JDK on the machine,
# where (JDK 24+, JEP 472) the quick start must print no restricted-method warning with
# --enable-native-access=ALL-UNNAMED, nor as an executable fat jar keeping the SDK's manifest
# (its Enable-Native-Access entry). Before the suite: the committed dev.cycles.errors classes
# against core's table (gen-errors.sh --check) and the committed internal/Native.java against
# the natives! blocks of bindings/jvm/src (gen-native.sh --check); after it the jar's manifest.
# Also the journal interop with the Rust CLI and the Python wheel (JournalInteropCheck, which
# needs python/scripts/test.sh's venv). The recovery conformance adapter
# (conformance/adapters/jvm) runs on the java/target this script leaves.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
J="$ROOT/java"
log() { printf '== java: %s\n' "$*" >&2; }
# BoundaryTest panics in the native library on purpose (it must surface as INTERNAL): the
# panic's message is enough in the log, without a backtrace (as python/scripts/test.sh and CTest).
export RUST_BACKTRACE=0
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-java-test.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# Tests per class; a new test needs its count here.
declare -A EXPECTED=([VectorsTest]=3 [ClientTest]=11 [LifecycleTest]=13 [BoundaryTest]=5
    [RecoveryCoreTest]=7 [RecoveryProcessTest]=6 [RecoveryJournalTest]=3 [ReferenceCorpusTest]=2 [OfficialRecordsTest]=1
    [ClassLoaderTest]=3 [ExecutorPropagationTest]=3 [OperationsTest]=13 [DrainReportTest]=1 [NativeDeclarationsTest]=2
    [LocalServerTest]=3 [GuardHandleTest]=8 [CapsPlanTest]=3 [NativeLoaderTest]=4 [PricingVectorsTest]=1 [JournalRedisTest]=3)
EXIT_LIMIT=20

# A JDK 17+ and Maven; a bare image gets them from apt.
if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then
    log "installing a JDK and Maven"
    SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null
fi

# Checks target/surefire-reports: exactly the expected tests per class, all passed.
check_reports() {
    python3 - "$J/target/surefire-reports" "$@" <<'PY'
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
print(f"surefire: {sum(got.values())} passed, 0 failed ({len(got)} classes)")
PY
}

TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
log "error classes: dev.cycles.errors against core's table"
(cd "$ROOT" && cargo build -q -p cycles-jvm --locked)
bash "$J/scripts/gen-errors.sh" --check "$TARGET/debug/libcycles_jvm.so"
log "Native.java: generated from the natives! blocks of bindings/jvm/src"
bash "$J/scripts/gen-native.sh" --check

log "package (debug profile): cargo build, mvn package with the JUnit suite"
rm -rf "$J/target/surefire-reports"
CYCLES_PACKAGE_PROFILE=dev "$ROOT/scripts/package.sh" "$WORK/out" java
args=(); for k in "${!EXPECTED[@]}"; do args+=("$k=${EXPECTED[$k]}"); done
check_reports "${args[@]}"
JAR="$(ls "$WORK"/out/java/cycles-sdk-*[0-9].jar)"
for extra in sources javadoc; do
    ls "$WORK"/out/java/cycles-sdk-*-"$extra".jar >/dev/null
done
jar tf "$JAR" >"$WORK/jar-list"
grep -qx "native/linux-x86_64/libcycles_jvm.so" "$WORK/jar-list" || { echo "the jar has no native library" >&2; exit 1; }
grep -qx "META-INF/LICENSE" "$WORK/jar-list" || { echo "the jar has no META-INF/LICENSE" >&2; exit 1; }
grep -qx "META-INF/README.md" "$WORK/jar-list" || { echo "the jar has no META-INF/README.md" >&2; exit 1; }
python3 - "$JAR" "$WORK/manifest" <<'PY'
import sys, zipfile
text = zipfile.ZipFile(sys.argv[1]).read("META-INF/MANIFEST.MF").decode()
lines = text.splitlines()
for want in ("Enable-Native-Access: ALL-UNNAMED", "Automatic-Module-Name: dev.cycles.sdk"):
    if want not in lines:
        sys.exit(f"the jar's manifest lacks {want!r}:\n{text}")
# The main section's lines only (a blank line would end it), for the fat jar below.
open(sys.argv[2], "w").write("".join(line + "\n" for line in lines if line.strip()))
PY

log "client, lifecycle and operations suites against the local server's reference mode"
rm -rf "$J/target/surefire-reports"
(cd "$J" && mvn -B -q -o surefire:test -Dtest='ClientTest,LifecycleTest,OperationsTest' -Dcycles.test.server.mode=reference \
    -Dsurefire.failIfNoSpecifiedTests=true) >&2
check_reports "ClientTest=${EXPECTED[ClientTest]}" "LifecycleTest=${EXPECTED[LifecycleTest]}" \
    "OperationsTest=${EXPECTED[OperationsTest]}"

log "journal interop: JVM <-> Rust CLI <-> Python wheel (JournalInteropCheck)"
# Not in the default includes: it needs the CLI and the test venv python/scripts/test.sh leaves.
PY_VENV_PYTHON="${CYCLES_PY_CACHE:-$HOME/.cache/cycles-python}/test-venv/bin/python"
(cd "$ROOT" && cargo build -q -p cycles-cli --locked)
rm -rf "$J/target/surefire-reports"
(cd "$J" && mvn -B -q -o surefire:test -Dtest=JournalInteropCheck -Dsurefire.failIfNoSpecifiedTests=true \
    -Dcycles.cli="$TARGET/debug/cycles" -Dcycles.python="$PY_VENV_PYTHON") >&2
check_reports "JournalInteropCheck=3"

# Runs `JAVA ARGS...` (stderr into DIR/stderr), demanding exit 0, the line, and an exit in time.
run_plain() {
    local java="$1" dir="$2" want="$3" start out rc=0
    shift 3
    start=$(date +%s)
    out="$(timeout "$EXIT_LIMIT" "$java" -Dcycles.shutdown.drain.ms=1000 "$@" 2>"$dir/stderr")" || rc=$?
    if [[ $rc -ne 0 ]]; then
        cat "$dir/stderr" >&2
        echo "$* ($java): exit status $rc (124: did not exit within ${EXIT_LIMIT}s)" >&2
        exit 1
    fi
    grep -qx "$want" <<<"$out" || { echo "$* printed: $out (want: $want)" >&2; exit 1; }
    log "${*: -1} ($("$java" -version 2>&1 | head -1)): exited by itself in $(( $(date +%s) - start ))s"
}

# Fails when DIR/stderr has the JDK's restricted-method (native access) warning.
no_native_access_warning() {
    if grep -q "restricted method" "$1/stderr"; then
        cat "$1/stderr" >&2
        echo "$2: the JDK warned about native access" >&2
        exit 1
    fi
}

log "exit test and README.md quick start with plain javac / java"
mkdir -p "$WORK/exit" "$WORK/quick"
cp "$J/exit/ExitCheck.java" "$WORK/exit/"
javac -cp "$JAR" -d "$WORK/exit" "$WORK/exit/ExitCheck.java"
python3 - "$ROOT/README.md" "$WORK/quick/QuickStart.java" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = text.split("## Java quick start", 1)[1]
block = re.search(r"```java\n(.*?)```", section, re.S).group(1)
open(sys.argv[2], "w").write(block)
PY
javac --release 17 -cp "$JAR" -d "$WORK/quick" "$WORK/quick/QuickStart.java"
javas=(java)
newest="$(ls -d /usr/lib/jvm/*/bin/java 2>/dev/null | sort -V | tail -1 || true)"
[[ -n "$newest" && "$("$newest" -version 2>&1 | head -1)" != "$(java -version 2>&1 | head -1)" ]] && javas+=("$newest")
for java in "${javas[@]}"; do
    run_plain "$java" "$WORK/exit" "main returned" -cp "$JAR:$WORK/exit" ExitCheck
    run_plain "$java" "$WORK/quick" "answer 42, charged 420000" -cp "$JAR:$WORK/quick" QuickStart
done

# JDK 24+ warns at the native library's load unless native access is enabled (docs/jvm.md).
feature="$("${javas[-1]}" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')"
if [[ "${feature%%.*}" -ge 24 ]]; then
    java="${javas[-1]}"
    log "native access on JDK $feature: the flag on a class path, the manifest entry in an executable jar"
    run_plain "$java" "$WORK/quick" "answer 42, charged 420000" --enable-native-access=ALL-UNNAMED -cp "$JAR:$WORK/quick" QuickStart
    no_native_access_warning "$WORK/quick" "--enable-native-access=ALL-UNNAMED"
    # A fat jar as users build one: the SDK's classes, the application's, the SDK's manifest
    # plus a Main-Class.
    mkdir -p "$WORK/fat/classes"
    (cd "$WORK/fat/classes" && "$(dirname "$java")/jar" xf "$JAR" && rm META-INF/MANIFEST.MF)
    cp "$WORK"/quick/*.class "$WORK/fat/classes/"
    { grep -v '^Manifest-Version\|^Created-By' "$WORK/manifest"; echo "Main-Class: QuickStart"; } >"$WORK/fat/manifest"
    "$(dirname "$java")/jar" --create --file "$WORK/fat/app.jar" --manifest "$WORK/fat/manifest" -C "$WORK/fat/classes" .
    run_plain "$java" "$WORK/fat" "answer 42, charged 420000" -jar "$WORK/fat/app.jar"
    no_native_access_warning "$WORK/fat" "java -jar with Enable-Native-Access in the manifest"
else
    log "native access: the newest JDK here is $feature (< 24): nothing to check"
fi
log "all JVM tests passed"
