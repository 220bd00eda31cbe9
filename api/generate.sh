#!/bin/sh
# Regenerates the Go and Python code for api/. Pinned generators:
#   protoc              libprotoc 3.21.12 (Debian bookworm: apt-get install protobuf-compiler)
#   protoc-gen-go       go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   protoc-gen-go-grpc  go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
#   grpcio-tools        pip install grpcio-tools==1.85.1 (Python stubs of the trainer seam;
#                       its bundled protoc; PYTHON names the interpreter that has it)
set -eu
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"
for p in api/hanzod/v1/hanzod.proto api/trainer/v1/trainer.proto; do
  protoc --proto_path=. \
    --go_out=. --go_opt=paths=source_relative \
    --go-grpc_out=. --go-grpc_opt=paths=source_relative \
    "$p"
done

PYTHON=${PYTHON:-python3}
want=1.85.1
have=$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("grpcio-tools"))')
if [ "$have" != "$want" ]; then
  echo "api/generate.sh: $PYTHON has grpcio-tools $have, want $want" >&2
  exit 1
fi
out=python/gym_protocol/_proto
"$PYTHON" -m grpc_tools.protoc --proto_path=api/trainer/v1 \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" trainer.proto
# The generated service module imports its messages as a top-level module;
# inside the package it is a sibling.
sed -i 's/^import trainer_pb2 as trainer__pb2$/from . import trainer_pb2 as trainer__pb2/' "$out/trainer_pb2_grpc.py"
