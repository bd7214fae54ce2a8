package dev.cycles.internal;

/**
 * The JNI surface of libcycles_jvm (bindings/jvm). Not an API: the public classes of
 * {@code dev.cycles} wrap it. Every method throws the SDK's exceptions
 * ({@code CyclesException.fromNative}); ids are registry ids, a stale id throws the closed
 * error. Methods named {@code *Async} queue their result for {@link Completions}.
 */
public final class Native {
    static {
        NativeLoader.load();
    }

    private Native() {}

    /** Forces the library to load (no-op once loaded). */
    public static void ensureLoaded() {}

    public static native String errorCodes();

    public static native long clientNew(String optionsJson, boolean fromEnv);

    public static native String clientInfo(long client);

    public static native String clientCall(long client, String op, String argsJson);

    public static native void clientCallAsync(long client, String op, String argsJson, long future);

    public static native long clientLifecycle(long client);

    public static native String lifeNextEvents(long life, long timeoutMs);

    public static native void lifeSetEventFloor(long life, int floor);

    public static native String clientFlush(long client);

    public static native String clientDrain(long client, long timeoutMs);

    public static native String clientClose(long client, long timeoutMs);

    public static native boolean clientIsClosed(long client);

    public static native long guardBegin(long client, String specJson);

    public static native void guardBeginAsync(long client, String specJson, long future);

    public static native String activeReservationId(long active);

    public static native String activeInfo(long active);

    public static native String activeRelease(long active, String reason);

    public static native String activePlanCaps(long active, String api, String requestJson);

    public static native void activeSetActual(long active, long amount);

    public static native void activeAdd(long active, long amount);

    public static native String activeActual(long active);

    public static native void activeSetJson(long active, boolean metadata, String json);

    public static native boolean activeCancelled(long active);

    public static native String activeFinish(long active, boolean succeeded);

    public static native void activeFinishAsync(long active, boolean succeeded, long future);

    public static native void free(long id);

    public static native long liveHandles();

    public static native String poll(long timeoutMs);

    public static native void debugPanic(String message, long future);

    public static native String serverStart(String configJson);

    public static native String serverDump(long server, String what);

    public static native void serverFault(long server, String ruleJson);

    public static native void serverAdvanceClock(long server, long ms);

    public static native void serverStop(long server);

    public static native String timingCall(String name, String argsJson);

    public static native String pricingCall(String name, String argsJson);

    public static native long primaryNew(String requestTimeoutJson, boolean derive);

    public static native String primaryStep(long planner, String stepJson);

    public static native String primaryAttemptTimeout(long planner);

    public static native long fallbackNew(String requestedTtlMs, String receivedUs, long expiresAtMs);

    public static native String fallbackFirstBeat(long planner, boolean prime);

    public static native String fallbackStep(long planner, String stepJson);

    public static native String fallbackRegime(long planner);

    public static native String fallbackLeadMinMs(long planner, long nowUs);

    public static native String journalFingerprint(String baseUrl, String apiKey, String tenant);

    public static native String journalFileName(String reservationId, boolean legacy);

    public static native String journalParseRecord(byte[] data);

    public static native String journalPending(String dir, String baseUrl, String apiKey, String tenant);

    public static native String decodeCaptured(String operation, int status, String headersJson, byte[] body);
}
