#!/usr/bin/env bash
# Rebuilds the chain contracts: compiles chain/contracts/src/*.sol with the solc-js
# and OpenZeppelin versions pinned in chain/contracts/package-lock.json, writes the
# ABI and bytecode to chain/contracts/build/, and generates the Go bindings
# (chain/contracts/*_bind.go) with go-ethereum's abigen at the version go.mod pins.
#
#   scripts/build-contracts.sh          rebuild in place
#   scripts/build-contracts.sh DIR      write DIR/build/* and DIR/*_bind.go
#                                       instead (contracts.TestReproducible)
#
# Needs node and npm; the first run installs chain/contracts/node_modules (npm ci).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"

out=${1:-chain/contracts}
out=$(mkdir -p "$out" && cd "$out" && pwd)

if [ ! -d chain/contracts/node_modules/solc ] || [ chain/contracts/package-lock.json -nt chain/contracts/node_modules/.package-lock.json ]; then
  (cd chain/contracts && npm ci --no-audit --no-fund --silent)
fi
node chain/contracts/compile.js "$out/build" >&2

geth=$(go list -m -f '{{.Version}}' github.com/ethereum/go-ethereum)
for c in GYMToken MiningPool PublicationRegistry; do
  lower=$(echo "$c" | tr 'A-Z' 'a-z')
  go run "github.com/ethereum/go-ethereum/cmd/abigen@$geth" \
    --abi "$out/build/$c.abi" --bin "$out/build/$c.bin" \
    --pkg contracts --type "$c" --out "$out/${lower}_bind.go"
done
