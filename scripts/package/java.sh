# shellcheck shell=bash
# The jar with its native libraries.
# Sourced by scripts/package.sh (which sets ROOT, OUT, PROFILE, TARGET, PLATFORMS and log).
#
#   OUT/java/cycles-sdk-X.Y.Z.jar          dev.cycles:cycles-sdk with one libcycles_jvm.so per
#                                          platform built, under native/CLASSIFIER/ (linux-x86_64,
#                                          linux-aarch_64, linux-x86_64-musl, linux-aarch_64-musl;
#                                          common.sh platform_jvm_classifier), META-INF/LICENSE
#                                          and META-INF/README.md (java/README.md)
#   OUT/java/cycles-sdk-X.Y.Z-{sources,javadoc}.jar   each with META-INF/LICENSE too
#   OUT/java/natives-debug/CLASSIFIER/libcycles_jvm.so.debug
#                                          the natives' debug info (the natives are stripped),
#                                          and LICENSE beside them
#
# The host platform in the dev profile is built with plain cargo into $TARGET (the tests'
# path), every other by cargo-zigbuild (common.sh platform_cargo). Maven runs the JUnit suite
# (against the host's native) unless CYCLES_PACKAGE_SKIP_TESTS=1 or the host platform is not
# among those built.

package_java() {
    local dir stamp platform classifier natives mvn=(mvn -B -q) skip=()
    # Staged under OUT (removed at the end), not in the shared target dir (see kotlin.sh).
    natives="$OUT/.java-staging"
    rm -rf "$natives" "$OUT/java"
    scratch "$natives"
    mkdir -p "$OUT/java"
    for platform in "${PLATFORMS[@]}"; do
        classifier="$(platform_jvm_classifier "$platform")"
        log "Java: libcycles_jvm for $platform ($PROFILE)"
        if [[ "$platform" == "$HOST_PLATFORM" && "$PROFILE" == dev ]]; then
            (cd "$ROOT" && cargo build -q -p cycles-jvm --locked --profile dev)
            dir="$TARGET/debug"
        else
            platform_cargo "$platform" lib zigbuild -q -p cycles-jvm >&2
            dir="$(platform_artifact_dir "$platform" lib)"
        fi
        mkdir -p "$natives/$classifier" "$OUT/java/natives-debug/$classifier"
        cp "$dir/libcycles_jvm.so" "$natives/$classifier/"
        strip_artifact "$platform" "$natives/$classifier/libcycles_jvm.so" \
            "$OUT/java/natives-debug/$classifier/libcycles_jvm.so.debug"
    done
    # Offline once this pom's plugins and dependencies were resolved into ~/.m2.
    stamp="$HOME/.m2/cycles-sdk-resolved-$(sha256sum "$ROOT/java/pom.xml" | cut -c1-16)"
    [[ -f "$stamp" ]] && mvn+=(-o)
    if [[ "${CYCLES_PACKAGE_SKIP_TESTS:-0}" == 1 || " ${PLATFORMS[*]} " != *" $HOST_PLATFORM "* ]]; then
        skip=(-DskipTests)
    fi
    log "Java: dev.cycles:cycles-sdk with $(cd "$natives" && ls | tr '\n' ' ')"
    (cd "$ROOT/java" && "${mvn[@]}" clean package "${skip[@]}" -Dcycles.native.root="$natives") >&2
    mkdir -p "$(dirname "$stamp")" && touch "$stamp"
    cp "$ROOT"/java/target/cycles-sdk-*.jar "$OUT/java/"
    # The javadoc plugin packs the generated pages only; the LICENSE goes in as in the others.
    python3 -c '
import sys, zipfile
with zipfile.ZipFile(sys.argv[2], "a", zipfile.ZIP_DEFLATED) as z:
    if "META-INF/LICENSE" not in z.namelist():
        z.write(sys.argv[1], "META-INF/LICENSE")
' "$ROOT/LICENSE" "$(ls "$OUT"/java/cycles-sdk-*-javadoc.jar)"
    cp "$ROOT/LICENSE" "$OUT/java/natives-debug/"
    rm -rf "$natives"
    log "Java: $(cd "$OUT/java" && ls | tr '\n' ' ')"
}
