package dev.cycles;

import dev.cycles.internal.Json;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * What a flush, drain or close did with pending settlements: the bridge's drain report
 * (docs/bindings.md, "Guarded lifecycle"), every field typed.
 *
 * @param outcomes the journal records worked on, each with what became of its settlement
 *     (committed, recovered via event, still pending or rejected)
 * @param remaining the records still in the journal afterwards (replayed later, by this
 *     process or the next)
 * @param quarantined the new names of the files set aside as unusable records
 * @param unjournaled the reservations still pending that the journal could not take (a full
 *     disk, say): they exist only in this process's memory
 * @param json the whole report as JSON (null for the empty report of a second close)
 */
public record DrainReport(List<Replayed> outcomes, List<Pending> remaining, List<String> quarantined, List<String> unjournaled,
        String json) {
    /** Copies the lists: a report does not change. */
    public DrainReport {
        outcomes = List.copyOf(outcomes);
        remaining = List.copyOf(remaining);
        quarantined = List.copyOf(quarantined);
        unjournaled = List.copyOf(unjournaled);
    }

    /**
     * One record worked on.
     *
     * @param reservationId the reservation
     * @param settlement what became of it
     */
    public record Replayed(String reservationId, Settlement settlement) {}

    /** How a pending record is settled next. */
    public enum Mode {
        /** Commit the reservation with the journaled body. */
        COMMIT,
        /** The reservation expired: record the usage as an event. */
        EVENT
    }

    /**
     * One record still pending.
     *
     * @param reservationId the reservation
     * @param mode how it is settled next
     * @param recordedAt when the record was last written, when the record says
     * @param notBefore the server's rate-limit floor: no replay before it, when one was set
     * @param file the record's file in the journal
     */
    public record Pending(String reservationId, Mode mode, Optional<Instant> recordedAt, Optional<Instant> notBefore,
            String file) {}

    @SuppressWarnings("unchecked")
    static DrainReport parse(String json) {
        if (json == null) {
            return new DrainReport(List.of(), List.of(), List.of(), List.of(), null);
        }
        Map<String, Object> m = Json.object(json);
        List<Replayed> outcomes = new ArrayList<>();
        for (Object o : Json.list(m, "outcomes")) {
            Map<String, Object> e = (Map<String, Object>) o;
            outcomes.add(new Replayed(Json.str(e, "reservation_id"), Settlement.from(Json.obj(e, "settlement"))));
        }
        List<Pending> remaining = new ArrayList<>();
        for (Object o : Json.list(m, "remaining")) {
            Map<String, Object> p = (Map<String, Object>) o;
            remaining.add(new Pending(Json.str(p, "reservation_id"),
                    Mode.valueOf(Json.str(p, "mode").toUpperCase(Locale.ROOT)), instant(p, "recorded_at_ms"),
                    instant(p, "not_before_ms"), Json.str(p, "file")));
        }
        List<String> quarantined = new ArrayList<>();
        for (Object o : Json.list(m, "quarantined")) {
            quarantined.add((String) o);
        }
        List<String> unjournaled = new ArrayList<>();
        for (Object o : Json.list(m, "unjournaled")) {
            unjournaled.add((String) o);
        }
        return new DrainReport(outcomes, remaining, quarantined, unjournaled, json);
    }

    private static Optional<Instant> instant(Map<String, Object> m, String key) {
        Long ms = Json.lng(m, key);
        return ms == null ? Optional.empty() : Optional.of(Instant.ofEpochMilli(ms));
    }
}
