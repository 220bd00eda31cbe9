#!/usr/bin/env bash
# Builds a release: static binaries of gym and hanzod for linux/amd64 and
# linux/arm64 (CGO_ENABLED=0, -trimpath, version and commit from git via
# -ldflags), their SHA256SUMS, and SHA256SUMS.sig signed with the release
# key by gym's own signing code (package release). See docs/deploy.md.
#
#   RELEASE_KEY=~/keys/release.key scripts/release.sh      # → dist/VERSION/
#
# Environment: RELEASE_KEY (a gym keygen key; unset: unsigned, with a
# warning), OUT (output directory, default dist/VERSION), ARCHES (default
# "amd64 arm64").
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

version=$(git describe --tags --always --dirty --match 'v*' 2>/dev/null || echo "(devel)")
commit=$(git rev-parse HEAD)
date=$(git show -s --format=%cI HEAD)
out=${OUT:-dist/$version}
arches=${ARCHES:-amd64 arm64}
pkg=github.com/zooai/gym/internal/version
ldflags="-s -w -X $pkg.version=$version -X $pkg.commit=$commit -X $pkg.date=$date"

mkdir -p "$out"
rm -f "$out"/gym-linux-* "$out"/hanzod-linux-* "$out/SHA256SUMS" "$out/SHA256SUMS.sig"
for arch in $arches; do
  for cmd in gym hanzod; do
    CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$out/$cmd-linux-$arch" "./cmd/$cmd"
  done
done
(cd "$out" && sha256sum -- gym-linux-* hanzod-linux-* > SHA256SUMS)

if [ -n "${RELEASE_KEY:-}" ]; then
  host="$out/gym-linux-$(go env GOARCH)"
  [ -x "$host" ] || { host=$(mktemp -d)/gym; go build -o "$host" ./cmd/gym; }
  "$host" release sign --key "$RELEASE_KEY" "$out"
else
  echo "release.sh: RELEASE_KEY is not set: $out/SHA256SUMS is not signed" >&2
fi
echo "$out: $version ($commit)"
