#!/usr/bin/env bash
# Builds geth (go-ethereum's node; the chain integration test runs it in
# --dev mode on loopback) from the Go module proxy, at the go-ethereum
# version go.mod pins, once, into the user cache directory:
#   ${XDG_CACHE_HOME:-~/.cache}/zoo-gym/geth-<version>/geth
# (chain/chaintest finds it there). Minutes of CPU the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
version=$(go list -m -f '{{.Version}}' github.com/ethereum/go-ethereum)
out="${XDG_CACHE_HOME:-$HOME/.cache}/zoo-gym/geth-$version"
# The version's output is read whole before it is searched: with pipefail,
# grep -q leaving early would make geth die of SIGPIPE and the check fail.
if [ -x "$out/geth" ] && have=$("$out/geth" version 2>/dev/null) && grep -q "${version#v}" <<<"$have"; then
  exit 0
fi
echo "building geth $version into $out (once; minutes)" >&2
start=$(date +%s)
mkdir -p "$out"
(cd "$(mktemp -d)" && GOFLAGS= GOBIN="$out" go install -trimpath "github.com/ethereum/go-ethereum/cmd/geth@$version")
echo "built geth $version in $(( $(date +%s) - start )) s" >&2
