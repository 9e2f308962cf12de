// Package jobid checks the namespace and job IDs that name a job to the allocator, as Nomad
// validates them and as the Consul keys they become require.
package jobid
