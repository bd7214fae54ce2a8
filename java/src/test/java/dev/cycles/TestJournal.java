package dev.cycles;

import dev.cycles.internal.Json;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The journal under test. {@code CYCLES_TEST_JOURNAL_STORE=redis} runs the recovery tests with
 * their journal in a Redis each test starts itself (AOF, {@code appendfsync always}: the JVM
 * adapter's Redis claim, docs/recovery.md); unset, empty or {@code file} is the directory; any
 * other value fails loudly rather than silently testing the default. The tests look into the
 * journal only through this class, so the same assertions hold for both stores.
 *
 * <p>Redis is read and written with redis-cli ({@link JournalRedisTest.Redis#cli}).
 */
final class TestJournal implements AutoCloseable {
    /** A record or quarantined record: its partition ({@code fp16}), name and bytes. */
    record Entry(String partition, String name, byte[] bytes) {
        String text() {
            return new String(bytes, StandardCharsets.UTF_8);
        }

        @Override
        public String toString() {
            return partition + "/" + name;
        }
    }

    private final Path dir;
    private final JournalRedisTest.Redis redis;

    /** Whether this run's journal store is Redis. */
    static boolean onRedis() {
        String store = System.getenv("CYCLES_TEST_JOURNAL_STORE");
        if (store == null || store.isEmpty() || store.equals("file")) {
            return false;
        }
        if (store.equals("redis")) {
            return true;
        }
        throw new IllegalStateException("CYCLES_TEST_JOURNAL_STORE=" + store + ": expected file or redis");
    }

    /**
     * The journal at {@code dir} (a directory that need not exist yet); on Redis, a Redis whose
     * data lives beside it, and {@code dir} stays unused (a client given it must not write there).
     */
    TestJournal(Path dir) {
        this.dir = dir;
        if (!onRedis()) {
            redis = null;
            return;
        }
        try {
            Path data = dir.resolveSibling(dir.getFileName() + ".redis-data");
            Files.createDirectories(data);
            redis = new JournalRedisTest.Redis(true, data);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** The directory (the file store's, or the one a Redis run leaves unused). */
    Path dir() {
        return dir;
    }

    /**
     * The {@code journal_url} of a Redis run, else null. Its leases last 3 s: a SIGKILLed
     * holder's record is taken over within a drain's time (the default, 60 s, would outlast
     * it), and a request the server holds for a second or two still ends inside its lease.
     */
    String url() {
        return redis == null ? null : redis.url + "?lease_ms=3000";
    }

    /** {@code b} journaling here. */
    CyclesClient.Builder configure(CyclesClient.Builder b) {
        b.journalDir(dir);
        return redis == null ? b : b.journalUrl(url());
    }

    /** The members a {@link RecoveryChild}'s spec needs to journal here: {@code dir} and {@code journal_url}. */
    Map<String, Object> spec(Map<String, Object> spec) {
        spec.put("dir", dir.toString());
        spec.put("journal_url", url());
        return spec;
    }

    /** Every record of every partition, sorted. */
    List<Entry> records() {
        return entries("r");
    }

    /** Every quarantined record of every partition, sorted. */
    List<Entry> quarantined() {
        return entries("q");
    }

    /** The bytes of {@code reservationId}'s record in the partition of (base URL, key, tenant), or null. */
    byte[] recordOf(String baseUrl, String apiKey, String tenant, String reservationId) {
        String part = Journal.fingerprint(baseUrl, apiKey, tenant);
        String file = Journal.fileName(reservationId);
        if (redis == null) {
            try {
                return Files.readAllBytes(dir.resolve(part).resolve(file));
            } catch (java.nio.file.NoSuchFileException e) {
                return null;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        Object got = redis.cli(null, "GET", key(part, "r", file));
        return got == null ? null : ((String) got).getBytes(StandardCharsets.UTF_8);
    }

    /** {@code reservationId}'s record in the server's default identity, parsed, or null when there is none. */
    Map<String, Object> readRecord(LocalServer s, String reservationId) {
        return readRecord(s, s.apiKey(), s.tenant(), reservationId);
    }

    /** {@code reservationId}'s record in the partition of (the server, key, tenant), parsed, or null. */
    Map<String, Object> readRecord(LocalServer s, String apiKey, String tenant, String reservationId) {
        byte[] bytes = recordOf(s.url(), apiKey, tenant, reservationId);
        return bytes == null ? null : Json.object(Journal.parseRecord(bytes));
    }

    /**
     * Puts {@code bytes} as record {@code file} into the partition of (base URL, key, tenant), as
     * another writer would have (a corrupt record, another SDK's).
     */
    void put(String baseUrl, String apiKey, String tenant, String file, byte[] bytes) {
        String part = Journal.fingerprint(baseUrl, apiKey, tenant);
        if (redis == null) {
            try {
                Files.createDirectories(dir.resolve(part));
                Files.write(dir.resolve(part).resolve(file), bytes);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return;
        }
        redis.cli(bytes, "SET", key(part, "r", file));
        redis.cli(null, "SADD", "cycles:journal:{" + part + "}:records", file);
    }

    /**
     * The reservation ids of the valid records of the partition of (base URL, key, tenant), sorted:
     * core's pending scan on the directory; on Redis, the records that core's parser accepts.
     */
    List<String> pendingIds(String baseUrl, String apiKey, String tenant) {
        List<String> ids = new ArrayList<>();
        if (redis == null) {
            for (Object o : (List<?>) Json.parse(Journal.pending(dir, baseUrl, apiKey, tenant))) {
                ids.add((String) ((Map<?, ?>) o).get("reservation_id"));
            }
        } else {
            String part = Journal.fingerprint(baseUrl, apiKey, tenant);
            for (Entry e : records()) {
                if (!e.partition().equals(part)) {
                    continue;
                }
                try {
                    ids.add(Json.str(Json.object(Journal.parseRecord(e.bytes())), "reservation_id"));
                } catch (dev.cycles.errors.InvalidArgumentException notARecord) {
                    // Corrupt or unsupported: not pending (the scan leaves it to quarantine).
                }
            }
        }
        ids.sort(null);
        return ids;
    }

    /** Whether a Redis run's clients wrote anything into the unused directory (they must not). */
    boolean dirUntouchedOnRedis() {
        return redis == null || !Files.exists(dir);
    }

    /**
     * The record or quarantine name in an event's {@code file} or {@code quarantined_as}: a path
     * on the directory, {@code <redis url> cycles:journal:{fp16}:r:<name>} or a bare name on Redis.
     * Names never hold a '/' or a ':'.
     */
    static String name(String located) {
        return located.substring(Math.max(located.lastIndexOf('/'), located.lastIndexOf(':')) + 1);
    }

    @Override
    public void close() {
        if (redis != null) {
            redis.close();
        }
    }

    private static String key(String partition, String kind, String name) {
        return "cycles:journal:{" + partition + "}:" + kind + ":" + name;
    }

    private List<Entry> entries(String kind) {
        List<Entry> out = new ArrayList<>();
        if (redis == null) {
            if (!Files.isDirectory(dir)) {
                return out;
            }
            try (Stream<Path> parts = Files.list(dir)) {
                for (Path p : parts.filter(Files::isDirectory).toList()) {
                    try (Stream<Path> files = Files.list(p)) {
                        for (Path f : files.filter(Files::isRegularFile).toList()) {
                            String name = f.getFileName().toString();
                            boolean quarantined = Stream.of(".corrupt", ".unsupported", ".unrecoverable").anyMatch(name::contains);
                            // Temp files (".tmp...") and lock files are neither.
                            boolean record = name.endsWith(".json") && !name.startsWith(".") && !quarantined;
                            if (kind.equals("r") ? record : quarantined) {
                                byte[] bytes = readIfThere(f);
                                if (bytes != null) {
                                    out.add(new Entry(p.getFileName().toString(), name, bytes));
                                }
                            }
                        }
                    }
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        } else {
            for (Object k : (List<?>) redis.cli(null, "KEYS", "cycles:journal:*:" + kind + ":*")) {
                String key = (String) k;
                String rest = key.substring("cycles:journal:{".length());
                int end = rest.indexOf("}:" + kind + ":");
                Object value = redis.cli(null, "GET", key);
                if (value != null) {
                    out.add(new Entry(rest.substring(0, end), rest.substring(end + 3 + kind.length()),
                            ((String) value).getBytes(StandardCharsets.UTF_8)));
                }
            }
        }
        out.sort(Comparator.comparing(Entry::toString));
        return out;
    }

    /** A live writer may rename or remove a file while we list: gone is null, not an error. */
    private static byte[] readIfThere(Path f) throws IOException {
        try {
            return Files.readAllBytes(f);
        } catch (java.nio.file.NoSuchFileException e) {
            return null;
        }
    }
}
