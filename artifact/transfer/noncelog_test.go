package transfer

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An authorization accepted before a restart is refused after it.
func TestReplayAcrossRestart(t *testing.T) {
	a := newNode(t, t.TempDir(), key(1), 0, nil)
	root := seed(t, checkpointDir(t), a)
	logPath := filepath.Join(t.TempDir(), "nonces.log")
	at := now
	serve := func() (*Server, *httptest.Server) {
		s, err := NewServer(ServerConfig{Key: a.key, Store: a.store, Allow: AllowKeys(pub(fetcherKey)), Now: func() time.Time { return at }, NonceLog: logPath})
		must(t, err)
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		return s, srv
	}
	get := func(srv *httptest.Server, auth string) int {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ipfs/"+root.String()+"?format=raw", nil)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	h, err := NewAuthorization(fetcherKey, pub(a.key), root, now, time.Minute)
	must(t, err)
	short, err := NewAuthorization(fetcherKey, pub(a.key), root, now, 5*time.Second)
	must(t, err)
	s1, srv1 := serve()
	if get(srv1, h) != 200 || get(srv1, short) != 200 {
		t.Fatal("first use refused")
	}
	srv1.Close()
	must(t, s1.Close())
	// A torn last line, as a crash mid-write would leave.
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	f.WriteString("0123456789abcdef")
	f.Close()

	at = now.Add(10 * time.Second) // short has expired, h has not
	s2, srv2 := serve()
	defer s2.Close()
	if got := get(srv2, h); got != 403 {
		t.Fatalf("replay after restart: %d", got)
	}
	data, err := os.ReadFile(logPath)
	must(t, err)
	if n := strings.Count(string(data), "\n"); n != 1 {
		t.Fatalf("compacted log has %d lines, want 1 (the live nonce):\n%s", n, data)
	}
	fresh, err := NewAuthorization(fetcherKey, pub(a.key), root, at, time.Minute)
	must(t, err)
	if got := get(srv2, fresh); got != 200 {
		t.Fatalf("fresh authorization after restart: %d", got)
	}
}
