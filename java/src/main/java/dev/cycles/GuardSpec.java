package dev.cycles;

import dev.cycles.internal.Json;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What a guarded action reserves: an action and an estimate, and optionally its subject (default:
 * the client's tenant), unit (default: the client's {@link CyclesClient.Builder#defaultUnit},
 * else {@code USD_MICROCENTS}), idempotency key (default: a fresh {@code cycles-<uuid>} per
 * action; settlement uses {@code <key>:commit} / {@code <key>:release}),
 * lease TTL, grace period, overage policy, metadata, heartbeat and heartbeat policy. A fluent
 * builder: configure it once, then share it (each action gets its own key unless one is set).
 * Only the members set here are sent; the defaults are filled by the native bridge, the same
 * for every language (docs/lifecycle.md).
 */
public final class GuardSpec {
    private final Action action;
    private final long estimate;
    private String unit;
    private Subject subject;
    private String idempotencyKey;
    private Long ttlMs;
    private Long gracePeriodMs;
    private String overagePolicy;
    private String metadataJson;
    private boolean heartbeat = true;
    private HeartbeatPolicy policy = HeartbeatPolicy.WARN;

    private GuardSpec(Action action, long estimate) {
        this.action = action;
        this.estimate = estimate;
    }

    /**
     * @param action what is paid for
     * @param estimate what to reserve, in the unit (default: the client's default unit)
     * @return a spec with every other member at its default
     */
    public static GuardSpec of(Action action, long estimate) {
        return new GuardSpec(action, estimate);
    }

    /** @param unit the unit of the estimate and actual (default: the client's default unit) @return this */
    public GuardSpec unit(String unit) {
        this.unit = unit;
        return this;
    }

    /** @param subject who spends (default: the client's tenant) @return this */
    public GuardSpec subject(Subject subject) {
        this.subject = subject;
        return this;
    }

    /** @param key the reservation's idempotency key (one action per key) @return this */
    public GuardSpec idempotencyKey(String key) {
        this.idempotencyKey = key;
        return this;
    }

    /** @param ttlMs the lease in milliseconds (core's default: 60000) @return this */
    public GuardSpec ttlMs(long ttlMs) {
        this.ttlMs = ttlMs;
        return this;
    }

    /** @param ms the grace period after expiry in milliseconds @return this */
    public GuardSpec gracePeriodMs(long ms) {
        this.gracePeriodMs = ms;
        return this;
    }

    /** @param policy {@code REJECT}, {@code ALLOW_IF_AVAILABLE} or {@code ALLOW_WITH_OVERDRAFT} @return this */
    public GuardSpec overagePolicy(String policy) {
        this.overagePolicy = policy;
        return this;
    }

    /** @param json the reservation's metadata as a JSON object, sent exactly as written @return this */
    public GuardSpec metadataJson(String json) {
        this.metadataJson = json;
        return this;
    }

    /** @param on false: no heartbeat (the lease is not extended) @return this */
    public GuardSpec heartbeat(boolean on) {
        this.heartbeat = on;
        return this;
    }

    /** @param policy what the heartbeat does when it cannot keep the lease @return this */
    public GuardSpec policy(HeartbeatPolicy policy) {
        this.policy = policy;
        return this;
    }

    String toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("action", action == null ? null : action.toJson());
        m.put("estimate", estimate);
        putIf(m, "unit", unit);
        putIf(m, "idempotency_key", idempotencyKey);
        putIf(m, "subject", subject == null ? null : subject.toJson());
        putIf(m, "ttl_ms", ttlMs);
        putIf(m, "grace_period_ms", gracePeriodMs);
        putIf(m, "overage_policy", overagePolicy);
        putIf(m, "metadata", metadataJson == null ? null : new Json.Raw(metadataJson));
        m.put("heartbeat", heartbeat);
        m.put("policy", policy.wire);
        return Json.write(m);
    }

    private static void putIf(Map<String, Object> m, String k, Object v) {
        if (v != null) {
            m.put(k, v);
        }
    }
}
