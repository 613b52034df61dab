#!/usr/bin/env python3
"""Phi-4-multimodal's full-size configs for the engine's config tests, in both layouts.

Writes core/internal/enginetest/testdata/configs/:

- phi4mm_hub.json: the hub's remote-code config (microsoft/Phi-4-multimodal-instruct main,
  model_type phi4mm, Phi4MMForCausalLM). The hub's files are not reachable here; the values are
  the copy NVIDIA/TensorRT-LLM quotes in tests/unittest/_torch/modeling/test_modeling_phi4mm.py
  (PHI4MM_CONFIG, Apache-2.0), with the two counts that copy shrinks restored (num_hidden_layers
  32, the audio encoder's num_blocks 24) and vision_lora / speech_lora, which it leaves out, as
  recalled from the hub file and seen in public fine-tuning code (r 256 / alpha 512, r 320 /
  alpha 640; the layer patterns recalled, unverified).
- phi4_multimodal_hf.json: that config converted to transformers 5.17's layout
  (Phi4MultimodalConfig, model_type phi4_multimodal) as transformers' own conversion of the
  checkpoint does it: the text keys as they are (rope_scaling becomes rope_parameters with the
  top-level partial_rotary_factor and rope_theta), the SigLIP tower the class default with the
  hub's crop_size, the audio encoder's keys renamed; written by Phi4MultimodalConfig.save_pretrained.

The bundle builder (bundles/phi4mm.go) converts the hub layout the same way; its test checks that
both files parse to the same engine config.

Run with the reference stack: .build/refenv/bin/python scripts/reference/phi4_configs.py
"""

import json
import os
import sys
import tempfile

from transformers import Phi4MultimodalAudioConfig, Phi4MultimodalConfig, Phi4MultimodalVisionConfig

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "core", "internal", "enginetest", "testdata", "configs")

LONG = [1, 1.118320672, 1.250641126, 1.398617824, 1.564103225, 1.74916897, 1.956131817, 2.187582649, 2.446418898,
        2.735880826, 3.059592084, 3.421605075, 3.826451687, 4.279200023, 4.785517845, 5.351743533, 5.984965424,
        6.693110555, 7.485043894, 8.370679318, 9.36110372, 10.4687158, 11.70738129, 13.09260651, 14.64173252,
        16.37415215, 18.31155283, 20.47818807, 22.90118105, 25.61086418, 28.64115884, 32.03, 32.1, 32.13, 32.23,
        32.6, 32.61, 32.64, 32.66, 32.7, 32.71, 32.93, 32.97, 33.28, 33.49, 33.5, 44.16, 47.77]

HUB = {
    "_name_or_path": "Phi-4-multimodal-instruct",
    "architectures": ["Phi4MMForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "audio_processor": {
        "config": {
            "activation": "swish",
            "activation_checkpointing": {"interval": 1, "module": "transformer", "offload": False},
            "attention_dim": 1024,
            "attention_heads": 16,
            "batch_norm": False,
            "bias_in_glu": True,
            "causal": True,
            "chunk_size": -1,
            "cnn_layer_norm": True,
            "conv_activation": "swish",
            "conv_glu_type": "swish",
            "depthwise_multiplier": 1,
            "depthwise_seperable_out_channel": 1024,
            "dropout_rate": 0.0,
            "encoder_embedding_config": {"input_size": 80},
            "ext_pw_kernel_size": 1,
            "ext_pw_out_channel": 1024,
            "input_layer": "nemo_conv",
            "input_size": 80,
            "kernel_size": 3,
            "left_chunk": 18,
            "linear_units": 1536,
            "nemo_conv_settings": {"conv_channels": 1024},
            "num_blocks": 24,
            "relative_attention_bias_args": {"t5_bias_max_distance": 500, "type": "t5"},
            "time_reduction": 8,
        },
        "name": "cascades",
    },
    "auto_map": {
        "AutoConfig": "configuration_phi4mm.Phi4MMConfig",
        "AutoModelForCausalLM": "modeling_phi4mm.Phi4MMForCausalLM",
        "AutoTokenizer": "Xenova/gpt-4o",
    },
    "bos_token_id": 199999,
    "embd_layer": {
        "audio_embd_layer": {
            "compression_rate": 8,
            "downsample_rate": 1,
            "embedding_cls": "audio",
            "enable_gradient_checkpointing": True,
            "projection_cls": "mlp",
            "use_conv_downsample": False,
            "use_qformer": False,
        },
        "embedding_cls": "image_audio",
        "image_embd_layer": {
            "crop_size": 448,
            "embedding_cls": "tune_image",
            "enable_gradient_checkpointing": True,
            "hd_transform_order": "sub_glb",
            "image_token_compression_cls": "avg_pool_2d",
            "projection_cls": "mlp",
            "use_hd_transform": True,
            "with_learnable_separator": True,
        },
    },
    "embd_pdrop": 0.0,
    "eos_token_id": 199999,
    "full_attn_mod": 1,
    "hidden_act": "silu",
    "hidden_size": 3072,
    "initializer_range": 0.02,
    "intermediate_size": 8192,
    "interpolate_factor": 1,
    "lm_head_bias": False,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "phi4mm",
    "num_attention_heads": 24,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "original_max_position_embeddings": 4096,
    "pad_token_id": 199999,
    "partial_rotary_factor": 0.75,
    "resid_pdrop": 0.0,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"long_factor": LONG, "short_factor": [1.0] * 48, "type": "longrope"},
    "rope_theta": 10000.0,
    "sliding_window": 262144,
    "speech_lora": {
        "dp": 0.01,
        "layer": "((layers.*self_attn\\.(qkv|o)_proj)|(layers.*mlp\\.(gate_up|down)_proj))",
        "lora_alpha": 640,
        "r": 320,
    },
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.46.1",
    "use_cache": True,
    "vision_lora": {
        "dp": 0.0,
        "layer": "layers.*((self_attn\\.(qkv_proj|o_proj))|(mlp\\.(gate_up|down)_proj))",
        "lora_alpha": 512,
        "r": 256,
    },
    "vocab_size": 200064,
}

# the remote code's keys with no counterpart in Phi4MultimodalConfig
DROPPED = ("_name_or_path", "architectures", "auto_map", "model_type", "vision_lora", "speech_lora",
           "transformers_version", "torch_dtype", "embd_layer", "audio_processor", "attention_bias", "full_attn_mod",
           "interpolate_factor", "lm_head_bias", "mlp_bias")
AUDIO_DROPPED = ("activation_checkpointing", "cnn_layer_norm", "input_layer", "batch_norm", "encoder_embedding_config",
                 "ext_pw_kernel_size", "bias_in_glu", "causal", "depthwise_seperable_out_channel")


def native(hub):
    text = {k: v for k, v in hub.items() if k not in DROPPED}
    audio_in = hub["audio_processor"]["config"]
    audio = {k: v for k, v in audio_in.items() if k not in AUDIO_DROPPED}
    audio["hidden_size"] = audio.pop("attention_dim")
    audio["num_attention_heads"] = audio.pop("attention_heads")
    audio["intermediate_size"] = audio.pop("linear_units")
    audio["depthwise_separable_out_channel"] = audio_in["depthwise_seperable_out_channel"]
    audio["nemo_conv_channels"] = audio.pop("nemo_conv_settings")["conv_channels"]
    audio["bias_max_distance"] = audio.pop("relative_attention_bias_args")["t5_bias_max_distance"]
    audio["downsample_rate"] = hub["embd_layer"]["audio_embd_layer"]["downsample_rate"]
    crop = hub["embd_layer"]["image_embd_layer"]["crop_size"]
    return Phi4MultimodalConfig(
        **text,
        vision_config=Phi4MultimodalVisionConfig(crop_size=crop),
        audio_config=Phi4MultimodalAudioConfig(**audio),
    )


def main():
    with open(os.path.join(OUT, "phi4mm_hub.json"), "w") as f:
        json.dump(HUB, f, indent=2)
        f.write("\n")
    cfg = native(HUB)
    cfg.dtype = "bfloat16"
    with tempfile.TemporaryDirectory() as d:
        cfg.save_pretrained(d)
        with open(os.path.join(d, "config.json")) as f:
            data = f.read()
    with open(os.path.join(OUT, "phi4_multimodal_hf.json"), "w") as f:
        f.write(data)
    print(f"wrote {OUT}/phi4mm_hub.json and phi4_multimodal_hf.json")


if __name__ == "__main__":
    sys.exit(main())
