// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Operations",
    platforms: [
        .macOS(.v10_15), .iOS(.v13), .tvOS(.v13), .watchOS(.v6),
    ],
    products: [
        .library(name: "Operations", targets: ["Operations"]),
        .library(name: "Conditions", targets: ["Conditions"]),
        .library(name: "Observers", targets: ["Observers"]),
        .executable(name: "operations-example", targets: ["OperationsExample"]),
    ],
    targets: [
        .target(name: "Operations"),
        .target(name: "Conditions", dependencies: ["Operations"]),
        .target(name: "Observers", dependencies: ["Operations"]),
        .executableTarget(
            name: "OperationsExample",
            dependencies: ["Operations", "Conditions", "Observers"]
        ),
        .testTarget(name: "OperationsTests", dependencies: ["Operations"]),
        .testTarget(name: "ConditionsTests", dependencies: ["Operations", "Conditions"]),
        .testTarget(name: "ObserversTests", dependencies: ["Operations", "Observers"]),
    ],
    swiftLanguageModes: [.v6]
)
