#!/usr/bin/env bash
# ktlint, the Kotlin linter (version pinned in kotlin/lint/pom.xml, the CLI from Maven Central
# run with plain `java`; settings in the repository's .editorconfig), over the hand-written
# Kotlin: kotlin/src/main, kotlin/src/test and the matrix's face (conformance/matrix/faces/kotlin),
# and over the models bindings/codegen writes (Models.kt: the generator writes ktlint's layout,
# and this holds it to that). Left out: uniffi-bindgen's output (kotlin/src/generated/.../ffi),
# which is uniffi's own layout and must stay byte for byte what its generator writes (the drift
# check in bindings/uniffi/scripts/generate.sh). Exits non-zero on any error.
#   kotlin/scripts/lint.sh            check
#   kotlin/scripts/lint.sh --format   fix what ktlint can fix, then report the rest
# The class path is resolved by Maven once (offline once Maven's cache holds ktlint) and kept in
# $CARGO_TARGET_DIR/ktlint-VERSION.classpath.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
v="$(sed -n 's:.*<ktlint.version>\(.*\)</ktlint.version>.*:\1:p' "$ROOT/kotlin/lint/pom.xml")"
CP="$TARGET/ktlint-$v.classpath"
usable() { [[ -s "$CP" ]] && tr ':' '\n' <"$CP" | while read -r j; do [[ -f "$j" ]] || exit 1; done; }
if ! usable; then
    m2="$HOME/.m2/repository"
    MVN=(mvn -B -q)
    [[ -d "$m2/com/pinterest/ktlint/ktlint-cli/$v" && -d "$m2/org/apache/maven/plugins/maven-dependency-plugin/3.8.1" ]] && MVN+=(-o)
    mkdir -p "$TARGET"
    (cd "$ROOT/kotlin/lint" && "${MVN[@]}" dependency:build-classpath -Dmdep.outputFile="$CP.tmp") >&2
    mv "$CP.tmp" "$CP"
fi
cd "$ROOT"
exec java -cp "$(cat "$CP")" com.pinterest.ktlint.Main --relative "$@" \
    'kotlin/src/main/**/*.kt' 'kotlin/src/test/**/*.kt' 'conformance/matrix/faces/kotlin/**/*.kt' \
    'kotlin/src/generated/kotlin/dev/cycles/kotlin/Models.kt'
