package command

import (
	"flag"
	"net/http"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/httptls"
)

// allocatorConn is how fftctl reaches the fft-allocator's HTTP API: -allocator-addr and its
// TLS settings, each overriding its FFT_ALLOCATOR_* variable when set, as Nomad's -address,
// -ca-cert, -client-cert and -client-key override NOMAD_ADDR, NOMAD_CACERT, ...
type allocatorConn struct {
	addr, caCert, clientCert, clientKey string
}

// allocatorEnv names the variables of allocatorConn's settings.
var allocatorEnv = struct{ addr, caCert, clientCert, clientKey string }{
	"FFT_ALLOCATOR_ADDR", "FFT_ALLOCATOR_CACERT", "FFT_ALLOCATOR_CLIENT_CERT", "FFT_ALLOCATOR_CLIENT_KEY",
}

func (a *allocatorConn) flags(fs *flag.FlagSet) {
	fs.StringVar(&a.addr, "allocator-addr", "",
		"The fft-allocator's HTTP API, such as https://127.0.0.1:4650: report there with NOMAD_TOKEN instead of writing Consul. Overrides FFT_ALLOCATOR_ADDR.")
	fs.StringVar(&a.caCert, "allocator-ca-cert", "",
		"PEM CA certificate that verifies the fft-allocator's TLS certificate (its -tls-cert-file). Overrides FFT_ALLOCATOR_CACERT.")
	fs.StringVar(&a.clientCert, "allocator-client-cert", "",
		"PEM client certificate, for an fft-allocator with -tls-verify-https-client. Overrides FFT_ALLOCATOR_CLIENT_CERT.")
	fs.StringVar(&a.clientKey, "allocator-client-key", "",
		"PEM private key of -allocator-client-cert. Overrides FFT_ALLOCATOR_CLIENT_KEY.")
}

// resolve fills the settings left empty from the environment.
func (a allocatorConn) resolve(getenv func(string) string) allocatorConn {
	for _, x := range []struct {
		dst *string
		env string
	}{
		{&a.addr, allocatorEnv.addr}, {&a.caCert, allocatorEnv.caCert},
		{&a.clientCert, allocatorEnv.clientCert}, {&a.clientKey, allocatorEnv.clientKey},
	} {
		if *x.dst == "" {
			*x.dst = getenv(x.env)
		}
	}
	return a
}

// hints name the TLS settings, for the fixes of a failed request.
func (a allocatorConn) hints() httptls.Hints {
	return httptls.Hints{
		CA:       "-allocator-ca-cert (FFT_ALLOCATOR_CACERT)",
		Cert:     "-allocator-client-cert and -allocator-client-key (FFT_ALLOCATOR_CLIENT_CERT, FFT_ALLOCATOR_CLIENT_KEY)",
		SentCert: a.clientCert != "",
	}
}

// client returns the HTTP client of the resolved settings.
func (a allocatorConn) client(timeout time.Duration) (*http.Client, error) {
	cfg, err := httptls.Client(httptls.ClientFiles{
		CA:   httptls.File{Path: a.caCert, Setting: "-allocator-ca-cert (FFT_ALLOCATOR_CACERT)"},
		Cert: httptls.File{Path: a.clientCert, Setting: "-allocator-client-cert (FFT_ALLOCATOR_CLIENT_CERT)"},
		Key:  httptls.File{Path: a.clientKey, Setting: "-allocator-client-key (FFT_ALLOCATOR_CLIENT_KEY)"},
	}, time.Now())
	if err != nil {
		return nil, err
	}
	return httptls.NewHTTPClient(cfg, timeout), nil
}

// explainTLS adds the fix of a TLS mismatch to a failed request to the allocator.
func explainTLS(err error, a allocatorConn) error { return httptls.Explain(err, a.hints()) }

// statusHint is the fix of an answer that says the allocator serves HTTPS only, or "".
func statusHint(scheme string, code int, body []byte) string {
	return httptls.StatusHint(scheme, code, body)
}
