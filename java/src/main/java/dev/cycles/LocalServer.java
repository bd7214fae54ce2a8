package dev.cycles;

import dev.cycles.internal.Json;
import dev.cycles.internal.Native;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
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
 *
 * Configured with {@link #builder()}, e.g. a small budget that a larger estimate exceeds:
 *
 * <pre>{@code
 * try (LocalServer server = LocalServer.builder().budget("tenant:acme", "USD_MICROCENTS", 1_000).start()) { ... }
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
     *     omitted fields keep their defaults); {@link #builder()} writes it from typed values
     * @return the running server
     * @throws dev.cycles.errors.InvalidArgumentException when the JSON is not a server config:
     *     malformed, a wrong type, or a key the config does not have (the message names it,
     *     e.g. {@code unknown field `alocated`}), instead of that key being ignored
     */
    public static LocalServer start(String configJson) {
        return new LocalServer(Native.serverStart(configJson));
    }

    /** @return a builder of the server's configuration; what it is not told keeps its default */
    public static Builder builder() {
        return new Builder();
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

    /**
     * @param ruleJson a scripted fault ({@code FaultRule} as JSON)
     * @throws dev.cycles.errors.InvalidArgumentException when it is not a rule, an unknown key
     *     included (named in the message)
     */
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

    /** An operator's budget status ({@link Builder#budget(String, String, long, long, BudgetStatus)}). */
    public enum BudgetStatus {
        /** Normal operation. */
        ACTIVE,
        /** No new reservations: 409 {@code BUDGET_FROZEN}. */
        FROZEN,
        /** Permanently closed: 409 {@code BUDGET_CLOSED}. */
        CLOSED
    }

    /** How the server serialises its responses. */
    public enum Mode {
        /** Exactly what the spec declares (the default). */
        SPEC,
        /** Like the reference server (explicit nulls, its status and header quirks). */
        REFERENCE
    }

    /** How a same-key request's payload is compared with the stored one. */
    public enum IdempotencyCompare {
        /** The body's JSON as sent (key order significant), like the reference server (the default). */
        EXACT,
        /** Canonical JSON (sorted keys), as the spec recommends. */
        CANONICAL
    }

    /**
     * The local server's configuration (its {@code ServerConfig}), typed. Every setting left
     * alone keeps the server's default: one tenant {@code acme} with the key
     * {@code cycles-local-key}, admin key {@code cycles-local-admin}, one {@code tenant:acme}
     * budget of 10 000 000 000 {@code USD_MICROCENTS}, additive extensions (at most 10 per
     * reservation), evidence on, spec mode, exact idempotency comparison. The first
     * {@link #tenant} or {@link #budget} call replaces the default tenants or budgets; later
     * ones add to them. Values are checked by the server's config when {@link #start()} runs
     * (an {@link dev.cycles.errors.InvalidArgumentException} naming what is wrong).
     */
    public static final class Builder {
        private final List<Object> tenants = new ArrayList<>();
        private final List<Object> budgets = new ArrayList<>();
        private final Map<String, Object> regime = new LinkedHashMap<>();
        private final Map<String, Object> config = new LinkedHashMap<>();

        private Builder() {}

        /**
         * Adds a tenant (the first call replaces the default {@code acme}); the server's
         * {@link LocalServer#apiKey()} and {@link LocalServer#tenant()} are the first tenant's.
         *
         * @param id the tenant id (the {@code tenant} subject value)
         * @param apiKeys the keys that authenticate as it ({@code X-Cycles-API-Key})
         * @return this
         */
        public Builder tenant(String id, String... apiKeys) {
            return tenant(id, false, apiKeys);
        }

        /**
         * Adds a tenant that starts CLOSED: its persisting operations get 409 {@code TENANT_CLOSED}.
         *
         * @param id the tenant id
         * @param apiKeys the keys that authenticate as it
         * @return this
         */
        public Builder closedTenant(String id, String... apiKeys) {
            return tenant(id, true, apiKeys);
        }

        private Builder tenant(String id, boolean closed, String... apiKeys) {
            Map<String, Object> t = new LinkedHashMap<>();
            t.put("id", id);
            t.put("api_keys", Arrays.asList(apiKeys));
            t.put("closed", closed);
            tenants.add(t);
            return this;
        }

        /**
         * @param key the key accepted in {@code X-Admin-API-Key} on list, get and release;
         *     null: no admin authentication
         * @return this
         */
        public Builder adminApiKey(String key) {
            config.put("admin_api_key", key);
            return this;
        }

        /**
         * Adds an active budget without overdraft (the first call replaces the default budget).
         *
         * @param scope the canonical scope, e.g. {@code tenant:acme} or {@code tenant:acme/workspace:prod}
         * @param unit the unit's wire name ({@code USD_MICROCENTS}, {@code TOKENS}, {@code CREDITS}, {@code RISK_POINTS})
         * @param allocated the amount allocated
         * @return this
         */
        public Builder budget(String scope, String unit, long allocated) {
            return budget(scope, unit, allocated, 0, BudgetStatus.ACTIVE);
        }

        /**
         * Adds a budget (the first call replaces the default budget).
         *
         * @param scope the canonical scope
         * @param unit the unit's wire name
         * @param allocated the amount allocated
         * @param overdraftLimit the most debt {@code ALLOW_WITH_OVERDRAFT} may accrue
         * @param status the operator's status
         * @return this
         */
        public Builder budget(String scope, String unit, long allocated, long overdraftLimit, BudgetStatus status) {
            Map<String, Object> b = new LinkedHashMap<>();
            b.put("scope", scope);
            b.put("unit", unit);
            b.put("allocated", allocated);
            b.put("overdraft_limit", overdraftLimit);
            b.put("status", status == null ? null : status.name());
            budgets.add(b);
            return this;
        }

        /**
         * Adds an active budget that grants caps: a reservation under it is
         * {@code ALLOW_WITH_CAPS} with these caps (the first call replaces the default budget).
         *
         * @param scope the canonical scope
         * @param unit the unit's wire name
         * @param allocated the amount allocated
         * @param caps the caps granted (null members are left out)
         * @return this
         */
        public Builder budget(String scope, String unit, long allocated, Caps caps) {
            budget(scope, unit, allocated);
            @SuppressWarnings("unchecked")
            Map<String, Object> b = (Map<String, Object>) budgets.get(budgets.size() - 1);
            Map<String, Object> c = new LinkedHashMap<>();
            c.put("max_tokens", caps.maxTokens());
            c.put("max_steps_remaining", caps.maxStepsRemaining());
            c.put("tool_allowlist", caps.toolAllowlist());
            c.put("tool_denylist", caps.toolDenylist());
            c.put("cooldown_ms", caps.cooldownMs());
            c.values().removeIf(java.util.Objects::isNull);
            b.put("caps", c);
            return this;
        }

        /** @param on whether live create and extend successes carry {@code remaining_ttl_ms} (default true) @return this */
        public Builder emitRemainingTtl(boolean on) {
            regime.put("emit_remaining_ttl", on);
            return this;
        }

        /** Extensions add {@code extend_by_ms} to the expiry (the default). @return this */
        public Builder extendAdditive() {
            return extend("additive", null, 0);
        }

        /** @param maxGrantMs the largest grant of one extension (expiry + min(extend_by, this)) @return this */
        public Builder extendGrantCap(long maxGrantMs) {
            return extend("grant_cap", "max_grant_ms", maxGrantMs);
        }

        /** @param maxLeadMs the largest lead (expiry - now) an extension may establish @return this */
        public Builder extendMaxLead(long maxLeadMs) {
            return extend("max_lead", "max_lead_ms", maxLeadMs);
        }

        private Builder extend(String kind, String key, long ms) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("kind", kind);
            if (key != null) {
                e.put(key, ms);
            }
            regime.put("extend", e);
            return this;
        }

        /** @param ms the cap on the TTL granted at create (default none) @return this */
        public Builder initialTtlCapMs(long ms) {
            regime.put("initial_ttl_cap_ms", ms);
            return this;
        }

        /** @param n the extensions allowed per reservation (default 10) @return this */
        public Builder maxExtensions(int n) {
            regime.put("max_extensions", n);
            return this;
        }

        /** No limit on extensions per reservation. @return this */
        public Builder unlimitedExtensions() {
            regime.put("max_extensions", null);
            return this;
        }

        /** @param compare how a same-key request's payload is compared @return this */
        public Builder idempotencyCompare(IdempotencyCompare compare) {
            config.put("idempotency_compare", compare == null ? null : compare.name().toLowerCase(Locale.ROOT));
            return this;
        }

        /** @param on whether {@code cycles_evidence} refs are emitted and envelopes served (default true) @return this */
        public Builder evidence(boolean on) {
            config.put("evidence", on);
            return this;
        }

        /** @param mode the wire dialect (default {@link Mode#SPEC}) @return this */
        public Builder mode(Mode mode) {
            config.put("mode", mode == null ? null : mode.name().toLowerCase(Locale.ROOT));
            return this;
        }

        /** @param port the port on 127.0.0.1 (default 0: an ephemeral one) @return this */
        public Builder port(int port) {
            config.put("bind", "127.0.0.1:" + port);
            return this;
        }

        /** @return the configuration as the server's {@code ServerConfig} JSON (what {@link #start()} passes) */
        public String configJson() {
            Map<String, Object> out = new LinkedHashMap<>(config);
            if (!tenants.isEmpty()) {
                out.put("tenants", tenants);
            }
            if (!budgets.isEmpty()) {
                out.put("budgets", budgets);
            }
            if (!regime.isEmpty()) {
                out.put("regime", regime);
            }
            return Json.write(out);
        }

        /** @return the running server */
        public LocalServer start() {
            return LocalServer.start(configJson());
        }
    }
}
