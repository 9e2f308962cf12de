package connect

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	consul "github.com/hashicorp/consul/api"
	nomad "github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/roundtime"
)

// slowServer answers every request after delay, with a small JSON body.
func slowServer(t *testing.T, delay time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		w.Header().Set("X-Nomad-Index", "1")
		w.Header().Set("X-Consul-Index", "1")
		io.WriteString(w, `"127.0.0.1:4647"`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestMeasuredClientsCountTheirCalls(t *testing.T) {
	const delay = 50 * time.Millisecond
	srv := slowServer(t, delay)
	n, err := Settings{Address: srv.URL}.NomadMeasured()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Settings{Address: srv.URL}.ConsulMeasured()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]func(ctx context.Context) error{
		"nomad": func(ctx context.Context) error {
			_, err := n.Status().Leader() // no context: never measured
			if err != nil {
				return err
			}
			_, _, err = n.Nodes().List((&nomad.QueryOptions{}).WithContext(ctx))
			return err
		},
		"consul": func(ctx context.Context) error {
			_, _, err := c.KV().Get("k", (&consul.QueryOptions{}).WithContext(ctx))
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			m := roundtime.NewMeter()
			// Without a meter in the context nothing is counted, and nothing breaks.
			if err := call(context.Background()); err != nil {
				t.Logf("call without a meter: %v", err) // the body may not decode; the wait is what counts
			}
			_ = call(roundtime.With(context.Background(), m))
			if got := m.Waited(); got < delay || got > 20*delay {
				t.Errorf("waited %v for one call of %v", got, delay)
			}
		})
	}
}

func TestNomadMeasuredChecksTLSFiles(t *testing.T) {
	if _, err := (Settings{Address: "https://n:4646", CACert: "/no/such/ca.pem"}).NomadMeasured(); err == nil {
		t.Error("a missing CA file was accepted")
	}
}

func TestMeasuredEndsOnFailure(t *testing.T) {
	m := roundtime.NewMeter()
	hc := &http.Client{Transport: Measured(http.DefaultTransport)}
	req, _ := http.NewRequestWithContext(roundtime.With(context.Background(), m), http.MethodGet, "http://127.0.0.1:1/", nil)
	if _, err := hc.Do(req); err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
	w := m.Waited()
	time.Sleep(20 * time.Millisecond)
	if m.Waited() != w {
		t.Error("a failed request left its wait open")
	}
}

// The client NomadMeasured builds itself takes the TLS settings as Nomad's own does: it trusts
// the CA it is given, and only it.
func TestNomadMeasuredTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `"127.0.0.1:4647"`)
	}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	trusted, err := Settings{Address: srv.URL, CACert: ca}.NomadMeasured()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trusted.Status().Leader(); err != nil {
		t.Errorf("with the server's CA: %v", err)
	}
	untrusted, err := Settings{Address: srv.URL}.NomadMeasured()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusted.Status().Leader(); err == nil {
		t.Error("without the server's CA the connection was trusted")
	}
}
