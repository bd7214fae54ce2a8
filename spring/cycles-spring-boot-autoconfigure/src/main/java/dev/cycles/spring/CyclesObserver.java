package dev.cycles.spring;

import dev.cycles.Outcome;
import dev.cycles.Reservation;

/**
 * What a {@code @Cycles} method's lifecycle reports to observers (the meters,
 * {@link CyclesMetrics}): each bean of this type is told, in order, on the calling thread
 * (reservation) or the settling thread (the end). An exception in one is ignored.
 */
public interface CyclesObserver {
    /**
     * @param plan the action's kind and name
     * @param decision {@code ALLOW} / {@code ALLOW_WITH_CAPS}
     */
    default void reserved(ActionName plan, Reservation.Decision decision) {}

    /**
     * @param plan the action's kind and name
     * @param error why the reservation was refused (e.g. {@code BudgetExceededException})
     */
    default void refused(ActionName plan, RuntimeException error) {}

    /**
     * @param plan the action's kind and name
     * @param outcome how it ended (null when the settlement itself threw)
     * @param nanos reserve to settled
     */
    default void finished(ActionName plan, Outcome outcome, long nanos) {}

    /**
     * An action's kind and name.
     *
     * @param kind the action kind
     * @param name the action name
     */
    record ActionName(String kind, String name) {}
}
