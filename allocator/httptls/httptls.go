package httptls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"time"
)

// File is a PEM file an operator named, and the setting that named it (a flag such as
// "-tls-cert-file", or a config key), so that every error points at what to fix.
type File struct {
	Path    string
	Setting string
}

// ServerFiles are the listener's settings, Nomad's tls block by another name: with Cert and
// Key the API serves HTTPS only; VerifyClient (verify_https_client) also requires every
// client to present a certificate signed by CA.
type ServerFiles struct {
	Cert, Key, CA File
	VerifyClient  bool
	// VerifyClientSetting names VerifyClient's setting, for errors.
	VerifyClientSetting string
}

// Enabled reports whether any TLS setting is given.
func (f ServerFiles) Enabled() bool {
	return f.Cert.Path != "" || f.Key.Path != "" || f.CA.Path != "" || f.VerifyClient
}

// Server returns the listener's TLS configuration, or nil when no setting is given (plain
// HTTP). now dates the certificate check: an expired certificate is refused at start, not at
// the first handshake.
func Server(f ServerFiles, now time.Time) (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	if f.Cert.Path == "" || f.Key.Path == "" {
		return nil, fmt.Errorf("%s and %s: TLS needs both the certificate and its private key (PEM files)", f.Cert.Setting, f.Key.Setting)
	}
	pair, err := loadPair(f.Cert, f.Key, now)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if f.VerifyClient && f.CA.Path == "" {
		return nil, fmt.Errorf("%s: requiring client certificates needs %s, the CA that signs them", f.VerifyClientSetting, f.CA.Setting)
	}
	if f.CA.Path != "" {
		pool, err := loadPool(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		if f.VerifyClient {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		} else {
			// None is required, but one that is sent must be the CA's: a client that
			// presents a certificate expects it to count.
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	return cfg, nil
}

// ClientFiles are a reporter's settings: CA verifies the allocator's certificate (else the
// system's roots do); Cert and Key are its own, for an allocator that requires one.
type ClientFiles struct {
	CA, Cert, Key File
}

// Client returns a reporter's TLS configuration, or nil when no file is given (the
// system's roots verify an https allocator).
func Client(f ClientFiles, now time.Time) (*tls.Config, error) {
	if f.CA.Path == "" && f.Cert.Path == "" && f.Key.Path == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA.Path != "" {
		pool, err := loadPool(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.Cert.Path != "" && f.Key.Path != "":
		pair, err := loadPair(f.Cert, f.Key, now)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	case f.Cert.Path != "" || f.Key.Path != "":
		return nil, fmt.Errorf("%s and %s: a client certificate needs both the certificate and its private key (PEM files)", f.Cert.Setting, f.Key.Setting)
	}
	return cfg, nil
}

// NewHTTPClient returns an HTTP client with Go's default transport settings, tls (which may
// be nil) and timeout.
func NewHTTPClient(tls *tls.Config, timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tls
	return &http.Client{Transport: t, Timeout: timeout}
}

func readFile(f File) ([]byte, error) {
	b, err := os.ReadFile(f.Path)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		// The path is in the message already.
		err = pe.Err
	}
	if err != nil {
		return nil, fmt.Errorf("%s = %q: %w", f.Setting, f.Path, err)
	}
	return b, nil
}

// loadPair reads a certificate and its key, and checks that they match and that the
// certificate is valid at now.
func loadPair(cert, key File, now time.Time) (tls.Certificate, error) {
	certPEM, err := readFile(cert)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := readFile(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s = %q and %s = %q: %w: give a PEM certificate and the private key it was issued for",
			cert.Setting, cert.Path, key.Setting, key.Path, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s = %q: %w", cert.Setting, cert.Path, err)
	}
	if now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return tls.Certificate{}, fmt.Errorf("%s = %q: the certificate is valid from %s to %s, not now (%s): renew it",
			cert.Setting, cert.Path, leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	pair.Leaf = leaf
	return pair, nil
}

// loadPool reads a PEM bundle of CA certificates.
func loadPool(ca File) (*x509.CertPool, error) {
	b, err := readFile(ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s = %q: no PEM certificate in the file: give the CA certificate (-----BEGIN CERTIFICATE-----)", ca.Setting, ca.Path)
	}
	return pool, nil
}
