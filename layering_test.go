package gym_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/zooai/gym/"

// wiring are the packages that may put the orchestrator together with
// everything else: the commands, the local cluster that gym up and the
// end-to-end tests share, and its chain (gym up --ledger evm: a dev chain
// and hanzod's chain ledger, kept apart so localcluster does not link
// go-ethereum).
var wiring = []string{"cmd", "localcluster", "localchain"}

// leaves are the packages the rest is built on: their builds depend on
// nothing of the worker, the orchestrator or the commands.
var leaves = []string{"ring", "delta", "llama", "tokenizer", "safetensors", "jobspec", "nodeauth", "edkey", "tensorname", "dataset", "reward", "envserver", "task", "chat", "toolcall", "episode"}

// testOnly lists test imports of orchestrator/... from outside it that are
// allowed, with the reason. Keep it short: a test that needs the real
// orchestrator uses localcluster.
var testOnly = map[string]string{
	// "pkg → orchestrator/x": "why",
	"worker → orchestrator/state": "the worker tests run a real hanzod (localcluster) and assert on its event log and job state",
}

// under reports whether package path rel (module-relative) is dir or below it.
func under(rel, dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }

func underAny(rel string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return under(rel, d) })
}

type pkgImports struct {
	path                       string // module-relative
	imports, testImports, deps []string
}

func listPackages(t *testing.T) []pkgImports {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command to list packages with")
		}
	}
	out, err := exec.Command(goBin, "list", "-f",
		`{{.ImportPath}}|{{join .Imports ","}}|{{join .TestImports ","}},{{join .XTestImports ","}}|{{join .Deps ","}}`, "./...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	rel := func(list string) []string {
		var r []string
		for _, p := range strings.Split(list, ",") {
			if q, ok := strings.CutPrefix(p, module); ok {
				r = append(r, q)
			}
		}
		return r
	}
	var pkgs []pkgImports
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 {
			t.Fatalf("go list line %q", line)
		}
		path, ok := strings.CutPrefix(f[0], module)
		if !ok {
			continue // the root package itself
		}
		pkgs = append(pkgs, pkgImports{path: path, imports: rel(f[1]), testImports: rel(f[2]), deps: rel(f[3])})
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// The import rules of the layers (docs in README.md, "Layout"): the
// orchestrator sits on top and only the wiring packages reach into it.
func TestLayering(t *testing.T) {
	for _, p := range listPackages(t) {
		checkLayering(t, p)
	}
}

// reporter is what checkLayering reports to: a *testing.T, or fakeT to
// test the rules themselves.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

type fakeT struct{ errs []string }

func (*fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func checkLayering(t reporter, p pkgImports) {
	t.Helper()
	inOrch := under(p.path, "orchestrator")
	if !inOrch && !underAny(p.path, wiring) {
		// No package below the orchestrator imports it, directly or
		// through another package.
		var direct, indirect []string
		for _, d := range p.deps {
			switch {
			case !under(d, "orchestrator"):
			case slices.Contains(p.imports, d):
				direct = append(direct, d)
			default:
				indirect = append(indirect, d)
			}
		}
		for _, d := range direct {
			t.Errorf("%s imports %s: only cmd/... and localcluster may use the orchestrator; move what %s needs into a package below it (as jobspec and nodeauth)", p.path, d, p.path)
		}
		if len(direct) == 0 && len(indirect) > 0 {
			t.Errorf("%s depends on %s through its imports: only cmd/... and localcluster may use the orchestrator", p.path, strings.Join(indirect, ", "))
		}
		for _, d := range p.testImports {
			if under(d, "orchestrator") && testOnly[p.path+" → "+d] == "" {
				t.Errorf("the tests of %s import %s: use localcluster for a real orchestrator, or list the import in testOnly with the reason", p.path, d)
			}
		}
	}
	if underAny(p.path, leaves) {
		for _, d := range p.deps {
			if under(d, "worker") || under(d, "orchestrator") || under(d, "cmd") {
				t.Errorf("%s depends on %s: %v are leaves and must not build on the worker, the orchestrator or the commands", p.path, d, leaves)
			}
		}
	}
	if !under(p.path, "orchestrator/daemon") && !underAny(p.path, wiring) {
		for _, d := range append(slices.Clone(p.imports), p.testImports...) {
			if under(d, "orchestrator/daemon") {
				t.Errorf("%s imports %s: only cmd/... and localcluster wire hanzod's daemon", p.path, d)
			}
		}
	}
}

// The rules catch what they are for: a bad import is reported with the
// package and the import named.
func TestLayeringCatches(t *testing.T) {
	for _, tc := range []struct {
		p    pkgImports
		want string
	}{
		{pkgImports{path: "worker", imports: []string{"orchestrator/state"}, deps: []string{"orchestrator/state"}}, "worker imports orchestrator/state"},
		{pkgImports{path: "jobconf", imports: []string{"x"}, deps: []string{"x", "orchestrator/ledger"}}, "jobconf depends on orchestrator/ledger through its imports"},
		{pkgImports{path: "nodeclient", testImports: []string{"orchestrator/engine"}}, "the tests of nodeclient import orchestrator/engine"},
		{pkgImports{path: "ring/memnet", deps: []string{"worker"}}, "ring/memnet depends on worker"},
		{pkgImports{path: "orchestrator/judge", imports: []string{"orchestrator/daemon"}}, "orchestrator/judge imports orchestrator/daemon"},
	} {
		ft := &fakeT{}
		checkLayering(ft, tc.p)
		if !slices.ContainsFunc(ft.errs, func(e string) bool { return strings.Contains(e, tc.want) }) {
			t.Errorf("%+v: reported %q, want %q", tc.p, ft.errs, tc.want)
		}
	}
	for _, ok := range []pkgImports{
		{path: "cmd/gym", imports: []string{"orchestrator/daemon"}, deps: []string{"orchestrator/daemon"}},
		{path: "localcluster", imports: []string{"orchestrator/engine"}, deps: []string{"orchestrator/engine"}},
		{path: "worker", testImports: []string{"localcluster"}},
		{path: "orchestrator/server", imports: []string{"orchestrator/state"}, deps: []string{"orchestrator/state"}},
	} {
		ft := &fakeT{}
		checkLayering(ft, ok)
		if len(ft.errs) > 0 {
			t.Errorf("%+v: %q", ok, ft.errs)
		}
	}
}
