package dev.cycles;

import dev.cycles.internal.Json;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/** A local server (spec mode, or the real server's serialisation with -Dcycles.test.server.mode=reference) and clients of it. */
final class Fixture implements AutoCloseable {
    final LocalServer server;
    final Path journal;

    Fixture() {
        boolean reference = "reference".equals(System.getProperty("cycles.test.server.mode"));
        server = reference ? LocalServer.start("{\"mode\":\"reference\"}") : LocalServer.start();
        try {
            journal = Files.createTempDirectory("cycles-jvm-test-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    CyclesClient.Builder builder() {
        return CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey()).tenant(server.tenant()).journalDir(journal);
    }

    CyclesClient client() {
        return builder().build();
    }

    /** The ledger as (kind, amount) strings, e.g. {@code reserve:1000}. */
    @SuppressWarnings("unchecked")
    List<String> ledger() {
        List<String> out = new ArrayList<>();
        for (Object o : (List<Object>) Json.parse(server.ledgerJson())) {
            Map<String, Object> e = (Map<String, Object>) o;
            out.add(e.get("kind") + ":" + e.get("amount"));
        }
        return out;
    }

    /** The operations the server received, in order. */
    @SuppressWarnings("unchecked")
    List<String> operations() {
        List<String> out = new ArrayList<>();
        for (Object o : (List<Object>) Json.parse(server.requestsJson())) {
            out.add(String.valueOf(((Map<String, Object>) o).get("operation")));
        }
        return out;
    }

    @Override
    public void close() {
        server.close();
        deleteTree(journal);
    }

    /** Removes a test's temporary directory, best effort (a test must not leak it into /tmp). */
    static void deleteTree(Path dir) {
        try (Stream<Path> all = Files.walk(dir)) {
            all.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException | UncheckedIOException e) {
            // Already gone, or a file vanished mid-walk: nothing left to do.
        }
    }
}
