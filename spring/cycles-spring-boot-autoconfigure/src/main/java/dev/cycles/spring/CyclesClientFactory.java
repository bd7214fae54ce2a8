package dev.cycles.spring;

import dev.cycles.CyclesClient;
import dev.cycles.CyclesException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.springframework.boot.context.properties.source.InvalidConfigurationPropertyValueException;

/**
 * Builds the {@link CyclesClient} from {@link CyclesProperties}: each client option from our
 * property or the official starter's name for it (both set: a startup failure naming both),
 * and the client's own checks (core's, which name the option) reported as an
 * {@link InvalidConfigurationPropertyValueException} naming the property that was set, so
 * Spring Boot's failure analysis prints "Invalid value ... for configuration property ...".
 */
final class CyclesClientFactory {
    private static final Log LOG = LogFactory.getLog(CyclesClientFactory.class);

    /** One client option: the property it came from, its value, and the words core's messages use for it. */
    private record Option(String property, Object value, String... words) {}

    private final Map<String, Option> options = new LinkedHashMap<>();

    private CyclesClientFactory() {}

    static CyclesClient build(CyclesProperties p) {
        return new CyclesClientFactory().create(p);
    }

    private CyclesClient create(CyclesProperties p) {
        put("base_url", "cycles.base-url", p.getBaseUrl(), "base url");
        put("api_key", "cycles.api-key", p.getApiKey(), "api key");
        put("tenant", "cycles.tenant", p.getTenant(), "tenant");
        put("default_unit", "cycles.default-unit", p.getDefaultUnit(), "default unit");
        either("request_timeout", "cycles.request-timeout", p.getRequestTimeout(), "cycles.http.read-timeout",
                p.getHttp().getReadTimeout(), "request timeout");
        either("connect_timeout", "cycles.connect-timeout", p.getConnectTimeout(), "cycles.http.connect-timeout",
                p.getHttp().getConnectTimeout(), "connect timeout");
        Integer attempts = p.getRetry().getMaxAttempts();
        String attemptsName = "cycles.retry.max-attempts";
        if (Boolean.FALSE.equals(p.getRetry().getEnabled())) {
            if (attempts != null) {
                throw new InvalidConfigurationPropertyValueException("cycles.retry.enabled", false,
                        "cycles.retry.enabled=false means one settle attempt; cycles.retry.max-attempts is set too");
            }
            attempts = 1;
            attemptsName = "cycles.retry.enabled";
        }
        either("settle_max_attempts", "cycles.settle-max-attempts", p.getSettleMaxAttempts(), attemptsName, attempts,
                "max attempts", "settle");
        put("max_concurrent_requests", "cycles.max-concurrent-requests", p.getMaxConcurrentRequests(),
                "max concurrent requests");
        put("replay_interval", "cycles.replay-interval", p.getReplayInterval(), "replay interval");
        either("close_timeout", "cycles.close-timeout", p.getCloseTimeout(), "cycles.retry.flush-timeout",
                p.getRetry().getFlushTimeout(), "close timeout");
        // Before journal_dir: a core message about the URL names "journal url", which the
        // directory's word "journal" would also match.
        put("journal_url", "cycles.journal.url", p.getJournal().getUrl(), "journal url");
        put("journal_dir", "cycles.journal.dir", p.getJournal().getDir(), "journal");
        for (String ignored : new String[] {"initial-delay", "multiplier", "max-delay"}) {
            Object v = switch (ignored) {
                case "initial-delay" -> p.getRetry().getInitialDelay();
                case "multiplier" -> p.getRetry().getMultiplier();
                default -> p.getRetry().getMaxDelay();
            };
            if (v != null) {
                LOG.warn("cycles.retry." + ignored + " is accepted but not used: the core's settle backoff applies (docs/spring.md)");
            }
        }

        CyclesClient.Builder b = CyclesClient.builder();
        if (p.isFromEnv()) {
            b.fromEnv();
        }
        b.journalEnabled(p.getJournal().isEnabled());
        try {
            for (Map.Entry<String, Option> e : options.entrySet()) {
                Object v = e.getValue().value();
                switch (e.getKey()) {
                    case "base_url" -> b.baseUrl((String) v);
                    case "api_key" -> b.apiKey((String) v);
                    case "tenant" -> b.tenant((String) v);
                    case "default_unit" -> b.defaultUnit((String) v);
                    case "request_timeout" -> b.requestTimeout((Duration) v);
                    case "connect_timeout" -> b.connectTimeout((Duration) v);
                    case "settle_max_attempts" -> b.settleMaxAttempts((Integer) v);
                    case "max_concurrent_requests" -> b.maxConcurrentRequests((Integer) v);
                    case "replay_interval" -> b.replayInterval((Duration) v);
                    case "close_timeout" -> b.closeTimeout((Duration) v);
                    case "journal_url" -> b.journalUrl((String) v);
                    case "journal_dir" -> b.journalDir(Path.of((String) v));
                    default -> throw new IllegalStateException(e.getKey());
                }
            }
            return b.build();
        } catch (CyclesException e) {
            throw named(e);
        }
    }

    /** The client's error as a property error: the option its message names, else the message alone. */
    private RuntimeException named(CyclesException e) {
        String text = String.valueOf(e.getMessage()).toLowerCase(Locale.ROOT).replace('_', ' ');
        for (Option o : options.values()) {
            for (String w : o.words()) {
                if (text.contains(w)) {
                    String shown = o.property().equals("cycles.api-key") ? "<redacted>" : String.valueOf(o.value());
                    // The exception takes no cause: the core's message is its reason.
                    return new InvalidConfigurationPropertyValueException(o.property(), shown, e.getMessage());
                }
            }
        }
        if (text.contains("base url")) {
            return new InvalidConfigurationPropertyValueException("cycles.base-url", null, e.getMessage() + " (set cycles.base-url)");
        }
        if (text.contains("api key")) {
            return new InvalidConfigurationPropertyValueException("cycles.api-key", null, e.getMessage() + " (set cycles.api-key)");
        }
        return new IllegalStateException("the cycles.* properties: " + e.getMessage(), e);
    }

    private void put(String option, String property, Object value, String... words) {
        if (value != null) {
            options.put(option, new Option(property, value, words));
        }
    }

    private void either(String option, String ours, Object ourValue, String official, Object officialValue, String... words) {
        if (ourValue != null && officialValue != null) {
            throw new InvalidConfigurationPropertyValueException(official, officialValue,
                    "set either " + ours + " or " + official + " (the official starter's name for it), not both");
        }
        if (ourValue != null) {
            put(option, ours, ourValue, words);
        } else {
            put(option, official, officialValue, words);
        }
    }
}
