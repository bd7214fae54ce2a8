package dev.cycles.spring.ai;

import dev.cycles.CapsPlan;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The budget answered {@code ALLOW_WITH_CAPS} with caps under which no provider accepts the
 * call (core's {@code plan_caps} said {@code send: false}: a {@code max_tokens} cap of 0), so
 * {@link CyclesChatAdvisor} did not call the model and released the reservation
 * ({@link dev.cycles.Reservation#refuseCall}). The SDK's
 * {@link dev.cycles.errors.CallNotSentException} (a
 * {@link dev.cycles.errors.BudgetExceededException}, {@code BUDGET_EXCEEDED}, code 104, with
 * core's message, as Python's and Node's {@code CallNotSentError}) with the plan that caused it.
 */
public final class CallNotSentException extends dev.cycles.errors.CallNotSentException {
    private static final long serialVersionUID = 1L;
    private final transient CapsPlan plan;

    CallNotSentException(dev.cycles.errors.CallNotSentException refused, CapsPlan plan) {
        super(fields(refused));
        this.plan = plan;
    }

    /** The SDK exception's facts (all from core and the bridge), kept as they are. */
    private static Map<String, Object> fields(dev.cycles.errors.CallNotSentException e) {
        Map<String, Object> f = new LinkedHashMap<>();
        f.put("name", e.errorName());
        f.put("code", (long) e.code());
        f.put("message", e.getMessage());
        f.put("reservation_id", e.reservationId());
        f.put("released", e.released());
        f.put("release_exception", e.releaseError().orElse(null));
        return f;
    }

    /** @return core's plan ({@code send} false) */
    public CapsPlan plan() {
        return plan;
    }
}
