package dev.cycles;

import dev.cycles.internal.Json;
import dev.cycles.internal.Native;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;

/**
 * Delivers one client's events: its listeners and the daemon thread {@code cycles-events} that
 * takes core's event batches and hands each event, in order, to the {@code dev.cycles}
 * {@link System.Logger} and to every listener. Started by the first guarded call, flush or
 * drain, which is when core creates the client's lifecycle and its event stream. The thread is
 * a daemon, so it never keeps the JVM alive, and it ends with the stream, after the client
 * closed.
 */
final class EventDispatcher {
    private static final System.Logger LOG = System.getLogger("dev.cycles");

    private final List<Consumer<CyclesEvent>> listeners = new CopyOnWriteArrayList<>();
    private volatile boolean started;
    /** The lifecycle handle once started (0 before). */
    private volatile long life;
    /** The floor last given to core (see {@link #floor}); -2: none yet. */
    private int sentFloor = -2;

    /** @param listeners the builder's listeners, first in delivery order */
    EventDispatcher(List<Consumer<CyclesEvent>> listeners) {
        this.listeners.addAll(listeners);
    }

    /**
     * Adds a listener; with the first one core starts building every event.
     *
     * @param listener the listener
     */
    void add(Consumer<CyclesEvent> listener) {
        listeners.add(listener);
        refreshFloor();
    }

    /**
     * Opens the client's event stream and starts the event thread, once.
     *
     * @param clientId the native client
     */
    void start(long clientId) {
        if (!started) { // every guarded call passes here: no lock once started
            startOnce(clientId);
        }
    }

    private synchronized void startOnce(long clientId) {
        if (started) {
            return;
        }
        long handle = Native.clientLifecycle(clientId);
        life = handle;
        refreshFloor();
        Thread t = new Thread(() -> run(handle), "cycles-events");
        t.setDaemon(true);
        t.start();
        started = true;
    }

    /**
     * The least event level anyone looks at, as core's rank (0 debug .. 3 error), or -1 for
     * none: with a listener every event, else what the {@code dev.cycles} logger would print.
     * Core builds no event below it.
     */
    private int floor() {
        if (!listeners.isEmpty() || LOG.isLoggable(System.Logger.Level.DEBUG)) {
            return 0;
        }
        if (LOG.isLoggable(System.Logger.Level.INFO)) {
            return 1;
        }
        if (LOG.isLoggable(System.Logger.Level.WARNING)) {
            return 2;
        }
        return LOG.isLoggable(System.Logger.Level.ERROR) ? 3 : -1;
    }

    /**
     * Tells core the current floor when it changed. Called on start, when a listener is
     * added, and before every wait of the event thread, so a logger level changed at run
     * time takes effect within one wait (500 ms).
     */
    private synchronized void refreshFloor() {
        long handle = life;
        if (handle == 0) {
            return;
        }
        int floor = floor();
        if (floor != sentFloor) {
            Native.lifeSetEventFloor(handle, floor);
            sentFloor = floor;
        }
    }

    @SuppressWarnings("unchecked")
    private void run(long life) {
        try {
            while (true) {
                refreshFloor();
                String batch = Native.lifeNextEvents(life, 500);
                if (batch == null) {
                    return;
                }
                for (Object o : (List<Object>) Json.parse(batch)) {
                    deliver(CyclesEvent.from((Map<String, Object>) o));
                }
            }
        } finally {
            Native.free(life);
        }
    }

    private void deliver(CyclesEvent e) {
        LOG.log(e.loggerLevel(), "{0}: {1}", e.kind(), e.message());
        for (Consumer<CyclesEvent> l : listeners) {
            try {
                l.accept(e);
            } catch (RuntimeException ex) {
                LOG.log(System.Logger.Level.WARNING, "cycles event listener failed", ex);
            }
        }
    }
}
