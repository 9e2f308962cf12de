package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkPlace4000Jobs is the large setting's placement: 1,000 GPUs of 8
// models in hosts of 8, a decision that runs the jobs filling them (of a
// 4,000-job round, the ones chosen: 1/2/4/8-GPU gangs), nine in ten of them
// running where they are, the rest new.
//
//	go test -run '^$' -bench Place4000 -benchmem ./allocator/placement/
func BenchmarkPlace4000Jobs(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	var hosts []Host
	for m := 0; m < 8; m++ {
		for h := 0; h < 125/8+1 && len(hosts) < 125; h++ {
			hosts = append(hosts, Host{ID: fmt.Sprintf("m%d-h%d", m, h), Model: fmt.Sprintf("m%d", m), GPUs: 8})
		}
	}
	free := make([]int, len(hosts))
	for k := range hosts {
		free[k] = hosts[k].GPUs
	}
	var jobs []Job
	for k := 0; k < 4000; k++ {
		d := []int{1, 1, 1, 1, 1, 1, 1, 2, 2, 4, 4, 8}[r.IntN(12)]
		h := r.IntN(len(hosts))
		if free[h] < d {
			continue // not chosen this round
		}
		free[h] -= d
		j := Job{ID: fmt.Sprintf("j%d", k), Model: hosts[h].Model, Pieces: []int{d}, MovePrice: r.Float64()}
		if r.IntN(10) > 0 {
			j.Current = []Slot{{Host: hosts[h].ID, GPUs: d}}
		}
		jobs = append(jobs, j)
	}
	b.ReportMetric(float64(len(jobs)), "jobs_placed")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := Place(hosts, jobs)
		if len(res.Slots) == 0 {
			b.Fatal("nothing placed")
		}
	}
}
