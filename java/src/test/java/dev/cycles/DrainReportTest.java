package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The drain report of flush, drain and close, every field typed, against the local server. */
class DrainReportTest {
    static final Action ACTION = Action.of("llm.completion", "openai:gpt-4o-mini");
    Fixture fx;

    @BeforeEach
    void start() {
        fx = new Fixture();
    }

    @AfterEach
    void stop() {
        fx.close();
    }

    private CyclesClient client() {
        // One attempt and no background replay: what is pending stays so until a drain.
        return fx.builder().settleMaxAttempts(1).replayInterval(Duration.ofHours(1)).build();
    }

    /**
     * Three reports: close(Duration) lists the rate-limited record it leaves, with its floor; a
     * later client's drain waits for the floor and reports the commit; its flush reports the
     * corrupt file it set aside. (A client's first replay pass starts with its first drain and
     * skips the record until its floor, so only the drain can settle it; that pass is over, and
     * the next one an hour away, when the corrupt file is written, so only the flush sees it.)
     */
    @Test
    void closeDrainAndFlushReportWhatTheyDid() throws Exception {
        fx.server.addFault("{\"operation\":\"commitReservation\",\"times\":0,\"fault\":{\"kind\":\"rate_limited\",\"retry_after\":\"2\"}}");
        Instant before = Instant.now();
        String rid;
        DrainReport closed;
        DrainReport again;
        try (CyclesClient client = client()) {
            Outcome o = client.guarded(GuardSpec.of(ACTION, 1_000), 640, () -> "x").outcome();
            rid = o.reservationId();
            assertEquals(Settlement.Status.PENDING, o.settlement().status(), o.json());
            closed = client.close(Duration.ZERO);
            again = client.close(Duration.ZERO);
        }
        Instant after = Instant.now();
        assertEquals(List.of(), closed.outcomes(), closed.json());
        assertEquals(List.of(), closed.quarantined(), closed.json());
        assertEquals(1, closed.remaining().size(), closed.json());
        DrainReport.Pending p = closed.remaining().get(0);
        assertEquals(rid, p.reservationId());
        assertEquals(DrainReport.Mode.COMMIT, p.mode());
        assertEquals(Journal.fileName(rid), p.file());
        Instant recorded = p.recordedAt().orElseThrow();
        assertFalse(recorded.isBefore(before.minusSeconds(1)) || recorded.isAfter(after), recorded.toString());
        // Retry-After: 2 set the floor about two seconds after the attempt.
        Instant floor = p.notBefore().orElseThrow();
        assertTrue(floor.isAfter(recorded) && floor.isBefore(after.plusSeconds(5)), floor + " after " + recorded);
        // A second close drains nothing and says so: the empty report.
        assertEquals(List.of(), again.remaining());
        assertNull(again.json());

        fx.server.clearFaults();
        try (CyclesClient client = client()) {
            DrainReport d = client.drain(Duration.ofSeconds(10));
            assertEquals(1, d.outcomes().size(), d.json());
            DrainReport.Replayed r = d.outcomes().get(0);
            assertEquals(rid, r.reservationId());
            assertEquals(Settlement.Status.COMMITTED, r.settlement().status());
            assertEquals(Amount.usdMicrocents(640), r.settlement().charged());
            assertEquals(List.of(), d.remaining());
            assertEquals(List.of(), d.quarantined());
            assertFalse(Instant.now().isBefore(floor), "settled before its floor");

            Path part = fx.journal.resolve(Journal.fingerprint(fx.server.url(), fx.server.apiKey(), fx.server.tenant()));
            String name = Journal.fileName("rsv-corrupt");
            Files.write(part.resolve(name), "{\"version\": 1, \"reserv".getBytes(StandardCharsets.UTF_8));
            DrainReport f = client.flush();
            assertEquals(List.of(), f.outcomes(), f.json());
            assertEquals(List.of(), f.remaining(), f.json());
            assertEquals(1, f.quarantined().size(), f.json());
            String renamed = Path.of(f.quarantined().get(0)).getFileName().toString();
            assertTrue(renamed.startsWith(name + ".corrupt-"), renamed);
            assertTrue(Files.exists(part.resolve(renamed)), renamed);
            assertFalse(Files.exists(part.resolve(name)));
            assertNotNull(f.json());
        }
        assertEquals(List.of("reserve:1000", "commit:640"), fx.ledger());
    }
}
