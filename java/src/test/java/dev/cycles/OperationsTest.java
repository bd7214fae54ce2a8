package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.errors.BudgetExceededException;
import dev.cycles.errors.ForbiddenException;
import dev.cycles.errors.IdempotencyMismatchException;
import dev.cycles.errors.InvalidArgumentException;
import dev.cycles.errors.InvalidRequestException;
import dev.cycles.errors.NotFoundException;
import dev.cycles.internal.Json;
import java.lang.reflect.Method;
import java.lang.reflect.ParameterizedType;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The typed decide, event, list and evidence operations over real HTTP against the local
 * server (both of its modes), blocking and async, with their typical errors.
 */
class OperationsTest {
    static Fixture fx;
    static CyclesClient client;
    static final Action ACTION = Action.of("llm.completion", "openai:gpt-4o-mini");
    static final Subject ACME = Subject.tenant("acme");
    static final long TOO_MUCH = Long.MAX_VALUE / 2;

    @BeforeAll
    static void start() {
        fx = new Fixture();
        client = fx.client();
    }

    @AfterAll
    static void stop() {
        client.close();
        fx.close();
    }

    /**
     * Every operation of conformance/vectors/operations.json (the shared per-operation test the
     * Python and Node suites run step by step) has its generated pair here: a blocking method
     * returning {@code Response<Result>} and its {@code ...Async} twin, taking the path
     * parameters and the request.
     */
    @Test
    @SuppressWarnings("unchecked")
    void everyVectorOperationHasItsTypedMethodPair() throws Exception {
        Path dir = Path.of(System.getProperty("cycles.vectors.dir", "../conformance/vectors"));
        Map<String, Object> doc = Json.object(Files.readString(dir.resolve("operations.json")));
        assertEquals("cycles-operation-vectors", doc.get("format"));
        Set<String> ops = new HashSet<>();
        for (Object o : (List<Object>) doc.get("steps")) {
            Map<String, Object> step = (Map<String, Object>) o;
            String op = (String) step.get("operation");
            if (!ops.add(op)) {
                continue;
            }
            int arity = ((List<Object>) step.getOrDefault("path", List.of())).size()
                    + (step.containsKey("args") ? 1 : 0);
            Method blocking = null;
            Method async = null;
            for (Method m : CyclesClient.class.getMethods()) {
                if (m.getParameterCount() != arity) {
                    continue;
                }
                if (m.getName().equals(op)) {
                    blocking = m;
                } else if (m.getName().equals(op + "Async")) {
                    async = m;
                }
            }
            assertNotNull(blocking, op);
            assertNotNull(async, op + "Async");
            assertEquals(Response.class, blocking.getReturnType(), op);
            Class<?> result = (Class<?>) ((ParameterizedType) blocking.getGenericReturnType())
                    .getActualTypeArguments()[0];
            assertTrue(result.isRecord(), op + ": " + result);
        }
    }

    @Test
    void decideAllowAndDenyWithEvidence() throws Exception {
        Response<DecisionResult> ok = client.decide(DecisionRequest.of("java-dec-1", ACME, ACTION, Amount.usdMicrocents(5)));
        assertEquals(200, ok.status());
        assertNotNull(ok.requestId());
        assertEquals(Decision.ALLOW, ok.body().decision());
        assertNull(ok.body().reasonCode());
        assertNotNull(ok.body().cyclesEvidence(), "evidence ref on decide");
        assertEquals(64, ok.body().cyclesEvidence().evidenceId().length());

        DecisionResult deny = client.decideAsync(new DecisionRequest("java-dec-2", ACME, ACTION, Amount.usdMicrocents(TOO_MUCH),
                "{\"why\":\"deny\"}")).get().body();
        assertEquals(Decision.DENY, deny.decision());
        assertEquals(ReasonCode.BUDGET_EXCEEDED, deny.reasonCode());
        assertNull(deny.caps());
        // decide persists nothing.
        assertFalse(fx.ledger().stream().anyMatch(e -> e.startsWith("reserve:" + TOO_MUCH)), fx.ledger().toString());
    }

    @Test
    void aRequestWithoutSubjectIsForTheClientsTenant() throws Exception {
        // The bridge's rule (a guard's too): a null subject is left out and becomes the tenant.
        Response<DecisionResult> d = client.decide(DecisionRequest.of("java-nosub-1", null, ACTION, Amount.usdMicrocents(5)));
        assertEquals(Decision.ALLOW, d.body().decision());
        assertTrue(d.body().affectedScopes().contains("tenant:" + fx.server.tenant()), d.body().affectedScopes().toString());
        try (CyclesClient noTenant = CyclesClient.builder().baseUrl(fx.server.url()).apiKey(fx.server.apiKey())
                .journalEnabled(false).build()) {
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> noTenant.createEvent(
                    EventRequest.of("java-nosub-2", null, ACTION, Amount.usdMicrocents(5))));
            assertEquals("subject is required (or configure a tenant on the client)", e.getMessage());
        }
    }

    @Test
    void decideForAnotherTenantIsForbidden() {
        ForbiddenException e = assertThrows(ForbiddenException.class,
                () -> client.decide(DecisionRequest.of("java-dec-3", Subject.tenant("globex"), ACTION, Amount.usdMicrocents(5))));
        assertEquals(403, e.httpStatus());
        CompletionException c = assertThrows(CompletionException.class, () -> client.decideAsync(
                DecisionRequest.of("java-dec-4", Subject.tenant("globex"), ACTION, Amount.usdMicrocents(5))).join());
        assertTrue(c.getCause() instanceof ForbiddenException, String.valueOf(c.getCause()));
    }

    @Test
    void createEventAppliesAndReplays() throws Exception {
        EventRequest req = EventRequest.of("java-evt-1", ACME.withAgent("events"), ACTION, Amount.usdMicrocents(250))
                .withMetricsJson("{\"tokens_input\":12,\"latency_ms\":40}");
        Response<EventResult> r = client.createEvent(req);
        assertEquals(201, r.status());
        assertEquals(EventStatus.APPLIED, r.body().status());
        assertNotNull(r.body().eventId());
        assertTrue(fx.ledger().contains("event:250"), fx.ledger().toString());
        // The same key and body replays the same event; nothing is applied twice.
        EventResult again = client.createEventAsync(req).get().body();
        assertEquals(r.body().eventId(), again.eventId());
        assertEquals(1, fx.ledger().stream().filter("event:250"::equals).count(), fx.ledger().toString());
    }

    @Test
    void eventErrors() {
        client.createEvent(EventRequest.of("java-evt-2", ACME, ACTION, Amount.usdMicrocents(3)));
        IdempotencyMismatchException m = assertThrows(IdempotencyMismatchException.class,
                () -> client.createEvent(EventRequest.of("java-evt-2", ACME, ACTION, Amount.usdMicrocents(4))));
        assertEquals(409, m.httpStatus());
        BudgetExceededException b = assertThrows(BudgetExceededException.class, () -> client.createEvent(
                EventRequest.of("java-evt-3", ACME, ACTION, Amount.usdMicrocents(TOO_MUCH)).withOveragePolicy(OveragePolicy.REJECT)));
        assertEquals("BUDGET_EXCEEDED", b.errorName());
    }

    /** Five reservations of one workflow of their own, so the listing sees exactly them. */
    static List<String> reserveFive(String workflow) {
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            ids.add(client.createReservation(CreateReservationRequest.of("java-" + workflow + "-" + i,
                    ACME.withWorkflow(workflow), ACTION, Amount.usdMicrocents(10 + i)).withTtlMs(60_000)).body().reservationId());
        }
        return ids;
    }

    @Test
    void listPagesThroughCursors() throws Exception {
        List<String> ids = reserveFive("list-pages");
        client.commitReservation(ids.get(0), CommitRequest.of("java-list-pages-c", Amount.usdMicrocents(7)));
        ReservationQuery q = ReservationQuery.of(ACME.withWorkflow("list-pages")).withLimit(2);
        List<Integer> sizes = new ArrayList<>();
        Set<String> seen = new HashSet<>();
        ReservationPage page = client.listReservations(q).body();
        while (true) {
            sizes.add(page.reservations().size());
            for (ReservationDetail d : page.reservations()) {
                assertTrue(seen.add(d.reservationId()), "row twice: " + d.reservationId());
                assertEquals("list-pages", d.subject().workflow());
                assertEquals(ACTION, d.action());
            }
            if (page.nextCursor() == null) {
                break;
            }
            page = client.listReservationsAsync(q.withCursor(page.nextCursor())).get().body();
        }
        assertEquals(List.of(2, 2, 1), sizes);
        assertEquals(Set.copyOf(ids), seen);
        assertNotEquals(Boolean.TRUE, page.hasMore());

        List<ReservationDetail> committed = client.listReservations(
                ReservationQuery.of(ACME.withWorkflow("list-pages")).withStatus("COMMITTED").withInclude(List.of("evidence"))).body()
                .reservations();
        assertEquals(1, committed.size());
        assertEquals(ids.get(0), committed.get(0).reservationId());
        assertEquals(7L, committed.get(0).committed().amount());
        assertNotNull(committed.get(0).evidence().commit(), "commit evidence projected");
    }

    @Test
    void listAllWalksEveryPageWithinTheBound() throws Exception {
        List<String> ids = reserveFive("list-all");
        ReservationQuery q = ReservationQuery.of(ACME.withWorkflow("list-all")).withLimit(2);
        Response<List<ReservationDetail>> all = client.listAllReservations(q, 10);
        assertEquals(200, all.status());
        assertEquals(Set.copyOf(ids), all.body().stream().map(ReservationDetail::reservationId).collect(
                java.util.stream.Collectors.toSet()));
        assertEquals(5, all.body().size());
        // The page bound stops the walk; the pages fetched are kept.
        assertEquals(4, client.listAllReservationsAsync(q, 2).get().body().size());
        int before = (int) fx.operations().stream().filter("listReservations"::equals).count();
        client.listAllReservations(q.withIdempotencyKey("java-list-all-3"), 10);
        assertEquals(before + 1, fx.operations().stream().filter("listReservations"::equals).count());
    }

    @Test
    void listErrors() {
        InvalidRequestException e = assertThrows(InvalidRequestException.class,
                () -> client.listReservations(ReservationQuery.tenant("acme").withLimit(500)));
        assertEquals(400, e.httpStatus());
        assertThrows(ForbiddenException.class, () -> client.listReservations(ReservationQuery.tenant("globex")));
    }

    @Test
    void evidenceOfADecisionAndTheSignerKeys() throws Exception {
        EvidenceRef ref = client.decide(DecisionRequest.of("java-evd-1", ACME, ACTION, Amount.usdMicrocents(9))).body().cyclesEvidence();
        Response<EvidenceEnvelope> r = client.getEvidence(ref.evidenceId());
        assertEquals(200, r.status());
        EvidenceEnvelope env = r.body();
        assertEquals(ref.evidenceId(), env.evidenceId());
        assertEquals("decide", env.artifactType());
        assertTrue(env.schemaVersion().startsWith("cycles-evidence/"), env.schemaVersion());
        assertTrue(env.issuedAtMs() > 0);
        assertFalse(env.signature().isEmpty());
        assertTrue(Json.object(env.payloadJson()).containsKey("decide"), env.payloadJson());
        assertEquals(env.evidenceId(), Json.object(env.json()).get("evidence_id"));
        assertEquals(env, client.getEvidenceAsync(ref.evidenceId()).get().body());

        EvidenceJwks jwks = client.getEvidenceJwks().body();
        assertFalse(jwks.keys().isEmpty());
        EvidenceJwk k = jwks.keys().get(0);
        assertEquals("OKP", k.kty());
        assertEquals("Ed25519", k.crv());
        assertFalse(k.kid().isEmpty());
        assertFalse(env.signerDid().isEmpty());
        assertEquals(jwks, client.getEvidenceJwksAsync().get().body());
    }

    @Test
    void reserveCommitAndReleaseResultsCarryTheirEvidence() {
        ReservationResult r = client.createReservation(CreateReservationRequest.of("java-evd-3", ACME, ACTION,
                Amount.usdMicrocents(20))).body();
        assertEquals("reserve", client.getEvidence(r.cyclesEvidence().evidenceId()).body().artifactType());
        CommitResult c = client.commitReservation(r.reservationId(), CommitRequest.of("java-evd-3-c", Amount.usdMicrocents(5)))
                .body();
        assertEquals("commit", client.getEvidence(c.cyclesEvidence().evidenceId()).body().artifactType());
        ReservationResult r2 = client.createReservation(CreateReservationRequest.of("java-evd-4", ACME, ACTION,
                Amount.usdMicrocents(20))).body();
        ReleaseResult rel = client.releaseReservation(r2.reservationId(), ReleaseRequest.of("java-evd-4-r")).body();
        assertEquals("release", client.getEvidence(rel.cyclesEvidence().evidenceId()).body().artifactType());
    }

    @Test
    void unknownEvidenceIsNotFound() {
        String missing = "0".repeat(64);
        NotFoundException e = assertThrows(NotFoundException.class, () -> client.getEvidence(missing));
        assertEquals(404, e.httpStatus());
        assertTrue(e.cyclesEvidence().isEmpty());
    }

    @Test
    void aDenialExceptionCarriesItsEvidence() {
        BudgetExceededException e = assertThrows(BudgetExceededException.class, () -> client.createReservation(
                CreateReservationRequest.of("java-evd-2", ACME, ACTION, Amount.usdMicrocents(TOO_MUCH))));
        EvidenceRef ref = e.cyclesEvidence().orElseThrow();
        EvidenceEnvelope env = client.getEvidence(ref.evidenceId()).body();
        assertEquals("error", env.artifactType());
        assertEquals(ref.evidenceId(), env.evidenceId());
    }
}
