package task

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The driver runs as root and writes into folders a task can write too (its checkpoint
// folder, its task folder). A task could leave a symbolic link where the driver writes, to
// make it overwrite any file on the host; so every write here resolves no link: the folder
// is opened with O_NOFOLLOW, and names are created and replaced inside it (openat, renameat).

// openDir opens the folder dir, refusing a link in its last component. A link in an earlier
// component is the host's own (the folders above a task's are root's).
func openDir(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return fd, nil
}

// writeAtomic replaces path with b (mode 0644): a fresh temporary file in the same folder,
// created exclusively without following a link, then renamed over the name (a rename
// replaces a link, never follows it). A crash leaves the old or the new content.
func writeAtomic(path string, b []byte) error {
	dir, name := filepath.Split(path)
	dfd, err := openDir(filepath.Clean(dir))
	if err != nil {
		return fmt.Errorf("writing %q: %w", path, err)
	}
	defer unix.Close(dfd)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + name + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("writing %q: creating %s: %w", path, tmp, err)
	}
	fh := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	_, werr := fh.Write(b)
	if werr == nil {
		werr = fh.Sync()
	}
	if cerr := fh.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = unix.Renameat(dfd, tmp, dfd, name)
	}
	if werr != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("writing %q: %w", path, werr)
	}
	return nil
}

// makeOwnedDir creates dir (mode 0700) owned by u, its parents as root's (0755) so that the
// task cannot swap it for a link; an existing dir is given to u and made 0700 again, through
// a handle that refuses a link. A plugin that is not root only makes it.
func makeOwnedDir(dir string, u taskUser) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("creating %q: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating %q: %w", dir, err)
	}
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if os.Geteuid() == 0 {
		if err := unix.Fchown(fd, u.UID, u.GID); err != nil {
			return fmt.Errorf("giving %q to uid %d: %w", dir, u.UID, err)
		}
	}
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return fmt.Errorf("making %q 0700: %w", dir, err)
	}
	return nil
}

// ownFile gives the regular file path to u, mode 0600; a missing file, or a link where it
// should be (the driver then reads no identity from it either), is left alone. Nomad writes a task's identity file world-readable when the jobspec names no
// user; the driver makes it the task's own.
func ownFile(path string, u taskUser) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	if os.Geteuid() == 0 {
		if err := unix.Fchown(fd, u.UID, u.GID); err != nil {
			return fmt.Errorf("giving %q to uid %d: %w", path, u.UID, err)
		}
	}
	return unix.Fchmod(fd, 0o600)
}
