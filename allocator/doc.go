// Package allocator holds FFT's round engine: a pure function from one
// round's jobs, GPU capacity and fairness state to the assignment of jobs to
// GPU models, with every job's cost terms and the reason for each job left
// waiting. Policies, the simulator and the Nomad adapter live in
// sub-packages; none of them is imported here.
package allocator
