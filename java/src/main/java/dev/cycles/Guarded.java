package dev.cycles;

/**
 * The value of guarded work and how its action ended.
 *
 * @param value what the work returned
 * @param outcome the settlement outcome
 * @param <T> the work's result type
 */
public record Guarded<T>(T value, Outcome outcome) {}
