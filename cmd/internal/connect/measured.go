package connect

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	consul "github.com/hashicorp/consul/api"
	cleanhttp "github.com/hashicorp/go-cleanhttp"
	nomad "github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/roundtime"
)

// Measured wraps rt so that a request whose context carries a roundtime.Meter counts as a wait on
// it from the request until its response's body is read to its end or closed (or the request
// fails): the round's time waiting on Nomad and Consul, told from its own.
func Measured(rt http.RoundTripper) http.RoundTripper { return measured{rt} }

type measured struct{ next http.RoundTripper }

func (m measured) RoundTrip(r *http.Request) (*http.Response, error) {
	meter := roundtime.From(r.Context())
	if meter == nil {
		return m.next.RoundTrip(r)
	}
	end := meter.Begin()
	resp, err := m.next.RoundTrip(r)
	if err != nil || resp.Body == nil {
		end()
		return resp, err
	}
	resp.Body = &measuredBody{ReadCloser: resp.Body, end: end}
	return resp, nil
}

// measuredBody ends its wait when the body is done.
type measuredBody struct {
	io.ReadCloser
	end func()
}

func (b *measuredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end()
	}
	return n, err
}

func (b *measuredBody) Close() error {
	b.end()
	return b.ReadCloser.Close()
}

// NomadMeasured is Nomad, its requests Measured. Nomad's api configures TLS only on the client
// it builds itself, so this one is built here with the settings Nomad's api gives its own
// (pooled connections, TLS 1.2 at least, HTTP/1); a unix socket address keeps Nomad's own
// client, unmeasured.
func (s Settings) NomadMeasured() (*nomad.Client, error) {
	c := s.NomadConfig()
	if strings.HasPrefix(c.Address, "unix:") {
		return s.Nomad()
	}
	hc := cleanhttp.DefaultPooledClient()
	tr := hc.Transport.(*http.Transport)
	tr.TLSHandshakeTimeout = 10 * time.Second
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	tr.ForceAttemptHTTP2 = false
	if err := nomad.ConfigureTLS(hc, c.TLSConfig); err != nil {
		return nil, fmt.Errorf("configuring TLS for Nomad at %s: %w", c.Address, err)
	}
	hc.Transport = Measured(tr)
	c.HttpClient = hc
	client, err := nomad.NewClient(c)
	if err != nil {
		return nil, fmt.Errorf("creating the Nomad client for %s: %w", c.Address, err)
	}
	return client, nil
}

// ConsulMeasured is Consul, its requests Measured (Consul's api keeps the HTTP client it builds
// in the configuration it is given).
func (s Settings) ConsulMeasured() (*consul.Client, error) {
	c := s.ConsulConfig()
	client, err := consul.NewClient(c)
	if err != nil {
		return nil, fmt.Errorf("creating the Consul client for %s: %w", c.Address, err)
	}
	c.HttpClient.Transport = Measured(c.HttpClient.Transport)
	return client, nil
}
