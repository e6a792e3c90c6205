"""What `benchrunner models` lists: every model of the catalogue with its kind, the frameworks that build it, its
parameter count built on the meta device (where torch is installed; where it is not, saying so), the published count
and its source, and for text models the FLOPs per token at a sequence length."""

from __future__ import annotations

from typing import Any

from benchrunner import mfu, models

# The sequence length FLOPs per token are listed at unless another is asked for: Llama 2's context, torchtitan's and
# the GPU record's default.
DEFAULT_SEQUENCE_LENGTH = 2048


def _torch_counter() -> tuple[Any, str | None, str | None]:
    """(a function counting a model's parameters on the meta device, torch's version, why there is none)."""
    try:
        import torch  # noqa: PLC0415 - optional: the control host lists models without it

        from benchrunner.frameworks._torch.models import parameter_count_on_meta  # noqa: PLC0415 - needs torch
    except ImportError as exc:
        return None, None, f"torch not installed ({exc})"
    return parameter_count_on_meta, torch.__version__, None


def document(sequence_length: int = DEFAULT_SEQUENCE_LENGTH) -> dict[str, Any]:
    """Every model, as `benchrunner models --json` prints it."""
    count, torch_version, missing = _torch_counter()
    entries = []
    for name in models.names():
        spec = models.get(name)
        entry: dict[str, Any] = {
            "name": name, "kind": spec.kind, "unit": models.UNITS[spec.kind],
            "frameworks": list(models.frameworks_for(name)),
            "parameters": None if count is None else count(name), "parameters_missing": missing,
            "published_parameters": spec.published_parameters, "published_source": spec.published_source,
            "built_at": None, "flops": None, "flops_missing": None}
        if spec.kind == "image":
            image_size, classes = models.catalogue_input(name)
            entry["built_at"] = {"image_size": image_size, "classes": classes}
            entry["flops_missing"] = "no FLOPs count for image models"
        else:
            longest = models.max_sequence_length(name)
            if sequence_length > longest:
                entry["flops_missing"] = f"sequence length {sequence_length} is longer than {name}'s {longest} tokens"
            else:
                entry["flops"] = models.flops(name, sequence_length)
        entries.append(entry)
    return {"sequence_length": sequence_length, "torch": torch_version, "parameters_missing": missing,
            "models": entries}


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def _published(count: int) -> str:
    """A published count with the digits its source gives: 1.23B as 1.23B, 25,557,032 as it is."""
    for factor, suffix in ((10**9, "B"), (10**6, "M")):
        if count >= factor and count % 10**6 == 0:
            return f"{count / factor:g}{suffix}"
    return f"{count:,}"


def render(listing: dict[str, Any]) -> str:
    """The listing as a table, each published count's source and each missing figure's reason below it."""
    head = ("model", "kind", "frameworks", "parameters", "published", f"FLOPs/token at {listing['sequence_length']}")
    rows, notes = [], []
    for entry in listing["models"]:
        published = "-"
        if entry["published_parameters"] is not None:
            notes.append(entry["published_source"])
            published = f"{_published(entry['published_parameters'])} [{len(notes)}]"
        flops = "-" if entry["flops"] is None else _si(entry["flops"]["per_unit"], "FLOP")
        rows.append((entry["name"], entry["kind"], ", ".join(entry["frameworks"]),
                     "-" if entry["parameters"] is None else f"{entry['parameters']:,}", published, flops))
    widths = [max(len(row[i]) for row in (head, *rows)) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in (head, *rows)]
    if listing["parameters_missing"]:
        lines.append(f"parameters: {listing['parameters_missing']}: nothing was built")
    else:
        inputs: dict[str, list[str]] = {}
        for entry in listing["models"]:
            if entry["built_at"]:
                built = entry["built_at"]
                inputs.setdefault(f"{built['image_size']} px and {built['classes']} classes", []).append(entry["name"])
        lines.append(f"parameters: built on the meta device with torch {listing['torch']}; image models at "
                     + "; ".join(f"{shape} ({', '.join(names)})" for shape, names in inputs.items()))
    lines += [f"[{number}] {source}" for number, source in enumerate(notes, 1)]
    lines.append(f"FLOPs per token: {mfu.FORMULA} ({', '.join(f'{term} {name}' for term, name in mfu.TERMS.items())}), "
                 "forward and backward; none for image models yet")
    lines += [f"{entry['name']}: {entry['flops_missing']}" for entry in listing["models"]
              if entry["flops_missing"] and entry["kind"] == "text"]
    return "\n".join(lines) + "\n"
