import dev.cycles.Action;
import dev.cycles.CyclesClient;
import dev.cycles.GuardSpec;
import dev.cycles.Guarded;
import dev.cycles.Settlement;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.function.Supplier;

/**
 * Guarded lifecycles of the JVM binding against a plain {@code java.net.http.HttpClient}
 * create + commit pair, in one JVM, in alternating rounds (docs/benchmarks.md). One lifecycle at
 * a time: reserve (heartbeat armed), trivial work, commit 800 of 1,000. Client CPU is the whole
 * process's CPU time (Java threads, JIT, GC and core's native runtime threads alike) over a round.
 *
 * <p>Usage: {@code java -cp JAR:DIR LifecycleBench URL API_KEY ROUNDS LIFECYCLES}. Prints one line
 * per round and per path, then the medians and the ratios binding / baseline.
 */
public final class LifecycleBench {
    private LifecycleBench() {}

    private static final com.sun.management.OperatingSystemMXBean OS =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

    /** One path under test. */
    private record Way(String name, Runnable lifecycle) {}

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String key = args[1];
        int rounds = Integer.parseInt(args[2]);
        int n = Integer.parseInt(args[3]);
        Path journal = Files.createTempDirectory("cycles-bench-journal");
        Action action = Action.of("llm.completion", "bench");
        HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        try (CyclesClient off = CyclesClient.builder().baseUrl(url).apiKey(key).tenant("acme").journalEnabled(false).build();
                CyclesClient on = CyclesClient.builder().baseUrl(url).apiKey(key).tenant("acme").journalDir(journal).build()) {
            List<Way> paths = List.of(
                    new Way("jvm guarded, journal off", () -> guarded(off, action)),
                    new Way("jvm guarded, journal on", () -> guarded(on, action)),
                    new Way("java.net.http create+commit", () -> bare(http, url, key)));
            List<List<double[]>> results = new ArrayList<>();
            for (Way p : paths) {
                results.add(new ArrayList<>());
                for (int i = 0; i < 300; i++) {
                    p.lifecycle().run(); // warm-up: JIT, connection pools, server state
                }
            }
            for (int r = 0; r < rounds; r++) {
                for (int k = 0; k < paths.size(); k++) {
                    double[] m = round(paths.get(k).lifecycle(), n);
                    results.get(k).add(m);
                    System.out.printf("round %d %-30s %8.0f lifecycles/s %8.1f us CPU per lifecycle%n", r + 1,
                            paths.get(k).name(), m[0], m[1]);
                }
            }
            double[][] med = new double[paths.size()][];
            for (int k = 0; k < paths.size(); k++) {
                med[k] = new double[] {median(results.get(k), 0), median(results.get(k), 1)};
                System.out.printf("median %-30s %8.0f lifecycles/s %8.1f us CPU per lifecycle%n", paths.get(k).name(),
                        med[k][0], med[k][1]);
            }
            int base = paths.size() - 1;
            for (int k = 0; k < base; k++) {
                System.out.printf("ratio %s / baseline: rate %.2fx, CPU %.2fx%n", paths.get(k).name(), med[k][0] / med[base][0],
                        med[k][1] / med[base][1]);
            }
        }
    }

    /** @return {lifecycles per second, client CPU microseconds per lifecycle} over n lifecycles */
    private static double[] round(Runnable lifecycle, int n) {
        long c0 = OS.getProcessCpuTime();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            lifecycle.run();
        }
        long wall = System.nanoTime() - t0;
        long cpu = OS.getProcessCpuTime() - c0;
        return new double[] {n * 1e9 / wall, cpu / 1e3 / n};
    }

    private static double median(List<double[]> v, int i) {
        List<Double> xs = new ArrayList<>();
        v.forEach(m -> xs.add(m[i]));
        Collections.sort(xs);
        return xs.get(xs.size() / 2);
    }

    private static void guarded(CyclesClient client, Action action) {
        Guarded<Object> g = client.guarded(GuardSpec.of(action, 1_000), 800L, () -> null);
        Settlement s = g.outcome().settlement();
        if (s == null || s.status() != Settlement.Status.COMMITTED) {
            throw new IllegalStateException("not committed: " + g.outcome().json());
        }
    }

    private static String post(HttpClient http, String url, String key, String body) {
        HttpRequest req = HttpRequest.newBuilder(URI.create(url)).header("X-Cycles-API-Key", key)
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build();
        try {
            HttpResponse<String> r = http.send(req, HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() != 200) {
                throw new IllegalStateException(url + ": HTTP " + r.statusCode() + " " + r.body());
            }
            return r.body();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** The baseline: the same two requests by hand; the id read from the body without a JSON library. */
    private static void bare(HttpClient http, String url, String key) {
        Supplier<String> fresh = () -> "bench-bare-" + UUID.randomUUID();
        String created = post(http, url + "/v1/reservations", key, "{\"idempotency_key\":\"" + fresh.get()
                + "\",\"subject\":{\"tenant\":\"acme\"},\"action\":{\"kind\":\"llm.completion\",\"name\":\"bench\"},"
                + "\"estimate\":{\"unit\":\"USD_MICROCENTS\",\"amount\":1000},\"ttl_ms\":60000}");
        int at = created.indexOf("\"reservation_id\":\"");
        if (at < 0) {
            throw new IllegalStateException("no reservation_id: " + created);
        }
        int from = at + "\"reservation_id\":\"".length();
        String id = created.substring(from, created.indexOf('"', from));
        String committed = post(http, url + "/v1/reservations/" + id + "/commit", key, "{\"idempotency_key\":\"" + fresh.get()
                + "\",\"actual\":{\"unit\":\"USD_MICROCENTS\",\"amount\":800}}");
        if (!committed.contains("\"COMMITTED\"")) {
            throw new IllegalStateException("not committed: " + committed);
        }
    }
}
