package agentrun

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An agent is ready once it has a leader, serves KV and keeps its data where the caller
// started it with; another agent on the port never is.
func TestConsulReady(t *testing.T) {
	for _, tc := range []struct {
		name    string
		leader  string
		kv      int
		dataDir string
		wantErr string
	}{
		{"no leader yet", `""`, http.StatusNotFound, "/state/consul-data", "no leader yet"},
		{"leader, KV not served yet", `"127.0.0.1:8300"`, http.StatusInternalServerError, "/state/consul-data", "500"},
		{"leader, key absent", `"127.0.0.1:8300"`, http.StatusNotFound, "/state/consul-data", ""},
		{"leader, key present", `"127.0.0.1:8300"`, http.StatusOK, "/state/consul-data", ""},
		{"another program's agent", `"127.0.0.1:8300"`, http.StatusOK, "/other/consul-data", "another one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/v1/status/leader":
					_, _ = w.Write([]byte(tc.leader))
				case strings.HasPrefix(r.URL.Path, "/v1/kv/"):
					w.WriteHeader(tc.kv)
				case r.URL.Path == "/v1/agent/self":
					_, _ = w.Write([]byte(`{"Config":{"NodeName":"vm"},"DebugConfig":{"DataDir":"/state/consul-data"}}`))
				default:
					w.WriteHeader(http.StatusTeapot)
				}
			}))
			defer srv.Close()
			err := ConsulReady(strings.TrimPrefix(srv.URL, "http://"), tc.dataDir)
			if tc.wantErr == "" && err != nil {
				t.Errorf("ConsulReady = %v, want ready", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("ConsulReady = %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}
