# shellcheck shell=bash
# The Kotlin jar with its native library in JNA's layout.
# Sourced by scripts/package.sh (which sets ROOT, OUT, PROFILE, TARGET, PLATFORMS,
# LANGS_DEFAULTED and log).
#
#   OUT/kotlin/cycles-kotlin-X.Y.Z.jar     dev.cycles:cycles-kotlin (dev.cycles.kotlin and the
#                                          generated dev.cycles.kotlin.ffi) with one stripped
#                                          libcycles_uniffi.so per glibc platform built, under
#                                          JNA's resource prefix (linux-x86-64/, linux-aarch64/),
#                                          META-INF/LICENSE and META-INF/README.md (kotlin/README.md)
#   OUT/kotlin/natives-debug/PREFIX/libcycles_uniffi.so.debug   their debug info, LICENSE beside
#
# JNA finds `linux-x86-64/libcycles_uniffi.so` on the class path by itself (no
# -Djna.library.path). JNA's prefix names the OS and the architecture only, so a musl library
# would take the glibc one's place: the musl platforms are left out of this jar (said so when
# asked for; with only musl platforms asked, an error when kotlin was named, skipped when
# scripts/package.sh was given no language). The host platform in the dev profile is built with plain cargo into $TARGET, every
# other by cargo-zigbuild (common.sh platform_cargo). Maven compiles into
# OUT/.kotlin-staging/build (never kotlin/target, which the tests and the recovery adapter
# use; removed once the jar is copied out, or when the run fails) and skips the tests: kotlin/scripts/test.sh runs them. kotlin/scripts/install-check.sh
# then compiles and runs docs/kotlin.md's quick start against this jar alone.

# JNA's resource prefix (com.sun.jna.Platform.RESOURCE_PREFIX) of a platform, or nothing for a
# platform this jar cannot carry.
platform_jna_prefix() {
    case "$1" in
        linux-x64-gnu) echo linux-x86-64 ;;
        linux-arm64-gnu) echo linux-aarch64 ;;
        *) echo "" ;;
    esac
}

package_kotlin() {
    local dir platform prefix natives build mvn=(mvn -B -q) kv m2="$HOME/.m2/repository" carried=()
    # Staged under OUT (removed at the end), not in the shared target dir: two runs packaging at
    # once (CI's background platform checks beside the Kotlin suite, or two checkouts) must not
    # delete each other's natives or Maven build.
    natives="$OUT/.kotlin-staging/natives"
    build="$OUT/.kotlin-staging/build"
    rm -rf "$OUT/.kotlin-staging" "$OUT/kotlin"
    scratch "$OUT/.kotlin-staging"
    mkdir -p "$OUT/kotlin"
    for platform in "${PLATFORMS[@]}"; do
        prefix="$(platform_jna_prefix "$platform")"
        if [[ -z "$prefix" ]]; then
            log "Kotlin: $platform left out (JNA's resource prefix cannot tell musl from glibc)"
            continue
        fi
        log "Kotlin: libcycles_uniffi for $platform ($PROFILE)"
        if [[ "$platform" == "$HOST_PLATFORM" && "$PROFILE" == dev ]]; then
            (cd "$ROOT" && cargo build -q -p cycles-uniffi --locked --profile dev)
            dir="$TARGET/debug"
        else
            platform_cargo "$platform" lib zigbuild -q -p cycles-uniffi >&2
            dir="$(platform_artifact_dir "$platform" lib)"
        fi
        mkdir -p "$natives/$prefix" "$OUT/kotlin/natives-debug/$prefix"
        cp "$dir/libcycles_uniffi.so" "$natives/$prefix/"
        strip_artifact "$platform" "$natives/$prefix/libcycles_uniffi.so" \
            "$OUT/kotlin/natives-debug/$prefix/libcycles_uniffi.so.debug"
        carried+=("$prefix")
    done
    if [[ ${#carried[@]} -eq 0 ]]; then
        rm -rf "$OUT/kotlin" "$OUT/.kotlin-staging"
        [[ "${LANGS_DEFAULTED:-0}" == 1 ]] && { log "Kotlin: skipped (no glibc platform asked for)"; return 0; }
        echo "no platform the Kotlin jar can carry was asked for" >&2
        return 2
    fi
    # LICENSE and the user README go in as META-INF/ resources, as in the JVM jar.
    mkdir -p "$natives/META-INF"
    cp "$ROOT/LICENSE" "$natives/META-INF/LICENSE"
    cp "$ROOT/kotlin/README.md" "$natives/META-INF/README.md"
    kv="$(sed -n 's:.*<kotlin.version>\(.*\)</kotlin.version>.*:\1:p' "$ROOT/kotlin/pom.xml")"
    [[ -d "$m2/org/jetbrains/kotlin/kotlin-maven-plugin/$kv" && -d "$m2/org/apache/maven/plugins/maven-dependency-plugin/3.8.1" &&
        -d "$m2/org/junit/platform/junit-platform-console/6.1.3" &&
        -d "$m2/org/jetbrains/kotlin/kotlin-serialization-compiler-plugin-embeddable/$kv" ]] && mvn+=(-o)
    log "Kotlin: dev.cycles:cycles-kotlin with ${carried[*]}"
    (cd "$ROOT/kotlin" && "${mvn[@]}" package -Dmaven.test.skip=true -Dcycles.build.directory="$build" \
        -Dcycles.native.root="$natives") >&2
    cp "$build"/cycles-kotlin-*.jar "$OUT/kotlin/"
    cp "$ROOT/LICENSE" "$OUT/kotlin/natives-debug/"
    rm -rf "$OUT/.kotlin-staging"
    log "Kotlin: $(cd "$OUT/kotlin" && ls | tr '\n' ' ')"
}
