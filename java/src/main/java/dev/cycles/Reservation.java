package dev.cycles;

import dev.cycles.internal.Completions;
import dev.cycles.internal.Native;
import java.lang.ref.Cleaner;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;

/**
 * A guarded action in progress: reserved, its lease kept alive by the heartbeat on core's
 * runtime. Report what the work cost with {@link #setActual} or, streaming,
 * {@link #addUsage}; {@link #close()} settles it (commit the actual) or, after
 * {@link #fail()}, releases it. Use it with try-with-resources:
 *
 * <pre>{@code
 * try (Reservation r = client.reserve(spec)) {
 *     for (Chunk c : stream) { r.addUsage(c.cost()); }
 * } // settled here; r.outcome() says how
 * }</pre>
 *
 * Java's {@code close()} cannot see an exception leaving the block: call {@link #fail()} in a
 * {@code catch} when the work failed, or use {@link CyclesClient#guarded}, which does.
 * Usage may be reported from any thread. The settlement is journaled before it is sent, so it
 * survives a crash. The current reservation of a thread is {@link #current()}; it does not
 * follow work to other threads unless wrapped with {@link #propagate(Runnable)} (settlement
 * never depends on it).
 */
public final class Reservation implements AutoCloseable {
    private static final ThreadLocal<Reservation> CURRENT = new ThreadLocal<>();
    private final State state;
    private final Cleaner.Cleanable cleanable;
    private final String reservationId;
    private volatile boolean failed;
    private volatile Outcome outcome;
    private Reservation previous;

    /** Frees the native action if the Reservation is dropped unfinished (core then settles its known usage, else releases). */
    private static final class State implements Runnable {
        final long id;

        State(long id) {
            this.id = id;
        }

        @Override
        public void run() {
            Native.free(id);
        }
    }

    Reservation(long id) {
        this.state = new State(id);
        this.cleanable = CyclesClient.CLEANER.register(this, state);
        this.reservationId = Native.activeReservationId(id);
    }

    void enter() {
        previous = CURRENT.get();
        CURRENT.set(this);
    }

    private void exit() {
        if (CURRENT.get() == this) {
            if (previous == null) {
                CURRENT.remove();
            } else {
                CURRENT.set(previous);
            }
        }
    }

    /** @return the reservation id */
    public String reservationId() {
        return reservationId;
    }

    /**
     * Sets what the work cost (replaces anything reported before).
     *
     * @param amount the actual, in the spec's unit
     * @throws ClientClosedException when the action has finished
     */
    public void setActual(long amount) {
        Native.activeSetActual(state.id, amount);
    }

    /**
     * Adds to what the work cost (streaming usage).
     *
     * @param amount the increment, in the spec's unit
     * @throws ClientClosedException when the action has finished
     */
    public void addUsage(long amount) {
        Native.activeAdd(state.id, amount);
    }

    /** @return the actual reported so far, if any */
    public OptionalLong actual() {
        String a = Native.activeActual(state.id);
        return a == null ? OptionalLong.empty() : OptionalLong.of(Long.parseLong(a));
    }

    /** @param json the commit's standard metrics as a JSON object */
    public void setMetricsJson(String json) {
        Native.activeSetJson(state.id, false, json);
    }

    /** @param json the commit's metadata as a JSON object (sent exactly as written) */
    public void setMetadataJson(String json) {
        Native.activeSetJson(state.id, true, json);
    }

    /** @return whether the heartbeat cancelled the work (policy {@link HeartbeatPolicy#CANCEL}) */
    public boolean isCancelled() {
        return Native.activeCancelled(state.id);
    }

    /** Marks the work failed: {@link #close()} releases the reservation instead of committing. */
    public void fail() {
        failed = true;
    }

    /**
     * Settles now (blocking): commits the actual, or releases after {@link #fail()}.
     * Idempotent; the outcome is kept in {@link #outcome()}.
     */
    @Override
    public void close() {
        exit();
        if (outcome != null) {
            return;
        }
        synchronized (this) {
            if (outcome == null) {
                outcome = Outcome.parse(Native.activeFinish(state.id, !failed));
                cleanable.clean();
            }
        }
    }

    /**
     * Settles without blocking the caller.
     *
     * @param workSucceeded true: commit the actual; false: release
     * @return the outcome, completed off the native threads
     */
    public CompletableFuture<Outcome> finishAsync(boolean workSucceeded) {
        exit();
        CompletableFuture<String> f = new CompletableFuture<>();
        long fid = Completions.register(f);
        try {
            Native.activeFinishAsync(state.id, workSucceeded, fid);
        } catch (RuntimeException e) {
            Completions.forget(fid);
            return CompletableFuture.failedFuture(e);
        }
        return f.thenApply(json -> {
            Outcome o = Outcome.parse(json);
            outcome = o;
            cleanable.clean();
            return o;
        });
    }

    /** @return how the action ended, once closed */
    public Optional<Outcome> outcome() {
        return Optional.ofNullable(outcome);
    }

    /** @return the guarded action running on this thread (inside guarded work or a reserve block) */
    public static Optional<Reservation> current() {
        return Optional.ofNullable(CURRENT.get());
    }

    /**
     * Carries this thread's current reservation to the thread that runs {@code task}
     * (explicit propagation to executors).
     *
     * @param task the task
     * @return a task that runs with this thread's current reservation as its current one
     */
    public static Runnable propagate(Runnable task) {
        Reservation r = CURRENT.get();
        return () -> {
            Reservation before = CURRENT.get();
            CURRENT.set(r);
            try {
                task.run();
            } finally {
                restore(before);
            }
        };
    }

    /**
     * {@link #propagate(Runnable)} for a {@link Callable}.
     *
     * @param task the task
     * @param <T> its result type
     * @return a task that runs with this thread's current reservation as its current one
     */
    public static <T> Callable<T> propagate(Callable<T> task) {
        Reservation r = CURRENT.get();
        return () -> {
            Reservation before = CURRENT.get();
            CURRENT.set(r);
            try {
                return task.call();
            } finally {
                restore(before);
            }
        };
    }

    private static void restore(Reservation before) {
        if (before == null) {
            CURRENT.remove();
        } else {
            CURRENT.set(before);
        }
    }
}
