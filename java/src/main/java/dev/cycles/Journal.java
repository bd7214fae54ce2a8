package dev.cycles;

import dev.cycles.internal.Native;
import java.nio.file.Path;

/**
 * Core's durable settlement journal helpers (docs/journal.md): the identity partition, record
 * file names, record parsing and the pending scan. The client journals and replays by itself;
 * these are for tools and tests.
 */
public final class Journal {
    private Journal() {}

    /**
     * @param baseUrl the server
     * @param apiKey the API key
     * @param tenant the tenant, or null
     * @return the identity partition ({@code fp16}): the journal subdirectory of that identity
     */
    public static String fingerprint(String baseUrl, String apiKey, String tenant) {
        return Native.journalFingerprint(baseUrl, apiKey, tenant);
    }

    /** @param reservationId a reservation @return its record's file name */
    public static String fileName(String reservationId) {
        return Native.journalFileName(reservationId, false);
    }

    /** @param reservationId a reservation @return its record's legacy (pre-v2) file name */
    public static String legacyFileName(String reservationId) {
        return Native.journalFileName(reservationId, true);
    }

    /**
     * Parses a record file.
     *
     * @param data the file's bytes
     * @return {@code {"version", "reservation_id", "base_url", "mode", "idempotency_key",
     *     "recorded_at_ms", "not_before_ms", "commit_body", "event_fallback_body", "extra_keys"}}
     *     (bodies as their exact text)
     * @throws dev.cycles.errors.InvalidArgumentException when it is not a usable record; its
     *     {@code details()} is {@code {"journal_error":"corrupt"}} or {@code "unsupported"}
     */
    public static String parseRecord(byte[] data) {
        return Native.journalParseRecord(data);
    }

    /**
     * @param dir the journal directory
     * @param baseUrl with {@code apiKey}: one identity; both null: every partition
     * @param apiKey the API key, or null
     * @param tenant the tenant, or null
     * @return the valid pending records as a JSON array
     */
    public static String pending(Path dir, String baseUrl, String apiKey, String tenant) {
        return Native.journalPending(dir.toString(), baseUrl, apiKey, tenant);
    }

    /**
     * The pending records of a journal named as the client's options name it: a directory, or
     * a {@code redis://} URL ({@link CyclesClient.Builder#journalUrl}), e.g. for a health check
     * of a fleet's shared journal.
     *
     * @param journal a journal directory, or a {@code redis://...} URL
     * @param baseUrl with {@code apiKey}: one identity; both null: every partition
     * @param apiKey the API key, or null
     * @param tenant the tenant, or null
     * @return the valid pending records as a JSON array
     * @throws dev.cycles.errors.InvalidArgumentException for a URL core refuses or a journal
     *     that cannot be read (the message says why)
     */
    public static String pending(String journal, String baseUrl, String apiKey, String tenant) {
        return Native.journalPending(journal, baseUrl, apiKey, tenant);
    }
}
