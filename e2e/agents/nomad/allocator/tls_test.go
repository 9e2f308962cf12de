package allocator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/httptls/httptlstest"
	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// With TLS everywhere: Consul serves HTTPS only and requires client certificates; the Nomad
// server and its fake-GPU client run TLS on HTTP and RPC (verify_server_hostname,
// verify_https_client) with Nomad ACLs on, and the client reaches Consul over HTTPS; the
// fft-allocator reaches both with its client flags and serves its own API over HTTPS.
// Rounds place the jobs of jobspecs/fft-train.nomad.hcl, whose tasks report their progress
// with `fftctl report` to the allocator over HTTPS (their CA from allocator_ca_cert) with
// their workload identity, which the allocator has Nomad verify over TLS; the reports are
// stored, and `fftctl status` reads them over TLS. A reporter without the CA, or with a plain
// http:// address, is refused with the fix named, and so is a Consul client without a
// certificate, and a reporter without one by a replica with -tls-verify-https-client.
func TestTLSEverywhere(t *testing.T) {
	nomad := testenv.RequireNomad(t)
	consul := testenv.RequireConsul(t)
	bin := testenv.MainBinary(t, "fft-allocator")
	fftctl := testenv.MainBinary(t, "fftctl")
	root := testenv.TempDir(t)
	start := time.Now()
	pki := testenv.NewPKI(t, root)
	cs := testenv.StartConsulTLS(t, consul, root, pki)
	c := testenv.StartClusterWith(t, nomad, root, []testenv.FakeGPUClient{
		{Name: "v100", Model: modelV100, Count: 2, Extra: `memory_mib = 16384`, NodePool: gpuPool},
	}, testenv.ClusterOptions{ACL: true, TLS: pki, ConsulAddrs: []string{cs.HTTP}})
	t.Logf("agents up with TLS in %s", time.Since(start).Round(time.Millisecond))

	// Plain HTTP reaches neither agent.
	for name, url := range map[string]string{"Consul": "http://" + cs.HTTP + "/v1/status/leader",
		"Nomad": "http://" + strings.TrimPrefix(c.Server.HTTP, "https://") + "/v1/status/leader"} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s answered plain HTTP with %s, want 400 (HTTPS only)", name, resp.Status)
		}
	}
	// The Nomad client fingerprints Consul only when it reaches it, over HTTPS with its
	// certificate.
	testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "the Nomad client fingerprints Consul over TLS", func() error {
		node, _, err := c.API.Nodes().Info(c.NodeIDs["v100"], nil)
		if err != nil {
			return err
		}
		if v := node.Attributes["consul.version"]; v == "" {
			return fmt.Errorf("no consul.version attribute")
		}
		return nil
	})

	allocCert := pki.Issue(t, httptlstest.Localhost("fft-allocator"))
	httpPort := testenv.FreePorts(t, 1)[0]
	allocURL := fmt.Sprintf("https://127.0.0.1:%d", httpPort)
	const seconds = 6
	for _, id := range []string{"tls-a", "tls-b"} {
		register(t, c.API, parseJob(t, c.API, trainJobspec(t), id, fmt.Sprintf(`
work = "100"
seconds = %d
gpu_count = 1
fftctl = %q
allocator_addr = %q
allocator_ca_cert = %q
throughput = "%s=1"`, seconds, fftctl, allocURL, pki.CA.CAFile, modelV100)))
	}
	tlsArgs := func(prefixFlag string, f struct{ ca, cert, key string }) []string {
		return []string{prefixFlag + "ca-cert", f.ca, prefixFlag + "client-cert", f.cert, prefixFlag + "client-key", f.key}
	}
	cli := struct{ ca, cert, key string }{pki.CLI.CAFile, pki.CLI.CertFile, pki.CLI.KeyFile}
	consulArgs := append([]string{"-consul-addr", "https://" + cs.HTTP, "-consul-prefix", prefix}, tlsArgs("-consul-", cli)...)
	args := append(append([]string{"-nomad-addr", c.Server.HTTP, "-nomad-token", c.ManagementToken}, tlsArgs("-nomad-", cli)...), consulArgs...)
	proc := testenv.StartProcess(t, "fft-allocator", root, bin, append(args, "-round", "5s", "-log-level", "debug",
		"-http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort), "-tls-cert-file", allocCert.CertFile, "-tls-key-file", allocCert.KeyFile)...)

	// The rounds apply: both jobs run on the GPU client and complete.
	for _, id := range []string{"tls-a", "tls-b"} {
		waitAllocWithin(t, 60*time.Second, c.API, proc, id, "complete", "")
	}
	// Their reports came over HTTPS, verified by the task's workload identity: the tasks
	// have no Consul certificate, so only the allocator's handler can have stored them.
	for _, id := range []string{"tls-a", "tls-b"} {
		b, code, err := cs.Get("/v1/kv/" + prefix + "/progress/default/" + id + "?raw")
		if err != nil || code != http.StatusOK || doneOf(b) != "100" {
			t.Errorf("%s's stored progress: HTTP %d %q (%v), want the task's last report, 100", id, code, b, err)
		}
	}

	// fftctl status over TLS shows the reported progress; without a client certificate
	// Consul refuses it.
	ctl := func(args ...string) (int, string, string) {
		cmd := exec.Command(fftctl, args...)
		cmd.Env = cleanEnv()
		var out, errs strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errs
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("running fftctl: %v", err)
		}
		return code, out.String(), errs.String()
	}
	testenv.Eventually(t, 30*time.Second, time.Second, "fftctl status over TLS shows both jobs done", func() error {
		code, out, errs := ctl(append([]string{"status", "-json"}, consulArgs...)...)
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errs)
		}
		var v struct {
			Jobs []struct {
				ID, Status string
				Done       float64
			}
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		done := 0
		for _, j := range v.Jobs {
			if (j.ID == "default/tls-a" || j.ID == "default/tls-b") && j.Done == 100 && j.Status == "finished" {
				done++
			}
		}
		if done != 2 {
			return fmt.Errorf("jobs %+v", v.Jobs)
		}
		return nil
	})
	// With TLS 1.3 the client learns of the refusal after its side of the handshake, so Go
	// reports it as the server's alert or, when HTTP/2 had already started, as a connection
	// that could not be established; either is Consul refusing the handshake.
	if code, _, errs := ctl("status", "-consul-addr", "https://"+cs.HTTP, "-consul-ca-cert", pki.CA.CAFile, "-consul-prefix", prefix); code == 0 ||
		!refusedHandshake.MatchString(errs) {
		t.Errorf("fftctl status without a client certificate: exit %d, stderr %q; want Consul's refusal", code, errs)
	}

	// A reporter that cannot verify the allocator, or speaks plain HTTP to it, is refused
	// with the fix; with the CA but no workload identity, the allocator answers, and refuses.
	plainURL := "http://" + strings.TrimPrefix(allocURL, "https://")
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no CA", []string{"-allocator-addr", allocURL}, "set -allocator-ca-cert (FFT_ALLOCATOR_CACERT) to that CA's certificate"},
		{"plain HTTP", []string{"-allocator-addr", plainURL, "-allocator-ca-cert", pki.CA.CAFile}, "the allocator serves HTTPS only: use an https:// address"},
		{"CA but no token", []string{"-allocator-addr", allocURL, "-allocator-ca-cert", pki.CA.CAFile}, "HTTP 401: no token"},
	} {
		code, _, errs := ctl(append(append([]string{"report", "-job", "default/tls-a"}, tc.args...), "50")...)
		if code != 1 || !strings.Contains(errs, tc.stderr) {
			t.Errorf("fftctl report, %s: exit %d, stderr %q; want 1 with %q", tc.name, code, errs, tc.stderr)
		}
	}
	if b, _, _ := cs.Get("/v1/kv/" + prefix + "/progress/default/tls-a?raw"); doneOf(b) != strconv.Itoa(100) {
		t.Errorf("tls-a's progress after the refused reports: %q, want 100", b)
	}

	// A standby replica that requires client certificates (it serves the API while it waits
	// for the lock): a reporter without one is told which flags to set; with the CLI's it
	// reaches the handler, which wants a token.
	strictPort := testenv.FreePorts(t, 1)[0]
	strictURL := fmt.Sprintf("https://127.0.0.1:%d", strictPort)
	testenv.StartProcess(t, "fft-allocator-strict", root, bin, append(args, "-round", "5s", "-id", "strict",
		"-http-addr", fmt.Sprintf("127.0.0.1:%d", strictPort), "-tls-cert-file", allocCert.CertFile, "-tls-key-file", allocCert.KeyFile,
		"-tls-ca-file", pki.CA.CAFile, "-tls-verify-https-client")...)
	report := []string{"report", "-job", "default/tls-a", "-allocator-addr", strictURL, "-allocator-ca-cert", pki.CA.CAFile}
	testenv.Eventually(t, 30*time.Second, 500*time.Millisecond, "the strict replica answers a reporter with a client certificate", func() error {
		code, _, errs := ctl(append(report, "-allocator-client-cert", cli.cert, "-allocator-client-key", cli.key, "50")...)
		if code != 1 || !strings.Contains(errs, "HTTP 401: no token") {
			return fmt.Errorf("exit %d, stderr %q", code, errs)
		}
		return nil
	})
	if code, _, errs := ctl(append(report, "50")...); code != 1 ||
		!strings.Contains(errs, "requires a client certificate signed by its CA; set -allocator-client-cert and -allocator-client-key") {
		t.Errorf("fftctl report without a client certificate to the strict replica: exit %d, stderr %q", code, errs)
	}
	t.Logf("TLS end to end in %s", time.Since(start).Round(time.Millisecond))
}

// cleanEnv is the environment without the settings of Nomad, Consul and the allocator, so
// that only a command's flags say how it connects.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOMAD_") && !strings.HasPrefix(kv, "CONSUL_") && !strings.HasPrefix(kv, "FFT_ALLOCATOR_") {
			env = append(env, kv)
		}
	}
	return env
}

// refusedHandshake is how a Go client reports a server that refused its handshake for want of
// a client certificate: the server's alert, or, when the server closed the connection before
// the client read the alert (seen under load), the failed write or read of its first request:
// a broken pipe, or a connection reset on the read or (CI, 2026-12-06) on the write.
var refusedHandshake = regexp.MustCompile(`certificate required|bad certificate|http2: client conn could not be established|write: broken pipe|(read|write): connection reset by peer`)
