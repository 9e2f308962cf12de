package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/httptls"
)

// listenerTLS is the HTTP API's own TLS: the -tls-* flags, named as the keys of Nomad's
// agent tls block (cert_file, key_file, ca_file, verify_https_client), which the -config
// file's tls block takes.
type listenerTLS struct {
	certFile, keyFile, caFile string
	verifyHTTPSClient         bool
	// from names the -config file's key of each flag the file set, for errors.
	from map[string]string
}

// tlsBlock is the -config file's tls block.
type tlsBlock struct {
	CertFile          *string `hcl:"cert_file,optional"`
	KeyFile           *string `hcl:"key_file,optional"`
	CAFile            *string `hcl:"ca_file,optional"`
	VerifyHTTPSClient *bool   `hcl:"verify_https_client,optional"`
}

func (l *listenerTLS) flags(fs *flag.FlagSet) {
	fs.StringVar(&l.certFile, "tls-cert-file", "", "PEM certificate of the HTTP API: with -tls-key-file, the API (progress reports included, which carry the tasks' workload identities) serves HTTPS only.")
	fs.StringVar(&l.keyFile, "tls-key-file", "", "PEM private key of -tls-cert-file.")
	fs.StringVar(&l.caFile, "tls-ca-file", "", "PEM CA certificate that verifies the clients' certificates: those a client sends, and every client's with -tls-verify-https-client.")
	fs.BoolVar(&l.verifyHTTPSClient, "tls-verify-https-client", false, "Require every HTTPS client (reporters, health checks, metrics scrapers) to present a certificate signed by -tls-ca-file, as Nomad's verify_https_client.")
}

// fromFile copies the -config file's tls block into l, except for the flags set on the
// command line.
func (l *listenerTLS) fromFile(path string, b *tlsBlock, set map[string]bool) {
	l.from = map[string]string{}
	for _, x := range []struct {
		flag, key string
		dst, v    *string
	}{
		{"tls-cert-file", "cert_file", &l.certFile, b.CertFile}, {"tls-key-file", "key_file", &l.keyFile, b.KeyFile},
		{"tls-ca-file", "ca_file", &l.caFile, b.CAFile},
	} {
		if x.v != nil && !set[x.flag] {
			*x.dst = *x.v
			l.from[x.flag] = fmt.Sprintf("%s: tls %s", path, x.key)
		}
	}
	if b.VerifyHTTPSClient != nil && !set["tls-verify-https-client"] {
		l.verifyHTTPSClient = *b.VerifyHTTPSClient
		l.from["tls-verify-https-client"] = path + ": tls verify_https_client"
	}
}

// config checks the files and returns the listener's TLS configuration; nil is plain HTTP.
func (l *listenerTLS) config(now time.Time) (*tls.Config, error) {
	setting := func(flag string) string {
		if from, ok := l.from[flag]; ok {
			return from
		}
		return "-" + flag
	}
	return httptls.Server(httptls.ServerFiles{
		Cert:                httptls.File{Path: l.certFile, Setting: setting("tls-cert-file")},
		Key:                 httptls.File{Path: l.keyFile, Setting: setting("tls-key-file")},
		CA:                  httptls.File{Path: l.caFile, Setting: setting("tls-ca-file")},
		VerifyClient:        l.verifyHTTPSClient,
		VerifyClientSetting: setting("tls-verify-https-client"),
	}, now)
}
