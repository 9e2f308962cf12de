package nomadapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/jobid"
	"github.com/nomad-fft/nomad-fft/allocator/live"
)

// jwt builds an unsigned token with the given claims: the verifier reads
// the claims, and Nomad (here the fake) decides whether it is genuine.
func jwt(t *testing.T, c map[string]string) string {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"EdDSA","typ":"JWT"}`)) + "." + enc(b) + ".sig"
}

// identityNomad answers the two calls the verifier makes: the ACL probe,
// and the variable read that only tokens in genuine (for the job and
// namespace they name) pass.
type identityNomad struct {
	aclOff  bool
	genuine map[string]string // token -> "namespace/job" it may read
	calls   []string
}

func (f *identityNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls = append(f.calls, r.URL.Path)
	switch {
	case r.URL.Path == "/v1/acl/token/self":
		if f.aclOff {
			http.Error(w, "ACL support disabled", http.StatusBadRequest)
			return
		}
		http.Error(w, "Permission denied", http.StatusForbidden)
	case strings.HasPrefix(r.URL.Path, "/v1/var/nomad/jobs/"):
		if f.aclOff {
			http.Error(w, "variable not found", http.StatusNotFound)
			return
		}
		job := strings.TrimPrefix(r.URL.Path, "/v1/var/nomad/jobs/")
		if f.genuine[r.Header.Get("X-Nomad-Token")] != r.URL.Query().Get("namespace")+"/"+job {
			http.Error(w, "Permission denied", http.StatusForbidden)
			return
		}
		http.Error(w, "variable not found", http.StatusNotFound)
	default:
		http.NotFound(w, r)
	}
}

func TestIdentityVerifier(t *testing.T) {
	good := jwt(t, map[string]string{"nomad_namespace": "default", "nomad_job_id": "a", "nomad_allocation_id": "alloc-1", "nomad_task": "train"})
	forged := jwt(t, map[string]string{"nomad_namespace": "default", "nomad_job_id": "b", "nomad_allocation_id": "alloc-9", "nomad_task": "train"})
	noJob := jwt(t, map[string]string{"nomad_namespace": "default", "nomad_allocation_id": "alloc-1"})
	for _, tc := range []struct {
		name    string
		aclOff  bool
		token   string
		want    live.TaskIdentity
		refused string // "" = accepted
	}{
		{"genuine", false, good, live.TaskIdentity{Namespace: "default", JobID: "a", AllocID: "alloc-1", Task: "train"}, ""},
		{"forged claims", false, forged, live.TaskIdentity{}, "Nomad refused it (403)"},
		{"an ACL token", false, "6a1f1a0e-0000-4000-8000-000000000000", live.TaskIdentity{}, "not a workload identity"},
		{"not base64", false, "a.b!.c", live.TaskIdentity{}, "not base64url"},
		{"no job claim", false, noJob, live.TaskIdentity{}, "lacks the nomad_namespace, nomad_job_id"},
		{"ACLs off", true, good, live.TaskIdentity{}, "ACLs are disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &identityNomad{aclOff: tc.aclOff, genuine: map[string]string{good: "default/a"}}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			nc, err := api.NewClient(&api.Config{Address: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			got, err := NewIdentityVerifier(nc).VerifyTask(context.Background(), tc.token)
			if tc.refused == "" {
				if err != nil || got != tc.want {
					t.Fatalf("VerifyTask = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, live.ErrTokenRefused) || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("VerifyTask error = %v, want live.ErrTokenRefused with %q", err, tc.refused)
			}
		})
	}
}

func TestIdentityVerifierNomadDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens
	nc, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt(t, map[string]string{"nomad_namespace": "default", "nomad_job_id": "a", "nomad_allocation_id": "x"})
	_, err = NewIdentityVerifier(nc).VerifyTask(context.Background(), tok)
	if err == nil || errors.Is(err, live.ErrTokenRefused) {
		t.Fatalf("VerifyTask with Nomad down = %v, want an error to retry on (not a refusal)", err)
	}
}

// FuzzParseClaims: any token is refused as not a workload identity (wrapping
// live.ErrTokenRefused), or its claims name a namespace, a job ID that jobid accepts, and an
// allocation.
func FuzzParseClaims(f *testing.F) {
	enc := base64.RawURLEncoding.EncodeToString
	for _, claims := range []string{
		`{"nomad_namespace":"default","nomad_job_id":"train","nomad_allocation_id":"a1","nomad_task":"t"}`,
		`{"nomad_namespace":"default","nomad_job_id":"..","nomad_allocation_id":"a1"}`,
		`{"nomad_namespace":"..","nomad_job_id":"ledger","nomad_allocation_id":"a1"}`,
		`{"nomad_namespace":"default","nomad_job_id":"train.v2","nomad_allocation_id":"a1"}`,
		`{"nomad_namespace":"default"}`, `[]`, `null`,
	} {
		f.Add(enc([]byte(`{"alg":"ES256"}`)) + "." + enc([]byte(claims)) + ".sig")
	}
	f.Add("not-a-jwt")
	f.Add("a.b.c.d")
	f.Add("..")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := parseClaims(token)
		if err != nil {
			if !errors.Is(err, live.ErrTokenRefused) {
				t.Fatalf("error %v does not wrap ErrTokenRefused", err)
			}
			return
		}
		if c.AllocID == "" || jobid.Check(c.Namespace, c.JobID) != nil || strings.Count(token, ".") != 2 {
			t.Fatalf("took %q as %+v", token, c)
		}
	})
}
