package dev.cycles;

import dev.cycles.internal.Native;
import java.lang.ref.Cleaner;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The native client behind one {@link CyclesClient}, open until it is closed exactly once:
 * by {@link CyclesClient#close(java.time.Duration)}, by the JVM shutdown hook
 * ({@link #installShutdownDrain}) or, without a drain, by the {@link Cleaner} when the client
 * is collected unclosed (the journal keeps its settlements for the next process). Whichever
 * comes first closes and frees the native client; the others find it closed and do nothing.
 */
final class ClientHandle implements Runnable {
    /** The clients not yet closed, for the shutdown hook to drain. */
    private static final Set<ClientHandle> OPEN = ConcurrentHashMap.newKeySet();

    /** The native client's registry id. */
    final long id;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Cleaner.Cleanable cleanable;

    private ClientHandle(Object owner, long id) {
        this.id = id;
        OPEN.add(this);
        this.cleanable = CyclesClient.CLEANER.register(owner, this);
    }

    /**
     * Takes ownership of a native client: tracked for the shutdown hook, and freed by the
     * Cleaner once {@code owner} is unreachable.
     *
     * @param owner the client whose collection frees the native one (never referenced here,
     *     so it can be collected)
     * @param id the native client's registry id
     * @return the open handle
     */
    static ClientHandle open(Object owner, long id) {
        return new ClientHandle(owner, id);
    }

    /** @return whether the client was closed (by any of the three ways) */
    boolean isClosed() {
        return closed.get();
    }

    /**
     * Closes the native client once: drains its pending settlements for at most
     * {@code timeoutMs}, then frees it, and unregisters it from the Cleaner.
     *
     * @param timeoutMs the drain bound (0: no drain)
     * @return the bridge's drain report as JSON, or null when it was already closed
     */
    String close(long timeoutMs) {
        String report = closeOnce(timeoutMs);
        cleanable.clean(); // runs closeOnce(0) at most, which finds it closed
        return report;
    }

    private String closeOnce(long timeoutMs) {
        if (!closed.compareAndSet(false, true)) {
            return null;
        }
        OPEN.remove(this);
        try {
            return Native.clientClose(id, timeoutMs);
        } finally {
            Native.free(id);
        }
    }

    /** The Cleaner's action: the owner was collected unclosed, so no drain. */
    @Override
    public void run() {
        closeOnce(0);
    }

    /**
     * Registers the JVM shutdown hook that closes every client still open within
     * {@code -Dcycles.shutdown.drain.ms} in all (default 5000; 0 or less: no hook).
     */
    static void installShutdownDrain() {
        long bound = Long.getLong("cycles.shutdown.drain.ms", 5000L);
        if (bound > 0) {
            Runtime.getRuntime().addShutdownHook(new Thread(() -> closeAll(bound), "cycles-shutdown-drain"));
        }
    }

    private static void closeAll(long boundMs) {
        long deadline = System.nanoTime() + boundMs * 1_000_000L;
        for (ClientHandle h : OPEN) {
            long left = Math.max(0, (deadline - System.nanoTime()) / 1_000_000L);
            try {
                h.closeOnce(left);
            } catch (RuntimeException e) {
                // The journal keeps what could not be settled; exit goes on.
            }
        }
    }
}
