package dev.cycles.spring.ai;

import dev.cycles.CapsPlan;
import dev.cycles.CyclesException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The budget answered {@code ALLOW_WITH_CAPS} with caps under which no provider accepts the
 * call (core's {@code plan_caps} said {@code send: false}: a {@code max_tokens} cap of 0), so
 * {@link CyclesChatAdvisor} did not call the model and released the reservation. Its
 * {@link #errorName()} is {@code BUDGET_EXCEEDED} (code 104), as Python's
 * {@code CallNotSentError}, a {@code BudgetExceededError}: code telling denials apart by
 * error name treats it as one. Not a {@code dev.cycles.errors.BudgetExceededException}
 * (that class is the server's denial, and final).
 */
public final class CallNotSentException extends CyclesException {
    private static final long serialVersionUID = 1L;
    private final String reservationId;
    private final boolean released;
    private final transient CapsPlan plan;

    CallNotSentException(String reservationId, boolean released, CapsPlan plan) {
        super(fields(reservationId, released, plan));
        this.reservationId = reservationId;
        this.released = released;
        this.plan = plan;
    }

    private static Map<String, Object> fields(String reservationId, boolean released, CapsPlan plan) {
        Map<String, Object> f = new LinkedHashMap<>();
        f.put("name", "BUDGET_EXCEEDED");
        f.put("code", 104L);
        f.put("message", "reservation " + reservationId + ": caps lower the output bound to " + plan.boundTo()
                + ", which the provider does not accept: the model was not called"
                + (released ? " and the reservation was released" : " (its release failed: the reservation expires)"));
        return f;
    }

    /** @return the reservation that was not used */
    public String reservationId() {
        return reservationId;
    }

    /** @return whether its release succeeded (else the server expires it) */
    public boolean released() {
        return released;
    }

    /** @return core's plan ({@code send} false) */
    public CapsPlan plan() {
        return plan;
    }
}
