// Package httptls builds the TLS settings of the fft-allocator's HTTP API: its listener's
// (a certificate pair, and client certificates required when asked) and its reporters'
// (the CA that verifies the allocator, and their own certificate when it requires one).
package httptls
