#!/usr/bin/env python3
"""Compare two sparkctl-logits-v1 dumps (scripts/hf_reference.py or `sparkctl generate --dump-logits`).

Prints max relative error of the last-position logits (over the top-64 and the strided sample, relative
to max |logit| of the reference), the greedy tokens' agreement, and exits 1 when either misses:
  compare_logits.py REF.json OURS.json [--tol 1e-3]
"""
import json
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    tol = 1e-3
    if "--tol" in sys.argv:
        tol = float(sys.argv[sys.argv.index("--tol") + 1])
        args = [a for a in args if a != str(sys.argv[sys.argv.index("--tol") + 1])]
    ref, ours = (json.load(open(p)) for p in args[:2])
    r, o = ref["last_logits"], ours["last_logits"]
    scale = max(r["max_abs"], 1e-30)
    err = max(abs(a - b) for a, b in zip(r["strided"], o["strided"])) / scale
    # top-k of the reference, looked up in ours through its own top-k where present
    oid = dict(zip(o["top_k"]["ids"], o["top_k"]["values"]))
    shared = [(v, oid[i]) for i, v in zip(r["top_k"]["ids"], r["top_k"]["values"]) if i in oid]
    err_top = max((abs(a - b) for a, b in shared), default=float("inf")) / scale
    n = min(len(ref["tokens"]), len(ours["tokens"]))
    first_diff = next((i for i in range(n) if ref["tokens"][i] != ours["tokens"][i]), None)
    same = first_diff is None and len(ref["tokens"]) == len(ours["tokens"])
    ok = max(err, err_top) <= tol and same
    print(f"{ours.get('model', '?'):10s} strided max rel err {err:.2e}  top-64 max rel err {err_top:.2e} "
          f"({len(shared)}/64 shared)  tokens {'equal' if same else f'differ at {first_diff}'} "
          f"({len(ours['tokens'])} vs {len(ref['tokens'])})  {'OK' if ok else 'MISS'} (tol {tol:g})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
