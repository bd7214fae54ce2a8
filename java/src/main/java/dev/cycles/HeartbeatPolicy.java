package dev.cycles;

/** What the heartbeat does when it cannot keep the lease (core's failure policy). */
public enum HeartbeatPolicy {
    /** Report it (events) and settle as usual (the default). */
    WARN("warn"),
    /** Settle, then report the lapse in the outcome ({@link Outcome.Kind#HEARTBEAT_LAPSED}). */
    FAIL_ON_FINALIZE("fail_on_finalize"),
    /** Mark the work cancelled ({@link Reservation#isCancelled()}) as soon as the lease is lost. */
    CANCEL("cancel");

    final String wire;

    HeartbeatPolicy(String wire) {
        this.wire = wire;
    }
}
