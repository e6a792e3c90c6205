"""The Llama-style decoder: every preset, built on the meta device, holds the parameters its shape says and the
published count where there is one; the tiny one trains causally on a CPU."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from benchrunner import models
from benchrunner import tokens as token_files
from benchrunner.frameworks._torch import llama
from benchrunner.frameworks._torch.models import parameter_count
from benchrunner.models import llama as configs


def _on_meta(name: str) -> llama.Transformer:
    with torch.device("meta"):
        return llama.build(name)


def _published_digits(count: int) -> int:
    """The place of a published count's last given digit (1.23B: 10 million)."""
    unit = 1
    while count % (unit * 10) == 0:
        unit *= 10
    return unit


@pytest.mark.parametrize("name", sorted(configs.CONFIGS))
def test_each_preset_built_on_the_meta_device_holds_its_analytic_parameter_count(name):
    model = _on_meta(name)
    config = configs.config(name)
    assert all(parameter.is_meta for parameter in model.parameters())
    assert parameter_count(model) == configs.parameters(config)
    # Non-embedding: all but the looked-up table, which an untied model holds beside its output projection.
    looked_up = 0 if config.tied_embeddings else model.tok_embeddings.weight.numel()
    assert parameter_count(model) - looked_up == configs.non_embedding_parameters(config)
    assert isinstance(model.layers, torch.nn.ModuleList) and len(model.layers) == config.n_layers


@pytest.mark.parametrize("name", ["llama-1b", "llama-8b"])
def test_the_llama_3_shapes_have_their_published_parameter_counts(name):
    spec = models.get(name)
    unit = _published_digits(spec.published_parameters)
    # Meta's card cuts Llama 3.2 1B's 1,235,814,400 to 1.23B rather than rounding it: compared the same way.
    assert parameter_count(_on_meta(name)) // unit * unit == spec.published_parameters
    assert spec.published_source


def test_the_llama_3_shapes_are_the_published_ones():
    one, eight = configs.config("llama-1b"), configs.config("llama-8b")
    assert (one.n_layers, one.dim, one.n_heads, one.n_kv_heads, one.ffn_dim, one.vocab_size, one.tied_embeddings,
            one.rope_theta) == (16, 2048, 32, 8, 8192, 128_256, True, 500_000.0)
    assert (eight.n_layers, eight.dim, eight.n_heads, eight.n_kv_heads, eight.ffn_dim, eight.vocab_size,
            eight.tied_embeddings, eight.rope_theta) == (32, 4096, 32, 8, 14_336, 128_256, False, 500_000.0)
    assert parameter_count(_on_meta("llama-8b")) == 8_030_261_248


def test_every_text_model_of_the_catalogue_has_a_preset():
    text = {name for name, spec in models.registry().items() if spec.kind == "text"}
    assert text == set(configs.CONFIGS) == set(configs.MODELS)


def test_the_tiny_preset_is_a_few_million_parameters_and_takes_byte_level_tokens():
    config = configs.config("llama-tiny")
    assert 1_000_000 < configs.parameters(config) < 10_000_000
    # The byte-level tokenizer's 256 bytes and its end-of-text token.
    assert config.vocab_size >= token_files.tokenizer(token_files.BYTES).vocab_size == 257


def test_a_tied_model_makes_its_logits_with_the_embedding_matrix():
    torch.manual_seed(0)
    model = llama.build("llama-tiny")
    assert model.output is None and configs.config("llama-tiny").tied_embeddings
    tokens = torch.randint(0, model.config.vocab_size, (1, 5))
    with torch.no_grad():
        before = model(tokens)
        model.tok_embeddings.weight[:, 0] += 1.0
        assert not torch.equal(model(tokens), before)


def _small(**changes: object) -> llama.Transformer:
    torch.manual_seed(0)
    config = dataclasses.replace(configs.config("llama-tiny"), dim=64, n_layers=2, n_heads=4, n_kv_heads=2,
                                 ffn_dim=128, vocab_size=300, **changes)
    return llama.Transformer(config)


def test_the_decoder_is_causal():
    model = _small()
    tokens = torch.randint(0, 300, (2, 12))
    changed = tokens.clone()
    changed[:, 7] = (changed[:, 7] + 1) % 300
    with torch.no_grad():
        logits, after = model(tokens), model(changed)
    assert logits.shape == (2, 12, 300)
    assert torch.equal(logits[:, :7], after[:, :7])
    assert not torch.allclose(logits[:, 7:], after[:, 7:])


def test_at_initialisation_the_loss_is_near_a_uniform_guess_and_every_parameter_gets_a_gradient():
    model = _small(tied_embeddings=False)
    tokens = torch.randint(0, 300, (4, 16))
    logits = model(tokens[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 300), tokens[:, 1:].reshape(-1))
    assert abs(loss.item() - math.log(300)) < 0.1
    loss.backward()
    assert all(parameter.grad is not None and parameter.grad.abs().sum() > 0 for parameter in model.parameters())


def test_a_few_steps_of_adamw_lower_the_loss_on_a_repeated_batch():
    model = _small()
    tokens = torch.randint(0, 300, (4, 17))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(8):
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 300), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


def test_rotary_embeddings_make_attention_scores_depend_on_relative_position_alone():
    config = configs.config("llama-tiny")
    cos, sin = llama.rotary(config, 16, torch.device("cpu"))
    torch.manual_seed(0)
    q, k = torch.randn(config.head_dim), torch.randn(config.head_dim)

    def score(m: int, n: int) -> float:
        turned_q = llama.apply_rotary(q, cos[m], sin[m])
        turned_k = llama.apply_rotary(k, cos[n], sin[n])
        return float(turned_q @ turned_k)

    assert score(5, 2) == pytest.approx(score(13, 10), rel=1e-4)
    assert score(5, 2) != pytest.approx(score(5, 3), rel=1e-3)
    # A turn keeps every vector's length.
    assert llama.apply_rotary(q, cos[9], sin[9]).norm().item() == pytest.approx(q.norm().item(), rel=1e-5)


def test_grouped_query_attention_equals_full_attention_with_each_key_value_head_repeated():
    model = _small()
    attention = model.layers[0].attention
    x = torch.randn(2, 6, 64)
    cos, sin = llama.rotary(model.config, 6, torch.device("cpu"))
    with torch.no_grad():
        got = attention(x, cos, sin)
        # By hand: query head h attends with key/value head h // 2 (4 query heads, 2 key/value heads).
        q = llama.apply_rotary(attention.wq(x).view(2, 6, 4, 16).transpose(1, 2), cos, sin)
        k = llama.apply_rotary(attention.wk(x).view(2, 6, 2, 16).transpose(1, 2), cos, sin)
        v = attention.wv(x).view(2, 6, 2, 16).transpose(1, 2)
        scores = q @ k[:, [0, 0, 1, 1]].transpose(-1, -2) / 4.0
        scores = scores.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))
        expected = attention.wo((scores.softmax(-1) @ v[:, [0, 0, 1, 1]]).transpose(1, 2).reshape(2, 6, 64))
    torch.testing.assert_close(got, expected)


def test_a_model_built_on_the_meta_device_materialises_with_its_initialisation():
    meta = _on_meta("llama-tiny")
    model = meta.to_empty(device="cpu")
    torch.manual_seed(0)
    model.init_weights()
    assert parameter_count(model) == configs.parameters(configs.config("llama-tiny"))
    assert torch.equal(model.norm.weight, torch.ones(256))
    assert model.tok_embeddings.weight.std().item() == pytest.approx(llama.INIT_STD, rel=0.05)
    residual = llama.INIT_STD / math.sqrt(2 * 4)
    assert model.layers[0].feed_forward.w2.weight.std().item() == pytest.approx(residual, rel=0.05)
    with torch.no_grad():
        assert torch.isfinite(model(torch.randint(0, 4096, (1, 8)))).all()


def test_a_sequence_longer_than_the_model_takes_is_refused():
    model = _small(max_seq_len=8)
    with pytest.raises(ValueError, match="a sequence of 9 tokens is longer than the model's 8"):
        model(torch.zeros(1, 9, dtype=torch.long))


@pytest.mark.parametrize(("changes", "message"), [
    ({"n_heads": 5}, "dim 64 is not a multiple of the 5 heads"),
    ({"n_heads": 8, "n_kv_heads": 3}, "8 heads are not a multiple of the 3 key/value heads"),
    ({"dim": 72, "n_heads": 8, "n_kv_heads": 4}, "head dim 9 is odd"),
])
def test_an_impossible_shape_is_refused_by_name(changes, message):
    config = dataclasses.replace(configs.config("llama-tiny"), **{"dim": 64, "n_heads": 4, "n_kv_heads": 2, **changes})
    with pytest.raises(ValueError, match=message):
        llama.Transformer(config)
