package connect

import (
	"flag"
	"testing"
)

func TestFlagsOverrideEnvironment(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "http://nomad.example:4646")
	t.Setenv("NOMAD_TOKEN", "env-token")
	t.Setenv("CONSUL_HTTP_ADDR", "consul.example:8500")
	t.Setenv("CONSUL_HTTP_TOKEN", "env-consul")
	for _, tc := range []struct {
		name                     string
		args                     []string
		nomadAddr, nomadToken    string
		consulAddr, consulScheme string
		consulToken              string
		nomadCA, consulCA        string
		insecure                 bool
	}{
		{name: "environment only", nomadAddr: "http://nomad.example:4646", nomadToken: "env-token",
			consulAddr: "consul.example:8500", consulScheme: "http", consulToken: "env-consul"},
		{name: "flags win", args: []string{"-address=https://n:4646", "-token=t", "-ca-cert=/ca.pem", "-tls-skip-verify",
			"-consul-addr=https://c:8501", "-consul-token=ct", "-consul-ca-cert=/cca.pem"},
			nomadAddr: "https://n:4646", nomadToken: "t", nomadCA: "/ca.pem", insecure: true,
			consulAddr: "c:8501", consulScheme: "https", consulToken: "ct", consulCA: "/cca.pem"},
		{name: "consul CA alone switches to https", args: []string{"-consul-ca-cert=/cca.pem"},
			nomadAddr: "http://nomad.example:4646", nomadToken: "env-token",
			consulAddr: "consul.example:8500", consulScheme: "https", consulToken: "env-consul", consulCA: "/cca.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n, c Settings
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			n.Flags(fs, "", "Nomad", NomadEnv)
			c.Flags(fs, "consul-", "Consul", ConsulEnv)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			nc := n.NomadConfig()
			if nc.Address != tc.nomadAddr || nc.SecretID != tc.nomadToken || nc.TLSConfig.CACert != tc.nomadCA || nc.TLSConfig.Insecure != tc.insecure {
				t.Errorf("nomad config = %s %s %q insecure=%v", nc.Address, nc.SecretID, nc.TLSConfig.CACert, nc.TLSConfig.Insecure)
			}
			cc := c.ConsulConfig()
			if cc.Address != tc.consulAddr || cc.Scheme != tc.consulScheme || cc.Token != tc.consulToken || cc.TLSConfig.CAFile != tc.consulCA {
				t.Errorf("consul config = %s://%s %s %q", cc.Scheme, cc.Address, cc.Token, cc.TLSConfig.CAFile)
			}
			// A missing CA file is an error that names it, not a silent fallback.
			if _, err := n.Nomad(); (err != nil) != (tc.nomadCA != "") {
				t.Errorf("Nomad(): %v", err)
			}
		})
	}
}
