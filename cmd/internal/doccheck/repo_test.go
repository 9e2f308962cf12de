package doccheck

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/live"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/telemetry"
	"github.com/nomad-fft/nomad-fft/driver/device"
	"github.com/nomad-fft/nomad-fft/driver/task"
)

// The repository's docs, checked against the binaries built from the same
// tree: what `make test` runs so that the docs cannot drift from the code.

// root is the repository root, three folders up.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", dir, err)
	}
	return dir
}

// docs returns the tracked Markdown files (git ls-files), relative to root;
// outside a git checkout, every .md file under root but .cache, bin, dist
// and out.
func docs(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "*.md").Output()
	if err == nil {
		var files []string
		for _, f := range strings.Fields(string(out)) {
			if _, err := os.Stat(filepath.Join(root, f)); err == nil {
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "bin" || rel == "dist" || rel == "out") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func read(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds fftctl and fft-allocator from this tree once per test
// binary and returns their folder.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "doccheck-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command(goTool(), "build", "-o", binDir+string(filepath.Separator), "./cmd/fftctl", "./cmd/fft-allocator")
		cmd.Dir = root(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err, out}
		}
	})
	if buildErr != nil {
		t.Fatalf("building the binaries the docs describe: %v", buildErr)
	}
	return binDir
}

// goTool is the go command: on PATH, else the one this test was built
// with.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// help runs a built program with args and returns what it prints.
func help(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // Go's flag package exits 0 on -h, the cli package 0 or 1
	return out.String()
}

var subcommandRE = regexp.MustCompile(`(?m)^    ([a-z][a-z-]*)\s{2,}\S`)

// programFlags returns, for every program Programs names ("fftctl run",
// "fftctl simulate", ..., "fft-allocator"), the flags its help lists.
func programFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	bin := binaries(t)
	fftctl := filepath.Join(bin, "fftctl")
	flags := map[string]map[string]bool{}
	top := help(t, fftctl, "-h")
	for _, m := range subcommandRE.FindAllStringSubmatch(top, -1) {
		flags["fftctl "+m[1]] = HelpFlags(help(t, fftctl, m[1], "-h"))
	}
	if len(flags) < 10 {
		t.Fatalf("fftctl -h lists %d commands, want the 12 or so it has:\n%s", len(flags), top)
	}
	// fftctl's own flags (before a command): the cli package's.
	flags["fftctl"] = map[string]bool{"h": true, "help": true, "version": true, "v": true}
	flags["fft-allocator"] = HelpFlags(help(t, filepath.Join(bin, "fft-allocator"), "-h"))
	if !flags["fft-allocator"]["round"] {
		t.Fatalf("fft-allocator -h lists no -round flag:\n%v", Sorted(flags["fft-allocator"]))
	}
	return flags
}

// subjects says which programs a doc's bare flags ("`-round`" on its own)
// belong to: the longest prefix of its path here, else every program.
var subjects = map[string][]string{
	"allocator/sim/":      {"fftctl simulate"},
	"allocator/workload/": {"fftctl simulate"},
	"allocator/profile/":  {"fftctl simulate", "fft-allocator"},
}

// results are the docs whose figures come from fftctl simulate commands.
var results = map[string]bool{
	"allocator/sim/HEADLINE.md": true, "allocator/sim/REPRODUCTION.md": true, "allocator/sim/EARLY_ROUNDS.md": true,
}

// external are flags of other tools that the docs name on their own, with
// the tool: they are not ours to check.
var external = map[string]string{
	"bench": "go test", "count": "go test",
}

func TestDocFlagsExist(t *testing.T) {
	root := root(t)
	flags := programFlags(t)
	all := map[string]bool{}
	for _, set := range flags {
		for f := range set {
			all[f] = true
		}
	}
	for _, doc := range docs(t, root) {
		md := read(t, root, doc)
		bare := all
		best := ""
		for prefix, progs := range subjects {
			if strings.HasPrefix(doc, prefix) && len(prefix) > len(best) {
				best = prefix
				bare = map[string]bool{}
				for _, p := range progs {
					for f := range flags[p] {
						bare[f] = true
					}
				}
			}
		}
		for _, s := range Spans(md) {
			for _, inv := range Invocations(s.Text) {
				have, ok := flags[inv.Program]
				if !ok {
					t.Errorf("%s:%d: `%s`: no such command (fftctl -h lists %v)", doc, s.Line, inv.Program, programNames(flags))
					continue
				}
				for _, f := range inv.Flags {
					if !have[f] {
						t.Errorf("%s:%d: `%s -%s`: %s has no flag -%s", doc, s.Line, inv.Program, f, inv.Program, f)
					}
				}
				if results[doc] && inv.Program == "fftctl simulate" && slices.Contains(inv.Flags, "policies") && !slices.Contains(inv.Flags, "min-round-gap") {
					t.Errorf("%s:%d: `fftctl simulate -policies ...` without -min-round-gap: a results command names its schedule, so that a change of the default does not change what it measured", doc, s.Line)
				}
			}
			if f := BareFlag(s); f != "" && !bare[f] && external[f] == "" {
				t.Errorf("%s:%d: `%s`: no flag -%s in the help of %s", doc, s.Line, s.Text, f, subjectsOf(doc, best))
			}
		}
	}
}

func programNames(flags map[string]map[string]bool) []string {
	set := map[string]bool{}
	for p := range flags {
		set[p] = true
	}
	return Sorted(set)
}

func subjectsOf(doc, prefix string) string {
	if prefix == "" {
		return "any fftctl command or fft-allocator"
	}
	return strings.Join(subjects[prefix], " or ")
}

func TestDocLinksResolve(t *testing.T) {
	root := root(t)
	for _, doc := range docs(t, root) {
		md := read(t, root, doc)
		for _, l := range Links(md) {
			target := l.Target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(doc), path)))
				if file == ".." || strings.HasPrefix(file, "../") || filepath.IsAbs(path) {
					t.Errorf("%s:%d: link %s leaves the repository (a clone has only what is in it)", doc, l.Line, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, file)); err != nil {
					t.Errorf("%s:%d: link %s: %s does not exist", doc, l.Line, target, file)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(file, ".md") && !Anchors(read(t, root, file))[anchor] {
				t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", doc, l.Line, target, file, anchor)
			}
		}
		// A path to the design folder beside the repository reads like a
		// file of it: a clone has no ../shared.
		for _, s := range Spans(md) {
			if strings.Contains(s.Text, "../shared/") || strings.HasPrefix(s.Text, "shared/") {
				t.Errorf("%s:%d: `%s` names a file outside the repository", doc, s.Line, s.Text)
			}
		}
	}
}

// TestReadmeCommandsRun runs the commands of README.md's fenced blocks
// marked <!-- docs-test: run --> (the ones that need no cluster), one after
// another in a new folder whose bin/ holds the built fftctl and
// fft-allocator (also on PATH), and wants each to exit 0.
func TestReadmeCommandsRun(t *testing.T) {
	root := root(t)
	bin := binaries(t)
	work := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(work, "bin")); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, doc := range docs(t, root) {
		for _, s := range Spans(read(t, root, doc)) {
			if !s.Fenced || s.Marker != "docs-test: run" {
				continue
			}
			if doc != "README.md" {
				t.Errorf("%s:%d: only README.md's blocks are run; move the marker or the block", doc, s.Line)
				continue
			}
			for _, words := range Commands(s.Text) {
				line := strings.Join(words, " ")
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				cmd := exec.CommandContext(ctx, "sh", "-c", line)
				cmd.Dir = work
				cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
				start := time.Now()
				out, err := cmd.CombinedOutput()
				cancel()
				if err != nil {
					t.Errorf("%s:%d: `%s`: %v after %s\n%s", doc, s.Line, line, err, time.Since(start).Round(time.Millisecond), tail(out))
					continue
				}
				t.Logf("%s:%d: `%s`: exit 0 in %s", doc, s.Line, line, time.Since(start).Round(time.Millisecond))
				ran++
			}
		}
	}
	if ran == 0 {
		t.Error("README.md has no block marked <!-- docs-test: run --> whose commands ran")
	}
}

func tail(out []byte) string {
	const n = 2000
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}

// TestSectionRefsResolve checks the references by name to a doc's section
// (allocator/README.md, "The round problem") in the docs, the Makefile, .ci and the Go sources, whose
// help texts print them: the file exists and has a heading that starts so.
func TestSectionRefsResolve(t *testing.T) {
	root := root(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "*.md", "*.go", "Makefile", ".ci/*").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	checked := 0
	for _, file := range strings.Fields(string(out)) {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			continue // deleted in the work tree
		}
		for _, ref := range SectionRefs(string(b)) {
			target := ""
			for _, cand := range []string{filepath.Join(filepath.Dir(file), ref.File), ref.File} {
				if _, err := os.Stat(filepath.Join(root, cand)); err == nil {
					target = cand
					break
				}
			}
			if target == "" {
				t.Errorf("%s:%d: %s, %q: no such file beside it or from the repository root", file, ref.Line, ref.File, ref.Section)
				continue
			}
			if !HasSection(Headings(read(t, root, target)), ref.Section) {
				t.Errorf("%s:%d: %s, %q: %s has no heading that starts so", file, ref.Line, ref.File, ref.Section, target)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("found no section reference to check; is SectionRefs broken?")
	}
}

// TestPluginConfigDocs checks the plugins' documented configuration
// against their schemas, both ways: every key an HCL example sets in a
// config block and every key a bullet documents exists in the schema,
// and every attribute of the schema is documented.
func TestPluginConfigDocs(t *testing.T) {
	root := root(t)
	deviceSpec, _ := (&device.Plugin{}).ConfigSchema()
	driverSpec, _ := (&task.Driver{}).ConfigSchema()
	taskSpec, _ := (&task.Driver{}).TaskConfigSchema()
	for _, tc := range []struct {
		doc, heading string
		spec         *hclspec.Spec
		agent        bool // an agent's plugin block, not a task's config
	}{
		{"cmd/nomad-device-fft/README.md", "Agent configuration", deviceSpec, true},
		{"cmd/nomad-driver-fft/README.md", "Agent configuration", driverSpec, true},
		{"cmd/nomad-driver-fft/README.md", "Task configuration", taskSpec, false},
	} {
		paths := SpecPaths(tc.spec)
		if len(paths) == 0 {
			t.Fatalf("%s: the schema has no keys", tc.doc)
		}
		sec := Section(read(t, root, tc.doc), tc.heading)
		if sec == "" {
			t.Errorf("%s: no section %q", tc.doc, tc.heading)
			continue
		}
		examples := 0
		for _, s := range Spans(sec) {
			if !s.Fenced || s.Info != "hcl" {
				continue
			}
			plugin, taskKeys := HCLConfigKeys(s.Text)
			keys := taskKeys
			if tc.agent {
				keys = plugin
			}
			for _, k := range keys {
				examples++
				if _, ok := paths[k]; !ok {
					t.Errorf("%s, %q: the example sets %s, which the schema lacks (it has %v)", tc.doc, tc.heading, k, Sorted(paths))
				}
			}
		}
		if examples == 0 {
			t.Errorf("%s, %q: no hcl example sets a key of the config block", tc.doc, tc.heading)
		}
		documented := BulletKeys(sec)
		for _, k := range documented {
			if !DocumentedAs(k, paths) {
				t.Errorf("%s, %q: documents `%s`, which the schema lacks", tc.doc, tc.heading, k)
			}
		}
		for p, attr := range paths {
			if !attr {
				continue
			}
			found := false
			for _, k := range documented {
				if p == k || strings.HasSuffix(p, "."+k) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s, %q: the schema's %s is not documented (a bullet \"- `%s` (`type`: default): ...\")", tc.doc, tc.heading, p, p)
			}
		}
	}
}

// goPackage reads the non-test Go files of the packages under dirs
// (relative to root; each dir and its subfolders).
func goPackage(t *testing.T, root string, dirs ...string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				files[path] = string(b)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestReferencesComplete checks the references of cmd/fft-allocator's
// README against the code, both ways: the fft. jobspec keys, the Consul KV
// layout, the metrics and the reason codes each list every one the code
// has and none it lacks.
func TestReferencesComplete(t *testing.T) {
	root := root(t)
	const doc = "cmd/fft-allocator/README.md"
	md := read(t, root, doc)
	for _, tc := range []struct {
		name, heading string
		dirs          []string
		// code picks the names the code declares from its constants and
		// string literals; documented maps a table key to such a name.
		code       func(consts []GoConst, literals []string) map[string]bool
		documented func(key string) (string, bool)
	}{{
		name: "jobspec keys", heading: "The jobspec contract", dirs: []string{"allocator/jobmeta"},
		code: func(consts []GoConst, _ []string) map[string]bool {
			set := map[string]bool{}
			for _, c := range consts {
				if strings.HasPrefix(c.Name, "Key") && strings.HasPrefix(c.Value, "fft.") {
					set[c.Value] = true
				}
			}
			return set
		},
		documented: func(key string) (string, bool) { return key, strings.HasPrefix(key, "fft.") },
	}, {
		name: "Consul keys", heading: "Consul KV layout", dirs: []string{"allocator/consulstore"},
		code: func(consts []GoConst, _ []string) map[string]bool {
			set := map[string]bool{}
			for _, c := range consts {
				if (strings.HasPrefix(c.Name, "key") || strings.HasPrefix(c.Name, "dir")) && c.Value != "" {
					set[c.Value] = true
				}
			}
			return set
		},
		documented: func(key string) (string, bool) {
			rest, ok := strings.CutPrefix(key, "<prefix>/")
			if !ok {
				return "", false
			}
			// "/jobs/<chunk>" is the directory "/jobs/"; "/ledger" a key.
			if i := strings.Index(rest, "<"); i >= 0 {
				rest = rest[:i]
			}
			return rest, true
		},
	}, {
		// The metrics the service serves, from its own registry after a round.
		name: "metrics", heading: "Metrics and audit events",
		code:       func([]GoConst, []string) map[string]bool { return servedMetrics(t) },
		documented: func(key string) (string, bool) { return key, metricRE.MatchString(key) },
	}, {
		name: "reason codes", heading: "Reason codes", dirs: []string{"allocator"},
		code: func(consts []GoConst, _ []string) map[string]bool {
			set := map[string]bool{}
			for _, c := range consts {
				if c.Type == "ReasonCode" || c.Type == "allocator.ReasonCode" {
					set[c.Value] = true
				}
			}
			return set
		},
		documented: func(key string) (string, bool) { return key, true },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var consts []GoConst
			var literals []string
			var err error
			if tc.dirs != nil {
				consts, literals, err = GoConsts(goPackage(t, root, tc.dirs...))
			}
			if err != nil {
				t.Fatal(err)
			}
			code := tc.code(consts, literals)
			if len(code) == 0 {
				t.Fatalf("found no %s in %v", tc.name, tc.dirs)
			}
			sec := Section(md, tc.heading)
			if sec == "" {
				t.Fatalf("%s has no section %q", doc, tc.heading)
			}
			docs := map[string]bool{}
			for _, key := range TableKeys(sec) {
				if name, ok := tc.documented(key); ok {
					docs[name] = true
				}
			}
			for name := range code {
				if !docs[name] {
					t.Errorf("%s, %q: the code has %q, the table does not", doc, tc.heading, name)
				}
			}
			for name := range docs {
				if !code[name] {
					t.Errorf("%s, %q: the table has %q, the code (%v) does not", doc, tc.heading, name, tc.dirs)
				}
			}
		})
	}
}

var metricRE = regexp.MustCompile(`^fft_[a-z_]+$`)

// servedMetrics returns the names of the fft_ metrics the service's
// registry serves after one recorded round with a running job, per-job
// series on.
func servedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	rec := &loop.RoundRecord{Round: 1, Start: time.Now().UTC().Format(time.RFC3339Nano),
		Models: []allocator.Model{{Name: "A100", GPUs: 2}}, Usage: map[string]int{"A100": 1},
		Jobs:   []loop.JobAudit{{ID: "default/a", Model: "A100", GPUs: 1, Action: loop.ActionStart}},
		Phases: map[string]float64{"1-observe": 0.01}, Status: "optimal"}
	st := live.Status{Rounds: 1, Leading: true, Last: rec, NextRound: 2,
		Jobs: map[string]loop.JobRecord{"default/a": {Status: loop.StatusRunning}}}
	m := telemetry.New(staticStatus(st), telemetry.WithPerJob(true))
	m.ObserveRound(rec, nil)
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		if metricRE.MatchString(f.GetName()) {
			names[f.GetName()] = true
		}
	}
	return names
}

type staticStatus live.Status

func (s staticStatus) Status() live.Status { return live.Status(s) }

// TestReferencesGenerated checks that cmd/fftctl/REFERENCE.md and
// cmd/fft-allocator/REFERENCE.md are what the built binaries' help prints
// (one help builder, cmd/internal/helptext, for both); with
// FFT_UPDATE_DOCS=1 it writes them.
func TestReferencesGenerated(t *testing.T) {
	root := root(t)
	bin := binaries(t)
	host, _ := os.Hostname()
	// fft-allocator's -id defaults to this host and process.
	pid := regexp.MustCompile(regexp.QuoteMeta(host) + `-[0-9]+`)
	norm := func(s string) string {
		if host != "" {
			s = pid.ReplaceAllString(s, "<hostname>-<pid>")
		}
		return strings.TrimRight(s, "\n")
	}
	const regen = "FFT_UPDATE_DOCS=1 go test ./cmd/internal/doccheck -run TestReferencesGenerated"
	fftctl := filepath.Join(bin, "fftctl")
	var b strings.Builder
	fmt.Fprintf(&b, "# fftctl reference\n\nGenerated from `fftctl -h` and `fftctl <command> -h` by `%s`;\n`make test` fails when this file and the help differ. The guide is [README.md](README.md).\n", regen)
	top := help(t, fftctl, "-h")
	fmt.Fprintf(&b, "\n```\n%s\n```\n", norm(top))
	for _, m := range subcommandRE.FindAllStringSubmatch(top, -1) {
		fmt.Fprintf(&b, "\n## fftctl %s\n\n```\n%s\n```\n", m[1], norm(help(t, fftctl, m[1], "-h")))
	}
	var a strings.Builder
	fmt.Fprintf(&a, "# fft-allocator reference\n\nGenerated from `fft-allocator -h` by `%s`;\n`make test` fails when this file and the help differ. The guide is [README.md](README.md).\n", regen)
	fmt.Fprintf(&a, "\n```\n%s\n```\n", norm(help(t, filepath.Join(bin, "fft-allocator"), "-h")))
	for file, want := range map[string]string{
		"cmd/fftctl/REFERENCE.md":        b.String(),
		"cmd/fft-allocator/REFERENCE.md": a.String(),
	} {
		path := filepath.Join(root, file)
		if os.Getenv("FFT_UPDATE_DOCS") == "1" {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is not what the help prints (%v); regenerate it: %s", file, err, regen)
		}
	}
}
