package dev.cycles;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Work that {@link ClassLoaderTest} runs inside its own class loaders: this class, and the SDK
 * it uses, are loaded again by each loader, so each links its own copy of the native library.
 * Only JDK types cross the loader boundary (a {@code Map} in, a {@code String} out).
 */
public final class LoaderWork implements Function<Map<String, String>, String> {
    /** Constructed reflectively in the loader. */
    public LoaderWork() {}

    @Override
    public String apply(Map<String, String> in) {
        CyclesClient.Builder b = CyclesClient.builder().baseUrl(in.get("url")).apiKey(in.get("api_key"))
                .tenant(in.get("tenant")).journalDir(Path.of(in.get("dir")))
                .settleMaxAttempts(1).replayInterval(Duration.ofHours(1));
        GuardSpec spec = GuardSpec.of(Action.of("llm.completion", "loader-model"), 5_000);
        List<String> out = new ArrayList<>();
        switch (in.get("phase")) {
            case "guard" -> {
                // A guarded call that commits, and a streaming one; each reports its id.
                try (CyclesClient c = b.build()) {
                    out.add(c.guarded(spec, r -> {
                        r.setActual(Long.parseLong(in.get("actual")));
                        return Reservation.current().orElseThrow().reservationId();
                    }).value());
                }
            }
            case "pending" -> {
                // The commit fails (the test's fault): each settlement stays journaled.
                CyclesClient c = b.build();
                for (String a : in.get("actuals").split(",")) {
                    Outcome o = c.guarded(spec, Long.parseLong(a), () -> a).outcome();
                    if (o.settlement().status() != Settlement.Status.PENDING || !o.settlement().journaled()) {
                        throw new IllegalStateException("not left journaled: " + o.json());
                    }
                    out.add(o.reservationId());
                }
                c.close(Duration.ZERO);
            }
            case "drain" -> {
                try (CyclesClient c = b.build()) {
                    DrainReport d = c.drain(Duration.ofSeconds(30));
                    for (DrainReport.Replayed s : d.outcomes()) {
                        if (s.settlement().status() != Settlement.Status.COMMITTED) {
                            throw new IllegalStateException("not committed: " + d.json());
                        }
                        out.add(s.reservationId());
                    }
                    if (!d.remaining().isEmpty()) {
                        throw new IllegalStateException("left: " + d.json());
                    }
                }
            }
            default -> throw new IllegalArgumentException(in.get("phase"));
        }
        return String.join(",", out);
    }
}
