// Command fft-allocator runs FFT rounds on a Nomad cluster, with its fairness ledger and audit
// log in Consul KV.
package main
