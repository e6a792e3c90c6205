"""Llama-style decoders (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention), randomly initialised: each
preset's shape, and its parameter count worked out from that shape alone (no torch), which the FLOPs per token of a
run are counted from and the torch module built from the same shape must match."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchrunner import mfu
from benchrunner.models import ModelSpec

NAME = "llama"
TORCH_BUILDER = "benchrunner.frameworks._torch.llama"


@dataclass(frozen=True)
class LlamaConfig:
    dim: int
    n_layers: int
    n_heads: int
    # Grouped-query attention: each key/value head serves n_heads // n_kv_heads query heads.
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int
    norm_eps: float
    rope_theta: float
    # The longest sequence the model takes: the published context length, or the lab's choice for the small presets.
    max_seq_len: int
    # The output projection is the token embedding's matrix (Llama 3.2 1B and 3B), or a matrix of its own.
    tied_embeddings: bool

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def problems(self) -> list[str]:
        """What makes the shape impossible to build."""
        problems = []
        if self.dim % self.n_heads:
            problems.append(f"dim {self.dim} is not a multiple of the {self.n_heads} heads")
        elif self.head_dim % 2:
            problems.append(f"head dim {self.head_dim} is odd: rotary embeddings turn pairs of features")
        if self.n_heads % self.n_kv_heads:
            problems.append(f"{self.n_heads} heads are not a multiple of the {self.n_kv_heads} key/value heads")
        return problems


# Llama 3's vocabulary (Llama 3.1 and 3.2 alike): 128,000 BPE tokens and 256 special ones.
LLAMA3_VOCAB = 128_256
# Llama 3.1's and 3.2's context length (their model cards: 128k).
LLAMA3_CONTEXT = 131_072

CONFIGS: dict[str, LlamaConfig] = {
    # For the lab: about 4.2 million parameters, trains in seconds on a CPU. Its vocabulary holds a byte-level
    # tokenizer's 256 bytes and its end-of-text token with room to spare.
    "llama-tiny": LlamaConfig(dim=256, n_layers=4, n_heads=8, n_kv_heads=4, ffn_dim=768, vocab_size=4096,
                              norm_eps=1e-5, rope_theta=10_000.0, max_seq_len=4096, tied_embeddings=True),
    # GPT-3 Small's shape (Brown et al. 2020, table 2.1: 12 layers, d_model 768, 12 heads of 64), as torchtitan's
    # debug models take it, with Llama's blocks (SwiGLU of 2048 = 8/3 x 768, 4 key/value heads) and a 32,000 token
    # vocabulary (Llama 2's), untied: 124.7 million parameters, 100.1 million without the embedding table.
    "llama-125m": LlamaConfig(dim=768, n_layers=12, n_heads=12, n_kv_heads=4, ffn_dim=2048, vocab_size=32_000,
                              norm_eps=1e-5, rope_theta=10_000.0, max_seq_len=8192, tied_embeddings=False),
    # Llama 3.2 1B's shape (its params.json and Hugging Face config.json): 16 layers, dim 2048, 32 heads, 8 key/value
    # heads, FFN 8192, tied embeddings, rope theta 500,000.
    "llama-1b": LlamaConfig(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, ffn_dim=8192, vocab_size=LLAMA3_VOCAB,
                            norm_eps=1e-5, rope_theta=500_000.0, max_seq_len=LLAMA3_CONTEXT, tied_embeddings=True),
    # Llama 3.1 8B's shape: 32 layers, dim 4096, 32 heads, 8 key/value heads, FFN 14336, untied, rope theta 500,000.
    "llama-8b": LlamaConfig(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim=14_336, vocab_size=LLAMA3_VOCAB,
                            norm_eps=1e-5, rope_theta=500_000.0, max_seq_len=LLAMA3_CONTEXT, tied_embeddings=False),
}
# Llama 3.1 and 3.2 also rescale the rotary frequencies for long contexts (their "llama3" rope scaling); that changes
# neither a parameter nor a FLOP, so the presets turn plain rotary embeddings at the published theta.

MODELS = {
    "llama-tiny": ModelSpec("llama-tiny", "text", vocab_size=CONFIGS["llama-tiny"].vocab_size),
    "llama-125m": ModelSpec("llama-125m", "text", vocab_size=CONFIGS["llama-125m"].vocab_size),
    # The count as Meta's model card gives it: "1B (1.23B)" (Llama 3.2 model card, Model Information table). Its
    # exact count, 1,235,814,400, cut (not rounded) to the card's three digits.
    "llama-1b": ModelSpec("llama-1b", "text", vocab_size=CONFIGS["llama-1b"].vocab_size,
                          published_parameters=1_230_000_000,
                          published_source="Meta's Llama 3.2 model card (github.com/meta-llama/llama-models, "
                                           "models/llama3_2/MODEL_CARD.md): Llama 3.2 1B, Params \"1B (1.23B)\""),
    # Meta's Llama 3.1 model card gives "8B" alone; Hugging Face's page of the weights Meta published gives 8.03B,
    # counted from the checkpoint's safetensors.
    "llama-8b": ModelSpec("llama-8b", "text", vocab_size=CONFIGS["llama-8b"].vocab_size,
                          published_parameters=8_030_000_000,
                          published_source="Hugging Face's model page of meta-llama/Llama-3.1-8B: \"8.03B params\" "
                                           "(Meta's Llama 3.1 model card says 8B)"),
}


def config(name: str) -> LlamaConfig:
    try:
        return CONFIGS[name]
    except KeyError:
        raise ValueError(f"model {name!r} is not one of {', '.join(sorted(CONFIGS))}") from None


def _block_parameters(c: LlamaConfig) -> int:
    """One block: the query, key, value and output projections, SwiGLU's three matrices, two RMSNorm gains."""
    attention = c.dim * c.n_heads * c.head_dim + 2 * c.dim * c.n_kv_heads * c.head_dim + c.n_heads * c.head_dim * c.dim
    return attention + 3 * c.dim * c.ffn_dim + 2 * c.dim


def non_embedding_parameters(c: LlamaConfig) -> int:
    """The parameters a token's arithmetic runs through: all but the embedding table, which is looked up, not
    multiplied. The output projection counts (a tied model's shared matrix counts once, as the output projection)."""
    return c.n_layers * _block_parameters(c) + c.dim + c.vocab_size * c.dim


def parameters(c: LlamaConfig) -> int:
    """Every parameter, as the torch module holds them (a tied matrix once)."""
    return non_embedding_parameters(c) + (0 if c.tied_embeddings else c.vocab_size * c.dim)


def max_sequence_length(name: str) -> int:
    return config(name).max_seq_len


def flops(name: str, sequence_length: int) -> dict[str, Any]:
    """The model FLOPs per token trained at the sequence length, with the formula and its terms, as a result records
    them (benchrunner.mfu's count, from the preset's shape)."""
    c = config(name)
    return mfu.flops_per_token(non_embedding_parameters(c), c.n_layers, c.n_heads, c.head_dim, sequence_length)
