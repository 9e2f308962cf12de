package task

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/nomad/plugins/drivers"
	"golang.org/x/sys/unix"
)

// Where Nomad 1.6.1 hands a task its workload identity: with `identity { file = true }` in
// <task>/secrets/nomad_token (owned by the task's user, 0600), with `identity { env = true }`
// in NOMAD_TOKEN. Nomad sends a driver plugin neither on its own.
const (
	identityFileName = "nomad_token"
	envNomadToken    = "NOMAD_TOKEN"
	// maxIdentityBytes bounds what is read from the token file: a Nomad 1.6.1 workload
	// identity (an ES256... JWT of a few claims) is under 2 KiB.
	maxIdentityBytes = 16 << 10
)

// identitySource says where a task's workload identity is read from, at each report: the
// file first (it survives a plugin restart and never enters the environment, where other
// processes of the same user could read it from /proc/<pid>/environ), then NOMAD_TOKEN.
type identitySource struct {
	file string
	env  string
}

func newIdentitySource(cfg *drivers.TaskConfig) identitySource {
	s := identitySource{env: strings.TrimSpace(cfg.Env[envNomadToken])}
	if cfg.AllocDir != "" && cfg.Name != "" {
		s.file = filepath.Join(cfg.TaskDir().SecretsDir, identityFileName)
	}
	return s
}

// token is the task's identity, "" when it exposes none. The file is opened without
// following a link: the folder belongs to the task, and the driver reads as root.
func (s identitySource) token() (string, error) {
	if s.file != "" {
		b, err := readNoFollow(s.file, maxIdentityBytes)
		switch {
		case err == nil:
			if t := strings.TrimSpace(string(b)); t != "" {
				return t, nil
			}
		case !os.IsNotExist(err):
			return s.env, fmt.Errorf("reading the task's workload identity: %w", err)
		}
	}
	return s.env, nil
}

// readNoFollow reads at most limit bytes of the regular file at path, refusing a symbolic
// link in its last component (O_NOFOLLOW) and anything that is not a regular file.
func readNoFollow(path string, limit int64) ([]byte, error) {
	fh, err := openNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is not a regular file", path)
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(fh, limit+1)); err != nil {
		return nil, fmt.Errorf("reading %q: %w", path, err)
	}
	if int64(buf.Len()) > limit {
		return nil, fmt.Errorf("%q is over %d bytes", path, limit)
	}
	return buf.Bytes(), nil
}

// openNoFollow opens path for reading, refusing a symbolic link in its last component.
func openNoFollow(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
