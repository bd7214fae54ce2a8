import dev.cycles.Action;
import dev.cycles.CyclesClient;
import dev.cycles.Guarded;
import dev.cycles.GuardSpec;
import dev.cycles.Outcome;
import dev.cycles.Settlement;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The JVM face's {@code work} op (conformance/matrix/PROTOCOL.md): guarded actions in a loop,
 * for the crash loop ({@code cycles-matrix crashloop}), which SIGKILLs the face mid-way. Its
 * own file so another op added to the face touches only the dispatch.
 */
final class Work {
    private Work() {
    }

    /**
     * Every action in order through one client of the tenant, default unit and journal: a
     * guarded action under its key, bare estimate and TTL (the client's default when null),
     * whose work sleeps {@code sleep_ms}, sets the actual and returns. Answers each outcome.
     */
    static Map<String, Object> work(Map<String, Object> r) {
        List<Object> outcomes = new ArrayList<>();
        CyclesClient.Builder b = CyclesClient.builder().baseUrl(Face.str(r.get("url"))).apiKey(Face.str(r.get("api_key")))
                .tenant(Face.str(r.get("tenant"))).defaultUnit(Face.str(r.get("default_unit")))
                .journalDir(Path.of(Face.str(r.get("journal_dir"))));
        Face.journalUrl(b, r);
        try (CyclesClient client = b.build()) {
            for (Object o : Face.list(r.get("actions"))) {
                Map<String, Object> a = Face.obj(o);
                GuardSpec spec = GuardSpec.of(Action.of("llm.completion", "crashloop"), Face.amount(a.get("estimate"), "estimate"))
                        .idempotencyKey(Face.str(a.get("key")));
                if (a.get("ttl_ms") != null) {
                    spec.ttlMs(Face.amount(a.get("ttl_ms"), "ttl_ms"));
                }
                long sleep = Face.amount(a.get("sleep_ms"), "sleep_ms");
                long actual = Face.amount(a.get("actual"), "actual");
                Guarded<Object> g = client.guarded(spec, res -> {
                    Thread.sleep(sleep);
                    res.setActual(actual);
                    return null;
                });
                Outcome out = g.outcome();
                Settlement s = out.settlement();
                outcomes.add(s == null ? out.kind().name().toLowerCase(Locale.ROOT) : s.status().name().toLowerCase(Locale.ROOT));
            }
            client.close(Duration.ZERO);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
        return Face.map("outcomes", outcomes);
    }
}
