package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.errors.ConfigException;
import dev.cycles.errors.InvalidArgumentException;
import dev.cycles.internal.Json;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * {@code journalUrl}: the settlement journal in Redis (core's Redis store), against a real
 * {@code redis-server} (scripts/test-all.sh installs Debian's package) and the local server: what
 * one client could not settle is drained by another that shares nothing with it but Redis, once;
 * records are keyed by the file store's names of their exact ids (CR-DURABLE-007 of the Redis
 * claim); a Redis that does not make writes durable is refused when the settlement engine starts.
 */
class JournalRedisTest {
    static final Action ACTION = Action.of("llm.completion", "openai:gpt-4o-mini");

    /** A redis-server on a free loopback port, killed on close (also TestJournal's, on Redis runs). */
    static final class Redis implements AutoCloseable {
        final Process process;
        final int port;
        final String url;
        /** The data directory it made itself, removed on close (null: the caller's). */
        private final Path ownDir;

        /** With its data in a temporary directory of its own. */
        Redis(boolean aof) throws IOException, InterruptedException {
            this(aof, Files.createTempDirectory("cycles-jvm-redis-"), true);
        }

        /** With its data (the AOF) in {@code dir}, which the caller removes. */
        Redis(boolean aof, Path dir) throws IOException, InterruptedException {
            this(aof, dir, false);
        }

        private Redis(boolean aof, Path dir, boolean owned) throws IOException, InterruptedException {
            ownDir = owned ? dir : null;
            try (ServerSocket s = new ServerSocket(0)) {
                port = s.getLocalPort();
            }
            List<String> args = new ArrayList<>(List.of("redis-server", "--port", String.valueOf(port),
                    "--bind", "127.0.0.1", "--save", "", "--dir", dir.toString()));
            if (aof) {
                args.addAll(List.of("--appendonly", "yes", "--appendfsync", "always"));
            }
            process = new ProcessBuilder(args).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (true) {
                try {
                    new Socket("127.0.0.1", port).close();
                    break;
                } catch (IOException e) {
                    assertTrue(System.nanoTime() < deadline, "redis-server did not come up");
                    Thread.sleep(20);
                }
            }
            url = "redis://127.0.0.1:" + port + "/0";
        }

        /**
         * One command through {@code redis-cli --json} (installed with redis-server: the tests
         * need no Redis client library), its last argument read from {@code stdin} when given
         * ({@code -x}, byte for byte): the reply, parsed ({@code null} for a missing key, a
         * String for a value: the journal's values are UTF-8 JSON text).
         */
        Object cli(byte[] stdin, String... args) {
            List<String> command = new ArrayList<>(List.of("redis-cli", "-h", "127.0.0.1", "-p", String.valueOf(port), "--json"));
            if (stdin != null) {
                command.add("-x");
            }
            command.addAll(List.of(args));
            try {
                Process p = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
                try (var in = p.getOutputStream()) {
                    if (stdin != null) {
                        in.write(stdin);
                    }
                }
                String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
                // redis-cli exits 0 on an error reply, which --json prints as error:"...".
                if (!p.waitFor(10, TimeUnit.SECONDS) || p.exitValue() != 0 || out.startsWith("error:")) {
                    throw new IllegalStateException("redis-cli " + String.join(" ", args) + ": " + out);
                }
                return Json.parse(out);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }

        @Override
        public void close() {
            process.destroyForcibly();
            // Reaped before its data directory is removed.
            try {
                process.waitFor(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (ownDir != null) {
                Fixture.deleteTree(ownDir);
            }
        }
    }

    static long recordFiles(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return 0;
        }
        try (Stream<Path> files = Files.walk(dir)) {
            return files.filter(p -> p.getFileName().toString().matches("v2-[0-9a-f]{64}\\.json")).count();
        }
    }

    @Test
    void aSettlementJournaledInRedisIsDrainedByAnotherClientOnce() throws Exception {
        try (Redis redis = new Redis(true); Fixture fx = new Fixture()) {
            fx.server.addFault("{\"operation\":\"commitReservation\",\"times\":0,\"fault\":{\"kind\":\"server_error\",\"status\":503}}");
            try (CyclesClient first = fx.builder().journalUrl(redis.url).settleMaxAttempts(1)
                    .replayInterval(Duration.ofHours(1)).build()) {
                Settlement s = first.guarded(GuardSpec.of(ACTION, 1_000), 640, () -> "x").outcome().settlement();
                assertEquals(Settlement.Status.PENDING, s.status());
                assertTrue(s.journaled());
            }
            assertEquals(0, recordFiles(fx.journal), "nothing was written to the directory");
            // The face's listing reads the Redis journal as the client names it.
            String mine = Journal.pending(redis.url, fx.server.url(), fx.server.apiKey(), fx.server.tenant());
            assertEquals(1, ((List<?>) Json.parse(mine)).size(), mine);
            assertTrue(mine.contains("\"legacy\":false"), mine);
            assertEquals("[]", Journal.pending(redis.url, fx.server.url(), "another-key", null));
            fx.server.clearFaults();
            try (CyclesClient other = fx.builder().journalUrl(redis.url).replayInterval(Duration.ofHours(1)).build()) {
                DrainReport d = other.drain(Duration.ofSeconds(10));
                assertEquals(1, d.outcomes().size());
                assertEquals(Settlement.Status.COMMITTED, d.outcomes().get(0).settlement().status());
                assertTrue(d.remaining().isEmpty());
            }
            assertEquals(1, fx.ledger().stream().filter("commit:640"::equals).count(), fx.ledger().toString());
            assertEquals("[]", Journal.pending(redis.url, fx.server.url(), fx.server.apiKey(), fx.server.tenant()));
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                    () -> Journal.pending("redis://127.0.0.1:1/0", null, null, null));
            assertTrue(e.getMessage().contains("127.0.0.1:1"), e.getMessage());
        }
    }

    /**
     * CR-DURABLE-007 on Redis (jvm-redis-map.json; legacy file names do not exist there): each
     * record's key ends in the file store's name for the exact id ({@code v2-<sha256>.json}, the
     * shared vectors' function), ids that differ only in ways a lossy scheme would erase never
     * share a key, each key holds its own id's record, and another client's drain reads each back
     * as its own and settles it once.
     */
    @Test
    void redisRecordKeysAreTheFileNamesOfTheExactIds() throws Exception {
        List<String> ids = List.of(RecoveryJournalTest.TRICKY_IDS);
        try (Redis redis = new Redis(true); Fixture fx = new Fixture()) {
            // Every first commit fails: each settlement stays journaled under its id.
            fx.server.addFault("{\"operation\":\"commitReservation\",\"times\":0,\"fault\":{\"kind\":\"server_error\",\"status\":503}}");
            try (CyclesClient c = fx.builder().journalUrl(redis.url).settleMaxAttempts(1).replayInterval(Duration.ofHours(1)).build()) {
                for (String id : ids) {
                    fx.server.addFault("{\"operation\":\"createReservation\",\"times\":1,\"fault\":{\"kind\":\"reservation_id\",\"id\":"
                            + Json.write(id) + "}}");
                    Outcome o = c.guarded(GuardSpec.of(ACTION, 1_000).heartbeat(false), 640, () -> "x").outcome();
                    assertEquals(id, o.reservationId());
                    assertEquals(Settlement.Status.PENDING, o.settlement().status(), id);
                    assertTrue(o.settlement().journaled(), id);
                }
            }
            String part = Journal.fingerprint(fx.server.url(), fx.server.apiKey(), fx.server.tenant());
            List<String> keys = new ArrayList<>();
            for (Object k : (List<?>) redis.cli(null, "KEYS", "cycles:journal:*:r:*")) {
                keys.add((String) k);
            }
            keys.sort(null);
            List<String> want = new ArrayList<>(ids.stream().map(id -> "cycles:journal:{" + part + "}:r:" + Journal.fileName(id)).toList());
            want.sort(null);
            assertEquals(want, keys, "one key per id, named as the file store names it");
            for (String id : ids) {
                String text = (String) redis.cli(null, "GET", "cycles:journal:{" + part + "}:r:" + Journal.fileName(id));
                Map<String, Object> rec = Json.object(Journal.parseRecord(text.getBytes(StandardCharsets.UTF_8)));
                assertEquals(id, rec.get("reservation_id"), "the record under " + Journal.fileName(id));
            }
            assertEquals(0, recordFiles(fx.journal), "nothing was written to the directory");

            fx.server.clearFaults();
            try (CyclesClient other = fx.builder().journalUrl(redis.url).replayInterval(Duration.ofHours(1)).build()) {
                DrainReport d = other.drain(Duration.ofSeconds(20));
                assertTrue(d.remaining().isEmpty(), d.json());
                assertEquals(ids.stream().sorted().toList(),
                        d.outcomes().stream().map(DrainReport.Replayed::reservationId).sorted().toList(), d.json());
                // The server refuses the 300-character id's commit (the spec allows 128): a
                // terminal rejection, whose record goes all the same.
                for (DrainReport.Replayed r : d.outcomes()) {
                    Settlement.Status status = r.reservationId().length() > 128 ? Settlement.Status.REJECTED : Settlement.Status.COMMITTED;
                    assertEquals(status, r.settlement().status(), r.reservationId());
                }
            }
            assertEquals(List.of(), redis.cli(null, "KEYS", "cycles:journal:*:r:*"), "every record removed");
            long accepted = ids.stream().filter(id -> id.length() <= 128).count();
            assertEquals(accepted, fx.ledger().stream().filter("commit:640"::equals).count(), fx.ledger().toString());
        }
    }

    @Test
    void aRedisWithoutDurableWritesIsRefusedUnlessOptedOut() throws Exception {
        try (Redis redis = new Redis(false); Fixture fx = new Fixture()) {
            try (CyclesClient refused = fx.builder().journalUrl(redis.url).build()) {
                ConfigException e = assertThrows(ConfigException.class, refused::flush);
                assertTrue(e.getMessage().contains("appendfsync always"), e.getMessage());
            }
            try (CyclesClient ok = fx.builder().journalUrl(redis.url + "?durability=none").build()) {
                assertTrue(ok.flush().remaining().isEmpty());
            }
        }
    }
}
