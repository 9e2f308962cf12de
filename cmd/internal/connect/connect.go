// Package connect builds the Nomad and Consul API clients the nomad-fft
// commands use, from each tool's own environment variables (NOMAD_ADDR,
// NOMAD_TOKEN, NOMAD_CACERT, ..., CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN,
// CONSUL_CACERT, ...) overridden by flags, so that a command works wherever
// the nomad and consul CLIs already do.
package connect

import (
	"flag"
	"fmt"
	"strings"

	consul "github.com/hashicorp/consul/api"
	nomad "github.com/hashicorp/nomad/api"
)

// Settings are the connection settings of one API. A field left empty (or
// false) keeps what the environment says.
type Settings struct {
	Address       string
	Token         string
	CACert        string
	ClientCert    string
	ClientKey     string
	TLSServerName string
	TLSSkipVerify bool
}

// Flags registers the settings as flags named with prefix ("nomad-" gives
// -nomad-addr, -nomad-token, -nomad-ca-cert, ...). With an empty prefix the
// address flag is -address, as in the nomad CLI. env names the variables
// that the flags override, for the help text.
func (s *Settings) Flags(fs *flag.FlagSet, prefix, what string, env Env) {
	addr := prefix + "addr"
	if prefix == "" {
		addr = "address"
	}
	fs.StringVar(&s.Address, addr, "", fmt.Sprintf("%s HTTP API address. Overrides %s (default %s).", what, env.Address, env.DefaultAddress))
	fs.StringVar(&s.Token, prefix+"token", "", fmt.Sprintf("%s ACL token. Overrides %s.", what, env.Token))
	fs.StringVar(&s.CACert, prefix+"ca-cert", "", fmt.Sprintf("PEM CA certificate that verifies %s's TLS certificate. Overrides %s.", what, env.CACert))
	fs.StringVar(&s.ClientCert, prefix+"client-cert", "", fmt.Sprintf("PEM client certificate for %s's TLS. Overrides %s.", what, env.ClientCert))
	fs.StringVar(&s.ClientKey, prefix+"client-key", "", fmt.Sprintf("PEM private key of -%sclient-cert. Overrides %s.", prefix, env.ClientKey))
	fs.StringVar(&s.TLSServerName, prefix+"tls-server-name", "", fmt.Sprintf("Server name (SNI) to expect in %s's TLS certificate. Overrides %s.", what, env.TLSServerName))
	fs.BoolVar(&s.TLSSkipVerify, prefix+"tls-skip-verify", false, fmt.Sprintf("Do not verify %s's TLS certificate (insecure). Overrides %s.", what, env.TLSSkipVerify))
}

// Env names one tool's environment variables.
type Env struct {
	Address, Token, CACert, ClientCert, ClientKey, TLSServerName, TLSSkipVerify string
	DefaultAddress                                                              string
}

// NomadEnv and ConsulEnv are the variables the nomad and consul CLIs read.
var (
	NomadEnv = Env{
		Address: "NOMAD_ADDR", Token: "NOMAD_TOKEN", CACert: "NOMAD_CACERT", ClientCert: "NOMAD_CLIENT_CERT",
		ClientKey: "NOMAD_CLIENT_KEY", TLSServerName: "NOMAD_TLS_SERVER_NAME", TLSSkipVerify: "NOMAD_SKIP_VERIFY",
		DefaultAddress: "http://127.0.0.1:4646",
	}
	ConsulEnv = Env{
		Address: "CONSUL_HTTP_ADDR", Token: "CONSUL_HTTP_TOKEN", CACert: "CONSUL_CACERT", ClientCert: "CONSUL_CLIENT_CERT",
		ClientKey: "CONSUL_CLIENT_KEY", TLSServerName: "CONSUL_TLS_SERVER_NAME", TLSSkipVerify: "CONSUL_HTTP_SSL_VERIFY=false",
		DefaultAddress: "127.0.0.1:8500",
	}
)

// NomadConfig returns the Nomad API configuration: the environment, then s.
func (s Settings) NomadConfig() *nomad.Config {
	c := nomad.DefaultConfig() // reads NOMAD_ADDR, NOMAD_TOKEN, NOMAD_CACERT, ...
	if s.Address != "" {
		c.Address = s.Address
	}
	if s.Token != "" {
		c.SecretID = s.Token
	}
	if c.TLSConfig == nil {
		c.TLSConfig = &nomad.TLSConfig{}
	}
	t := c.TLSConfig
	setString(&t.CACert, s.CACert)
	setString(&t.ClientCert, s.ClientCert)
	setString(&t.ClientKey, s.ClientKey)
	setString(&t.TLSServerName, s.TLSServerName)
	t.Insecure = t.Insecure || s.TLSSkipVerify
	return c
}

// Nomad returns a Nomad API client: the environment, then s.
func (s Settings) Nomad() (*nomad.Client, error) {
	c := s.NomadConfig()
	client, err := nomad.NewClient(c)
	if err != nil {
		return nil, fmt.Errorf("creating the Nomad client for %s: %w", c.Address, err)
	}
	return client, nil
}

// ConsulConfig returns the Consul API configuration: the environment, then
// s. An address may carry its scheme ("https://host:8501"), as
// CONSUL_HTTP_ADDR may.
func (s Settings) ConsulConfig() *consul.Config {
	c := consul.DefaultConfig() // reads CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN, CONSUL_CACERT, ...
	if a := s.Address; a != "" {
		c.Address = a
		for _, scheme := range []string{"http", "https"} {
			if rest, ok := strings.CutPrefix(a, scheme+"://"); ok {
				c.Scheme, c.Address = scheme, rest
			}
		}
	}
	if s.Token != "" {
		c.Token = s.Token
	}
	t := &c.TLSConfig
	setString(&t.CAFile, s.CACert)
	setString(&t.CertFile, s.ClientCert)
	setString(&t.KeyFile, s.ClientKey)
	setString(&t.Address, s.TLSServerName)
	t.InsecureSkipVerify = t.InsecureSkipVerify || s.TLSSkipVerify
	if s.CACert != "" || s.ClientCert != "" {
		c.Scheme = "https"
	}
	return c
}

// Consul returns a Consul API client: the environment, then s.
func (s Settings) Consul() (*consul.Client, error) {
	c := s.ConsulConfig()
	client, err := consul.NewClient(c)
	if err != nil {
		return nil, fmt.Errorf("creating the Consul client for %s: %w", c.Address, err)
	}
	return client, nil
}

func setString(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}
