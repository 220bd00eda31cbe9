// Package valkeyserver starts a local Valkey (or Redis) server for hanzod's
// replicas: on a free loopback port, in a directory, with the durability
// the store needs (AOF, fsync on every write), polled until it answers.
// gym up --replicas and the failover tests start it the same way.
package valkeyserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// ErrNotInstalled is returned when neither valkey-server nor redis-server
// is on PATH.
var ErrNotInstalled = errors.New("valkeyserver: neither valkey-server nor redis-server is installed (apt-get install redis-server)")

// Binary finds valkey-server or redis-server.
func Binary() (string, error) {
	for _, name := range []string{"valkey-server", "redis-server"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNotInstalled
}

// Args are the server's arguments: listen on bind:port, data and log
// (server.log) in dir, AOF with an fsync on every write, no RDB
// snapshots, in the foreground. A bind address other than loopback turns
// protected mode off (the test beds' servers on a bridge have no
// password).
func Args(port int, bind, dir string) []string {
	args := []string{"--port", strconv.Itoa(port), "--bind", bind, "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
		"--logfile", filepath.Join(dir, "server.log")}
	if bind != "127.0.0.1" {
		args = append(args, "--protected-mode", "no")
	}
	return args
}

// Server is a running server.
type Server struct {
	Port int
	Dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Start starts a server with its data in dir and waits (polling, at most
// 10 s or ctx) until it answers PING.
func Start(ctx context.Context, dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{Port: port, Dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command(bin, Args(port, "127.0.0.1", dir)...)
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(port) {
			return s, nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return nil, fmt.Errorf("valkeyserver: %s exited: %s", bin, log)
		case <-ctx.Done():
			s.Kill()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Kill()
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return nil, fmt.Errorf("valkeyserver: %s did not answer in 10 s: %s", bin, log)
		}
	}
}

func ping(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	c.Write([]byte("PING\r\n"))
	buf := make([]byte, 16)
	c.SetReadDeadline(time.Now().Add(time.Second))
	n, _ := c.Read(buf)
	return string(buf[:n]) == "+PONG\r\n"
}

// Kill stops the server with SIGKILL and waits for it.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	}
}
