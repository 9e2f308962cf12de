package httptls_test

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/httptls"
	"github.com/nomad-fft/nomad-fft/allocator/httptls/httptlstest"
)

// pki is a CA with a server and a client certificate, another CA's server certificate, an
// expired certificate and a file that holds no PEM.
type pki struct {
	ca, other                        *httptlstest.CA
	server, client, foreign, expired httptlstest.Pair
	junk                             string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	var p pki
	var err error
	must := func(e error) {
		t.Helper()
		if e != nil {
			t.Fatal(e)
		}
	}
	p.ca, err = httptlstest.NewCA(dir, "ca")
	must(err)
	p.other, err = httptlstest.NewCA(dir, "other-ca")
	must(err)
	p.server, err = p.ca.Issue(httptlstest.Localhost("allocator"))
	must(err)
	p.client, err = p.ca.Issue(httptlstest.Spec{Name: "reporter"})
	must(err)
	p.foreign, err = p.other.Issue(httptlstest.Localhost("foreign"))
	must(err)
	p.expired, err = p.ca.Issue(httptlstest.Spec{Name: "expired", NotAfter: time.Now().Add(-time.Minute)})
	must(err)
	p.junk = filepath.Join(dir, "junk.pem")
	must(os.WriteFile(p.junk, []byte("not a certificate\n"), 0o600))
	return p
}

func file(path, setting string) httptls.File { return httptls.File{Path: path, Setting: setting} }

func serverFiles(cert, key, ca string, verify bool) httptls.ServerFiles {
	return httptls.ServerFiles{
		Cert: file(cert, "-tls-cert-file"), Key: file(key, "-tls-key-file"), CA: file(ca, "-tls-ca-file"),
		VerifyClient: verify, VerifyClientSetting: "-tls-verify-https-client",
	}
}

func TestServerSettings(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		name    string
		files   httptls.ServerFiles
		wantErr string
		wantTLS bool
	}{
		{name: "none: plain HTTP", files: serverFiles("", "", "", false)},
		{name: "pair", files: serverFiles(p.server.CertFile, p.server.KeyFile, "", false), wantTLS: true},
		{name: "pair and client CA", files: serverFiles(p.server.CertFile, p.server.KeyFile, p.ca.CAFile, true), wantTLS: true},
		{name: "certificate without key", files: serverFiles(p.server.CertFile, "", "", false),
			wantErr: "-tls-cert-file and -tls-key-file: TLS needs both"},
		{name: "CA alone", files: serverFiles("", "", p.ca.CAFile, false), wantErr: "-tls-cert-file and -tls-key-file: TLS needs both"},
		{name: "missing certificate", files: serverFiles("/nonexistent/cert.pem", p.server.KeyFile, "", false),
			wantErr: `-tls-cert-file = "/nonexistent/cert.pem": no such file or directory`},
		{name: "missing key", files: serverFiles(p.server.CertFile, "/nonexistent/key.pem", "", false),
			wantErr: `-tls-key-file = "/nonexistent/key.pem": no such file or directory`},
		{name: "key of another certificate", files: serverFiles(p.server.CertFile, p.client.KeyFile, "", false),
			wantErr: "private key does not match public key: give a PEM certificate and the private key it was issued for"},
		{name: "junk certificate", files: serverFiles(p.junk, p.server.KeyFile, "", false), wantErr: `-tls-cert-file = "` + p.junk + `" and -tls-key-file`},
		{name: "expired", files: serverFiles(p.expired.CertFile, p.expired.KeyFile, "", false), wantErr: "not now"},
		{name: "verify without CA", files: serverFiles(p.server.CertFile, p.server.KeyFile, "", true),
			wantErr: "-tls-verify-https-client: requiring client certificates needs -tls-ca-file"},
		{name: "CA without PEM", files: serverFiles(p.server.CertFile, p.server.KeyFile, p.junk, true),
			wantErr: `-tls-ca-file = "` + p.junk + `": no PEM certificate in the file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := httptls.Server(tc.files, time.Now())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Server: err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || (cfg != nil) != tc.wantTLS {
				t.Fatalf("Server = %v, %v; want TLS %v", cfg, err, tc.wantTLS)
			}
		})
	}
}

func TestClientSettings(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		name    string
		files   httptls.ClientFiles
		wantErr string
	}{
		{name: "CA", files: httptls.ClientFiles{CA: file(p.ca.CAFile, "ca")}},
		{name: "CA and pair", files: httptls.ClientFiles{CA: file(p.ca.CAFile, "ca"), Cert: file(p.client.CertFile, "cert"), Key: file(p.client.KeyFile, "key")}},
		{name: "missing CA", files: httptls.ClientFiles{CA: file("/nonexistent/ca.pem", "allocator_ca_file")},
			wantErr: `allocator_ca_file = "/nonexistent/ca.pem": no such file or directory`},
		{name: "junk CA", files: httptls.ClientFiles{CA: file(p.junk, "ca")}, wantErr: "no PEM certificate"},
		{name: "certificate without key", files: httptls.ClientFiles{Cert: file(p.client.CertFile, "cert"), Key: file("", "key")},
			wantErr: "cert and key: a client certificate needs both"},
		{name: "mismatched pair", files: httptls.ClientFiles{Cert: file(p.client.CertFile, "cert"), Key: file(p.server.KeyFile, "key")},
			wantErr: "does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := httptls.Client(tc.files, time.Now())
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Client: err = %v, want %q", err, tc.wantErr)
			}
		})
	}
	if cfg, err := httptls.Client(httptls.ClientFiles{}, time.Now()); cfg != nil || err != nil {
		t.Errorf("Client of nothing = %v, %v; want nil, nil", cfg, err)
	}
}

// serve starts an HTTPS server with files that answers "ok", closed when the test ends.
func serve(t *testing.T, files httptls.ServerFiles) string {
	t.Helper()
	cfg, err := httptls.Server(files, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	srv.TLS = cfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return "127.0.0.1:" + port
}

var hints = httptls.Hints{CA: "-allocator-ca-cert", Cert: "-allocator-client-cert and -allocator-client-key"}

func TestHandshakes(t *testing.T) {
	p := newPKI(t)
	open := serve(t, serverFiles(p.server.CertFile, p.server.KeyFile, "", false))
	strict := serve(t, serverFiles(p.server.CertFile, p.server.KeyFile, p.ca.CAFile, true))
	foreign := serve(t, serverFiles(p.foreign.CertFile, p.foreign.KeyFile, "", false))
	ca := file(p.ca.CAFile, "ca")
	pair := httptls.ClientFiles{CA: ca, Cert: file(p.client.CertFile, "cert"), Key: file(p.client.KeyFile, "key")}
	foreignPair := httptls.ClientFiles{CA: ca, Cert: file(p.foreign.CertFile, "cert"), Key: file(p.foreign.KeyFile, "key")}
	for _, tc := range []struct {
		name    string
		url     string
		files   httptls.ClientFiles
		wantErr string
	}{
		{name: "verified", url: "https://" + open, files: httptls.ClientFiles{CA: ca}},
		{name: "by name", url: "https://localhost:" + strings.Split(open, ":")[1], files: httptls.ClientFiles{CA: ca}},
		{name: "no CA", url: "https://" + open, wantErr: "does not trust; set -allocator-ca-cert"},
		{name: "another CA's server", url: "https://" + foreign, files: httptls.ClientFiles{CA: ca}, wantErr: "set -allocator-ca-cert"},
		{name: "client certificate required", url: "https://" + strict, files: httptls.ClientFiles{CA: ca},
			wantErr: "requires a client certificate signed by its CA; set -allocator-client-cert and -allocator-client-key"},
		{name: "client certificate given", url: "https://" + strict, files: pair},
		{name: "another CA's client certificate", url: "https://" + strict, files: foreignPair,
			wantErr: "-allocator-client-cert and -allocator-client-key must be signed by the CA it trusts"},
		{name: "plain HTTP", url: "http://" + open, wantErr: "the allocator serves HTTPS only: use an https:// address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := httptls.Client(tc.files, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			h := hints
			h.SentCert = tc.files.Cert.Path != ""
			err = get(httptls.NewHTTPClient(cfg, 5*time.Second), tc.url, h)
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("GET %s: err = %v, want %q", tc.url, err, tc.wantErr)
			}
		})
	}
}

// get is a reporter's request: the error explained, and the body checked.
func get(c *http.Client, url string, h httptls.Hints) error {
	resp, err := c.Get(url)
	if err != nil {
		return httptls.Explain(err, h)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if hint := httptls.StatusHint(resp.Request.URL.Scheme, resp.StatusCode, body); hint != "" {
		return &hintError{hint}
	}
	if string(body) != "ok" {
		return &hintError{"body " + string(body)}
	}
	return nil
}

type hintError struct{ msg string }

func (e *hintError) Error() string { return e.msg }

// The TLS 1.2 path reports a missing client certificate differently from 1.3.
func TestHandshakeTLS12ClientCertificate(t *testing.T) {
	p := newPKI(t)
	strict := serve(t, serverFiles(p.server.CertFile, p.server.KeyFile, p.ca.CAFile, true))
	cfg, err := httptls.Client(httptls.ClientFiles{CA: file(p.ca.CAFile, "ca")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxVersion = tls.VersionTLS12
	err = get(httptls.NewHTTPClient(cfg, 5*time.Second), "https://"+strict, hints)
	if err == nil || !strings.Contains(err.Error(), "set -allocator-client-cert") {
		t.Fatalf("err = %v, want the client certificate's fix", err)
	}
}
