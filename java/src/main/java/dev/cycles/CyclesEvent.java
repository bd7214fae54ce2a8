package dev.cycles;

import dev.cycles.internal.Json;
import java.util.Map;

/**
 * One lifecycle event (core's stable event schema, docs/events.md): heartbeats, settlements,
 * journal replays. Delivered to {@link CyclesClient.Builder#onEvent listeners} and logged to the
 * {@code System.Logger} named {@code dev.cycles}, on the client's own daemon thread, in order.
 *
 * @param kind the event kind, e.g. {@code settlement_settled}
 * @param level {@code debug}, {@code info}, {@code warn} or {@code error}
 * @param reservationId the reservation, when the event has one
 * @param message a human-readable message
 * @param json the whole event as JSON
 */
public record CyclesEvent(String kind, String level, String reservationId, String message, String json) {
    static CyclesEvent from(Map<String, Object> m) {
        return new CyclesEvent(Json.str(m, "kind"), Json.str(m, "level"), Json.str(m, "reservation_id"), Json.str(m, "message"),
                Json.write(m));
    }

    /** @return the {@code System.Logger} level of this event */
    public System.Logger.Level loggerLevel() {
        if (level == null) {
            return System.Logger.Level.INFO;
        }
        return switch (level) {
            case "error" -> System.Logger.Level.ERROR;
            case "warning", "warn" -> System.Logger.Level.WARNING;
            case "debug" -> System.Logger.Level.DEBUG;
            case "trace" -> System.Logger.Level.TRACE;
            default -> System.Logger.Level.INFO;
        };
    }
}
