package doccheck

import (
	"reflect"
	"testing"
)

func TestSpans(t *testing.T) {
	md := "Run `fftctl round` and\n`fftctl simulate\n-wide`.\n\n<!-- docs-test: run -->\n```sh\nfftctl round\n```\n``a ` b``\n"
	got := Spans(md)
	want := []Span{
		{Line: 1, Text: "fftctl round"},
		{Line: 2, Text: "fftctl simulate -wide"},
		{Line: 7, Text: "fftctl round", Fenced: true, Info: "sh", Marker: "docs-test: run"},
		{Line: 9, Text: "a ` b"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Spans:\n got %+v\nwant %+v", got, want)
	}
}

func TestInvocations(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []Invocation
	}{
		{"fftctl simulate -seeds 1,2 -wide", []Invocation{{Program: "fftctl simulate", Flags: []string{"seeds", "wide"}, Args: []string{"1,2"}}}},
		{"bin/fftctl status -json | jq .", []Invocation{{Program: "fftctl status", Flags: []string{"json"}}}},
		{"FFT_X=1 fft-allocator -round=10s \\\n  -once", []Invocation{{Program: "fft-allocator", Flags: []string{"round", "once"}}}},
		{"go run ./cmd/fftctl round -example", []Invocation{{Program: "fftctl round", Flags: []string{"example"}}}},
		{`make dev DEV_ARGS="-round 5s -rounds 3"`, []Invocation{{Program: "fftctl dev", Flags: []string{"round", "rounds"}, Args: []string{"5s", "3"}}}},
		{"fftctl run [-var k=v] JOBSPEC", []Invocation{{Program: "fftctl run", Flags: []string{"var"}, Args: []string{"k=v", "JOBSPEC"}}}},
		{"fftctl -h", []Invocation{{Program: "fftctl", Flags: []string{"h"}}}},
		// Another program's argument that happens to be ours is not a call.
		{"consul acl policy create -name fft-allocator -rules @p.hcl", nil},
		{"nomad job run x.hcl # then fftctl status -json", nil},
	} {
		if got := Invocations(tc.text); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Invocations(%q):\n got %+v\nwant %+v", tc.text, got, tc.want)
		}
	}
}

func TestBareFlag(t *testing.T) {
	for text, want := range map[string]string{
		"-round": "round", "-min-round-gap 5s": "min-round-gap", "-big-jobs=skip": "big-jobs",
		"fftctl -x": "", "-1": "", "--": "", "a-b": "",
	} {
		if got := BareFlag(Span{Text: text}); got != want {
			t.Errorf("BareFlag(%q) = %q, want %q", text, got, want)
		}
	}
	if got := BareFlag(Span{Text: "-round", Fenced: true}); got != "" {
		t.Errorf("a fenced block is not a bare flag; got %q", got)
	}
}

func TestHelpFlags(t *testing.T) {
	fftctl := "Usage: fftctl x\n\n  Text with -inline flags.\n\nOptions:\n\n  -address=<addr>\n    The address.\n\n  -json\n    JSON.\n"
	goflag := "Usage of x:\n  -config string\n    \tA file.\n  -once\n    \tOne round.\n"
	for help, want := range map[string][]string{
		fftctl: {"address", "h", "help", "json"},
		goflag: {"config", "h", "help", "once"},
	} {
		if got := Sorted(HelpFlags(help)); !reflect.DeepEqual(got, want) {
			t.Errorf("HelpFlags:\n got %v\nwant %v", got, want)
		}
	}
}

func TestLinksAndAnchors(t *testing.T) {
	md := "# Top\n\nSee [the sim](allocator/sim/README.md#outputs-out-default-outsimulate) and `[not](a link)`.\n```\n[no](link)\n```\n## Top\n## Nomad API calls per round\n"
	if got, want := Links(md), []Link{{Line: 3, Target: "allocator/sim/README.md#outputs-out-default-outsimulate"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Links: got %+v, want %+v", got, want)
	}
	if got, want := Sorted(Anchors(md)), []string{"nomad-api-calls-per-round", "top", "top-1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Anchors: got %v, want %v", got, want)
	}
	if got := Slug("Outputs (`-out`, default `out/simulate`)"); got != "outputs--out-default-outsimulate" {
		t.Errorf("Slug = %q", got)
	}
}

func TestSectionRefs(t *testing.T) {
	text := "see allocator/README.md, \"The round problem\", and\n" +
		"// is documented in allocator/README.md (\"Round instance\n" +
		"//   format\"); and README.md \"Licence\"\nnot a ref: a.md and \"x\"\n"
	got := SectionRefs(text)
	want := []SectionRef{
		{Line: 1, File: "allocator/README.md", Section: "The round problem"},
		{Line: 2, File: "allocator/README.md", Section: "Round instance format"},
		{Line: 3, File: "README.md", Section: "Licence"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SectionRefs:\n got %+v\nwant %+v", got, want)
	}
	hs := Headings("# A\n```\n# not\n```\n## Round instance format (`fftctl round FILE`)\n")
	if !HasSection(hs, "round instance format (fftctl") || HasSection(hs, "not") || HasSection(hs, "instance") {
		t.Errorf("HasSection over %q", hs)
	}
}

func TestHCLConfigKeys(t *testing.T) {
	hcl := `plugin "nomad-device-fft" {
  config {
    enabled = true  # a comment
    fake {
      health_file = "/x"
      gpu { model = "A" }
      gpu {
        count = 2
      }
    }
  }
}
task "t" {
  driver = "fft"
  config {
    command = "python3"
    progress {
      pattern = "x"
    }
  }
  resources { cpu = 1 }
}`
	plugin, task := HCLConfigKeys(hcl)
	if want := []string{"enabled", "fake", "fake.health_file", "fake.gpu", "fake.gpu.model", "fake.gpu", "fake.gpu.count"}; !reflect.DeepEqual(plugin, want) {
		t.Errorf("plugin keys %v, want %v", plugin, want)
	}
	if want := []string{"command", "progress", "progress.pattern"}; !reflect.DeepEqual(task, want) {
		t.Errorf("task keys %v, want %v", task, want)
	}
}

func TestBulletKeysAndSection(t *testing.T) {
	md := "# T\n## Agent configuration\n\n- `a` (`bool`: `true`): x, see `b`.\n  - `c.d` (`string`): y\n- `e`, `f` (`string`: `\"\"`): z\n- `not` a key\n### Sub\n- `g` (`number`)\n## Next\n- `h` (`bool`)\n"
	sec := Section(md, "Agent configuration")
	if got, want := BulletKeys(sec), []string{"a", "c.d", "e", "f", "g"}; !reflect.DeepEqual(got, want) {
		t.Errorf("BulletKeys = %v, want %v", got, want)
	}
	paths := map[string]bool{"x.c.d": true, "a": true}
	if !DocumentedAs("c.d", paths) || !DocumentedAs("d", paths) || DocumentedAs("c", paths) || DocumentedAs("b", paths) {
		t.Error("DocumentedAs: a key names a path or a dotted suffix of one, nothing else")
	}
}
