// Package loop is the one FFT round loop: observe, build the instance and the ledger, decide
// with a policy of the registry, apply (the ledger's advance and the record's lines are done
// meanwhile: they follow from the plan, not from the cluster's answers), record. The allocator
// service and the simulator run it alike; they differ only in the adapters (Observer, Applier,
// Store) they hand it.
package loop
