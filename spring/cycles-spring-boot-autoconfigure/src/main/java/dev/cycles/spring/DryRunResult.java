package dev.cycles.spring;

import dev.cycles.Amount;
import dev.cycles.Balance;
import dev.cycles.Caps;
import dev.cycles.ReservationResult;
import java.util.List;

/**
 * What a {@link Cycles#dryRun() dryRun} method returns instead of running: the server's
 * evaluation of the reservation it would have made ({@code dry_run: true}), nothing held. Only
 * {@code ALLOW} and {@code ALLOW_WITH_CAPS} are returned; a {@code DENY} is a
 * {@link dev.cycles.errors.BudgetExceededException}.
 *
 * @param decision {@code ALLOW} or {@code ALLOW_WITH_CAPS}
 * @param caps the constraints of an {@code ALLOW_WITH_CAPS} decision, else null
 * @param affectedScopes every scope the reservation would touch
 * @param scopePath the scope that would be charged
 * @param reserved what would be reserved, when the server reports it
 * @param balances the balances, when reported
 * @param retryAfterMs when to try again, when the server suggests it
 */
public record DryRunResult(String decision, Caps caps, List<String> affectedScopes, String scopePath, Amount reserved,
        List<Balance> balances, Long retryAfterMs) {
    static DryRunResult of(ReservationResult r) {
        return new DryRunResult(r.decision(), r.caps(), r.affectedScopes(), r.scopePath(), r.reserved(), r.balances(),
                r.retryAfterMs());
    }

    /** @return whether the decision carries caps */
    public boolean isAllowedWithCaps() {
        return "ALLOW_WITH_CAPS".equals(decision);
    }
}
