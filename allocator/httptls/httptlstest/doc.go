// Package httptlstest issues throwaway certificates for tests: a CA, and server and client
// certificates it signs, written as PEM files, so that no key is ever committed.
package httptlstest
