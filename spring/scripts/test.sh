#!/usr/bin/env bash
# The Spring integration's tests (spring/: its own Maven build beside java/, docs/spring.md):
# install dev.cycles:cycles-sdk into the local Maven repository (install-sdk.sh: the jar of
# $CYCLES_SDK_JAR if set, e.g. scripts/package.sh's OUT/java/cycles-sdk-0.1.0.jar, else one
# built for the host from java/ in a temporary copy), build spring/'s modules with their JUnit
# suites (Spring Boot's test support against the SDK's LocalServer over real HTTP; the Spring AI
# advisor with a real ChatClient against the CLI's fake provider; the auto-configuration's
# test classes again on the same jars in a Spring Boot 4.0.7 application with Actuator,
# spring/boot4-check; the same advisor jar on Spring AI 2.0.1 / Boot 4.0.7,
# spring/boot4-ai-check), check
# Surefire's XML for exactly the expected number of tests per class, all passed (a filter
# matching nothing still says BUILD SUCCESS), and check the jars: the auto-configuration's
# imports and configuration metadata (our names and the official starter's).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
S="$ROOT/spring"
log() { printf '== spring: %s\n' "$*" >&2; }
# Tests per class; a new test needs its count here.
declare -A EXPECTED=([CyclesPropertiesTest]=9 [CyclesAnnotationTest]=11 [CyclesStartupTest]=4 [CyclesActuatorTest]=5 [CyclesReactiveTest]=5 [CyclesDryRunTest]=3)

if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then
    log "installing a JDK and Maven"
    SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null
fi

bash "$S/scripts/install-sdk.sh" ${CYCLES_SDK_JAR:+"$CYCLES_SDK_JAR"}

# Offline once these poms' plugins and dependencies were resolved into ~/.m2.
mvn=(mvn -B -q)
stamp="$HOME/.m2/cycles-spring-resolved-$(cat "$S"/pom.xml "$S"/*/pom.xml | sha256sum | cut -c1-16)"
[[ -f "$stamp" ]] && mvn+=(-o)
# The Spring AI advisor's tests talk to the fake provider of the `cycles` CLI.
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
log "the cycles CLI (its fake-provider, for the Spring AI advisor's tests)"
(cd "$ROOT" && cargo build -q -p cycles-cli --locked)
log "mvn install: cycles-spring-boot-autoconfigure (JUnit), cycles-spring-boot-starter, cycles-spring-ai (JUnit)"
(cd "$S" && "${mvn[@]}" clean install -Dcycles.cli="$TARGET/debug/cycles") >&2
touch "$stamp"

# Checks DIR's Surefire XML: exactly the expected tests per class (NAME=COUNT...), all passed.
check_reports() {
    python3 - "$@" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
reports, want = sys.argv[1], {k: int(v) for k, v in (a.split("=") for a in sys.argv[2:])}
got = {}
for f in glob.glob(reports + "/TEST-*.xml"):
    s = ET.parse(f).getroot()
    name = s.get("name").rsplit(".", 1)[-1]
    bad = int(s.get("failures")) + int(s.get("errors")) + int(s.get("skipped"))
    if bad:
        sys.exit(f"{name}: {bad} test(s) failed, errored or skipped")
    got[name] = int(s.get("tests"))
if got != want:
    sys.exit(f"surefire ran {got}, expected {want}")
print(f"spring: {sum(got.values())} passed, 0 failed ({len(got)} classes)")
PY
}
check_reports "$S/cycles-spring-boot-autoconfigure/target/surefire-reports" \
    $(for k in "${!EXPECTED[@]}"; do echo "$k=${EXPECTED[$k]}"; done)
check_reports "$S/cycles-spring-ai/target/surefire-reports" CyclesChatAdvisorTest=6 CyclesChatAdvisorAnthropicTest=2 \
    CyclesAiAutoConfigurationTest=5

log "jars: auto-configuration imports, configuration metadata, the starter's dependencies"
JAR="$(ls "$S"/cycles-spring-boot-autoconfigure/target/cycles-spring-boot-autoconfigure-*.jar)"
AIJAR="$(ls "$S"/cycles-spring-ai/target/cycles-spring-ai-*[0-9].jar)"
python3 - "$JAR" "$S/cycles-spring-boot-starter/pom.xml" "$AIJAR" <<'PY'
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
imports = z.read("META-INF/spring/org.springframework.boot.autoconfigure.AutoConfiguration.imports").decode().split()
assert imports == ["dev.cycles.spring.CyclesAutoConfiguration", "dev.cycles.spring.CyclesActuatorAutoConfiguration"], imports
# one health indicator per Boot line's health contract, both in the one jar
for c in ("CyclesHealthIndicator", "CyclesBoot4HealthIndicator", "CyclesMetrics"):
    z.getinfo(f"dev/cycles/spring/{c}.class")
meta = json.loads(z.read("META-INF/spring-configuration-metadata.json"))
names = {p["name"] for p in meta["properties"]}
want = {"cycles.base-url", "cycles.api-key", "cycles.tenant", "cycles.default-unit", "cycles.request-timeout",
        "cycles.connect-timeout", "cycles.journal.enabled", "cycles.journal.dir", "cycles.heartbeat.enabled",
        "cycles.heartbeat.policy", "cycles.close-timeout", "cycles.settle-max-attempts",
        # the official starter's names
        "cycles.http.connect-timeout", "cycles.http.read-timeout", "cycles.retry.enabled", "cycles.retry.max-attempts",
        "cycles.retry.flush-timeout", "management.health.cycles.enabled", "cycles.workspace", "cycles.app", "cycles.workflow", "cycles.agent", "cycles.toolset"}
missing = want - names
assert not missing, f"configuration metadata lacks {sorted(missing)}"
undocumented = sorted(p["name"] for p in meta["properties"] if not p.get("description"))
assert not undocumented, f"properties without a description: {undocumented}"
ai = zipfile.ZipFile(sys.argv[3])
ai_imports = ai.read("META-INF/spring/org.springframework.boot.autoconfigure.AutoConfiguration.imports").decode().split()
assert ai_imports == ["dev.cycles.spring.ai.CyclesAiAutoConfiguration"], ai_imports
ai_meta = json.loads(ai.read("META-INF/spring-configuration-metadata.json"))
ai_names = {p["name"] for p in ai_meta["properties"]}
ai_want = {"cycles.ai.enabled", "cycles.ai.advise-chat-clients", "cycles.ai.pricing", "cycles.ai.action-kind",
           "cycles.ai.default-output-bound", "cycles.ai.order"}
assert ai_names == ai_want, f"the advisor's configuration metadata: {sorted(ai_names)}"
assert all(p.get("description") for p in ai_meta["properties"]), "an advisor property without a description"
pom = open(sys.argv[2]).read()
for a in ("cycles-spring-boot-autoconfigure", "cycles-sdk", "spring-boot-starter"):
    assert f"<artifactId>{a}</artifactId>" in pom, a
print(f"metadata: {len(names)} properties, the advisor's {len(ai_names)}, each described")
PY
log "Spring Boot 4.0.7: the same jars in a Boot 4 application with Actuator, every auto-configuration test class"
b4stamp="$HOME/.m2/cycles-spring-boot4-resolved-$(sha256sum "$S/boot4-check/pom.xml" | cut -c1-16)"
b4mvn=(mvn -B -q)
[[ -f "$b4stamp" ]] && b4mvn+=(-o)
(cd "$S/boot4-check" && "${b4mvn[@]}" clean test) >&2
touch "$b4stamp"
check_reports "$S/boot4-check/target/surefire-reports" \
    $(for k in "${!EXPECTED[@]}"; do echo "$k=${EXPECTED[$k]}"; done)

log "Spring AI 2.0.1 on Spring Boot 4.0.7: the advisor's jar as built (Spring AI 1.1.2), auto-configured, against the fake provider"
b4aistamp="$HOME/.m2/cycles-spring-boot4-ai-resolved-$(sha256sum "$S/boot4-ai-check/pom.xml" | cut -c1-16)"
b4aimvn=(mvn -B -q)
[[ -f "$b4aistamp" ]] && b4aimvn+=(-o)
(cd "$S/boot4-ai-check" && "${b4aimvn[@]}" clean test -Dcycles.cli="$TARGET/debug/cycles") >&2
touch "$b4aistamp"
check_reports "$S/boot4-ai-check/target/surefire-reports" CyclesChatAdvisorBoot4Test=3

log "docs/spring.md quick start: an executable Boot jar (spring-boot-maven-plugin), plain java -jar"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-spring-test.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/quick/src/main/java/com/example"
python3 - "$ROOT/docs/spring.md" "$WORK/quick/src/main/java/com/example/QuickStart.java" <<'PY'
import re, sys
section = open(sys.argv[1]).read().split("## Quick start", 1)[1]
open(sys.argv[2], "w").write(re.search(r"```java\n(.*?)```", section, re.S).group(1))
PY
cat >"$WORK/quick/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>quickstart</artifactId>
  <version>1</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>org.springframework.boot</groupId>
        <artifactId>spring-boot-dependencies</artifactId>
        <version>3.5.7</version>
        <type>pom</type>
        <scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>dev.cycles</groupId>
      <artifactId>cycles-spring-boot-starter</artifactId>
      <version>0.1.0</version>
    </dependency>
  </dependencies>
  <build>
    <finalName>quickstart</finalName>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.13.0</version>
        <configuration><parameters>true</parameters></configuration>
      </plugin>
      <plugin>
        <groupId>org.springframework.boot</groupId>
        <artifactId>spring-boot-maven-plugin</artifactId>
        <version>3.5.7</version>
        <executions><execution><goals><goal>repackage</goal></goals></execution></executions>
      </plugin>
    </plugins>
  </build>
</project>
POM
qstamp="$HOME/.m2/cycles-spring-quickstart-resolved-$(sha256sum "$WORK/quick/pom.xml" | cut -c1-16)"
qmvn=(mvn -B -q)
[[ -f "$qstamp" ]] && qmvn+=(-o)
(cd "$WORK/quick" && "${qmvn[@]}" package) >&2
touch "$qstamp"
start=$(date +%s)
rc=0
out="$(timeout 60 java -Dcycles.shutdown.drain.ms=1000 -jar "$WORK/quick/target/quickstart.jar" 2>"$WORK/stderr")" || rc=$?
if [[ $rc -ne 0 ]]; then
    cat "$WORK/stderr" >&2; echo "$out" >&2
    echo "the quick start: exit status $rc (124: did not exit within 60s)" >&2
    exit 1
fi
grep -qx "answer 42, ledger true" <<<"$out" || { echo "the quick start printed: $out" >&2; exit 1; }
log "quick start: printed its line and exited by itself in $(( $(date +%s) - start ))s"
log "all Spring tests passed"
