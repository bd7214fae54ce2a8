// The Kotlin face of the cross-language matrix (conformance/matrix/PROTOCOL.md): one JSON
// request per stdin line, evaluated through the public dev.cycles.kotlin API only (compiled
// against the library's jar, so nothing internal is reachable), one JSON response per stdout
// line. JSON is kotlinx.serialization's tree, whose numbers keep their exact text.

import dev.cycles.kotlin.Action
import dev.cycles.kotlin.BudgetUnit
import dev.cycles.kotlin.Caps
import dev.cycles.kotlin.Captured
import dev.cycles.kotlin.ClientOptions
import dev.cycles.kotlin.CyclesClient
import dev.cycles.kotlin.CyclesEvent
import dev.cycles.kotlin.CyclesException
import dev.cycles.kotlin.GuardSpec
import dev.cycles.kotlin.Journal
import dev.cycles.kotlin.Pricing
import dev.cycles.kotlin.Reservation
import dev.cycles.kotlin.Subject
import dev.cycles.kotlin.Timing
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.Job
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeoutOrNull
import kotlinx.coroutines.yield
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.booleanOrNull
import kotlinx.serialization.json.contentOrNull
import java.io.FileDescriptor
import java.io.FileOutputStream
import java.io.PrintStream
import java.math.BigInteger
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.time.Duration
import kotlin.time.Duration.Companion.days
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/** A request the Kotlin API cannot express (answered with `fail`). */
class Unsupported(message: String) : RuntimeException(message)

/** The work's own failure in a `fail` step (must come out of withReservation unchanged). */
class WorkFailure : Exception("the work failed")

fun main() {
    val input = System.`in`.bufferedReader(Charsets.UTF_8)
    val out = FileOutputStream(FileDescriptor.out).writer(Charsets.UTF_8)
    // Diagnostics only: stdout belongs to the protocol.
    System.setOut(PrintStream(FileOutputStream(FileDescriptor.err), true, Charsets.UTF_8))
    runBlocking {
        while (true) {
            val line = input.readLine() ?: break
            if (line.isBlank()) continue
            out.write(answer(line).toString())
            out.write("\n")
            out.flush()
        }
    }
}

/** One request line to its response object. */
suspend fun answer(line: String): JsonObject {
    val req = try {
        Json.parseToJsonElement(line) as JsonObject
    } catch (e: Exception) {
        return obj("id" to null, "fail" to "unreadable request: ${e.message}")
    }
    return try {
        obj("id" to req["id"], "ok" to evaluate(req))
    } catch (e: CyclesException) {
        obj("id" to req["id"], "error" to e.name)
    } catch (e: Unsupported) {
        obj("id" to req["id"], "fail" to e.message)
    } catch (e: Exception) {
        e.printStackTrace()
        obj("id" to req["id"], "fail" to "${e.javaClass.simpleName}: ${e.message}")
    }
}

suspend fun evaluate(r: JsonObject): JsonElement = when (val op = r.str("op")) {
    "timing" -> Timing.call(r.str("fn")!!, r.o("args"))

    "pricing" -> Pricing.call(r.str("fn")!!, r.o("args"))

    "primary" -> primary(r)

    "fallback" -> fallback(r)

    "journal_names" -> r.str("reservation_id")!!.let { obj("standard" to Journal.fileName(it), "legacy" to Journal.legacyFileName(it)) }

    "fingerprint" -> JsonPrimitive(Journal.fingerprint(r.str("base_url")!!, r.str("api_key")!!, r.str("tenant")))

    "parse_record" -> parseRecord(r.str("text")!!)

    "decode" -> decode(r.o("exchange"))

    "write" -> writeRecord(r)

    "drain" -> drain(r)

    "guard" -> guard(r)

    "client" -> client(r)

    "journal_fail" -> journalFail(r)

    "work" -> work(r)

    "load" -> load(r)

    // Load.kt
    else -> throw Unsupported("unknown op: $op")
}

fun primary(r: JsonObject): JsonArray {
    val p = Timing.PrimaryPlanner(r["request_timeout_ms"] ?: JsonNull, r.bool("derive"))
    return JsonArray(
        r.arr("steps").map { step ->
            obj("decision" to p.step(step as JsonObject), "attempt_timeout_ms" to p.attemptTimeout())
        },
    )
}

fun fallback(r: JsonObject): JsonObject {
    val create = r.o("create")
    val p = Timing.FallbackPlanner(
        unsigned(r["requested_ttl_ms"], "requested_ttl_ms"),
        unsigned(create["at_us"], "create.at_us"),
        amount(create["expires_at_ms"], "create.expires_at_ms"),
    )
    val first = p.firstBeat(r.bool("prime"))
    val steps = r.arr("steps").map { step -> obj("decision" to p.step(step as JsonObject), "regime" to p.regime) }
    return obj("first" to first, "steps" to JsonArray(steps))
}

/**
 * A u64 of the vectors' encoding as the Long the planner takes: its 64 bits (the planner reads
 * them back as unsigned, `toULong()`, Kotlin's own convention for unsigned values in a Long).
 */
fun unsigned(v: JsonElement?, what: String): Long {
    val n = (v as? JsonPrimitive)?.contentOrNull?.toBigIntegerOrNull()
    if (n == null || n.signum() < 0 || n.bitLength() > 64) throw Unsupported("$what is not a u64: $v")
    return n.toLong()
}

/** An i64 of the vectors' encoding (a JSON number, or a decimal string beyond 2^53-1). */
fun amount(v: JsonElement?, what: String): Long = (v as? JsonPrimitive)?.contentOrNull?.toLongOrNull()
    ?: throw Unsupported("the Kotlin API takes $what as a Long; cannot express $v")

fun parseRecord(text: String): JsonObject {
    val rec = try {
        Journal.parseRecord(text.toByteArray(Charsets.UTF_8))
    } catch (e: CyclesException) {
        // Journal.parseRecord's documented refusal: details {"journal_error": "corrupt" | "unsupported"}.
        val kind = e.details?.get("journal_error") ?: throw e
        return obj("ok" to false, "error" to kind)
    }
    val out = linkedMapOf<String, JsonElement>("ok" to JsonPrimitive(true))
    for (k in listOf("reservation_id", "base_url", "mode", "idempotency_key", "recorded_at_ms", "not_before_ms", "extra_keys")) {
        out[k] = rec[k] ?: JsonNull
    }
    out["commit_body_wire"] = rec["commit_body"] ?: JsonNull
    out["event_fallback_body_wire"] = rec["event_fallback_body"] ?: JsonNull
    return JsonObject(out)
}

fun decode(x: JsonObject): JsonObject {
    val resp = x.o("response")
    val status = amount(resp["status"], "status").toInt()
    val body = resp.str("body")
    return try {
        val reply = Captured.decode(x.str("operation"), status, resp["headers"] as? JsonObject, (body ?: "").toByteArray(Charsets.UTF_8))
        obj("result" to reply.body)
    } catch (e: CyclesException) {
        obj(
            "error" to obj(
                "kind" to e.name,
                "status" to e.httpStatus,
                "error_code" to e.errorCode,
                "request_id" to e.requestId,
                "retryable" to e.retryable,
                "retry_after_ms" to e.retryAfterSeconds?.let { it * 1000 },
            ),
        )
    }
}

/** The options of a request's client: that identity on that journal (directory or `journal_url`). */
fun options(r: JsonObject): ClientOptions = ClientOptions(
    baseUrl = r.str("url"),
    apiKey = r.str("api_key"),
    tenant = r.str("tenant"),
    journalDir = r.str("journal_dir"),
    journalUrl = r.str("journal_url"),
)

val SUBJECT_KEYS = setOf("tenant", "workspace", "app", "workflow", "agent", "toolset")

fun subject(s: JsonObject): Subject {
    s.keys.firstOrNull { it !in SUBJECT_KEYS }?.let { throw Unsupported("dev.cycles.kotlin.Subject has no member $it") }
    return Subject(s.str("tenant"), s.str("workspace"), s.str("app"), s.str("workflow"), s.str("agent"), s.str("toolset"))
}

/** Collects [client]'s events into [into] until the client is closed. */
suspend fun CoroutineScope.collect(client: CyclesClient, into: MutableList<CyclesEvent>): Job {
    // Subscribed when launch returns (events(): the subscription precedes the first suspension).
    return launch(start = CoroutineStart.UNDISPATCHED) { client.events().collect { into.add(it) } }
}

suspend fun writeRecord(r: JsonObject): JsonObject {
    val c = r.o("case")
    val action = c.o("action")
    val estimate = c.o("estimate")
    val spec = GuardSpec(
        Action(action.str("kind")!!, action.str("name")!!),
        amount(estimate["amount"], "the estimate"),
        unit = estimate.str("unit")?.let(::BudgetUnit),
        subject = subject(c.o("subject")),
    )
    val actual = amount(c["actual"], "the actual")
    // The fewest settlement attempts; no background replay while the matrix hands the journal on.
    val client = CyclesClient.create(options(r).copy(maxAttempts = 1, replayInterval = 1.days))
    try {
        val res = client.reserve(spec)
        res.setActual(actual)
        (c["metrics"] as? JsonObject)?.let { res.setMetrics(it) }
        // Sent as the tree's text: big integers keep their exact digits, unicode its characters.
        (c["metadata"] as? JsonObject)?.let { res.setMetadata(it) }
        val o = res.finish()
        return obj("reservation_id" to res.reservationId, "outcome" to (o.settlement?.status ?: o.kind.name.lowercase()))
    } finally {
        client.closeAndDrain(Duration.ZERO)
    }
}

/**
 * Drains the journal. A client starts its background replay at once, and a record that pass
 * holds is skipped by `drain()`, so the report alone can miss records this client settled: the
 * driver also reads the client's events (settled: every reservation with a `settlement_settled`
 * event; quarantined: the larger of the report's count and the `journal_quarantined` events).
 */
suspend fun drain(r: JsonObject): JsonObject = coroutineScope {
    val timeout = amount(r["timeout_ms"], "timeout_ms")
    val before = mutableSetOf<String>()
    // A Redis journal's records are not waited for here (the orchestrator checks the ledger).
    if (r.str("journal_url") == null) {
        Journal.pending(r.str("journal_dir")!!, r.str("url"), r.str("api_key"), r.str("tenant"))
            .forEach { before += (it as JsonObject).str("reservation_id")!! }
    }
    val client = CyclesClient.create(options(r).copy(maxAttempts = 1, replayInterval = 1.days))
    val events = CopyOnWriteArrayList<CyclesEvent>()
    val collector = collect(client, events)
    val d = try {
        client.drain(timeout.milliseconds)
    } finally {
        client.closeAndDrain(Duration.ZERO)
    }
    withTimeoutOrNull(10.seconds) { collector.join() } // the flow ends with the client, every event read
    val settled = events.filter { it.kind == "settlement_settled" }.map { it.reservationId }.toSet()
    val quarantined = events.count { it.kind == "journal_quarantined" }
    obj("settled" to settled.size, "pending" to d.remaining.size, "quarantined" to maxOf(d.quarantined.size, quarantined))
}

/**
 * One guarded action of the lifecycle contract (PROTOCOL.md, `guard`) through
 * [CyclesClient.withReservation]: a client with the tenant and default unit, a spec of only
 * the action and the bare estimate (key and subject only when the case gives them), the steps
 * on the reservation; `end` returns, `fail` throws.
 */
suspend fun guard(r: JsonObject): JsonObject {
    val c = r.o("case")
    val spec = GuardSpec(
        Action("llm.completion", "matrix"),
        amount(c["estimate"], "estimate"),
        idempotencyKey = c.str("idempotency_key"),
        subject = (c["subject"] as? JsonObject)?.let { subject(it) },
    )
    val results = mutableListOf<JsonElement>()
    var seen: Reservation? = null
    var error: String? = null
    val client = CyclesClient.create(
        ClientOptions(
            baseUrl = r.str("url"),
            apiKey = r.str("api_key"),
            tenant = r.str("tenant"),
            defaultUnit = r.str("default_unit")?.let(::BudgetUnit),
            journalDir = r.str("journal_dir"),
            replayInterval = 1.days,
        ),
    )
    client.use {
        try {
            client.withReservation(spec) {
                seen = this
                for (s in c.arr("steps")) {
                    val step = s as JsonObject
                    when (val what = step.str("do")) {
                        "end" -> {
                            results += JsonNull
                            return@withReservation
                        }

                        "fail" -> {
                            results += JsonNull
                            throw WorkFailure()
                        }

                        else -> {
                            results += try {
                                when (what) {
                                    "add" -> add(amount(step["amount"], "amount"))
                                    "set_actual" -> setActual(amount(step["amount"], "amount"))
                                    "release" -> release(step.str("reason"))
                                    else -> throw Unsupported("unknown step $what")
                                }
                                JsonNull
                            } catch (e: CyclesException) {
                                JsonPrimitive(e.name)
                            }
                            if (outcome != null) return@withReservation // a release that succeeded ended the action
                        }
                    }
                }
                throw Unsupported("the case's steps never end the action")
            }
        } catch (e: WorkFailure) {
            error = "work"
        } catch (e: CyclesException) {
            error = e.name
        }
    }
    val res = seen ?: return obj(
        "decision" to null,
        "caps" to null,
        "steps" to JsonArray(results),
        "outcome" to null,
        "released" to null,
        "charged" to null,
        "error" to error,
    ) // the reserve was denied
    val o = res.outcome!!
    return obj(
        "decision" to res.decision.value,
        "caps" to res.caps?.let { Json.encodeToJsonElement(Caps.serializer(), it) },
        "steps" to JsonArray(results),
        "outcome" to o.json["outcome"],
        "released" to (if (o.json.containsKey("released")) o.released else null),
        "charged" to o.charged,
        "error" to error,
    )
}

/**
 * The options table of the lifecycle contract (PROTOCOL.md, `client`): a client of the options
 * through [ClientOptions]' typed members, then one guarded action (bare 5, actual 3) under the
 * case's key; the Cycles error name raised, else null.
 */
suspend fun client(r: JsonObject): JsonObject {
    var o = ClientOptions(baseUrl = r.str("url"), apiKey = r.str("api_key"), journalDir = r.str("journal_dir"))
    for ((k, v) in r.o("options")) {
        o = when (k) {
            "tenant" -> o.copy(tenant = (v as JsonPrimitive).contentOrNull)
            "default_unit" -> o.copy(defaultUnit = (v as JsonPrimitive).contentOrNull?.let(::BudgetUnit))
            "request_timeout_ms" -> o.copy(requestTimeout = amount(v, k).milliseconds)
            "connect_timeout_ms" -> o.copy(connectTimeout = amount(v, k).milliseconds)
            "max_concurrent_requests" -> o.copy(maxConcurrentRequests = amount(v, k))
            "settle_max_attempts" -> o.copy(maxAttempts = amount(v, k))
            "replay_interval_ms" -> o.copy(replayInterval = amount(v, k).milliseconds)
            "journal_enabled" -> o.copy(journalEnabled = (v as JsonPrimitive).booleanOrNull)
            else -> throw Unsupported("unknown option $k")
        }
    }
    val client = try {
        CyclesClient.create(o)
    } catch (e: CyclesException) {
        return obj("error" to e.name)
    }
    return client.use {
        try {
            client.withReservation(GuardSpec(Action("llm.completion", "matrix"), 5, idempotencyKey = r.str("key"))) { setActual(3) }
            obj("error" to null)
        } catch (e: CyclesException) {
            obj("error" to e.name)
        }
    }
}

val DISK_EVENTS = setOf("journal_io_failed", "settlement_pending", "settlement_settled")

/**
 * A journal that cannot be written (PROTOCOL.md, `journal_fail`): one guarded action (bare 5,
 * actual 3, the case's key) whose first commit fails, then `flush()`; the settlement's fields,
 * the flush's unjournaled count and this reservation's events.
 */
suspend fun journalFail(r: JsonObject): JsonObject = coroutineScope {
    val client = CyclesClient.create(
        ClientOptions(
            baseUrl = r.str("url"),
            apiKey = r.str("api_key"),
            tenant = r.str("tenant"),
            defaultUnit = r.str("default_unit")?.let(::BudgetUnit),
            journalDir = r.str("journal_dir"),
            maxAttempts = 1,
            replayInterval = 1.days,
        ),
    )
    val seen = CopyOnWriteArrayList<CyclesEvent>()
    val collector = collect(client, seen)
    var held: Reservation? = null
    val report = try {
        client.withReservation(GuardSpec(Action("llm.completion", "matrix"), 5, idempotencyKey = r.str("key"))) {
            held = this
            setActual(3)
        }
        client.flush()
    } finally {
        client.closeAndDrain(Duration.ZERO)
    }
    withTimeoutOrNull(10.seconds) { collector.join() }
    val res = held!!
    val s = res.outcome!!.settlement!!
    val events = seen.filter { it.reservationId == res.reservationId && it.kind in DISK_EVENTS }.map {
        obj("kind" to it.kind, "level" to it.level, "operation" to it.json["operation"], "journaled" to it.json["journaled"])
    }
    obj(
        "status" to s.status,
        "journaled" to (s.json["journaled"] ?: JsonNull),
        "journal_error" to (s.json["journal_error"] ?: JsonNull),
        "flush_unjournaled" to report.unjournaled.size,
        "events" to JsonArray(events),
    )
}

/**
 * The crash loop's `work` op: every action in order through one client of the tenant, default
 * unit and journal (every other option its default), each a guarded action under its key, bare
 * estimate and TTL, whose work sleeps `sleep_ms`, sets the actual and returns.
 */
suspend fun work(r: JsonObject): JsonObject {
    val outcomes = mutableListOf<String>()
    val client = CyclesClient.create(options(r).copy(defaultUnit = r.str("default_unit")?.let(::BudgetUnit)))
    try {
        for (a in r.arr("actions")) {
            a as JsonObject
            val spec = GuardSpec(
                Action("llm.completion", "crashloop"),
                amount(a["estimate"], "estimate"),
                idempotencyKey = a.str("key"),
                ttl = (a["ttl_ms"] as? JsonPrimitive)?.contentOrNull?.let { amount(a["ttl_ms"], "ttl_ms").milliseconds },
            )
            val sleep = amount(a["sleep_ms"], "sleep_ms")
            val actual = amount(a["actual"], "actual")
            var held: Reservation? = null
            client.withReservation(spec) {
                held = this
                delay(sleep)
                yield()
                setActual(actual)
            }
            val o = held!!.outcome!!
            outcomes += o.settlement?.status ?: o.kind.name.lowercase()
        }
    } finally {
        client.closeAndDrain(Duration.ZERO)
    }
    return obj("outcomes" to JsonArray(outcomes.map { JsonPrimitive(it) }))
}

// ---- JSON ----

fun JsonObject.str(name: String): String? = (this[name] as? JsonPrimitive)?.contentOrNull

fun JsonObject.bool(name: String): Boolean = (this[name] as? JsonPrimitive)?.booleanOrNull == true

fun JsonObject.o(name: String): JsonObject = this[name] as? JsonObject ?: throw IllegalArgumentException("want an object at $name")

fun JsonObject.arr(name: String): JsonArray = this[name] as? JsonArray ?: throw IllegalArgumentException("want an array at $name")

/** An object of plain values (null, strings, numbers, booleans, JSON trees). */
fun obj(vararg kv: Pair<String, Any?>): JsonObject = JsonObject(kv.associate { (k, v) -> k to element(v) })

fun element(v: Any?): JsonElement = when (v) {
    null -> JsonNull
    is JsonElement -> v
    is String -> JsonPrimitive(v)
    is Number -> JsonPrimitive(v)
    is Boolean -> JsonPrimitive(v)
    is BigInteger -> JsonPrimitive(v)
    else -> throw IllegalArgumentException("not JSON: ${v.javaClass}")
}
