// Builds corpus.txt (>= 1 MB, multilingual) for the tokenizer parity test, deterministically, from
// text that ships on a Debian machine with unicode-data + gettext catalogs and in scripts/npm:
//   node tests/data/tokenizer/build_corpus.mjs [out=tests/data/tokenizer/corpus.txt]
// Sections: English prose (licences, package READMEs), CJK and other scripts (translated strings of
// the system's .mo catalogs), code (npm JS sources, C headers), emoji (ZWJ sequences, skin tones,
// flags, keycaps from emoji-test.txt), synthetic whitespace/digit runs, CRLF and tabs, accented text
// in both NFC and NFD, and chat markers that are added tokens of the reference tokenizers.
// The result is committed; rerun only to change the corpus (same inputs -> same bytes).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");
const out = process.argv[2] ?? path.join(here, "corpus.txt");

let seed = 0x5eed1234;  // mulberry32: deterministic across node versions
const rand = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = (arr) => arr[Math.floor(rand() * arr.length)];
const readIf = (p) => (fs.existsSync(p) ? fs.readFileSync(p, "utf8") : "");
const listDir = (d) => (fs.existsSync(d) ? fs.readdirSync(d).sort() : []);

// Translated strings of a gettext .mo catalog (little-endian, UTF-8 charset only).
function moStrings(file) {
  const b = fs.readFileSync(file);
  if (b.length < 28 || b.readUInt32LE(0) !== 0x950412de) return [];
  const n = b.readUInt32LE(8), tOff = b.readUInt32LE(16);
  const header = b.toString("utf8", b.readUInt32LE(tOff + 4), b.readUInt32LE(tOff + 4) + b.readUInt32LE(tOff));
  if (!/charset=utf-8/i.test(header)) return [];
  const res = [];
  for (let i = 1; i < n; i++) {
    const len = b.readUInt32LE(tOff + 8 * i), off = b.readUInt32LE(tOff + 8 * i + 4);
    for (const s of b.toString("utf8", off, off + len).split("\0")) if (s.length > 3) res.push(s);
  }
  return res;
}
function langText(lang, budget) {
  const dir = `/usr/share/locale/${lang}/LC_MESSAGES`;
  let acc = [], size = 0;
  for (const f of listDir(dir)) {
    if (!f.endsWith(".mo")) continue;
    for (const s of moStrings(path.join(dir, f))) {
      acc.push(s);
      size += Buffer.byteLength(s);
      if (size >= budget) return acc.join("\n");
    }
  }
  return acc.join("\n");
}
const take = (s, n) => {  // first n bytes, cut at a character boundary
  const b = Buffer.from(s);
  if (b.length <= n) return s;
  let e = n;
  while (e > 0 && (b[e] & 0xc0) === 0x80) e--;
  return b.toString("utf8", 0, e);
};

const parts = [];
const add = (name, text) => parts.push(`\n===== ${name} =====\n` + text);

// English prose.
for (const l of ["GPL-3", "Apache-2.0", "MPL-2.0", "LGPL-2.1", "Artistic"])
  add(`licence ${l}`, readIf(`/usr/share/common-licenses/${l}`));
const npm = path.join(root, "scripts/npm/node_modules");
for (const p of ["openai/README.md", "@huggingface/tokenizers/README.md", "@huggingface/jinja/README.md",
  "form-data/README.md", "node-fetch/README.md", "whatwg-url/README.md", "mime-types/README.md"])
  add(`readme ${p}`, take(readIf(path.join(npm, p)), 40000));

// Other scripts: CJK first (the bulk), then a spread of languages.
add("zh_CN", langText("zh_CN", 220000));
add("zh_TW", langText("zh_TW", 90000));
add("ja", langText("ja", 70000));
add("ko", langText("ko", 40000));
for (const l of ["ru", "uk", "el", "ar", "he", "hi", "th", "ta", "ka", "am", "vi", "tr", "pl", "cs"])
  add(l, langText(l, 9000));

// Accented Latin text in NFC and in NFD (the NFC normalizer must fold the second).
const accented = ["fr", "de", "es", "pt_BR", "vi", "hu", "ro", "is"].map((l) => langText(l, 8000)).join("\n");
add("accents NFC", accented.normalize("NFC"));
add("accents NFD", accented.normalize("NFD"));

// Code.
const codeFiles = ["@huggingface/jinja/dist/index.js", "@huggingface/tokenizers/dist/tokenizers.mjs",
  "openai/core.js", "openai/streaming.js", "form-data/lib/form_data.js", "node-fetch/lib/index.js"];
for (const p of codeFiles) add(`code ${p}`, take(readIf(path.join(npm, p)), 45000));
for (const h of ["stdio.h", "stdlib.h", "string.h", "pthread.h", "sched.h", "pcre2.h"])
  add(`code /usr/include/${h}`, take(readIf(`/usr/include/${h}`), 15000));
const pyFiles = ["/usr/lib/python3.11/json/decoder.py", "/usr/lib/python3.11/textwrap.py"];
for (const p of pyFiles) add(`code ${p}`, take(readIf(p), 20000));

// Emoji: every fully-qualified sequence of emoji-test.txt, inside short English frames.
const emoji = [];
for (const line of readIf("/usr/share/unicode/emoji/emoji-test.txt").split("\n")) {
  const m = /^([0-9A-F ]+);\s*fully-qualified/.exec(line);
  if (m) emoji.push(String.fromCodePoint(...m[1].trim().split(/\s+/).map((h) => parseInt(h, 16))));
}
const frames = ["I feel %", "%%% wow", "look: % and %", "%\n", " % ", "(%)", "%,%", "team %‍%", "%🏽", "%\u{fe0f}"];
let em = [];
for (let i = 0; i < emoji.length; i++) em.push(pick(frames).replaceAll("%", () => emoji[(i * 7 + em.length) % emoji.length]));
add("emoji", em.join(" "));

// Whitespace runs, tabs, CRLF, digits, mixed.
const ws = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", "    ", "        ", " \t ", "\u00a0", "\u3000", "\u2003", "\v", "\f", "\u0085"];
let syn = [];
for (let i = 0; i < 9000; i++) {
  const r = rand();
  if (r < 0.3) syn.push(pick(ws).repeat(1 + Math.floor(rand() * 5)));
  else if (r < 0.55) syn.push(String(Math.floor(rand() * 10 ** Math.floor(1 + rand() * 12))));
  else if (r < 0.65) syn.push((rand() * 1e4).toFixed(Math.floor(rand() * 6)));
  else if (r < 0.75) syn.push(pick(["don't", "I'M", "we'LL", "it's", "They've", "you'd", "she'S", "ſ's", "K'd"]));
  else if (r < 0.85) syn.push(pick(["foo_bar", "x+=1;", "#include", "->", "::", "===", "\\n", "/* */", "//", "${x}", "a.b.c"]));
  else syn.push(pick(["hello", "World", "ÜBER", "naïve", "café", "日本語", "中文", "한국어", "😀", "١٢٣", "৩৪", "Ⅻ", "½"]));
}
add("synthetic whitespace/digits", syn.join(""));
const crlf = take(readIf("/usr/share/common-licenses/GPL-2"), 30000).replaceAll("\n", "\r\n").replaceAll("    ", "\t");
add("CRLF + tabs", crlf);

// Added tokens of the reference tokenizers, as a chat would carry them.
const markers = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
  "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|reserved_special_token_7|>",
  "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>", "<|start|>", "<|message|>",
  "<|channel|>", "<|end|>", "<|return|>", "<|im_start", "<|", "|>", "<｜", "<|fim_prefix|>"];
let chat = [];
for (let i = 0; i < 1500; i++) chat.push(pick(markers) + pick(["user\n", "assistant\n", " hi ", "你好", "", " ", "\n"]) + pick(syn));
add("chat markers", chat.join(""));

const text = parts.join("");
fs.writeFileSync(out, text);
console.log(`${out}: ${Buffer.byteLength(text)} bytes, ${emoji.length} emoji`);
