package dev.cycles.spring;

import dev.cycles.CyclesClient;
import dev.cycles.DrainReport;
import java.time.Duration;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.springframework.context.SmartLifecycle;

/**
 * Closes the {@link CyclesClient} bean with a graceful drain in Spring's shutdown: a late
 * lifecycle phase (after the web server stopped taking and finished its requests, so the
 * settlements of in-flight {@code @Cycles} methods are already journaled), bounded by
 * {@code cycles.close-timeout} (default 5 s; keep it under
 * {@code spring.lifecycle.timeout-per-shutdown-phase}). What could not be settled stays in the
 * journal for the next process and is logged: each pending reservation id at WARN.
 */
public class CyclesShutdown implements SmartLifecycle {
    /** Stops after the web server's graceful shutdown and its stop (phases just below the default). */
    public static final int PHASE = SmartLifecycle.DEFAULT_PHASE - 4096;
    private static final Log LOG = LogFactory.getLog(CyclesShutdown.class);

    private final CyclesClient client;
    private final Duration timeout;
    private volatile boolean running;
    private volatile DrainReport report;

    public CyclesShutdown(CyclesClient client, Duration timeout) {
        this.client = client;
        this.timeout = timeout;
    }

    @Override
    public void start() {
        running = true;
    }

    @Override
    public void stop() {
        running = false;
        if (client.isClosed()) {
            return;
        }
        DrainReport r = client.close(timeout);
        report = r;
        if (r.remaining().isEmpty()) {
            LOG.info("Cycles client closed: " + r.outcomes().size() + " pending settlement(s) drained, none left");
        } else {
            LOG.warn("Cycles client closed with " + r.remaining().size() + " settlement(s) left in the journal"
                    + " (replayed by the next process): "
                    + r.remaining().stream().map(DrainReport.Pending::reservationId).toList());
        }
        if (!r.quarantined().isEmpty()) {
            LOG.warn("Cycles journal: quarantined " + r.quarantined());
        }
    }

    @Override
    public boolean isRunning() {
        return running;
    }

    @Override
    public int getPhase() {
        return PHASE;
    }

    /** @return the drain bound ({@code cycles.close-timeout}, or the official {@code cycles.retry.flush-timeout}) */
    public Duration timeout() {
        return timeout;
    }

    /** @return the report of the shutdown drain, once the context stopped (null before) */
    public DrainReport lastReport() {
        return report;
    }
}
