package dev.cycles.spring;

import dev.cycles.LocalServer;
import dev.cycles.internal.Json;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** A local Cycles server over real HTTP (the SDK's), its ledger, and the properties pointing at it. */
final class Server implements AutoCloseable {
    final LocalServer server;
    final Path journal;

    Server(LocalServer server) {
        this.server = server;
        try {
            journal = Files.createTempDirectory("cycles-spring-journal");
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    static Server start() {
        return new Server(LocalServer.start());
    }

    /** Our property names. */
    String[] properties(String... more) {
        List<String> p = new ArrayList<>(List.of("cycles.base-url=" + server.url(), "cycles.api-key=" + server.apiKey(),
                "cycles.tenant=" + server.tenant(), "cycles.journal.dir=" + journal));
        p.addAll(List.of(more));
        return p.toArray(String[]::new);
    }

    /** The ledger as kind:amount strings, e.g. {@code reserve:1000}. */
    @SuppressWarnings("unchecked")
    List<String> ledger() {
        List<String> out = new ArrayList<>();
        for (Object o : (List<Object>) Json.parse(server.ledgerJson())) {
            Map<String, Object> e = (Map<String, Object>) o;
            out.add(e.get("kind") + ":" + e.get("amount"));
        }
        return out;
    }

    /** The request bodies of one operation, in order. */
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> requests(String operation) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Object o : (List<Object>) Json.parse(server.requestsJson())) {
            Map<String, Object> r = (Map<String, Object>) o;
            if (operation.equals(r.get("operation"))) {
                out.add(r);
            }
        }
        return out;
    }

    @Override
    public void close() {
        try {
            server.close();
        } catch (RuntimeException e) {
            // a test stopped it already (an outage)
        }
        // The journal directory and whatever the test left in it.
        try (var paths = Files.walk(journal)) {
            paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
