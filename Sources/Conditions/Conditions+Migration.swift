import Operations

// PSOperations' spellings of the ready-made conditions, kept as deprecated forwards with
// fix-its. See the "Migrating from PSOperations or ProcedureKit" article of the Operations module.

extension NegatedCondition {
    /// PSOperations' `NegatedCondition(condition:)`.
    @available(*, deprecated, renamed: "init(_:)")
    public init(condition: Inner) {
        self.init(condition)
    }
}

extension SilentCondition {
    /// PSOperations' `SilentCondition(condition:)`.
    @available(*, deprecated, renamed: "init(_:)")
    public init(condition: Inner) {
        self.init(condition)
    }
}
