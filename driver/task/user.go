package task

import (
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
)

// taskUser is who a task runs as, resolved: Name for the executor, UID and GID for the
// folders the driver makes the task's own.
type taskUser struct {
	Name     string
	UID, GID int
}

// lookupUser resolves a user name (or a numeric ID) on this host.
func lookupUser(name string) (taskUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.Atoi(name); nerr == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		return taskUser{}, fmt.Errorf("user %q: %w", name, err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return taskUser{}, fmt.Errorf("user %q has a non-numeric uid %q", name, u.Uid)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return taskUser{}, fmt.Errorf("user %q has a non-numeric gid %q", name, u.Gid)
	}
	return taskUser{Name: name, UID: uid, GID: gid}, nil
}

// checkUser says why a task may not run as name under this configuration, or nil.
func (c Config) checkUser(name string) error {
	u, err := lookupUser(name)
	if err != nil {
		return err
	}
	switch {
	case u.UID == 0 && !c.AllowRoot:
		return fmt.Errorf("user %q is root (uid 0): a task runs as root only with allow_root = true in the plugin config", name)
	case slices.Contains(c.DeniedUsers, name):
		return fmt.Errorf("user %q is in the plugin's denied_users", name)
	case len(c.AllowedUsers) > 0 && !slices.Contains(c.AllowedUsers, name):
		return fmt.Errorf("user %q is not in the plugin's allowed_users %q", name, c.AllowedUsers)
	}
	return nil
}

// resolveUser is who a task that asks for requested ("" for none) runs as. A plugin that
// is not root cannot run a task as anyone but itself: the task then runs as the agent's
// user, as raw_exec does, and the checks still refuse a named user it could not be.
func (c Config) resolveUser(requested string) (taskUser, error) {
	name := requested
	if name == "" {
		name = c.DefaultUser
	}
	if os.Geteuid() != 0 {
		if requested == "" {
			return taskUser{UID: os.Geteuid(), GID: os.Getegid()}, nil
		}
	}
	if err := c.checkUser(name); err != nil {
		return taskUser{}, err
	}
	u, err := lookupUser(name)
	if err == nil && u.UID == os.Geteuid() {
		// The plugin's own user (root with allow_root): the executor runs the task as
		// itself, as raw_exec does, without switching credentials.
		u.Name = ""
	}
	return u, err
}
