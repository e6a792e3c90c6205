"""`benchrunner models`: every model with its frameworks, its parameters built on the meta device beside the published
count, and text models' FLOPs per token; where torch is missing it says so and prints no count."""

from __future__ import annotations

import sys

import pytest

from benchrunner import catalogue, cli, models, results

# Llama 3.1 8B's shape at 2048 tokens, worked by hand: N = 32 x 218,112,000 + 4,096 + 128,256 x 4,096
# = 7,504,924,672; 6N = 45,029,548,032; 12 x 32 x 32 x 128 x 2048 = 3,221,225,472.
LLAMA_8B_FLOPS_AT_2048 = 48_250_773_504


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["models", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def listing() -> dict:
    # Built once: the meta-device build of every model takes seconds.
    return catalogue.document(4096)


def test_json_is_strict_and_lists_every_model_with_its_frameworks_and_built_count(capsys):
    code, out, _ = run(capsys, "--json")
    assert code == 0
    document = results.strict_loads(out)
    assert document["sequence_length"] == catalogue.DEFAULT_SEQUENCE_LENGTH and document["torch"]
    entries = {entry["name"]: entry for entry in document["models"]}
    assert sorted(entries) == list(models.names())
    for name, entry in entries.items():
        assert entry["frameworks"] == list(models.frameworks_for(name)) and entry["frameworks"]
        assert entry["unit"] == models.unit(name) and isinstance(entry["parameters"], int)
        assert entry["parameters_missing"] is None
    assert entries["llama-8b"]["parameters"] == 8_030_261_248
    assert entries["llama-8b"]["flops"] == {"per_unit": float(LLAMA_8B_FLOPS_AT_2048), "formula": "6*N + 12*L*H*Q*T",
                                            "terms": {"N": 7_504_924_672, "L": 32, "H": 32, "Q": 128, "T": 2048}}
    # Counted at the input their published counts are for: ImageNet's 224 px and 1000 classes.
    assert entries["resnet50"]["parameters"] == entries["resnet50"]["published_parameters"] == 25_557_032
    assert entries["resnet50"]["built_at"] == {"image_size": 224, "classes": 1000}
    assert entries["resnet50"]["flops"] is None and entries["resnet50"]["flops_missing"]
    assert entries["densenet121_chexnet"]["built_at"]["classes"] == 14


def test_the_text_table_shows_counts_published_figures_with_their_sources_and_flops(capsys):
    code, out, _ = run(capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["model", "kind", "frameworks", "parameters", "published", "FLOPs/token", "at", "2048"]
    row = next(line for line in lines if line.startswith("llama-8b "))
    assert "8,030,261,248" in row and "8.03B [" in row and "48.25 GFLOP" in row
    number = row.split("8.03B [")[1].split("]")[0]
    assert any(line.startswith(f"[{number}] ") and "Llama-3.1-8B" in line for line in lines)
    assert "1.23B [" in next(line for line in lines if line.startswith("llama-1b "))
    assert any(line.startswith("FLOPs per token: 6*N + 12*L*H*Q*T") for line in lines)
    for name in models.names():
        assert any(line.startswith(f"{name} ") and ", ".join(models.frameworks_for(name)) in line for line in lines)


def test_flops_are_counted_at_the_sequence_length_asked_for(listing):
    entry = next(entry for entry in listing["models"] if entry["name"] == "llama-8b")
    # Only the attention term grows with the sequence.
    assert entry["flops"]["per_unit"] == LLAMA_8B_FLOPS_AT_2048 + 12 * 32 * 32 * 128 * 2048
    assert "FLOPs/token at 4096" in catalogue.render(listing)


def test_a_sequence_longer_than_a_model_takes_gets_no_flops_and_says_why(capsys):
    listing = catalogue.document(8192)
    tiny = next(entry for entry in listing["models"] if entry["name"] == "llama-tiny")
    assert tiny["flops"] is None and tiny["flops_missing"] == "sequence length 8192 is longer than llama-tiny's 4096 tokens"
    assert "llama-tiny: sequence length 8192 is longer than llama-tiny's 4096 tokens" in catalogue.render(listing)


@pytest.mark.parametrize("length", ["0", str(1 << 21)])
def test_an_impossible_sequence_length_is_one_line(capsys, length):
    code, out, err = run(capsys, "--sequence-length", length)
    assert code == 2 and not out
    assert err == f"benchrunner: --sequence-length must be from 1 to 1048576 tokens (got {length})\n"


def test_without_torch_no_count_is_printed_and_the_listing_says_why(capsys, monkeypatch):
    # None in sys.modules makes `import torch` raise ImportError, as on a host without torch.
    monkeypatch.setitem(sys.modules, "torch", None)
    code, out, _ = run(capsys, "--json")
    assert code == 0
    document = results.strict_loads(out)
    assert document["torch"] is None and document["parameters_missing"].startswith("torch not installed")
    for entry in document["models"]:
        assert entry["parameters"] is None and entry["parameters_missing"].startswith("torch not installed")
    # The published counts and the FLOPs, worked from the shape alone, are still there.
    eight = next(entry for entry in document["models"] if entry["name"] == "llama-8b")
    assert eight["published_parameters"] == 8_030_000_000 and eight["flops"]["per_unit"] == LLAMA_8B_FLOPS_AT_2048
    code, out, _ = run(capsys)
    row = next(line for line in out.splitlines() if line.startswith("llama-8b "))
    assert "8,030,261,248" not in row
    assert "parameters: torch not installed" in out
