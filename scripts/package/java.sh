# shellcheck shell=bash
# The jar with its native library.
# Sourced by scripts/package.sh (which sets ROOT, OUT, PROFILE, TARGET, PLATFORMS and log).

package_java() {
    local dir stamp mvn=(mvn -B -q) skip=()
    dir="$TARGET/$([[ "$PROFILE" == dev ]] && echo debug || echo "$PROFILE")"
    log "Java: libcycles_jvm ($PROFILE) and dev.cycles:cycles-sdk"
    (cd "$ROOT" && cargo build -q -p cycles-jvm --locked --profile "$PROFILE")
    # Offline once this pom's plugins and dependencies were resolved into ~/.m2.
    stamp="$HOME/.m2/cycles-sdk-resolved-$(sha256sum "$ROOT/java/pom.xml" | cut -c1-16)"
    [[ -f "$stamp" ]] && mvn+=(-o)
    [[ "${CYCLES_PACKAGE_SKIP_TESTS:-0}" == 1 ]] && skip=(-DskipTests)
    (cd "$ROOT/java" && "${mvn[@]}" clean package "${skip[@]}" -Dcycles.native.dir="$dir") >&2
    mkdir -p "$(dirname "$stamp")" && touch "$stamp"
    rm -rf "$OUT/java"
    mkdir -p "$OUT/java"
    cp "$ROOT"/java/target/cycles-sdk-*.jar "$OUT/java/"
    log "Java: $(cd "$OUT/java" && ls)"
}
