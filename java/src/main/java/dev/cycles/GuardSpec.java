package dev.cycles;

import dev.cycles.internal.Json;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;

/**
 * What a guarded action reserves: an action and an estimate, and optionally its subject (default:
 * the client's tenant), unit (default {@code USD_MICROCENTS}), idempotency key (default: a fresh
 * {@code cycles-<uuid>} per action; settlement uses {@code <key>:commit} / {@code <key>:release}),
 * lease TTL, grace period, overage policy, metadata, heartbeat and heartbeat policy. A fluent
 * builder: configure it once, then share it (each action gets its own key unless one is set).
 */
public final class GuardSpec {
    private final Action action;
    private final long estimate;
    private String unit = Amount.USD_MICROCENTS;
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
     * @param estimate what to reserve, in the unit (default {@code USD_MICROCENTS})
     * @return a spec with every other member at its default
     */
    public static GuardSpec of(Action action, long estimate) {
        return new GuardSpec(action, estimate);
    }

    /** @param unit the unit of the estimate and actual @return this */
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

    String toJson(String defaultTenant) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("idempotency_key", idempotencyKey != null ? idempotencyKey : "cycles-" + UUID.randomUUID());
        Subject s = subject != null ? subject : Subject.tenant(defaultTenant);
        m.put("subject", s.toJson());
        m.put("action", action == null ? null : action.toJson());
        m.put("estimate", new Amount(unit, estimate).toJson());
        m.put("ttl_ms", ttlMs);
        m.put("grace_period_ms", gracePeriodMs);
        m.put("overage_policy", overagePolicy);
        m.put("metadata", metadataJson == null ? null : new Json.Raw(metadataJson));
        m.put("heartbeat", heartbeat);
        m.put("policy", policy.wire);
        return Json.write(m);
    }
}
