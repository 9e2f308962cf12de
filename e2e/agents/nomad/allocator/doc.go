// Package allocator holds the end-to-end tests of fft-allocator against real Consul and Nomad
// agents whose clients present fake GPU models.
package allocator
