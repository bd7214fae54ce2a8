package dev.cycles;

/**
 * A call on a closed client, guarded action, server or planner ({@code close()} was called, or
 * the object was already finished). Core's kind is {@code RUNTIME} (code 3) with the
 * {@code closed} variant; it is an {@link IllegalStateException} because using a closed
 * object is a programming error, and it never crashes the JVM.
 */
public final class ClientClosedException extends IllegalStateException {
    private static final long serialVersionUID = 1L;
    private final int code;
    private final String errorName;

    /**
     * @param message what is closed
     * @param code core's code of the kind (from the native error)
     * @param errorName core's name of the kind (from the native error)
     */
    public ClientClosedException(String message, int code, String errorName) {
        super(message);
        this.code = code;
        this.errorName = errorName;
    }

    /** @return core's code of the kind ({@code RUNTIME}) */
    public int code() {
        return code;
    }

    /** @return core's name of the kind, {@code RUNTIME} */
    public String errorName() {
        return errorName;
    }
}
