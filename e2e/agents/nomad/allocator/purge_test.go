package allocator

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// A job purged while it runs (`nomad job stop -purge`) leaves the rounds, and the job that
// waited for its GPUs gets them, on the host it freed, while the rounds take the job list
// from Nomad's event stream: Nomad 1.6.1 sends no event when it deletes a job, so the
// allocator tells the purge by its job-deregister evaluation. The round that first leaves
// the job out took its list from the stream, not from a full list. Two hosts of 2 A100s:
// first and other hold one each, second waits.
func TestPurgedJobLeavesAndFreesItsGPUs(t *testing.T) {
	st := startStack(t, []testenv.FakeGPUClient{
		{Name: "a100-a", Model: modelA100, Count: 2},
		{Name: "a100-b", Model: modelA100, Count: 2},
	})
	c, cs := st.Cluster, st.consul
	proc := st.allocator(t, "fft-allocator", "-round", "2s", "-http-addr", "", "-log-level", "debug")
	jobspec := trainJobspec(t)
	meta := func(work string) string {
		return `work = "` + work + `"
seconds = 3600
gpu_count = 2
throughput = "NVIDIA A100-SXM4-40GB=4"`
	}

	// first and other take a host each; second, four times the work, waits for one (as in
	// TestPlainJobHeldUntilSelected).
	register(t, c.API, parseJob(t, c.API, jobspec, "first", meta("100")))
	register(t, c.API, parseJob(t, c.API, jobspec, "other", meta("100")))
	firstAlloc := waitAlloc(t, c.API, proc, "first", "running", "")
	otherAlloc := waitAlloc(t, c.API, proc, "other", "running", "")
	if firstAlloc.NodeID == otherAlloc.NodeID {
		t.Fatalf("first and other, 2 GPUs each, share node %s of 2 GPUs", firstAlloc.NodeID)
	}
	register(t, c.API, parseJob(t, c.API, jobspec, "second", meta("400")))
	// A few rounds with all three, so that the stream has been open since a full list.
	var before int
	testenv.Eventually(t, 60*time.Second, 500*time.Millisecond, "rounds with the three jobs, first and other running, the list from the stream", func() error {
		recs := readRounds(t, cs)
		if len(recs) == 0 {
			return fmt.Errorf("no round yet")
		}
		last := recs[len(recs)-1]
		if !hasJob(last, "default/second") || !runs(last, "default/first") || !runs(last, "default/other") {
			return fmt.Errorf("round %d: %+v", last.Round, last.Jobs)
		}
		raw, _ := os.ReadFile(proc.LogPath)
		if !strings.Contains(string(raw), "took the job list from the event stream") {
			return fmt.Errorf("no round has taken the job list from the stream yet")
		}
		before = last.Round
		return nil
	})

	if _, _, err := c.API.Jobs().Deregister("first", true, nil); err != nil {
		t.Fatalf("purging first: %v", err)
	}
	if a := waitAlloc(t, c.API, proc, "second", "running", ""); a.NodeID != firstAlloc.NodeID {
		t.Errorf("second runs on node %s, want %s, the host the purged job freed (other still holds %s)", a.NodeID, firstAlloc.NodeID, otherAlloc.NodeID)
	}

	// The first round without first, after the purge, took its list from the stream.
	var gone int
	for _, r := range readRounds(t, cs) {
		if r.Round > before && !hasJob(r, "default/first") {
			gone = r.Round
			break
		}
	}
	if gone == 0 {
		t.Fatalf("no round after %d leaves the purged job out", before)
	}
	raw, err := os.ReadFile(proc.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, "round done") && strings.Contains(l, fmt.Sprintf(" round=%d ", gone-1)) {
			lines = []string{} // the observation of round gone starts after this
			continue
		}
		if lines == nil {
			continue
		}
		if strings.Contains(l, "round done") {
			break
		}
		lines = append(lines, l)
	}
	fromStream := slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "took the job list from the event stream") })
	full := slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "listing every job") })
	if !fromStream || full {
		t.Errorf("round %d (the first without the purged job) took its list from the stream: %v, listed every job: %v; want from the stream only\n%s",
			gone, fromStream, full, strings.Join(lines, "\n"))
	}
}

func hasJob(r roundRec, id string) bool {
	return slices.ContainsFunc(r.Jobs, func(l roundLine) bool { return l.ID == id })
}

func runs(r roundRec, id string) bool {
	return slices.ContainsFunc(r.Jobs, func(l roundLine) bool { return l.ID == id && l.Model != "" })
}
