package dev.cycles;

import dev.cycles.internal.Json;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What is being paid for.
 *
 * @param kind the action kind, e.g. {@code llm.completion}
 * @param name the action name, e.g. {@code openai:gpt-4o-mini}
 */
public record Action(String kind, String name) {
    /**
     * @param kind the action kind
     * @param name the action name
     * @return the action
     */
    public static Action of(String kind, String name) {
        return new Action(kind, name);
    }

    Map<String, Object> toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("kind", kind);
        m.put("name", name);
        return m;
    }

    static Action from(Map<String, Object> m) {
        return m == null ? null : new Action(Json.str(m, "kind"), Json.str(m, "name"));
    }
}
