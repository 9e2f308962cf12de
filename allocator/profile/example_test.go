package profile_test

import (
	"fmt"

	"github.com/nomad-fft/nomad-fft/allocator/profile"
)

// A job submitted without fft.throughput: it is first run where its family
// is expected to be fastest, measured there, and estimated elsewhere until
// it runs there too.
func ExampleEstimator() {
	const v100, k80 = "Tesla V100-SXM2-16GB", "Tesla K80"
	e, err := profile.New(profile.GavelPriors())
	if err != nil {
		panic(err)
	}
	_ = e.AddModels(v100, k80)
	_ = e.AddJob(profile.Job{ID: "resnet", Family: "ResNet-50", GPUs: 1})

	c, _ := e.LearnModel("resnet", map[string]int{v100: 2, k80: 8})
	fmt.Printf("learn on %s: %s\n", c.Model, c.Reason)

	_ = e.Measure("resnet", v100, 120) // work units per round, from the driver
	show := func() {
		for _, m := range []string{v100, k80} {
			t := e.Throughput("resnet", m)
			fmt.Printf("  %s: %.1f units/round, %s, log sd %.2f, expected %.1f\n", m, t.UnitsPerRound, t.Source, t.LogSD, t.Expected())
		}
	}
	show()

	_ = e.Measure("resnet", k80, 21) // it ran on a K80 for a round
	fmt.Println("after a round on the K80:")
	show()
	// Output:
	// learn on Tesla V100-SXM2-16GB: fastest expected model with enough free GPUs
	//   Tesla V100-SXM2-16GB: 120.0 units/round, measured, log sd 0.10, expected 120.6
	//   Tesla K80: 19.0 units/round, prior, log sd 0.87, expected 27.8
	// after a round on the K80:
	//   Tesla V100-SXM2-16GB: 120.0 units/round, measured, log sd 0.10, expected 120.6
	//   Tesla K80: 21.0 units/round, measured, log sd 0.10, expected 21.1
}
