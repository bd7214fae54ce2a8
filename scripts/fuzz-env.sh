# Sourced by scripts/fuzz.sh and scripts/fuzz-growth.sh (with `root` set to the repository):
# cargo-fuzz, pinned and installed on first use into a cache dir keyed by its version, on PATH;
# and the paths both read. Sets target_root (the absolute CARGO_TARGET_DIR each build goes
# below), triple, corpus_root and kept_root (CYCLES_FUZZ_CORPUS, CYCLES_FUZZ_KEPT; absolute,
# as `keep` runs from the corpus root).
CARGO_FUZZ_VERSION=0.13.2
tools="${CYCLES_FUZZ_TOOLS:-$HOME/.cache/cycles-fuzz/cargo-fuzz-$CARGO_FUZZ_VERSION}"
if [[ ! -x "$tools/bin/cargo-fuzz" ]]; then
    echo "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION into $tools" >&2
    CARGO_TARGET_DIR="$tools/build" cargo install cargo-fuzz --version "=$CARGO_FUZZ_VERSION" \
        --locked --root "$tools" --quiet
    rm -rf "$tools/build"
fi
export PATH="$tools/bin:$PATH"
target_root="$(realpath -m "${CARGO_TARGET_DIR:-$HOME/.cache/cycles-target}")"
triple="$(rustc -vV | sed -n 's/^host: //p')"
corpus_root="$(realpath -m "${CYCLES_FUZZ_CORPUS:-$root/fuzz/corpus}")"
kept_root="$(realpath -m "${CYCLES_FUZZ_KEPT:-$root/fuzz/kept}")"
