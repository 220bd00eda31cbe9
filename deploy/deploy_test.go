package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// typed returns an empty object of the API type for kind.
func typed(kind string) any {
	switch kind {
	case "Service":
		return &corev1.Service{}
	case "Secret":
		return &corev1.Secret{}
	case "Namespace":
		return &corev1.Namespace{}
	case "StatefulSet":
		return &appsv1.StatefulSet{}
	case "Deployment":
		return &appsv1.Deployment{}
	case "DaemonSet":
		return &appsv1.DaemonSet{}
	case "PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	}
	return nil
}

// decodeStrict decodes one manifest into its API type, refusing unknown
// and duplicate fields.
func decodeStrict(t *testing.T, where string, doc []byte) (string, any) {
	t.Helper()
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	obj := typed(meta.Kind)
	if obj == nil {
		t.Fatalf("%s: kind %q (%s) has no API type in this test", where, meta.Kind, meta.APIVersion)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("%s: %s: %v", where, meta.Kind, err)
	}
	return meta.Kind, obj
}

// TestManifestFiles decodes every manifest file (each document) strictly.
func TestManifestFiles(t *testing.T) {
	n := 0
	err := filepath.WalkDir("k8s", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") || d.Name() == "kustomization.yaml" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			decodeStrict(t, fmt.Sprintf("%s#%d", p, i), []byte(doc))
			n++
		}
		return nil
	})
	if err != nil || n < 8 {
		t.Fatalf("%d manifests: %v", n, err)
	}
}

// render runs kustomize on an overlay over an in-memory copy of deploy/k8s
// with stand-in key files (the real ones are never committed).
func render(t *testing.T, overlay string) map[string]any {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir("k8s", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile("/"+p, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"hanzod.key", "admin-token", "tls.crt", "tls.key", "worker-0.key", "worker-1.key", "worker-2.key", "hanzod-ca.pem"} {
		mem.WriteFile("/k8s/overlays/dev/keys/"+k, []byte("stand-in "+k))
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/k8s/"+overlay)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", overlay, err)
	}
	out := map[string]any{}
	for _, r := range rm.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		kind, obj := decodeStrict(t, overlay+": "+r.CurId().String(), b)
		out[kind+"/"+r.GetName()] = obj
	}
	return out
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no container %s", name)
	}
	return spec.Containers[i]
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestKustomize renders the overlays and checks what the deployment
// promises: three hanzod replicas over Valkey, ready only as leader,
// alive on any health answer, a PDB, a named metrics port, secrets that
// exist for every secret volume, non-root containers, GPUs in the gpu
// overlay.
func TestKustomize(t *testing.T) {
	for _, overlay := range []string{"overlays/dev", "overlays/gpu"} {
		t.Run(overlay, func(t *testing.T) {
			objs := render(t, overlay)
			ss, ok := objs["StatefulSet/hanzod"].(*appsv1.StatefulSet)
			if !ok || ss.Spec.Replicas == nil || *ss.Spec.Replicas != 3 || ss.Namespace != "zoo-gym" {
				t.Fatalf("hanzod StatefulSet: %+v", ss)
			}
			hz := container(t, ss.Spec.Template.Spec, "hanzod")
			if got := hz.ReadinessProbe.Exec.Command; !slices.Equal(got, []string{"/usr/local/bin/hanzod", "health", "--leader"}) {
				t.Errorf("hanzod readiness %v", got)
			}
			if got := hz.LivenessProbe.Exec.Command; !slices.Equal(got, []string{"/usr/local/bin/hanzod", "health"}) {
				t.Errorf("hanzod liveness %v", got)
			}
			if env(hz, "VALKEY_URL") != "redis://valkey:6379/0" || env(hz, "IPFS_URL") != "http://ipfs:5001" || env(hz, "ORCHESTRATOR_KEY") == "" {
				t.Errorf("hanzod env %v", hz.Env)
			}
			if !slices.ContainsFunc(hz.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" && p.ContainerPort == 9551 }) {
				t.Error("no metrics port 9551 named metrics")
			}
			svc, _ := objs["Service/hanzod-peers"].(*corev1.Service)
			if svc == nil || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "metrics" }) {
				t.Error("hanzod-peers Service has no metrics port for a ServiceMonitor")
			}
			if pdb, _ := objs["PodDisruptionBudget/hanzod"].(*policyv1.PodDisruptionBudget); pdb == nil || pdb.Spec.MaxUnavailable == nil {
				t.Error("no PodDisruptionBudget for hanzod")
			}
			// Every secret volume names a generated Secret, and every pod
			// of ours runs as non-root without privilege escalation.
			for key, o := range objs {
				s, ok := o.(*appsv1.StatefulSet)
				if !ok {
					continue
				}
				for _, v := range s.Spec.Template.Spec.Volumes {
					if v.Secret != nil && objs["Secret/"+v.Secret.SecretName] == nil {
						t.Errorf("%s: volume %s: no Secret %s rendered", key, v.Name, v.Secret.SecretName)
					}
				}
				for _, c := range s.Spec.Template.Spec.Containers {
					if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
						t.Errorf("%s/%s: privilege escalation not off", key, c.Name)
					}
				}
			}
			w, _ := objs["StatefulSet/worker"].(*appsv1.StatefulSet)
			if w == nil {
				t.Fatal("no worker StatefulSet")
			}
			wc := container(t, w.Spec.Template.Spec, "worker")
			if env(wc, "ORCHESTRATOR_URL") != "hanzod:9550" || !slices.Contains(wc.Args, "--key=/keys/$(POD_NAME).key") {
				t.Errorf("worker: env %v args %v", wc.Env, wc.Args)
			}
			gpu := wc.Resources.Limits["nvidia.com/gpu"]
			if want := overlay == "overlays/gpu"; want != (gpu.Value() == 1) {
				t.Errorf("%s: worker nvidia.com/gpu limit %v", overlay, gpu.String())
			}
		})
	}
}

// TestCompose loads compose.yml with compose-go (docker compose's own
// loader, which validates against the Compose schema) and checks the
// services, and that .env.example and compose.yml name the same variables.
func TestCompose(t *testing.T) {
	environ := map[string]string{}
	b, err := os.ReadFile(".env.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			environ[k] = v
		}
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	environ["HANZOD_KEY_FILE"] = filepath.Join(dir, "secrets", "hanzod.key")
	environ["ADMIN_TOKEN_FILE"] = filepath.Join(dir, "secrets", "admin-token")
	environ["TLS_CERT_FILE"] = filepath.Join(dir, "secrets", "tls.crt")
	environ["TLS_KEY_FILE"] = filepath.Join(dir, "secrets", "tls.key")
	wd, _ := os.Getwd()
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir: wd, ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(wd, "compose.yml")}}, Environment: maps.Clone(environ),
	}, func(o *loader.Options) { o.SetProjectName("zoo-gym", true); o.Profiles = []string{"gpu"} })
	if err != nil {
		t.Fatalf("compose.yml: %v", err)
	}
	for _, name := range []string{"valkey", "ipfs", "hanzod-1", "hanzod-2", "hanzod-3", "worker-1", "worker-2", "worker-3", "worker-gpu"} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("no service %s", name)
		}
	}
	h := p.Services["hanzod-1"]
	if v := h.Environment["VALKEY_URL"]; v == nil || *v != "redis://valkey:6379/0" {
		t.Errorf("hanzod-1 VALKEY_URL %v", v)
	}
	if v := h.Environment["IPFS_URL"]; v == nil || *v != "http://ipfs:5001" {
		t.Errorf("hanzod-1 IPFS_URL %v", v)
	}
	var published []string
	for _, port := range h.Ports {
		published = append(published, port.Published)
	}
	if !slices.Equal(published, []string{"9550", "9551", "9552"}) {
		t.Errorf("hanzod-1 publishes %v", published)
	}
	if !h.ReadOnly || !slices.Contains(h.CapDrop, "ALL") {
		t.Error("hanzod-1 is not read-only without capabilities")
	}
	g := p.Services["worker-gpu"]
	if g.Deploy == nil || len(g.Deploy.Resources.Reservations.Devices) != 1 || g.Deploy.Resources.Reservations.Devices[0].Driver != "nvidia" {
		t.Errorf("worker-gpu reserves no GPU: %+v", g.Deploy)
	}
	if g.Build == nil || g.Build.Target != "gym-torch" || !strings.Contains(g.Image, "/gym-torch:") || !slices.Contains(g.Command, "torch") {
		t.Errorf("worker-gpu does not run the torch image on the torch backend: image %q, build %+v, command %v", g.Image, g.Build, g.Command)
	}
	for _, w := range []string{"worker-1", "worker-2", "worker-3"} {
		s := p.Services[w]
		if v := s.Environment["ORCHESTRATOR_URL"]; v == nil || *v != "hanzod-1:9550" {
			t.Errorf("%s ORCHESTRATOR_URL %v", w, v)
		}
		if !slices.Contains(s.Command, w) {
			t.Errorf("%s does not advertise its own name: %v", w, s.Command)
		}
		if v := s.Environment["ORCHESTRATOR_TLS_CA"]; v == nil || *v != "/run/secrets/hanzod_tls_cert" || len(s.Secrets) != 1 || s.Secrets[0].Source != "hanzod_tls_cert" {
			t.Errorf("%s does not trust hanzod's certificate: %v %v", w, v, s.Secrets)
		}
	}
	// Every ${VAR} of compose.yml is in .env.example and back.
	cb, _ := os.ReadFile("compose.yml")
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]+)`).FindAllStringSubmatch(string(cb), -1) {
		used[m[1]] = true
	}
	for k := range used {
		if _, ok := environ[k]; !ok && !strings.HasSuffix(k, "_IMAGE") {
			t.Errorf("compose.yml uses ${%s}, .env.example does not list it", k)
		}
	}
	for k := range environ {
		if !used[k] {
			t.Errorf(".env.example sets %s, compose.yml does not use it", k)
		}
	}
	// The docker compose CLI, where it exists, must agree.
	if out, err := exec.Command("docker", "compose", "version").CombinedOutput(); err == nil {
		cmd := exec.Command("docker", "compose", "-f", "compose.yml", "--env-file", ".env.example", "config", "-q")
		cmd.Env = append(os.Environ(), "HANZOD_KEY_FILE="+environ["HANZOD_KEY_FILE"], "ADMIN_TOKEN_FILE="+environ["ADMIN_TOKEN_FILE"],
			"TLS_CERT_FILE="+environ["TLS_CERT_FILE"], "TLS_KEY_FILE="+environ["TLS_KEY_FILE"])
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("docker compose config: %v\n%s", err, out)
		}
	} else {
		t.Logf("no docker compose CLI (%s): compose-go's schema check only", bytes.TrimSpace(out))
	}
}

// TestDockerfile parses deploy/Dockerfile with BuildKit's parser and
// instruction parser, with every (non-experimental) lint rule as an error, and checks the
// stages the build and the docs rely on.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	res, err := parser.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range res.Warnings {
		t.Errorf("parser warning: %s", w.Short)
	}
	var lint []string
	l := linter.New(&linter.Config{Warn: func(rule, desc, url, msg string, loc []parser.Range) {
		lint = append(lint, rule+": "+msg)
	}})
	stages, _, err := instructions.Parse(res.AST, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(lint) > 0 {
		t.Errorf("lint: %v", lint)
	}
	byName := map[string]instructions.Stage{}
	for _, s := range stages {
		byName[s.Name] = s
	}
	for _, name := range []string{"source", "prebuilt", "bin", "base", "hanzod", "gym", "gym-torch"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("no stage %s", name)
		}
	}
	for _, name := range []string{"base", "prebuilt"} {
		if byName[name].BaseName != "scratch" {
			t.Errorf("stage %s is FROM %s, want scratch", name, byName[name].BaseName)
		}
	}
	var user, health, entry bool
	for _, c := range byName["base"].Commands {
		if u, ok := c.(*instructions.UserCommand); ok && u.User == "65532:65532" {
			user = true
		}
	}
	for _, c := range byName["hanzod"].Commands {
		switch c := c.(type) {
		case *instructions.HealthCheckCommand:
			health = slices.Equal(c.Health.Test, []string{"CMD", "/usr/local/bin/hanzod", "health"})
		case *instructions.EntrypointCommand:
			entry = slices.Equal(c.CmdLine, []string{"/usr/local/bin/hanzod"})
		}
	}
	if !user || !health || !entry {
		t.Errorf("non-root user %v, hanzod health check %v, entrypoint %v", user, health, entry)
	}
	// The torch worker: non-root, the torch backend by default, its
	// requirements file present and pinned.
	var tuser, backend bool
	for _, c := range byName["gym-torch"].Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			tuser = c.User == "65532:65532"
		case *instructions.CmdCommand:
			backend = slices.Contains(c.CmdLine, "torch") && slices.Contains(c.CmdLine, "cuda")
		}
	}
	if !tuser || !backend {
		t.Errorf("gym-torch: non-root user %v, torch backend on cuda by default %v", tuser, backend)
	}
	req, err := os.ReadFile("../python/requirements-worker.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"torch==", "transformers==", "peft==", "bitsandbytes==", "safetensors=="} {
		if !bytes.Contains(req, []byte("\n"+pkg)) {
			t.Errorf("python/requirements-worker.txt pins no %s", strings.TrimSuffix(pkg, "=="))
		}
	}
}

// TestSystemdUnits runs systemd-analyze verify on the units in a
// throw-away root holding real gym and hanzod binaries (any message fails
// the test), and requires an exposure of at most 2.0 from systemd-analyze
// security.
func TestSystemdUnits(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	root := t.TempDir()
	bin := filepath.Join(root, "usr", "local", "bin")
	units := filepath.Join(root, "etc", "systemd", "system")
	os.MkdirAll(bin, 0o755)
	os.MkdirAll(units, 0o755)
	for _, cmd := range []string{"gym", "hanzod"} {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, cmd), "./cmd/"+cmd)
		build.Dir = ".."
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", cmd, err, out)
		}
	}
	// The standard units (targets the service depends on).
	if err := os.CopyFS(filepath.Join(root, "usr", "lib", "systemd", "system"), os.DirFS("/usr/lib/systemd/system")); err != nil {
		t.Logf("copying /usr/lib/systemd/system: %v", err)
	}
	names := []string{"hanzod.service", "gym-worker.service"}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("systemd", n))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(units, n), b, 0o644)
	}
	out, err := exec.Command(sa, append([]string{"verify", "--root=" + root}, names...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, n := range names {
		out, _ := exec.Command(sa, "security", "--offline=yes", "--root="+root, n).CombinedOutput()
		m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("systemd-analyze security %s:\n%s", n, out)
		}
		if x, _ := strconv.ParseFloat(string(m[1]), 64); x > 2.0 {
			t.Errorf("%s: exposure %.1f, want ≤ 2.0\n%s", n, x, out)
		}
		t.Logf("%s: exposure %s", n, m[1])
	}
}

// TestGrafanaDashboard checks the dashboard's structure and that every
// metric it queries is documented in docs/metrics.md, whose tables the
// tests of cmd/gym (TestMetricsDoc), worker and ring compare with what the
// code exports.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/zoo-gym.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string
		Panels []struct {
			ID      int
			Title   string
			GridPos struct{ X, Y, W, H int }
			Targets []struct{ Expr, RefID string }
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(gym_[a-z0-9_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	if len(documented) < 20 {
		t.Fatalf("only %d metrics found in docs/metrics.md", len(documented))
	}
	ids := map[int]bool{}
	queried := map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W <= 0 || p.GridPos.H <= 0 || len(p.Targets) == 0 {
			t.Errorf("panel %d %q: duplicate id, bad position or no query", p.ID, p.Title)
		}
		ids[p.ID] = true
		for _, tg := range p.Targets {
			names := regexp.MustCompile(`\bgym_[a-z0-9_]+`).FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no gym metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				// A histogram is queried through its series.
				if base, ok := strings.CutSuffix(n, "_bucket"); ok && documented[base] {
					n = base
				}
				queried[n] = true
				if !documented[n] {
					t.Errorf("panel %q queries %s, which docs/metrics.md does not list", p.Title, n)
				}
			}
		}
	}
	// The orchestrator's metrics are all on the dashboard.
	for n := range documented {
		if strings.HasPrefix(n, "gym_hanzod_") && !queried[n] {
			t.Errorf("%s is on no panel", n)
		}
	}
}
