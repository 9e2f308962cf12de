// Package install checks that an operator can `go install` nomad-fft's binaries at a version,
// from a module proxy built out of this checkout.
package install
