package dev.cycles;

import dev.cycles.internal.Json;
import dev.cycles.internal.Native;
import java.util.Map;

/**
 * A local Cycles server in this process (the SDK's {@code cycles-local-server}, on
 * 127.0.0.1, an ephemeral port), for users' own tests: the whole runtime plane, an in-memory
 * ledger, scripted faults and a clock that can be moved forward. Not for production.
 *
 * <pre>{@code
 * try (LocalServer server = LocalServer.start();
 *      CyclesClient client = CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey())
 *              .tenant(server.tenant()).build()) { ... }
 * }</pre>
 */
public final class LocalServer implements AutoCloseable {
    private final long id;
    private final String url;
    private final String apiKey;
    private final String tenant;

    private LocalServer(String infoJson) {
        Map<String, Object> m = Json.object(infoJson);
        this.id = Json.lng(m, "id");
        this.url = Json.str(m, "url");
        this.apiKey = Json.str(m, "api_key");
        this.tenant = Json.str(m, "tenant");
    }

    /** @return a server with the defaults: tenant {@code acme}, key {@code cycles-local-key}, a large budget */
    public static LocalServer start() {
        return new LocalServer(Native.serverStart(null));
    }

    /**
     * @param configJson the server's {@code ServerConfig} as JSON (conformance/server/README.md;
     *     omitted fields keep their defaults)
     * @return the running server
     */
    public static LocalServer start(String configJson) {
        return new LocalServer(Native.serverStart(configJson));
    }

    /** @return {@code http://127.0.0.1:PORT} */
    public String url() {
        return url;
    }

    /** @return the API key of the first configured tenant */
    public String apiKey() {
        return apiKey;
    }

    /** @return the first configured tenant */
    public String tenant() {
        return tenant;
    }

    /** @return every mutation the server applied ({@code LedgerEntry[]}) as JSON */
    public String ledgerJson() {
        return Native.serverDump(id, "ledger");
    }

    /** @return every request the server received as JSON */
    public String requestsJson() {
        return Native.serverDump(id, "requests");
    }

    /** @param ruleJson a scripted fault ({@code FaultRule} as JSON) */
    public void addFault(String ruleJson) {
        if (ruleJson == null) {
            throw new IllegalArgumentException("ruleJson must not be null");
        }
        Native.serverFault(id, ruleJson);
    }

    /** Removes every fault rule. */
    public void clearFaults() {
        Native.serverFault(id, null);
    }

    /** @param ms how far to move the server's clock forward (lease expiry without waiting) */
    public void advanceClock(long ms) {
        Native.serverAdvanceClock(id, ms);
    }

    /** Stops the server (idempotent). */
    @Override
    public void close() {
        Native.serverStop(id);
    }
}
