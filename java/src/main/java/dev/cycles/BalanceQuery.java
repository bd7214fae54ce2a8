package dev.cycles;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A {@code getBalances} query; null members are unset (at least one subject field is needed).
 *
 * @param tenant tenant
 * @param workspace workspace
 * @param app app
 * @param workflow workflow
 * @param agent agent
 * @param toolset toolset
 * @param includeChildren include child scopes
 * @param limit page size
 * @param cursor the previous page's {@code nextCursor}
 */
public record BalanceQuery(String tenant, String workspace, String app, String workflow, String agent, String toolset,
        Boolean includeChildren, Integer limit, String cursor) {
    /**
     * @param tenant the tenant
     * @return the balances of that tenant
     */
    public static BalanceQuery tenant(String tenant) {
        return new BalanceQuery(tenant, null, null, null, null, null, null, null, null);
    }

    Map<String, Object> toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        String[] k = {"tenant", "workspace", "app", "workflow", "agent", "toolset", "include_children", "limit", "cursor"};
        Object[] v = {tenant, workspace, app, workflow, agent, toolset, includeChildren, limit, cursor};
        for (int i = 0; i < k.length; i++) {
            CreateReservationRequest.put(m, k[i], v[i]);
        }
        return m;
    }
}
