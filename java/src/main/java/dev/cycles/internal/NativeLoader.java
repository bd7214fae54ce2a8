package dev.cycles.internal;

import java.io.File;
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
 *
 * <p>Several class loaders in one JVM (application servers, plugin hosts, two versions side by
 * side): each loads its own copy of the library, with its own runtime and handle registry, so
 * a handle of one loader never reaches another's. The JVM refuses to link one file into two
 * loaders, so the bundled library is always copied to a file of its own, and an explicit path
 * (or one found on {@code java.library.path}) that another loader holds is copied for the
 * second one. Copies in one process share the journal only through files: its per-record
 * {@code flock} locks belong to open file descriptions, so they exclude the other copies too.
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
        String file = System.mapLibraryName("cycles_jvm");
        String explicit = System.getProperty("cycles.native.path");
        if (explicit != null && !explicit.isEmpty()) {
            Path lib = Path.of(explicit).toAbsolutePath();
            try {
                System.load(lib.toString());
            } catch (UnsatisfiedLinkError e) {
                loadCopyOf(lib, e);
            }
            return;
        }
        String resource = "/native/" + classifier() + "/" + file;
        try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
            if (in != null) {
                loadCopy(in, file);
                return;
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot extract the cycles native library " + resource, e);
        }
        try {
            System.loadLibrary("cycles_jvm");
        } catch (UnsatisfiedLinkError e) {
            for (String dir : System.getProperty("java.library.path", "").split(File.pathSeparator)) {
                Path lib = Path.of(dir.isEmpty() ? "." : dir, file).toAbsolutePath();
                if (Files.isRegularFile(lib)) {
                    loadCopyOf(lib, e);
                    return;
                }
            }
            throw e;
        }
    }

    /**
     * The JVM links a library file into one class loader only ("already loaded in another
     * classloader"): a second loader given the same file links a private copy instead. Any
     * other failure is rethrown as it was, with the copy's failure attached.
     */
    private static void loadCopyOf(Path lib, UnsatisfiedLinkError first) {
        if (!Files.isRegularFile(lib)) {
            throw first;
        }
        try (InputStream in = Files.newInputStream(lib)) {
            loadCopy(in, lib.getFileName().toString());
        } catch (IOException | UnsatisfiedLinkError e) {
            first.addSuppressed(e);
            throw first;
        }
    }

    /**
     * Copies the library into a fresh temporary directory and loads it from there: a file name
     * of its own per class loader, so every loader in a JVM can link it.
     */
    private static void loadCopy(InputStream in, String file) throws IOException {
        String parent = System.getProperty("cycles.native.dir");
        Path dir = parent == null || parent.isEmpty()
                ? Files.createTempDirectory("cycles-native-")
                : Files.createTempDirectory(Path.of(parent), "cycles-native-");
        Path lib = dir.resolve(file);
        try {
            Files.copy(in, lib, StandardCopyOption.REPLACE_EXISTING);
            System.load(lib.toAbsolutePath().toString());
        } finally {
            // Loaded: Linux and macOS keep the mapping after the file is gone; Windows cannot
            // delete a loaded library, so it goes at exit there.
            try {
                Files.deleteIfExists(lib);
                Files.delete(dir);
            } catch (IOException e) {
                lib.toFile().deleteOnExit();
                dir.toFile().deleteOnExit();
            }
        }
    }
}
