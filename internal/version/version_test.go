package version

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFrom(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.time", Value: "2026-12-01T20:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	in := from("gym", bi, "", "", "")
	if in.Version != "(devel)" || in.Commit != "0123456789abcdef0123456789abcdef01234567" || !in.Modified || in.Go != "go1.26.8" {
		t.Fatalf("%+v", in)
	}
	if s := in.String(); !strings.HasPrefix(s, "gym (devel) (commit 0123456789ab-dirty, 2026-12-01T20:00:00Z) go1.26.8 ") {
		t.Errorf("String: %q", s)
	}
	// The release stamp wins over what the toolchain recorded.
	in = from("hanzod", bi, "v0.3.0", "fedcba9876543210fedcba9876543210fedcba98", "2026-12-02T00:00:00Z")
	if in.Version != "v0.3.0" || in.Commit != "fedcba9876543210fedcba9876543210fedcba98" || in.Date != "2026-12-02T00:00:00Z" {
		t.Fatalf("%+v", in)
	}
	var b strings.Builder
	in.Write(&b, true)
	var back Info
	if err := json.Unmarshal([]byte(b.String()), &back); err != nil || back != in {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
	if in := from("gym", nil, "", "", ""); in.Version != "(devel)" || in.Commit != "" || in.Go == "" {
		t.Fatalf("no build info: %+v", in)
	}
}
