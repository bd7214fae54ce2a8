package dev.cycles.spring;

import dev.cycles.HeartbeatPolicy;
import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * The {@code cycles.*} properties: the {@link dev.cycles.CyclesClient} bean's options and the
 * defaults of {@link Cycles @Cycles}. The official starter's names ({@code cycles.http.*},
 * {@code cycles.retry.*}) are accepted too and mapped (docs/spring.md has the table); a
 * property set under both names is a startup failure naming both.
 */
@ConfigurationProperties(prefix = "cycles")
public class CyclesProperties {
    /** The Cycles server's base URL, e.g. {@code https://cycles.example.com}. */
    private String baseUrl;
    /** The API key, sent as {@code X-Cycles-API-Key} (never logged). */
    private String apiKey;
    /** The default tenant: the subject of a guarded action that names none. */
    private String tenant;
    /** The unit of an estimate whose {@code @Cycles} names none: USD_MICROCENTS (default), TOKENS, CREDITS, RISK_POINTS. */
    private String defaultUnit;
    /** The default workspace of {@code @Cycles} subjects. */
    private String workspace;
    /** The default app of {@code @Cycles} subjects. */
    private String app;
    /** The default workflow of {@code @Cycles} subjects. */
    private String workflow;
    /** The default agent of {@code @Cycles} subjects. */
    private String agent;
    /** The default toolset of {@code @Cycles} subjects. */
    private String toolset;
    /** The per-attempt request timeout (core's default when unset). */
    private Duration requestTimeout;
    /** The connect timeout (core's default when unset). */
    private Duration connectTimeout;
    /** Bound on concurrent requests to the server. */
    private Integer maxConcurrentRequests;
    /** Settle attempts before a settlement is left pending in the journal (at least 1). */
    private Integer settleMaxAttempts;
    /** How often the background replay of pending settlements runs. */
    private Duration replayInterval;
    /** How long the shutdown drain may take (default 5s); what is left stays journaled. */
    private Duration closeTimeout;
    /** Also read unset options from the CYCLES_* environment variables, as CyclesClient.fromEnv(). */
    private boolean fromEnv;

    private final Journal journal = new Journal();
    private final Heartbeat heartbeat = new Heartbeat();
    private final Http http = new Http();
    private final Retry retry = new Retry();

    /** The durable settlement journal. */
    public static class Journal {
        /** Whether settlements are journaled before they are sent. */
        private boolean enabled = true;
        /** The journal's directory (core's default when unset). */
        private String dir;
        /**
         * The journal in Redis instead of the directory ({@code redis://host:port/db}, with
         * {@code ?durability=} and {@code &lease_ms=} as docs/journal.md says): shared by every
         * replica of a fleet, so a settlement outlives the machine that journaled it.
         */
        private String url;

        public boolean isEnabled() { return enabled; }
        public void setEnabled(boolean enabled) { this.enabled = enabled; }
        public String getDir() { return dir; }
        public void setDir(String dir) { this.dir = dir; }
        public String getUrl() { return url; }
        public void setUrl(String url) { this.url = url; }
    }

    /** The heartbeat of {@code @Cycles} methods. */
    public static class Heartbeat {
        /** Whether {@code @Cycles} methods keep their lease alive while they run (per method: heartbeat = false). */
        private boolean enabled = true;
        /** What the heartbeat does when it cannot keep the lease: WARN, FAIL_ON_FINALIZE or CANCEL. */
        private HeartbeatPolicy policy = HeartbeatPolicy.WARN;

        public boolean isEnabled() { return enabled; }
        public void setEnabled(boolean enabled) { this.enabled = enabled; }
        public HeartbeatPolicy getPolicy() { return policy; }
        public void setPolicy(HeartbeatPolicy policy) { this.policy = policy; }
    }

    /** The official starter's HTTP settings, mapped onto the client's timeouts. */
    public static class Http {
        /** The official starter's name of cycles.connect-timeout. */
        private Duration connectTimeout;
        /** The official starter's name of cycles.request-timeout. */
        private Duration readTimeout;

        public Duration getConnectTimeout() { return connectTimeout; }
        public void setConnectTimeout(Duration connectTimeout) { this.connectTimeout = connectTimeout; }
        public Duration getReadTimeout() { return readTimeout; }
        public void setReadTimeout(Duration readTimeout) { this.readTimeout = readTimeout; }
    }

    /** The official starter's commit-retry settings, mapped where the core has a counterpart. */
    public static class Retry {
        /** false: one settle attempt (cycles.settle-max-attempts=1); the journal still replays. */
        private Boolean enabled;
        /** The official starter's name of cycles.settle-max-attempts. */
        private Integer maxAttempts;
        /** Accepted, not used: the core's backoff schedule applies (logged at startup). */
        private Duration initialDelay;
        /** Accepted, not used: the core's backoff schedule applies (logged at startup). */
        private Double multiplier;
        /** Accepted, not used: the core's backoff schedule applies (logged at startup). */
        private Duration maxDelay;
        /** The official starter's name of cycles.close-timeout. */
        private Duration flushTimeout;

        public Boolean getEnabled() { return enabled; }
        public void setEnabled(Boolean enabled) { this.enabled = enabled; }
        public Integer getMaxAttempts() { return maxAttempts; }
        public void setMaxAttempts(Integer maxAttempts) { this.maxAttempts = maxAttempts; }
        public Duration getInitialDelay() { return initialDelay; }
        public void setInitialDelay(Duration initialDelay) { this.initialDelay = initialDelay; }
        public Double getMultiplier() { return multiplier; }
        public void setMultiplier(Double multiplier) { this.multiplier = multiplier; }
        public Duration getMaxDelay() { return maxDelay; }
        public void setMaxDelay(Duration maxDelay) { this.maxDelay = maxDelay; }
        public Duration getFlushTimeout() { return flushTimeout; }
        public void setFlushTimeout(Duration flushTimeout) { this.flushTimeout = flushTimeout; }
    }

    public String getBaseUrl() { return baseUrl; }
    public void setBaseUrl(String baseUrl) { this.baseUrl = baseUrl; }
    public String getApiKey() { return apiKey; }
    public void setApiKey(String apiKey) { this.apiKey = apiKey; }
    public String getTenant() { return tenant; }
    public void setTenant(String tenant) { this.tenant = tenant; }
    public String getDefaultUnit() { return defaultUnit; }
    public void setDefaultUnit(String defaultUnit) { this.defaultUnit = defaultUnit; }
    public String getWorkspace() { return workspace; }
    public void setWorkspace(String workspace) { this.workspace = workspace; }
    public String getApp() { return app; }
    public void setApp(String app) { this.app = app; }
    public String getWorkflow() { return workflow; }
    public void setWorkflow(String workflow) { this.workflow = workflow; }
    public String getAgent() { return agent; }
    public void setAgent(String agent) { this.agent = agent; }
    public String getToolset() { return toolset; }
    public void setToolset(String toolset) { this.toolset = toolset; }
    public Duration getRequestTimeout() { return requestTimeout; }
    public void setRequestTimeout(Duration requestTimeout) { this.requestTimeout = requestTimeout; }
    public Duration getConnectTimeout() { return connectTimeout; }
    public void setConnectTimeout(Duration connectTimeout) { this.connectTimeout = connectTimeout; }
    public Integer getMaxConcurrentRequests() { return maxConcurrentRequests; }
    public void setMaxConcurrentRequests(Integer maxConcurrentRequests) { this.maxConcurrentRequests = maxConcurrentRequests; }
    public Integer getSettleMaxAttempts() { return settleMaxAttempts; }
    public void setSettleMaxAttempts(Integer settleMaxAttempts) { this.settleMaxAttempts = settleMaxAttempts; }
    public Duration getReplayInterval() { return replayInterval; }
    public void setReplayInterval(Duration replayInterval) { this.replayInterval = replayInterval; }
    public Duration getCloseTimeout() { return closeTimeout; }
    public void setCloseTimeout(Duration closeTimeout) { this.closeTimeout = closeTimeout; }
    public boolean isFromEnv() { return fromEnv; }
    public void setFromEnv(boolean fromEnv) { this.fromEnv = fromEnv; }
    public Journal getJournal() { return journal; }
    public Heartbeat getHeartbeat() { return heartbeat; }
    public Http getHttp() { return http; }
    public Retry getRetry() { return retry; }
}
