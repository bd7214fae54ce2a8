package dev.cycles.spring.ai;

import dev.cycles.internal.Json;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

/**
 * The `cycles fake-provider` process of a test class (the CLI's path in -Dcycles.cli): started
 * on a free port with a fixed reply, its admin routes (reset, faults, the request log).
 */
final class FakeProvider {
    private static final HttpClient HTTP = HttpClient.newHttpClient();
    private static Process process;
    private static String url;

    private FakeProvider() {}

    static void start() throws IOException {
        String cli = System.getProperty("cycles.cli");
        if (cli == null || cli.isBlank() || cli.startsWith("${")) {
            throw new IllegalStateException("-Dcycles.cli=<path of the cycles CLI> is required (cargo build -p cycles-cli)");
        }
        process = new ProcessBuilder(cli, "fake-provider", "--port", "0", "--reply", "The answer is forty two")
                .redirectErrorStream(true).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine();
        if (line == null || !line.contains("http://")) {
            throw new IllegalStateException("the fake provider did not say where it listens: " + line);
        }
        url = line.substring(line.indexOf("http://")).trim();
        Thread drain = new Thread(() -> {
            try {
                while (out.readLine() != null) {
                    // keep the pipe empty
                }
            } catch (IOException e) {
                // the process ended
            }
        });
        drain.setDaemon(true);
        drain.start();
    }

    static void stop() {
        if (process != null) {
            process.destroy();
        }
    }

    static String url() {
        return url;
    }

    static String admin(String method, String path, String body) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url + path));
        b = body == null ? b.method(method, HttpRequest.BodyPublishers.noBody())
                : b.method(method, HttpRequest.BodyPublishers.ofString(body)).header("content-type", "application/json");
        return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString()).body();
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> requests() throws Exception {
        return (List<Map<String, Object>>) Json.parse(admin("GET", "/_fake/requests", null));
    }
}
