// Writes dev/cycles/errors/*Exception.java from core's error table and the bridge's variants
// as the native library reports them (no copy of either table is kept by hand). Run by java/scripts/gen-errors.sh;
// `gen-errors.sh --check` (java/scripts/test.sh) fails when the committed classes differ.
//
//   java -cp target/classes -Dcycles.native.path=LIB scripts/GenErrors.java src/main/java
import dev.cycles.CyclesException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

public class GenErrors {
    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0], "dev", "cycles", "errors");
        Files.createDirectories(dir);
        try (var old = Files.list(dir)) {
            for (Path p : (Iterable<Path>) old::iterator) {
                if (p.toString().endsWith("Exception.java")) {
                    Files.delete(p);
                }
            }
        }
        group(dir, "TransportException", "No complete HTTP response was received (connect, timeout, reset, other); retry with the same idempotency key.", "");
        group(dir, "HttpException", "A response that is not the operation's success: rate limited, server error, an ambiguous write, an unexpected status or an invalid response.", STATUS);
        group(dir, "ApiException", "The server answered with one of the protocol's error codes (its {@code error} field).", STATUS);
        // The bridge's variants: a class each under its kind's (closed is the hand-written
        // ClientClosedException, an IllegalStateException), so a kind with one is not final.
        Map<String, String> variants = CyclesException.errorVariants();
        variants.remove("closed");
        for (Map.Entry<String, Integer> e : CyclesException.errorCodes().entrySet()) {
            String name = e.getKey();
            int code = e.getValue();
            String simple = simple(name);
            // Core's code blocks (core/src/error.rs): 10-19 transport, 20-99 HTTP, 100+ server codes.
            String parent = code >= 100 ? "ApiException" : code >= 20 ? "HttpException" : code >= 10 ? "TransportException" : "CyclesException";
            String doc = "Core's error kind {@code " + name + "} (code " + code + ").";
            write(dir, simple, variants.containsValue(name) ? "public class" : "public final class", parent, doc,
                    name.equals("MISSING_ACTUAL") ? GUARD_ENDED + RELEASED
                    : name.equals("INVALID_ARGUMENT") ? INVALID_ACTUAL + GUARD_ENDED + RELEASED : "");
        }
        for (Map.Entry<String, String> v : variants.entrySet()) {
            String variant = v.getKey();
            String kind = v.getValue();
            String doc = "Core's error kind {@code " + kind + "} (code " + CyclesException.errorCodes().get(kind)
                    + "), the bridge's variant {@code " + variant + "}"
                    + (variant.equals("call_not_sent") ? NOT_SENT_DOC : ".");
            // Not final: an integration's own exception may refine it (the Spring AI advisor's does).
            write(dir, simple(variant), "public class", simple(kind), doc,
                    variant.equals("call_not_sent") ? NOT_SENT + RELEASED : "");
        }
    }

    static String simple(String name) {
        String fq = CyclesException.className(name);
        return fq.substring(fq.lastIndexOf('.') + 1);
    }

    static final String NOT_SENT_DOC = ":\n"
            + " * a provider call that was not made, because under {@code ALLOW_WITH_CAPS} the caps leave no\n"
            + " * output bound the API accepts; its reservation was released\n"
            + " * ({@link dev.cycles.Reservation#refuseCall}). Its message is core's text, the same in every\n"
            + " * language.";

    // Core builds every error of these groups from an HTTP response (core/src/error.rs:
    // from_http and the 2xx checks), so the status is a plain int there.
    static final String STATUS = "\n"
            + "    /**\n"
            + "     * @return the HTTP status of the response this error came from (always present for this\n"
            + "     *     class; {@link #httpStatusIfAny()} is the same value for any {@code CyclesException})\n"
            + "     */\n"
            + "    public int httpStatus() {\n"
            + "        return httpStatusIfAny().orElseThrow(() -> new IllegalStateException(\"no HTTP status on \" + errorName()));\n"
            + "    }\n";

    // A guard that ends without a known actual (missing, or negative: INVALID_ARGUMENT)
    // releases the reservation in the same call (docs/lifecycle.md): the exception names the
    // reservation and says whether that release succeeded.
    static final String INVALID_ACTUAL = "\n"
            + "    /**\n"
            + "     * @return whether this error ended a guarded reservation (its actual was negative):\n"
            + "     *     nothing was committed, and {@link #released()} says whether the estimate was\n"
            + "     *     released; false for every other argument error, which reserved nothing\n"
            + "     */\n"
            + "    public boolean endedGuard() {\n"
            + "        return field(\"released\") != null;\n"
            + "    }\n";

    static final String NOT_SENT = "\n"
            + "    /** @return the reservation the call was not made for (never charged) */\n"
            + "    public String reservationId() {\n"
            + "        return (String) field(\"reservation_id\");\n"
            + "    }\n";

    static final String GUARD_ENDED = "\n"
            + "    /** @return the reservation the guard held (never charged), when a guard ended with this error */\n"
            + "    public java.util.Optional<String> reservationId() {\n"
            + "        return java.util.Optional.ofNullable((String) field(\"reservation_id\"));\n"
            + "    }\n";

    static final String RELEASED = "\n"
            + "    /**\n"
            + "     * @return whether the reservation was released in the same call (false: that release\n"
            + "     *     failed, see {@link #releaseError()}; the estimate stays held until the lease expires)\n"
            + "     */\n"
            + "    public boolean released() {\n"
            + "        return Boolean.TRUE.equals(field(\"released\"));\n"
            + "    }\n\n"
            + "    /** @return why the release failed (its error kind and message), when it failed */\n"
            + "    public java.util.Optional<CyclesException> releaseError() {\n"
            + "        return java.util.Optional.ofNullable((CyclesException) field(\"release_exception\"));\n"
            + "    }\n";

    static void group(Path dir, String simple, String doc, String body) throws Exception {
        write(dir, simple, "public class", "CyclesException", doc, body, "protected");
    }

    static void write(Path dir, String simple, String decl, String parent, String doc, String body) throws Exception {
        // A kind's class is built by CyclesException.fromNative through its public constructor.
        write(dir, simple, decl, parent, doc, body, "public");
    }

    static void write(Path dir, String simple, String decl, String parent, String doc, String body, String ctor)
            throws Exception {
        // The parent, or a member typed by it (RELEASED's releaseError), needs the import.
        String imp = parent.equals("CyclesException") || body.contains("(CyclesException)")
                ? "import dev.cycles.CyclesException;\n" : "";
        String javadoc = doc.contains("\n") ? "/**\n * " + doc + "\n */\n" : "/** " + doc + " */\n";
        String text = "// Generated by java/scripts/GenErrors.java from core's error table: do not edit.\n"
                + "package dev.cycles.errors;\n\n"
                + imp + "import java.util.Map;\n\n"
                + javadoc
                + decl + " " + simple + " extends " + parent + " {\n"
                + "    private static final long serialVersionUID = 1L;\n\n"
                + "    /**\n     * @param fields the native error fields\n     */\n"
                + "    " + ctor + " " + simple + "(Map<String, Object> fields) {\n"
                + "        super(fields);\n    }\n" + body + "}\n";
        Files.writeString(dir.resolve(simple + ".java"), text);
    }
}
