package jobid

import (
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		id, wantErr string
	}{
		{id: "default/train"},
		{id: "team-x/train.v2"},
		{id: "default/..x"},
		{id: "default/.hidden"},
		{id: "default/a..b"},
		{id: "default/../ledger"},
		{id: "../ledger", wantErr: `namespace ".."`},
		{id: "default/..", wantErr: "is a path step"},
		{id: "default/.", wantErr: "is a path step"},
		{id: "default/", wantErr: "job ID is empty"},
		{id: "/train", wantErr: `namespace ""`},
		{id: "train", wantErr: `expected "namespace/job"`},
		{id: "default/a b", wantErr: "contains a space"},
		{id: "default/a\x00b", wantErr: "NUL"},
		{id: "de_fault/a", wantErr: "letters, digits and dashes"},
		{id: strings.Repeat("n", 129) + "/a", wantErr: "1 to 128"},
		// Dispatched and periodic children, as Nomad names them.
		{id: "default/parent/dispatch-1700000000-abcd1234"},
		{id: "team-x/nightly/periodic-1700000000"},
	} {
		_, _, err := Split(tc.id)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Split(%q) = %v, want an error containing %q", tc.id, err, tc.wantErr)
		}
	}
}

// FuzzSplit: an ID that passes has a namespace without a slash and a job ID that is not a
// path step (Key makes it one key step: FuzzKey), and joins back to itself; dots and
// slashes are the interesting input.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"default/train", "default/..", "../ledger", "default/.", "a/b/c", "default/train.v2", "ns/..x", "ns/...", "%2E%2E/x", "ns/a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ns, job, err := Split(id)
		if err != nil {
			if !strings.Contains(err.Error(), "job") && !strings.Contains(err.Error(), "namespace") {
				t.Fatalf("error %q does not say what is wrong", err)
			}
			return
		}
		if ns == "" || strings.ContainsAny(ns, "/ \x00.") {
			t.Fatalf("Split(%q) took the namespace %q", id, ns)
		}
		if job == "" || job == "." || job == ".." || strings.ContainsAny(job, " \x00") {
			t.Fatalf("Split(%q) took the job %q", id, job)
		}
		if ns+"/"+job != id {
			t.Fatalf("Split(%q) = %q, %q", id, ns, job)
		}
	})
}
