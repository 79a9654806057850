"""IotaForCausalLM: the iota-rs Llama with the bottleneck at its pipeline cuts, for transformers.

Written beside the weights by iota-rs's `hf::export` (offchain/model/src/hf); load the folder with
`AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)`.

The model is transformers' LlamaForCausalLM except at each cut `c` of `config.bottleneck_cuts` (the
first block of a pipeline stage; iota-rs docs/design.md section 5, after IOTA's "uninterrupted residual
flow"), where the residual stream is `b = config.bottleneck_width` channels wide:
- block `c - 1` ends with `bottleneck_down(silu(mlp(norm2(h)))) + h[..., :b]` instead of
  `h + mlp(norm2(h))` (`h` the stream after attention), giving `[B, T, b]`;
- block `c` lifts its `[B, T, b]` input `z` to `relu(bottleneck_up(z))`, adds `z` back into the first
  `b` channels, then runs as a Llama block.
"""

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaDecoderLayer


class IotaConfig(LlamaConfig):
    """LlamaConfig plus the bottleneck: its width and the blocks that start a stage."""

    model_type = "iota"

    def __init__(self, bottleneck_width=0, bottleneck_cuts=(), **kwargs):
        self.bottleneck_width = bottleneck_width
        self.bottleneck_cuts = list(bottleneck_cuts)
        super().__init__(**kwargs)


class _Zero(nn.Module):
    """Stands in for the MLP while the Llama block runs, so it returns the stream after attention."""

    def forward(self, x):
        return torch.zeros_like(x)


class IotaDecoderLayer(LlamaDecoderLayer):
    """A Llama block with the bottleneck's lift at its entry and/or its projection at its exit."""

    def __init__(self, config, layer_idx, entry, exit):
        super().__init__(config, layer_idx)
        d, b = config.hidden_size, config.bottleneck_width
        self.width = b
        self.bottleneck_up = nn.Linear(b, d, bias=False) if entry else None
        self.bottleneck_down = nn.Linear(d, b, bias=False) if exit else None
        self._zero = _Zero()

    def forward(self, hidden_states, *args, **kwargs):
        if self.bottleneck_up is not None:
            z = hidden_states
            pad = self.bottleneck_up.out_features - self.width
            hidden_states = torch.relu(self.bottleneck_up(z)) + F.pad(z, (0, pad))
        if self.bottleneck_down is None:
            return super().forward(hidden_states, *args, **kwargs)
        mlp = self.mlp
        self.mlp = self._zero
        try:
            out = super().forward(hidden_states, *args, **kwargs)
        finally:
            self.mlp = mlp
        h = out[0] if isinstance(out, tuple) else out
        f = self.mlp(self.post_attention_layernorm(h))
        y = self.bottleneck_down(F.silu(f)) + h[..., : self.width]
        return (y,) + tuple(out[1:]) if isinstance(out, tuple) else y


class IotaForCausalLM(LlamaForCausalLM):
    """LlamaForCausalLM whose blocks next to each cut carry the bottleneck (module docs)."""

    config_class = IotaConfig

    def __init__(self, config):
        super().__init__(config)
        cuts = set(config.bottleneck_cuts)
        for i in range(len(self.model.layers)):
            entry, exit = i in cuts, (i + 1) in cuts
            if entry or exit:
                self.model.layers[i] = IotaDecoderLayer(config, i, entry, exit)
        self.post_init()
