package task

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/base"

	"github.com/nomad-fft/nomad-fft/allocator/httptls"
	"github.com/nomad-fft/nomad-fft/allocator/httptls/httptlstest"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// parsePluginConfig parses an agent's plugin config block as the agent does: Nomad's HCL
// spec, MessagePack, then ParseConfig.
func parsePluginConfig(t *testing.T, hcl string) (Config, error) {
	t.Helper()
	dtc, err := parseThroughNomad(t, configSpec, hcl)
	if err != nil {
		return Config{}, err
	}
	var raw map[string]any
	if err := dtc.DecodeDriverConfig(&raw); err != nil {
		t.Fatal(err)
	}
	var b []byte
	if err := base.MsgPackEncode(&b, raw); err != nil {
		t.Fatal(err)
	}
	return ParseConfig(b)
}

type testPKI struct {
	ca             *httptlstest.CA
	server, client httptlstest.Pair
}

func newTestPKI(t *testing.T) testPKI {
	p := httptlstest.NewPKI(t, t.TempDir(), "allocator", "driver")
	return testPKI{p.CA, p.Server, p.Client}
}

func TestPluginConfigTLS(t *testing.T) {
	p := newTestPKI(t)
	for _, tc := range []struct {
		name, hcl string
		want      Config
		wantErr   string
	}{
		{name: "CA", hcl: `config {
			allocator_address = "https://127.0.0.1:4650"
			allocator_ca_file = "` + p.ca.CAFile + `"
		}`, want: Config{DefaultUser: DefaultTaskUser, AllocatorAddress: "https://127.0.0.1:4650", AllocatorCAFile: p.ca.CAFile, ReportPeriod: DefaultReportPeriod}},
		{name: "CA and client certificate", hcl: `config {
			allocator_address = "https://127.0.0.1:4650"
			allocator_ca_file = "` + p.ca.CAFile + `"
			allocator_cert_file = "` + p.client.CertFile + `"
			allocator_key_file = "` + p.client.KeyFile + `"
		}`, want: Config{DefaultUser: DefaultTaskUser, AllocatorAddress: "https://127.0.0.1:4650", AllocatorCAFile: p.ca.CAFile,
			AllocatorCertFile: p.client.CertFile, AllocatorKeyFile: p.client.KeyFile, ReportPeriod: DefaultReportPeriod}},
		{name: "CA for a plain http allocator", hcl: `config {
			allocator_address = "http://127.0.0.1:4650"
			allocator_ca_file = "` + p.ca.CAFile + `"
		}`, wantErr: `allocator_address: "http://127.0.0.1:4650" is not https:// while allocator_ca_file or allocator_cert_file is set`},
		{name: "missing CA", hcl: `config {
			allocator_address = "https://127.0.0.1:4650"
			allocator_ca_file = "/nonexistent/ca.pem"
		}`, wantErr: `invalid nomad-driver-fft config: allocator_ca_file = "/nonexistent/ca.pem": no such file or directory`},
		{name: "certificate without key", hcl: `config {
			allocator_address = "https://127.0.0.1:4650"
			allocator_cert_file = "` + p.client.CertFile + `"
		}`, wantErr: "allocator_cert_file and allocator_key_file: a client certificate needs both"},
		{name: "key of another certificate", hcl: `config {
			allocator_address = "https://127.0.0.1:4650"
			allocator_cert_file = "` + p.client.CertFile + `"
			allocator_key_file = "` + p.server.KeyFile + `"
		}`, wantErr: "private key does not match public key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePluginConfig(t, tc.hcl)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseConfig = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestPublishTLS: the driver's reports reach an HTTPS allocator it verifies with
// allocator_ca_file, with its certificate when the allocator requires one; without the CA,
// or the certificate, the error names the key that fixes it.
func TestPublishTLS(t *testing.T) {
	p := newTestPKI(t)
	var got int
	start := func(verify bool) string {
		files := httptls.ServerFiles{Cert: httptls.File{Path: p.server.CertFile}, Key: httptls.File{Path: p.server.KeyFile}}
		if verify {
			files.CA, files.VerifyClient = httptls.File{Path: p.ca.CAFile}, true
		}
		cfg, err := httptls.Server(files, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/progress/team/train" {
				got++
			}
			_, _ = io.WriteString(w, `{"done": 5}`)
		}))
		srv.TLS, srv.Config.ErrorLog = cfg, log.New(io.Discard, "", 0)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.URL
	}
	open, strict := start(false), start(true)
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "verified", cfg: Config{AllocatorAddress: open, AllocatorCAFile: p.ca.CAFile}},
		{name: "client certificate", cfg: Config{AllocatorAddress: strict, AllocatorCAFile: p.ca.CAFile,
			AllocatorCertFile: p.client.CertFile, AllocatorKeyFile: p.client.KeyFile}},
		{name: "no CA", cfg: Config{AllocatorAddress: open}, wantErr: "does not trust; set allocator_ca_file"},
		{name: "no client certificate", cfg: Config{AllocatorAddress: strict, AllocatorCAFile: p.ca.CAFile},
			wantErr: "requires a client certificate signed by its CA; set allocator_cert_file and allocator_key_file"},
		{name: "plain HTTP", cfg: Config{AllocatorAddress: "http://" + strings.TrimPrefix(open, "https://")},
			wantErr: "use an https:// address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub, err := newHTTPPublisher(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			before := got
			err = pub.Publish(context.Background(), "team", "train", "", "", report.Report{Done: 5})
			if tc.wantErr == "" && (err != nil || got != before+1) {
				t.Fatalf("Publish: %v (reports received %d -> %d)", err, before, got)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Publish: err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
