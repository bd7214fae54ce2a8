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
 * @param released whether the reservation was released in the same call (the finished JSON's
 *     {@code released}; false where the outcome has none, e.g. {@link Kind#SETTLED})
 * @param json the whole outcome as JSON (docs/bindings.md, "Guarded lifecycle")
 */
public record Outcome(Kind kind, String reservationId, Long actual, Settlement settlement, long extensions,
        long heartbeatFailures, boolean released, String json) {
    /** Outcome kinds. */
    public enum Kind {
        /** The actual amount was settled (see the settlement). */
        SETTLED,
        /**
         * The work failed. Usage it had reported was committed (journaled first; see the
         * settlement); with no usage reported the reservation was released (no settlement).
         */
        WORK_FAILED,
        /**
         * The work succeeded without reporting an actual: nothing was committed, the
         * reservation was released in the same call ({@link Outcome#released()} says whether
         * that release succeeded). {@link Reservation#close()} throws
         * {@link dev.cycles.errors.MissingActualException} after recording this outcome.
         */
        MISSING_ACTUAL,
        /**
         * The reported actual is invalid (negative): nothing was committed, the reservation was
         * released. {@link Reservation#close()} throws
         * {@link dev.cycles.errors.InvalidArgumentException} after recording this outcome.
         */
        INVALID_ACTUAL,
        /** The action was ended early by {@link Reservation#release()}: the estimate was given back. */
        RELEASED,
        /** Settled, but the heartbeat lapsed ({@link HeartbeatPolicy#FAIL_ON_FINALIZE}). */
        HEARTBEAT_LAPSED
    }

    static Outcome parse(String json) {
        Map<String, Object> m = Json.object(json);
        Map<String, Object> lease = Json.obj(m, "lease");
        return new Outcome(Kind.valueOf(Json.str(m, "outcome").toUpperCase(Locale.ROOT)), Json.str(m, "reservation_id"),
                Json.lng(m, "actual"), Settlement.from(Json.obj(m, "settlement")),
                lease == null ? 0 : Json.lng(lease, "extensions"), lease == null ? 0 : Json.lng(lease, "failures"),
                Boolean.TRUE.equals(m.get("released")), json);
    }

    /**
     * The exception a settle that had no known actual raises (missing or invalid actual),
     * with core's message and the release's result; null for every other outcome.
     */
    CyclesException failure() {
        String name = kind == Kind.MISSING_ACTUAL ? "MISSING_ACTUAL" : kind == Kind.INVALID_ACTUAL ? "INVALID_ARGUMENT" : null;
        if (name == null) {
            return null;
        }
        Map<String, Object> m = Json.object(json);
        Map<String, Object> f = new java.util.LinkedHashMap<>();
        f.put("name", name);
        f.put("code", CyclesException.errorCodes().get(name).longValue());
        f.put("message", Json.str(m, "message"));
        putRelease(m, f);
        return kind == Kind.MISSING_ACTUAL ? new dev.cycles.errors.MissingActualException(f)
                : new dev.cycles.errors.InvalidArgumentException(f);
    }

    /**
     * The exception of a refused call ({@link Reservation#refuseCall}): the bridge's
     * {@code error} member of the finished JSON, with the release's result.
     */
    dev.cycles.errors.CallNotSentException notSent() {
        Map<String, Object> m = Json.object(json);
        Map<String, Object> f = new java.util.LinkedHashMap<>(Json.obj(m, "error"));
        putRelease(m, f);
        RuntimeException e = CyclesException.fromNative(Json.write(f));
        if (e instanceof dev.cycles.errors.CallNotSentException c) {
            return c;
        }
        throw e; // the bridge's variant has no class here: a bug
    }

    /** The reservation and whether (and why not) the release that ended it succeeded. */
    private void putRelease(Map<String, Object> m, Map<String, Object> f) {
        f.put("released", Boolean.TRUE.equals(m.get("released")));
        f.put("reservation_id", reservationId);
        Map<String, Object> re = Json.obj(m, "release_error");
        if (re != null) {
            Map<String, Object> rf = new java.util.LinkedHashMap<>();
            String kindName = Json.str(re, "error_kind");
            rf.put("name", kindName);
            Integer code = CyclesException.errorCodes().get(kindName);
            rf.put("code", code == null ? 0L : code.longValue());
            rf.put("message", Json.str(re, "message"));
            f.put("release_exception", CyclesException.fromNative(Json.write(rf)));
        }
    }

    /** @return the amount the server applied, or null when nothing was */
    public Amount charged() {
        return settlement == null ? null : settlement.charged();
    }
}
