// Package version says which build of gym or hanzod is running: the
// release version and commit stamped by scripts/release.sh through
// -ldflags -X, else what the Go toolchain recorded (module version, VCS
// revision, time and modified flag from runtime/debug.ReadBuildInfo), and
// the Go version and platform.
package version

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Stamped by the release build:
//
//	-ldflags "-X github.com/zooai/gym/internal/version.version=v1.2.3 -X github.com/zooai/gym/internal/version.commit=<sha> -X github.com/zooai/gym/internal/version.date=<RFC 3339>"
var version, commit, date string

// Info describes a build.
type Info struct {
	Program  string `json:"program"`
	Version  string `json:"version"`          // "v1.2.3", "v1.2.3-4-gabcdef0-dirty", or "(devel)"
	Commit   string `json:"commit,omitempty"` // full VCS revision, when known
	Date     string `json:"date,omitempty"`   // commit time (RFC 3339), when known
	Modified bool   `json:"modified"`         // built from a tree with uncommitted changes
	Go       string `json:"go"`
	Platform string `json:"platform"` // GOOS/GOARCH
}

// Get returns the running program's build information.
func Get(program string) Info {
	bi, _ := debug.ReadBuildInfo()
	return from(program, bi, version, commit, date)
}

// from combines the build info with the stamped values (which win).
func from(program string, bi *debug.BuildInfo, ver, rev, when string) Info {
	in := Info{Program: program, Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if bi.Main.Version != "" {
			in.Version = bi.Main.Version
		}
		in.Go = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = s.Value
			case "vcs.time":
				in.Date = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if ver != "" {
		in.Version = ver
	}
	if rev != "" {
		in.Commit = rev
	}
	if when != "" {
		in.Date = when
	}
	return in
}

// String is one line: "gym v1.2.3 (commit abcdef012345, 2026-12-01T20:00:00Z) go1.26.8 linux/amd64".
func (in Info) String() string {
	s := in.Program + " " + in.Version
	if in.Commit != "" {
		c := in.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if in.Modified {
			c += "-dirty"
		}
		s += " (commit " + c
		if in.Date != "" {
			s += ", " + in.Date
		}
		s += ")"
	}
	return s + " " + in.Go + " " + in.Platform
}

// Write prints in as its String line, or as JSON.
func (in Info) Write(w io.Writer, asJSON bool) error {
	if asJSON {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(in)
	}
	_, err := fmt.Fprintln(w, in.String())
	return err
}
