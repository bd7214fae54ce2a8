package dev.cycles.spring;

import dev.cycles.Journal;
import dev.cycles.internal.Json;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * The journal's pending records of this client's identity (base URL, API key, tenant), listed by
 * the SDK's {@link Journal#pending(String, String, String, String)} where the client journals:
 * the health indicator's and the depth gauge's source. That is {@code cycles.journal.url} (a
 * Redis journal), else {@code CYCLES_JOURNAL_URL} with {@code cycles.from-env}, else the
 * directory: {@code cycles.journal.dir}, else {@code CYCLES_JOURNAL_DIR} with
 * {@code cycles.from-env}, else core's default {@code $HOME/.runcycles/commit-journal}.
 */
final class JournalStatus {
    /** @param count pending records @param oldestMs the oldest one's recorded time (epoch ms), or null */
    record Depth(int count, Long oldestMs) {}

    private final CyclesProperties props;

    JournalStatus(CyclesProperties props) {
        this.props = props;
    }

    boolean enabled() {
        return props.getJournal().isEnabled();
    }

    /** The Redis journal's URL, or null when the journal is a directory. */
    String url() {
        if (props.getJournal().getUrl() != null) {
            return props.getJournal().getUrl();
        }
        String env = props.isFromEnv() ? System.getenv("CYCLES_JOURNAL_URL") : null;
        return env != null && !env.isBlank() ? env : null;
    }

    Path dir() {
        if (props.getJournal().getDir() != null) {
            return Path.of(props.getJournal().getDir());
        }
        String env = props.isFromEnv() ? System.getenv("CYCLES_JOURNAL_DIR") : null;
        if (env != null && !env.isBlank()) {
            return Path.of(env);
        }
        return Path.of(System.getProperty("user.home"), ".runcycles", "commit-journal");
    }

    /**
     * @throws dev.cycles.CyclesException when the journal cannot be read (a Redis that does not
     *     answer): the message says why
     */
    @SuppressWarnings("unchecked")
    Depth depth() {
        String url = url();
        String place;
        if (url != null) {
            place = url;
        } else {
            Path dir = dir();
            if (!Files.isDirectory(dir)) {
                return new Depth(0, null);
            }
            place = dir.toString();
        }
        List<Object> records = (List<Object>) Json.parse(Journal.pending(place, props.getBaseUrl(), props.getApiKey(), props.getTenant()));
        Long oldest = null;
        for (Object o : records) {
            Long at = Json.lng((Map<String, Object>) o, "recorded_at_ms");
            if (at != null && (oldest == null || at < oldest)) {
                oldest = at;
            }
        }
        return new Depth(records.size(), oldest);
    }
}
