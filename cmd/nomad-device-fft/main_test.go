package main

import (
	"bytes"
	"testing"

	"github.com/nomad-fft/nomad-fft/cmd/internal/version"
)

func TestFlags(t *testing.T) {
	cases := []struct {
		name       string
		args       []string
		wantCode   int
		wantDone   bool
		wantStdout string
	}{
		{"started by the agent", nil, 0, false, ""},
		{"version", []string{"-version"}, 0, true, "nomad-device-fft " + version.Get().String() + "\n"},
		{"help", []string{"-h"}, 0, true, ""},
		{"unknown flag", []string{"-nope"}, 2, true, ""},
		{"argument", []string{"serve"}, 2, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code, done := flags(c.args, &stdout, &stderr)
			if code != c.wantCode || done != c.wantDone || stdout.String() != c.wantStdout {
				t.Errorf("flags(%q) = %d, %v, stdout %q; want %d, %v, %q (stderr %q)",
					c.args, code, done, stdout.String(), c.wantCode, c.wantDone, c.wantStdout, stderr.String())
			}
		})
	}
}
