// Compiles src/*.sol with the pinned solc-js (package-lock.json) and writes
// <Contract>.abi (JSON) and <Contract>.bin (hex creation bytecode) into the
// output directory (argument 1, default build/). Byte-for-byte reproducible:
// sources are read in sorted order, imports resolve only under
// node_modules/, and the settings below are fixed.
"use strict";
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const root = __dirname;
const out = path.resolve(process.argv[2] || path.join(root, "build"));
const contracts = ["GYMToken", "MiningPool", "PublicationRegistry"];

const sources = {};
for (const f of fs.readdirSync(path.join(root, "src")).sort()) {
  if (f.endsWith(".sol")) {
    sources["src/" + f] = { content: fs.readFileSync(path.join(root, "src", f), "utf8") };
  }
}

function findImports(p) {
  if (!p.startsWith("@openzeppelin/contracts/") || p.includes("..")) {
    return { error: "import outside @openzeppelin/contracts: " + p };
  }
  try {
    return { contents: fs.readFileSync(path.join(root, "node_modules", p), "utf8") };
  } catch (e) {
    return { error: String(e) };
  }
}

const input = {
  language: "Solidity",
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: "cancun",
    viaIR: false,
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
  },
};

const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
let failed = false;
for (const e of output.errors || []) {
  if (e.severity === "error") failed = true;
  process.stderr.write(e.formattedMessage + "\n");
}
if (failed) process.exit(1);

fs.mkdirSync(out, { recursive: true });
for (const name of contracts) {
  const c = output.contracts["src/" + name + ".sol"][name];
  fs.writeFileSync(path.join(out, name + ".abi"), JSON.stringify(c.abi, null, 1) + "\n");
  fs.writeFileSync(path.join(out, name + ".bin"), c.evm.bytecode.object + "\n");
}
process.stdout.write("solc " + solc.version() + ": " + contracts.join(", ") + " → " + out + "\n");
