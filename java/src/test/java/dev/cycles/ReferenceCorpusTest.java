package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.cycles.errors.ApiException;
import dev.cycles.errors.HttpException;
import dev.cycles.internal.Json;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * The captured reference-server corpus (217 exchanges, ../shared/fixtures/reference-server)
 * through {@link CyclesClient#decodeCaptured}, the client's own response path (the bridge's
 * {@code decode_captured}): every 2xx decodes to exactly what the server sent (explicit nulls
 * dropped), every error throws the right class with every field, as core/tests/reference_corpus.rs
 * checks in Rust. A missing corpus FAILS, naming the path.
 */
class ReferenceCorpusTest {
    private static final int EXPECTED_EXCHANGES = 217;

    static Path corpusPath() {
        String env = System.getenv("CYCLES_REFERENCE_CORPUS");
        String prop = System.getProperty("cycles.reference.corpus");
        return Path.of(prop != null ? prop : env != null ? env : "../../shared/fixtures/reference-server/exchanges.jsonl")
                .toAbsolutePath().normalize();
    }

    private static Object withoutNulls(Object v) {
        if (v instanceof Map<?, ?> m) {
            Map<String, Object> out = new LinkedHashMap<>();
            m.forEach((k, x) -> {
                if (x != null) {
                    out.put((String) k, withoutNulls(x));
                }
            });
            return out;
        }
        if (v instanceof List<?> l) {
            List<Object> out = new ArrayList<>();
            l.forEach(x -> out.add(withoutNulls(x)));
            return out;
        }
        return v;
    }

    private static int countNulls(Object v) {
        if (v == null) {
            return 1;
        }
        if (v instanceof Map<?, ?> m) {
            return m.values().stream().mapToInt(ReferenceCorpusTest::countNulls).sum();
        }
        if (v instanceof List<?> l) {
            return l.stream().mapToInt(ReferenceCorpusTest::countNulls).sum();
        }
        return 0;
    }

    /** One exchange: its name, operation (null: none), status, headers and body text. */
    private record Exchange(String name, String operation, int status, Map<String, String> headers, String body) {
        Optional<String> header(String n) {
            return headers.entrySet().stream().filter(e -> e.getKey().equalsIgnoreCase(n)).map(Map.Entry::getValue).findFirst();
        }

        byte[] bytes() {
            return body.getBytes(StandardCharsets.UTF_8);
        }
    }

    @SuppressWarnings("unchecked")
    private static List<Exchange> load() throws Exception {
        Path p = corpusPath();
        if (!Files.isRegularFile(p)) {
            fail("the reference-server corpus is missing: " + p + " does not exist. It lives in the shared folder next to "
                    + "this repository (shared/fixtures/reference-server/exchanges.jsonl); set CYCLES_REFERENCE_CORPUS or "
                    + "-Dcycles.reference.corpus to its path.");
        }
        List<Exchange> out = new ArrayList<>();
        for (String line : Files.readAllLines(p, StandardCharsets.UTF_8)) {
            if (line.isBlank()) {
                continue;
            }
            Map<String, Object> x = Json.object(line);
            Map<String, Object> r = (Map<String, Object>) x.get("response");
            Map<String, String> h = new LinkedHashMap<>();
            ((Map<String, Object>) r.get("headers")).forEach((k, v) -> h.put(k, String.valueOf(v)));
            out.add(new Exchange((String) x.get("name"), (String) x.get("operation"), ((Number) r.get("status")).intValue(), h,
                    (String) r.get("body")));
        }
        return out;
    }

    /** Checks one 2xx; returns how many explicit nulls the server sent. */
    private static int checkSuccess(Exchange x) {
        assertNotNull(x.operation(), x.name() + ": a 2xx belongs to an operation");
        Response<String> r = CyclesClient.decodeCaptured(x.operation(), x.status(), x.headers(), x.bytes());
        assertEquals(x.status(), r.status(), x.name());
        assertEquals(x.header("X-Request-Id").orElse(null), r.requestId(), x.name());
        assertEquals(x.header("X-Cycles-Trace-Id").orElse(null), r.traceId(), x.name());
        assertEquals(0, r.rttMicros(), x.name());
        Object raw = Json.parse(x.body());
        // Every value the server sent survives, every null became "absent".
        assertEquals(withoutNulls(raw), Json.parse(r.body()), x.name() + ": the typed body differs from what the server sent");
        return countNulls(raw);
    }

    private static String expectedKind(Exchange x, Map<String, Object> body) {
        if (x.status() == 429) {
            return "RATE_LIMITED";
        }
        if (x.status() >= 500) {
            return "SERVER_ERROR";
        }
        if (body != null && body.get("error") instanceof String code) {
            // Every code the reference server sent is a spec code: the kind has its name.
            assertTrue(CyclesException.errorCodes().containsKey(code), x.name() + ": " + code);
            return code;
        }
        assertEquals(400, x.status(), x.name());
        return "INVALID_REQUEST";
    }

    @SuppressWarnings("unchecked")
    private static void checkError(Exchange x) {
        CyclesException e = assertThrows(CyclesException.class,
                () -> CyclesClient.decodeCaptured(x.operation(), x.status(), x.headers(), x.bytes()), x.name());
        Map<String, Object> body = null;
        try {
            Object parsed = Json.parse(x.body());
            body = parsed instanceof Map<?, ?> ? (Map<String, Object>) parsed : null;
        } catch (RuntimeException notJson) {
            body = null;
        }
        Map<String, Object> b = body;
        String kind = expectedKind(x, b);
        assertEquals(kind, e.errorName(), x.name() + ": " + e);
        assertEquals(CyclesException.className(kind), e.getClass().getName(), x.name());
        assertEquals(x.status(), e.httpStatusIfAny().orElse(-1), x.name());
        // Every error of a response is of a class with the plain status.
        if (e instanceof HttpException h) {
            assertEquals(x.status(), h.httpStatus(), x.name());
        } else if (e instanceof ApiException a) {
            assertEquals(x.status(), a.httpStatus(), x.name());
        } else {
            fail(x.name() + ": " + e.getClass().getName() + " is neither an HttpException nor an ApiException");
        }
        assertEquals(b == null ? null : b.get("error"), e.serverErrorCode().orElse(null), x.name());
        if (b != null && b.get("message") instanceof String m) {
            assertEquals(m, e.getMessage(), x.name());
        } else {
            assertTrue(e.getMessage().contains("non-JSON"), x.name() + ": " + e);
        }
        // Headers are authoritative; the README says the body ids equal them.
        assertEquals(x.header("X-Request-Id").orElse(null), e.requestId().orElse(null), x.name());
        assertEquals(x.header("X-Cycles-Trace-Id").orElse(null), e.traceId().orElse(null), x.name());
        if (b != null) {
            assertEquals(b.get("request_id"), e.requestId().orElse(null), x.name());
            assertEquals(b.get("trace_id"), e.traceId().orElse(null), x.name());
        }
        assertEquals(b == null ? null : b.get("details"), e.details().map(Json::parse).orElse(null), x.name());
        Optional<String> ra = x.header("Retry-After");
        assertEquals(ra.orElse(null), e.retryAfterRaw().orElse(null), x.name());
        assertEquals(ra.map(s -> Duration.ofSeconds(Long.parseLong(s))).orElse(null), e.retryAfter().orElse(null), x.name());
        assertEquals(x.status() == 429 || x.status() >= 500, e.isRetryable(), x.name());
        assertTrue(!e.toString().contains("<api-key>"), "never the key");
    }

    @Test
    void everyReferenceExchangeDecodesLikeTheClient() throws Exception {
        List<Exchange> corpus = load();
        assertEquals(EXPECTED_EXCHANGES, corpus.size(), "exchanges in the corpus");
        int ok = 0;
        int failed = 0;
        int nulls = 0;
        int bodiesWithNulls = 0;
        TreeSet<String> ops = new TreeSet<>();
        for (Exchange x : corpus) {
            if (x.operation() != null) {
                ops.add(x.operation());
            }
            if (x.status() >= 200 && x.status() < 300) {
                int n = checkSuccess(x);
                nulls += n;
                bodiesWithNulls += n > 0 ? 1 : 0;
                ok++;
            } else {
                checkError(x);
                failed++;
            }
        }
        // Every exchange visited exactly once, none skipped.
        assertEquals(EXPECTED_EXCHANGES, ok + failed);
        assertEquals(109, ok, "2xx exchanges");
        assertEquals(11, ops.size(), "all operations covered: " + ops);
        // The README: 34 bodies fail strict validation, all because of explicit nulls.
        assertEquals(34, bodiesWithNulls, "bodies with explicit nulls");
        assertTrue(nulls > 100, nulls + " nulls");
    }

    @Test
    void badInputIsATypedError() {
        // A 2xx without an operation cannot be decoded; a bad status is refused.
        assertThrows(dev.cycles.errors.InvalidArgumentException.class, () -> CyclesClient.decodeCaptured(null, 200, null, null));
        assertThrows(dev.cycles.errors.InvalidArgumentException.class,
                () -> CyclesClient.decodeCaptured("getReservation", 70_000, Map.of(), new byte[0]));
    }
}
