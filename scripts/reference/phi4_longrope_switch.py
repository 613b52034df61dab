#!/usr/bin/env python3
"""What transformers 5.17's Phi4MultimodalForCausalLM.generate does around LongRoPE's switch.

A forward pass runs LongRoPE's long factors when its largest position reaches
original_max_position_embeddings (modeling_rope_utils.longrope_frequency_update). generate's
prepare_inputs_for_generation drops the cache when the sequence first reaches that length, meaning
to recompute it with the long factors; in 5.17 the step then feeds only the newest token
(next_sequence_length 1) to an empty cache, at position 0, and does so again at every later step
(the cache never grows past original_max_position_embeddings again).

This script measures it on a small random model with original_max_position_embeddings 64, text
only, greedy, and compares generate with full recomputations (use_cache=False: each step one pass
over the whole sequence):

- a prompt longer than 64 tokens: generate equals the recomputation (the long factors throughout);
- a prompt of 58 tokens generating 12: the first 7 tokens agree, the rest do not, and the 8th
  is the model's answer to the 7th token alone (the context dropped).

The engine follows the first case (model.TextConfig.LongRoPE) and refuses the second
(engine.Check: a prompt within original_max_position_embeddings may not grow past it).

Run with the reference stack: .build/refenv/bin/python scripts/reference/phi4_longrope_switch.py
(a few seconds; prints the tokens and exits 1 if either finding no longer holds).
"""

import sys

import torch
from transformers import Phi4MultimodalConfig, Phi4MultimodalForCausalLM

ORIG = 64
NEW = 12


def main():
    torch.manual_seed(0)
    half = 6  # 12 of 16 head dims rotated
    cfg = Phi4MultimodalConfig(
        hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=3, num_key_value_heads=1,
        vocab_size=1000, pad_token_id=0, max_position_embeddings=2048, original_max_position_embeddings=ORIG,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
                         "short_factor": [1.0 + 0.3 * i for i in range(half)],
                         "long_factor": [1.0 + 7 * i for i in range(half)], "original_max_position_embeddings": ORIG},
        vision_config=dict(hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=2),
        audio_config=dict(hidden_size=32, intermediate_size=64, num_blocks=1, num_attention_heads=2,
                          nemo_conv_channels=32, ext_pw_out_channel=32, depthwise_separable_out_channel=32),
        tie_word_embeddings=False)
    m = Phi4MultimodalForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.5)

    def recompute(ids, n):
        out = []
        with torch.no_grad():
            for _ in range(n):
                t = int(m(input_ids=ids, use_cache=False).logits[0, -1].argmax())
                out.append(t)
                ids = torch.cat([ids, torch.tensor([[t]])], 1)
        return out

    ok = True
    for length in (70, 58):
        ids = torch.randint(0, 1000, (1, length))
        gen = m.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW,
                         eos_token_id=None, pad_token_id=0)[0, length:].tolist()
        full = recompute(ids, NEW)
        print(f"prompt {length}: generate  {gen}")
        print(f"prompt {length}: recompute {full}")
        if length > ORIG:
            ok &= gen == full
        else:
            cross = ORIG + 1 - length  # the token generated when the sequence first reaches ORIG + 1
            alone = recompute(torch.tensor([[gen[cross - 1]]]), 1)
            print(f"prompt {length}: token {cross} from the newest token alone -> {alone}")
            ok &= gen[:cross] == full[:cross] and gen[cross] == alone[0] and gen != full
    print("findings hold" if ok else "findings no longer hold")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
