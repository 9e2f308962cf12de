package placement

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func TestPlaceStyles(t *testing.T) {
	v := "V100"
	ones := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}
	cases := []struct {
		name     string
		style    Style
		hosts    []Host
		jobs     []Job
		slots    map[string][]Slot
		unplaced []string
		moves    int
	}{
		{
			// Gavel's pointer fills host 0 first, so the 2-GPU job (two
			// workers) spreads over the last free GPU of h0 and one of h1,
			// where the paper's Placer would put it on h1 whole.
			name:  "gavel spreads rather than skip a server",
			style: StyleGavel,
			hosts: hostsOf(v, 4, 4),
			jobs: []Job{
				{ID: "a", Model: v, Pieces: ones(3)},
				{ID: "b", Model: v, Pieces: ones(2)},
			},
			slots: map[string][]Slot{
				"a": {{"V100-h0", 1}, {"V100-h0", 1}, {"V100-h0", 1}},
				"b": {{"V100-h0", 1}, {"V100-h1", 1}},
			},
		},
		{
			name:  "gavel keeps previous workers that are free",
			style: StyleGavel,
			hosts: hostsOf(v, 4, 4),
			jobs: []Job{
				{ID: "a", Model: v, Pieces: ones(2), Current: []Slot{{"V100-h1", 1}, {"V100-h1", 1}}},
				{ID: "b", Model: v, Pieces: ones(1)},
			},
			slots: map[string][]Slot{
				"a": {{"V100-h1", 1}, {"V100-h1", 1}},
				"b": {{"V100-h0", 1}},
			},
		},
		{
			// Larger jobs are assigned first: the 4-GPU job takes h0, where the
			// 1-GPU job ran, which restarts on h1 (a move, no price check).
			name:  "gavel lets a larger job take a smaller one's workers",
			style: StyleGavel,
			hosts: hostsOf(v, 4, 4),
			jobs: []Job{
				{ID: "big", Model: v, Pieces: ones(4)},
				{ID: "small", Model: v, Pieces: ones(1), Current: []Slot{{"V100-h0", 1}}},
			},
			slots: map[string][]Slot{
				"big":   {{"V100-h0", 1}, {"V100-h0", 1}, {"V100-h0", 1}, {"V100-h0", 1}},
				"small": {{"V100-h1", 1}},
			},
			moves: 1,
		},
		{
			name:  "sia puts a job of a node's GPUs or more on whole nodes, from the last",
			style: StyleSia,
			hosts: hostsOf(v, 4, 4, 4),
			jobs: []Job{
				{ID: "big", Model: v, Pieces: []int{4, 4}},
				{ID: "small", Model: v, Pieces: []int{2}},
			},
			slots: map[string][]Slot{
				"big":   {{"V100-h2", 4}, {"V100-h1", 4}},
				"small": {{"V100-h0", 2}},
			},
		},
		{
			// Every node has a 1-GPU job: Sia evicts the one on the node with
			// the most free GPUs and places it again on the fullest node.
			name:  "sia reclaims a node for a distributed job",
			style: StyleSia,
			hosts: hostsOf(v, 4, 4),
			jobs: []Job{
				{ID: "a", Model: v, Pieces: []int{1}, Current: []Slot{{"V100-h0", 1}}},
				{ID: "b", Model: v, Pieces: []int{2}, Current: []Slot{{"V100-h1", 2}}},
				{ID: "big", Model: v, Pieces: []int{4}},
			},
			slots: map[string][]Slot{
				"a":   {{"V100-h1", 1}},
				"b":   {{"V100-h1", 2}},
				"big": {{"V100-h0", 4}},
			},
			moves: 1,
		},
		{
			name:  "sia evicts the smallest jobs of the node needing fewest GPUs freed",
			style: StyleSia,
			hosts: hostsOf(v, 4, 4),
			jobs: []Job{
				{ID: "a", Model: v, Pieces: []int{2}, Current: []Slot{{"V100-h0", 2}}},
				{ID: "b", Model: v, Pieces: []int{1}, Current: []Slot{{"V100-h0", 1}}},
				{ID: "c", Model: v, Pieces: []int{2}, Current: []Slot{{"V100-h1", 2}}},
				{ID: "d", Model: v, Pieces: []int{3}},
			},
			// d needs 3: h0 has 1 free (2 short), h1 has 2 (1 short), so h1
			// evicts c; c, placed again, finds h0 1 short and evicts b, the
			// smallest there, which goes to h1's last GPU: two moves.
			slots: map[string][]Slot{
				"a": {{"V100-h0", 2}},
				"b": {{"V100-h1", 1}},
				"c": {{"V100-h0", 2}},
				"d": {{"V100-h1", 3}},
			},
			moves: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := PlaceStyle(tc.style, tc.hosts, tc.jobs)
			if !reflect.DeepEqual(res.Slots, tc.slots) {
				t.Errorf("slots = %v, want %v", res.Slots, tc.slots)
			}
			if !slices.Equal(res.Unplaced, tc.unplaced) {
				t.Errorf("unplaced = %v, want %v", res.Unplaced, tc.unplaced)
			}
			if len(res.Moves) != tc.moves {
				t.Errorf("moves = %+v, want %d", res.Moves, tc.moves)
			}
			checkInvariants(t, tc.hosts, tc.jobs, res)
		})
	}
}

// TestStyleInvariants: every style fits each host and keeps or records each
// running job (checkInvariants); Gavel's never leaves a job of 1-GPU pieces
// unplaced while its model has the GPUs; Sia's puts each job it places this
// round smaller than a node on one host, and each larger one only on hosts
// it has to itself.
func TestStyleInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 3000; n++ {
		hosts, jobs := randomInstance(r, 6, 12)
		for _, st := range Styles {
			res := PlaceStyle(st, hosts, jobs)
			checkInvariants(t, hosts, jobs, res)
			switch st {
			case StyleGavel:
				gj := make([]Job, len(jobs))
				total := 0
				for _, h := range hosts {
					total += h.GPUs
				}
				for k, j := range jobs {
					gj[k] = j
					gj[k].Pieces = make([]int, j.GPUs())
					for i := range gj[k].Pieces {
						gj[k].Pieces[i] = 1
					}
					gj[k].Current = nil
				}
				gres := PlaceStyle(StyleGavel, hosts, gj)
				checkInvariants(t, hosts, gj, gres)
				placed := 0
				for _, s := range gres.Slots {
					placed += len(s)
				}
				for _, id := range gres.Unplaced {
					for _, j := range gj {
						if j.ID == id && j.GPUs() <= total-placed {
							t.Fatalf("gavel left %s (%d GPUs) unplaced with %d free of %d", id, j.GPUs(), total-placed, total)
						}
					}
				}
			case StyleSia:
				node := 0
				for _, h := range hosts {
					node = max(node, h.GPUs)
				}
				holders := map[string]map[string]bool{}
				for id, ss := range res.Slots {
					for _, s := range ss {
						if holders[s.Host] == nil {
							holders[s.Host] = map[string]bool{}
						}
						holders[s.Host][id] = true
					}
				}
				for _, j := range jobs {
					ss, ok := res.Slots[j.ID]
					if !ok || reflect.DeepEqual(ss, j.Current) {
						continue
					}
					if j.GPUs() < node && Hosts(ss) != 1 {
						t.Fatalf("sia spread single-node job %s over %v", j.ID, ss)
					}
					if j.GPUs() >= node {
						for _, h := range HostIDs(ss) {
							if len(holders[h]) != 1 {
								t.Fatalf("sia put distributed job %s on shared host %s (%v)", j.ID, h, holders[h])
							}
						}
					}
				}
			}
		}
	}
}
