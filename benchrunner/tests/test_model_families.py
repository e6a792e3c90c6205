"""A model family is one module (and its torch builder): a second text family, defined here and put into the
catalogue's registry for each test alone, is listed, counted, validated by its own longest sequence, and built and
trained through the torch path; a question a family cannot answer is refused naming the model and the family; and
no module of the package but a family's own two imports them."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import math
import types
from importlib import resources

import pytest
import torch
from torch import nn

from benchrunner import catalogue, mfu, models
from benchrunner.frameworks._torch import distributed, loop
from benchrunner.frameworks._torch.models import builder, parameter_count_on_meta
from benchrunner.workload import Workload

MODEL, VOCAB, DIM, LAYERS, LONGEST = "tiny-text", 32, 8, 2, 12
# Embedding, the blocks, the output projection: no biases.
PARAMETERS = VOCAB * DIM + LAYERS * DIM * DIM + DIM * VOCAB


class Tiny(nn.Module):
    """Token ids -> next-token logits through LAYERS residual linear blocks, kept in `layers` as a text model's are."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(nn.Linear(DIM, DIM, bias=False) for _ in range(LAYERS))
        self.output = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embedding(tokens)
        for block in self.layers:
            h = h + block(h)
        return self.output(h)


# The family's torch builder is this module.
def for_workload(workload: Workload, device: torch.device) -> tuple[nn.Module, str]:
    with device:
        return Tiny(), "test"


def for_catalogue(name: str) -> nn.Module:
    return Tiny()


def family(*lacking: str) -> types.ModuleType:
    """The tiny text family as a module, less the members named."""
    module = types.ModuleType("tiny_family")
    members = {
        "NAME": "tiny", "MODELS": {MODEL: models.ModelSpec(MODEL, "text", vocab_size=VOCAB)},
        "TORCH_BUILDER": __name__,
        "max_sequence_length": lambda name: LONGEST,
        # One attention head as wide as the model, for the formula's terms.
        "flops": lambda name, length: mfu.flops_per_token(PARAMETERS - VOCAB * DIM, LAYERS, 1, DIM, length),
    }
    for name, value in members.items():
        if name not in lacking:
            setattr(module, name, value)
    return module


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(models.families(), "tiny", family())


def ddp(**values: object) -> Workload:
    return Workload.from_mapping({"framework": "pytorch-ddp", "model": MODEL, **values})


def test_the_catalogue_lists_a_new_text_family_with_its_parameters_and_flops_per_token(tiny, monkeypatch):
    assert {MODEL, "llama-tiny", "resnet50"} <= set(models.names())
    # The family alone in the listing: building every other model on the meta device would take seconds.
    monkeypatch.setattr(models, "families", lambda: {"tiny": family()})
    [entry] = catalogue.document(sequence_length=8)["models"]
    assert (entry["name"], entry["kind"], entry["unit"]) == (MODEL, "text", "tokens")
    assert entry["frameworks"] == ["pytorch-ddp", "pytorch-fsdp"]
    assert entry["parameters"] == parameter_count_on_meta(MODEL) == PARAMETERS
    assert entry["flops"]["per_unit"] == 6 * (PARAMETERS - VOCAB * DIM) + 12 * LAYERS * 1 * DIM * 8
    assert entry["flops"]["terms"] == {"N": PARAMETERS - VOCAB * DIM, "L": LAYERS, "H": 1, "Q": DIM, "T": 8}
    [longer] = catalogue.document(sequence_length=LONGEST + 1)["models"]
    assert longer["flops"] is None
    assert longer["flops_missing"] == f"sequence length {LONGEST + 1} is longer than {MODEL}'s {LONGEST} tokens"


def test_a_workload_is_held_to_the_family_s_own_longest_sequence(tiny):
    ddp(sequence_length=LONGEST).validate()
    with pytest.raises(ValueError, match=f"sequence length {LONGEST + 1} is longer than the {LONGEST} tokens {MODEL} "
                                         "takes"):
        ddp(sequence_length=LONGEST + 1).validate()
    # Not Llama's: llama-tiny takes the same length.
    ddp(model="llama-tiny", sequence_length=LONGEST + 1).validate()


def test_the_torch_path_builds_checkpoints_and_trains_a_new_text_family(tiny):
    workload = ddp(sequence_length=6, batch_size=2, activation_checkpointing="full", optimizer="adamw",
                   learning_rate=0.01)
    workload.validate()
    cpu = torch.device("cpu")
    module, source = loop.build(workload, cpu)
    assert isinstance(module, Tiny) and source == "test"
    inputs, targets = next(loop.batches(workload, workload.settings, distributed.Placement(0, 1, 0, 1, "single"), cpu))
    assert inputs.shape == targets.shape == (2, 6) and int(inputs.max()) < VOCAB

    def wrap(module: nn.Module, *_: object) -> loop.Wrapped:
        return loop.Wrapped(module, lambda last: contextlib.nullcontext(), None)

    steps = loop.trainer(module, workload, workload.settings, distributed.Placement(0, 1, 0, 1, "single"), cpu, wrap)
    # Its blocks were found where a text model keeps them.
    assert sum(isinstance(block, loop.Checkpointed) for block in module.layers) == LAYERS
    loss = steps.step(0, [(inputs, targets)])
    assert math.isfinite(loss) and steps.grad_norms[0] > 0
    flops = loop.arithmetic(workload, 1000.0, cpu, None)["flops"]
    assert flops == models.flops(MODEL, 6) and flops["terms"]["T"] == 6


def test_a_question_a_family_cannot_answer_is_refused_naming_the_model_and_the_family(monkeypatch):
    monkeypatch.setitem(models.families(), "tiny", family("flops"))
    assert models.missing(family("flops")) == ["flops"]
    assert models.missing(family("NAME", "TORCH_BUILDER")) == ["NAME", "TORCH_BUILDER"]
    with pytest.raises(ValueError, match=r"model tiny-text's family tiny \(tiny_family\) declares no flops: "
                                         "benchrunner.models.TextFamily asks for it"):
        models.flops(MODEL, 8)
    with pytest.raises(ValueError, match=r"model tiny-text's family tiny .* declares no min_image_size: that is asked "
                                         r"of image models, and tiny-text is a text model"):
        models.min_image_size(MODEL)
    with pytest.raises(ValueError, match=r"model resnet50's family cnn .* declares no max_sequence_length: that is "
                                         r"asked of text models, and resnet50 is an image model"):
        models.max_sequence_length("resnet50")


def test_a_torch_builder_lacking_what_builders_declare_is_refused(monkeypatch):
    broken = family()
    broken.TORCH_BUILDER = "benchrunner.mfu"
    monkeypatch.setitem(models.families(), "tiny", broken)
    with pytest.raises(ValueError, match=r"model tiny-text's family tiny names benchrunner\.mfu as its torch builder, "
                                         r"which declares no for_workload or for_catalogue"):
        builder(MODEL)


def test_two_families_defining_one_model_are_an_error(monkeypatch):
    twin = family()
    twin.NAME, twin.MODELS = "twin", {"llama-tiny": models.ModelSpec("llama-tiny", "text", vocab_size=VOCAB)}
    monkeypatch.setitem(models.families(), "twin", twin)
    with pytest.raises(RuntimeError, match="two model families define llama-tiny: llama and twin"):
        models.names()


def _imports(path, module: str) -> set[str]:
    """Every module the file imports, relative imports resolved, with each `from x import y`'s x.y as well as x."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
                else node.module
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def test_no_module_but_a_family_s_own_two_imports_the_family():
    root = resources.files("benchrunner")
    owned = {}
    for found in models.families().values():
        own = {found.__name__, found.TORCH_BUILDER}
        owned.update(dict.fromkeys(own, own))
    importers: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        relative = path.relative_to(root).with_suffix("")
        parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
        module = ".".join(("benchrunner", *parts))
        for target in _imports(path, module):
            if target in owned:
                importers.setdefault(target, set()).add(module)
    # The scan sees imports: each family's torch builder imports the family.
    assert "benchrunner.frameworks._torch.llama" in importers["benchrunner.models.llama"]
    assert "benchrunner.frameworks._torch.cnn" in importers["benchrunner.models.cnn"]
    assert {target: sorted(found - owned[target]) for target, found in importers.items() if found - owned[target]} == {}
