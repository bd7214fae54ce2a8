package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.errors.ConfigException;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * {@code journalUrl}: the settlement journal in Redis (core's Redis store), against a real
 * {@code redis-server} (scripts/test-all.sh installs Debian's package) and the local server: what
 * one client could not settle is drained by another that shares nothing with it but Redis, once;
 * a Redis that does not make writes durable is refused when the settlement engine starts.
 */
class JournalRedisTest {
    static final Action ACTION = Action.of("llm.completion", "openai:gpt-4o-mini");

    /** A redis-server on a free loopback port, killed on close. */
    static final class Redis implements AutoCloseable {
        final Process process;
        final String url;

        Redis(boolean aof) throws IOException, InterruptedException {
            int port;
            try (ServerSocket s = new ServerSocket(0)) {
                port = s.getLocalPort();
            }
            Path dir = Files.createTempDirectory("cycles-jvm-redis-");
            List<String> args = new java.util.ArrayList<>(List.of("redis-server", "--port", String.valueOf(port),
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

        @Override
        public void close() {
            process.destroyForcibly();
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
            fx.server.clearFaults();
            try (CyclesClient other = fx.builder().journalUrl(redis.url).replayInterval(Duration.ofHours(1)).build()) {
                DrainReport d = other.drain(Duration.ofSeconds(10));
                assertEquals(1, d.outcomes().size());
                assertEquals(Settlement.Status.COMMITTED, d.outcomes().get(0).settlement().status());
                assertTrue(d.remaining().isEmpty());
            }
            assertEquals(1, fx.ledger().stream().filter("commit:640"::equals).count(), fx.ledger().toString());
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
