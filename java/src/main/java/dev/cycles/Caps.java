package dev.cycles;

import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;

/**
 * Soft-landing constraints of an {@code ALLOW_WITH_CAPS} decision. Unset members are null.
 *
 * @param maxTokens the most tokens the work may use
 * @param maxStepsRemaining the most steps left
 * @param toolAllowlist if non-empty, the only tools allowed
 * @param toolDenylist tools not allowed (ignored when the allowlist is non-empty)
 * @param cooldownMs a cooldown in milliseconds
 */
public record Caps(Long maxTokens, Long maxStepsRemaining, List<String> toolAllowlist, List<String> toolDenylist,
        Long cooldownMs) {
    @SuppressWarnings("unchecked")
    static Caps from(Map<String, Object> m) {
        return m == null ? null : new Caps(Json.lng(m, "max_tokens"), Json.lng(m, "max_steps_remaining"),
                (List<String>) (List<?>) Json.list(m, "tool_allowlist"), (List<String>) (List<?>) Json.list(m, "tool_denylist"),
                Json.lng(m, "cooldown_ms"));
    }
}
