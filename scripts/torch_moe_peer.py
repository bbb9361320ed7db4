#!/usr/bin/env python3
"""Torch peer for the mixture-of-experts decode benchmark (scripts/bench-moe.sh): the same config.json,
run by Hugging Face transformers on the same GPU in bf16 with random weights (routing spreads over the
experts as with ours), timed the way `sparkctl dev bench-model` times decode: a 128-token context, then
N single-token steps per batch size, tokens/s aggregate. One line per (experts implementation, batch).

  python3 scripts/torch_moe_peer.py --config /tmp/spk-qwen3-30b-a3b/config.json --batch 1 8 32

Implementations tried: transformers' `experts_implementation` values where this version has them
(eager loops over the hit experts; grouped_mm uses torch._grouped_mm), each with a static KV cache.
"""
import argparse
import json
import time


def build(cfg_path, impl):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.from_pretrained(cfg_path)
    kwargs = dict(dtype=torch.bfloat16, attn_implementation="sdpa")
    if impl != "default":
        kwargs["experts_implementation"] = impl
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, **kwargs)
    model.eval()
    return model, cfg


def time_decode(model, cfg, batch, context, steps):
    import torch
    from transformers import DynamicCache
    vocab = cfg.vocab_size
    ids = torch.randint(0, vocab, (batch, context), device="cuda")
    with torch.no_grad():
        cache = DynamicCache(config=cfg)
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)
        tok = out.logits[:, -1:].argmax(-1)
        for _ in range(3):  # warm
            out = model(input_ids=tok, past_key_values=cache, use_cache=True)
            tok = out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            out = model(input_ids=tok, past_key_values=cache, use_cache=True)
            tok = out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    return batch * steps / dt, dt / steps * 1e3


def time_prefill(model, cfg, tokens):
    import torch
    ids = torch.randint(0, cfg.vocab_size, (1, tokens), device="cuda")
    with torch.no_grad():
        model(input_ids=ids)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model(input_ids=ids)
        torch.cuda.synchronize()
    return tokens / (time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True, help="config.json (or its directory) of the checkpoint")
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--prefill", type=int, default=1024)
    p.add_argument("--impl", nargs="+", default=["eager", "grouped_mm"])
    a = p.parse_args()
    import torch
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name()}")
    for impl in a.impl:
        try:
            model, cfg = build(a.config, impl)
        except Exception as e:  # an implementation this version lacks
            print(f"peer {impl}: unavailable ({type(e).__name__}: {str(e)[:160]})")
            continue
        for b in a.batch:
            try:
                tps, ms = time_decode(model, cfg, b, a.context, a.steps)
                print(f"peer {impl}: batch {b:3d} decode {tps:9.1f} tok/s ({ms:.2f} ms/step)", flush=True)
            except Exception as e:
                print(f"peer {impl}: batch {b} failed ({type(e).__name__}: {str(e)[:160]})", flush=True)
        try:
            print(f"peer {impl}: prefill {a.prefill} {time_prefill(model, cfg, a.prefill):9.0f} tok/s", flush=True)
        except Exception as e:
            print(f"peer {impl}: prefill failed ({type(e).__name__}: {str(e)[:160]})", flush=True)
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
