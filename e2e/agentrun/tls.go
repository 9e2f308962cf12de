package agentrun

import "fmt"

// TLSFiles are PEM files: the CA certificate, and an agent's (or a client's) certificate and
// private key that it signed.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
}

// nomadTLS is the tls block of a Nomad agent with TLS on HTTP and RPC, verified both ways:
// the server's certificate must name server.<region>.nomad (verify_server_hostname), and
// every HTTPS client must present a certificate the CA signed (verify_https_client); "" for
// nil.
func nomadTLS(f *TLSFiles) string {
	if f == nil {
		return ""
	}
	return fmt.Sprintf(`
tls {
  http                   = true
  rpc                    = true
  ca_file                = %s
  cert_file              = %s
  key_file               = %s
  verify_server_hostname = true
  verify_https_client    = true
}
`, quote(f.CAFile), quote(f.CertFile), quote(f.KeyFile))
}

// nomadConsulTLS is what a Nomad agent's consul block needs to reach Consul over HTTPS with
// its certificate; "" for nil.
func nomadConsulTLS(f *TLSFiles) string {
	if f == nil {
		return ""
	}
	return fmt.Sprintf(`
  ssl              = true
  verify_ssl       = true
  ca_file          = %s
  cert_file        = %s
  key_file         = %s`, quote(f.CAFile), quote(f.CertFile), quote(f.KeyFile))
}

// ConsulTLSArgs are the flags that make a Consul agent (ConsulDevArgs, ConsulServerArgs)
// serve its HTTP API over HTTPS only, on httpsPort, requiring clients' certificates
// (verify_incoming); add them after its other arguments.
func ConsulTLSArgs(httpsPort int, f TLSFiles) []string {
	return []string{
		"-hcl", fmt.Sprintf("ports { http = -1, https = %d }", httpsPort),
		"-hcl", fmt.Sprintf("tls { defaults { ca_file = %s, cert_file = %s, key_file = %s }, https { verify_incoming = true } }",
			quote(f.CAFile), quote(f.CertFile), quote(f.KeyFile)),
	}
}
