package dev.cycles;

/**
 * A successful response: the decoded body and the transport facts of its attempt.
 *
 * @param status the HTTP status
 * @param requestId the server's request id, when sent
 * @param traceId the server's trace id, when sent
 * @param rttMicros the attempt's round trip in microseconds
 * @param body the decoded body
 * @param <T> the body's type ({@code String}: JSON text, for {@link CyclesClient#call})
 */
public record Response<T>(int status, String requestId, String traceId, long rttMicros, T body) {}
