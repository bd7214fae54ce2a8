package dev.cycles.internal;

import dev.cycles.CyclesException;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongConsumer;

/**
 * Completes the futures of asynchronous native calls. Native work runs on core's runtime and
 * queues its result; one daemon thread, {@code cycles-completions}, takes results with
 * {@link Native#poll} and completes each future through an executor (the common pool), so
 * user continuations never run on a native thread or on this one, and no native thread is ever
 * attached to the JVM. Being a daemon, the thread never keeps the JVM alive.
 */
public final class Completions {
    private static final Map<Long, CompletableFuture<String>> PENDING = new ConcurrentHashMap<>();
    private static final AtomicLong NEXT = new AtomicLong(1);
    private static final Executor EXECUTOR = ForkJoinPool.commonPool();
    private static volatile Thread pump;

    private Completions() {}

    /** A new future and its id, to pass to a {@code *Async} native method. */
    public static long register(CompletableFuture<String> f) {
        start();
        long id = NEXT.getAndIncrement();
        PENDING.put(id, f);
        return id;
    }

    /** Forgets a registered future whose native call failed before it was queued ({@link #submit} does). */
    public static void forget(long id) {
        PENDING.remove(id);
    }

    /**
     * Starts one asynchronous native call: registers a future, gives its id to {@code call}
     * (which passes it to a {@code *Async} native method), and returns the future. When
     * {@code call} throws, nothing was queued: the future is forgotten and the exception comes
     * back as a failed future, so an async method reports every failure the same way.
     *
     * @param call starts the native call with the future's id
     * @return completed with the native call's result text, off the native threads
     */
    public static CompletableFuture<String> submit(LongConsumer call) {
        CompletableFuture<String> f = new CompletableFuture<>();
        long id = register(f);
        try {
            call.accept(id);
        } catch (RuntimeException e) {
            forget(id);
            return CompletableFuture.failedFuture(e);
        }
        return f;
    }

    private static void start() {
        if (pump != null) {
            return;
        }
        synchronized (Completions.class) {
            if (pump != null) {
                return;
            }
            Thread t = new Thread(Completions::run, "cycles-completions");
            t.setDaemon(true);
            t.start();
            pump = t;
        }
    }

    private static void run() {
        while (true) {
            String line;
            try {
                line = Native.poll(1000);
            } catch (RuntimeException e) {
                continue;
            }
            if (line == null) {
                continue;
            }
            int a = line.indexOf(' ');
            long id = Long.parseLong(line.substring(0, a));
            char kind = line.charAt(a + 1);
            String payload = line.substring(a + 3);
            CompletableFuture<String> f = PENDING.remove(id);
            if (f == null) {
                continue;
            }
            if (kind == 'v') {
                EXECUTOR.execute(() -> f.complete(payload));
            } else {
                RuntimeException ex = CyclesException.fromNative(payload);
                EXECUTOR.execute(() -> f.completeExceptionally(ex));
            }
        }
    }
}
