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
        .executable(name: "operations-benchmarks", targets: ["OperationsBenchmarks"]),
        .executable(name: "category-lock-worker", targets: ["CategoryLockWorker"]),
    ],
    targets: [
        .target(
            name: "Operations",
            dependencies: [.target(name: "OperationsFutex", condition: .when(platforms: [.linux, .android]))]
        ),
        // Linux's futex calls for the engine's lock (Swift cannot call the variadic `syscall`).
        .target(name: "OperationsFutex"),
        .target(name: "Conditions", dependencies: ["Operations"]),
        .target(name: "Observers", dependencies: ["Operations"]),
        .executableTarget(
            name: "OperationsExample",
            dependencies: ["Operations", "Conditions", "Observers"]
        ),
        .executableTarget(
            name: "OperationsBenchmarks",
            dependencies: ["Operations", "Conditions", "Observers"]
        ),
        .executableTarget(
            name: "CategoryLockWorker",
            dependencies: ["Operations", "Conditions", "Observers"]
        ),
        .target(name: "TestSupport", dependencies: ["Operations"], path: "Tests/TestSupport"),
        .testTarget(name: "OperationsTests", dependencies: ["Operations", "TestSupport"]),
        .testTarget(name: "ConditionsTests", dependencies: ["Operations", "Conditions", "TestSupport"]),
        .testTarget(name: "ObserversTests", dependencies: ["Operations", "Observers", "TestSupport"]),
        .testTarget(name: "APIContractTests", dependencies: ["Operations", "Conditions", "Observers"]),
        .testTarget(name: "IntegrationTests", dependencies: ["Operations", "Conditions", "Observers", "TestSupport", "CategoryLockWorker"]),
    ],
    swiftLanguageModes: [.v6]
)
