#!/usr/bin/env bash
# The Kotlin jar as a user gets it: in a fresh folder outside the checkout, docs/kotlin.md's
# quick start is compiled (kotlin-maven-plugin) against only that jar and the dependencies its
# own embedded pom (META-INF/maven/dev.cycles/cycles-kotlin/pom.xml) declares, then run with
# plain `java` and no -Djna.library.path: JNA must load libcycles_uniffi from the jar
# (checked in JNA's load log), the quick start must print its line and the JVM exit by itself.
#
#   kotlin/scripts/install-check.sh OUT/kotlin/cycles-kotlin-X.Y.Z.jar
#
# CYCLES_KOTLIN_INSTALL_KEEP=DIR: once it passed, the compiled quick start is copied to
# DIR/classes and the jars of its class path (this jar and its declared dependencies) to
# DIR/lib, for a run on another platform (scripts/verify/kotlin.sh: in the arm64 root).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
JAR="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
[[ -f "$JAR" ]] || { echo "no jar at $1" >&2; exit 2; }
log() { printf '== kotlin install check: %s (%ds)\n' "$*" "$SECONDS" >&2; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-kotlin-install.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/lib" "$WORK/src/main/kotlin"
cp "$JAR" "$WORK/lib/"
log "the quick start of docs/kotlin.md, and a pom of the jar's own dependencies, in $WORK"
python3 - "$ROOT/docs/kotlin.md" "$WORK" "$WORK/lib/$(basename "$JAR")" <<'PY'
import re, sys, zipfile
import xml.etree.ElementTree as ET
doc, work, jar = sys.argv[1:]
text = open(doc, encoding="utf-8").read().split("## Quick start", 1)[1]
quick = re.search(r"```kotlin\n(.*?)```", text, re.S).group(1)
open(f"{work}/src/main/kotlin/QuickStart.kt", "w", encoding="utf-8").write(quick)
ns = {"m": "http://maven.apache.org/POM/4.0.0"}
with zipfile.ZipFile(jar) as z:
    names = z.namelist()
    assert "linux-x86-64/libcycles_uniffi.so" in names, "the jar has no linux-x86-64/libcycles_uniffi.so"
    assert "META-INF/LICENSE" in names and "META-INF/README.md" in names, "the jar lacks LICENSE or README"
    pom = ET.fromstring(z.read("META-INF/maven/dev.cycles/cycles-kotlin/pom.xml"))
props = {p.tag.split("}")[1]: p.text for p in pom.find("m:properties", ns)}
version = pom.find("m:version", ns).text
deps = []
for d in pom.find("m:dependencies", ns):
    scope = d.find("m:scope", ns)
    if scope is not None and scope.text == "test":
        continue
    g, a, v = (d.find(f"m:{k}", ns).text for k in ("groupId", "artifactId", "version"))
    v = re.sub(r"\$\{([^}]+)\}", lambda m: props[m.group(1)], v)
    deps.append(f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>")
kotlin = props["kotlin.version"]
open(f"{work}/pom.xml", "w", encoding="utf-8").write(f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId><artifactId>quickstart</artifactId><version>1</version>
  <properties><project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <kotlin.compiler.jvmTarget>17</kotlin.compiler.jvmTarget></properties>
  <dependencies>
    <dependency><groupId>dev.cycles</groupId><artifactId>cycles-kotlin</artifactId><version>{version}</version>
      <scope>system</scope><systemPath>{jar}</systemPath></dependency>
    {''.join(deps)}
  </dependencies>
  <build>
    <sourceDirectory>src/main/kotlin</sourceDirectory>
    <plugins>
      <plugin><groupId>org.jetbrains.kotlin</groupId><artifactId>kotlin-maven-plugin</artifactId>
        <version>{kotlin}</version>
        <executions><execution><id>compile</id><goals><goal>compile</goal></goals></execution></executions></plugin>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-dependency-plugin</artifactId>
        <version>3.8.1</version>
        <executions><execution><id>cp</id><phase>compile</phase><goals><goal>build-classpath</goal></goals>
          <configuration><includeScope>runtime</includeScope><outputFile>classpath.txt</outputFile></configuration>
        </execution></executions></plugin>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version></plugin>
    </plugins>
  </build>
</project>
""")
PY
kv="$(sed -n 's:.*<kotlin.version>\(.*\)</kotlin.version>.*:\1:p' "$ROOT/kotlin/pom.xml")"
MVN=(mvn -B -q)
[[ -d "$HOME/.m2/repository/org/jetbrains/kotlin/kotlin-maven-plugin/$kv" &&
    -d "$HOME/.m2/repository/org/apache/maven/plugins/maven-dependency-plugin/3.8.1" ]] && MVN+=(-o)
log "compile (mvn compile in the fresh folder)"
(cd "$WORK" && "${MVN[@]}" compile) >&2
log "run with plain java, no jna.library.path, no LD_LIBRARY_PATH"
out="$(cd "$WORK" && env -u LD_LIBRARY_PATH timeout 60 java -Djna.debug_load=true \
    -cp "target/classes:lib/$(basename "$JAR"):$(cat classpath.txt)" QuickStartKt 2>&1)" || { echo "$out" >&2; echo "the quick start failed" >&2; exit 1; }
grep -qx "answer 42, charged 150000" <<<"$out" || { echo "$out" >&2; echo "the quick start did not print its line" >&2; exit 1; }
grep -q "resource.*jar:file:.*cycles-kotlin.*linux-x86-64/libcycles_uniffi.so" <<<"$out" ||
    { echo "$out" >&2; echo "libcycles_uniffi was not loaded from the jar" >&2; exit 1; }
grep "resource.*linux-x86-64/libcycles_uniffi.so" <<<"$out" | head -1 >&2
if [[ -n "${CYCLES_KOTLIN_INSTALL_KEEP:-}" ]]; then
    keep="$CYCLES_KOTLIN_INSTALL_KEEP"
    rm -rf "${keep:?}/classes" "${keep:?}/lib"
    mkdir -p "$keep/classes" "$keep/lib"
    cp -r "$WORK/target/classes/." "$keep/classes/"
    cp "$WORK/lib/$(basename "$JAR")" "$keep/lib/"
    # Maven repository paths (no spaces); classpath.txt has no final newline.
    for dep in $(tr ':' ' ' <"$WORK/classpath.txt"); do
        cp "$dep" "$keep/lib/"
    done
    log "the compiled quick start and its class path's $(find "$keep/lib" -name '*.jar' | wc -l) jars kept in $keep"
fi
log "ok: the quick start ran against the jar alone (libcycles_uniffi from linux-x86-64/ in the jar)"
