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

// folders is the one table of which top-level folder may import which
// (besides itself): the architecture as the tree shows it
// (docs/architecture.md). The model (the engine, training, data) and the
// keys build on nothing but utilities; artifacts on those; the protocol
// (what both sides compute and exchange) on all three; the node and the
// orchestrator on the protocol, never on each other; the local
// development network and the commands wire everything. internal holds
// utilities and the test and bench harnesses, which may use the model and
// the protocol they exercise.
var folders = map[string][]string{
	"api":          {},
	"internal":     {"model", "protocol"},
	"model":        {"internal"},
	"keys":         {"internal"},
	"chain":        {"internal", "keys"},
	"artifact":     {"internal", "keys", "model"},
	"protocol":     {"api", "internal", "keys", "artifact", "model"},
	"node":         {"api", "internal", "keys", "artifact", "model", "protocol"},
	"orchestrator": {"api", "internal", "keys", "artifact", "model", "protocol", "chain"},
	"devnet":       {"api", "internal", "keys", "artifact", "model", "protocol", "chain", "node", "orchestrator"},
	"cmd":          {"api", "internal", "keys", "artifact", "model", "protocol", "chain", "node", "orchestrator", "devnet"},
}

// wiring are the packages that may put the orchestrator together with
// everything else: the commands and the local development network (the
// local cluster gym up and the end-to-end tests share, and its chain).
var wiring = []string{"cmd", "devnet"}

// testOnly lists test imports of orchestrator/... from outside it that are
// allowed, with the reason. Keep it short: a test that needs the real
// orchestrator uses devnet/localcluster.
var testOnly = map[string]string{
	// "pkg → orchestrator/x": "why",
	"node/worker → orchestrator/state": "the worker tests run a real hanzod (localcluster) and assert on its event log and job state",
}

// folder is the top-level folder of package path rel (module-relative).
func folder(rel string) string {
	f, _, _ := strings.Cut(rel, "/")
	return f
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
	from := folder(p.path)
	may, known := folders[from]
	if !known {
		t.Errorf("%s is in folder %s/, which the layering table (folders) does not know: put it in a domain folder or add the folder with what it may import", p.path, from)
	}
	for _, d := range p.imports {
		if to := folder(d); to != from && known && !slices.Contains(may, to) {
			t.Errorf("%s imports %s: %s/ may import only %v (layering_test.go, folders)", p.path, d, from, may)
		}
	}
	inOrch := under(p.path, "orchestrator")
	if !inOrch && !underAny(p.path, wiring) {
		for _, d := range p.testImports {
			if under(d, "orchestrator") && testOnly[p.path+" → "+d] == "" {
				t.Errorf("the tests of %s import %s: use devnet/localcluster for a real orchestrator, or list the import in testOnly with the reason", p.path, d)
			}
		}
	}
	if !under(p.path, "orchestrator/daemon") && !underAny(p.path, wiring) {
		for _, d := range append(slices.Clone(p.imports), p.testImports...) {
			if under(d, "orchestrator/daemon") {
				t.Errorf("%s imports %s: only cmd/... and devnet/... wire hanzod's daemon", p.path, d)
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
		{pkgImports{path: "node/worker", imports: []string{"orchestrator/state"}}, "node/worker imports orchestrator/state"},
		{pkgImports{path: "protocol/jobconf", imports: []string{"node/worker"}}, "protocol/jobconf imports node/worker"},
		{pkgImports{path: "model/llama", imports: []string{"protocol/delta"}}, "model/llama imports protocol/delta"},
		{pkgImports{path: "orchestrator/judge", imports: []string{"node/worker"}}, "orchestrator/judge imports node/worker"},
		{pkgImports{path: "node/nodeclient", testImports: []string{"orchestrator/engine"}}, "the tests of node/nodeclient import orchestrator/engine"},
		{pkgImports{path: "orchestrator/judge", imports: []string{"orchestrator/daemon"}}, "orchestrator/judge imports orchestrator/daemon"},
		{pkgImports{path: "stray/pkg"}, "stray/pkg is in folder stray/"},
	} {
		ft := &fakeT{}
		checkLayering(ft, tc.p)
		if !slices.ContainsFunc(ft.errs, func(e string) bool { return strings.Contains(e, tc.want) }) {
			t.Errorf("%+v: reported %q, want %q", tc.p, ft.errs, tc.want)
		}
	}
	for _, ok := range []pkgImports{
		{path: "cmd/gym", imports: []string{"orchestrator/daemon"}, deps: []string{"orchestrator/daemon"}},
		{path: "devnet/localcluster", imports: []string{"orchestrator/engine", "node/worker"}},
		{path: "node/worker", testImports: []string{"devnet/localcluster"}},
		{path: "orchestrator/server", imports: []string{"orchestrator/state", "protocol/jobspec"}},
		{path: "protocol/ring", imports: []string{"keys/edkey"}},
	} {
		ft := &fakeT{}
		checkLayering(ft, ok)
		if len(ft.errs) > 0 {
			t.Errorf("%+v: %q", ok, ft.errs)
		}
	}
}
