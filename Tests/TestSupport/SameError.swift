import Foundation
import Operations

/// Whether two errors are the same: the same `StubError`, the same `AsyncOperationError` (with
/// its context, errors inside `multipleErrors` included), both a `CancellationError`; otherwise
/// the same type with the same description. For checking that two ways of asking an operation
/// for its outcome give the same answer.
public func isSameError(_ lhs: any Error, _ rhs: any Error) -> Bool {
    if let lhs = lhs as? StubError, let rhs = rhs as? StubError {
        return lhs == rhs
    }
    if let lhs = lhs as? AsyncOperationError, let rhs = rhs as? AsyncOperationError {
        return lhs == rhs
    }
    if lhs is CancellationError, rhs is CancellationError {
        return true
    }
    return ObjectIdentifier(type(of: lhs)) == ObjectIdentifier(type(of: rhs))
        && String(reflecting: lhs) == String(reflecting: rhs)
}

/// Whether two outcomes are the same: both a success with equal values, or both a failure with
/// the same error (see `isSameError`).
public func isSameOutcome<Value: Equatable>(_ lhs: Result<Value, any Error>, _ rhs: Result<Value, any Error>) -> Bool {
    switch (lhs, rhs) {
    case let (.success(left), .success(right)):
        return left == right
    case let (.failure(left), .failure(right)):
        return isSameError(left, right)
    default:
        return false
    }
}
