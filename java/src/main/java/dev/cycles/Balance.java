package dev.cycles;

import dev.cycles.internal.Json;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One scope's budget as the server reports it.
 *
 * @param scope the scope kind
 * @param scopePath the scope path, e.g. {@code tenant:acme}
 * @param remaining what is left (may be negative in overdraft)
 * @param reserved held by live reservations, when reported
 * @param spent spent, when reported
 * @param debt debt, when reported
 * @param allocated allocated, when reported
 */
public record Balance(String scope, String scopePath, Amount remaining, Amount reserved, Amount spent, Amount debt,
        Amount allocated) {
    static Balance from(Map<String, Object> m) {
        return new Balance(Json.str(m, "scope"), Json.str(m, "scope_path"), Amount.from(Json.obj(m, "remaining")),
                Amount.from(Json.obj(m, "reserved")), Amount.from(Json.obj(m, "spent")), Amount.from(Json.obj(m, "debt")),
                Amount.from(Json.obj(m, "allocated")));
    }

    @SuppressWarnings("unchecked")
    static List<Balance> list(Map<String, Object> m, String key) {
        List<Balance> out = new ArrayList<>();
        List<Object> l = Json.list(m, key);
        if (l != null) {
            for (Object o : l) {
                out.add(from((Map<String, Object>) o));
            }
        }
        return out;
    }
}
