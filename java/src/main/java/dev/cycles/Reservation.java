package dev.cycles;

import dev.cycles.internal.Completions;
import dev.cycles.internal.Native;
import dev.cycles.internal.Json;
import java.lang.ref.Cleaner;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

/**
 * A guarded action in progress: reserved, its lease kept alive by the heartbeat on core's
 * runtime. Report what the work cost with {@link #setActual} or, streaming,
 * {@link #addUsage}; {@link #close()} settles it: commits the usage reported. After
 * {@link #fail()} it commits the usage reported before the failure the same way, and
 * releases the reservation only when none was reported. Use it with try-with-resources:
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
 * survives a crash.
 *
 * <p>The current reservation of a thread is {@link #current()}: the innermost unfinished one
 * that {@link CyclesClient#reserve} or {@link CyclesClient#guarded} entered on it. It does not
 * follow work to other threads by itself; carry it explicitly with {@link #propagate(Runnable)},
 * {@link #propagate(Callable)} or an executor wrapped by {@link #propagating(Executor)}:
 *
 * <pre>{@code
 * client.guarded(spec, r -> {
 *     Executor ex = Reservation.propagating(pool);
 *     CompletableFuture.runAsync(() -> Reservation.current().orElseThrow().addUsage(7), ex).join();
 *     return null;
 * });
 * }</pre>
 *
 * Settlement never depends on it: a reservation settles exactly once whichever thread closes
 * it, and once finished it is no thread's current reservation.
 */
public final class Reservation implements AutoCloseable {
    private static final ThreadLocal<Reservation> CURRENT = new ThreadLocal<>();
    private final State state;
    private final Cleaner.Cleanable cleanable;
    private final String reservationId;
    private final Decision decision;
    private final Caps caps;
    private volatile boolean failed;
    private volatile Outcome outcome;
    // Finishing starts the moment close() or finishAsync() is called: from then on this is no
    // thread's current reservation, even on a thread that did not close it.
    private volatile boolean finished;
    // What was current on the entering thread; read by whichever thread finishes this one.
    private volatile Reservation previous;

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
        Map<String, Object> info = Json.object(Native.activeInfo(id));
        this.decision = Decision.valueOf(Json.str(info, "decision"));
        this.caps = Caps.from(Json.obj(info, "caps"));
    }

    /** The server's decision on the reservation. */
    public enum Decision {
        /** Allowed as asked. */
        ALLOW,
        /** Allowed with soft-landing constraints: honour {@link Reservation#caps()}. */
        ALLOW_WITH_CAPS
    }

    void enter() {
        previous = live(CURRENT.get());
        CURRENT.set(this);
    }

    private void exit() {
        finished = true;
        if (CURRENT.get() == this) {
            restore(live(previous));
        }
    }

    /** The innermost unfinished reservation of the chain starting at {@code r}. */
    private static Reservation live(Reservation r) {
        while (r != null && r.finished) {
            r = r.previous;
        }
        return r;
    }

    /** @return the reservation id */
    public String reservationId() {
        return reservationId;
    }

    /** @return the server's decision: {@code ALLOW} or {@code ALLOW_WITH_CAPS} */
    public Decision decision() {
        return decision;
    }

    /**
     * @return the caps under {@link Decision#ALLOW_WITH_CAPS} (the work should honour them,
     *     e.g. shrink the model call's {@code max_tokens}); empty under {@code ALLOW}
     */
    public Optional<Caps> caps() {
        return Optional.ofNullable(caps);
    }

    /**
     * The caps rewrite of a provider request under this action's {@link #caps()} (core's
     * {@code plan_caps}, as Python's and Node's {@code plan_caps}): every output-bound field of
     * {@code api} is lowered to {@code caps.maxTokens} (a request with none gets the API's
     * first field), the tools the caps exclude are removed (and a {@code tool_choice} naming
     * one). A rewrite, or a refusal to send, is reported as the {@code caps_applied} event
     * (docs/events.md) to the client's listeners, as in every language. Under
     * {@code ALLOW} the plan changes nothing.
     *
     * <pre>{@code
     * CapsPlan plan = r.planCaps(CapsPlan.Api.MESSAGES, body);
     * if (!plan.send()) { r.release("capped to 0 tokens"); return; }
     * Map<String, Object> sent = plan.apply(body);
     * }</pre>
     *
     * @param api the provider API whose wire format {@code request} is in
     * @param request the request body (at least its bound fields and {@code tools}: tools
     *     named by {@code name}, {@code function.name} or {@code type})
     * @return the plan
     * @throws dev.cycles.errors.InvalidArgumentException for a bound that is not a count, or
     *     once the action has finished
     */
    public CapsPlan planCaps(CapsPlan.Api api, Map<String, ?> request) {
        if (request == null) {
            throw new IllegalArgumentException("request must not be null");
        }
        return planCaps(api, Json.write(request));
    }

    /**
     * {@link #planCaps(CapsPlan.Api, Map)} for a request body as JSON text.
     *
     * @param api the provider API whose wire format {@code requestJson} is in
     * @param requestJson the request body as a JSON object
     * @return the plan
     * @throws dev.cycles.errors.InvalidArgumentException for text that is not JSON, a bound
     *     that is not a count, or once the action has finished
     */
    public CapsPlan planCaps(CapsPlan.Api api, String requestJson) {
        if (api == null) {
            throw new IllegalArgumentException("api must not be null");
        }
        return CapsPlan.parse(Native.activePlanCaps(state.id, api.wireName(), requestJson));
    }

    /**
     * Ends the action early without a reason; see {@link #release(String)}.
     *
     * @return the outcome ({@link Outcome.Kind#RELEASED})
     */
    public Outcome release() {
        return release(null);
    }

    /**
     * Ends the action early (blocking): releases the reservation ({@code <key>:release}) and
     * gives the estimate back, e.g. when the work decides not to call the model under
     * {@code ALLOW_WITH_CAPS}. {@link #close()} then does nothing.
     *
     * @param reason the release's reason, or null
     * @return the outcome ({@link Outcome.Kind#RELEASED}), also kept in {@link #outcome()}
     * @throws dev.cycles.errors.InvalidArgumentException once usage was reported (a release
     *     would drop a known actual): the action goes on; end it normally to commit that usage
     * @throws CyclesException when the release request fails (the action has ended)
     */
    public Outcome release(String reason) {
        synchronized (this) {
            if (outcome != null) {
                throw new IllegalStateException("the guarded action has already finished");
            }
            String json = Native.activeRelease(state.id, reason);
            exit();
            outcome = Outcome.parse(json);
            cleanable.clean();
            return outcome;
        }
    }

    /**
     * Does not make the provider call this action guards, and says so (blocking): releases
     * the reservation ({@code <key>:release} with core's reason) and returns the exception to
     * throw, with core's message, as every language's integrations do. {@link #close()} then
     * does nothing; {@link #outcome()} is {@link Outcome.Kind#RELEASED}.
     *
     * <pre>{@code
     * CapsPlan plan = r.planCaps(CapsPlan.Api.MESSAGES, body);
     * if (!plan.send()) { throw r.refuseCall(null); }
     * }</pre>
     *
     * @param why your own reason (a library that cannot carry the capped bound), or null: why
     *     the latest {@link #planCaps} said {@code send} false
     * @return the exception ({@code BUDGET_EXCEEDED}, variant {@code call_not_sent}; its
     *     {@code released()} says whether the release succeeded)
     * @throws dev.cycles.errors.InvalidArgumentException with a null {@code why} when no plan
     *     said not to send, or once usage was reported (the action goes on)
     */
    public dev.cycles.errors.CallNotSentException refuseCall(String why) {
        synchronized (this) {
            if (outcome != null) {
                throw new IllegalStateException("the guarded action has already finished");
            }
            String json = Native.activeRefuseCall(state.id, why);
            exit();
            outcome = Outcome.parse(json);
            cleanable.clean();
            return outcome.notSent();
        }
    }

    /**
     * Sets what the work cost (replaces anything reported before).
     *
     * @param amount the actual, in the spec's unit
     * @throws ClientClosedException when the action has finished (while its settlement is
     *     under way, {@link dev.cycles.errors.InvalidArgumentException}): the amount would not
     *     be settled
     */
    public void setActual(long amount) {
        Native.activeSetActual(state.id, amount);
    }

    /**
     * Adds to what the work cost (streaming usage).
     *
     * @param amount the increment, in the spec's unit
     * @throws ClientClosedException when the action has finished (while its settlement is
     *     under way, {@link dev.cycles.errors.InvalidArgumentException}): the amount would not
     *     be settled
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

    /**
     * Marks the work failed. {@link #close()} then still commits the usage reported so far
     * ({@link #setActual} / {@link #addUsage}: it was spent; journaled first, like any
     * commit), and the outcome is {@link Outcome.Kind#WORK_FAILED} with that settlement; with
     * no usage reported it releases the reservation instead (no settlement).
     */
    public void fail() {
        failed = true;
    }

    /**
     * Settles now (blocking): commits the usage reported; after {@link #fail()} with no usage
     * reported, releases the reservation instead. With no usage reported and no failure
     * marked (the work "succeeded" without saying what it cost, or an exception left a
     * try-with-resources block: Java's {@code close()} cannot see it), nothing is committed:
     * the reservation is released in the same call and this throws
     * {@link dev.cycles.errors.MissingActualException} (its {@code released()} says whether the
     * release succeeded; in a try-with-resources block that threw, it is suppressed under the
     * block's own exception). A negative actual is released the same way and throws
     * {@link dev.cycles.errors.InvalidArgumentException}.
     * Idempotent (the exception only the first time); after {@link #release()} it does nothing;
     * the outcome is kept in {@link #outcome()}.
     */
    @Override
    public void close() {
        exit();
        if (outcome != null) {
            return;
        }
        CyclesException failure = null;
        synchronized (this) {
            if (outcome == null) {
                outcome = Outcome.parse(Native.activeFinish(state.id, !failed));
                cleanable.clean();
                failure = outcome.failure();
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    /**
     * Settles without blocking the caller.
     *
     * @param workSucceeded true: commit the actual; false: the work failed (commit the usage
     *     reported so far, release when there is none)
     * @return the outcome, completed off the native threads; completed exceptionally with
     *     {@link dev.cycles.errors.MissingActualException} when the work succeeded without an
     *     actual (the reservation was released; {@link #outcome()} is set), as {@link #close()}
     */
    public CompletableFuture<Outcome> finishAsync(boolean workSucceeded) {
        exit();
        return Completions.submit(f -> Native.activeFinishAsync(state.id, workSucceeded, f)).thenApply(json -> {
            Outcome o = Outcome.parse(json);
            outcome = o;
            cleanable.clean();
            CyclesException failure = o.failure();
            if (failure != null) {
                throw failure;
            }
            return o;
        });
    }

    /** @return how the action ended, once closed */
    public Optional<Outcome> outcome() {
        return Optional.ofNullable(outcome);
    }

    /**
     * The guarded action running on this thread: inside guarded work or a reserve block, or
     * carried here by {@link #propagate(Runnable)} / {@link #propagating(Executor)}. A
     * reservation finished on another thread is skipped (its enclosing one, if any, is current).
     *
     * @return the innermost unfinished reservation of this thread, if any
     */
    public static Optional<Reservation> current() {
        Reservation top = CURRENT.get();
        Reservation r = live(top);
        if (r != top) {
            restore(r);
        }
        return Optional.ofNullable(r);
    }

    /**
     * Carries this thread's current reservation to the thread that runs {@code task}
     * (explicit propagation to executors).
     *
     * @param task the task
     * @return a task that runs with this thread's current reservation as its current one
     */
    public static Runnable propagate(Runnable task) {
        Reservation r = live(CURRENT.get());
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
        Reservation r = live(CURRENT.get());
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

    /**
     * An executor that runs every task with the current reservation of the thread that
     * submitted it ({@link #propagate(Runnable)} applied at {@code execute} time), and restores
     * the worker thread's own afterwards. For {@code CompletableFuture.supplyAsync(work, ex)},
     * {@code runAsync} and the {@code *Async(..., ex)} continuations. Only the current
     * reservation travels; what the tasks report on it settles as from any thread.
     *
     * @param executor where the tasks run
     * @return an executor propagating the current reservation into {@code executor}'s tasks
     */
    public static Executor propagating(Executor executor) {
        if (executor == null) {
            throw new IllegalArgumentException("executor must not be null");
        }
        return task -> executor.execute(propagate(task));
    }

    private static void restore(Reservation before) {
        if (before == null) {
            CURRENT.remove();
        } else {
            CURRENT.set(before);
        }
    }
}
