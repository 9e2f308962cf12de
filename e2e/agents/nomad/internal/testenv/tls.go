package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/httptls/httptlstest"
	"github.com/nomad-fft/nomad-fft/e2e/agentrun"
)

// PKI is a test's certificate authority and the certificates it issued, generated in the test
// (no key is committed), in the folder NewPKI was given.
type PKI struct {
	CA *httptlstest.CA
	// NomadServer and NomadClient are the Nomad agents' certificates: server.global.nomad
	// and client.global.nomad (what verify_server_hostname checks), localhost and 127.0.0.1.
	// Consul is the Consul agent's (server.dc1.consul, localhost, 127.0.0.1). CLI is the
	// certificate of the API clients: the test's, fft-allocator's and fftctl's.
	NomadServer, NomadClient, Consul, CLI agentrun.TLSFiles
}

// NewPKI creates a CA and the agents' and clients' certificates in dir/tls.
func NewPKI(t testing.TB, dir string) *PKI {
	t.Helper()
	dir = filepath.Join(dir, "tls")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ca, err := httptlstest.NewCA(dir, "fft-e2e-ca")
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{CA: ca}
	local := func(name string, dns ...string) httptlstest.Spec {
		return httptlstest.Spec{Name: name, DNSNames: append(dns, "localhost"), IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}
	}
	p.NomadServer = p.Issue(t, local("nomad-server", "server.global.nomad"))
	p.NomadClient = p.Issue(t, local("nomad-client", "client.global.nomad"))
	p.Consul = p.Issue(t, local("consul", "server.dc1.consul"))
	p.CLI = p.Issue(t, httptlstest.Spec{Name: "cli"})
	return p
}

// Issue signs a certificate for s.
func (p *PKI) Issue(t testing.TB, s httptlstest.Spec) agentrun.TLSFiles {
	t.Helper()
	pair, err := p.CA.Issue(s)
	if err != nil {
		t.Fatal(err)
	}
	return agentrun.TLSFiles{CAFile: p.CA.CAFile, CertFile: pair.CertFile, KeyFile: pair.KeyFile}
}

// NomadTLS is the Nomad API client's TLS settings with the CLI certificate.
func (p *PKI) NomadTLS() *api.TLSConfig {
	return &api.TLSConfig{CACert: p.CLI.CAFile, ClientCert: p.CLI.CertFile, ClientKey: p.CLI.KeyFile}
}

// HTTPClient is an HTTP client that trusts the CA and presents the CLI certificate.
func (p *PKI) HTTPClient(t testing.TB) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(p.CA.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cert, err := tls.LoadX509KeyPair(p.CLI.CertFile, p.CLI.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// StartConsulTLS is StartConsul serving HTTPS only (no plain HTTP port), with the PKI's
// Consul certificate and every client's certificate required (https verify_incoming).
// Consul.HTTP is its address; Get and Do use HTTPS with the CLI certificate.
func StartConsulTLS(t testing.TB, consul, dir string, p *PKI) *Consul {
	t.Helper()
	return StartConsulTLSWith(t, consul, dir, p, ConsulOptions{})
}

// StartConsulTLSWith is StartConsulTLS with options (ACLs: Get and Do send the management
// token).
func StartConsulTLSWith(t testing.TB, consul, dir string, p *PKI, opts ConsulOptions) *Consul {
	t.Helper()
	ports := FreePorts(t, 4)
	cp := agentrun.ConsulPorts{HTTP: -1, Server: ports[0], SerfLAN: ports[1], SerfWAN: ports[2]}
	dataDir := filepath.Join(dir, "consul-data")
	args := append(agentrun.ConsulDevArgs(dataDir, cp), agentrun.ConsulTLSArgs(ports[3], p.Consul)...)
	c := &Consul{HTTP: fmt.Sprintf("127.0.0.1:%d", ports[3]), SerfLAN: fmt.Sprintf("127.0.0.1:%d", cp.SerfLAN),
		scheme: "https", client: p.HTTPClient(t)}
	if opts.ACL {
		c.ManagementToken = "6f3c5b0e-0f70-4e2e-8ac1-000000000001"
		args = append(args, agentrun.ConsulACLArgs(c.ManagementToken)...)
	}
	proc := StartProcess(t, "consul", dir, consul, args...)
	c.LogPath = proc.LogPath
	Eventually(t, 60*time.Second, 250*time.Millisecond, "consul elects itself and serves KV over HTTPS", func() error {
		if proc.Exited() {
			t.Fatalf("the Consul agent exited")
		}
		return agentrun.ConsulReadyAt("https://"+c.HTTP, c.client, c.ManagementToken, dataDir)
	})
	return c
}
