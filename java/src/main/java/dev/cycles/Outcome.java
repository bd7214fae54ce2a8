package dev.cycles;

import dev.cycles.internal.Json;
import java.util.Locale;
import java.util.Map;

/**
 * How a guarded action ended (core's {@code Finished}).
 *
 * @param kind how it ended
 * @param reservationId the reservation
 * @param actual the actual amount the work reported, when it reported one
 * @param settlement what became of the settlement (null: none was attempted)
 * @param extensions lease extensions the heartbeat made
 * @param heartbeatFailures failed extend attempts
 * @param json the whole outcome as JSON (docs/bindings.md, "Guarded lifecycle")
 */
public record Outcome(Kind kind, String reservationId, Long actual, Settlement settlement, long extensions,
        long heartbeatFailures, String json) {
    /** Outcome kinds. */
    public enum Kind {
        /** The actual amount was settled (see the settlement). */
        SETTLED,
        /**
         * The work failed. Usage it had reported was committed (journaled first; see the
         * settlement); with no usage reported the reservation was released (no settlement).
         */
        WORK_FAILED,
        /** The work succeeded without reporting an actual: nothing was sent. */
        MISSING_ACTUAL,
        /** The reported actual is invalid (negative): nothing was sent. */
        INVALID_ACTUAL,
        /** Settled, but the heartbeat lapsed ({@link HeartbeatPolicy#FAIL_ON_FINALIZE}). */
        HEARTBEAT_LAPSED
    }

    static Outcome parse(String json) {
        Map<String, Object> m = Json.object(json);
        Map<String, Object> lease = Json.obj(m, "lease");
        return new Outcome(Kind.valueOf(Json.str(m, "outcome").toUpperCase(Locale.ROOT)), Json.str(m, "reservation_id"),
                Json.lng(m, "actual"), Settlement.from(Json.obj(m, "settlement")),
                lease == null ? 0 : Json.lng(lease, "extensions"), lease == null ? 0 : Json.lng(lease, "failures"), json);
    }

    /** @return the amount the server applied, or null when nothing was */
    public Amount charged() {
        return settlement == null ? null : settlement.charged();
    }
}
