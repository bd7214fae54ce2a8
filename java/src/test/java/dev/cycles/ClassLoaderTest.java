package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two class loaders in one JVM, each loading the SDK (and so its native library) on its own,
 * against one local server (in this, the test's, loader: a third copy of the library). The
 * journal's per-record {@code flock} locks keep settlements single across the loaders.
 */
class ClassLoaderTest {
    private LocalServer server;
    private final List<URLClassLoader> loaders = new ArrayList<>();
    @TempDir
    Path tmp;

    @BeforeEach
    void start() {
        server = LocalServer.start();
    }

    @AfterEach
    void stop() throws Exception {
        for (URLClassLoader l : loaders) {
            l.close();
        }
        server.close();
    }

    private static URL location(Class<?> c) {
        return c.getProtectionDomain().getCodeSource().getLocation();
    }

    /** A loader over the SDK's and the tests' classes that does not delegate them to ours. */
    @SuppressWarnings("unchecked")
    private Function<Map<String, String>, String> isolated() throws Exception {
        URLClassLoader l = new URLClassLoader(new URL[] {location(CyclesClient.class), location(LoaderWork.class)},
                ClassLoader.getPlatformClassLoader());
        loaders.add(l);
        Class<?> work = l.loadClass(LoaderWork.class.getName());
        assertNotSame(LoaderWork.class, work);
        assertNotSame(CyclesClient.class, l.loadClass(CyclesClient.class.getName()));
        return (Function<Map<String, String>, String>) work.getConstructor().newInstance();
    }

    private Map<String, String> args(String phase, String key, String value) {
        return Map.of("phase", phase, "url", server.url(), "api_key", server.apiKey(), "tenant", server.tenant(),
                "dir", tmp.resolve("journal").toString(), key, value);
    }

    private long commits(String rid) {
        return RecoverySupport.applied(server, "commit").stream().filter(e -> rid.equals(e.get("reservation_id"))).count();
    }

    @Test
    void twoLoadersEachRunGuardedCalls() throws Exception {
        Function<Map<String, String>, String> a = isolated();
        Function<Map<String, String>, String> b = isolated();
        String ra = a.apply(args("guard", "actual", "111"));
        String rb = b.apply(args("guard", "actual", "222"));
        // And again, interleaved: each loader's library stays usable beside the other's.
        String ra2 = a.apply(args("guard", "actual", "333"));
        // The test's own loader works too, beside both.
        try (CyclesClient c = CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey())
                .tenant(server.tenant()).journalDir(tmp.resolve("journal")).build()) {
            assertEquals(444L, c.guarded(GuardSpec.of(RecoverySupport.ACTION, 5_000), 444, () -> "x").outcome().actual());
        }
        for (String rid : List.of(ra, rb, ra2)) {
            assertEquals(1, commits(rid), rid);
        }
        assertEquals(List.of("111", "222", "333", "444"), RecoverySupport.applied(server, "commit").stream()
                .map(e -> String.valueOf(e.get("amount"))).toList());
    }

    @Test
    void anExplicitLibraryPathServesTwoLoaders() throws Exception {
        // -Dcycles.native.path names one file; the JVM lets only one loader link a given file,
        // so the second loader links a private copy of it.
        Path lib;
        try (java.util.stream.Stream<Path> dirs = java.nio.file.Files.list(Path.of(location(CyclesClient.class).toURI()).resolve("native"))) {
            lib = dirs.findFirst().orElseThrow().resolve(System.mapLibraryName("cycles_jvm"));
        }
        assertTrue(java.nio.file.Files.isRegularFile(lib), lib.toString());
        String old = System.getProperty("cycles.native.path");
        System.setProperty("cycles.native.path", lib.toString());
        try {
            String ra = isolated().apply(args("guard", "actual", "71"));
            String rb = isolated().apply(args("guard", "actual", "72"));
            assertEquals(1, commits(ra));
            assertEquals(1, commits(rb));
        } finally {
            if (old == null) {
                System.clearProperty("cycles.native.path");
            } else {
                System.setProperty("cycles.native.path", old);
            }
        }
    }

    @Test
    void twoLoadersShareOneJournalAndDrainEachRecordOnce() throws Exception {
        Function<Map<String, String>, String> a = isolated();
        Function<Map<String, String>, String> b = isolated();
        server.addFault("{\"operation\":\"commitReservation\",\"times\":0,\"fault\":{\"kind\":\"server_error\",\"status\":503}}");
        List<String> rids = new ArrayList<>();
        rids.addAll(Arrays.asList(a.apply(args("pending", "actuals", "101,102,103,104,105")).split(",")));
        rids.addAll(Arrays.asList(b.apply(args("pending", "actuals", "201,202,203,204,205")).split(",")));
        assertEquals(10, RecoverySupport.recordFiles(tmp.resolve("journal")).size());
        assertTrue(RecoverySupport.applied(server, "commit").isEmpty());
        // Commits now apply, slowly, so the two drains overlap.
        server.clearFaults();
        int before = RecoverySupport.requests(server).size();
        server.addFault("{\"operation\":\"commitReservation\",\"times\":0,\"fault\":{\"kind\":\"delay\",\"ms\":60}}");
        CyclicBarrier go = new CyclicBarrier(2);
        long[] window = new long[4];
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            Future<String> da = pool.submit(() -> {
                go.await();
                window[0] = System.nanoTime();
                String s = a.apply(args("drain", "actuals", ""));
                window[1] = System.nanoTime();
                return s;
            });
            Future<String> db = pool.submit(() -> {
                go.await();
                window[2] = System.nanoTime();
                String s = b.apply(args("drain", "actuals", ""));
                window[3] = System.nanoTime();
                return s;
            });
            Set<String> sa = split(da.get());
            Set<String> sb = split(db.get());
            System.out.println("ClassLoaderTest: the drains settled " + sa.size() + " and " + sb.size());
            assertTrue(Math.max(window[0], window[2]) < Math.min(window[1], window[3]), "the drains overlapped");
            Set<String> both = new HashSet<>(sa);
            both.retainAll(sb);
            assertTrue(both.isEmpty(), "settled by both loaders: " + both);
            Set<String> all = new HashSet<>(sa);
            all.addAll(sb);
            assertEquals(new HashSet<>(rids), all);
        } finally {
            pool.shutdownNow();
        }
        // The server applied each record once and, once the commit worked, received it once.
        List<Map<String, Object>> drained = RecoverySupport.requests(server).subList(before, RecoverySupport.requests(server).size());
        for (String rid : rids) {
            assertEquals(1, commits(rid), rid);
            assertEquals(1, drained.stream().filter(r -> rid.equals(r.get("reservation_id"))).count(), rid);
        }
        assertEquals(List.of(101L, 102L, 103L, 104L, 105L, 201L, 202L, 203L, 204L, 205L), RecoverySupport.applied(server, "commit")
                .stream().map(e -> ((Number) e.get("amount")).longValue()).sorted().toList());
        assertTrue(RecoverySupport.recordFiles(tmp.resolve("journal")).isEmpty());
        RecoverySupport.noRelease(server);
    }

    private static Set<String> split(String s) {
        return s.isEmpty() ? Set.of() : Arrays.stream(s.split(",")).collect(Collectors.toSet());
    }
}
