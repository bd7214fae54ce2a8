// The exit test (java/scripts/test.sh): a plain `java -cp <jar>:. ExitCheck` run, not under
// Surefire (whose forked JVM calls System.exit), must end by itself when main returns, with
// everything that could keep a JVM alive left behind on purpose: a client never closed, with
// an event listener and a finished async call; a guarded action never finished; a settlement
// left pending in the journal (commits fail); a local server never stopped.
import dev.cycles.Action;
import dev.cycles.CyclesClient;
import dev.cycles.GuardSpec;
import dev.cycles.LocalServer;
import dev.cycles.Settlement;
import java.nio.file.Files;

public class ExitCheck {
    public static void main(String[] args) throws Exception {
        LocalServer server = LocalServer.start();
        CyclesClient client = CyclesClient.builder().baseUrl(server.url()).apiKey(server.apiKey()).tenant(server.tenant())
                .journalDir(Files.createTempDirectory("cycles-exit-")).settleMaxAttempts(1).onEvent(e -> { }).build();
        Action action = Action.of("llm.completion", "exit-check");
        client.getBalancesAsync(dev.cycles.BalanceQuery.tenant("acme")).get();
        client.reserve(GuardSpec.of(action, 100)).addUsage(5); // never finished
        server.addFault("{\"operation\":\"commitReservation\",\"times\":0,\"fault\":{\"kind\":\"server_error\",\"status\":503}}");
        Settlement s = client.guarded(GuardSpec.of(action, 100), 10, () -> "x").outcome().settlement();
        if (s.status() != Settlement.Status.PENDING) {
            throw new AssertionError("expected a pending settlement, got " + s);
        }
        System.out.println("main returned");
    }
}
