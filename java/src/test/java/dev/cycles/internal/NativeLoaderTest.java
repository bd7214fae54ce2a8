package dev.cycles.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.UnsupportedPlatformError;
import java.io.File;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The loader's choice of native library by OS, arch and libc, and its error elsewhere. */
class NativeLoaderTest {
    @Test
    void classifierNamesEveryShippedPlatform() {
        assertEquals("linux-x86_64", NativeLoader.classifier("Linux", "amd64", false));
        assertEquals("linux-aarch_64", NativeLoader.classifier("Linux", "aarch64", false));
        assertEquals("linux-x86_64-musl", NativeLoader.classifier("Linux", "amd64", true));
        assertEquals("linux-aarch_64-musl", NativeLoader.classifier("Linux", "aarch64", true));
        assertEquals("osx-aarch_64", NativeLoader.classifier("Mac OS X", "aarch64", true));
        assertEquals(NativeLoader.SUPPORTED, List.of(NativeLoader.classifier("Linux", "x86_64", false),
                NativeLoader.classifier("Linux", "arm64", false), NativeLoader.classifier("Linux", "x64", true),
                NativeLoader.classifier("Linux", "aarch64", true)));
    }

    @Test
    void muslIsReadFromTheProcessMappings() {
        String glibc = "7f0e1c000000-7f0e1c028000 r--p 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
                + "7f0e1c200000-7f0e1c228000 r--p 00000000 08:01 124 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2\n"
                + "7ffd5a000000-7ffd5a021000 rw-p 00000000 00:00 0 [stack]\n";
        String musl = "7f0e1c000000-7f0e1c028000 r-xp 00000000 08:01 123 /lib/ld-musl-aarch64.so.1\n";
        assertFalse(NativeLoader.mapsMusl(glibc));
        assertTrue(NativeLoader.mapsMusl(musl));
        assertTrue(NativeLoader.mapsMusl("1000-2000 r-xp 0 0:0 1 /usr/lib/libc.musl-x86_64.so.1\n"));
        assertFalse(NativeLoader.mapsMusl(""));
    }

    @Test
    void spoofedMuslWithoutItsNativeGetsTheClearError() {
        String old = System.getProperty("cycles.native.libc");
        System.setProperty("cycles.native.libc", "musl");
        try {
            assertTrue(NativeLoader.isMusl());
            String musl = NativeLoader.classifier("Linux", "amd64", NativeLoader.isMusl());
            // A jar carrying the glibc native only (a development build).
            UnsupportedPlatformError e = NativeLoader.unsupported(musl, r -> r.contains("/linux-x86_64/"), null);
            assertEquals("linux-x86_64-musl", e.platform());
            assertEquals(NativeLoader.SUPPORTED, e.supported());
            assertTrue(e.getMessage().startsWith("the Cycles SDK has no native library for linux-x86_64-musl in this jar"
                    + " (it carries linux-x86_64;"), e.getMessage());
            assertTrue(e.getMessage().contains("cycles.native.path"), e.getMessage());
        } finally {
            if (old == null) {
                System.clearProperty("cycles.native.libc");
            } else {
                System.setProperty("cycles.native.libc", old);
            }
        }
        System.setProperty("cycles.native.libc", "glibc");
        try {
            assertFalse(NativeLoader.isMusl());
        } finally {
            System.clearProperty("cycles.native.libc");
        }
    }

    /** A JVM told it runs on riscv64 loads the SDK: the first use throws the clear error. */
    @Test
    void spoofedArchGetsTheClearErrorAtFirstUse() throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        String cp = location(NativeLoader.class) + File.pathSeparator + location(NativeLoaderTest.class);
        Process p = new ProcessBuilder(java, "-Dos.arch=riscv64", "-cp", cp, UnsupportedChild.class.getName())
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the child did not exit");
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.startsWith("UnsupportedPlatformError linux-riscv64: the Cycles SDK has no native library for"
                + " linux-riscv64; supported platforms: linux-x86_64, linux-aarch_64, linux-x86_64-musl,"
                + " linux-aarch_64-musl. Elsewhere build libcycles_jvm from source"), out);
    }

    private static String location(Class<?> c) throws URISyntaxException {
        return Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
    }

    /** The child of {@link #spoofedArchGetsTheClearErrorAtFirstUse}: prints what loading threw. */
    static final class UnsupportedChild {
        private UnsupportedChild() {}

        public static void main(String[] args) {
            try {
                Native.ensureLoaded();
                System.out.println("loaded");
            } catch (UnsupportedPlatformError e) {
                System.out.println("UnsupportedPlatformError " + e.platform() + ": " + e.getMessage());
            }
        }
    }
}
