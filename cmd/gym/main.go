// Command gym is the Zoo Gym command line: keys, delta files, benchmarks and
// (as they land) the worker and the job client.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

func run(ctx context.Context, args []string) int {
	root := newRoot()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ex *exitError
	if errors.As(err, &ex) {
		if ex.msg != "" {
			fmt.Fprintln(os.Stderr, "gym:", ex.msg)
		}
		return ex.code
	}
	fmt.Fprintln(os.Stderr, "gym:", err)
	if isUsage(err) {
		fmt.Fprintln(os.Stderr, "Run 'gym --help' for usage.")
		return 2
	}
	return 1
}

// exitError ends the program with a specific status; msg may be empty when
// the command already said what went wrong.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError marks errors in how the command was called (exit status 2).
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}
