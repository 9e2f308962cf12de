package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
)

// TestEngineOnSimulatedRounds runs the round engine on rounds the simulator
// produced in which it once failed (saved by an earlier `fftctl simulate` as
// failed-instance-*.json), as regressions.
func TestEngineOnSimulatedRounds(t *testing.T) {
	for _, name := range []string{"fft_round_solver_cycle.json"} {
		raw, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		var in allocator.Instance
		if err := json.Unmarshal(raw, &in); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err = func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			_, err = allocator.Decide(context.Background(), &in)
			return err
		}()
		if err != nil {
			t.Errorf("%s: Decide: %v", name, err)
		}
	}
}
