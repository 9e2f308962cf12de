package main

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/httptls/httptlstest"
)

func TestListenerTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := httptlstest.NewCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue(httptlstest.Localhost("allocator"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := ca.Issue(httptlstest.Localhost("other"))
	if err != nil {
		t.Fatal(err)
	}
	config := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fromFile := config("good.hcl", "tls {\n cert_file = \""+pair.CertFile+"\"\n key_file = \""+pair.KeyFile+"\"\n ca_file = \""+ca.CAFile+"\"\n verify_https_client = true\n}\n")
	missingInFile := config("missing.hcl", "tls {\n cert_file = \"/nonexistent/cert.pem\"\n key_file = \""+pair.KeyFile+"\"\n}\n")
	for _, tc := range []struct {
		name       string
		args       []string
		wantErr    string
		wantTLS    bool
		wantVerify tls.ClientAuthType
	}{
		{name: "plain HTTP by default"},
		{name: "pair", args: []string{"-tls-cert-file", pair.CertFile, "-tls-key-file", pair.KeyFile}, wantTLS: true},
		{name: "client certificates required", args: []string{"-tls-cert-file", pair.CertFile, "-tls-key-file", pair.KeyFile,
			"-tls-ca-file", ca.CAFile, "-tls-verify-https-client"}, wantTLS: true, wantVerify: tls.RequireAndVerifyClientCert},
		{name: "client certificates checked when sent", args: []string{"-tls-cert-file", pair.CertFile, "-tls-key-file", pair.KeyFile,
			"-tls-ca-file", ca.CAFile}, wantTLS: true, wantVerify: tls.VerifyClientCertIfGiven},
		{name: "from the config file", args: []string{"-config", fromFile}, wantTLS: true, wantVerify: tls.RequireAndVerifyClientCert},
		{name: "missing key", args: []string{"-tls-cert-file", pair.CertFile},
			wantErr: "-tls-cert-file and -tls-key-file: TLS needs both the certificate and its private key"},
		{name: "missing file", args: []string{"-tls-cert-file", "/nonexistent/cert.pem", "-tls-key-file", pair.KeyFile},
			wantErr: `-tls-cert-file = "/nonexistent/cert.pem": no such file or directory`},
		{name: "not a pair", args: []string{"-tls-cert-file", pair.CertFile, "-tls-key-file", other.KeyFile},
			wantErr: "private key does not match public key"},
		{name: "verify without CA", args: []string{"-tls-cert-file", pair.CertFile, "-tls-key-file", pair.KeyFile, "-tls-verify-https-client"},
			wantErr: "-tls-verify-https-client: requiring client certificates needs -tls-ca-file"},
		{name: "missing file named by the config file's key", args: []string{"-config", missingInFile},
			wantErr: missingInFile + `: tls cert_file = "/nonexistent/cert.pem": no such file or directory`},
		{name: "a flag overrides the file", args: []string{"-config", missingInFile, "-tls-cert-file", pair.CertFile}, wantTLS: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			f, err := parse(tc.args, &out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parse(%q): err = %v, want %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q): %v", tc.args, err)
			}
			if (f.tlsConfig != nil) != tc.wantTLS || (f.tlsConfig != nil && f.tlsConfig.ClientAuth != tc.wantVerify) {
				t.Fatalf("parse(%q): TLS %+v, want TLS %v with client auth %v", tc.args, f.tlsConfig, tc.wantTLS, tc.wantVerify)
			}
		})
	}
}
