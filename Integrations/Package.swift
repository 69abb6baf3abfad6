// swift-tools-version:6.0
import PackageDescription

// Adapters that make an `AsyncOperationQueue` at home in a server-side Swift service: swift-log,
// swift-metrics, swift-distributed-tracing and swift-service-lifecycle, plus the example
// `job-service` (Hummingbird 2). The core package (one folder up) depends on none of them.
let package = Package(
    name: "Integrations",
    platforms: [
        .macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9),
    ],
    products: [
        .library(name: "OperationsLogging", targets: ["OperationsLogging"]),
        .library(name: "OperationsMetrics", targets: ["OperationsMetrics"]),
        .library(name: "OperationsTracing", targets: ["OperationsTracing"]),
        .library(name: "OperationsServiceLifecycle", targets: ["OperationsServiceLifecycle"]),
        .library(name: "PostgresCategoryLock", targets: ["PostgresCategoryLock"]),
        .executable(name: "postgres-lock-worker", targets: ["PostgresLockWorker"]),
        .executable(name: "job-service", targets: ["JobService"]),
    ],
    dependencies: [
        .package(name: "Operations", path: ".."),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .target(
            name: "OperationsLogging",
            dependencies: [
                .product(name: "Operations", package: "Operations"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "OperationsMetrics",
            dependencies: [
                .product(name: "Operations", package: "Operations"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .target(
            name: "OperationsTracing",
            dependencies: [
                .product(name: "Operations", package: "Operations"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .target(
            name: "OperationsServiceLifecycle",
            dependencies: [
                .product(name: "Operations", package: "Operations"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "PostgresCategoryLock",
            dependencies: [
                .product(name: "Operations", package: "Operations"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "PostgresLockWorker",
            dependencies: [
                "PostgresCategoryLock",
                .product(name: "Operations", package: "Operations"),
                .product(name: "Conditions", package: "Operations"),
                .product(name: "Observers", package: "Operations"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .executableTarget(
            name: "JobService",
            dependencies: [
                "OperationsLogging",
                "OperationsMetrics",
                "OperationsTracing",
                "OperationsServiceLifecycle",
                .product(name: "Operations", package: "Operations"),
                .product(name: "Conditions", package: "Operations"),
                .product(name: "Observers", package: "Operations"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .target(
            name: "IntegrationsTestSupport",
            dependencies: [
                .product(name: "Operations", package: "Operations"),
            ],
            path: "Tests/IntegrationsTestSupport"
        ),
        .testTarget(
            name: "OperationsLoggingTests",
            dependencies: [
                "OperationsLogging",
                "IntegrationsTestSupport",
                .product(name: "Conditions", package: "Operations"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "OperationsMetricsTests",
            dependencies: [
                "OperationsMetrics",
                "IntegrationsTestSupport",
                .product(name: "Conditions", package: "Operations"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .testTarget(
            name: "OperationsTracingTests",
            dependencies: [
                "OperationsTracing",
                "IntegrationsTestSupport",
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "OperationsServiceLifecycleTests",
            dependencies: [
                "OperationsServiceLifecycle",
                "IntegrationsTestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "DocumentationTests",
            dependencies: [
                "PostgresCategoryLock",
                .product(name: "Conditions", package: "Operations"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                "OperationsLogging",
                "OperationsMetrics",
                "OperationsTracing",
                "OperationsServiceLifecycle",
                "IntegrationsTestSupport",
                .product(name: "Operations", package: "Operations"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .testTarget(
            name: "PostgresCategoryLockTests",
            dependencies: [
                "PostgresCategoryLock",
                "PostgresLockWorker",
                "IntegrationsTestSupport",
                .product(name: "Conditions", package: "Operations"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(
            name: "JobServiceTests",
            dependencies: [
                "IntegrationsTestSupport",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
