package task

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	dtestutil "github.com/hashicorp/nomad/plugins/drivers/testutils"
)

// shTask is a task running `/bin/sh -c script` as taskUser ("" for the plugin's default),
// its folders reachable by any user (the harness makes them root's, 0700).
func shTask(t *testing.T, h *dtestutil.DriverHarness, taskUser, script string) *drivers.TaskConfig {
	t.Helper()
	task := newTask(t, h, "/bin/sh", "-c", script)
	task.User = taskUser
	// The harness's alloc dir is under a 0700 temporary folder; Nomad's own is 0755.
	for dir := task.AllocDir; dir != "/" && dir != os.TempDir(); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return task
}

func ownerOf(t *testing.T, path string) (uid int, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid), fi.Mode()
}

func uidOf(t *testing.T, name string) int {
	u, err := user.Lookup(name)
	if err != nil {
		t.Skipf("no user %q on this host", name)
	}
	n, _ := strconv.Atoi(u.Uid)
	return n
}

// TestTasksRunUnprivileged: a task that names no user runs as the plugin's default_user
// (nobody), not as the client's root; its checkpoint folder is its own, 0700, so a task of
// another user can neither read nor change it, nor read its identity file; root takes
// allow_root. These held neither:
// tasks ran as root, and checkpoint folders were 0777 and root's.
func TestTasksRunUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run tasks as other users")
	}
	nobody, daemon := uidOf(t, "nobody"), uidOf(t, "daemon")
	root := t.TempDir()
	for _, d := range []string{root, filepath.Dir(root)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	alloc := newAllocator(t)
	h, _, _ := newHarness(t, map[string]any{"allocator_address": alloc.srv.URL, "checkpoint_root": root, "default_user": DefaultTaskUser})

	// Job B (as daemon) keeps a secret in its checkpoint.
	b := shTask(t, h, "daemon", `id -u > "$FFT_CHECKPOINT_DIR/uid"; echo weights > "$FFT_CHECKPOINT_DIR/model.ckpt"`)
	// Its identity as Nomad 1.6.1 writes it for a task that names no user: world-readable.
	bToken := filepath.Join(b.TaskDir().SecretsDir, "nomad_token")
	if err := os.WriteFile(bToken, []byte("jwt.of.b"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bToken, 0o666); err != nil {
		t.Fatal(err)
	}
	start(t, h, b)
	if res := wait(t, h, b.ID, 20*time.Second); !res.Successful() {
		t.Fatalf("task b: %+v", res)
	}
	bDir := filepath.Join(root, "default", b.JobID, "create-index-1", "main", "train")
	// Job A (no user: the default) tries to read and to poison B's checkpoint.
	a := shTask(t, h, "", `id -u > "$FFT_CHECKPOINT_DIR/uid"
cat "`+bDir+`/model.ckpt" > "$FFT_CHECKPOINT_DIR/stolen" 2> "$FFT_CHECKPOINT_DIR/read-error"
echo poison 2> "$FFT_CHECKPOINT_DIR/write-error" > "`+bDir+`/model.ckpt"
cat "`+bToken+`" > "$FFT_CHECKPOINT_DIR/stolen-token" 2> "$FFT_CHECKPOINT_DIR/token-error"
exit 0`)
	start(t, h, a)
	if res := wait(t, h, a.ID, 20*time.Second); !res.Successful() {
		t.Fatalf("task a: %+v", res)
	}
	aDir := filepath.Join(root, "default", a.JobID, "create-index-1", "main", "train")
	read := func(p string) string { b, _ := os.ReadFile(p); return strings.TrimSpace(string(b)) }
	if got := read(filepath.Join(aDir, "uid")); got != strconv.Itoa(nobody) {
		t.Errorf("a task without user ran as uid %s, want nobody's %d", got, nobody)
	}
	if got := read(filepath.Join(bDir, "uid")); got != strconv.Itoa(daemon) {
		t.Errorf("a task with user daemon ran as uid %s, want %d", got, daemon)
	}
	for _, c := range []struct {
		dir string
		uid int
	}{{aDir, nobody}, {bDir, daemon}} {
		if uid, mode := ownerOf(t, c.dir); uid != c.uid || mode.Perm() != 0o700 {
			t.Errorf("checkpoint folder %s: uid %d mode %v, want uid %d mode 0700", c.dir, uid, mode.Perm(), c.uid)
		}
	}
	if got := read(filepath.Join(aDir, "stolen")); got != "" || !strings.Contains(read(filepath.Join(aDir, "read-error")), "Permission denied") {
		t.Errorf("task a read b's checkpoint: %q (error %q)", got, read(filepath.Join(aDir, "read-error")))
	}
	if got := read(filepath.Join(aDir, "stolen-token")); got != "" || !strings.Contains(read(filepath.Join(aDir, "token-error")), "Permission denied") {
		t.Errorf("task a read b's identity: %q (error %q)", got, read(filepath.Join(aDir, "token-error")))
	}
	if uid, mode := ownerOf(t, bToken); uid != daemon || mode.Perm() != 0o600 {
		t.Errorf("b's identity file: uid %d mode %v, want b's user %d, 0600", uid, mode.Perm(), daemon)
	}
	if got := read(filepath.Join(bDir, "model.ckpt")); got != "weights" {
		t.Errorf("b's checkpoint is %q after task a: poisoned", got)
	}

	// Root only with allow_root.
	r := shTask(t, h, "root", "true")
	if _, _, err := h.StartTask(r); err == nil || !strings.Contains(err.Error(), "allow_root") {
		t.Errorf("a task as root without allow_root: %v, want refused naming allow_root", err)
	}
}

// TestStateWritesFollowNoLink: the driver (root) writes its state and the checkpoint record
// into folders a task can write; a link the task left at the name, or at the temporary name
// the driver once used, is replaced, never followed.
func TestStateWritesFollowNoLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(victim, []byte("root:x:0:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, recordFileName)
	for _, link := range []string{target, target + ".tmp"} {
		if err := os.Symlink(victim, link); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeAtomic(target, []byte(`{"step": 1}`)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "root:x:0:0\n" {
		t.Errorf("the link's target was overwritten: %q", b)
	}
	if fi, err := os.Lstat(target); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("%s is %v (%v), want a regular file in place of the link", target, fi.Mode(), err)
	}
	// A folder that is a link is refused outright.
	linked := filepath.Join(t.TempDir(), "linked")
	if err := os.Symlink(dir, linked); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(filepath.Join(linked, "x"), []byte("x")); err == nil {
		t.Error("writing through a linked folder succeeded")
	}
}
