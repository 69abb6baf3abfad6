import Conditions
import Foundation
import Operations
import PostgresCategoryLock
import PostgresNIO
import Testing

// The examples of PostgresCategoryLock's `///` comment and of the README's section on it,
// verbatim between the `// docs:` markers. They compile and build the lock; nothing connects
// until an operation asks for its category (PostgresCategoryLockTests do, against a server).

private let configuration = PostgresClient.Configuration(host: "127.0.0.1", username: "postgres", password: nil, database: "postgres", tls: .disable)

@Suite struct PostgresCategoryLockSnippetsTests {
    @Test func theReadmeExample_namesTheCategoryWithTheClusterLock() {
        let billing = AsyncBlockOperation {}
        // docs:
        let client = PostgresClient(configuration: configuration)   // run it: await client.run()
        let clusterWide = PostgresCategoryLock(client: client)
        billing.addCondition(ExclusiveCategory("billing", lock: clusterWide))
        // :docs
        #expect(clusterWide.identity == "postgres:operations:operations_category_fencing_tokens")
    }
}
