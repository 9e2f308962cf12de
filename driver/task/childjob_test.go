package task

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// TestDispatchedJobIsOneStep: a dispatched or periodic child's ID ("parent/dispatch-…") is
// percent-encoded to one path step, in the allocator's URLs and in its checkpoint folder.
func TestDispatchedJobIsOneStep(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.EscapedPath()+"?"+r.URL.RawQuery)
		_, _ = w.Write([]byte(`{"create_index": 5}`))
	}))
	defer srv.Close()
	pub, err := newHTTPPublisher(Config{AllocatorAddress: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	const job = "parent/dispatch-1700000000-abcd1234"
	if err := pub.Publish(context.Background(), "default", job, "alloc-1", "", report.Report{Done: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Incarnation(context.Background(), "default", job, "alloc-1", ""); err != nil {
		t.Fatal(err)
	}
	want := []string{"PUT /v1/progress/default/parent%2Fdispatch-1700000000-abcd1234?alloc=alloc-1",
		"GET /v1/incarnation/default/parent%2Fdispatch-1700000000-abcd1234?alloc=alloc-1"}
	if len(paths) != 2 || paths[0] != want[0] || paths[1] != want[1] {
		t.Errorf("sent %q, want %q", paths, want)
	}
	cfg := &drivers.TaskConfig{AllocDir: "/alloc", Name: "train", Namespace: "default", JobID: job, TaskGroupName: "main"}
	p, err := taskPaths(cfg, "/ckpt", 5)
	if want := filepath.Join("/ckpt", "default", "parent%2Fdispatch-1700000000-abcd1234", "create-index-5", "main", "train"); err != nil || p.CheckpointDir != want {
		t.Errorf("checkpoint folder %q (%v), want %q", p.CheckpointDir, err, want)
	}
}
