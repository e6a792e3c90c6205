"""Llama-style decoders (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention), randomly initialised."""

from __future__ import annotations

from benchrunner.models import ModelSpec

NAME = "llama"

MODELS = {name: ModelSpec(name, "text") for name in ("llama-tiny", "llama-125m", "llama-1b", "llama-8b")}
