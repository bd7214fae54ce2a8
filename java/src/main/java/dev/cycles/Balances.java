package dev.cycles;

import dev.cycles.internal.Json;
import java.util.List;
import java.util.Map;

/**
 * The result of {@code getBalances}: one page.
 *
 * @param balances the balances of this page
 * @param nextCursor the cursor of the next page, when there is one
 * @param hasMore whether more pages follow, when reported
 */
public record Balances(List<Balance> balances, String nextCursor, Boolean hasMore) {
    static Balances from(Map<String, Object> m) {
        return new Balances(Balance.list(m, "balances"), Json.str(m, "next_cursor"), Json.bool(m, "has_more"));
    }
}
