package dev.cycles;

import java.util.List;

/**
 * The jar has no native library for the platform it runs on (thrown where the JVM would throw
 * its bare {@link UnsatisfiedLinkError}, by the first use of the SDK). The message names the
 * platform found, the platforms the SDK ships natives for, and how to build one from source;
 * {@link #platform()} and {@link #supported()} carry the same facts.
 */
public final class UnsupportedPlatformError extends UnsatisfiedLinkError {
    private static final long serialVersionUID = 1L;

    /** The platform found. */
    private final String platform;

    /** The platforms with a native library in a released jar. */
    private final List<String> supported;

    /**
     * Builds the error.
     *
     * @param platform the platform found, as the jar's folder names spell it ({@code linux-riscv64})
     * @param supported the platforms the SDK ships natives for
     * @param bundled the natives this jar carries (a development jar carries the host's only)
     */
    public UnsupportedPlatformError(String platform, List<String> supported, List<String> bundled) {
        super("the Cycles SDK has no native library for " + platform
                + (supported.contains(platform) ? " in this jar (it carries " + String.join(", ", bundled)
                        + "; a release jar carries every supported platform)" : "")
                + "; supported platforms: " + String.join(", ", supported)
                + ". Elsewhere build libcycles_jvm from source (a Rust toolchain: cargo build --release"
                + " -p cycles-jvm in the SDK's repository) and run with"
                + " -Dcycles.native.path=/abs/path/to/libcycles_jvm.so (docs/jvm.md)");
        this.platform = platform;
        this.supported = List.copyOf(supported);
    }

    /**
     * The platform found.
     *
     * @return e.g. {@code linux-riscv64} or {@code linux-x86_64-musl}
     */
    public String platform() {
        return platform;
    }

    /**
     * The platforms the SDK ships natives for.
     *
     * @return the jar folder names, e.g. {@code linux-x86_64}
     */
    public List<String> supported() {
        return supported;
    }
}
