#!/usr/bin/env bash
# Builds the hanzod and gym images from this checkout without pulling
# anything: scripts/release.sh builds the static binaries, they go into
# dist/image/ with the host's CA certificates, and deploy/Dockerfile is
# built with --build-arg BINARIES=prebuilt (its final stages are FROM
# scratch). With network access, `docker build -f deploy/Dockerfile .`
# builds them from source in a Go image instead.
#
#   scripts/image.sh            # docker, else podman; tags zoo-gym/hanzod:VERSION, zoo-gym/gym:VERSION (and :latest)
#
# Environment: ENGINE (docker or podman), ARCH (default the host's).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
engine=${ENGINE:-$(command -v docker >/dev/null && docker info >/dev/null 2>&1 && echo docker || echo podman)}
arch=${ARCH:-$(go env GOARCH)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
OUT=$out ARCHES=$arch scripts/release.sh >/dev/null
rm -rf dist/image && mkdir -p dist/image/data
cp "$out/hanzod-linux-$arch" dist/image/hanzod
cp "$out/gym-linux-$arch" dist/image/gym
cp /etc/ssl/certs/ca-certificates.crt dist/image/
version=$(git describe --tags --always --dirty --match 'v*' 2>/dev/null || echo devel)
# podman writes OCI images by default, which have no HEALTHCHECK.
format=()
[ "$engine" = podman ] && format=(--format docker)
for target in hanzod gym; do
  "$engine" build -q "${format[@]}" -f deploy/Dockerfile --build-arg BINARIES=prebuilt --build-arg "TARGETARCH=$arch" --target "$target" \
    -t "zoo-gym/$target:$version" -t "zoo-gym/$target:latest" .
done
echo "zoo-gym/hanzod:$version zoo-gym/gym:$version"
