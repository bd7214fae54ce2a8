package dev.cycles.kotlin

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.contentOrNull
import java.net.ServerSocket
import java.net.Socket
import java.nio.file.Files
import java.nio.file.NoSuchFileException
import java.nio.file.Path
import java.util.concurrent.TimeUnit

/**
 * A redis-server on a free loopback port (Debian's `redis-server`, which scripts/test-all.sh and
 * kotlin/scripts/test.sh install), killed on close: with AOF and `appendfsync always` it is a
 * durable journal store. Read and written with `redis-cli` (installed with it), so the tests
 * need no Redis client library.
 */
class TestRedis(aof: Boolean, private val dir: Path) : AutoCloseable {
    val port: Int = ServerSocket(0).use { it.localPort }
    val url = "redis://127.0.0.1:$port/0"
    private val process: Process

    init {
        val args = mutableListOf("redis-server", "--port", "$port", "--bind", "127.0.0.1", "--save", "", "--dir", dir.toString())
        if (aof) args += listOf("--appendonly", "yes", "--appendfsync", "always")
        process = ProcessBuilder(args).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start()
        val deadline = System.nanoTime() + 10_000_000_000L
        while (true) {
            try {
                Socket("127.0.0.1", port).close()
                break
            } catch (e: java.io.IOException) {
                check(System.nanoTime() < deadline) { "redis-server did not come up" }
                Thread.sleep(20)
            }
        }
    }

    /**
     * One command through `redis-cli --json`, its last argument read from [stdin] when given
     * (`-x`, byte for byte): the reply (null for a missing key, a String for a value, a List
     * for an array).
     */
    fun cli(stdin: ByteArray?, vararg args: String): Any? {
        val command = mutableListOf("redis-cli", "-h", "127.0.0.1", "-p", "$port", "--json")
        if (stdin != null) command += "-x"
        command += args
        val p = ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start()
        p.outputStream.use { if (stdin != null) it.write(stdin) }
        val out = p.inputStream.readAllBytes().toString(Charsets.UTF_8).trim()
        // redis-cli exits 0 on an error reply, which --json prints as error:"...".
        check(p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0 && !out.startsWith("error:")) {
            "redis-cli ${args.joinToString(" ")}: $out"
        }
        return plain(Json.parseToJsonElement(out))
    }

    private fun plain(e: JsonElement): Any? = when (e) {
        is JsonNull -> null
        is JsonPrimitive -> e.contentOrNull
        is JsonArray -> e.map { plain(it) }
        is JsonObject -> e.mapValues { plain(it.value) }
    }

    override fun close() {
        process.destroyForcibly()
        process.waitFor(10, TimeUnit.SECONDS) // reaped before the caller removes its data
    }
}

/**
 * The journal under test. `CYCLES_TEST_JOURNAL_STORE=redis` runs the recovery tests with their
 * journal in a Redis each test starts itself (AOF, `appendfsync always`: the Kotlin adapter's
 * Redis claim, conformance/adapters/kotlin-redis-map.json); unset, empty or `file` is the
 * directory; any other value fails loudly rather than silently testing the default. The tests
 * look into the journal only through this class, so the same assertions hold for both stores.
 */
class TestJournal(val dir: Path) : AutoCloseable {
    /** A record or quarantined record: its partition (`fp16`), name and bytes. */
    class Entry(val partition: String, val name: String, val bytes: ByteArray) {
        val text: String get() = bytes.toString(Charsets.UTF_8)

        override fun toString() = "$partition/$name"
    }

    private val redis: TestRedis? = if (onRedis()) {
        val data = dir.resolveSibling("${dir.fileName}.redis-data")
        Files.createDirectories(data)
        TestRedis(true, data)
    } else {
        null
    }

    /**
     * The `journalUrl` of a Redis run, else null. Its leases last 3 s: a SIGKILLed holder's
     * record is taken over within a drain's time (the default, 60 s, would outlast it).
     */
    val url: String? get() = redis?.let { "${it.url}?lease_ms=3000" }

    /** [o] journaling here (on Redis, the directory stays set and must stay unused). */
    fun configure(o: ClientOptions): ClientOptions = o.copy(journalDir = dir.toString(), journalUrl = url)

    /** The members a [RecoveryChild]'s spec needs to journal here: `dir` and `journal_url`. */
    fun spec(spec: MutableMap<String, Any?>): MutableMap<String, Any?> {
        spec["dir"] = dir.toString()
        spec["journal_url"] = url
        return spec
    }

    /** Every record of every partition, sorted. */
    fun records(): List<Entry> = entries("r")

    /** Every quarantined record of every partition, sorted. */
    fun quarantined(): List<Entry> = entries("q")

    /** The bytes of [reservationId]'s record in the partition of (base URL, key, tenant), or null. */
    fun recordOf(baseUrl: String, apiKey: String, tenant: String?, reservationId: String): ByteArray? {
        val part = Journal.fingerprint(baseUrl, apiKey, tenant)
        val file = Journal.fileName(reservationId)
        if (redis == null) {
            return try {
                Files.readAllBytes(dir.resolve(part).resolve(file))
            } catch (e: NoSuchFileException) {
                null
            }
        }
        return (redis.cli(null, "GET", key(part, "r", file)) as String?)?.toByteArray()
    }

    /** [reservationId]'s record in the partition of (the server, key, tenant), parsed, or null. */
    fun readRecord(s: LocalServer, reservationId: String, apiKey: String = s.apiKey, tenant: String? = s.tenant): JsonObject? =
        recordOf(s.url, apiKey, tenant, reservationId)?.let { Journal.parseRecord(it) }

    /** Puts [bytes] as record [file] into the partition of (base URL, key, tenant), as another writer would have. */
    fun put(baseUrl: String, apiKey: String, tenant: String?, file: String, bytes: ByteArray) {
        val part = Journal.fingerprint(baseUrl, apiKey, tenant)
        if (redis == null) {
            Files.createDirectories(dir.resolve(part))
            Files.write(dir.resolve(part).resolve(file), bytes)
            return
        }
        redis.cli(bytes, "SET", key(part, "r", file))
        redis.cli(null, "SADD", "cycles:journal:{$part}:records", file)
    }

    /**
     * The reservation ids of the valid records of the partition of (base URL, key, tenant),
     * sorted: core's pending scan of the directory; on Redis, the records core's parser accepts.
     */
    fun pendingIds(baseUrl: String, apiKey: String, tenant: String?): List<String> {
        if (redis == null) {
            return Journal.pending(dir.toString(), baseUrl, apiKey, tenant).map { (it as JsonObject).s("reservation_id")!! }.sorted()
        }
        val part = Journal.fingerprint(baseUrl, apiKey, tenant)
        return records().filter { it.partition == part }.mapNotNull {
            // Corrupt or unsupported: not pending (the scan leaves it to quarantine).
            runCatching { Journal.parseRecord(it.bytes).s("reservation_id") }.getOrNull()
        }.sorted()
    }

    /** Whether a Redis run's clients wrote anything into the unused directory (they must not). */
    val dirUntouchedOnRedis: Boolean get() = redis == null || !Files.exists(dir)

    /** Redis itself (null on the directory). */
    val redisServer: TestRedis? get() = redis

    override fun close() {
        redis?.close()
    }

    private fun key(partition: String, kind: String, name: String) = "cycles:journal:{$partition}:$kind:$name"

    private fun entries(kind: String): List<Entry> {
        val out = mutableListOf<Entry>()
        if (redis == null) {
            val parts = dir.toFile().listFiles()?.filter { it.isDirectory } ?: return out
            for (p in parts) {
                for (f in p.listFiles()?.filter { it.isFile } ?: emptyList()) {
                    val quarantined = listOf(".corrupt", ".unsupported", ".unrecoverable").any { f.name.contains(it) }
                    // Temp files (".tmp...") and lock files are neither.
                    val record = f.name.endsWith(".json") && !f.name.startsWith(".") && !quarantined
                    if (if (kind == "r") record else quarantined) {
                        val bytes = try {
                            f.readBytes()
                        } catch (e: java.io.FileNotFoundException) {
                            null // a live writer renamed or removed it while we listed
                        }
                        if (bytes != null) out += Entry(p.name, f.name, bytes)
                    }
                }
            }
        } else {
            for (k in redis.cli(null, "KEYS", "cycles:journal:*:$kind:*") as List<*>) {
                val rest = (k as String).removePrefix("cycles:journal:{")
                val end = rest.indexOf("}:$kind:")
                val value = redis.cli(null, "GET", k) as String? ?: continue
                out += Entry(rest.substring(0, end), rest.substring(end + 3 + kind.length), value.toByteArray())
            }
        }
        return out.sortedBy { it.toString() }
    }

    companion object {
        /** Whether this run's journal store is Redis. */
        fun onRedis(): Boolean = when (val store = System.getenv("CYCLES_TEST_JOURNAL_STORE")) {
            null, "", "file" -> false
            "redis" -> true
            else -> error("CYCLES_TEST_JOURNAL_STORE=$store: expected file or redis")
        }

        /**
         * The record or quarantine name in an event's `file` or `quarantined_as`: a path on the
         * directory, `<redis url> cycles:journal:{fp16}:r:<name>` or a bare name on Redis.
         */
        fun name(located: String): String = located.substring(maxOf(located.lastIndexOf('/'), located.lastIndexOf(':')) + 1)
    }
}
