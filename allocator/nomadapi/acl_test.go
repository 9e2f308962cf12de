package nomadapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// TestDeniedNamesCapability: a call Nomad refuses with 403 says which
// capability of the shipped policy the token lacks.
func TestDeniedNamesCapability(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/nodes" {
			w.Header().Set("X-Nomad-Index", "1")
			_, _ = w.Write([]byte("[]"))
			return
		}
		http.Error(w, "Permission denied", http.StatusForbidden)
	}))
	defer srv.Close()
	nc, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(nc, nil).Observe(context.Background())
	if err == nil || !strings.Contains(err.Error(), `lacks namespace capability "list-jobs"`) || !strings.Contains(err.Error(), "nomad-policy.hcl") {
		t.Fatalf("Observe error = %v, want it to name list-jobs and the policy file", err)
	}
	var _ loop.Observer = New(nc, nil)
	if got := needs(context.Canceled, capSubmitJob); got != context.Canceled {
		t.Fatalf("needs changed an error that is not a 403: %v", got)
	}
}
