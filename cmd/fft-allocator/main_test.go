package main

import (
	"bytes"
	"os"
	"path/filepath"
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

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.hcl", `
nomad {
  address = "http://nomad.example:4646"
  token   = "from-file"
}
consul {
  address = "consul.example:8500"
  prefix  = "team/fft/v1"
}
round      = "60s"
leader_ttl = "20s"
http_addr  = ""
engine {
  weights {
    fairness = 2
  }
  volume_term   = "remaining"
  transfer_gbps = 25
}
`)
	var out bytes.Buffer
	f, err := parse([]string{"-config", good, "-nomad-token", "from-flag"}, &out)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if f.nomadAddr != "http://nomad.example:4646" || f.nomadToken != "from-flag" || f.consulAddr != "consul.example:8500" ||
		f.prefix != "team/fft/v1" || f.round != time.Minute || f.leaderTTL != 20*time.Second || f.httpAddr != "" {
		t.Errorf("settings from the file (flag wins for the token): %+v", f)
	}
	e := f.engine
	if e.Weights.Fairness != 2 || e.Weights.JCT != 1 || e.Volume != "remaining" || e.TransferGbps != 25 || e.RestartSeconds != 30 {
		t.Errorf("engine config %+v", e)
	}
	for _, tc := range []struct{ body, want string }{
		{`round = "soon"`, `round = "soon": expected a duration`},
		{"engine {\n volume_term = \"most\"\n}", `engine volume_term = "most"`},
		{"engine {\n transfer_gbps = 0\n}", "engine transfer_gbps = 0: expected a finite number > 0"},
		{"engine {\n weights {\n jct = -1\n }\n}", "engine weights.jct = -1"},
		{`colour = "blue"`, `Unsupported argument`},
	} {
		p := write("bad.hcl", tc.body)
		if _, err := parse([]string{"-config", p}, &out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %q: err = %v, want %q", tc.body, err, tc.want)
		}
	}
	if _, err := parse([]string{"-config", filepath.Join(dir, "missing.hcl")}, &out); err == nil {
		t.Error("a missing config file was accepted")
	}
}
