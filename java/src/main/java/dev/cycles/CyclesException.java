package dev.cycles;

import dev.cycles.internal.Json;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Base of every failure the SDK reports (unchecked). The concrete class is chosen from core's
 * stable error kind by name ({@code dev.cycles.errors.<Kind>Exception}, generated from core's
 * table, see {@link #errorCodes()}); whatever the class, every exception carries the same
 * facts: {@link #code()}, {@link #errorName()}, {@link #httpStatusIfAny()}, the server's
 * {@link #serverErrorCode()}, {@link #requestId()}, {@link #traceId()}, {@link #isRetryable()},
 * {@link #retryAfter()}, {@link #details()} and {@link #cyclesEvidence()}. Messages never contain the API key.
 *
 * <p>Errors that always come from an HTTP response, {@link dev.cycles.errors.HttpException}
 * and {@link dev.cycles.errors.ApiException} (and every class under them), also have a plain
 * {@code int httpStatus()}; the other classes (transport failures, configuration, arguments,
 * the runtime, the guarded lifecycle's own outcomes) never carry one.
 *
 * <p>A call on a closed client is not a {@code CyclesException} but a
 * {@link ClientClosedException} ({@link IllegalStateException}).
 */
public class CyclesException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private static final Map<String, Class<?>> CLASSES = new ConcurrentHashMap<>();

    /** The boundary's error fields, as the native library reports them. */
    private final transient Map<String, Object> fields;

    /**
     * Builds the exception from the native error fields (subclasses pass them on).
     *
     * @param fields the decoded error fields (docs/bindings.md, "Errors")
     */
    protected CyclesException(Map<String, Object> fields) {
        super(Json.str(fields, "message"));
        this.fields = fields;
    }

    /**
     * Builds the exception of a native error (its fields as JSON). Called by the native
     * library; public for the SDK's own packages.
     *
     * @param json the error fields as JSON
     * @return the exception to throw
     */
    public static RuntimeException fromNative(String json) {
        Map<String, Object> f = Json.object(json);
        String variant = Json.str(f, "variant");
        if ("closed".equals(variant)) {
            return new ClientClosedException(Json.str(f, "message"), Json.lng(f, "code").intValue(), Json.str(f, "name"));
        }
        // Another variant has its own class under its kind's, named after it (errorVariants());
        // one this version has no class for is its kind's.
        Class<?> c = variant == null ? CyclesException.class : CLASSES.computeIfAbsent(variant, CyclesException::classOf);
        if (c == CyclesException.class) {
            c = CLASSES.computeIfAbsent(Json.str(f, "name"), CyclesException::classOf);
        }
        try {
            return (RuntimeException) c.getDeclaredConstructor(Map.class).newInstance(f);
        } catch (ReflectiveOperationException e) {
            return new CyclesException(f);
        }
    }

    /**
     * The class name of an error kind: {@code TRANSPORT_TIMEOUT} becomes
     * {@code dev.cycles.errors.TransportTimeoutException} ({@code RUNTIME}:
     * {@code CyclesRuntimeException}, not to shadow {@code java.lang.RuntimeException}).
     *
     * @param name the kind's stable name
     * @return the fully qualified class name
     */
    public static String className(String name) {
        StringBuilder b = new StringBuilder();
        for (String part : name.toLowerCase(Locale.ROOT).split("_")) {
            if (!part.isEmpty()) {
                b.append(Character.toUpperCase(part.charAt(0))).append(part.substring(1));
            }
        }
        String simple = b + "Exception";
        if (simple.equals("RuntimeException")) {
            simple = "CyclesRuntimeException";
        }
        return "dev.cycles.errors." + simple;
    }

    private static Class<?> classOf(String name) {
        try {
            return Class.forName(className(name), true, CyclesException.class.getClassLoader());
        } catch (ClassNotFoundException | RuntimeException e) {
            return CyclesException.class;
        }
    }

    /**
     * Core's error table: stable name to stable code, read from the native library (no copy
     * is kept in Java).
     *
     * @return name to code, in core's order
     */
    public static Map<String, Integer> errorCodes() {
        Map<String, Integer> out = new java.util.LinkedHashMap<>();
        for (Object row : (java.util.List<?>) Json.parse(dev.cycles.internal.Native.errorCodes())) {
            java.util.List<?> r = (java.util.List<?>) row;
            out.put((String) r.get(0), ((Number) r.get(1)).intValue());
        }
        return out;
    }

    /**
     * The bridge's refinements of a kind: variant to the kind's name, read from the native
     * library. Each has a class of its own under its kind's ({@code call_not_sent}:
     * {@link dev.cycles.errors.CallNotSentException}); {@code closed} is
     * {@link ClientClosedException}.
     *
     * @return variant to kind name, in the bridge's order
     */
    public static Map<String, String> errorVariants() {
        Map<String, String> out = new java.util.LinkedHashMap<>();
        for (Object row : (java.util.List<?>) Json.parse(dev.cycles.internal.Native.errorVariants())) {
            java.util.List<?> r = (java.util.List<?>) row;
            out.put((String) r.get(0), (String) r.get(1));
        }
        return out;
    }

    /**
     * One member of the native error fields (for the generated subclasses that expose more).
     *
     * @param name the member's name, e.g. {@code released}
     * @return its decoded value, or null when absent
     */
    protected final Object field(String name) {
        return fields.get(name);
    }

    /** @return core's stable numeric code of the kind */
    public int code() {
        return Json.lng(fields, "code").intValue();
    }

    /** @return core's stable name of the kind, e.g. {@code BUDGET_EXCEEDED} */
    public String errorName() {
        return Json.str(fields, "name");
    }

    /**
     * @return the HTTP status, when a response was received (always, for
     *     {@link dev.cycles.errors.HttpException} and {@link dev.cycles.errors.ApiException},
     *     whose {@code httpStatus()} returns it as an {@code int})
     */
    public OptionalInt httpStatusIfAny() {
        Long s = Json.lng(fields, "http_status");
        return s == null ? OptionalInt.empty() : OptionalInt.of(s.intValue());
    }

    /** @return the server's {@code error} code, when its body had one */
    public Optional<String> serverErrorCode() {
        return Optional.ofNullable(Json.str(fields, "error_code"));
    }

    /** @return the server's request id */
    public Optional<String> requestId() {
        return Optional.ofNullable(Json.str(fields, "request_id"));
    }

    /** @return the server's trace id */
    public Optional<String> traceId() {
        return Optional.ofNullable(Json.str(fields, "trace_id"));
    }

    /** @return whether a retry with the same idempotency key may succeed */
    public boolean isRetryable() {
        return Boolean.TRUE.equals(fields.get("retryable"));
    }

    /** @return the {@code Retry-After} delay, when the server sent delta seconds */
    public Optional<Duration> retryAfter() {
        Long s = Json.lng(fields, "retry_after_seconds");
        return s == null ? Optional.empty() : Optional.of(Duration.ofSeconds(s));
    }

    /** @return the {@code Retry-After} header exactly as received */
    public Optional<String> retryAfterRaw() {
        return Optional.ofNullable(Json.str(fields, "retry_after_raw"));
    }

    /** @return the server's {@code details} object as JSON text */
    public Optional<String> details() {
        return Optional.ofNullable(Json.str(fields, "details_json"));
    }

    /**
     * @return the server's signed evidence of this error (e.g. a live reservation's 409
     *     denial), when its body referenced one; fetch it with {@link CyclesClient#getEvidence}
     */
    public Optional<EvidenceRef> cyclesEvidence() {
        return Optional.ofNullable(EvidenceRef.from(Json.obj(fields, "cycles_evidence")));
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder(getClass().getName()).append(": [").append(errorName()).append("] ");
        httpStatusIfAny().ifPresent(s -> b.append("HTTP ").append(s).append(": "));
        b.append(getMessage());
        serverErrorCode().filter(c -> !c.equals(errorName())).ifPresent(c -> b.append(" (server code ").append(c).append(')'));
        requestId().ifPresent(r -> b.append(" (request_id ").append(r).append(')'));
        return b.toString();
    }
}
