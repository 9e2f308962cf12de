// Package nomadapi observes and changes a Nomad cluster for the allocator service through the
// Nomad HTTP API: GPU capacity from device fingerprints, FFT-managed jobs, the gate, model steering.
package nomadapi
