package dev.cycles;

import dev.cycles.internal.Json;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What is being paid for.
 *
 * @param kind the action kind, e.g. {@code llm.completion}
 * @param name the action name, e.g. {@code openai:gpt-4o-mini}
 * @param tags optional policy tags (the protocol's {@code Action.tags}, e.g.
 *     {@code ["prod", "customer-facing"]}); null: none sent
 */
public record Action(String kind, String name, List<String> tags) {
    /** The tags are a read-only copy. */
    public Action {
        tags = tags == null ? null : List.copyOf(tags);
    }

    /**
     * An action without tags.
     *
     * @param kind the action kind
     * @param name the action name
     */
    public Action(String kind, String name) {
        this(kind, name, null);
    }

    /**
     * @param kind the action kind
     * @param name the action name
     * @return the action
     */
    public static Action of(String kind, String name) {
        return new Action(kind, name);
    }

    /**
     * @param tags the policy tags (null: none)
     * @return this action with those tags
     */
    public Action withTags(List<String> tags) {
        return new Action(kind, name, tags);
    }

    Map<String, Object> toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("kind", kind);
        m.put("name", name);
        if (tags != null) {
            m.put("tags", tags);
        }
        return m;
    }

    @SuppressWarnings("unchecked")
    static Action from(Map<String, Object> m) {
        return m == null ? null : new Action(Json.str(m, "kind"), Json.str(m, "name"), (List<String>) (List<?>) Json.list(m, "tags"));
    }
}
