package dev.cycles;

import dev.cycles.internal.Json;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Who spends: a tenant and optional narrower scopes. Unset members are null.
 *
 * @param tenant tenant
 * @param workspace workspace
 * @param app app
 * @param workflow workflow
 * @param agent agent
 * @param toolset toolset
 * @param dimensions optional custom dimensions (the protocol's {@code Subject.dimensions}, e.g.
 *     {@code cost_center=42}); null: none sent. A subject of only dimensions is invalid.
 */
public record Subject(String tenant, String workspace, String app, String workflow, String agent, String toolset,
        Map<String, String> dimensions) {
    /** The dimensions are a read-only copy, in their given order. */
    public Subject {
        dimensions = dimensions == null ? null : Collections.unmodifiableMap(new LinkedHashMap<>(dimensions));
    }

    /**
     * A subject without dimensions.
     *
     * @param tenant tenant
     * @param workspace workspace
     * @param app app
     * @param workflow workflow
     * @param agent agent
     * @param toolset toolset
     */
    public Subject(String tenant, String workspace, String app, String workflow, String agent, String toolset) {
        this(tenant, workspace, app, workflow, agent, toolset, null);
    }

    /**
     * @param tenant the tenant
     * @return a subject of only that tenant
     */
    public static Subject tenant(String tenant) {
        return new Subject(tenant, null, null, null, null, null);
    }

    /**
     * @param agent the agent
     * @return this subject with that agent
     */
    public Subject withAgent(String agent) {
        return new Subject(tenant, workspace, app, workflow, agent, toolset, dimensions);
    }

    /**
     * @param workflow the workflow
     * @return this subject with that workflow
     */
    public Subject withWorkflow(String workflow) {
        return new Subject(tenant, workspace, app, workflow, agent, toolset, dimensions);
    }

    /**
     * @param dimensions the custom dimensions (null: none)
     * @return this subject with those dimensions
     */
    public Subject withDimensions(Map<String, String> dimensions) {
        return new Subject(tenant, workspace, app, workflow, agent, toolset, dimensions);
    }

    Map<String, Object> toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        String[] k = {"tenant", "workspace", "app", "workflow", "agent", "toolset"};
        String[] v = {tenant, workspace, app, workflow, agent, toolset};
        for (int i = 0; i < k.length; i++) {
            if (v[i] != null) {
                m.put(k[i], v[i]);
            }
        }
        if (dimensions != null) {
            m.put("dimensions", dimensions);
        }
        return m;
    }

    @SuppressWarnings("unchecked")
    static Subject from(Map<String, Object> m) {
        return m == null ? null : new Subject(Json.str(m, "tenant"), Json.str(m, "workspace"), Json.str(m, "app"),
                Json.str(m, "workflow"), Json.str(m, "agent"), Json.str(m, "toolset"),
                (Map<String, String>) (Map<String, ?>) Json.obj(m, "dimensions"));
    }
}
