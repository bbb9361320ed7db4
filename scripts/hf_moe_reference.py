#!/usr/bin/env python3
"""sparkctl's mixture-of-experts models against Hugging Face transformers, on checkpoints that
transformers itself writes.

For each family (qwen3_moe, qwen2_moe, mixtral, deepseek_v3) this builds a tiny model of the deployment shape from
transformers' own config class (dense-first layers, a gated shared expert, top-k routing), gives it random
weights with decisive routing (fixed seed), saves it with save_pretrained in float32 (whatever layout
this transformers version writes: one 2-D tensor per expert, or fused 3-D experts), reloads it with
from_pretrained, and records the last-position logits of a fixed prompt and 32 greedy tokens (fp32, eager
attention, TF32 off). Then it runs `sparkctl generate --backend cpu` on the same directory and prints
one line per model:

  qwen3_moe: layout per-expert, max rel err 3.1e-07 (tol 1e-04), tokens 32/32 equal: PASS

The vocabulary is 512 so the dump's strided sample is the whole logits row (the error is over every
logit, relative to max |logit| of HF). Exit code 0 when every model passes, 1 otherwise.

  python3 scripts/hf_moe_reference.py --sparkctl build/bin/sparkctl [--only qwen2_moe,mixtral]
Split runs (HF where torch is, sparkctl elsewhere, same --work directory):
  python3 scripts/hf_moe_reference.py --hf-only --work DIR       # checkpoints + hf.json per model
  python3 scripts/hf_moe_reference.py --compare-only --work DIR  # sparkctl against the saved hf.json
"""
import argparse
import json
import os
import subprocess
import sys

VOCAB = 512
PROMPT_IDS = [17, 301, 5, 499, 128, 64, 2, 77, 413, 250, 9]


def family_configs():
    """name -> (config class name, kwargs). Shapes follow the deployment models, scaled down."""
    common = dict(vocab_size=VOCAB, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=256, tie_word_embeddings=False, hidden_act="silu",
                  bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return {
        # Qwen3-30B-A3B-like: 8 experts top-2 renormalised, q/k norm, layer 1 dense (mlp_only_layers).
        "qwen3_moe": ("Qwen3MoeConfig", dict(common, intermediate_size=128, num_hidden_layers=3,
                                             num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                             norm_topk_prob=True, mlp_only_layers=[1], decoder_sparse_step=1,
                                             rms_norm_eps=1e-6)),
        # Qwen1.5-MoE-like: top-4 without renormalisation, a sigmoid-gated shared expert, q/k/v bias,
        # sparse every second layer (decoder_sparse_step 2).
        "qwen2_moe": ("Qwen2MoeConfig", dict(common, intermediate_size=96, num_hidden_layers=4, num_experts=8,
                                             num_experts_per_tok=4, moe_intermediate_size=32,
                                             shared_expert_intermediate_size=64, norm_topk_prob=False,
                                             decoder_sparse_step=2, rms_norm_eps=1e-6)),
        # Mixtral-8x7B-like: softmax over the top-2 logits.
        "mixtral": ("MixtralConfig", dict(common, intermediate_size=64, num_hidden_layers=2, num_local_experts=4,
                                          num_experts_per_tok=2, rms_norm_eps=1e-5, sliding_window=None)),
        # DeepSeek-V3-like: MLA (q_lora, kv_lora 32 + rope 8 = a 40-value latent cache, interleaved rope, yarn
        # with mscale != mscale_all_dim: build() sets the rope), sigmoid router with a selection bias and 2
        # groups (topk_group 1), a shared expert, layer 0 dense (first_k_dense_replace).
        "deepseek_v3": ("DeepseekV3Config", dict(common, num_key_value_heads=4, intermediate_size=96,
                                                 num_hidden_layers=3, n_routed_experts=8, num_experts_per_tok=2,
                                                 moe_intermediate_size=16, n_shared_experts=1, n_group=2,
                                                 topk_group=1, routed_scaling_factor=2.5, norm_topk_prob=True,
                                                 first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=32,
                                                 qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
                                                 rope_interleave=True, rms_norm_eps=1e-6)),
    }


# deepseek_v3's yarn rope: max_position_embeddings / original = factor, as DeepSeek-V3 ships (40 = 163840 / 4096).
YARN = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=64, beta_fast=32.0, beta_slow=1.0,
            mscale=0.9, mscale_all_dim=0.7)


def load_fp32(cls, path):
    import torch
    try:  # transformers >= 4.56 spells it dtype=, older ones torch_dtype=
        return cls.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        return cls.from_pretrained(path, torch_dtype=torch.float32, attn_implementation="eager")


def build(name, out_dir, seed, theta):
    """Writes the checkpoint with save_pretrained; returns the layout it holds."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    cls_name, kw = family_configs()[name]
    cfg = getattr(transformers, cls_name)(**kw)
    # RoPE base: transformers 5 keeps it in rope_parameters, 4.x in rope_theta (and yarn in rope_scaling).
    if isinstance(getattr(cfg, "rope_parameters", None), dict):
        if name == "deepseek_v3":
            cfg.rope_parameters.update(YARN)
        cfg.rope_parameters["rope_theta"] = theta
    else:
        cfg.rope_theta = theta
        if name == "deepseek_v3":
            cfg.rope_scaling = dict(YARN)
    torch.manual_seed(seed)
    try:
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    except TypeError:
        model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32)
    h = cfg.hidden_size
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname:  # RMSNorm weights around 1, noisy so a missed one shows
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif pname.endswith("shared_expert_gate.weight"):
                p.normal_(0, 1.0 / h ** 0.5)
            elif pname.endswith("mlp.gate.weight") or pname.endswith("block_sparse_moe.gate.weight"):
                p.normal_(0, 2.0 / h ** 0.5)  # decisive routing: top-k margins far above fp32 noise
            elif pname.endswith(".bias"):
                p.normal_(0, 0.1)
            else:  # linear and embedding weights, fan-in scaled (fused experts: last dim is fan-in)
                p.normal_(0, 0.5 / p.shape[-1] ** 0.5)
        for bname, b in model.named_buffers():  # DeepSeek's selection bias is a (saved) buffer
            if bname.endswith("e_score_correction_bias"):
                b.normal_(0, 0.05)
    model.save_pretrained(out_dir, safe_serialization=True)
    from safetensors import safe_open

    names = []
    for f in sorted(os.listdir(out_dir)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(out_dir, f), "pt") as st:
                names += list(st.keys())
    if any(n.endswith("experts.gate_up_proj") for n in names):
        return "fused"
    if any(".experts.0." in n for n in names):
        return "per-expert"
    return "unknown (" + ", ".join(n for n in names if "layers.0." in n) + ")"


def hf_reference(model_dir, n_tokens, device):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    model = load_fp32(AutoModelForCausalLM, model_dir).to(device).eval()
    tokens, gaps = [], []

    def top2_gap(row):  # (top-1 - top-2) / max |logit| at this step: how near a tie the greedy pick is
        v = torch.topk(row, 2).values
        return float((v[0] - v[1]) / row.abs().max().clamp_min(1e-30))

    with torch.no_grad():
        out = model(input_ids=torch.tensor([PROMPT_IDS], device=device), use_cache=True)
        logits = out.logits[0, -1].float().cpu()
        nxt = int(torch.argmax(logits))
        gaps.append(top2_gap(logits))
        for i in range(n_tokens):
            tokens.append(nxt)
            if i == n_tokens - 1:
                break
            out = model(input_ids=torch.tensor([[nxt]], device=device), past_key_values=out.past_key_values,
                        use_cache=True)
            row = out.logits[0, -1].float().cpu()
            nxt = int(torch.argmax(row))
            gaps.append(top2_gap(row))
    return {"source": f"transformers {transformers.__version__} torch {torch.__version__} float32 {device}",
            "logits": [float(x) for x in logits], "tokens": tokens, "gaps": gaps}


def ours(sparkctl, model_dir, n_tokens, threads, backend="cpu"):
    dump = os.path.join(model_dir, f"sparkctl-{backend}.json")
    cmd = [sparkctl, "generate", "--model", model_dir, "--prompt-ids", ",".join(map(str, PROMPT_IDS)),
           "--max-tokens", str(n_tokens), "--temperature", "0", "--ignore-eos", "--backend", backend,
           "--threads", str(threads), "--dump-logits", dump]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        return None, f"sparkctl generate exited {r.returncode}: {r.stderr.strip()[-400:]}"
    with open(dump) as f:
        d = json.load(f)
    ll = d["last_logits"]
    if ll.get("stride") != 1 or len(ll["strided"]) != VOCAB:
        return None, f"dump has stride {ll.get('stride')} over {len(ll['strided'])} values, want every logit"
    return {"logits": ll["strided"], "tokens": d["tokens"]}, ""


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sparkctl", default="build/bin/sparkctl")
    p.add_argument("--work", default="/tmp/sparkctl-hf-moe", help="one checkpoint directory per model here")
    p.add_argument("--only", help="comma-separated subset of " + ",".join(family_configs()))
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--tol", type=float, default=1e-4, help="max |ours - HF| / max |HF| over the logits")
    p.add_argument("--seed", type=int, default=20)
    p.add_argument("--device", default="cpu", help="where HF runs (fp32 either way)")
    p.add_argument("--rope-theta", type=float, default=10000.0,
                   help="RoPE base of every model (transformers 5 writes it as rope_parameters.rope_theta)")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--backend", default="cpu", help="sparkctl's backend (cuda: use --tol 2e-2, bf16 weights)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--hf-only", action="store_true", help="write checkpoints and hf.json, no sparkctl")
    mode.add_argument("--compare-only", action="store_true", help="sparkctl against an earlier --hf-only")
    args = p.parse_args()
    names = list(family_configs())
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        bad = [n for n in names if n not in family_configs()]
        if bad:
            p.error(f"unknown model {bad[0]!r} in --only (known: {', '.join(family_configs())})")
    if not args.hf_only and not os.access(args.sparkctl, os.X_OK):
        p.error(f"--sparkctl {args.sparkctl} is not an executable (build it, or pass the bundle's bin/sparkctl)")

    failed = 0
    for name in names:
        d = os.path.join(args.work, name)
        ref_path = os.path.join(d, "hf.json")
        try:
            if not args.compare_only:
                os.makedirs(d, exist_ok=True)
                layout = build(name, d, args.seed, args.rope_theta)
                ref = hf_reference(d, args.tokens, args.device)
                ref["layout"] = layout
                with open(ref_path, "w") as f:
                    json.dump(ref, f)
            with open(ref_path) as f:
                ref = json.load(f)
        except Exception as e:  # a transformers version without the family, a failed load, ...
            print(f"{name}: HF reference failed: {type(e).__name__}: {e}")
            failed += 1
            continue
        if args.hf_only:
            print(f"{name}: layout {ref['layout']}, HF argmax {max(range(VOCAB), key=ref['logits'].__getitem__)}, "
                  f"tokens {ref['tokens'][:8]}... ({ref['source']})")
            continue
        got, why = ours(args.sparkctl, d, args.tokens, args.threads, args.backend)
        if got is None:
            print(f"{name}: layout {ref['layout']}, FAIL: {why}")
            failed += 1
            continue
        scale = max(max(abs(x) for x in ref["logits"]), 1e-30)
        err = max(abs(a - b) for a, b in zip(ref["logits"], got["logits"])) / scale
        n = len(ref["tokens"])
        equal = next((i for i in range(n) if i >= len(got["tokens"]) or got["tokens"][i] != ref["tokens"][i]), n)
        # A low-precision backend may part from HF where HF's own top two logits are within the tolerance
        # (bf16 rounding reorders a near-tie); after that the sequences differ by construction.
        gaps = ref.get("gaps", [])
        near_tie = args.backend != "cpu" and equal < n and equal < len(gaps) and gaps[equal] <= args.tol
        ok = err <= args.tol and len(got["tokens"]) == n and (equal == n or near_tie)
        failed += 0 if ok else 1
        tie = f" (parted at a near-tie: HF top-2 gap {gaps[equal]:.1e})" if near_tie else ""
        print(f"{name}: layout {ref['layout']}, max rel err {err:.2e} (tol {args.tol:.0e}), "
              f"tokens {equal}/{n} equal{tie}: {'PASS' if ok else 'FAIL'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
