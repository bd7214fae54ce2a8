# Sourced by the language benchmarks (java/scripts/bench.sh, node/scripts/bench.sh): starts
# `cycles serve` (the release CLI at $1) on a free port with a budget no benchmark exhausts,
# its output in $2/serve.out; sets SERVER (its pid, for the caller's cleanup trap) and URL.
bench_server_start() {
    local cycles="$1" work="$2"
    "$cycles" serve --port 0 --budget tenant:acme=USD_MICROCENTS:1000000000000000 >"$work/serve.out" &
    SERVER=$!
    for _ in $(seq 100); do grep -q "listening on" "$work/serve.out" && break; sleep 0.05; done
    URL="$(sed -n 's/.*listening on //p' "$work/serve.out" | head -1)"
    [[ -n "$URL" ]] || { echo "cycles serve did not start" >&2; return 1; }
}
