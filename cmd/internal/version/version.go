package version

import (
	"regexp"
	"runtime/debug"
	"strings"
)

// Version and Commit are set at link time by `make release`:
//
//	-ldflags "-X github.com/nomad-fft/nomad-fft/cmd/internal/version.Version=v0.1.0
//	          -X github.com/nomad-fft/nomad-fft/cmd/internal/version.Commit=<sha>"
//
// Left empty, Get takes them from the build info, so `go install ...@v0.1.0` reports v0.1.0.
var (
	Version string
	Commit  string
)

// Dev is the version of a build that knows none: `go build` in a checkout without VCS stamping.
const Dev = "dev"

// Info is one binary's build: its version (v-prefixed semver, a Go pseudo-version or Dev) and
// the commit it was built from ("" when unknown).
type Info struct {
	Version string
	Commit  string
	// Modified is true when the build info says the work tree had uncommitted changes.
	Modified bool
}

// Get returns this binary's build: the link-time values first, then the build info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Version, Commit, bi)
}

// resolve prefers the link-time values and fills what they leave empty from bi (nil when the
// binary has none).
func resolve(version, commit string, bi *debug.BuildInfo) Info {
	// make release marks a build from a work tree with uncommitted changes "<sha>-dirty".
	info := Info{Version: version, Commit: strings.TrimSuffix(commit, "-dirty"), Modified: strings.HasSuffix(commit, "-dirty")}
	if bi != nil {
		// "(devel)" is what Go records for a build of the main module in its own checkout.
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.modified":
				if commit == "" {
					info.Modified = s.Value == "true"
				}
			}
		}
	}
	if info.Version == "" {
		info.Version = Dev
	}
	return info
}

// String is the one line every binary prints for -version: "v0.1.0 (commit 1a2b3c4d5e6f)".
func (i Info) String() string {
	c := i.Commit
	switch {
	case c == "":
		c = "unknown"
	case len(c) > 12:
		c = c[:12]
	}
	if i.Modified {
		c += ", modified"
	}
	return i.Version + " (commit " + c + ")"
}

// semverRE is the shape of a semantic version, which Nomad's plugin loader requires
// (hashicorp/go-version parses it).
var semverRE = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// Semver is the version without its "v", as a Nomad plugin reports it; a build without a
// semantic version reports 0.0.0-dev, which Nomad accepts and orders below every release.
func (i Info) Semver() string {
	if !semverRE.MatchString(i.Version) {
		return "0.0.0-dev"
	}
	return strings.TrimPrefix(i.Version, "v")
}
