package chaos

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// faultGPUUnhealthy lists one GPU of a client in its plugin's fake health_file (the plugin
// injects an NVML critical XID: Nomad reports the instance unhealthy), waits until no job runs
// on it, holds it a few rounds, then unlists it.
const faultGPUUnhealthy = "gpu-unhealthy"

const (
	// unhealthyRounds is how long, at least, a flipped GPU stays unhealthy.
	unhealthyRounds = 2
	// moveWithin bounds the time from Nomad reporting a GPU unhealthy to the end of every
	// allocation on it: a round to see it, its park, and the task's stop.
	moveWithin = 4*roundSeconds*time.Second + 5*time.Second
)

// flip is one GPU's unhealthy window as Nomad reported it.
type flip struct {
	Node, Client, Model, GPU string
	// From is when Nomad first reported the GPU unhealthy, Unlisted when the health file
	// stopped listing it (Nomad reports it healthy a little later).
	From, Unlisted time.Time
}

// healthFile is the fake health control file of a client's device plugin.
func (st *stack) healthFile(client string) string {
	return filepath.Join(st.root, "unhealthy-"+client)
}

// injectGPUUnhealthy flips one GPU, preferably one a chaos job runs on (when none runs, it has
// arrive submit one, if any is left, and waits a little for it), and returns what it did.
func (st *stack) injectGPUUnhealthy(t *testing.T, rng *rand.Rand, arrive func() int) string {
	t.Helper()
	c, gpu, holder := st.pickGPU(t, rng)
	if holder == "" && arrive != nil && arrive() > 0 {
		for deadline := time.Now().Add(15 * time.Second); holder == "" && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			c, gpu, holder = st.pickGPU(t, rng)
		}
	}
	node := st.NodeIDs[c]
	path := st.healthFile(c)
	if err := os.WriteFile(path, []byte("# chaos: "+faultGPUUnhealthy+"\n"+gpu+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "Nomad reports "+gpu+" unhealthy", func() error {
		if healthy, err := st.instanceHealthy(node, gpu); err != nil || healthy {
			return fmt.Errorf("healthy %v (%v)", healthy, err)
		}
		return nil
	})
	f := flip{Node: node, Client: c, Model: st.modelOf(c), GPU: gpu, From: time.Now()}
	seen := f.From.Sub(began)
	// The allocator parks the jobs on it; hold the GPU out until they are off and a few
	// rounds have run without it.
	from := st.nextRound()
	moved := time.Duration(0)
	testenv.Eventually(t, 60*time.Second, 100*time.Millisecond, "no job on "+gpu, func() error {
		if on := st.liveOn(node, gpu); len(on) > 0 {
			return fmt.Errorf("still on it: %v", on)
		}
		return nil
	})
	moved = time.Since(f.From)
	st.waitRounds(t, from, unhealthyRounds, 60*time.Second, "rounds with "+gpu+" unhealthy")
	f.Unlisted = time.Now()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// Nomad takes a few seconds to report it healthy (the client batches node updates): the
	// run goes on, and checks at its end that every flipped GPU is healthy again.
	st.flips = append(st.flips, f)
	what := fmt.Sprintf("%s %s unhealthy for %s (Nomad saw it after %s)", c, gpu[:12], time.Since(f.From).Round(100*time.Millisecond), seen.Round(100*time.Millisecond))
	if holder != "" {
		what += fmt.Sprintf(", %s on it moved off in %s", holder, moved.Round(100*time.Millisecond))
	}
	return what
}

// waitHealthyAgain fails the test unless every GPU the run flipped is healthy again.
func (st *stack) waitHealthyAgain(t *testing.T) {
	t.Helper()
	for _, f := range st.flips {
		testenv.Eventually(t, 30*time.Second, 250*time.Millisecond, "Nomad reports "+f.GPU+" on "+f.Client+" healthy again", func() error {
			if healthy, err := st.instanceHealthy(f.Node, f.GPU); err != nil || !healthy {
				return fmt.Errorf("healthy %v (%v)", healthy, err)
			}
			return nil
		})
	}
}

// pickGPU draws a client GPU that a running chaos allocation holds (the job it moves is the
// point), or any GPU when none runs.
func (st *stack) pickGPU(t *testing.T, rng *rand.Rand) (client, gpu, holder string) {
	t.Helper()
	type held struct{ client, gpu, job string }
	var busy []held
	q := &api.QueryOptions{Params: map[string]string{"resources": "true"}}
	if stubs, _, err := st.API.Allocations().List(q); err == nil {
		for _, s := range stubs {
			if s.DesiredStatus != "run" || s.ClientStatus != "running" || s.AllocatedResources == nil {
				continue
			}
			for _, tr := range s.AllocatedResources.Tasks {
				for _, d := range tr.Devices {
					for _, id := range d.DeviceIDs {
						busy = append(busy, held{st.clientOf(s.NodeID), id, s.JobID})
					}
				}
			}
		}
	}
	sort.Slice(busy, func(i, j int) bool { return busy[i].client+busy[i].gpu < busy[j].client+busy[j].gpu })
	if len(busy) > 0 {
		h := busy[rng.Intn(len(busy))]
		return h.client, h.gpu, h.job
	}
	c := st.clients[rng.Intn(len(st.clients))].Name
	ids := st.instances(t, st.NodeIDs[c])
	return c, ids[rng.Intn(len(ids))], ""
}

func (st *stack) clientOf(node string) string {
	for name, id := range st.NodeIDs {
		if id == node {
			return name
		}
	}
	return ""
}

func (st *stack) modelOf(client string) string {
	for _, c := range st.clients {
		if c.Name == client {
			return c.Model
		}
	}
	return ""
}

// instances are a node's GPU instance IDs, sorted.
func (st *stack) instances(t *testing.T, node string) []string {
	t.Helper()
	n, _, err := st.API.Nodes().Info(node, nil)
	if err != nil || n.NodeResources == nil {
		t.Fatalf("reading node %s: %v", node, err)
	}
	var ids []string
	for _, d := range n.NodeResources.Devices {
		for _, inst := range d.Instances {
			ids = append(ids, inst.ID)
		}
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		t.Fatalf("node %s has no GPU instances", node)
	}
	return ids
}

func (st *stack) instanceHealthy(node, gpu string) (bool, error) {
	n, _, err := st.API.Nodes().Info(node, nil)
	if err != nil {
		return false, err
	}
	if n.NodeResources != nil {
		for _, d := range n.NodeResources.Devices {
			for _, inst := range d.Instances {
				if inst.ID == gpu {
					return inst.Healthy, nil
				}
			}
		}
	}
	return false, fmt.Errorf("node %s has no instance %s", node, gpu)
}

// liveOn lists the allocations meant to run, pending or running, that hold gpu on node.
func (st *stack) liveOn(node, gpu string) []string {
	q := &api.QueryOptions{Params: map[string]string{"resources": "true"}}
	stubs, _, err := st.API.Allocations().List(q)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, s := range stubs {
		live := s.ClientStatus == "running" || s.ClientStatus == "pending"
		if s.NodeID != node || s.DesiredStatus != "run" || !live || s.AllocatedResources == nil {
			continue
		}
		for _, tr := range s.AllocatedResources.Tasks {
			for _, d := range tr.Devices {
				for _, id := range d.DeviceIDs {
					if id == gpu {
						out = append(out, s.JobID+"/"+s.ID[:8])
					}
				}
			}
		}
	}
	return out
}

// gpuFlipsHonoured: while Nomad reported a GPU unhealthy, every round saw its model with at
// least one GPU fewer than the clients have, every allocation running on it ended within
// moveWithin, and none started on it.
func (e *evidence) gpuFlipsHonoured() []string {
	var out []string
	for _, f := range e.flips {
		for _, r := range e.rounds {
			// A round observes just after its start; the file's removal reaches Nomad later.
			if !r.start.After(f.From) || !r.start.Before(f.Unlisted) {
				continue
			}
			saw := 0
			for _, m := range r.Models {
				if m.Name == f.Model {
					saw = m.GPUs
				}
			}
			if saw > e.capacity[f.Model]-1 {
				out = append(out, fmt.Sprintf("round %d saw %d GPUs of %q while %s on %s was unhealthy; at most %d are healthy",
					r.Round, saw, f.Model, f.GPU, f.Client, e.capacity[f.Model]-1))
			}
		}
		for _, a := range e.allocs {
			if a.Node != f.Node || !holds(a, f.GPU) || a.Started.IsZero() {
				continue
			}
			switch {
			case !a.Started.After(f.From) && (a.Done.IsZero() || a.Done.After(f.From.Add(moveWithin))):
				out = append(out, fmt.Sprintf("allocation %s of %s ran on unhealthy %s on %s from %s and was not moved within %s (ended %s)",
					a.ID[:8], a.Job, f.GPU, f.Client, f.From.Format(time.RFC3339Nano), moveWithin, fmtTime(a.Done)))
			case a.Started.After(f.From.Add(time.Second)) && a.Started.Before(f.Unlisted):
				out = append(out, fmt.Sprintf("allocation %s of %s started on unhealthy %s on %s at %s", a.ID[:8], a.Job, f.GPU, f.Client, a.Started.Format(time.RFC3339Nano)))
			}
		}
	}
	return out
}

func holds(a allocRec, gpu string) bool {
	for _, id := range a.DeviceIDs {
		if id == gpu {
			return true
		}
	}
	return false
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format(time.RFC3339Nano)
}
