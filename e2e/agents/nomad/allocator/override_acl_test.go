package allocator

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/e2e/agents/nomad/internal/testenv"
)

// With Consul ACLs on, only an operator's token may override a round: `fftctl park` with the
// allocator's token (the shipped consul-policy.hcl, which only reads overrides/) is refused
// with a message naming the key and the capability; with a token of the shipped
// consul-operator-policy.hcl it is taken, and `fftctl resume` with the allocator's token is
// refused too.
func TestOverridesNeedAnOperatorToken(t *testing.T) {
	consul := testenv.RequireConsul(t)
	root := testenv.TempDir(t)
	cs := testenv.StartConsulWith(t, consul, root, testenv.ConsulOptions{ACL: true})
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	policy := func(name string) string {
		b, err := os.ReadFile(filepath.Join(repo, "cmd", "fft-allocator", "acl", name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(string(b), "nomad-fft/v2/", prefix+"/")
	}
	allocatorTok := consulTokenWith(t, cs, "fft-allocator", cs.FillAllocatorNode(t, policy("consul-policy.hcl")))
	operatorTok := consulTokenWith(t, cs, "fft-operator", policy("consul-operator-policy.hcl"))
	fftctl := testenv.MainBinary(t, "fftctl")
	ctl := func(token string, args ...string) (string, error) {
		full := append([]string{args[0], "-consul-addr", cs.HTTP, "-consul-prefix", prefix, "-consul-token", token}, args[1:]...)
		out, err := exec.Command(fftctl, full...).CombinedOutput()
		return string(out), err
	}

	out, err := ctl(allocatorTok, "park", "train")
	if err == nil || !strings.Contains(out, "needs key_prefix write on \""+prefix+"/overrides/default/train\"") {
		t.Fatalf("park with the allocator's token: %v\n%s", err, out)
	}
	// With ACLs the audit log names the token that wrote the override, not what -by claims.
	if out, err := ctl(operatorTok, "park", "-by", "ops", "train"); err != nil || !strings.Contains(out, "default/train: park by fft-operator (Consul token ") ||
		!strings.Contains(out, `-by "ops" is not taken`) {
		t.Fatalf("park with an operator's token: %v\n%s", err, out)
	}
	// The allocator reads what the operator wrote, and cannot lift it.
	if out, err := ctl(allocatorTok, "resume", "train"); err == nil || !strings.Contains(out, "overrides are for operators") {
		t.Fatalf("resume with the allocator's token: %v\n%s", err, out)
	}
	if out, err := ctl(operatorTok, "resume", "train"); err != nil || !strings.Contains(out, "Lifted default/train") {
		t.Fatalf("resume with an operator's token: %v\n%s", err, out)
	}
}
