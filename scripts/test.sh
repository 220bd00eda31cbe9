#!/usr/bin/env bash
# Installs what the tests need (Debian packages; idempotent and quick when they
# are present) and runs the whole suite: vet, unit and integration tests, the
# race detector on the concurrent packages, and a bounded fuzzing pass over
# every parser.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

# python3-*: the delta format's reference writer and verifier (compatibility
# tests), and torch for loading checkpoints as PEFT does (peft's Python
# test); openssl: key interoperability; redis-server: the Valkey store's tests.
# iproute2 and iptables: the network-namespace test beds (below).
packages=(python3-nacl python3-lz4 python3-zstandard python3-numpy python3-torch python3-venv openssl redis-server iproute2 iptables)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm: the chain contracts' compiler (solc-js, contracts.TestReproducible).
# By command, not package: a NodeSource nodejs carries npm and conflicts with
# Debian's npm package.
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if ((${#missing[@]})); then
  echo "installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Python environment of the reference implementations (transformers,
# PEFT, tokenizers, torch from PyPI): .venv, refilled when
# python/requirements-test.txt changes. The first run downloads about 3 GB.
venv=.venv
stamp="$venv/.requirements.sha256"
want=$(sha256sum python/requirements-test.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "filling $venv from python/requirements-test.txt (once; a few minutes)" >&2
  python=$(command -v python3.11 || command -v python3)
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r python/requirements-test.txt
  echo "$want" > "$stamp"
fi
# This checkout's gym_protocol package, editable (so tests import the code
# under test), without dependencies: the pins above are its dependencies,
# and pip check proves they satisfy python/pyproject.toml's ranges.
if ! "$venv/bin/python" -c 'import gym_protocol, pathlib, sys; sys.exit(pathlib.Path(gym_protocol.__file__).resolve().parents[1] != pathlib.Path("python").resolve())' 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -e ./python
fi
"$venv/bin/pip" check --disable-pip-version-check
export GYM_PYTHON="$PWD/$venv/bin/python"

# Tests that need Python or redis-server fail instead of skipping when it is
# missing here.
export GYM_REQUIRE_PYTHON=1 GYM_REQUIRE_REDIS=1

# The pinned solc-js and OpenZeppelin (chain/contracts/package-lock.json), and
# abigen in the module cache, so that contracts.TestReproducible rebuilds the
# contracts without the network; it fails instead of skipping without node.
if [ ! -d chain/contracts/node_modules/solc ] || [ chain/contracts/package-lock.json -nt chain/contracts/node_modules/.package-lock.json ]; then
  (cd chain/contracts && npm ci --no-audit --no-fund --silent)
fi
go run "github.com/ethereum/go-ethereum/cmd/abigen@$(go list -m -f '{{.Version}}' github.com/ethereum/go-ethereum)" --help >/dev/null 2>&1 || true
export GYM_REQUIRE_NODE=1

# kubo, the IPFS node the pinning (localcluster TestPinsOnKubo) and interop
# (artifact TestInteropWithKubo) tests run: built from source once into the
# user cache (several minutes the first time, nothing after). GYM_SKIP_KUBO=1
# skips building it and lets those tests skip; otherwise they must run.
# geth, the dev chain of the chain integration test (daemon
# TestChainLedgerOnGeth), built from the module proxy once into the user
# cache; GYM_SKIP_GETH=1 skips building it and lets that test skip.
if [ -z "${GYM_SKIP_GETH:-}" ]; then
  scripts/build-geth.sh
  export GYM_REQUIRE_GETH=1
fi

if [ -z "${GYM_SKIP_KUBO:-}" ]; then
  scripts/build-kubo.sh
  export GYM_REQUIRE_KUBO=1
fi

go vet ./...
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  unformatted=$(git ls-files -z '*.go' | xargs -0 gofmt -l)
  [ -z "$unformatted" ] || { echo "not gofmt'd (run gofmt -w): $unformatted" >&2; exit 1; }
fi
# -timeout is a hang guard, not a speed check: on a 2-core machine shared with
# other work a package such as llama or cmd/gym can take past go test's
# default 10 minutes without anything being wrong.
go test -count=1 -timeout 75m ./...
# The tests across network namespaces (several hosts on one machine:
# failover with the leader's link cut, a job submitted and its checkpoint
# fetched from another host, the ring and the artifact transfer over
# veth links), where namespaces work: as root with ip(8). ringbench's
# loss and delay calibrations count datagrams and stay out (a loaded
# machine drops some in the kernel): run them with GYM_NETNS=1 by hand.
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && ip netns list >/dev/null 2>&1; then
  GYM_NETNS=1 go test -count=1 -timeout 30m -run 'Netns' ./cmd/gym ./protocol/ring/tcp ./artifact/transfer
else
  echo "network-namespace tests skipped: they need root and ip(8)" >&2
fi
# The deployment files' checks (their own module: Kubernetes, compose,
# BuildKit and kustomize libraries stay out of gym's build).
(cd deploy && go vet ./... && go test -count=1 ./...)
# Images and containers, where a container runtime works (root, podman or
# docker; about 2 minutes): build both images without a registry and run
# hanzod and three workers as containers until a job publishes; three
# hanzod containers over one store fail over.
if [ -n "${GYM_CONTAINERS:-}" ]; then
  scripts/image.sh && scripts/container-e2e.sh && scripts/container-replicas.sh
fi
# The Python suite: gym's tools against the reference implementations.
"$GYM_PYTHON" -m pytest -q python
# The race detector on the concurrent packages, -short: there one end-to-end
# run (worker.TestRingOfThree) stands for the whole system and the judge's
# epoch replays are left to the run above (under the detector they are
# arithmetic ten times slower and took 40 minutes together).
go test -count=1 -timeout 40m -race -short ./protocol/delta ./keys/nodekey ./protocol/ring/... ./orchestrator/engine ./orchestrator/judge ./artifact/transfer ./node/worker ./protocol/merge
# The engine's portable kernels (what machines without AVX-512 run) against
# the documented summation orders, and builds for arm64 and GOAMD64=v3
# (where Go would fuse an unconverted x*y+z); TestHalfBase: a BF16/F16 base
# kept 16-bit gives its float32 reading's bits there too.
go test -count=1 -tags purego -run 'TestKernelsBitExact|TestModelSIMDMatchesGo|TestFMA32|TestCacheAndThreadsEveryArch|TestHalfBase' ./model/llama
GOAMD64=v3 go test -count=1 -run 'TestKernelsBitExact|TestModelSIMDMatchesGo|TestFMA32|TestHalfBase' ./model/llama
GOARCH=arm64 go vet ./model/llama
GOOS=windows go vet ./model/llama

# Fuzz every parser for a fixed number of executions (bounded time; a crash
# fails the run and leaves its input under the package's testdata/fuzz/).
fuzz=(
  "./protocol/delta FuzzRead 20000"
  "./model/dataset FuzzReadJSONL 20000"
  "./model/dataset FuzzReadParquet 5000"
  "./protocol/delta FuzzReadResigned 20000"
  "./protocol/delta FuzzReadHead 20000"
  "./protocol/evalpkg FuzzParseInfo 20000"
  "./protocol/evalpkg FuzzParseResults 20000"
  "./model/safetensors FuzzParse 50000"
  "./protocol/jobconf FuzzResumeOuter 20000"
  "./protocol/ring FuzzDecodeFrame 50000"
  "./protocol/ring FuzzOpenEvidence 50000"
  "./artifact FuzzReadCAR 20000"
  "./artifact FuzzWalkBlock 20000"
  "./artifact FuzzParseSigned 20000"
  "./artifact/transfer FuzzParseAuthorization 20000"
  "./orchestrator/blob FuzzName 20000"
  "./artifact/transfer FuzzParsePeer 20000"
  "./orchestrator/state FuzzDecodeEvent 20000"
  "./orchestrator/state FuzzRestore 5000"
  "./chain FuzzDecodeLog 20000"
  "./chain FuzzDecodeRevertData 20000"
  "./chain FuzzParseAddresses 20000"
  "./orchestrator/chainsync FuzzParseAccounts 20000"
  "./protocol/jobspec FuzzParseJobFile 20000"
  "./protocol/jobspec FuzzParseSlot 20000"
  "./protocol/jobspec FuzzModelCID 20000"
  "./model/llama FuzzParseConfig 20000"
  "./model/llama FuzzParseAdapterConfig 20000"
  "./model/peft FuzzParseConfig 20000"
  "./protocol/jobconf FuzzDecodeAny 20000"
  "./node/backend/torch FuzzReadTraces 5000"
  "./protocol/trace FuzzRead 10000"
  "./protocol/trace FuzzReadBundle 5000"
  "./protocol/trace FuzzReadParquet 3000"
  "./protocol/checkpkg FuzzReadInfo 5000"
  "./model/envserver FuzzParse 20000"
  "./model/tokenizer FuzzParse 5000"
  "./model/tokenizer FuzzEncode 10000"
  "./model/chat FuzzRender 10000"
  "./model/chat FuzzCompile 10000"
  "./model/toolcall FuzzParse 20000"
  "./model/episode FuzzReadJSONL 10000"
  "./orchestrator/judge FuzzSubmit 3000"
  "./orchestrator/server FuzzSubmitJob 5000"
  "./keys/release FuzzParseSums 20000"
  "./keys/release FuzzParseSig 20000"
)
for f in "${fuzz[@]}"; do
  set -- $f
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$3x" "$1"
done
