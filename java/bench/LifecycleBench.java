import dev.cycles.Action;
import dev.cycles.CyclesClient;
import dev.cycles.GuardSpec;
import dev.cycles.Guarded;
import dev.cycles.Settlement;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
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
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * Guarded lifecycles of the JVM binding against a plain {@code java.net.http.HttpClient}
 * create + commit pair, in one JVM, in alternating rounds (docs/benchmarks.md). One lifecycle at
 * a time: reserve (heartbeat armed), trivial work, commit 800 of 1,000. Client CPU is the whole
 * process's CPU time (Java threads, JIT, GC and core's native runtime threads alike) over a round.
 * Then the memory of CONCURRENT guarded calls in flight at once ({@code guardedAsync}, journal
 * off), PASSES times, each pass from its own base line: a second pass tells a leak from pages the
 * JVM and the allocator keep once touched.
 *
 * <p>Usage: {@code java -cp JAR:DIR LifecycleBench URL API_KEY ROUNDS LIFECYCLES [CONCURRENT [PASSES]]}
 * (default 10000 in flight, 2 passes; 0 in flight: none). Prints one line per round and per path,
 * then the medians and the ratios binding / baseline, then one table per in-flight pass.
 */
public final class LifecycleBench {
    private LifecycleBench() {}

    /** Warm-up lifecycles per path before the timed rounds, run in WARMUP_PASSES alternating passes. */
    private static final int WARMUP = Integer.getInteger("bench.warmup", 15000);

    private static final int WARMUP_PASSES = 3;

    private static final com.sun.management.OperatingSystemMXBean OS =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    private static final MemoryMXBean MEMORY = ManagementFactory.getMemoryMXBean();

    /** One path under test. */
    private record Way(String name, Runnable lifecycle) {}

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String key = args[1];
        int rounds = Integer.parseInt(args[2]);
        int n = Integer.parseInt(args[3]);
        int concurrent = args.length > 4 ? Integer.parseInt(args[4]) : 10_000;
        int passes = args.length > 5 ? Integer.parseInt(args[5]) : 2;
        Path journal = Files.createTempDirectory("cycles-bench-journal");
        Action action = Action.of("llm.completion", "bench");
        HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        try (CyclesClient off = CyclesClient.builder().baseUrl(url).apiKey(key).tenant("acme").journalEnabled(false).build();
                CyclesClient on = CyclesClient.builder().baseUrl(url).apiKey(key).tenant("acme").journalDir(journal).build()) {
            if (rounds > 0) {
                cpuRounds(List.of(
                        new Way("jvm guarded, journal off", () -> guarded(off, action)),
                        new Way("jvm guarded, journal on", () -> guarded(on, action)),
                        new Way("java.net.http create+commit", () -> bare(http, url, key))), rounds, n);
            }
            for (int p = 1; concurrent > 0 && p <= passes; p++) {
                inFlight(off, action, concurrent, p);
            }
        }
    }

    /**
     * Thread groups of the CPU split: name prefixes of /proc/self/task/N/stat's comm, in print
     * order ("java": the launcher's main thread, which runs the rounds).
     */
    private static final String[][] GROUPS = {{"caller", "java"}, {"core runtime", "cycles-core"},
        {"JIT", "C1 ", "C2 "}, {"GC", "GC ", "G1 "}};

    /**
     * Warms each path up (WARMUP lifecycles each, in alternating passes: the JIT compiles what the
     * rounds run, C2 included, before any round is timed), then times alternating rounds; prints
     * rounds, medians, each path's CPU split by thread group and the ratios to the last path.
     */
    private static void cpuRounds(List<Way> paths, int rounds, int n) {
        List<List<double[]>> results = new ArrayList<>();
        paths.forEach(p -> results.add(new ArrayList<>()));
        for (int i = 0; i < 300; i++) {
            groupTicks(); // compiled now, not by the JIT in the background of a timed round
        }
        for (int pass = 0; pass < WARMUP_PASSES; pass++) {
            for (Way p : paths) {
                for (int i = 0; i < WARMUP / WARMUP_PASSES; i++) {
                    p.lifecycle().run(); // warm-up: JIT, connection pools, server state
                }
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
        for (int k = 0; k < paths.size(); k++) {
            StringBuilder split = new StringBuilder();
            for (int g = 0; g <= GROUPS.length; g++) {
                split.append(String.format(" %s %.0f,", g < GROUPS.length ? GROUPS[g][0] : "other", median(results.get(k), 2 + g)));
            }
            System.out.printf("split  %-30s (median us CPU per lifecycle by thread):%s%n", paths.get(k).name(),
                    split.substring(0, split.length() - 1));
        }
        int base = paths.size() - 1;
        for (int k = 0; k < base; k++) {
            System.out.printf("ratio %s / baseline: rate %.2fx, CPU %.2fx%n", paths.get(k).name(), med[k][0] / med[base][0],
                    med[k][1] / med[base][1]);
        }
    }

    /** Resident set size in bytes: /proc/self/statm's second field, in pages of 4 KiB. */
    private static long rss() {
        try {
            return Long.parseLong(Files.readString(Path.of("/proc/self/statm")).trim().split(" ")[1]) * 4096;
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** @return {RSS, Java heap used} after two full collections */
    private static long[] settle() {
        System.gc();
        System.gc();
        return new long[] {rss(), MEMORY.getHeapMemoryUsage().getUsed()};
    }

    /**
     * n guarded calls in flight at once (journal off): each {@code guardedAsync} reserves (heartbeat
     * armed), sets its actual and waits on one shared future, completed only once every work
     * function has started. RSS is sampled every 10 ms for the peak; "held" is RSS and heap after
     * full GCs with all of them waiting; "after" once all have committed (checked) and nothing of
     * them is reachable.
     */
    private static void inFlight(CyclesClient client, Action action, int n, int pass) throws InterruptedException {
        guarded(client, action); // every native path touched before the base line
        long[] base = settle();
        AtomicLong peak = new AtomicLong(base[0]);
        ScheduledExecutorService sampler = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "rss-sampler");
            t.setDaemon(true);
            return t;
        });
        sampler.scheduleAtFixedRate(() -> peak.accumulateAndGet(rss(), Math::max), 0, 10, TimeUnit.MILLISECONDS);
        CompletableFuture<Object> gate = new CompletableFuture<>();
        CountDownLatch started = new CountDownLatch(n);
        long t0 = System.nanoTime();
        List<CompletableFuture<Guarded<Object>>> calls = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            calls.add(client.guardedAsync(GuardSpec.of(action, 1_000), r -> {
                r.setActual(800);
                started.countDown();
                return gate;
            }));
        }
        started.await();
        double rampS = (System.nanoTime() - t0) / 1e9;
        long[] held = settle();
        peak.accumulateAndGet(held[0], Math::max);
        gate.complete(null);
        int committed = 0;
        for (CompletableFuture<Guarded<Object>> c : calls) {
            Settlement s = c.join().outcome().settlement();
            if (s != null && s.status() == Settlement.Status.COMMITTED) {
                committed++;
            }
        }
        double totalS = (System.nanoTime() - t0) / 1e9;
        sampler.shutdownNow();
        sampler.awaitTermination(1, TimeUnit.SECONDS);
        if (committed != n) {
            throw new IllegalStateException((n - committed) + " of " + n + " not committed");
        }
        calls.clear(); // nothing of the calls stays reachable for the after-figures
        long[] after = settle();
        System.out.printf("in flight, pass %d: %,d guarded calls (journal off), all reserved after %.1f s, all committed"
                + " after %.1f s%n", pass, n, rampS, totalS);
        System.out.println("| measure | delta from base | per in-flight call |");
        System.out.println("|---|---:|---:|");
        row("RSS, peak (sampled every 10 ms)", peak.get() - base[0], n);
        row("RSS, held (all waiting, after GC)", held[0] - base[0], n);
        row("Java heap used, held", held[1] - base[1], n);
        row("RSS after all settled (after GC)", after[0] - base[0], 0);
        row("Java heap used after all settled", after[1] - base[1], 0);
    }

    private static void row(String what, long delta, int n) {
        String per = n > 0 ? String.format("%,d B", delta / n) : "";
        System.out.printf("| %s | %.1f MiB | %s |%n", what, delta / 1048576.0, per);
    }

    /**
     * @return {lifecycles per second, client CPU microseconds per lifecycle, then that CPU of
     *     each of {@link #GROUPS} and of the other threads} over n lifecycles
     */
    private static double[] round(Runnable lifecycle, int n) {
        long[] g0 = groupTicks();
        long c0 = OS.getProcessCpuTime();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            lifecycle.run();
        }
        long wall = System.nanoTime() - t0;
        long cpu = OS.getProcessCpuTime() - c0;
        long[] g1 = groupTicks();
        double[] out = new double[2 + g0.length];
        out[0] = n * 1e9 / wall;
        out[1] = cpu / 1e3 / n;
        for (int g = 0; g < g0.length; g++) {
            out[2 + g] = (g1[g] - g0[g]) * TICK_US / n;
        }
        return out;
    }

    /** Microseconds per clock tick of /proc's utime and stime (USER_HZ, 100 on Linux). */
    private static final double TICK_US = 10_000;

    /**
     * CPU ticks (utime + stime) of this process's live threads per {@link #GROUPS} entry, the
     * last element every other thread. A thread that ended within a round is not counted: the
     * split is a profile, the total above is the measure.
     */
    private static long[] groupTicks() {
        long[] t = new long[GROUPS.length + 1];
        try (var tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
            for (Path task : tasks) {
                String stat;
                try {
                    stat = Files.readString(task.resolve("stat"));
                } catch (java.io.IOException ended) {
                    continue;
                }
                int open = stat.indexOf('(');
                int close = stat.lastIndexOf(')');
                String name = stat.substring(open + 1, close);
                String[] f = stat.substring(close + 2).split(" ");
                long ticks = Long.parseLong(f[11]) + Long.parseLong(f[12]);
                int g = 0;
                while (g < GROUPS.length && !matches(name, GROUPS[g])) {
                    g++;
                }
                t[g] += ticks;
            }
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        return t;
    }

    private static boolean matches(String thread, String[] group) {
        for (int k = 1; k < group.length; k++) {
            if (thread.startsWith(group[k])) {
                return true;
            }
        }
        return false;
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
