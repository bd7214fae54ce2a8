package dev.cycles.internal;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Predicate;
import dev.cycles.UnsupportedPlatformError;

/**
 * Loads libcycles_jvm once per class loader (called from {@link Native}'s static initializer,
 * which the JVM runs once per loader). Order: {@code -Dcycles.native.path=/abs/lib} (developers,
 * packagers); the library bundled in the jar under {@code native/<os>-<arch>[-musl]/} (see
 * {@link #classifier()} and {@link #isMusl()}), copied to a
 * fresh temporary directory ({@code -Dcycles.native.dir} chooses its parent, for hosts whose
 * /tmp is noexec) and loaded from there; {@code System.loadLibrary("cycles_jvm")}; else an
 * {@link UnsupportedPlatformError} naming the platform, the supported ones and the build from
 * source.
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

    /** The folders a release jar carries, one per platform (scripts/package/java.sh). */
    static final List<String> SUPPORTED =
            List.of("linux-x86_64", "linux-aarch_64", "linux-x86_64-musl", "linux-aarch_64-musl");

    /** The jar folder of this platform, e.g. {@code linux-x86_64} or {@code linux-aarch_64-musl}. */
    static String classifier() {
        String os = System.getProperty("os.name", "");
        return classifier(os, System.getProperty("os.arch", ""), os.toLowerCase(Locale.ROOT).contains("linux") && isMusl());
    }

    /**
     * The jar folder of a platform: {@code os-arch} in os-maven-plugin's spelling ({@code x86_64},
     * {@code aarch_64}), {@code -musl} appended on a musl Linux.
     */
    static String classifier(String osName, String osArch, boolean musl) {
        String os = osName.toLowerCase(Locale.ROOT);
        String arch = osArch.toLowerCase(Locale.ROOT);
        String o = os.contains("linux") ? "linux"
                : os.contains("mac") || os.contains("darwin") ? "osx"
                : os.contains("windows") ? "windows" : os.replace(' ', '_');
        String a = switch (arch) {
            case "amd64", "x86_64", "x64" -> "x86_64";
            case "aarch64", "arm64" -> "aarch_64";
            default -> arch;
        };
        return o + "-" + a + (musl && o.equals("linux") ? "-musl" : "");
    }

    /**
     * Whether this process runs on musl: {@code -Dcycles.native.libc=musl|glibc} if set (for
     * tests and odd hosts), else whether the process maps musl's loader ({@code ld-musl-*} or
     * {@code libc.musl-*}) per /proc/self/maps, else (no /proc) whether /lib has musl's loader
     * and no glibc loader. A glibc host with musl-tools installed has /lib/ld-musl-* too: the
     * mappings of the running process are what decide.
     */
    static boolean isMusl() {
        String forced = System.getProperty("cycles.native.libc", "");
        if (!forced.isEmpty()) {
            return forced.equalsIgnoreCase("musl");
        }
        try {
            return mapsMusl(Files.readString(Path.of("/proc/self/maps")));
        } catch (IOException | SecurityException e) {
            return hasFile("/lib", "ld-musl-") && !hasFile("/lib64", "ld-linux") && !hasFile("/lib", "ld-linux");
        }
    }

    /** Whether a /proc/PID/maps text maps musl's libc (its loader is its libc). */
    static boolean mapsMusl(String maps) {
        for (String line : maps.split("\n")) {
            int slash = line.lastIndexOf('/');
            if (slash >= 0) {
                String name = line.substring(slash + 1);
                if (name.startsWith("ld-musl-") || name.startsWith("libc.musl-")) {
                    return true;
                }
            }
        }
        return false;
    }

    private static boolean hasFile(String dir, String prefix) {
        String[] names = new File(dir).list();
        if (names == null) {
            return false;
        }
        for (String name : names) {
            if (name.startsWith(prefix)) {
                return true;
            }
        }
        return false;
    }

    /** The folders of {@link #SUPPORTED} this jar carries a library in. */
    static List<String> bundled(Predicate<String> hasResource) {
        List<String> out = new ArrayList<>();
        for (String c : SUPPORTED) {
            if (hasResource.test(resource(c))) {
                out.add(c);
            }
        }
        return out;
    }

    /** The resource path of a folder's library. */
    static String resource(String classifier) {
        return "/native/" + classifier + "/" + System.mapLibraryName("cycles_jvm");
    }

    /** The clear error for a platform without a library here, the JVM's own attached. */
    static UnsupportedPlatformError unsupported(String classifier, Predicate<String> hasResource, Throwable cause) {
        UnsupportedPlatformError e = new UnsupportedPlatformError(classifier, SUPPORTED, bundled(hasResource));
        if (cause != null) {
            e.initCause(cause);
        }
        return e;
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
        String classifier = classifier();
        String resource = resource(classifier);
        try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
            if (in != null) {
                loadCopy(in, file);
                return;
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot extract the cycles native library " + resource, e);
        }
        // No bundled library for this platform: one installed on java.library.path, else the
        // clear error.
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
            throw unsupported(classifier, r -> NativeLoader.class.getResource(r) != null, e);
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
