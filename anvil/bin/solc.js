#!/usr/bin/env node
// A native-style `solc` front for solc-js (the official compiler built to
// WebAssembly), so that ape-solidity (py-solc-x) and forge can use it offline.
// Answers `--version` in the native format and `--standard-json` (stdin → stdout),
// resolving imports under --base-path / --include-path / --allow-paths.
'use strict';
const fs = require('fs');
const path = require('path');
const solc = require('solc');

const args = process.argv.slice(2);
const version = solc.version(); // e.g. 0.8.28+commit.7893614a.Emscripten.clang

if (args.includes('--version') || args.includes('-v')) {
  const native = version.replace(/\.Emscripten\.clang$/, '.Linux.g++');
  process.stdout.write(`solc, the solidity compiler commandline interface\nVersion: ${native}\n`);
  process.exit(0);
}

if (!args.includes('--standard-json')) {
  process.stderr.write('solc-js front: only --version and --standard-json are supported\n');
  process.exit(2);
}

function collect(flag) {
  const out = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === flag && i + 1 < args.length) out.push(...args[i + 1].split(','));
    else if (args[i].startsWith(flag + '=')) out.push(...args[i].slice(flag.length + 1).split(','));
  }
  return out.filter(Boolean);
}

const roots = [process.cwd(), ...collect('--base-path'), ...collect('--include-path'), ...collect('--allow-paths')];

function findImports(importPath) {
  const candidates = path.isAbsolute(importPath)
    ? [importPath]
    : roots.map((r) => path.resolve(r, importPath));
  for (const candidate of candidates) {
    try {
      if (fs.statSync(candidate).isFile()) return { contents: fs.readFileSync(candidate, 'utf8') };
    } catch (_) { /* try the next root */ }
  }
  return { error: `File not found: ${importPath} (searched ${roots.join(', ')})` };
}

const input = fs.readFileSync(0, 'utf8');
process.stdout.write(solc.compile(input, { import: findImports }));
