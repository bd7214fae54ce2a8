package dev.cycles.kotlin

import dev.cycles.kotlin.ffi.Client
import java.util.concurrent.atomic.AtomicBoolean
import kotlin.time.Duration
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.emitAll
import kotlinx.coroutines.flow.flow
import kotlinx.coroutines.flow.flowOn
import kotlinx.coroutines.withContext
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.put

/**
 * A Cycles client on the Rust core: every runtime operation as a `suspend` function, guarded
 * actions ([withReservation], [reserve]), drains and the event [events] flow. Close it
 * ([close], or `use { }`): that drains pending settlements within the `closeTimeout` bound.
 *
 * Requests and bodies are the spec's JSON (`kotlinx.serialization`'s [JsonObject]); replies
 * are core's decoded responses ([Reply.body]).
 */
class CyclesClient private constructor(private val native: Client) : AutoCloseable {
    private val collecting = AtomicBoolean(false)
    private val lifeSeen = AtomicBoolean(false)

    /** Clients. */
    companion object {
        /** A client of [options] (`baseUrl` and `apiKey` required). */
        fun create(options: ClientOptions): CyclesClient =
            CyclesClient(native { Client(options.toJson().toString()) })

        /** A client of the `CYCLES_*` environment, [options] overriding it (no `baseUrl`/`apiKey`). */
        fun fromEnv(options: ClientOptions = ClientOptions()): CyclesClient =
            CyclesClient(native { Client.fromEnv(options.toJson().toString()) })
    }

    /** The settings (`base_url`, `tenant`, timeouts), never the key. */
    val info: JsonObject get() = jsonObject(native.infoJson())

    /** Whether the client was closed. */
    val isClosed: Boolean get() = native.isClosed()

    /** One runtime operation by its bridge name with its arguments (docs/bindings.md). */
    suspend fun call(operation: String, args: JsonObject): Reply =
        Reply.parse(native { native.call(operation, args.toString()) })

    /** `POST /v1/reservations`: the `ReservationCreateRequest`. */
    suspend fun createReservation(request: JsonObject): Reply = call("create_reservation", request)

    /** `POST /v1/reservations/{id}/commit`: the `CommitRequest`. */
    suspend fun commitReservation(reservationId: String, request: JsonObject): Reply =
        call("commit_reservation", withId("reservation_id", reservationId, request))

    /** `POST /v1/reservations/{id}/release`: the `ReleaseRequest`. */
    suspend fun releaseReservation(reservationId: String, request: JsonObject): Reply =
        call("release_reservation", withId("reservation_id", reservationId, request))

    /** `POST /v1/reservations/{id}/extend`: the `ReservationExtendRequest`. */
    suspend fun extendReservation(reservationId: String, request: JsonObject): Reply =
        call("extend_reservation", withId("reservation_id", reservationId, request))

    /** `POST /v1/decide`: the `DecisionRequest`. */
    suspend fun decide(request: JsonObject): Reply = call("decide", request)

    /** `POST /v1/events`: the `EventCreateRequest`. */
    suspend fun createEvent(request: JsonObject): Reply = call("create_event", request)

    /** `GET /v1/balances`: `tenant`, ..., `include_children`, `limit`, `cursor`. */
    suspend fun getBalances(query: JsonObject): Reply = call("get_balances", query)

    /** `GET /v1/reservations`: one page (`status`, the subject fields, `limit`, `cursor`, ...). */
    suspend fun listReservations(query: JsonObject): Reply = call("list_reservations", query)

    /** Every page of `GET /v1/reservations` (at most `max_pages`, default 100): the rows. */
    suspend fun listReservationsAll(query: JsonObject): JsonArray =
        call("list_reservations_all", query).body as JsonArray

    /** `GET /v1/reservations/{id}`. */
    suspend fun getReservation(reservationId: String): Reply =
        call("get_reservation", buildJsonObject { put("reservation_id", reservationId) })

    /** `GET /v1/evidence/{id}`. */
    suspend fun getEvidence(evidenceId: String): Reply =
        call("get_evidence", buildJsonObject { put("evidence_id", evidenceId) })

    /** `GET /v1/evidence/jwks`. */
    suspend fun getEvidenceJwks(): Reply = call("get_evidence_jwks", JsonObject(emptyMap()))

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

    private fun withId(name: String, id: String, request: JsonObject) = buildJsonObject {
        put(name, id)
        put("request", request)
    }
}
