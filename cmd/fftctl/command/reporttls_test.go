package command

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/cli"

	"github.com/nomad-fft/nomad-fft/allocator/httptls"
	"github.com/nomad-fft/nomad-fft/allocator/httptls/httptlstest"
)

// TestReportTLS: fftctl report reaches an HTTPS allocator that it verifies with
// -allocator-ca-cert or FFT_ALLOCATOR_CACERT, with a client certificate when the allocator
// requires one, and a mismatch fails naming the setting that fixes it.
func TestReportTLS(t *testing.T) {
	dir := t.TempDir()
	pki := httptlstest.NewPKI(t, dir, "allocator", "reporter")
	ca, server, client := pki.CA, pki.Server, pki.Client
	start := func(verify bool) string {
		files := httptls.ServerFiles{Cert: httptls.File{Path: server.CertFile}, Key: httptls.File{Path: server.KeyFile}}
		if verify {
			files.CA, files.VerifyClient = httptls.File{Path: ca.CAFile}, true
		}
		cfg, err := httptls.Server(files, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"job": "team/train", "done": 42}`))
		}))
		srv.TLS, srv.Config.ErrorLog = cfg, log.New(io.Discard, "", 0)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.URL
	}
	open, strict := start(false), start(true)
	plain := "http://" + strings.TrimPrefix(open, "https://")
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		stderr string
	}{
		{name: "CA flag", args: []string{"-allocator-addr", open, "-allocator-ca-cert", ca.CAFile}},
		{name: "CA and address from the environment", env: map[string]string{"FFT_ALLOCATOR_ADDR": open, "FFT_ALLOCATOR_CACERT": ca.CAFile}},
		{name: "client certificate", args: []string{"-allocator-addr", strict, "-allocator-ca-cert", ca.CAFile,
			"-allocator-client-cert", client.CertFile, "-allocator-client-key", client.KeyFile}},
		{name: "client certificate from the environment", args: []string{"-allocator-addr", strict}, env: map[string]string{
			"FFT_ALLOCATOR_CACERT": ca.CAFile, "FFT_ALLOCATOR_CLIENT_CERT": client.CertFile, "FFT_ALLOCATOR_CLIENT_KEY": client.KeyFile}},
		{name: "no CA", args: []string{"-allocator-addr", open},
			stderr: "signed by a CA this client does not trust; set -allocator-ca-cert (FFT_ALLOCATOR_CACERT)"},
		{name: "no client certificate", args: []string{"-allocator-addr", strict, "-allocator-ca-cert", ca.CAFile},
			stderr: "requires a client certificate signed by its CA; set -allocator-client-cert and -allocator-client-key"},
		{name: "plain HTTP to HTTPS", args: []string{"-allocator-addr", plain, "-allocator-ca-cert", ca.CAFile},
			stderr: "HTTP 400: Client sent an HTTP request to an HTTPS server. (the allocator serves HTTPS only: use an https:// address)"},
		{name: "missing CA file", args: []string{"-allocator-addr", open, "-allocator-ca-cert", dir + "/none.pem"},
			stderr: `-allocator-ca-cert (FFT_ALLOCATOR_CACERT) = "` + dir + `/none.pem": no such file or directory`},
		{name: "key without certificate", args: []string{"-allocator-addr", open, "-allocator-client-key", client.KeyFile},
			stderr: "a client certificate needs both the certificate and its private key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"NOMAD_NAMESPACE": "team", "NOMAD_JOB_ID": "train", "NOMAD_TOKEN": "tok"}
			for k, v := range tc.env {
				env[k] = v
			}
			ui := cli.NewMockUi()
			c := &ReportCommand{Meta: Meta{Ui: ui}, getenv: func(k string) string { return env[k] }}
			code := c.Run(append(tc.args, "42"))
			want := 0
			if tc.stderr != "" {
				want = 1
			}
			if code != want || !strings.Contains(ui.ErrorWriter.String(), tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d with %q", code, ui.ErrorWriter.String(), want, tc.stderr)
			}
		})
	}
}
