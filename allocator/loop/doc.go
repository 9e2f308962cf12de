// Package loop is the one FFT round loop: observe, build the instance and the ledger, decide
// with a policy of the registry, apply, record. The allocator service and the simulator run it
// alike; they differ only in the adapters (Observer, Applier, Store) they hand it.
package loop
