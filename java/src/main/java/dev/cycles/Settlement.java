package dev.cycles;

import dev.cycles.internal.Json;
import java.util.Map;

/**
 * What became of a settlement (commit, or the event fallback after expiry).
 *
 * @param status what happened
 * @param charged the amount applied ({@code COMMITTED} / {@code RECOVERED_VIA_EVENT})
 * @param reason why it is pending or rejected
 * @param errorKind the error kind of the last failed attempt, when one failed
 * @param journaled whether a pending settlement is in the journal (replayed later)
 * @param journalError why a pending settlement is not journaled although journaling is on (the
 *     failed journal operation and its OS error, e.g. a full disk), else null; such a settlement
 *     is kept in memory and retried by the replay, {@code flush} and {@code drain}, but is lost
 *     if the process ends first ({@link DrainReport#unjournaled()})
 * @param httpStatus the rejection's HTTP status
 * @param errorCode the rejection's server error code
 * @param bodyJson the server's commit or event response as JSON, when settled
 */
public record Settlement(Status status, Amount charged, String reason, String errorKind, boolean journaled,
        String journalError, Integer httpStatus, String errorCode, String bodyJson) {
    /** Settlement states. */
    public enum Status {
        /** Committed. */
        COMMITTED,
        /** Recorded through the event fallback after the reservation expired. */
        RECOVERED_VIA_EVENT,
        /** Not settled yet: replayed later (this process or the next; see {@code journaled}). */
        PENDING,
        /** Rejected by the server. */
        REJECTED
    }

    static Settlement from(Map<String, Object> m) {
        if (m == null) {
            return null;
        }
        Long http = Json.lng(m, "http_status");
        Object body = m.get("body");
        return new Settlement(Status.valueOf(Json.str(m, "status").toUpperCase(java.util.Locale.ROOT)),
                Amount.from(Json.obj(m, "charged")), Json.str(m, "reason"), Json.str(m, "error_kind"),
                Boolean.TRUE.equals(m.get("journaled")), Json.str(m, "journal_error"), http == null ? null : http.intValue(), Json.str(m, "error_code"),
                body == null ? null : Json.write(body));
    }
}
