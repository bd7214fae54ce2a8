package dev.cycles.internal;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads libcycles_jvm once per class loader (called from {@link Native}'s static initializer,
 * which the JVM runs once per loader). Order: {@code -Dcycles.native.path=/abs/lib} (developers,
 * packagers); the library bundled in the jar under {@code native/<os>-<arch>/}, copied to a
 * fresh temporary directory ({@code -Dcycles.native.dir} chooses its parent, for hosts whose
 * /tmp is noexec) and loaded from there; {@code System.loadLibrary("cycles_jvm")}.
 */
final class NativeLoader {
    private NativeLoader() {}

    /** The jar folder of this platform, e.g. {@code linux-x86_64} or {@code osx-aarch_64}. */
    static String classifier() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        String o = os.contains("linux") ? "linux"
                : os.contains("mac") || os.contains("darwin") ? "osx"
                : os.contains("windows") ? "windows" : os.replace(' ', '_');
        String a = switch (arch) {
            case "amd64", "x86_64", "x64" -> "x86_64";
            case "aarch64", "arm64" -> "aarch_64";
            default -> arch;
        };
        return o + "-" + a;
    }

    static void load() {
        String explicit = System.getProperty("cycles.native.path");
        if (explicit != null && !explicit.isEmpty()) {
            System.load(Path.of(explicit).toAbsolutePath().toString());
            return;
        }
        String file = System.mapLibraryName("cycles_jvm");
        String resource = "/native/" + classifier() + "/" + file;
        try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
            if (in == null) {
                System.loadLibrary("cycles_jvm");
                return;
            }
            String parent = System.getProperty("cycles.native.dir");
            Path dir = parent == null || parent.isEmpty()
                    ? Files.createTempDirectory("cycles-native-")
                    : Files.createTempDirectory(Path.of(parent), "cycles-native-");
            Path lib = dir.resolve(file);
            Files.copy(in, lib, StandardCopyOption.REPLACE_EXISTING);
            System.load(lib.toAbsolutePath().toString());
            // Loaded: Linux and macOS keep the mapping after the file is gone; Windows cannot
            // delete a loaded library, so it goes at exit there.
            try {
                Files.delete(lib);
                Files.delete(dir);
            } catch (IOException e) {
                lib.toFile().deleteOnExit();
                dir.toFile().deleteOnExit();
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot extract the cycles native library " + resource, e);
        }
    }
}
