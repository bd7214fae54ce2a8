package dev.cycles;

import dev.cycles.internal.Json;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The caps rewrite of one provider request (core's {@code plan_caps}; docs/integrations.md,
 * "The provider wire formats"), from {@link Reservation#planCaps}. Set each member of
 * {@link #set()} on the request and remove each one of {@link #unset()} ({@link #apply} does
 * exactly that); do not send the request when {@link #send()} is false (a cap of 0, or below
 * the API's smallest bound): release the reservation instead.
 *
 * @param boundFrom the request's output bound before the caps (null: it had none)
 * @param boundTo the bound after them (null: none, and no {@code max_tokens} cap)
 * @param set provider members to set, as the provider spells them (bound fields, and
 *     {@code tools} when some remain)
 * @param unset provider members to remove ({@code tools}, {@code tool_choice}, ...)
 * @param removedTools the names of the tools the caps removed, in the request's order
 * @param send false when the call must not be made
 * @param changed whether the request changes at all
 */
public record CapsPlan(Long boundFrom, Long boundTo, Map<String, Object> set, List<String> unset,
        List<String> removedTools, boolean send, boolean changed) {
    /** The provider APIs whose wire format core knows, by their wire names. */
    public enum Api {
        /** OpenAI Chat Completions ({@code max_completion_tokens}, {@code max_tokens}; smallest bound 1). */
        CHAT_COMPLETIONS("chat_completions"),
        /** OpenAI Responses ({@code max_output_tokens}; smallest bound 16). */
        RESPONSES("responses"),
        /** Anthropic Messages ({@code max_tokens}; smallest bound 1). */
        MESSAGES("messages");

        private final String wire;

        Api(String wire) {
            this.wire = wire;
        }

        /** @return the wire name core reads: {@code chat_completions}, {@code responses}, {@code messages} */
        public String wireName() {
            return wire;
        }
    }

    /** The members are read-only copies. */
    public CapsPlan {
        set = Collections.unmodifiableMap(new LinkedHashMap<>(set));
        unset = List.copyOf(unset);
        removedTools = List.copyOf(removedTools);
    }

    /**
     * A copy of {@code request} (a provider request body, or the keyword-style arguments of a
     * library call) with {@link #set()} set and {@link #unset()} removed.
     *
     * @param request the request as planned
     * @return the request to send
     */
    public Map<String, Object> apply(Map<String, ?> request) {
        Map<String, Object> out = new LinkedHashMap<>(request);
        out.putAll(set);
        for (String k : unset) {
            out.remove(k);
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    static CapsPlan parse(String json) {
        Map<String, Object> m = Json.object(json);
        return new CapsPlan(Json.lng(m, "bound_from"), Json.lng(m, "bound_to"), Json.obj(m, "set"),
                (List<String>) (List<?>) Json.list(m, "unset"), (List<String>) (List<?>) Json.list(m, "removed_tools"),
                Json.bool(m, "send"), Json.bool(m, "changed"));
    }
}
