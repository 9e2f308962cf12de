// Package consulstore keeps the allocator's fairness ledger and per-round audit log in Consul KV,
// under one versioned prefix, with check-and-set transactions.
package consulstore
