package agentrun

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestConsulReady(t *testing.T) {
	for _, tc := range []struct {
		name    string
		leader  string
		kv      int
		wantErr string
	}{
		{"no leader yet", `""`, http.StatusNotFound, "no leader yet"},
		{"leader, KV not served yet", `"127.0.0.1:8300"`, http.StatusInternalServerError, "500"},
		{"leader, key absent", `"127.0.0.1:8300"`, http.StatusNotFound, ""},
		{"leader, key present", `"127.0.0.1:8300"`, http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/v1/status/leader":
					_, _ = w.Write([]byte(tc.leader))
				case strings.HasPrefix(r.URL.Path, "/v1/kv/"):
					w.WriteHeader(tc.kv)
				default:
					w.WriteHeader(http.StatusTeapot)
				}
			}))
			defer srv.Close()
			err := ConsulReady(strings.TrimPrefix(srv.URL, "http://"))
			if tc.wantErr == "" && err != nil {
				t.Errorf("ConsulReady = %v, want ready", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("ConsulReady = %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}

func TestConsulIsOurs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/agent/self" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"Config":{"NodeName":"vm"},"DebugConfig":{"DataDir":"/state/consul-data"}}`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if err := ConsulIsOurs(addr, "/state/consul-data"); err != nil {
		t.Errorf("ConsulIsOurs(its own data folder) = %v, want nil", err)
	}
	if err := ConsulIsOurs(addr, "/other/consul-data"); err == nil || !strings.Contains(err.Error(), "another one") {
		t.Errorf("ConsulIsOurs(another data folder) = %v, want an error saying it is another agent", err)
	}
}
