package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.errors.InvalidArgumentException;
import dev.cycles.internal.Json;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Every case of conformance/vectors/heartbeat.json and journal.json through {@link Timing} and
 * {@link Journal}, compared exactly; the number of cases run is asserted against the files.
 */
class VectorsTest {
    static final Path VECTORS = Path.of(System.getProperty("cycles.vectors.dir", "../conformance/vectors"));

    @SuppressWarnings("unchecked")
    static Map<String, Object> m(Object o) {
        return (Map<String, Object>) o;
    }

    @SuppressWarnings("unchecked")
    static List<Object> l(Object o) {
        return (List<Object>) o;
    }

    static Map<String, Object> doc(String name) throws Exception {
        return Json.object(Files.readString(VECTORS.resolve(name)));
    }

    static Object timing(String fn, Object args) {
        return Json.parse(Timing.call(fn, Json.write(args)));
    }

    static void same(String c, String what, Object want, Object got) {
        assertEquals(Json.write(want), Json.write(got), c + " " + what);
    }

    static String name(Map<String, Object> c) {
        return String.valueOf(c.get("name"));
    }

    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            out.put((String) kv[i], kv[i + 1]);
        }
        return out;
    }

    void schedule(Map<String, Object> c) {
        Map<String, Object> e = m(c.get("expect"));
        Map<String, Object> s = m(timing("schedule", c.get("input")));
        for (String k : List.of("lead_floor_ms", "attempt_budget_ms", "safety_margin_ms", "retry_reserve_ms", "next_delay_ms")) {
            same(name(c), k, e.get(k), s.get(k));
        }
    }

    void retryAfter(Map<String, Object> c) {
        Map<String, Object> r = m(timing("parse_retry_after", obj("raw", c.get("raw"))));
        same(Json.write(c.get("raw")), "kind", c.get("kind"), r.get("kind"));
        same(Json.write(c.get("raw")), "ms", c.get("ms"), r.get("ms"));
    }

    void retry(Map<String, Object> c) {
        Map<String, Object> in = m(c.get("input"));
        Map<String, Object> e = m(c.get("expect"));
        Object est = timing("current_lead_estimate", obj("last_lead_floor_ms", in.get("last_lead_floor_ms"), "elapsed_ms",
                in.get("elapsed_ms")));
        same(name(c), "current_lead_estimate_ms", e.get("current_lead_estimate_ms"), est);
        Object win = timing("retry_window", obj("current_lead_estimate_ms", est, "attempt_budget_ms", in.get("attempt_budget_ms"),
                "safety_margin_ms", in.get("safety_margin_ms")));
        same(name(c), "retry_window_ms", e.get("retry_window_ms"), win);
        Object wantDelay = e.get("transient_retry_delay_ms");
        if (wantDelay == null) {
            String w = Json.write(win);
            assertTrue(w.startsWith("-") || w.startsWith("\"-"), name(c) + ": a null delay needs a negative window, got " + w);
        } else {
            same(name(c), "transient_retry_delay_ms", wantDelay,
                    timing("transient_retry_delay", obj("current_lead_estimate_ms", est, "retry_window_ms", win)));
        }
    }

    void decision(String c, Map<String, Object> want, Map<String, Object> got) {
        if (want.containsKey("extend")) {
            Map<String, Object> ge = m(got.get("extend"));
            assertNotNull(ge, c + ": want extend, got " + Json.write(got));
            same(c, "delay_ms", m(want.get("extend")).get("delay_ms"), ge.get("delay_ms"));
            same(c, "key", m(want.get("extend")).get("key"), ge.get("key"));
            return;
        }
        same(c, "stop", want.get("stop"), got.get("stop"));
        for (String k : List.of("code", "status")) {
            if (want.containsKey(k)) {
                same(c, k, want.get(k), got.get(k));
            }
        }
    }

    void planner(Map<String, Object> c, boolean derived) {
        List<Object> steps = l(c.get("steps"));
        List<Object> expect = l(c.get("expect"));
        assertEquals(steps.size(), expect.size(), name(c) + ": steps and expectations differ in number");
        try (Timing.PrimaryPlanner p = new Timing.PrimaryPlanner(
                Json.write(c.get(derived ? "configured_timeout_ms" : "request_timeout_ms")), derived)) {
            for (int i = 0; i < steps.size(); i++) {
                decision(name(c), m(expect.get(i)), Json.object(p.step(Json.write(steps.get(i)))));
                if (derived) {
                    same(name(c), "attempt_timeout_ms", m(expect.get(i)).get("attempt_timeout_ms"),
                            Json.parse(p.attemptTimeout()));
                }
            }
        }
    }

    static long num(Object o) {
        return ((Number) o).longValue();
    }

    void fallback(Map<String, Object> c) {
        Map<String, Object> create = m(c.get("create"));
        Map<String, Object> e = m(c.get("expect"));
        List<Object> steps = l(c.get("steps"));
        List<Object> decisions = l(e.get("decisions"));
        List<Object> regimes = l(e.get("regimes"));
        try (Timing.FallbackPlanner p = new Timing.FallbackPlanner(num(c.get("requested_ttl_ms")), num(create.get("at_us")),
                num(create.get("expires_at_ms")))) {
            decision(name(c), m(e.get("first_beat")), Json.object(p.firstBeat((Boolean) c.get("prime"))));
            assertEquals(steps.size(), decisions.size(), name(c) + ": steps and decisions differ in number");
            long lastAt = num(create.get("at_us"));
            for (int i = 0; i < steps.size(); i++) {
                lastAt = num(m(steps.get(i)).get("at_us"));
                decision(name(c), m(decisions.get(i)), Json.object(p.step(Json.write(steps.get(i)))));
                if (regimes != null && i < regimes.size()) {
                    assertEquals(regimes.get(i), p.regime(), name(c) + ": regime");
                }
            }
            if (e.containsKey("final_lead_min_ms")) {
                assertEquals(Json.write(e.get("final_lead_min_ms")), p.leadMinMs(lastAt), name(c) + ": final lead");
            }
        }
    }

    @Test
    void fallbackPlannerTakesCoresWholeUnsignedRange() throws Exception {
        // Every fallback vector gives the same decisions through the BigInteger constructor.
        for (Object o : l(doc("heartbeat.json").get("fallback"))) {
            Map<String, Object> c = m(o);
            Map<String, Object> create = m(c.get("create"));
            try (Timing.FallbackPlanner a = new Timing.FallbackPlanner(num(c.get("requested_ttl_ms")), num(create.get("at_us")),
                    num(create.get("expires_at_ms")));
                    Timing.FallbackPlanner b = new Timing.FallbackPlanner(BigInteger.valueOf(num(c.get("requested_ttl_ms"))),
                            BigInteger.valueOf(num(create.get("at_us"))), num(create.get("expires_at_ms")))) {
                assertEquals(a.firstBeat((Boolean) c.get("prime")), b.firstBeat((Boolean) c.get("prime")), name(c));
                for (Object step : l(c.get("steps"))) {
                    assertEquals(a.step(Json.write(step)), b.step(Json.write(step)), name(c));
                    assertEquals(a.regime(), b.regime(), name(c));
                }
            }
        }
        // u64 values beyond a Java long reach core; beyond u64 or negative is a typed error.
        BigInteger max = BigInteger.TWO.pow(64).subtract(BigInteger.ONE);
        try (Timing.FallbackPlanner p = new Timing.FallbackPlanner(max, max, Long.MAX_VALUE)) {
            Map<String, Object> first = Json.object(p.firstBeat(true));
            assertTrue(first.containsKey("extend") || first.containsKey("stop"), Json.write(first));
        }
        assertThrows(InvalidArgumentException.class, () -> new Timing.FallbackPlanner(max.add(BigInteger.ONE), BigInteger.ZERO, 0));
        assertThrows(InvalidArgumentException.class, () -> new Timing.FallbackPlanner(BigInteger.ONE, BigInteger.valueOf(-1), 0));
        assertThrows(InvalidArgumentException.class, () -> new Timing.FallbackPlanner(-1L, 0L, 0L));
    }

    void extendTimeout(Map<String, Object> c) {
        Map<String, Object> e = m(c.get("expect"));
        Map<String, Object> t = m(timing("extend_timeout", c.get("input")));
        for (String k : List.of("source", "timeout_ms", "min_lead_floor_ms", "max_keeping_timeout_ms", "target_timeout_ms",
                "attempt_cutoff_ms")) {
            same(name(c), k, e.get(k), t.get(k));
        }
    }

    interface Case {
        void run(Map<String, Object> c) throws Exception;
    }

    static int section(Map<String, Object> doc, String s, Case f) throws Exception {
        List<Object> cases = l(doc.get(s));
        assertTrue(cases != null && !cases.isEmpty(), "section " + s + " missing or empty");
        int n = 0;
        for (Object c : cases) {
            f.run(m(c));
            n++;
        }
        return n;
    }

    @Test
    void heartbeatVectors() throws Exception {
        Map<String, Object> doc = doc("heartbeat.json");
        assertEquals("cycles-heartbeat-vectors", doc.get("format"));
        // Every section is run: a new section needs a test here.
        assertEquals(List.of("format", "version", "about", "schedule", "retry_after", "retry", "planner", "fallback",
                "extend_timeout", "planner_derived"), List.copyOf(doc.keySet()));
        int ran = section(doc, "schedule", this::schedule) + section(doc, "retry_after", this::retryAfter)
                + section(doc, "retry", this::retry) + section(doc, "planner", c -> planner(c, false))
                + section(doc, "fallback", this::fallback) + section(doc, "extend_timeout", this::extendTimeout)
                + section(doc, "planner_derived", c -> planner(c, true));
        int want = 0;
        for (String s : List.of("schedule", "retry_after", "retry", "planner", "fallback", "extend_timeout", "planner_derived")) {
            want += l(doc.get(s)).size();
        }
        assertEquals(want, ran);
        assertTrue(ran > 50, "ran " + ran + " heartbeat cases");
        System.out.println("heartbeat vectors: " + ran + " cases");
    }

    void partition(Map<String, Object> c) {
        assertEquals(c.get("fp16"), Journal.fingerprint((String) c.get("base_url"), (String) c.get("api_key"),
                (String) c.get("tenant")));
    }

    void fileNames(Map<String, Object> c) {
        String rid = (String) c.get("reservation_id");
        assertEquals(c.get("standard"), Journal.fileName(rid), rid);
        assertEquals(c.get("legacy"), Journal.legacyFileName(rid), rid);
    }

    void record(Map<String, Object> c) {
        Map<String, Object> e = m(c.get("expect"));
        byte[] text = ((String) c.get("text")).getBytes(StandardCharsets.UTF_8);
        if (!Boolean.TRUE.equals(e.get("ok"))) {
            InvalidArgumentException ex = assertThrows(InvalidArgumentException.class, () -> Journal.parseRecord(text), name(c));
            assertEquals("{\"journal_error\":\"" + e.get("error") + "\"}", ex.details().orElseThrow(), name(c));
            assertTrue(ex.getMessage().startsWith(e.get("error") + " record: "), name(c) + ": " + ex.getMessage());
            return;
        }
        Map<String, Object> r = Json.object(Journal.parseRecord(text));
        for (String k : List.of("reservation_id", "base_url", "mode", "idempotency_key", "recorded_at_ms", "not_before_ms",
                "extra_keys")) {
            same(name(c), k, e.get(k), r.get(k));
        }
        assertEquals("1", String.valueOf(r.get("version")), name(c) + ": version");
        same(name(c), "commit_body_wire", e.get("commit_body_wire"), r.get("commit_body"));
        same(name(c), "event_fallback_body_wire", e.get("event_fallback_body_wire"), r.get("event_fallback_body"));
        for (String b : List.of("commit_body", "event_fallback_body")) {
            if (!e.containsKey(b)) {
                continue;
            }
            if (e.get(b) == null) {
                assertEquals(null, r.get(b), name(c) + ": " + b + " not null");
                continue;
            }
            same(name(c), b, e.get(b), Json.parse((String) r.get(b)));
        }
    }

    @Test
    void journalVectors() throws Exception {
        Map<String, Object> doc = doc("journal.json");
        assertEquals(4, doc.size(), "journal.json: 4 sections expected");
        int ran = section(doc, "partition", this::partition) + section(doc, "file_names", this::fileNames)
                + section(doc, "records", this::record);
        int want = l(doc.get("partition")).size() + l(doc.get("file_names")).size() + l(doc.get("records")).size();
        assertEquals(want, ran);
        System.out.println("journal vectors: " + ran + " cases");
    }
}
