#!/usr/bin/env python3
"""Checks a Hugging Face folder iota-rs exported against transformers (issue 20, item 2).

Usage:
    python3 scripts/check-hf-export.py FOLDER REFERENCE [--tolerance 1e-4]

FOLDER is what `iota-orchestrator export` (or the devnet, as runs/<id>/hf) wrote; REFERENCE the safetensors file
`iota-orchestrator export --reference-out` wrote beside it: token ids `input_ids` [N, T] and iota-rs's
logits `logits` [N, T, V] for them (a network's held-out rows). The script loads FOLDER with
transformers' AutoModelForCausalLM (trust_remote_code for a model with the bottleneck, whose
modeling_iota.py is in the folder), in f32 on the CPU, runs the same ids, and prints the largest
absolute logit difference and both models' mean next-token loss on the rows. Exit status 1 when the
difference exceeds the tolerance.

Needs torch, transformers and safetensors (not part of the project's tests: `pip install torch
transformers safetensors`).
"""

import argparse
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def mean_loss(logits, ids):
    """Mean cross-entropy (nats) of predicting ids[:, 1:] from logits[:, :-1]."""
    v = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, v), ids[:, 1:].reshape(-1)).item()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder")
    p.add_argument("reference")
    p.add_argument("--tolerance", type=float, default=1e-4)
    a = p.parse_args()
    ref = load_file(a.reference)
    ids, want = ref["input_ids"].long(), ref["logits"].float()
    model = AutoModelForCausalLM.from_pretrained(a.folder, trust_remote_code=True).float()
    model.eval()
    with torch.no_grad():
        got = torch.cat([model(input_ids=ids[i : i + 8]).logits for i in range(0, len(ids), 8)])
    if got.shape != want.shape:
        print(f"shape: transformers {tuple(got.shape)}, iota-rs {tuple(want.shape)}")
        return 1
    diff = (got - want).abs().max().item()
    print(f"model: {type(model).__name__}, {sum(x.numel() for x in model.parameters())} parameters")
    print(f"rows: {ids.shape[0]} of {ids.shape[1]} tokens, vocabulary {want.shape[-1]}")
    print(f"max |logit difference|: {diff:.3e} (tolerance {a.tolerance:g})")
    print(f"mean loss: transformers {mean_loss(got, ids):.6f}, iota-rs {mean_loss(want, ids):.6f}")
    return 0 if diff <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
