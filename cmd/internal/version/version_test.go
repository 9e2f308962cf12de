package version

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	stamped := &debug.BuildInfo{
		Main:     debug.Module{Path: "github.com/nomad-fft/nomad-fft", Version: "v0.1.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}},
	}
	devel := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	cases := []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		want            Info
		wantString      string
		wantSemver      string
	}{
		{"go install @v0.1.0", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}},
			Info{Version: "v0.1.0"}, "v0.1.0 (commit unknown)", "0.1.0"},
		{"build info with vcs", "", "", stamped,
			Info{Version: "v0.1.0", Commit: "0123456789abcdef0123", Modified: true}, "v0.1.0 (commit 0123456789ab, modified)", "0.1.0"},
		{"ldflags win over build info", "v0.2.0-rc.1", "feedbeef", stamped,
			Info{Version: "v0.2.0-rc.1", Commit: "feedbeef"}, "v0.2.0-rc.1 (commit feedbeef)", "0.2.0-rc.1"},
		{"release from a dirty tree", "v0.1.0", "feedbeef-dirty", nil,
			Info{Version: "v0.1.0", Commit: "feedbeef", Modified: true}, "v0.1.0 (commit feedbeef, modified)", "0.1.0"},
		{"checkout build", "", "", devel, Info{Version: Dev}, "dev (commit unknown)", "0.0.0-dev"},
		{"no build info", "", "", nil, Info{Version: Dev}, "dev (commit unknown)", "0.0.0-dev"},
		{"pseudo-version", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201085311-ceeca53aa1b2"}},
			Info{Version: "v0.0.0-20261201085311-ceeca53aa1b2"}, "v0.0.0-20261201085311-ceeca53aa1b2 (commit unknown)", "0.0.0-20261201085311-ceeca53aa1b2"},
		{"not semver", "nightly", "", nil, Info{Version: "nightly"}, "nightly (commit unknown)", "0.0.0-dev"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := resolve(c.version, c.commit, c.bi)
			if got != c.want {
				t.Errorf("resolve(%q, %q) = %+v, want %+v", c.version, c.commit, got, c.want)
			}
			if s := got.String(); s != c.wantString {
				t.Errorf("String() = %q, want %q", s, c.wantString)
			}
			if s := got.Semver(); s != c.wantSemver {
				t.Errorf("Semver() = %q, want %q", s, c.wantSemver)
			}
		})
	}
}
