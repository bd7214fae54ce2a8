package dev.cycles.kotlin

import dev.cycles.kotlin.ffi.Client
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.emitAll
import kotlinx.coroutines.flow.flow
import kotlinx.coroutines.flow.flowOn
import kotlinx.coroutines.withContext
import kotlinx.serialization.KSerializer
import kotlinx.serialization.builtins.ListSerializer
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.put
import java.util.concurrent.atomic.AtomicBoolean
import kotlin.time.Duration

/**
 * A Cycles client on the Rust core: every runtime operation as a `suspend` function, guarded
 * actions ([withReservation], [reserve]), drains and the event [events] flow. Close it
 * ([close], or `use { }`): that drains pending settlements within the `closeTimeout` bound.
 *
 * Each operation takes its request class and returns a [Reply] of its result class, both
 * generated from core's types (`Models.kt`); [call] is the same over JSON.
 */
class CyclesClient private constructor(private val native: Client) : AutoCloseable {
    private val collecting = AtomicBoolean(false)
    private val lifeSeen = AtomicBoolean(false)

    /** Clients. */
    companion object {
        /** A client of [options] (`baseUrl` and `apiKey` required). */
        fun create(options: ClientOptions): CyclesClient = CyclesClient(native { Client(options.toJson().toString()) })

        /** A client of the `CYCLES_*` environment, [options] overriding it (no `baseUrl`/`apiKey`). */
        fun fromEnv(options: ClientOptions = ClientOptions()): CyclesClient =
            CyclesClient(native { Client.fromEnv(options.toJson().toString()) })
    }

    /** The settings (`base_url`, `tenant`, timeouts), never the key. */
    val info: JsonObject get() = jsonObject(native.infoJson())

    /** Whether the client was closed. */
    val isClosed: Boolean get() = native.isClosed()

    /**
     * Any operation of the bridge's table by name, arguments and body as JSON (docs/bindings.md,
     * "Operations"): the escape hatch, e.g. for a request member the generated classes do not
     * carry yet. The reply's [Reply.body] is core's decoded JSON; errors are the same
     * [CyclesException]s.
     */
    suspend fun call(operation: String, args: JsonObject): Reply<JsonElement> =
        Reply.parse(native { native.call(operation, args.toString()) })

    private suspend fun <T> op(operation: String, args: JsonObject, result: KSerializer<T>): Reply<T> =
        Reply.parse(native { native.call(operation, args.toString()) }, result)

    private fun <T> encode(serializer: KSerializer<T>, value: T): JsonObject = wireJson.encodeToJsonElement(serializer, value).jsonObject

    private fun idOnly(name: String, id: String) = buildJsonObject { put(name, id) }

    private fun withId(name: String, id: String, request: JsonObject) = buildJsonObject {
        put(name, id)
        put("request", request)
    }

    // BEGIN generated operations (`cargo run -p cycles-codegen`, from core's operation table): do not edit.

    /**
     * Asks whether a spend would be allowed, reserving nothing; a denial is a result (`DENY` with
     * its reason code), not an error (`decide`, `POST /v1/decide`).
     */
    suspend fun decide(request: DecisionRequest): Reply<DecisionResult> =
        op("decide", encode(DecisionRequest.serializer(), request), DecisionResult.serializer())

    /**
     * Reserves an estimate for an action; a denial is a result, not an error (`createReservation`,
     * `POST /v1/reservations`).
     */
    suspend fun createReservation(request: CreateReservationRequest): Reply<ReservationResult> =
        op("create_reservation", encode(CreateReservationRequest.serializer(), request), ReservationResult.serializer())

    /**
     * Lists reservations, one page; the page's `next_cursor` asks for the next (`listReservations`,
     * `GET /v1/reservations`).
     */
    suspend fun listReservations(query: ReservationQuery = ReservationQuery()): Reply<ReservationPage> =
        op("list_reservations", encode(ReservationQuery.serializer(), query), ReservationPage.serializer())

    /**
     * Reads one reservation (`getReservation`, `GET /v1/reservations/{reservation_id}`).
     */
    suspend fun getReservation(reservationId: String): Reply<ReservationDetail> =
        op("get_reservation", idOnly("reservation_id", reservationId), ReservationDetail.serializer())

    /**
     * Commits the actual amount a reservation's work cost (`commitReservation`,
     * `POST /v1/reservations/{reservation_id}/commit`).
     */
    suspend fun commitReservation(reservationId: String, request: CommitRequest): Reply<CommitResult> = op(
        "commit_reservation",
        withId("reservation_id", reservationId, encode(CommitRequest.serializer(), request)),
        CommitResult.serializer(),
    )

    /**
     * Releases a reservation, returning its amount (`releaseReservation`,
     * `POST /v1/reservations/{reservation_id}/release`).
     */
    suspend fun releaseReservation(reservationId: String, request: ReleaseRequest): Reply<ReleaseResult> = op(
        "release_reservation",
        withId("reservation_id", reservationId, encode(ReleaseRequest.serializer(), request)),
        ReleaseResult.serializer(),
    )

    /**
     * Extends a reservation's lease once (`extendReservation`,
     * `POST /v1/reservations/{reservation_id}/extend`).
     */
    suspend fun extendReservation(reservationId: String, request: ExtendRequest): Reply<ExtendResult> = op(
        "extend_reservation",
        withId("reservation_id", reservationId, encode(ExtendRequest.serializer(), request)),
        ExtendResult.serializer(),
    )

    /**
     * Records spend without a reservation (post-only accounting) (`createEvent`,
     * `POST /v1/events`).
     */
    suspend fun createEvent(request: EventRequest): Reply<EventResult> =
        op("create_event", encode(EventRequest.serializer(), request), EventResult.serializer())

    /**
     * Reads the balances of the scopes a query matches, one page (at least one subject filter)
     * (`getBalances`, `GET /v1/balances`).
     */
    suspend fun getBalances(query: BalanceQuery): Reply<Balances> =
        op("get_balances", encode(BalanceQuery.serializer(), query), Balances.serializer())

    /**
     * Fetches one signed evidence envelope (public: sent without the API key; no signature check
     * here) (`getEvidence`, `GET /v1/evidence/{evidence_id}`).
     */
    suspend fun getEvidence(evidenceId: String): Reply<EvidenceEnvelope> =
        op("get_evidence", idOnly("evidence_id", evidenceId), EvidenceEnvelope.serializer())

    /**
     * Fetches the server's evidence signing keys (public) (`getEvidenceJwks`,
     * `GET /v1/.well-known/cycles-jwks.json`).
     */
    suspend fun getEvidenceJwks(): Reply<EvidenceJwks> = op("get_evidence_jwks", JsonObject(emptyMap()), EvidenceJwks.serializer())
    // END generated operations

    /**
     * Every reservation of [query], following the cursors from the query's own (core's stop
     * rules), at most [maxPages] pages (null: the bridge's 100; a guard against a listing that
     * never ends, the last page fetched included): the rows, in the server's order.
     */
    suspend fun listReservationsAll(query: ReservationQuery = ReservationQuery(), maxPages: Int? = null): List<ReservationDetail> {
        val args = buildJsonObject {
            encode(ReservationQuery.serializer(), query).forEach { (k, v) -> put(k, v) }
            maxPages?.let { put("max_pages", it) }
        }
        return op("list_reservations_all", args, ListSerializer(ReservationDetail.serializer())).body
    }

    /**
     * Reserves [spec]'s estimate and starts the heartbeat: the running action. End it with
     * [Reservation.finish] or [Reservation.release]; [withReservation] does that for you.
     */
    suspend fun reserve(spec: GuardSpec): Reservation {
        quietUntilCollected()
        return Reservation(native { native.begin(spec.toJson().toString()) })
    }

    /**
     * Runs [block] under a reservation of [spec]: reserve, heartbeat while it runs, then settle
     * the actual it reported ([Reservation.setActual] / [Reservation.add]) and return its
     * value. On any exit by an exception, cancellation included, the known usage is settled
     * (else the estimate released) before the exception propagates unchanged; the settlement
     * is not cancelled with the coroutine. A success without an actual throws
     * [MissingActualException] (nothing committed, the estimate released).
     */
    suspend fun <T> withReservation(spec: GuardSpec, block: suspend Reservation.() -> T): T {
        val r = reserve(spec)
        val value = try {
            r.block()
        } catch (e: Throwable) {
            try {
                withContext(NonCancellable) { if (!r.isFinished) r.finish(workSucceeded = false) }
            } catch (settle: Throwable) {
                e.addSuppressed(settle)
            }
            throw e
        }
        withContext(NonCancellable) { if (!r.isFinished) r.finish(workSucceeded = true) }
        return value
    }

    /** Replays every pending settlement once. */
    suspend fun flush(): DrainReport {
        quietUntilCollected()
        return DrainReport.parse(native { native.flush() })
    }

    /** Replays until nothing is pending or [timeout] passed. */
    suspend fun drain(timeout: Duration): DrainReport {
        quietUntilCollected()
        return DrainReport.parse(native { native.drain(timeout.inWholeMilliseconds.coerceAtLeast(0).toULong()) })
    }

    /**
     * Closes the client, draining pending settlements for at most [timeout] (null: the
     * `closeTimeout` option); the report, or null when no guarded action ever ran. Idempotent.
     */
    suspend fun closeAndDrain(timeout: Duration? = null): DrainReport? =
        native { native.shutdown(timeout?.inWholeMilliseconds?.coerceAtLeast(0)?.toULong()) }?.let { DrainReport.parse(it) }

    /** Closes the client (blocking), draining pending settlements within `closeTimeout`. */
    override fun close() {
        native { native.shutdownBlocking(null) }
    }

    /**
     * Core's events (heartbeats, settlements, retries, quarantines; docs/events.md) at
     * [floor] or above, while collected; it completes when the client is closed. One
     * collector at a time (a second one fails with [IllegalStateException]); events are not
     * even built while nobody collects. The subscription is made in the collector's own
     * context before its first suspension (only the reading runs on [Dispatchers.IO]), so a
     * collector launched with `CoroutineStart.UNDISPATCHED` sees every event of what follows
     * the `launch`.
     */
    fun events(floor: EventLevel = EventLevel.DEBUG): Flow<CyclesEvent> = flow {
        check(collecting.compareAndSet(false, true)) { "the events of this client are already being collected" }
        try {
            native { native.setEventFloor(floor) }
            emitAll(
                flow {
                    while (true) {
                        val batch = native.nextEvents(200u) ?: break
                        for (e in batch) emit(CyclesEvent.parse(e))
                    }
                }.flowOn(Dispatchers.IO),
            )
        } finally {
            collecting.set(false)
            runCatching { native.setEventFloor(null) }
        }
    }

    /** Until a collector asks for events, core builds none (they would pile up unread). */
    private fun quietUntilCollected() {
        if (!collecting.get() && lifeSeen.compareAndSet(false, true)) {
            native { native.setEventFloor(null) }
        }
    }
}
