#!/usr/bin/env bash
# Installs dev.cycles:cycles-sdk (the jar java/'s build produces) into the local Maven
# repository, where spring/'s modules resolve it like any application would.
#
#   spring/scripts/install-sdk.sh [JAR]
#
# With JAR (e.g. OUT/java/cycles-sdk-0.1.0.jar from scripts/package.sh), that jar; without,
# this script builds one for the host: libcycles_jvm (cargo, debug profile, honouring
# $CARGO_TARGET_DIR) and java/'s Maven build run on a copy of java/ in a temporary directory
# (no tests: java/scripts/test.sh runs them), so java/target, which the recovery adapter reads,
# is left alone.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
log() { printf '== spring: %s\n' "$*" >&2; }
VERSION="$(sed -n 's:^  <version>\(.*\)</version>:\1:p' "$ROOT/java/pom.xml" | head -1)"
mvn=(mvn -B -q)
stamp="$HOME/.m2/cycles-spring-sdk-resolved-$(cat "$ROOT/java/pom.xml" "$ROOT/spring/pom.xml" | sha256sum | cut -c1-16)"
[[ -f "$stamp" ]] && mvn+=(-o)
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cycles-spring-sdk.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
if [[ $# -ge 1 ]]; then
    JAR="$1"
else
    TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
    log "libcycles_jvm (debug profile)"
    (cd "$ROOT" && cargo build -q -p cycles-jvm --locked)
    mkdir -p "$WORK/natives/linux-$(uname -m)" "$WORK/sdk"
    cp "$TARGET/debug/libcycles_jvm.so" "$WORK/natives/linux-$(uname -m)/"
    cp -r "$ROOT/java/pom.xml" "$ROOT/java/src" "$WORK/sdk/"
    mkdir -p "$WORK/sdk/src/main/resources" && cp "$ROOT/LICENSE" "$WORK/LICENSE"
    rm -rf "$WORK/sdk/src/test"
    log "dev.cycles:cycles-sdk:$VERSION from java/ (a copy; tests not run here)"
    (cd "$WORK/sdk" && "${mvn[@]}" package -Dmaven.test.skip=true -Dmaven.javadoc.skip=true -Dmaven.source.skip=true \
        -Dcycles.native.root="$WORK/natives") >&2
    JAR="$WORK/sdk/target/cycles-sdk-$VERSION.jar"
fi
(cd "$ROOT/java" && "${mvn[@]}" install:install-file -Dfile="$JAR" -DpomFile="$ROOT/java/pom.xml") >&2
mkdir -p "$(dirname "$stamp")" && touch "$stamp"
log "installed $(basename "$JAR") as dev.cycles:cycles-sdk:$VERSION"
