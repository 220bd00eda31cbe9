package valkeyserver

import (
	"context"
	"errors"
	"os"
	"testing"
)

func TestStart(t *testing.T) {
	if _, err := Binary(); errors.Is(err, ErrNotInstalled) && os.Getenv("GYM_REQUIRE_REDIS") != "1" {
		t.Skip(err)
	}
	s, err := Start(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !ping(s.Port) {
		t.Fatal("no PONG")
	}
	s.Kill()
	if ping(s.Port) {
		t.Fatal("still answers after Kill")
	}
}
