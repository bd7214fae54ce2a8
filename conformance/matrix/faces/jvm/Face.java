import dev.cycles.Action;
import dev.cycles.CyclesClient;
import dev.cycles.CyclesEvent;
import dev.cycles.CyclesException;
import dev.cycles.DrainReport;
import dev.cycles.GuardSpec;
import dev.cycles.Journal;
import dev.cycles.Outcome;
import dev.cycles.Pricing;
import dev.cycles.Reservation;
import dev.cycles.Response;
import dev.cycles.Settlement;
import dev.cycles.Subject;
import dev.cycles.Timing;
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * The JVM face of the cross-language matrix (conformance/matrix/PROTOCOL.md): one JSON request
 * per stdin line, evaluated through the public {@code dev.cycles} API only, one JSON response
 * per stdout line. The SDK's JSON helper is internal, so a tiny reader and writer live here;
 * numbers keep their exact text and the SDK's JSON results are embedded as they are.
 */
public final class Face {
    private Face() {}

    /** A JSON number, kept as its exact text. */
    record Num(String text) {
        /** @return the value as a long, or null when it does not fit one */
        Long asLong() {
            try {
                return new BigInteger(text).longValueExact();
            } catch (ArithmeticException | NumberFormatException e) {
                return null;
            }
        }
    }

    /** JSON text embedded unchanged by {@link #write}. */
    record Raw(String json) {}

    /** A request the JVM's public API cannot express (answered with {@code fail}). */
    static final class Unsupported extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Unsupported(String message) {
            super(message);
        }
    }

    /**
     * Serves requests until stdin closes.
     *
     * @param args unused
     * @throws IOException when stdin or stdout fails
     */
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Writer out = new OutputStreamWriter(new FileOutputStream(FileDescriptor.out), StandardCharsets.UTF_8);
        // Diagnostics only: stdout belongs to the protocol.
        System.setOut(new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            out.write(write(answer(line)));
            out.write('\n');
            out.flush();
        }
    }

    /** One request line to its response object. */
    static Map<String, Object> answer(String line) {
        Map<String, Object> resp = new LinkedHashMap<>();
        Map<String, Object> req;
        try {
            req = obj(Parser.parse(line));
        } catch (RuntimeException e) {
            resp.put("id", null);
            resp.put("fail", "unreadable request: " + e.getMessage());
            return resp;
        }
        resp.put("id", req.get("id"));
        try {
            resp.put("ok", evaluate(req));
        } catch (CyclesException e) {
            resp.put("error", e.errorName());
        } catch (Unsupported e) {
            resp.put("fail", e.getMessage());
        } catch (RuntimeException e) {
            e.printStackTrace();
            resp.put("fail", e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        return resp;
    }

    static Object evaluate(Map<String, Object> r) {
        String op = str(r.get("op"));
        switch (op == null ? "" : op) {
            case "timing":
                return new Raw(Timing.call(str(r.get("fn")), write(r.get("args"))));
            case "pricing":
                return new Raw(Pricing.call(str(r.get("fn")), write(r.get("args"))));
            case "primary":
                return primary(r);
            case "fallback":
                return fallback(r);
            case "journal_names": {
                String rid = str(r.get("reservation_id"));
                return map("standard", Journal.fileName(rid), "legacy", Journal.legacyFileName(rid));
            }
            case "fingerprint":
                return Journal.fingerprint(str(r.get("base_url")), str(r.get("api_key")), str(r.get("tenant")));
            case "parse_record":
                return parseRecord(str(r.get("text")));
            case "decode":
                return decode(obj(r.get("exchange")));
            case "write":
                return writeRecord(r);
            case "drain":
                return drain(r);
            case "guard":
                return guard(r);
            case "client":
                return client(r);
            case "load":
                return load(r);
            case "work":
                return Work.work(r);
            case "journal_fail":
                return journalFail(r);
            default:
                throw new Unsupported("unknown op: " + op);
        }
    }

    static List<Object> primary(Map<String, Object> r) {
        List<Object> out = new ArrayList<>();
        try (Timing.PrimaryPlanner p = new Timing.PrimaryPlanner(write(r.get("request_timeout_ms")),
                Boolean.TRUE.equals(r.get("derive")))) {
            for (Object step : list(r.get("steps"))) {
                Raw decision = new Raw(p.step(write(step)));
                out.add(map("decision", decision, "attempt_timeout_ms", new Raw(p.attemptTimeout())));
            }
        }
        return out;
    }

    static Map<String, Object> fallback(Map<String, Object> r) {
        Map<String, Object> create = obj(r.get("create"));
        List<Object> steps = new ArrayList<>();
        Raw first;
        try (Timing.FallbackPlanner p = new Timing.FallbackPlanner(integer(r.get("requested_ttl_ms"), "requested_ttl_ms"),
                integer(create.get("at_us"), "create.at_us"), amount(create.get("expires_at_ms"), "create.expires_at_ms"))) {
            first = new Raw(p.firstBeat(Boolean.TRUE.equals(r.get("prime"))));
            for (Object step : list(r.get("steps"))) {
                Raw decision = new Raw(p.step(write(step)));
                steps.add(map("decision", decision, "regime", p.regime()));
            }
        }
        return map("first", first, "steps", steps);
    }

    /** An integer in the vectors' encoding: a JSON number, or a decimal string beyond 2^53-1. */
    static BigInteger integer(Object v, String what) {
        try {
            return new BigInteger(v instanceof Num n ? n.text() : str(v));
        } catch (NullPointerException | IllegalArgumentException e) {
            throw new Unsupported(what + " is not an integer: " + write(v));
        }
    }

    static Map<String, Object> parseRecord(String text) {
        Map<String, Object> rec;
        try {
            rec = obj(Parser.parse(Journal.parseRecord(text.getBytes(StandardCharsets.UTF_8))));
        } catch (dev.cycles.errors.InvalidArgumentException e) {
            // Journal.parseRecord's documented refusal: details {"journal_error": "corrupt" | "unsupported"}.
            Object kind = e.details().map(d -> obj(Parser.parse(d)).get("journal_error")).orElse(null);
            if (kind == null) {
                throw e;
            }
            return map("ok", false, "error", kind);
        }
        Map<String, Object> out = map("ok", true);
        for (String k : List.of("reservation_id", "base_url", "mode", "idempotency_key", "recorded_at_ms",
                "not_before_ms")) {
            out.put(k, rec.get(k));
        }
        out.put("extra_keys", rec.get("extra_keys")); // file order, as the SDK keeps them
        out.put("commit_body_wire", rec.get("commit_body"));
        out.put("event_fallback_body_wire", rec.get("event_fallback_body"));
        return out;
    }

    static Map<String, Object> decode(Map<String, Object> x) {
        Map<String, Object> resp = obj(x.get("response"));
        Map<String, String> headers = new LinkedHashMap<>();
        obj(resp.get("headers")).forEach((k, v) -> headers.put(k, str(v)));
        Long status = ((Num) resp.get("status")).asLong();
        String body = str(resp.get("body"));
        try {
            Response<String> r = CyclesClient.decodeCaptured(str(x.get("operation")), status.intValue(), headers,
                    body == null ? null : body.getBytes(StandardCharsets.UTF_8));
            return map("result", new Raw(r.body()));
        } catch (CyclesException e) {
            Map<String, Object> err = map("kind", e.errorName());
            err.put("status", e.httpStatusIfAny().isPresent() ? e.httpStatusIfAny().getAsInt() : null);
            err.put("error_code", e.serverErrorCode().orElse(null));
            err.put("request_id", e.requestId().orElse(null));
            err.put("retryable", e.isRetryable());
            err.put("retry_after_ms", e.retryAfter().map(Duration::toMillis).orElse(null));
            return map("error", err);
        }
    }

    /** A client of that identity on that journal, settling with the fewest attempts. */
    static CyclesClient client(Map<String, Object> r, Consumer<CyclesEvent> listener) {
        CyclesClient.Builder b = CyclesClient.builder().onEvent(listener).baseUrl(str(r.get("url"))).apiKey(str(r.get("api_key")))
                .journalDir(Path.of(str(r.get("journal_dir")))).settleMaxAttempts(1)
                // No background replay while the matrix hands the journal to another face.
                .replayInterval(Duration.ofDays(1));
        journalUrl(b, r);
        String tenant = str(r.get("tenant"));
        return tenant == null ? b.build() : b.tenant(tenant).build();
    }

    /** The request's Redis journal ({@code journal_url}), when it names one. */
    static CyclesClient.Builder journalUrl(CyclesClient.Builder b, Map<String, Object> r) {
        return r.get("journal_url") == null ? b : b.journalUrl(str(r.get("journal_url")));
    }

    static final Set<String> SUBJECT_KEYS = Set.of("tenant", "workspace", "app", "workflow", "agent", "toolset");

    static Subject subject(Map<String, Object> s) {
        for (String k : s.keySet()) {
            if (!SUBJECT_KEYS.contains(k)) {
                throw new Unsupported("dev.cycles.Subject has no member " + k);
            }
        }
        return new Subject(str(s.get("tenant")), str(s.get("workspace")), str(s.get("app")), str(s.get("workflow")),
                str(s.get("agent")), str(s.get("toolset")));
    }

    static long amount(Object v, String what) {
        Long l = v instanceof Num n ? n.asLong() : v instanceof String t ? new Num(t).asLong() : null;
        if (l == null) {
            throw new Unsupported("the JVM API takes " + what + " as a Java long; cannot express " + write(v));
        }
        return l;
    }

    static Map<String, Object> writeRecord(Map<String, Object> r) {
        Map<String, Object> c = obj(r.get("case"));
        Map<String, Object> action = obj(c.get("action"));
        Map<String, Object> estimate = obj(c.get("estimate"));
        GuardSpec spec = GuardSpec.of(Action.of(str(action.get("kind")), str(action.get("name"))),
                amount(estimate.get("amount"), "the estimate")).unit(str(estimate.get("unit")))
                .subject(subject(obj(c.get("subject"))));
        long actual = amount(c.get("actual"), "the actual");
        try (CyclesClient client = client(r, e -> { })) {
            Reservation res = client.reserve(spec);
            Outcome o;
            try {
                res.setActual(actual);
                if (c.get("metrics") != null) {
                    res.setMetricsJson(write(c.get("metrics")));
                }
                if (c.get("metadata") != null) {
                    // Written from the exact number text: big integers and unicode reach the body intact.
                    res.setMetadataJson(write(c.get("metadata")));
                }
            } finally {
                res.close();
            }
            o = res.outcome().orElseThrow();
            client.close(Duration.ZERO);
            Settlement s = o.settlement();
            return map("reservation_id", res.reservationId(), "outcome",
                    s == null ? o.kind().name().toLowerCase(Locale.ROOT) : s.status().name().toLowerCase(Locale.ROOT));
        }
    }

    /**
     * Drains the journal. Every client starts its background replay at once, and a record that
     * pass holds is skipped by {@code drain()}, so the drain report alone can miss records this
     * client settled. The driver therefore also listens to the client's events: settled is every
     * reservation with a {@code settlement_settled} event while the client lived, quarantined the
     * larger of the report's count and the {@code journal_quarantined} events; it waits (bounded)
     * until every record pending before the client started is accounted for.
     */
    static Map<String, Object> drain(Map<String, Object> r) {
        long timeout = amount(r.get("timeout_ms"), "timeout_ms");
        Set<String> before = new HashSet<>();
        // Journal.pending reads a directory; a Redis journal's records are not waited for here
        // (the figure only counts settlements, the orchestrator checks the ledger itself).
        if (r.get("journal_url") == null) {
            for (Object rec : list(Parser.parse(Journal.pending(Path.of(str(r.get("journal_dir"))), str(r.get("url")),
                    str(r.get("api_key")), str(r.get("tenant")))))) {
                before.add(str(obj(rec).get("reservation_id")));
            }
        }
        Set<String> settled = ConcurrentHashMap.newKeySet();
        Set<String> done = ConcurrentHashMap.newKeySet();
        AtomicInteger quarantinedEvents = new AtomicInteger();
        DrainReport d;
        try (CyclesClient client = client(r, e -> {
            if (e.kind().equals("settlement_settled") && e.reservationId() != null) {
                settled.add(e.reservationId());
                done.add(e.reservationId());
            } else if (e.kind().equals("settlement_attempt_failed")
                    && "rejected".equals(obj(Parser.parse(e.json())).get("disposition"))) {
                done.add(e.reservationId());
            } else if (e.kind().equals("journal_quarantined")) {
                quarantinedEvents.incrementAndGet();
            }
        })) {
            d = client.drain(Duration.ofMillis(timeout));
            client.close(Duration.ZERO);
        }
        d.remaining().forEach(p -> done.add(p.reservationId()));
        // Events reach listeners on the client's event thread, shortly after the fact.
        long until = System.nanoTime() + 2_000_000_000L;
        while (!done.containsAll(before) && System.nanoTime() < until) {
            sleep(5);
        }
        return map("settled", settled.size(), "pending", d.remaining().size(), "quarantined",
                Math.max(d.quarantined().size(), quarantinedEvents.get()));
    }

    /** The work's own failure in a {@code fail} step (must come out of guarded unchanged). */
    static final class WorkFailure extends Exception {
        private static final long serialVersionUID = 1L;

        WorkFailure() {
            super("the work failed");
        }
    }

    /**
     * One guarded action of the lifecycle contract (PROTOCOL.md, {@code guard}) through
     * {@link CyclesClient#guarded}: a client with the tenant and default unit, a spec of only
     * the action and the bare estimate (key and subject only when the case gives them), the
     * steps on the reservation; {@code end} returns, {@code fail} throws.
     */
    /**
     * The options table of the lifecycle contract (PROTOCOL.md, {@code client}): a client of
     * the options through the builder's typed setters, then one guarded action (bare 5,
     * actual 3) under the case's key; the Cycles error name raised, else null.
     */
    static Map<String, Object> client(Map<String, Object> r) {
        CyclesClient.Builder b = CyclesClient.builder().baseUrl(str(r.get("url"))).apiKey(str(r.get("api_key")))
                .journalDir(Path.of(str(r.get("journal_dir"))));
        for (Map.Entry<String, Object> e : obj(r.get("options")).entrySet()) {
            Object v = e.getValue();
            switch (e.getKey()) {
                case "tenant" -> b.tenant(str(v));
                case "default_unit" -> b.defaultUnit(str(v));
                case "request_timeout_ms" -> b.requestTimeout(Duration.ofMillis(amount(v, "request_timeout_ms")));
                case "connect_timeout_ms" -> b.connectTimeout(Duration.ofMillis(amount(v, "connect_timeout_ms")));
                case "max_concurrent_requests" -> b.maxConcurrentRequests(Math.toIntExact(amount(v, "max_concurrent_requests")));
                case "settle_max_attempts" -> b.settleMaxAttempts(Math.toIntExact(amount(v, "settle_max_attempts")));
                case "replay_interval_ms" -> b.replayInterval(Duration.ofMillis(amount(v, "replay_interval_ms")));
                case "journal_enabled" -> b.journalEnabled((Boolean) v);
                default -> throw new Unsupported("unknown option " + e.getKey());
            }
        }
        CyclesClient client;
        try {
            client = b.build();
        } catch (CyclesException e) {
            return map("error", e.errorName());
        }
        try (client) {
            GuardSpec spec = GuardSpec.of(Action.of("llm.completion", "matrix"), 5).idempotencyKey(str(r.get("key")));
            client.guarded(spec, res -> {
                res.setActual(3);
                return null;
            });
            return map("error", null);
        } catch (CyclesException e) {
            return map("error", e.errorName());
        }
    }

    static Map<String, Object> guard(Map<String, Object> r) {
        Map<String, Object> c = obj(r.get("case"));
        Map<String, Object> out = map("decision", null, "caps", null, "steps", new ArrayList<>(), "outcome", null,
                "released", null, "charged", null, "error", null);
        GuardSpec spec = GuardSpec.of(Action.of("llm.completion", "matrix"), amount(c.get("estimate"), "estimate"));
        if (c.get("idempotency_key") != null) {
            spec.idempotencyKey(str(c.get("idempotency_key")));
        }
        if (c.get("subject") != null) {
            spec.subject(subject(obj(c.get("subject"))));
        }
        List<Object> results = new ArrayList<>();
        Reservation[] seen = new Reservation[1];
        CyclesClient.Builder b = CyclesClient.builder().baseUrl(str(r.get("url"))).apiKey(str(r.get("api_key")))
                .tenant(str(r.get("tenant"))).defaultUnit(str(r.get("default_unit")))
                .journalDir(Path.of(str(r.get("journal_dir")))).replayInterval(Duration.ofDays(1));
        try (CyclesClient client = b.build()) {
            try {
                client.guarded(spec, res -> {
                    seen[0] = res;
                    for (Object o : list(c.get("steps"))) {
                        Map<String, Object> step = obj(o);
                        String what = str(step.get("do"));
                        if (what.equals("end")) {
                            results.add(null);
                            return null;
                        }
                        if (what.equals("fail")) {
                            results.add(null);
                            throw new WorkFailure();
                        }
                        try {
                            switch (what) {
                                case "add" -> res.addUsage(amount(step.get("amount"), "amount"));
                                case "set_actual" -> res.setActual(amount(step.get("amount"), "amount"));
                                case "release" -> res.release(str(step.get("reason")));
                                default -> throw new Unsupported("unknown step " + what);
                            }
                            results.add(null);
                        } catch (CyclesException e) {
                            results.add(e.errorName());
                        }
                        if (res.outcome().isPresent()) {
                            return null; // a release that succeeded ended the action
                        }
                    }
                    throw new Unsupported("the case's steps never end the action");
                });
            } catch (WorkFailure e) {
                out.put("error", "work");
            } catch (CyclesException e) {
                out.put("error", e.errorName());
            }
        }
        out.put("steps", results);
        Reservation res = seen[0];
        if (res == null) {
            return out; // the reserve was denied
        }
        out.put("decision", res.decision().name());
        out.put("caps", res.caps().map(Face::caps).orElse(null));
        Outcome o = res.outcome().orElseThrow();
        Map<String, Object> j = obj(Parser.parse(o.json()));
        out.put("outcome", j.get("outcome"));
        out.put("released", j.containsKey("released") ? o.released() : null);
        out.put("charged", o.charged() == null ? null : o.charged().amount());
        return out;
    }

    static final Set<String> DISK_EVENTS = Set.of("journal_io_failed", "settlement_pending", "settlement_settled");

    /**
     * A journal that cannot be written (PROTOCOL.md, {@code journal_fail}): one guarded action
     * (bare 5, actual 3, the case's key) whose first commit fails, then {@code flush()}; the
     * settlement's typed fields, the flush's unjournaled count and this reservation's events.
     */
    static Map<String, Object> journalFail(Map<String, Object> r) {
        List<CyclesEvent> seen = new java.util.concurrent.CopyOnWriteArrayList<>();
        CyclesClient.Builder b = CyclesClient.builder().onEvent(seen::add).baseUrl(str(r.get("url")))
                .apiKey(str(r.get("api_key"))).tenant(str(r.get("tenant"))).defaultUnit(str(r.get("default_unit")))
                .journalDir(Path.of(str(r.get("journal_dir")))).settleMaxAttempts(1).replayInterval(Duration.ofDays(1));
        Reservation[] held = new Reservation[1];
        DrainReport report;
        try (CyclesClient client = b.build()) {
            GuardSpec spec = GuardSpec.of(Action.of("llm.completion", "matrix"), 5).idempotencyKey(str(r.get("key")));
            client.guarded(spec, res -> {
                held[0] = res;
                res.setActual(3);
                return null;
            });
            report = client.flush();
            client.close(Duration.ZERO);
        }
        String rid = held[0].reservationId();
        Settlement s = held[0].outcome().orElseThrow().settlement();
        // Events reach listeners on the client's event thread, shortly after the fact.
        long until = System.nanoTime() + 2_000_000_000L;
        while (seen.stream().noneMatch(e -> e.kind().equals("settlement_settled") && rid.equals(e.reservationId()))
                && System.nanoTime() < until) {
            sleep(5);
        }
        List<Object> events = new ArrayList<>();
        for (CyclesEvent e : seen) {
            if (rid.equals(e.reservationId()) && DISK_EVENTS.contains(e.kind())) {
                Map<String, Object> j = obj(Parser.parse(e.json()));
                events.add(map("kind", e.kind(), "level", e.level(), "operation", j.get("operation"), "journaled",
                        j.get("journaled")));
            }
        }
        return map("status", s.status().name().toLowerCase(Locale.ROOT), "journaled", s.journaled(), "journal_error",
                s.journalError(), "flush_unjournaled", report.unjournaled().size(), "events", events);
    }

    /** Platform threads of the load run: this face targets Java 17 (no virtual threads), and a
     * thread per action would be 10,000 OS threads; the client's own request bound (256 in
     * flight) is lower than this anyway. */
    static final int LOAD_THREADS = 1000;

    /**
     * The load run (PROTOCOL.md, {@code load}): {@code count} guarded actions on one client
     * through an executor, each under its own key, counted by outcome; the client is closed
     * without a drain, so what could not settle stays journaled for the orchestrator's drain.
     */
    static Map<String, Object> load(Map<String, Object> r) {
        long count = amount(r.get("count"), "count");
        String prefix = str(r.get("key_prefix"));
        Map<String, AtomicInteger> outcomes = new ConcurrentHashMap<>();
        CyclesClient.Builder b = CyclesClient.builder().baseUrl(str(r.get("url"))).apiKey(str(r.get("api_key")))
                .tenant(str(r.get("tenant"))).defaultUnit(str(r.get("default_unit")))
                .journalDir(Path.of(str(r.get("journal_dir")))).replayInterval(Duration.ofDays(1));
        ExecutorService pool = Executors.newFixedThreadPool((int) Math.max(1, Math.min(count, LOAD_THREADS)));
        try (CyclesClient client = b.build()) {
            List<Future<?>> calls = new ArrayList<>();
            for (long i = 0; i < count; i++) {
                GuardSpec spec = GuardSpec.of(Action.of("llm.completion", "load"), 5).idempotencyKey(prefix + "-" + i);
                calls.add(pool.submit(() -> {
                    String name;
                    try {
                        Reservation[] seen = new Reservation[1];
                        client.guarded(spec, res -> {
                            seen[0] = res;
                            res.setActual(3);
                            return null;
                        });
                        Settlement s = seen[0].outcome().orElseThrow().settlement();
                        name = s == null ? "none" : s.status().name().toLowerCase(Locale.ROOT);
                    } catch (CyclesException e) {
                        name = "error:" + e.errorName();
                    }
                    outcomes.computeIfAbsent(name, k -> new AtomicInteger()).incrementAndGet();
                }));
            }
            for (Future<?> f : calls) {
                try {
                    f.get();
                } catch (InterruptedException | ExecutionException e) {
                    throw new IllegalStateException("a load call failed: " + e, e);
                }
            }
            client.close(Duration.ZERO);
        } finally {
            pool.shutdownNow();
        }
        Map<String, Object> counts = new LinkedHashMap<>();
        outcomes.forEach((k, v) -> counts.put(k, v.get()));
        return map("outcomes", counts);
    }

    static Map<String, Object> caps(dev.cycles.Caps c) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("max_tokens", c.maxTokens());
        m.put("max_steps_remaining", c.maxStepsRemaining());
        m.put("tool_allowlist", c.toolAllowlist());
        m.put("tool_denylist", c.toolDenylist());
        m.put("cooldown_ms", c.cooldownMs());
        m.values().removeIf(v -> v == null);
        return m;
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    // ---- JSON ----

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> obj(Object v) {
        if (!(v instanceof Map)) {
            throw new IllegalArgumentException("want a JSON object, got " + write(v));
        }
        return (Map<String, Object>) v;
    }

    @SuppressWarnings("unchecked")
    static List<Object> list(Object v) {
        if (!(v instanceof List)) {
            throw new IllegalArgumentException("want a JSON array, got " + write(v));
        }
        return (List<Object>) v;
    }

    static String str(Object v) {
        if (v != null && !(v instanceof String)) {
            throw new IllegalArgumentException("want a JSON string, got " + write(v));
        }
        return (String) v;
    }

    static String write(Object v) {
        StringBuilder b = new StringBuilder();
        write(b, v);
        return b.toString();
    }

    static void write(StringBuilder b, Object v) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof Raw r) {
            b.append(r.json());
        } else if (v instanceof Num n) {
            b.append(n.text());
        } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long) {
            b.append(v);
        } else if (v instanceof String s) {
            quote(b, s);
        } else if (v instanceof Map<?, ?> m) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                b.append(first ? "" : ",");
                first = false;
                quote(b, (String) e.getKey());
                b.append(':');
                write(b, e.getValue());
            }
            b.append('}');
        } else if (v instanceof List<?> l) {
            b.append('[');
            for (int i = 0; i < l.size(); i++) {
                b.append(i == 0 ? "" : ",");
                write(b, l.get(i));
            }
            b.append(']');
        } else {
            throw new IllegalArgumentException("not JSON: " + v.getClass());
        }
    }

    static void quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            boolean lone = Character.isSurrogate(c) && !(Character.isHighSurrogate(c) && i + 1 < s.length()
                    && Character.isLowSurrogate(s.charAt(i + 1)));
            if (Character.isHighSurrogate(c) && !lone) {
                b.append(c).append(s.charAt(++i));
            } else if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20 || lone) {
                // Control characters and lone surrogates (no UTF-8 form) as escapes.
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        b.append('"');
    }

    /** A strict JSON reader: objects keep member order, numbers keep their text. */
    static final class Parser {
        private final String s;
        private int i;

        private Parser(String s) {
            this.s = s;
        }

        static Object parse(String text) {
            Parser p = new Parser(text);
            Object v = p.value();
            p.ws();
            if (p.i != text.length()) {
                throw p.error("trailing characters");
            }
            return v;
        }

        private IllegalArgumentException error(String what) {
            return new IllegalArgumentException("invalid JSON at " + i + ": " + what);
        }

        private void ws() {
            while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
        }

        private void expect(char c) {
            ws();
            if (i >= s.length() || s.charAt(i) != c) {
                throw error("want '" + c + "'");
            }
            i++;
        }

        private Object value() {
            ws();
            if (i >= s.length()) {
                throw error("unexpected end");
            }
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++;
                ws();
                if (i < s.length() && s.charAt(i) == '}') {
                    i++;
                    return m;
                }
                do {
                    ws();
                    String k = string();
                    expect(':');
                    m.put(k, value());
                    ws();
                } while (i < s.length() && s.charAt(i) == ',' && ++i > 0);
                expect('}');
                return m;
            }
            if (c == '[') {
                List<Object> l = new ArrayList<>();
                i++;
                ws();
                if (i < s.length() && s.charAt(i) == ']') {
                    i++;
                    return l;
                }
                do {
                    l.add(value());
                    ws();
                } while (i < s.length() && s.charAt(i) == ',' && ++i > 0);
                expect(']');
                return l;
            }
            if (c == '"') {
                return string();
            }
            for (String lit : List.of("true", "false", "null")) {
                if (s.startsWith(lit, i)) {
                    i += lit.length();
                    return lit.equals("null") ? null : Boolean.valueOf(lit);
                }
            }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            String t = s.substring(start, i);
            if (!t.matches("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?")) {
                throw error("bad value");
            }
            return new Num(t);
        }

        private String string() {
            if (i >= s.length() || s.charAt(i) != '"') {
                throw error("want a string");
            }
            i++;
            StringBuilder b = new StringBuilder();
            while (true) {
                if (i >= s.length()) {
                    throw error("unterminated string");
                }
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = i < s.length() ? s.charAt(i++) : '?';
                switch (e) {
                    case '"', '\\', '/' -> b.append(e);
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case 'n' -> b.append('\n');
                    case 'r' -> b.append('\r');
                    case 't' -> b.append('\t');
                    case 'u' -> {
                        if (i + 4 > s.length()) {
                            throw error("short \\u escape");
                        }
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                    }
                    default -> throw error("bad escape");
                }
            }
        }
    }
}
