// Writes a brotli (`.br`) and a gzip (`.gz`) copy beside each file named on the
// command line, for the server to send as they are (src/assets.rs): compressing the
// wasm once here, rather than on each request, is what lets a browser download a
// quarter of its size without the server spending a core on it.
//
// usage: node scripts/lib/precompress.js [--best] FILE...
// --best: the highest levels (brotli 11, gzip 9), for the release build; without it,
// levels that take a fraction of a second on a debug build's larger wasm.
"use strict";
const fs = require("fs");
const zlib = require("zlib");

const args = process.argv.slice(2);
const best = args[0] === "--best";
const files = best ? args.slice(1) : args;

for (const file of files) {
  const bytes = fs.readFileSync(file);
  const brotli = zlib.brotliCompressSync(bytes, {
    params: {
      [zlib.constants.BROTLI_PARAM_QUALITY]: best ? 11 : 5,
      [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length,
      [zlib.constants.BROTLI_PARAM_MODE]: file.endsWith(".wasm")
        ? zlib.constants.BROTLI_MODE_GENERIC
        : zlib.constants.BROTLI_MODE_TEXT,
    },
  });
  const gzip = zlib.gzipSync(bytes, { level: best ? 9 : 6 });
  fs.writeFileSync(`${file}.br`, brotli);
  fs.writeFileSync(`${file}.gz`, gzip);
  process.stderr.write(
    `${file}: ${bytes.length} bytes, ${brotli.length} with brotli, ${gzip.length} with gzip\n`,
  );
}
