package dev.cycles.spring;

import dev.cycles.CyclesClient;
import dev.cycles.CyclesEvent;
import dev.cycles.CyclesException;
import dev.cycles.Outcome;
import dev.cycles.Reservation;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * The Micrometer meters (docs/spring.md, "Actuator and meters"):
 *
 * <ul>
 *   <li>{@code cycles.reservations} (counter; {@code decision}: {@code ALLOW},
 *       {@code ALLOW_WITH_CAPS}, or {@code DENIED} with {@code error}, the exception's error
 *       name, e.g. {@code BUDGET_EXCEEDED}): the reservations of {@code @Cycles} methods;</li>
 *   <li>{@code cycles.lifecycle} (timer; {@code outcome}: the {@link Outcome.Kind}, or
 *       {@code ERROR} when settling threw; {@code action}: the action kind): reserve to
 *       settled, per {@code @Cycles} call;</li>
 *   <li>{@code cycles.settlements} (counter; {@code outcome}: {@code settled},
 *       {@code attempt_failed}, {@code pending}, {@code mode_switched}; {@code mode}: commit
 *       or event): every settlement of the client, from the core's events;</li>
 *   <li>{@code cycles.heartbeat.failures} (counter; {@code disposition}: {@code retry} or
 *       {@code stopped}): from the core's {@code heartbeat_failed} events;</li>
 *   <li>{@code cycles.journal.pending} (gauge): the journal's pending records of this client
 *       (a directory scan per read).</li>
 * </ul>
 */
public class CyclesMetrics implements MeterBinder, CyclesObserver {
    private final List<MeterRegistry> registries = new CopyOnWriteArrayList<>();
    private final JournalStatus journal;

    CyclesMetrics(CyclesClient client, JournalStatus journal) {
        this.journal = journal;
        client.addListener(this::event);
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        registries.add(registry);
        if (journal.enabled()) {
            Gauge.builder("cycles.journal.pending", journal, CyclesMetrics::pending)
                    .description("Pending settlements in the journal of this client").register(registry);
        }
    }

    /** The journal's depth, or NaN while it cannot be read (the health check says why). */
    private static double pending(JournalStatus j) {
        try {
            return j.depth().count();
        } catch (CyclesException e) {
            return Double.NaN;
        }
    }

    private void count(String name, String description, String... tags) {
        for (MeterRegistry r : registries) {
            Counter.builder(name).description(description).tags(tags).register(r).increment();
        }
    }

    @Override
    public void reserved(ActionName action, Reservation.Decision decision) {
        count("cycles.reservations", "Reservations of @Cycles methods", "decision", decision.name(), "error", "none");
    }

    @Override
    public void refused(ActionName action, RuntimeException error) {
        String name = error instanceof dev.cycles.CyclesException c ? c.errorName() : error.getClass().getSimpleName();
        count("cycles.reservations", "Reservations of @Cycles methods", "decision", "DENIED", "error", name);
    }

    @Override
    public void finished(ActionName action, Outcome outcome, long nanos) {
        String kind = outcome == null ? "ERROR" : outcome.kind().name();
        for (MeterRegistry r : registries) {
            Timer.builder("cycles.lifecycle").description("@Cycles calls, reserve to settled")
                    .tags("outcome", kind, "action", String.valueOf(action.kind())).register(r).record(nanos, TimeUnit.NANOSECONDS);
        }
    }

    private void event(CyclesEvent e) {
        String kind = e.kind() == null ? "" : e.kind();
        switch (kind) {
            case "settlement_settled", "settlement_attempt_failed", "settlement_pending", "settlement_mode_switched" -> {
                String mode = field(e.json(), "mode");
                count("cycles.settlements", "Settlements by outcome (the core's events)", "outcome",
                        kind.substring("settlement_".length()), "mode", mode == null ? "none" : mode);
            }
            case "heartbeat_failed" -> {
                String d = field(e.json(), "disposition");
                count("cycles.heartbeat.failures", "Heartbeat extensions that failed", "disposition", d == null ? "none" : d);
            }
            default -> { }
        }
    }

    @SuppressWarnings("unchecked")
    private static String field(String json, String key) {
        Object v = ((java.util.Map<String, Object>) dev.cycles.internal.Json.parse(json)).get(key);
        return v == null ? null : v.toString().toLowerCase(Locale.ROOT);
    }
}
