package command

import (
	"context"
	"errors"
	"fmt"
	"strings"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/nomadapi"
)

// jobspec is one jobspec to submit held for FFT.
type jobspec struct {
	HCL string
	// Variables is the content of a variables file (mergeVariables).
	Variables string
	// Namespace is used when the jobspec names none.
	Namespace string
	// ID, when set, replaces the job's ID and name (the dev cluster submits
	// one jobspec several times).
	ID string
}

// contractError is a jobspec whose fft. meta breaks the contract.
type contractError struct {
	Job string
	Err error
}

func (e *contractError) Error() string {
	return fmt.Sprintf("job %q breaks the fft. jobspec contract: %v", e.Job, e.Err)
}

func (e *contractError) Unwrap() error { return e.Err }

// heldJob parses the jobspec with Nomad's parse API, validates its fft.
// meta as the allocator will (allocator/jobmeta), and adds the gate, so
// that Nomad holds the job until a round selects it. A job that breaks the
// contract is a *contractError.
func heldJob(client *nomad.Client, js jobspec) (*nomad.Job, error) {
	job, err := client.Jobs().ParseHCLOpts(&nomad.JobsParseRequest{JobHCL: js.HCL, Variables: js.Variables})
	if err != nil {
		return nil, fmt.Errorf("parsing the jobspec with Nomad's API: %w", err)
	}
	if js.ID != "" {
		job.ID, job.Name = &js.ID, &js.ID
	}
	if job.ID == nil || *job.ID == "" {
		return nil, errors.New("the jobspec has no job ID")
	}
	if job.Namespace == nil || *job.Namespace == "" {
		job.Namespace = &js.Namespace
	}
	if err := checkContract(job); err != nil {
		return nil, err
	}
	nomadapi.SetGate(job, true)
	return job, nil
}

// checkContract validates the job's fft. meta and GPU demand as the
// allocator will, and returns a *contractError naming every bad key. A job
// without fft. meta is an error too: FFT would never run it.
func checkContract(job *nomad.Job) error {
	id := *job.Namespace + "/" + *job.ID
	_, err := jobmeta.Parse(job.Meta, nomadapi.GPUDemand(job))
	switch {
	case errors.Is(err, jobmeta.ErrNotManaged):
		return &contractError{Job: id, Err: fmt.Errorf("it has no fft. meta, so FFT would never run it: add %s and %s to the job's meta", jobmeta.KeyWork, jobmeta.KeyThroughput)}
	case err != nil:
		return &contractError{Job: id, Err: err}
	}
	return nil
}

// register registers a held job and returns Nomad's answer.
func register(ctx context.Context, client *nomad.Client, job *nomad.Job) (*nomad.JobRegisterResponse, error) {
	resp, _, err := client.Jobs().Register(job, (&nomad.WriteOptions{Namespace: *job.Namespace}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("registering job %q: %w", *job.Namespace+"/"+*job.ID, err)
	}
	return resp, nil
}

// contractErrorText renders a contract error one violation a line, each
// naming the key, the value and what is expected, then the fix.
func contractErrorText(e *contractError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Error: job %q breaks the fft. jobspec contract; nothing was submitted:\n", e.Job)
	for _, line := range strings.Split(e.Err.Error(), "\n") {
		b.WriteString("  " + line + "\n")
	}
	b.WriteString(`Fix each key named above in the job's meta block (the contract: cmd/fft-allocator/README.md, "The jobspec contract").`)
	return b.String()
}
