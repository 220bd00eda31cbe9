#!/usr/bin/env bash
# Builds kubo (the IPFS node the pinning and interop tests run) from source,
# once, into the user cache directory, outside this repository:
#   ${XDG_CACHE_HOME:-~/.cache}/zoo-gym/kubo-v0.43.1/ipfs
# (internal/kubotest finds it there). kubo v0.43.1 cannot be `go install`ed:
# its go.mod replaces go-libp2p by a fork that is not on the module proxy,
# so the replace is dropped and quic-go/webtransport-go are pinned to the
# versions upstream go-libp2p was released with (docs/artifacts.md). It
# takes minutes of CPU (hundreds of packages); later runs find it built.
set -euo pipefail
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
version=v0.43.1
out="${XDG_CACHE_HOME:-$HOME/.cache}/zoo-gym/kubo-$version"
if [ -x "$out/ipfs" ] && "$out/ipfs" version 2>/dev/null | grep -q "${version#v}"; then
  exit 0
fi
echo "building kubo $version into $out (once; minutes)" >&2
start=$(date +%s)
src=$(GOFLAGS= go mod download -json "github.com/ipfs/kubo@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src" "$work/kubo" && chmod -R u+w "$work/kubo"
cd "$work/kubo"
sed -i '/^replace github.com\/libp2p\/go-libp2p =>/d; s#quic-go/quic-go v0.62.0#quic-go/quic-go v0.60.0#; s#quic-go/webtransport-go v0.13.0#quic-go/webtransport-go v0.11.1#' go.mod
mkdir -p "$out"
GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$out/ipfs.tmp" ./cmd/ipfs
mv "$out/ipfs.tmp" "$out/ipfs"
echo "built kubo $version in $(( $(date +%s) - start )) s" >&2
