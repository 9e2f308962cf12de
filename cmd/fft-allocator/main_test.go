package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	var out bytes.Buffer
	f, err := parse([]string{"-round", "5s", "-nomad-addr", "http://127.0.0.1:1", "-http-addr", ""}, &out)
	if err != nil || f.round != 5*time.Second || f.nomadAddr != "http://127.0.0.1:1" || f.httpAddr != "" || f.prefix != "nomad-fft/v1" {
		t.Fatalf("parse = %+v, %v", f, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-round", "10ms"}, "-round=10ms: want at least 1s"},
		{[]string{"-leader-ttl", "2s"}, "-leader-ttl=2s: want at least 10s"},
		{[]string{"-log-level", "loud"}, `-log-level="loud"`},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-nope"}, "flag provided but not defined"},
	} {
		if _, err := parse(tc.args, &out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse(%q): err = %v, want %q", tc.args, err, tc.want)
		}
	}
	if code := run([]string{"-h"}, &out); code != 0 || !strings.Contains(out.String(), "NOMAD_ADDR") {
		t.Errorf("-h: code %d, usage %q", code, out.String())
	}
}
