// Reference side of the tokenizer parity test: encodes a text file with @huggingface/tokenizers.
//   node reference.mjs NPM_DIR CORPUS OUT_DIR NAME=TOKENIZER_DIR [NAME=DIR ...] [--max-bytes=N]
// Per tokenizer writes OUT_DIR/NAME.ids (int32 little endian, add_special_tokens: true),
// NAME.decoded.txt (decode, skip_special_tokens: false) and NAME.skipped.txt (skip: true).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [npmDir, corpusPath, outDir, ...rest] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(path.join(npmDir, "@huggingface/tokenizers/dist/tokenizers.mjs")));
let text = fs.readFileSync(corpusPath, "utf8");
const maxArg = rest.find((a) => a.startsWith("--max-bytes="));
if (maxArg) {
  const buf = Buffer.from(text);
  let n = Math.min(buf.length, Number(maxArg.split("=")[1]));
  while (n > 0 && (buf[n] & 0xc0) === 0x80) n--;
  text = buf.toString("utf8", 0, n);
}
for (const spec of rest.filter((a) => !a.startsWith("--"))) {
  const [name, dir] = spec.split("=");
  const tj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const cfgPath = path.join(dir, "tokenizer_config.json");
  const cfg = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
  const tok = new Tokenizer(tj, cfg);
  const t0 = performance.now();
  const ids = tok.encode(text, { add_special_tokens: true }).ids;
  const t1 = performance.now();
  fs.writeFileSync(path.join(outDir, `${name}.ids`), Buffer.from(Int32Array.from(ids).buffer));
  fs.writeFileSync(path.join(outDir, `${name}.decoded.txt`), tok.decode(ids, { skip_special_tokens: false }));
  fs.writeFileSync(path.join(outDir, `${name}.skipped.txt`), tok.decode(ids, { skip_special_tokens: true }));
  const mb = Buffer.byteLength(text) / 1e6;
  console.log(`${name}: ${ids.length} ids, encode ${(t1 - t0).toFixed(0)} ms (${(mb / ((t1 - t0) / 1000)).toFixed(2)} MB/s)`);
}
