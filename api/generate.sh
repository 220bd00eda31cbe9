#!/bin/sh
# Regenerates the Go code for api/. Pinned generators:
#   protoc              libprotoc 3.21.12 (Debian bookworm: apt-get install protobuf-compiler)
#   protoc-gen-go       go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   protoc-gen-go-grpc  go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
set -eu
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"
protoc --proto_path=. \
  --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  api/hanzod/v1/hanzod.proto
