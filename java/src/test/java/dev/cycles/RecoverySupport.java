package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.internal.Json;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Helpers of the recovery conformance tests (Recovery*Test): request and ledger filters over
 * the local server's logs, journal file access, and {@link RecoveryChild} JVM processes.
 * Nothing here stands in for the server: every request goes over real HTTP.
 */
final class RecoverySupport {
    static final Action ACTION = Action.of("llm.completion", "test-model");

    private RecoverySupport() {}

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> requests(LocalServer s) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Object o : (List<Object>) Json.parse(s.requestsJson())) {
            out.add((Map<String, Object>) o);
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> ledger(LocalServer s) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Object o : (List<Object>) Json.parse(s.ledgerJson())) {
            out.add((Map<String, Object>) o);
        }
        return out;
    }

    static List<String> operations(LocalServer s) {
        return requests(s).stream().map(r -> String.valueOf(r.get("operation"))).toList();
    }

    /** The idempotency keys of the server's ledger entries, in order. */
    static List<String> keys(LocalServer s) {
        return ledger(s).stream().map(e -> (String) e.get("idempotency_key")).toList();
    }

    /** Commits of {@code rid} and events carrying {@code key}, in arrival order. */
    static List<Map<String, Object>> settlementRequests(LocalServer s, String rid, String key) {
        return requests(s).stream()
                .filter(r -> ("commitReservation".equals(r.get("operation")) && rid.equals(r.get("reservation_id")))
                        || ("createEvent".equals(r.get("operation")) && key.equals(r.get("idempotency_key"))))
                .toList();
    }

    /** "commits,events": applied commits of {@code rid}, applied events with {@code key}. */
    static String settlements(LocalServer s, String rid, String key) {
        long commits = ledger(s).stream().filter(e -> "commit".equals(e.get("kind")) && rid.equals(e.get("reservation_id"))).count();
        long events = ledger(s).stream().filter(e -> "event".equals(e.get("kind")) && key.equals(e.get("idempotency_key"))).count();
        return commits + "," + events;
    }

    static List<Map<String, Object>> applied(LocalServer s, String kind) {
        return ledger(s).stream().filter(e -> kind.equals(e.get("kind"))).toList();
    }

    static void noRelease(LocalServer s) {
        assertTrue(!operations(s).contains("releaseReservation"), "nothing releases a settled reservation: " + operations(s));
    }

    static Path partition(Path dir, LocalServer s, String apiKey, String tenant) {
        return dir.resolve(Journal.fingerprint(s.url(), apiKey, tenant));
    }

    static Path recordPath(Path dir, LocalServer s, String rid) {
        return partition(dir, s, s.apiKey(), s.tenant()).resolve(Journal.fileName(rid));
    }

    /** The parsed record at {@code path}, or null when there is none. */
    static Map<String, Object> readRecord(Path path) {
        try {
            return Json.object(Journal.parseRecord(Files.readAllBytes(path)));
        } catch (java.nio.file.NoSuchFileException e) {
            return null;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Record files (standard or legacy {@code *.json}) of every partition. */
    static List<Path> recordFiles(Path dir) {
        if (!Files.exists(dir)) {
            return List.of();
        }
        // A live writer renames its temp file into place while we list: a file that vanished
        // between the directory read and its stat is skipped, not an error.
        List<Path> out = new ArrayList<>();
        try {
            Files.walkFileTree(dir, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult visitFile(Path p, BasicFileAttributes attrs) {
                    if (attrs.isRegularFile() && p.getFileName().toString().endsWith(".json")) {
                        out.add(p);
                    }
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFileFailed(Path p, IOException e) throws IOException {
                    if (e instanceof NoSuchFileException) {
                        return FileVisitResult.CONTINUE;
                    }
                    throw e;
                }
            });
        } catch (NoSuchFileException e) {
            return List.of();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        out.sort(null);
        return out;
    }

    /** A record as the official Python SDK writes it (spaced separators, no {@code mode}). */
    static String pythonSdkRecord(String rid, String baseUrl, String key, long amount) {
        return "{\"version\": 1, \"reservation_id\": \"" + rid + "\", \"base_url\": \"" + baseUrl + "\", "
                + "\"commit_body\": {\"idempotency_key\": \"" + key + "\", \"actual\": {\"unit\": \"USD_MICROCENTS\", "
                + "\"amount\": " + amount + "}, \"metadata\": {\"note\": \"caf\\u00e9\"}}, "
                + "\"event_fallback_body\": null, \"recorded_at_ms\": " + System.currentTimeMillis() + ", "
                + "\"not_before_ms\": null}";
    }

    /**
     * Writes {@code text} to {@code p} whole, as another SDK's atomic write would: a client's
     * background replay may be scanning the directory, and a file it reads half-written is
     * quarantined as corrupt (seen in the Node suite's twin of the legacy test). The staged
     * name ends in {@code .tmp}, which the journal's scan skips.
     */
    static void write(Path p, String text) {
        try {
            Files.createDirectories(p.getParent());
            Path staged = p.resolveSibling(p.getFileName() + ".staged.tmp");
            Files.writeString(staged, text, StandardCharsets.UTF_8);
            Files.move(staged, p, java.nio.file.StandardCopyOption.ATOMIC_MOVE,
                    java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static String reserveDirect(CyclesClient c, String key) {
        Response<ReservationResult> r = c.createReservation(
                CreateReservationRequest.of(key, Subject.tenant(c.tenant()), ACTION, Amount.usdMicrocents(1_000)));
        return r.body().reservationId();
    }

    /** A {@link RecoveryChild} JVM: a fresh process, nothing shared but the journal (on disk, or in Redis). */
    static final class Child {
        final Process process;
        final Path result;

        Child(Map<String, Object> spec, Path result) {
            this.result = result;
            Map<String, Object> full = new java.util.LinkedHashMap<>(spec);
            full.put("result", result.toString());
            String cp = location(CyclesClient.class) + java.io.File.pathSeparator + location(RecoveryChild.class);
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            try {
                process = new ProcessBuilder(java, "-cp", cp, "dev.cycles.RecoveryChild", Json.write(full))
                        .redirectOutput(ProcessBuilder.Redirect.INHERIT).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        private static String location(Class<?> c) {
            try {
                return Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
            } catch (java.net.URISyntaxException e) {
                throw new IllegalStateException(e);
            }
        }

        /** Waits for a clean exit and returns the result the child wrote. */
        Map<String, Object> finish() throws Exception {
            assertTrue(process.waitFor(60, TimeUnit.SECONDS), "child did not finish");
            assertEquals(0, process.exitValue(), "child exit status");
            return Json.object(Files.readString(result));
        }

        /** SIGKILLs the child (Process.destroyForcibly is SIGKILL on Unix) and reaps it. */
        void kill() throws Exception {
            process.destroyForcibly();
            assertTrue(process.waitFor(20, TimeUnit.SECONDS));
            assertTrue(!Files.exists(result), "a killed child wrote no result");
        }
    }

    /** Polls {@code cond} every 2 ms for up to {@code ms}. */
    static boolean waitFor(long ms, java.util.function.BooleanSupplier cond) throws InterruptedException {
        long end = System.nanoTime() + ms * 1_000_000;
        while (System.nanoTime() < end) {
            if (cond.getAsBoolean()) {
                return true;
            }
            Thread.sleep(2);
        }
        return cond.getAsBoolean();
    }
}
