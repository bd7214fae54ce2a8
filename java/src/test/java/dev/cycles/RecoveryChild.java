package dev.cycles;

import dev.cycles.internal.Json;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * One process of a recovery test (started by {@link RecoverySupport.Child}; not a test class).
 * args[0] is a JSON spec; the process builds a FRESH client from it (nothing but the journal, on
 * disk or in Redis with {@code journal_url}, crosses from an earlier process), does one thing
 * through the public API, closes the client without draining (what is left stays journaled),
 * and writes its result JSON atomically to {@code spec.result}. A process the test SIGKILLs writes nothing.
 *
 * <p>Modes: {@code settle} (reserve without heartbeat, set the actual, close the reservation:
 * the SDK journals, then commits), {@code flush} (replay every pending record once),
 * {@code drain} (replay until the journal is empty or the timeout).
 */
public final class RecoveryChild {
    private RecoveryChild() {}

    /** @param args the JSON spec */
    public static void main(String[] args) throws Exception {
        Map<String, Object> spec = Json.object(args[0]);
        List<CyclesEvent> events = new CopyOnWriteArrayList<>();
        CyclesClient.Builder b = CyclesClient.builder().baseUrl(Json.str(spec, "url")).apiKey(Json.str(spec, "api_key"))
                .journalDir(Path.of(Json.str(spec, "dir"))).onEvent(events::add)
                .settleMaxAttempts(spec.containsKey("max_attempts") ? Json.lng(spec, "max_attempts").intValue() : 5)
                // Later background passes would only add noise to what the test observes.
                .replayInterval(Duration.ofHours(1));
        if (Json.str(spec, "tenant") != null) {
            b.tenant(Json.str(spec, "tenant"));
        }
        if (Json.str(spec, "journal_url") != null) {
            b.journalUrl(Json.str(spec, "journal_url")); // Redis runs (TestJournal); dir then stays unused
        }
        CyclesClient client = b.build();
        String go = Json.str(spec, "go");
        String resultPath = Json.str(spec, "result");
        if (go != null) {
            // Ready first (the identity's fingerprint is computed once and cached), then released together.
            Journal.fingerprint(Json.str(spec, "url"), Json.str(spec, "api_key"), Json.str(spec, "tenant"));
            Files.createFile(Path.of(resultPath + ".ready"));
            while (!Files.exists(Path.of(go))) {
                Thread.sleep(1);
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("pid", ProcessHandle.current().pid());
        switch (Json.str(spec, "mode")) {
            case "settle" -> {
                Reservation kept;
                try (Reservation r = client.reserve(GuardSpec.of(RecoverySupport.ACTION, 1_000)
                        .idempotencyKey(Json.str(spec, "key")).heartbeat(false))) {
                    kept = r;
                    r.setActual(Json.lng(spec, "amount"));
                }
                Settlement s = kept.outcome().orElseThrow().settlement();
                Map<String, Object> sj = new LinkedHashMap<>();
                sj.put("reservation_id", kept.reservationId());
                sj.put("status", s == null ? null : s.status().name());
                sj.put("journaled", s != null && s.journaled());
                out.put("settlement", sj);
            }
            case "flush" -> out.put("report", Json.parse(client.flush().json()));
            case "drain" -> out.put("report", Json.parse(client.drain(Duration.ofSeconds(20)).json()));
            default -> throw new IllegalArgumentException("unknown mode " + Json.str(spec, "mode"));
        }
        client.close(Duration.ZERO);
        // close() handed the last events to the client's daemon delivery thread, which ends
        // once it delivered them: wait for it so the result carries every event.
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if ("cycles-events".equals(t.getName())) {
                t.join(10_000);
            }
        }
        List<Object> ev = new ArrayList<>();
        for (CyclesEvent e : events) {
            ev.add(Json.parse(e.json()));
        }
        out.put("events", ev);
        Path tmp = Path.of(resultPath + ".tmp");
        Files.writeString(tmp, Json.write(out));
        Files.move(tmp, Path.of(resultPath), StandardCopyOption.ATOMIC_MOVE);
    }
}
