// swift-tools-version:5.9
// The Swift bindings of libcycles_uniffi (bindings/uniffi), as uniffi-bindgen writes them
// (bindings/uniffi/scripts/generate.sh; committed, drift-checked by kotlin/scripts/test.sh).
// NOT COMPILED: no Swift toolchain exists where this SDK is built and tested (docs/swift.md).
// Build the library first (cargo build --release -p cycles-uniffi) and point the linker at it:
//   swift build -Xlinker -L<cargo target dir>/release
import PackageDescription

let package = Package(
    name: "CyclesFFI",
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [
        .library(name: "CyclesFFI", targets: ["CyclesFFI"]),
    ],
    targets: [
        // The C declarations of the library's exports (CyclesFFIC.h and its module map).
        .systemLibrary(name: "CyclesFFIC", path: "Sources/CyclesFFIC"),
        // The generated Swift API: Client, Guard, LocalServer, the planners, async functions.
        .target(
            name: "CyclesFFI",
            dependencies: ["CyclesFFIC"],
            path: "Sources/CyclesFFI",
            linkerSettings: [.linkedLibrary("cycles_uniffi")]
        ),
    ]
)
