package task

import (
	"crypto/tls"
	"strings"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/httptls"
)

// allocatorTLS is the TLS configuration of the reports to the allocator, nil without any
// allocator_*_file key.
func (c Config) allocatorTLS() (*tls.Config, error) {
	return httptls.Client(httptls.ClientFiles{
		CA:   httptls.File{Path: c.AllocatorCAFile, Setting: "allocator_ca_file"},
		Cert: httptls.File{Path: c.AllocatorCertFile, Setting: "allocator_cert_file"},
		Key:  httptls.File{Path: c.AllocatorKeyFile, Setting: "allocator_key_file"},
	}, time.Now())
}

// allocatorHints name the keys that fix a TLS mismatch with the allocator.
func (c Config) allocatorHints() httptls.Hints {
	return httptls.Hints{CA: "allocator_ca_file", Cert: "allocator_cert_file and allocator_key_file", SentCert: c.AllocatorCertFile != ""}
}

// checkAllocatorTLS adds what is wrong with the allocator_*_file keys: a file that cannot
// be read or does not hold what it should, or TLS settings for a plain http:// allocator.
func (fe *fieldErrors) checkAllocatorTLS(c Config) {
	if _, err := c.allocatorTLS(); err != nil {
		// The error starts with the keys it is about (and the value): that is its field.
		field, problem, _ := strings.Cut(err.Error(), ": ")
		fe.add(field, "%s", problem)
		return
	}
	tlsKeys := c.AllocatorCAFile != "" || c.AllocatorCertFile != ""
	if tlsKeys && !strings.HasPrefix(c.AllocatorAddress, "https://") {
		fe.add("allocator_address", "%q is not https:// while allocator_ca_file or allocator_cert_file is set: use the allocator's https:// address", c.AllocatorAddress)
	}
}
