// Gives the browser's files of a build their content's hash in their names, as
// cargo-leptos' hash-files does (`<name>.<hash>.<ext>`, the hash being the file's MD5 in
// unpadded base64url), and prints the hash.txt that says which (src/assets.rs; Leptos
// reads the same file to name them in each page).
//
// usage: node scripts/lib/name-files.js PKG_DIR NAME
//
// Besides NAME.js, NAME.wasm and NAME.css, a split build (scripts/build runs
// standmeet-wasm-split) has a loader, __wasm_split.js, a chunk of wasm per page and per
// piece the pages share, and __wasm_split_manifest.json. The names refer to one another:
// NAME.js imports the loader, the loader imports NAME.js back and fetches the chunks by
// name, and the manifest lists the chunks by name. So the chunks are named first, then
// the loader (its hash taken before NAME.js's name is written into it, which breaks the
// circle), then NAME.js, whose name the loader then gets.
"use strict";
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");

const [pkg, name] = process.argv.slice(2);
if (!pkg || !name) {
  process.stderr.write("usage: node scripts/lib/name-files.js PKG_DIR NAME\n");
  process.exit(2);
}

const at = (file) => path.join(pkg, file);
const hashOf = (bytes) => crypto.createHash("md5").update(bytes).digest("base64url");
const fail = (message) => {
  process.stderr.write(`name-files: ${message}\n`);
  process.exit(1);
};
// Replaces `from` in `text`, which must hold it: a name not found means the files do not
// refer to each other as this script expects (another wasm-bindgen or split tool).
const replaceAll = (text, from, to, where) => {
  if (!text.includes(from)) fail(`${where} does not mention ${from}`);
  return text.split(from).join(to);
};

const lines = [];
const loaderFile = "__wasm_split.js";
let loader = null;
let loaderName = null;

if (fs.existsSync(at(loaderFile))) {
  loader = fs.readFileSync(at(loaderFile), "utf8");
  const manifestFile = "__wasm_split_manifest.json";
  const manifest = JSON.parse(fs.readFileSync(at(manifestFile), "utf8"));
  const chunkNames = new Map();
  for (const file of fs.readdirSync(pkg).sort()) {
    if (!file.endsWith(".wasm") || file === `${name}.wasm`) continue;
    const stem = file.slice(0, -".wasm".length);
    const named = `${stem}.${hashOf(fs.readFileSync(at(file)))}`;
    fs.renameSync(at(file), at(`${named}.wasm`));
    chunkNames.set(stem, named);
    loader = replaceAll(loader, `"./${stem}.wasm"`, `"./${named}.wasm"`, loaderFile);
    lines.push(`chunk: ${named}`);
  }
  for (const [split, stems] of Object.entries(manifest)) {
    manifest[split] = stems.map(
      (stem) => chunkNames.get(stem) ?? fail(`the manifest names ${stem}.wasm, which is not there`),
    );
  }
  const manifestText = JSON.stringify(manifest, null, 2);
  const manifestHash = hashOf(manifestText);
  fs.writeFileSync(at(`__wasm_split_manifest.${manifestHash}.json`), manifestText);
  fs.unlinkSync(at(manifestFile));
  lines.push(`manifest: ${manifestHash}`);

  const loaderHash = hashOf(loader);
  loaderName = `__wasm_split.${loaderHash}.js`;
  fs.unlinkSync(at(loaderFile));
  lines.push(`split: ${loaderHash}`);

  // Only where NAME.js imports it: the keys of the wasm's imports keep the plain name,
  // which is the name the wasm itself asks for.
  const glue = fs.readFileSync(at(`${name}.js`), "utf8");
  fs.writeFileSync(
    at(`${name}.js`),
    replaceAll(glue, `from "./${loaderFile}"`, `from "./${loaderName}"`, `${name}.js`),
  );
}

for (const kind of ["js", "wasm", "css"]) {
  const file = `${name}.${kind}`;
  const hash = hashOf(fs.readFileSync(at(file)));
  fs.renameSync(at(file), at(`${name}.${hash}.${kind}`));
  lines.push(`${kind}: ${hash}`);
  if (kind === "js" && loader !== null) {
    loader = replaceAll(loader, `"./${file}"`, `"./${name}.${hash}.js"`, loaderFile);
  }
}
if (loader !== null) fs.writeFileSync(at(loaderName), loader);

process.stdout.write(lines.join("\n") + "\n");
