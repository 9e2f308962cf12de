package jobid

import (
	"fmt"
	"regexp"
	"strings"
)

// namespaceRe is Nomad 1.6.1's rule for a namespace name (nomad/structs: validNamespaceName).
var namespaceRe = regexp.MustCompile(`^[a-zA-Z0-9-]{1,128}$`)

// CheckNamespace checks a namespace name as Nomad does.
func CheckNamespace(ns string) error {
	if !namespaceRe.MatchString(ns) {
		return fmt.Errorf("namespace %q: want 1 to 128 letters, digits and dashes, as Nomad names a namespace", ns)
	}
	return nil
}

// CheckJob checks a job ID: Nomad's rules (not empty, no space, no NUL character) and the
// allocator's, whose Consul keys end in <namespace>/<job>: no slash (so a dispatched or
// periodic child, "parent/dispatch-…", is not one job of its own here), and not "." or "..",
// which an HTTP path cleans away: PUT /v1/progress/%2E%2E/ledger must not name the ledger.
// Dots elsewhere ("train.v2", "..x") are fine.
func CheckJob(job string) error {
	switch {
	case job == "":
		return fmt.Errorf("job ID is empty")
	case strings.ContainsRune(job, ' '):
		return fmt.Errorf("job ID %q contains a space, which Nomad refuses", job)
	case strings.ContainsRune(job, 0):
		return fmt.Errorf("job ID %q contains a NUL character, which Nomad refuses", job)
	case strings.ContainsRune(job, '/'):
		return fmt.Errorf("job ID %q contains a slash: the allocator keys a job by namespace/job", job)
	case job == "." || job == "..":
		return fmt.Errorf("job ID %q is a path step, not a job", job)
	}
	return nil
}

// Check checks a namespace and a job ID.
func Check(ns, job string) error {
	if err := CheckNamespace(ns); err != nil {
		return err
	}
	return CheckJob(job)
}

// Split splits "namespace/job" and checks both parts.
func Split(id string) (ns, job string, err error) {
	ns, job, ok := strings.Cut(id, "/")
	if !ok {
		return "", "", fmt.Errorf("job %q: expected \"namespace/job\"", id)
	}
	if err := Check(ns, job); err != nil {
		return "", "", fmt.Errorf("job %q: %w", id, err)
	}
	return ns, job, nil
}
