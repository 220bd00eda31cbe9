package main

import (
	"io"
	"os"
	"time"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// readJobFile reads and parses a job file ("-": standard input, named
// stdin in messages) with jobspec.ReadFile; relative deadlines count from
// now, and the built-in model's own rules are checked (jobconf.Check).
func readJobFile(path string, stdin io.Reader, now time.Time) (*jobspec.File, error) {
	r := stdin
	if path == "-" {
		path = "stdin"
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	return jobspec.ReadFile(path, r, now, checkBuiltin)
}

// checkBuiltin is jobconf.Check with the embedded base model, parsed only
// for a job on it.
func checkBuiltin(s jobspec.Spec) error { return jobconf.Check(s, basemodel.Builtin) }
