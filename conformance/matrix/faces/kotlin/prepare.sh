#!/usr/bin/env bash
# Prepares the Kotlin face in $CARGO_TARGET_DIR/matrix-kotlin: libcycles_uniffi (cargo, debug,
# copied beside the face so a later cargo build cannot swap it mid-run), the library's jar
# (kotlin/ built by Maven into lib/, tests skipped: kotlin/scripts/test.sh runs them; rebuilt
# when a source under kotlin/src/main, kotlin/src/generated or kotlin/pom.xml is newer than
# it) and the driver (Face.kt, and Load.kt: the load op) compiled against that jar (warnings as
# errors) into face/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../../.." && pwd)"
HERE="$ROOT/conformance/matrix/faces/kotlin"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
CACHE="$TARGET/matrix-kotlin"
log() { printf '== matrix kotlin: %s\n' "$*" >&2; }

command -v mvn >/dev/null && command -v java >/dev/null ||
    { echo "no JDK or Maven: kotlin/scripts/test.sh installs them" >&2; exit 1; }
# The face's pom pins the library's versions; they must be kotlin/pom.xml's.
for dep in kotlin.version kotlinx-coroutines-core-jvm kotlinx-serialization-json-jvm '<artifactId>jna'; do
    a="$(grep -A1 -- "$dep" "$ROOT/kotlin/pom.xml" | grep -o '[0-9][0-9.]*[0-9]' | head -1)"
    b="$(grep -A1 -- "$dep" "$HERE/pom.xml" | grep -o '[0-9][0-9.]*[0-9]' | head -1)"
    [[ "$a" == "$b" ]] || { echo "faces/kotlin/pom.xml has $dep $b, kotlin/pom.xml $a" >&2; exit 1; }
done
kv="$(sed -n 's:.*<kotlin.version>\(.*\)</kotlin.version>.*:\1:p' "$ROOT/kotlin/pom.xml")"
MVN=(mvn -B -q)
m2="$HOME/.m2/repository"
[[ -d "$m2/org/jetbrains/kotlin/kotlin-maven-plugin/$kv" && -d "$m2/org/apache/maven/plugins/maven-dependency-plugin/3.8.1" &&
    -d "$m2/org/junit/platform/junit-platform-console/6.1.3" &&
    -d "$m2/org/jetbrains/kotlin/kotlin-serialization-compiler-plugin-embeddable/$kv" ]] && MVN+=(-o)

(cd "$ROOT" && cargo build -q --locked -p cycles-uniffi)
mkdir -p "$CACHE/native"
if [[ ! -f "$CACHE/native/libcycles_uniffi.so" || "$TARGET/debug/libcycles_uniffi.so" -nt "$CACHE/native/libcycles_uniffi.so" ]]; then
    cp -p "$TARGET/debug/libcycles_uniffi.so" "$CACHE/native/libcycles_uniffi.so"
fi

newest() { find "$@" -type f -printf '%T@\n' | sort -n | tail -1; }
older() { [[ ! -f "$1" ]] || awk -v f="$(stat -c %Y "$1")" -v s="$2" 'BEGIN { exit !(f < s) }'; }
JAR="$CACHE/lib/cycles-kotlin-0.1.0.jar"
if older "$JAR" "$(newest "$ROOT/kotlin/src/main" "$ROOT/kotlin/src/generated" "$ROOT/kotlin/pom.xml")"; then
    log "the library's jar (mvn package, tests skipped, into $CACHE/lib)"
    (cd "$ROOT/kotlin" && "${MVN[@]}" package -Dmaven.test.skip=true -Dcycles.build.directory="$CACHE/lib") >&2
fi
if older "$CACHE/face/classes/FaceKt.class" "$(newest "$HERE"/*.kt "$HERE/pom.xml" "$JAR")" ||
   [[ ! -f "$CACHE/face/classpath.txt" ]]; then
    log "Face.kt and Load.kt (kotlin-maven-plugin, -Werror)"
    rm -rf "$CACHE/face"
    (cd "$HERE" && "${MVN[@]}" compile -Dcycles.kotlin.jar="$JAR" -Dcycles.face.out="$CACHE/face") >&2
fi
log "ready ($CACHE)"
