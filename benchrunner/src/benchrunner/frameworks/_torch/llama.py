"""The Llama-style decoder in torch, written here from its published architecture (Touvron et al. 2023; Llama 3's
grouped-query attention and RoPE theta), randomly initialised: no weights are downloaded.

Token embedding; n_layers blocks, each RMSNorm -> grouped-query attention with rotary embeddings -> residual, then
RMSNorm -> SwiGLU -> residual; a final RMSNorm; the output projection (the embedding's matrix where the config ties
them). The blocks are `Transformer.layers`, an nn.ModuleList, so that FSDP can shard each block and activation
checkpointing or torch.compile can wrap each one. `build(name)` works on the meta device (`with torch.device("meta")`):
after `to_empty`, `init_weights()` gives the parameters their values.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from benchrunner.models import llama
from benchrunner.models.llama import LlamaConfig
from benchrunner.workload import Workload

# The standard deviation of every weight's normal initialisation (GPT-2's and torchtitan's); the projections that write
# into the residual stream get it divided by sqrt(2 x layers), so that the stream's variance does not grow with depth
# (GPT-2, Radford et al. 2019, section 2.3).
INIT_STD = 0.02


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) x gain (Zhang and Sennrich 2019), computed in fp32 whatever the input's dtype."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).type_as(x) * self.weight

    def init_weights(self) -> None:
        nn.init.ones_(self.weight)


def rotary(config: LlamaConfig, length: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The cosines and sines that turn the positions 0..length-1 (Su et al. 2021), (length, head_dim / 2) in fp32:
    made on each forward pass from the config, so that no buffer needs filling after a model built on the meta
    device is materialised."""
    half = config.head_dim // 2
    frequencies = config.rope_theta ** (-torch.arange(half, device=device, dtype=torch.float32) / half)
    angles = torch.outer(torch.arange(length, device=device, dtype=torch.float32), frequencies)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (batch, heads, length, head_dim) turned by position: feature i paired with feature i + head_dim / 2."""
    first, second = x.float().chunk(2, dim=-1)
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1).type_as(x)


class Attention(nn.Module):
    """Causal grouped-query attention: n_heads query heads share n_kv_heads key/value heads."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, config.head_dim
        self.wq = nn.Linear(config.dim, config.n_heads * config.head_dim, bias=False)
        self.wk = nn.Linear(config.dim, config.n_kv_heads * config.head_dim, bias=False)
        self.wv = nn.Linear(config.dim, config.n_kv_heads * config.head_dim, bias=False)
        self.wo = nn.Linear(config.n_heads * config.head_dim, config.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        q = self.wq(x).view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        group = self.n_heads // self.n_kv_heads
        if group > 1:
            # Each key/value head repeated for its query heads, as scaled_dot_product_attention's every kernel takes
            # them (its enable_gqa leaves out the memory-efficient kernel, fp32's fast one on GPUs).
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(batch, length, self.n_heads * self.head_dim))


class FeedForward(nn.Module):
    """SwiGLU (Shazeer 2020): w2(silu(w1 x) * w3 x)."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(config.dim, config.ffn_dim, bias=False)
        self.w3 = nn.Linear(config.dim, config.ffn_dim, bias=False)
        self.w2 = nn.Linear(config.ffn_dim, config.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    """One decoder layer, pre-norm: x + attention(norm(x)), then h + feed_forward(norm(h))."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(config.dim, config.norm_eps)
        self.attention = Attention(config)
        self.ffn_norm = RMSNorm(config.dim, config.norm_eps)
        self.feed_forward = FeedForward(config)
        self.residual_std = INIT_STD / math.sqrt(2 * config.n_layers)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))

    def init_weights(self) -> None:
        for norm in (self.attention_norm, self.ffn_norm):
            norm.init_weights()
        for linear in (self.attention.wq, self.attention.wk, self.attention.wv, self.feed_forward.w1,
                       self.feed_forward.w3):
            nn.init.normal_(linear.weight, std=INIT_STD)
        for linear in (self.attention.wo, self.feed_forward.w2):
            nn.init.normal_(linear.weight, std=self.residual_std)


class Transformer(nn.Module):
    """Token ids (batch, length) -> next-token logits (batch, length, vocab_size)."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        problems = config.problems()
        if problems:
            raise ValueError("; ".join(problems))
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.dim, config.norm_eps)
        # Tied: the logits are made with the embedding's own matrix, one parameter used twice, which stays one
        # however the model is materialised or sharded (a second module holding the same Parameter would not).
        self.output = None if config.tied_embeddings else nn.Linear(config.dim, config.vocab_size, bias=False)
        self.init_weights()

    def init_weights(self) -> None:
        """Every parameter's random initial value; on the meta device it changes nothing, so a model built there calls
        it again after `to_empty`."""
        nn.init.normal_(self.tok_embeddings.weight, std=INIT_STD)
        for block in self.layers:
            block.init_weights()
        self.norm.init_weights()
        if self.output is not None:
            nn.init.normal_(self.output.weight, std=INIT_STD)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        if length > self.config.max_seq_len:
            raise ValueError(f"a sequence of {length} tokens is longer than the model's {self.config.max_seq_len}")
        cos, sin = rotary(self.config, length, tokens.device)
        h = self.tok_embeddings(tokens)
        for block in self.layers:
            h = block(h, cos, sin)
        h = self.norm(h)
        return F.linear(h, self.tok_embeddings.weight) if self.output is None else self.output(h)


def build(name: str) -> Transformer:
    """The named preset of benchrunner.models.llama, randomly initialised (on the current default device: the meta
    device allocates nothing)."""
    return Transformer(llama.config(name))


# What benchrunner.frameworks._torch.models asks of a family's torch builder: the catalogue's count is the preset's.
for_catalogue = build


def for_workload(workload: Workload, device: torch.device) -> tuple[Transformer, str]:
    """The workload's preset built on the device itself (no full copy through host memory), and who defined it."""
    with device:
        return build(workload.model), "benchrunner"
