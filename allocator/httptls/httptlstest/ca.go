package httptlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority whose files are in Dir: CAFile is its certificate.
type CA struct {
	Dir    string
	CAFile string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial int64
}

// Pair is a certificate and its private key, as PEM files.
type Pair struct {
	CertFile, KeyFile string
}

// Spec says what a certificate is for. Every certificate is valid for a day from an hour ago.
type Spec struct {
	// Name is the common name and the files' base name.
	Name string
	// DNSNames and IPs are the certificate's subject alternative names.
	DNSNames []string
	IPs      []net.IP
	// NotAfter, when set, replaces the end of validity (a past time gives an expired one).
	NotAfter time.Time
}

// NewCA creates a CA named name with its certificate in dir/<name>.pem.
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{Dir: dir, CAFile: filepath.Join(dir, name+".pem"), cert: cert, key: key, serial: 1}
	return ca, writePEM(ca.CAFile, "CERTIFICATE", der)
}

// Issue signs a certificate for s, good for both TLS servers and clients (Nomad's agents
// are both), and writes it to dir/<name>.pem and its key to dir/<name>-key.pem.
func (ca *CA) Issue(s Spec) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generating the key of %s: %w", s.Name, err)
	}
	now := time.Now()
	notAfter := now.Add(24 * time.Hour)
	if !s.NotAfter.IsZero() {
		notAfter = s.NotAfter
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: s.Name},
		NotBefore: now.Add(-time.Hour), NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    s.DNSNames, IPAddresses: s.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("signing the certificate of %s: %w", s.Name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	p := Pair{CertFile: filepath.Join(ca.Dir, s.Name+".pem"), KeyFile: filepath.Join(ca.Dir, s.Name+"-key.pem")}
	if err := writePEM(p.CertFile, "CERTIFICATE", der); err != nil {
		return Pair{}, err
	}
	return p, writePEM(p.KeyFile, "EC PRIVATE KEY", keyDER)
}

// Localhost is the subject names of a service on this machine.
func Localhost(name string) Spec {
	return Spec{Name: name, DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}
}

func writePEM(path, kind string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// PKI is what most tests need: a CA, a server certificate for this machine and a client
// certificate, all from that CA.
type PKI struct {
	CA             *CA
	Server, Client Pair
}

// NewPKI creates a PKI in dir with a server certificate named server and a client one named
// client, failing t on any error.
func NewPKI(t testing.TB, dir, server, client string) PKI {
	t.Helper()
	ca, err := NewCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	p := PKI{CA: ca}
	if p.Server, err = ca.Issue(Localhost(server)); err != nil {
		t.Fatal(err)
	}
	if p.Client, err = ca.Issue(Spec{Name: client}); err != nil {
		t.Fatal(err)
	}
	return p
}
