package dev.cycles.spring;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A {@code redis-server} (Debian's package; scripts/test-all.sh installs it) on a free loopback
 * port, appending every write to its AOF with {@code appendfsync always} (what a Redis journal
 * requires by default), for the starter's {@code cycles.journal.url} tests. Killed by
 * {@link #close()}, its data directory removed.
 */
final class RedisProcess implements AutoCloseable {
    final String url;
    private final Process process;
    private final Path data;

    RedisProcess() {
        try {
            data = Files.createTempDirectory("cycles-spring-redis");
            int port;
            try (ServerSocket s = new ServerSocket(0)) {
                port = s.getLocalPort();
            }
            process = new ProcessBuilder("redis-server", "--port", String.valueOf(port), "--bind", "127.0.0.1",
                    "--save", "", "--dir", data.toString(), "--appendonly", "yes", "--appendfsync", "always")
                    .redirectErrorStream(true).redirectOutput(data.resolve("redis.log").toFile()).start();
            url = "redis://127.0.0.1:" + port + "/0";
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!answers(port)) {
                if (System.nanoTime() > deadline || !process.isAlive()) {
                    throw new IllegalStateException("redis-server did not come up: " + Files.readString(data.resolve("redis.log")));
                }
                Thread.sleep(20);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("redis-server (apt-get install redis-server; scripts/test-all.sh does)", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private static boolean answers(int port) {
        try (Socket s = new Socket("127.0.0.1", port)) {
            OutputStream out = s.getOutputStream();
            out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            byte[] buf = new byte[7];
            int n = in.read(buf);
            return n > 0 && new String(buf, 0, n, StandardCharsets.US_ASCII).startsWith("+PONG");
        } catch (IOException e) {
            return false;
        }
    }

    /** SIGKILLs it, leaving its data directory (a Redis that went away). */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    @Override
    public void close() throws Exception {
        kill();
        try (Stream<Path> paths = Files.walk(data)) {
            for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
