"""Golden data for the mixture-of-experts op (ml.MoE), from transformers 5.17's DeepseekOcr2TextMoe.

For a spread of configurations (experts 4-16, top-k 1-3, shared experts 0-2, greedy and
group-limited greedy routing, routed scaling factors, widths) the module is built from
DeepseekOcr2TextConfig with its experts on the default path ("grouped_mm", what
PreTrainedModel picks when no experts_implementation is asked for), its weights and the input
rows an integer formula (weight() below; core/internal/ml/cpu/moe_test.go computes the same
values, so no blob is committed), and the file records, per case:

- the routed experts' output alone (DeepseekOcr2TextMoe.experts over the router's picks),
- the shared experts' output (shared_experts(x)) and the whole module's output, which Iris's op
  gives as experts + add with add = the shared output,
- each row's routing (expert ids in descending score, and their weights),
- how far the eager experts path (ascending expert index, index_add_) lands from grouped_mm.

Values are float32 little-endian in base64. Writes core/internal/ml/cpu/testdata/moe.json.
Run with the reference stack: `just golden-moe`. CI never runs it; the output is committed.
"""

import base64
import json
import pathlib

import numpy as np
import torch
import transformers
from transformers.models.deepseek_ocr2.configuration_deepseek_ocr2 import DeepseekOcr2TextConfig
from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import DeepseekOcr2TextMoe

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "core/internal/ml/cpu/testdata/moe.json"

# name, hidden, inter, experts, top_k, shared, groups, top_groups, scale, rows. torch's CPU
# grouped_mm wants row strides of a multiple of 16 bytes: hidden and inter multiples of 4.
CASES = [
    ("greedy_e4_k1", 16, 8, 4, 1, 0, None, None, 1.0, 5),
    ("greedy_e4_k2_shared1", 24, 8, 4, 2, 1, None, None, 1.0, 7),
    ("greedy_e8_k2_shared2_scale", 32, 12, 8, 2, 2, None, None, 2.5, 6),
    ("greedy_e16_k3_shared1", 24, 8, 16, 3, 1, None, None, 1.0, 9),
    ("greedy_e6_k3_odd", 20, 8, 6, 3, 0, None, None, 0.75, 4),
    ("group_e8_k2_g4_t2", 24, 8, 8, 2, 1, 4, 2, 1.0, 8),
    ("group_e16_k3_g4_t2_shared2", 32, 8, 16, 3, 2, 4, 2, 16.0, 7),
    ("group_e12_k1_g3_t1", 16, 12, 12, 1, 1, 3, 1, 1.0, 6),
    ("greedy_e16_k2_one_row", 24, 8, 16, 2, 1, None, None, 1.0, 1),
    # one group kept: a row's second-best expert outside its best group is passed over
    ("group_e8_k2_g2_t1", 24, 8, 8, 2, 1, 2, 1, 1.0, 8),
    ("group_e16_k3_g4_t1_scale", 16, 8, 16, 3, 0, 4, 1, 2.0, 6),
]


def weight(rows, cols, seed, scale):
    """Deterministic values: ((i * 7919 + seed * 104729) mod 2003) / 2003 - 0.5, times scale, in
    float32 (the Go test computes the same formula in float64 and rounds once)."""
    i = np.arange(rows * cols, dtype=np.int64)
    v = ((i * 7919 + seed * 104729) % 2003).astype(np.float64) / 2003.0 - 0.5
    return torch.from_numpy((v * scale).astype(np.float32).reshape(rows, cols))


def b64(t):
    return base64.b64encode(t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()).decode()


def build(hidden, inter, experts, top_k, shared, groups, top_groups, scale, impl):
    cfg = DeepseekOcr2TextConfig(hidden_size=hidden, intermediate_size=2 * hidden, num_attention_heads=2,
                                 n_routed_experts=experts, num_experts_per_tok=top_k, n_shared_experts=shared,
                                 moe_intermediate_size=inter, routed_scaling_factor=scale,
                                 topk_method="group_limited_greedy" if groups else "greedy", n_group=groups,
                                 topk_group=top_groups, mlp_layer_types=["sparse"], num_hidden_layers=1)
    cfg._experts_implementation = impl
    return DeepseekOcr2TextMoe(cfg).eval()


def main():
    torch.set_num_threads(1)
    cases = []
    for k, (name, hidden, inter, experts, top_k, shared, groups, top_groups, scale, rows) in enumerate(CASES):
        seed = 10 * k
        # The router gets larger values than the experts so that its softmax is far from uniform.
        weights = {
            "router": weight(experts, hidden, seed + 1, 2.0),
            "gate_up": weight(experts * 2 * inter, hidden, seed + 2, 0.5),
            "down": weight(experts * hidden, inter, seed + 3, 0.5),
            "shared_gate": weight(shared * inter, hidden, seed + 4, 0.5),
            "shared_up": weight(shared * inter, hidden, seed + 5, 0.5),
            "shared_down": weight(hidden, shared * inter, seed + 6, 0.5),
        }
        x = weight(rows, hidden, seed + 7, 2.0)
        outs = {}
        for impl in ("grouped_mm", "eager"):
            moe = build(hidden, inter, experts, top_k, shared, groups, top_groups, scale, impl)
            with torch.no_grad():
                moe.gate.weight.copy_(weights["router"])
                moe.experts.gate_up_proj.copy_(weights["gate_up"].view(experts, 2 * inter, hidden))
                moe.experts.down_proj.copy_(weights["down"].view(experts, hidden, inter))
                moe.shared_experts.gate_proj.weight.copy_(weights["shared_gate"])
                moe.shared_experts.up_proj.weight.copy_(weights["shared_up"])
                moe.shared_experts.down_proj.weight.copy_(weights["shared_down"])
                _, topk_w, topk_i = moe.gate(x)
                experts_out = moe.experts(x, topk_i, topk_w)
                shared_out = moe.shared_experts(x)
                full = moe(x)
            outs[impl] = (topk_w, topk_i, experts_out, shared_out, full)
        topk_w, topk_i, experts_out, shared_out, full = outs["grouped_mm"]
        # the slots by descending score (ties: lower index), as ml.MoE orders them
        order = torch.argsort(-topk_w, dim=-1, stable=True)
        ids = torch.gather(topk_i, 1, order)
        wts = torch.gather(topk_w, 1, order)
        assert torch.equal(full, experts_out + shared_out)
        cases.append({
            "name": name, "hidden": hidden, "inter": inter, "experts": experts, "top_k": top_k, "shared": shared,
            "groups": groups or 0, "top_groups": top_groups or 0, "scale": scale, "rows": rows, "seed": seed,
            "ids": ids.tolist(), "weights": b64(wts),
            "experts_out": b64(experts_out), "shared_out": b64(shared_out), "out": b64(full),
            "eager_max_abs_diff": float((outs["eager"][2] - experts_out).abs().max()),
        })
        print(f"{name}: eager vs grouped_mm max |diff| {cases[-1]['eager_max_abs_diff']:.3g}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    doc = {"generator": "scripts/reference/golden_moe.py",
           "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
           "experts_implementation": "grouped_mm", "cases": cases}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(cases)} cases")


if __name__ == "__main__":
    main()
