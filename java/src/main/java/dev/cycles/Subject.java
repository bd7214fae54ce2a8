package dev.cycles;

import dev.cycles.internal.Json;
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
 */
public record Subject(String tenant, String workspace, String app, String workflow, String agent, String toolset) {
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
        return new Subject(tenant, workspace, app, workflow, agent, toolset);
    }

    /**
     * @param workflow the workflow
     * @return this subject with that workflow
     */
    public Subject withWorkflow(String workflow) {
        return new Subject(tenant, workspace, app, workflow, agent, toolset);
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
        return m;
    }

    static Subject from(Map<String, Object> m) {
        return m == null ? null : new Subject(Json.str(m, "tenant"), Json.str(m, "workspace"), Json.str(m, "app"),
                Json.str(m, "workflow"), Json.str(m, "agent"), Json.str(m, "toolset"));
    }
}
