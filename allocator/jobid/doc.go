// Package jobid checks the namespace and job IDs that name a job to the allocator, as Nomad
// validates them, and encodes a job ID as one Consul key step (Key, FromKey): the one place
// that does, since a dispatched or periodic child's ID holds a "/".
package jobid
