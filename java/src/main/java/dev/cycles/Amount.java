package dev.cycles;

import dev.cycles.internal.Json;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An amount in a unit ({@code USD_MICROCENTS}, {@code TOKENS}, {@code CREDITS}, {@code RISK_POINTS}).
 *
 * @param unit the unit's wire name
 * @param amount the amount (negative only for a signed balance)
 */
public record Amount(String unit, long amount) {
    /** The default unit ({@link Unit#USD_MICROCENTS}; {@link Unit} has every known one). */
    public static final String USD_MICROCENTS = Unit.USD_MICROCENTS;

    /**
     * @param amount an amount of USD micro-cents
     * @return the amount
     */
    public static Amount usdMicrocents(long amount) {
        return new Amount(USD_MICROCENTS, amount);
    }

    Map<String, Object> toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("unit", unit);
        m.put("amount", amount);
        return m;
    }

    static Amount from(Map<String, Object> m) {
        return m == null ? null : new Amount(Json.str(m, "unit"), Json.lng(m, "amount"));
    }
}
