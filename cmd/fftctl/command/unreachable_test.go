package command

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// closedAddr returns a local address on which nothing listens: a port taken
// and given back.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Every command that needs a cluster, run without one, names the fix: the
// local cluster and the flag and variable that point it at another.
func TestNoClusterSaysWhatToDo(t *testing.T) {
	nomadAddr, consulAddr, allocAddr := closedAddr(t), closedAddr(t), closedAddr(t)
	t.Setenv("NOMAD_ADDR", "http://"+nomadAddr)
	t.Setenv("CONSUL_HTTP_ADDR", consulAddr)
	t.Setenv("FFT_ALLOCATOR_ADDR", "")
	jobspec := filepath.Join("..", "..", "..", "jobspecs", "fft-train.nomad.hcl")
	if _, err := os.Stat(jobspec); err != nil {
		t.Fatal(err)
	}
	consulFix := []string{"No Consul agent answers at " + consulAddr, "make dev", "-consul-addr", "CONSUL_HTTP_ADDR"}
	nomadFix := []string{"No Nomad agent answers at http://" + nomadAddr, "make dev", "-address", "NOMAD_ADDR"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"status"}, consulFix},
		{[]string{"explain", "x"}, consulFix},
		{[]string{"audit", "x"}, consulFix},
		{[]string{"park", "x"}, consulFix},
		{[]string{"pin", "x", "NVIDIA A100-SXM4-40GB"}, consulFix},
		{[]string{"resume", "x"}, consulFix},
		{[]string{"report", "-job", "default/x", "5"}, consulFix},
		{[]string{"report", "-job", "default/x", "-allocator-addr", "http://" + allocAddr, "5"},
			[]string{"No fft-allocator answers at http://" + allocAddr, "-allocator-addr", "FFT_ALLOCATOR_ADDR"}},
		{[]string{"run", jobspec}, append([]string{"is needed to parse the jobspec"}, nomadFix...)},
	} {
		t.Run(strings.Join(tc.args[:1], " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := RunWith(tc.args, nil, &out, &errb); code != 1 {
				t.Fatalf("fftctl %v: exit %d, want 1\n%s%s", tc.args, code, out.String(), errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("fftctl %v without a cluster: the error lacks %q:\n%s", tc.args, w, errb.String())
				}
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("reading x: %w", refused), true},
		{fmt.Errorf("x: %w", &net.DNSError{Err: "no such host", Name: "consul"}), true},
		{&net.OpError{Op: "read", Err: errors.New("connection reset")}, false},
		{errors.New("Unexpected response code: 403 (ACL not found)"), false},
		{nil, false},
	} {
		if got := unreachable(tc.err); got != tc.want {
			t.Errorf("unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
