package dev.cycles;

import dev.cycles.internal.Completions;
import dev.cycles.internal.Json;
import dev.cycles.internal.Native;
import java.lang.ref.Cleaner;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.ToLongFunction;

/**
 * A client of one Cycles server: every runtime operation (blocking and
 * {@link CompletableFuture} variants), the guarded lifecycle ({@link #guarded}, {@link #reserve}),
 * settlement replay ({@link #flush}, {@link #drain}) and {@link #close}. Thread-safe; one client
 * per server and identity is enough for a whole application.
 *
 * <pre>{@code
 * try (CyclesClient client = CyclesClient.builder().baseUrl(url).apiKey(key).tenant("acme").build()) {
 *     Guarded<String> g = client.guarded(GuardSpec.of(Action.of("llm.completion", "gpt-4o"), 500_000),
 *             reply -> 420_000L, () -> callModel());
 * }
 * }</pre>
 *
 * <p>Nothing of the client keeps the JVM alive: its threads are daemons and no native thread is
 * attached to the JVM. {@link #close()} drains pending settlements within the close timeout;
 * a JVM shutdown hook closes clients still open within {@code -Dcycles.shutdown.drain.ms}
 * (default 5000; 0 disables it); a client that is garbage collected unclosed is freed by a
 * {@link Cleaner} without a drain (the journal keeps its settlements for the next process).
 */
public final class CyclesClient implements AutoCloseable {
    /** One daemon thread frees the native handles of clients and reservations dropped unclosed. */
    static final Cleaner CLEANER = Cleaner.create();

    static {
        Native.ensureLoaded();
        ClientHandle.installShutdownDrain();
    }

    private final ClientHandle handle;
    private final String baseUrl;
    private final String tenant;
    private final long closeTimeoutMs;
    private final EventDispatcher events;

    private CyclesClient(long id, List<Consumer<CyclesEvent>> listeners) {
        this.events = new EventDispatcher(listeners);
        Map<String, Object> info = Json.object(Native.clientInfo(id));
        // The bridge's: the builder's closeTimeout, else its default (5 s in every language).
        this.closeTimeoutMs = Json.lng(info, "close_timeout_ms");
        this.baseUrl = Json.str(info, "base_url");
        this.tenant = Json.str(info, "tenant");
        this.handle = ClientHandle.open(this, id);
    }

    /** @return a builder of a client with explicit settings */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * A client of the environment: {@code CYCLES_BASE_URL}, {@code CYCLES_API_KEY} (required),
     * {@code CYCLES_TENANT}, {@code CYCLES_REQUEST_TIMEOUT_MS}, {@code CYCLES_CONNECT_TIMEOUT_MS},
     * {@code CYCLES_JOURNAL_DIR}, {@code CYCLES_JOURNAL_ENABLED}.
     *
     * @return the client
     * @throws dev.cycles.errors.ConfigException when the environment is incomplete
     */
    public static CyclesClient fromEnv() {
        return builder().fromEnv().build();
    }

    /** @return the server's base URL */
    public String baseUrl() {
        return baseUrl;
    }

    /** @return the default tenant, or null */
    public String tenant() {
        return tenant;
    }

    /** @return whether {@link #close} was called */
    public boolean isClosed() {
        return handle.isClosed();
    }

    /**
     * Adds an event listener (called on the client's event thread, in order; exceptions are
     * logged and ignored). Events are also logged to the {@code System.Logger} {@code dev.cycles}.
     *
     * @param listener the listener
     */
    public void addListener(Consumer<CyclesEvent> listener) {
        events.add(listener);
    }

    // ---- operations ----

    @SuppressWarnings("unchecked")
    private static <T> Response<T> response(String json, Function<Map<String, Object>, T> body) {
        Map<String, Object> r = Json.object(json);
        Object b = r.get("body");
        T v = b instanceof Map ? body.apply((Map<String, Object>) b) : null;
        return new Response<>(Json.lng(r, "status").intValue(), Json.str(r, "request_id"), Json.str(r, "trace_id"),
                Json.lng(r, "rtt_us"), v);
    }

    private static Response<String> rawResponse(String json) {
        Map<String, Object> r = Json.object(json);
        return new Response<>(Json.lng(r, "status").intValue(), Json.str(r, "request_id"), Json.str(r, "trace_id"),
                Json.lng(r, "rtt_us"), Json.write(r.get("body")));
    }

    private <T> Response<T> call(String op, String args, Function<Map<String, Object>, T> body) {
        return response(Native.clientCall(handle.id, op, args), body);
    }

    private <T> CompletableFuture<T> async(String op, String args, Function<String, T> decode) {
        return Completions.submit(f -> Native.clientCallAsync(handle.id, op, args, f)).thenApply(decode);
    }

    private static String withId(String key, String id, Map<String, Object> request) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put(key, id);
        m.put("request", request);
        return Json.write(m);
    }

    private static String idOnly(String key, String value) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put(key, value);
        return Json.write(m);
    }

    // BEGIN generated operations (`cargo run -p cycles-codegen`, from core's operation table): do not edit.
    /**
     * Asks whether a spend would be allowed, reserving nothing; a denial is a result ({@code DENY}
     * with its reason code), not an error ({@code decide}, {@code POST /v1/decide}).
     *
     * @param request the request
     * @return the response: its status, ids and round trip, and the {@link DecisionResult}
     */
    public Response<DecisionResult> decide(DecisionRequest request) {
        return call("decide", request.toJson(), DecisionResult::from);
    }

    /**
     * {@link #decide}, not blocking.
     *
     * @param request the request
     * @return the response, completed off the native threads
     */
    public CompletableFuture<Response<DecisionResult>> decideAsync(DecisionRequest request) {
        return async("decide", request.toJson(), j -> response(j, DecisionResult::from));
    }

    /**
     * Reserves an estimate for an action; a denial is a result, not an error
     * ({@code createReservation}, {@code POST /v1/reservations}).
     *
     * @param request the request
     * @return the response: its status, ids and round trip, and the {@link ReservationResult}
     */
    public Response<ReservationResult> createReservation(CreateReservationRequest request) {
        return call("create_reservation", request.toJson(), ReservationResult::from);
    }

    /**
     * {@link #createReservation}, not blocking.
     *
     * @param request the request
     * @return the response, completed off the native threads
     */
    public CompletableFuture<Response<ReservationResult>> createReservationAsync(CreateReservationRequest request) {
        return async("create_reservation", request.toJson(), j -> response(j, ReservationResult::from));
    }

    /**
     * Lists reservations, one page; the page's {@code next_cursor} asks for the next
     * ({@code listReservations}, {@code GET /v1/reservations}).
     *
     * @param query the query
     * @return the response: its status, ids and round trip, and the {@link ReservationPage}
     */
    public Response<ReservationPage> listReservations(ReservationQuery query) {
        return call("list_reservations", Json.write(query.toJson()), ReservationPage::from);
    }

    /**
     * {@link #listReservations}, not blocking.
     *
     * @param query the query
     * @return the response, completed off the native threads
     */
    public CompletableFuture<Response<ReservationPage>> listReservationsAsync(ReservationQuery query) {
        return async("list_reservations", Json.write(query.toJson()), j -> response(j, ReservationPage::from));
    }

    /**
     * Reads one reservation ({@code getReservation},
     * {@code GET /v1/reservations/{reservation_id}}).
     *
     * @param reservationId the reservation's id
     * @return the response: its status, ids and round trip, and the {@link ReservationDetail}
     */
    public Response<ReservationDetail> getReservation(String reservationId) {
        return call("get_reservation", idOnly("reservation_id", reservationId), ReservationDetail::from);
    }

    /**
     * {@link #getReservation}, not blocking.
     *
     * @param reservationId the reservation's id
     * @return the response, completed off the native threads
     */
    public CompletableFuture<Response<ReservationDetail>> getReservationAsync(String reservationId) {
        return async("get_reservation", idOnly("reservation_id", reservationId), j -> response(j, ReservationDetail::from));
    }

    /**
     * Commits the actual amount a reservation's work cost ({@code commitReservation},
     * {@code POST /v1/reservations/{reservation_id}/commit}).
     *
     * @param reservationId the reservation's id
     * @param request the request
     * @return the response: its status, ids and round trip, and the {@link CommitResult}
     */
    public Response<CommitResult> commitReservation(String reservationId, CommitRequest request) {
        return call("commit_reservation", withId("reservation_id", reservationId, request.toJson()), CommitResult::from);
    }

    /**
     * {@link #commitReservation}, not blocking.
     *
     * @param reservationId the reservation's id
     * @param request the request
     * @return the response, completed off the native threads
     */
    public CompletableFuture<Response<CommitResult>> commitReservationAsync(String reservationId, CommitRequest request) {
        return async("commit_reservation", withId("reservation_id", reservationId, request.toJson()), j -> response(j, CommitResult::from));
    }

    /**
     * Releases a reservation, returning its amount ({@code releaseReservation},
     * {@code POST /v1/reservations/{reservation_id}/release}).
     *
     * @param reservationId the reservation's id
     * @param request the request
     * @return the response: its status, ids and round trip, and the {@link ReleaseResult}
     */
    public Response<ReleaseResult> releaseReservation(String reservationId, ReleaseRequest request) {
        return call("release_reservation", withId("reservation_id", reservationId, request.toJson()), ReleaseResult::from);
    }

    /**
     * {@link #releaseReservation}, not blocking.
     *
     * @param reservationId the reservation's id
     * @param request the request
     * @return the response, completed off the native threads
     */
    public CompletableFuture<Response<ReleaseResult>> releaseReservationAsync(String reservationId, ReleaseRequest request) {
        return async("release_reservation", withId("reservation_id", reservationId, request.toJson()), j -> response(j, ReleaseResult::from));
    }

    /**
     * Extends a reservation's lease once ({@code extendReservation},
     * {@code POST /v1/reservations/{reservation_id}/extend}).
     *
     * @param reservationId the reservation's id
     * @param request the request
     * @return the response: its status, ids and round trip, and the {@link ExtendResult}
     */
    public Response<ExtendResult> extendReservation(String reservationId, ExtendRequest request) {
        return call("extend_reservation", withId("reservation_id", reservationId, request.toJson()), ExtendResult::from);
    }

    /**
     * {@link #extendReservation}, not blocking.
     *
     * @param reservationId the reservation's id
     * @param request the request
     * @return the response, completed off the native threads
     */
    public CompletableFuture<Response<ExtendResult>> extendReservationAsync(String reservationId, ExtendRequest request) {
        return async("extend_reservation", withId("reservation_id", reservationId, request.toJson()), j -> response(j, ExtendResult::from));
    }

    /**
     * Records spend without a reservation (post-only accounting) ({@code createEvent},
     * {@code POST /v1/events}).
     *
     * @param request the request
     * @return the response: its status, ids and round trip, and the {@link EventResult}
     */
    public Response<EventResult> createEvent(EventRequest request) {
        return call("create_event", request.toJson(), EventResult::from);
    }

    /**
     * {@link #createEvent}, not blocking.
     *
     * @param request the request
     * @return the response, completed off the native threads
     */
    public CompletableFuture<Response<EventResult>> createEventAsync(EventRequest request) {
        return async("create_event", request.toJson(), j -> response(j, EventResult::from));
    }

    /**
     * Reads the balances of the scopes a query matches, one page (at least one subject filter)
     * ({@code getBalances}, {@code GET /v1/balances}).
     *
     * @param query the query
     * @return the response: its status, ids and round trip, and the {@link Balances}
     */
    public Response<Balances> getBalances(BalanceQuery query) {
        return call("get_balances", Json.write(query.toJson()), Balances::from);
    }

    /**
     * {@link #getBalances}, not blocking.
     *
     * @param query the query
     * @return the response, completed off the native threads
     */
    public CompletableFuture<Response<Balances>> getBalancesAsync(BalanceQuery query) {
        return async("get_balances", Json.write(query.toJson()), j -> response(j, Balances::from));
    }

    /**
     * Fetches one signed evidence envelope (public: sent without the API key; no signature check
     * here) ({@code getEvidence}, {@code GET /v1/evidence/{evidence_id}}).
     *
     * @param evidenceId the evidence's id
     * @return the response: its status, ids and round trip, and the {@link EvidenceEnvelope}
     */
    public Response<EvidenceEnvelope> getEvidence(String evidenceId) {
        return call("get_evidence", idOnly("evidence_id", evidenceId), EvidenceEnvelope::from);
    }

    /**
     * {@link #getEvidence}, not blocking.
     *
     * @param evidenceId the evidence's id
     * @return the response, completed off the native threads
     */
    public CompletableFuture<Response<EvidenceEnvelope>> getEvidenceAsync(String evidenceId) {
        return async("get_evidence", idOnly("evidence_id", evidenceId), j -> response(j, EvidenceEnvelope::from));
    }

    /**
     * Fetches the server's evidence signing keys (public) ({@code getEvidenceJwks},
     * {@code GET /v1/.well-known/cycles-jwks.json}).
     *
     * @return the response: its status, ids and round trip, and the {@link EvidenceJwks}
     */
    public Response<EvidenceJwks> getEvidenceJwks() {
        return call("get_evidence_jwks", "{}", EvidenceJwks::from);
    }

    /**
     * {@link #getEvidenceJwks}, not blocking.
     *
     * @return the response, completed off the native threads
     */
    public CompletableFuture<Response<EvidenceJwks>> getEvidenceJwksAsync() {
        return async("get_evidence_jwks", "{}", j -> response(j, EvidenceJwks::from));
    }

    // END generated operations

    private static String allArgs(ReservationQuery query, int maxPages) {
        Map<String, Object> m = query.toJson();
        m.put("max_pages", maxPages);
        return Json.write(m);
    }

    @SuppressWarnings("unchecked")
    private static Response<List<ReservationDetail>> rows(String json) {
        Map<String, Object> r = Json.object(json);
        Object b = r.get("body");
        return new Response<>(Json.lng(r, "status").intValue(), Json.str(r, "request_id"), Json.str(r, "trace_id"),
                Json.lng(r, "rtt_us"), ReservationDetail.list(b instanceof List ? (List<Object>) b : null));
    }

    /**
     * Lists every reservation of the query, following the cursors from the query's own
     * ({@code listReservations} page by page, core's stop rules), at most {@code maxPages}
     * pages (a guard against a listing that never ends; the last page fetched is included).
     *
     * @param query the query (its {@code limit} is the page size)
     * @param maxPages the most pages to fetch (at least 1)
     * @return every row, in the server's order; the status and ids of the last page,
     *     {@code rttMicros} 0
     */
    public Response<List<ReservationDetail>> listAllReservations(ReservationQuery query, int maxPages) {
        return rows(Native.clientCall(handle.id, "list_reservations_all", allArgs(query, maxPages)));
    }

    /**
     * {@link #listAllReservations}, not blocking.
     *
     * @param query the query
     * @param maxPages the most pages to fetch
     * @return the response
     */
    public CompletableFuture<Response<List<ReservationDetail>>> listAllReservationsAsync(ReservationQuery query, int maxPages) {
        return async("list_reservations_all", allArgs(query, maxPages), CyclesClient::rows);
    }

    /**
     * Any operation of the bridge's table by name, arguments and body as JSON: the escape
     * hatch (e.g. for a request member the typed classes do not carry yet; see
     * docs/bindings.md, "Operations"). Errors are the same typed exceptions.
     *
     * @param operation the operation, e.g. {@code decide}
     * @param argsJson its arguments as a JSON object
     * @return the response, its body as JSON text
     */
    public Response<String> call(String operation, String argsJson) {
        return rawResponse(Native.clientCall(handle.id, operation, argsJson));
    }

    /**
     * {@link #call}, not blocking.
     *
     * @param operation the operation
     * @param argsJson its arguments as a JSON object
     * @return the response
     */
    public CompletableFuture<Response<String>> callAsync(String operation, String argsJson) {
        return async(operation, argsJson, CyclesClient::rawResponse);
    }

    /**
     * Decodes one captured HTTP response exactly as the client would decode it, without a
     * network (core's response path): a schema-valid success is returned, anything else
     * throws the {@link CyclesException} the operation would have thrown. For checking
     * captures of a real server (the SDK's own tests run the reference-server corpus through
     * it).
     *
     * @param operation the spec's operationId ({@code "getReservation"}); null when the
     *     response matched no operation (only valid for a non-2xx status)
     * @param status the HTTP status
     * @param headers the response headers (null: none)
     * @param body the body bytes (null: empty)
     * @return the response, {@code rttMicros} 0, its body core's JSON
     */
    public static Response<String> decodeCaptured(String operation, int status, Map<String, String> headers, byte[] body) {
        String h = headers == null ? null : Json.write(new java.util.LinkedHashMap<String, Object>(headers));
        return rawResponse(Native.decodeCaptured(operation, status, h, body));
    }

    // ---- guarded lifecycle ----

    private String spec(GuardSpec spec) {
        events.start(handle.id);
        return spec.toJson();
    }

    /**
     * Reserves and starts the heartbeat (blocking); settle with {@link Reservation#close()}.
     *
     * @param spec what to reserve
     * @return the running guarded action
     */
    public Reservation reserve(GuardSpec spec) {
        Reservation r = new Reservation(Native.guardBegin(handle.id, spec(spec)));
        r.enter();
        return r;
    }

    /**
     * {@link #reserve}, not blocking (the reservation is not the current one of any thread).
     *
     * @param spec what to reserve
     * @return the running guarded action
     */
    public CompletableFuture<Reservation> reserveAsync(GuardSpec spec) {
        // spec(...) inside the call: what it throws (a closed client) fails the future, as elsewhere.
        return Completions.submit(f -> Native.guardBeginAsync(handle.id, spec(spec), f))
                .thenApply(id -> new Reservation(Long.parseLong(id)));
    }

    /**
     * Work guarded by a reservation.
     *
     * @param <T> the result type
     * @param <E> what the work may throw
     */
    @FunctionalInterface
    public interface Work<T, E extends Exception> {
        /**
         * @return the result
         * @throws E when the work fails
         */
        T call() throws E;
    }

    /**
     * Work that reports its own usage on the reservation.
     *
     * @param <T> the result type
     * @param <E> what the work may throw
     */
    @FunctionalInterface
    public interface ReservationWork<T, E extends Exception> {
        /**
         * @param reservation the running action (setActual / addUsage)
         * @return the result
         * @throws E when the work fails
         */
        T call(Reservation reservation) throws E;
    }

    /**
     * Runs {@code work} guarded: reserve, heartbeat while it runs, then commit {@code actual};
     * if the work throws, release (nothing was reported: the actual is set from the result)
     * and rethrow its exception unchanged.
     *
     * @param spec what to reserve
     * @param actual what the work costs
     * @param work the work
     * @param <T> the result type
     * @param <E> what the work may throw
     * @return the result and the outcome
     * @throws E what the work threw
     */
    public <T, E extends Exception> Guarded<T> guarded(GuardSpec spec, long actual, Work<T, E> work) throws E {
        return guarded(spec, r -> {
            T v = work.call();
            r.setActual(actual);
            return v;
        });
    }

    /**
     * Runs {@code work} guarded, the actual a function of its result.
     *
     * @param spec what to reserve
     * @param actual what the result cost
     * @param work the work
     * @param <T> the result type
     * @param <E> what the work may throw
     * @return the result and the outcome
     * @throws E what the work threw
     */
    public <T, E extends Exception> Guarded<T> guarded(GuardSpec spec, ToLongFunction<? super T> actual, Work<T, E> work)
            throws E {
        return guarded(spec, r -> {
            T v = work.call();
            r.setActual(actual.applyAsLong(v));
            return v;
        });
    }

    /**
     * Runs {@code work} guarded; it reports usage on the reservation it is given. If it throws,
     * the usage it reported before is committed (it was spent; journaled first), or the
     * reservation released when it reported none, and its exception is rethrown unchanged.
     *
     * @param spec what to reserve
     * @param work the work
     * @param <T> the result type
     * @param <E> what the work may throw
     * @return the result and the outcome
     * @throws E what the work threw
     */
    public <T, E extends Exception> Guarded<T> guarded(GuardSpec spec, ReservationWork<T, E> work) throws E {
        Reservation r = reserve(spec);
        T value;
        try {
            value = work.call(r);
        } catch (Throwable t) {
            r.fail();
            r.close();
            throw t;
        }
        r.close();
        return new Guarded<>(value, r.outcome().orElseThrow());
    }

    /**
     * Asynchronous guarded work: reserve, run the stage {@code work} returns, then settle
     * (commit what it reported on the reservation; when the stage failed, commit what it had
     * reported before failing, or release when that is nothing; the result then carries the
     * stage's exception).
     *
     * @param spec what to reserve
     * @param work starts the work
     * @param <T> the result type
     * @return the result and the outcome
     */
    public <T> CompletableFuture<Guarded<T>> guardedAsync(GuardSpec spec,
            Function<Reservation, ? extends CompletionStage<T>> work) {
        return reserveAsync(spec).thenCompose(r -> {
            CompletionStage<T> stage;
            try {
                stage = work.apply(r);
            } catch (RuntimeException e) {
                return r.finishAsync(false).thenCompose(o -> CompletableFuture.<Guarded<T>>failedFuture(e));
            }
            return stage.handle((v, ex) -> ex == null
                    ? r.finishAsync(true).thenApply(o -> new Guarded<>(v, o))
                    : r.finishAsync(false).thenCompose(o -> CompletableFuture.<Guarded<T>>failedFuture(ex)))
                    .thenCompose(Function.identity());
        });
    }

    /**
     * Replays every pending settlement of this client's server once, now.
     *
     * @return what was replayed
     */
    public DrainReport flush() {
        events.start(handle.id);
        return DrainReport.parse(Native.clientFlush(handle.id));
    }

    /**
     * Replays pending settlements until none is left or {@code timeout} passed.
     *
     * @param timeout the bound
     * @return what was replayed and what remains
     */
    public DrainReport drain(Duration timeout) {
        events.start(handle.id);
        return DrainReport.parse(Native.clientDrain(handle.id, timeout.toMillis()));
    }

    /** Closes within the builder's close timeout (default 5 s); see {@link #close(Duration)}. */
    @Override
    public void close() {
        close(Duration.ofMillis(closeTimeoutMs));
    }

    /**
     * Closes the client: stops the background replay, settles pending settlements for at most
     * {@code timeout}, delivers the last events; later calls throw
     * {@link ClientClosedException}. Idempotent (a second call returns an empty report); what
     * is still pending stays journaled for the next process.
     *
     * @param timeout the drain bound (zero: no drain)
     * @return what the drain did
     */
    public DrainReport close(Duration timeout) {
        return DrainReport.parse(handle.close(timeout.toMillis()));
    }

    /** Settings of a new client. */
    public static final class Builder {
        private final Map<String, Object> options = new LinkedHashMap<>();
        private boolean fromEnv;
        private final List<Consumer<CyclesEvent>> listeners = new CopyOnWriteArrayList<>();

        private Builder() {}

        /** @param url the server's base URL @return this */
        public Builder baseUrl(String url) {
            options.put("base_url", url);
            return this;
        }

        /** @param key the API key (sent as {@code X-Cycles-API-Key}, redacted everywhere) @return this */
        public Builder apiKey(String key) {
            options.put("api_key", key);
            return this;
        }

        /** @param tenant the default tenant of guarded actions @return this */
        public Builder tenant(String tenant) {
            options.put("tenant", tenant);
            return this;
        }

        /**
         * @param unit the unit of a guarded action's estimate when its spec names none
         *     ({@code USD_MICROCENTS}, {@code TOKENS}, {@code CREDITS}, {@code RISK_POINTS};
         *     default: {@code CYCLES_UNIT} with {@link #fromEnv}, else {@code USD_MICROCENTS});
         *     an unknown unit fails {@link #build()} with a {@code CONFIG} error
         * @return this
         */
        public Builder defaultUnit(String unit) {
            options.put("default_unit", unit);
            return this;
        }

        /** @param t the per-attempt request timeout @return this */
        public Builder requestTimeout(Duration t) {
            options.put("request_timeout_ms", t.toMillis());
            return this;
        }

        /** @param t the connect timeout @return this */
        public Builder connectTimeout(Duration t) {
            options.put("connect_timeout_ms", t.toMillis());
            return this;
        }

        /** @param dir the settlement journal's directory @return this */
        public Builder journalDir(Path dir) {
            options.put("journal_dir", dir.toString());
            return this;
        }

        /**
         * Keeps the settlement journal in Redis instead of {@link #journalDir}
         * ({@code redis://host:6379/0}, {@code CYCLES_JOURNAL_URL}), so another machine's client
         * drains what this one could not settle (docs/journal.md, "Stores"). A malformed URL is a
         * {@link dev.cycles.errors.ConfigException} at {@link #build}; a Redis that cannot be
         * reached, or does not make writes as durable as the URL asks, is one when the
         * settlement engine starts (the first guarded action, flush or drain).
         *
         * @param url the Redis journal's URL
         * @return this
         */
        public Builder journalUrl(String url) {
            options.put("journal_url", url);
            return this;
        }

        /** @param on whether settlements are journaled before they are sent (default true) @return this */
        public Builder journalEnabled(boolean on) {
            options.put("journal_enabled", on);
            return this;
        }

        /** @param n bound on concurrent requests @return this */
        public Builder maxConcurrentRequests(int n) {
            options.put("max_concurrent_requests", n);
            return this;
        }

        /**
         * @param n bound on one response body in bytes (default 1 MiB, {@code CYCLES_MAX_RESPONSE_BYTES}):
         *     a longer body is not read further and the call fails as a response that is not the
         *     operation's (ambiguous for a write, so a settlement stays journaled and is retried)
         * @return this
         */
        public Builder maxResponseBytes(int n) {
            options.put("max_response_bytes", n);
            return this;
        }

        /** @param n settle attempts before a settlement is left pending (at least 1) @return this */
        public Builder settleMaxAttempts(int n) {
            options.put("settle_max_attempts", n);
            return this;
        }

        /** @param d how often the background replay runs @return this */
        public Builder replayInterval(Duration d) {
            options.put("replay_interval_ms", d.toMillis());
            return this;
        }

        /** @param d the drain bound of {@link CyclesClient#close()} (default 5 s) @return this */
        public Builder closeTimeout(Duration d) {
            options.put("close_timeout_ms", d.toMillis());
            return this;
        }

        /** @param listener an event listener (see {@link CyclesClient#addListener}) @return this */
        public Builder onEvent(Consumer<CyclesEvent> listener) {
            listeners.add(listener);
            return this;
        }

        /** Reads server, key, tenant and timeouts from {@code CYCLES_*} (journal settings here win). @return this */
        public Builder fromEnv() {
            fromEnv = true;
            return this;
        }

        /** @return the client (no request is sent) */
        public CyclesClient build() {
            long id = Native.clientNew(Json.write(options), fromEnv);
            return new CyclesClient(id, listeners);
        }
    }
}
