package dev.cycles;

import dev.cycles.internal.Native;
import java.math.BigInteger;

/**
 * Core's pure heartbeat math (docs/heartbeat.md) as JSON in, JSON out, in the encoding of the
 * shared vectors ({@code conformance/vectors/heartbeat.json}): durations are integer
 * milliseconds, beyond 2^53-1 a decimal string, {@code "infinite"} / {@code "-infinite"} for
 * overflow. For planning tools and tests; the client's heartbeat uses the same code itself.
 */
public final class Timing {
    private Timing() {}

    /**
     * One pure function by name: {@code schedule}, {@code lead_floor}, {@code attempt_budget},
     * {@code safety_margin}, {@code retry_reserve}, {@code next_delay},
     * {@code current_lead_estimate}, {@code retry_window}, {@code transient_retry_delay},
     * {@code parse_retry_after}, {@code extend_timeout}, {@code min_lead_floor},
     * {@code attempt_cutoff}, {@code classify_grant}, {@code cadence}, {@code delay_with_skips},
     * {@code is_permanent_stop_code}.
     *
     * @param name the function
     * @param argsJson its arguments as a JSON object
     * @return its result as JSON
     */
    public static String call(String name, String argsJson) {
        return Native.timingCall(name, argsJson);
    }

    /** Core's normative heartbeat planner, stepped with JSON events. */
    public static final class PrimaryPlanner implements AutoCloseable {
        private final long id;

        /**
         * @param requestTimeoutJson the request timeout as a JSON duration ({@code 10000}, {@code "infinite"})
         * @param deriveTimeout derive the enforced timeout from short leases
         */
        public PrimaryPlanner(String requestTimeoutJson, boolean deriveTimeout) {
            this.id = Native.primaryNew(requestTimeoutJson, deriveTimeout);
        }

        /**
         * @param stepJson {@code {"event": "success", ...}} or {@code {"event": "failure", ...}}
         * @return the decision: {@code {"extend": {...}}} or {@code {"stop": ...}}
         */
        public String step(String stepJson) {
            return Native.primaryStep(id, stepJson);
        }

        /** @return the cut-off of the next attempt (JSON duration) */
        public String attemptTimeout() {
            return Native.primaryAttemptTimeout(id);
        }

        @Override
        public void close() {
            Native.free(id);
        }
    }

    /** Core's fallback planner (no {@code remaining_ttl_ms} from the server). */
    public static final class FallbackPlanner implements AutoCloseable {
        private final long id;

        /**
         * @param requestedTtlMs the TTL the reservation asked for
         * @param reserveReceivedUs when its response arrived (monotonic microseconds)
         * @param expiresAtMs its expiry (server clock)
         */
        public FallbackPlanner(long requestedTtlMs, long reserveReceivedUs, long expiresAtMs) {
            this.id = Native.fallbackNew(Long.toString(requestedTtlMs), Long.toString(reserveReceivedUs), expiresAtMs);
        }

        /**
         * The same over core's whole unsigned range (up to 2^64-1, beyond a Java long).
         *
         * @param requestedTtlMs the TTL the reservation asked for
         * @param reserveReceivedUs when its response arrived (monotonic microseconds)
         * @param expiresAtMs its expiry (server clock)
         * @throws dev.cycles.errors.InvalidArgumentException when a value is negative or beyond 2^64-1
         */
        public FallbackPlanner(BigInteger requestedTtlMs, BigInteger reserveReceivedUs, long expiresAtMs) {
            this.id = Native.fallbackNew(requestedTtlMs.toString(), reserveReceivedUs.toString(), expiresAtMs);
        }

        /** @param prime whether the lead is primed @return the first beat's decision JSON */
        public String firstBeat(boolean prime) {
            return Native.fallbackFirstBeat(id, prime);
        }

        /** @param stepJson one event as JSON @return the decision JSON */
        public String step(String stepJson) {
            return Native.fallbackStep(id, stepJson);
        }

        /** @return the planner's regime name */
        public String regime() {
            return Native.fallbackRegime(id);
        }

        /** @param nowUs now (monotonic microseconds) @return the lead's lower bound in ms, as decimal text */
        public String leadMinMs(long nowUs) {
            return Native.fallbackLeadMinMs(id, nowUs);
        }

        @Override
        public void close() {
            Native.free(id);
        }
    }
}
