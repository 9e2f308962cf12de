package command

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/nomad-fft/nomad-fft/jobspecs"
)

// evalVariables evaluates a variables file as Nomad's parser does (each
// value with no variables or functions) and returns each value as JSON.
func evalVariables(t *testing.T, content string) map[string]string {
	t.Helper()
	file, diags := hclsyntax.ParseConfig([]byte(content), "vars.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("the merged variables do not parse: %v\n%s", diags, content)
	}
	attrs, diags := file.Body.JustAttributes()
	if diags.HasErrors() {
		t.Fatalf("the merged variables are not NAME = VALUE lines: %v\n%s", diags, content)
	}
	out := map[string]string{}
	for name, a := range attrs {
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			t.Fatalf("variable %s does not evaluate: %v\n%s", name, diags, content)
		}
		b, err := ctyjson.SimpleJSONValue{Value: v}.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	return out
}

func TestHCLStringEvaluatesToItself(t *testing.T) {
	for _, s := range []string{
		"plain", `a "quoted" \ back\slash`, "new\nline\ttab\rcr", "${var.work}", "%{ if true }x%{ endif }",
		"$${", "100%", "trailing $", "é ✓ 漢字", "\x01\x1f\x7f", "",
		"NVIDIA A100-SXM4-40GB=4,Tesla V100-SXM2-16GB=1",
	} {
		lit, err := hclString(s)
		if err != nil {
			t.Fatalf("hclString(%q): %v", s, err)
		}
		got := evalVariables(t, "x = "+lit+"\n")["x"]
		want, _ := ctyjson.SimpleJSONValue{Value: cty.StringVal(s)}.MarshalJSON()
		if got != string(want) {
			t.Errorf("hclString(%q) = %s evaluates to %s, want %s", s, lit, got, want)
		}
	}
	if _, err := hclString("\xff"); err == nil {
		t.Error("hclString accepted invalid UTF-8")
	}
}

func TestMergeVariables(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []varFile
		flags []string
		want  map[string]string // name -> value as JSON
		order []string
		err   string
	}{
		{name: "flags are strings", flags: []string{"work=100", "throughput=A=1,B=2", "empty="},
			want:  map[string]string{"work": `"100"`, "throughput": `"A=1,B=2"`, "empty": `""`},
			order: []string{"work", "throughput", "empty"}},
		{name: "a file keeps its types; a flag wins", files: []varFile{{"a.hcl", []byte("work = 5\nmodels = [\"x\", \"y\"]\ngpu_count = 2\n")}},
			flags: []string{"work=7"},
			want:  map[string]string{"work": `"7"`, "models": `["x","y"]`, "gpu_count": `2`},
			order: []string{"work", "models", "gpu_count"}},
		{name: "a later file wins", files: []varFile{{"a.hcl", []byte("work = 1\nseconds = 3\n")}, {"b.hcl", []byte("work = 2\n")}},
			want: map[string]string{"work": `2`, "seconds": `3`}, order: []string{"work", "seconds"}},
		{name: "JSON file", files: []varFile{{"v.json", []byte(` {"work": "9", "gpu_count": 4, "tags": {"a": "b"}}`)}},
			want: map[string]string{"work": `"9"`, "gpu_count": `4`, "tags": `{"a":"b"}`}},
		{name: "flag without =", flags: []string{"work"}, err: `-var "work": expected NAME=VALUE`},
		{name: "flag with a bad name", flags: []string{"1work=3"}, err: `-var "1work=3": expected NAME=VALUE`},
		{name: "file that does not parse", files: []varFile{{"bad.hcl", []byte("work = = 1")}}, err: "-var-file bad.hcl"},
		{name: "file with a block", files: []varFile{{"blk.hcl", []byte("variable \"work\" {}\n")}}, err: "-var-file blk.hcl: expected only NAME = VALUE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content, set, err := mergeVariables(tc.files, tc.flags)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := evalVariables(t, content); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("values = %v, want %v\n%s", got, tc.want, content)
			}
			if tc.order != nil && !reflect.DeepEqual(set, tc.order) {
				t.Errorf("names set = %v, want %v", set, tc.order)
			}
		})
	}
}

func TestDeclaredVariables(t *testing.T) {
	src, err := jobspecs.FS.ReadFile(jobspecs.Train)
	if err != nil {
		t.Fatal(err)
	}
	declared, ok := declaredVariables(src)
	if !ok {
		t.Fatal("the example jobspec's variables were not read")
	}
	// Every variable the jobspec uses is declared, and nothing else.
	used := map[string]bool{}
	for _, part := range strings.Split(string(src), "var.")[1:] {
		name := part[:strings.IndexFunc(part, func(r rune) bool { return !(r == '_' || r >= 'a' && r <= 'z') })]
		used[name] = true
	}
	for _, d := range declared {
		if !used[d] {
			t.Errorf("declared %q is never used as var.%s", d, d)
		}
		delete(used, d)
	}
	if len(used) > 0 {
		t.Errorf("variables used but not found declared: %v (declared %v)", used, declared)
	}
	for _, src := range []string{`{"Job": {}}`, "job \"x\" {"} {
		if _, ok := declaredVariables([]byte(src)); ok {
			t.Errorf("declaredVariables(%q) claimed to know", src)
		}
	}
}

func TestCheckDeclared(t *testing.T) {
	for _, tc := range []struct {
		set, declared []string
		err           string
	}{
		{[]string{"work"}, []string{"seconds", "work"}, ""},
		{nil, nil, ""},
		{[]string{"wrok", "work", "gpus"}, []string{"gpu_count", "work"}, `no variable "wrok", "gpus" (it declares gpu_count, work)`},
		{[]string{"x"}, nil, `no variable "x" (it declares none)`},
	} {
		err := checkDeclared(tc.set, tc.declared)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("checkDeclared(%v, %v) = %v, want %q", tc.set, tc.declared, err, tc.err)
		}
	}
}
