package httptls

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// Hints name a reporter's settings, as its user writes them, for the fixes Explain gives:
// CA is the CA file's setting ("-allocator-ca-cert (FFT_ALLOCATOR_CACERT)"), Cert the client
// certificate's; SentCert says whether the reporter has a client certificate.
type Hints struct {
	CA, Cert string
	SentCert bool
}

// Explain adds to err, a failed request to the allocator, the fix when it is a TLS
// mismatch; other errors come back as they are.
func Explain(err error, h Hints) error {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		op       *net.OpError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &unknown):
		return fmt.Errorf("%w: the allocator's certificate is signed by a CA this client does not trust; set %s to that CA's certificate", err, h.CA)
	case errors.As(err, &hostname):
		return fmt.Errorf("%w: address the allocator by a name or IP its certificate holds", err)
	case errors.As(err, &invalid):
		return fmt.Errorf("%w: the allocator's certificate is not valid (expired?); its operator must renew it", err)
	// crypto/tls reports the server's TLS alert as this op, the alert's type unexported: the
	// server refused the handshake, as one that requires client certificates does when none
	// or a foreign one comes.
	case errors.As(err, &op) && op.Op == "remote error" && !h.SentCert:
		return fmt.Errorf("%w: the allocator requires a client certificate signed by its CA; set %s", err, h.Cert)
	case errors.As(err, &op) && op.Op == "remote error":
		return fmt.Errorf("%w: the allocator refused the handshake; %s must be signed by the CA it trusts (its -tls-ca-file)", err, h.Cert)
	}
	return err
}

// plainToHTTPS is what Go's HTTP server answers a plain HTTP request on its TLS listener with
// (net/http, server.go), the only sign a client gets of that mistake.
var plainToHTTPS = []byte("Client sent an HTTP request to an HTTPS server")

// StatusHint is the fix for an answer with status code and body to a request with scheme,
// or "": an http:// request to an allocator that serves HTTPS only.
func StatusHint(scheme string, code int, body []byte) string {
	if scheme == "http" && code == http.StatusBadRequest && bytes.Contains(body, plainToHTTPS) {
		return "the allocator serves HTTPS only: use an https:// address"
	}
	return ""
}
