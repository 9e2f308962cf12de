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

// CheckJob checks a job ID: Nomad's rules (not empty, no space, no NUL character; a slash
// is fine: Nomad names a dispatched or periodic child "parent/dispatch-…" or
// "parent/periodic-…") and one of the allocator's: not "." or "..", which an HTTP path
// cleans away (PUT /v1/progress/%2E%2E/ledger must not name the ledger). Dots elsewhere
// ("train.v2", "..x") are fine. A job ID becomes one key step through Key, never as it is.
func CheckJob(job string) error {
	switch {
	case job == "":
		return fmt.Errorf("job ID is empty")
	case strings.ContainsRune(job, ' '):
		return fmt.Errorf("job ID %q contains a space, which Nomad refuses", job)
	case strings.ContainsRune(job, 0):
		return fmt.Errorf("job ID %q contains a NUL character, which Nomad refuses", job)
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

// Split splits "namespace/job" at its first slash (a namespace has none; a job ID may) and
// checks both parts.
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

// The one encoding of a job ID as a key step (a Consul key below a namespace): "%" and "/"
// percent-escaped, nothing else, so that an ID without them is its own key (keys written
// before dispatched jobs were taken stay where they were) and the encoding reverses.
var (
	keyEscaper   = strings.NewReplacer("%", "%25", "/", "%2F")
	keyUnescaper = strings.NewReplacer("%25", "%", "%2F", "/")
)

// Key is the key of job id ("namespace/job"): "namespace/<job, escaped to one step>". It
// checks id first.
func Key(id string) (string, error) {
	if _, _, err := Split(id); err != nil {
		return "", err
	}
	return Escape(id), nil
}

// Escape is Key without the check, for messages that name the key of an ID refused elsewhere.
func Escape(id string) string {
	ns, job, _ := strings.Cut(id, "/")
	return ns + "/" + keyEscaper.Replace(job)
}

// FromKey is the job ID ("namespace/job") whose Key is key; it refuses a key that is not
// exactly one namespace step and one escaped job step, or that Key would not write.
func FromKey(key string) (string, error) {
	ns, step, ok := strings.Cut(key, "/")
	if !ok || strings.Contains(step, "/") {
		return "", fmt.Errorf("key %q: expected \"namespace/job\", the job escaped to one step", key)
	}
	id := ns + "/" + keyUnescaper.Replace(step)
	if back, err := Key(id); err != nil || back != key {
		return "", fmt.Errorf("key %q: not a job's key (%v)", key, err)
	}
	return id, nil
}
