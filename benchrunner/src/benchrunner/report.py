"""Campaign reports and comparisons: tables and plots from many runs, in Markdown, HTML and PNG.

Figures follow the studies this project reproduces, with the numbers shown: throughput against GPU
count per stack with 95% confidence bars (Dell 2019), scaling efficiency per GPU count (Intel 2018),
the ratio of each stack to the reference one, overlaid loss curves and allreduce bandwidth curves; and
each container's throughput over the virtualenv's on the same stack, so a stack's gap to bare metal
splits into the container's part and the orchestrator's.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchrunner import containers, frameworks, launchers, results, stats
from benchrunner import workload as workload_module

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
PLOTS_DIR = "plots"
# A run's own plot: a training run's loss curve, a sweep's bandwidth curve.
LOSS_PLOT = f"{PLOTS_DIR}/loss.png"
SWEEP_PLOT = f"{PLOTS_DIR}/allreduce.png"
# The first present of these is what the other stacks are measured against.
REFERENCE_ORDER = ("baremetal", "slurm", "k8s")
# Always in a row's name; any other axis is named only where runs differ in it.
LABEL_AXES = ("framework", "model", "data", "batch_size", "image_size", "sequence_length", "precision", "xla")
# The launcher comes with the stack (srun with Slurm, an MPIJob with Kubernetes): a stack ratio may differ in it.
STACK_BOUND_AXES = ("launcher",)
# Versions that name the measuring tool's build, not the system measured: shown, never a reason to split runs.
TOOL_VERSIONS = ("benchrunner", "git_commit")
# Versions that say something only where GPUs were used: not shown for CPU-only runs (TensorFlow's wheel says it
# was built with CUDA whether or not the node has a GPU).
GPU_VERSIONS = ("tensorflow_built_cuda", "tensorflow_built_cudnn", "torch_built_cuda", "torch_built_cudnn", "nccl",
                "nvidia_driver")


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]
    note: str = ""


@dataclass
class Series:
    """The runs of one variant (a stack, or a side of a comparison) that agree on every axis in which runs differ,
    by GPU count."""

    variant: str
    workload: str
    axes: tuple[tuple[str, str], ...] = ()
    by_gpus: dict[int, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))

    def like_for_like(self, bound: Iterable[str] = STACK_BOUND_AXES) -> tuple[tuple[str, str], ...]:
        """What a run of another variant must match for a ratio: every axis but those that come with the variant
        (`bound`; with a stack, its launcher)."""
        return tuple(item for item in self.axes if item[0] not in set(bound))

    @property
    def unit(self) -> str:
        """What the series' runs count (images, tokens): one unit, or no figure adds them up."""
        return one_unit([s for runs in self.by_gpus.values() for s in runs], self.workload)

    def throughput(self, gpus: int) -> stats.Summary:
        runs = self.by_gpus[gpus]
        one_unit(runs, self.workload)
        return stats.describe([s["throughput"]["total_per_sec"] for s in runs])

    def spread(self, gpus: int) -> stats.Summary | None:
        """The interval a ratio takes for this side: over repeats where there are two or more runs, else the one run's
        over batch means of consecutive steps; None where that run has none (too few steps)."""
        runs = self.by_gpus[gpus]
        if len(runs) > 1:
            return self.throughput(gpus)
        within = runs[0]["throughput"]["total_batch_means"]
        return stats.Summary(**within) if within and within["n"] > 1 else None


def one_unit(summaries: list[dict[str, Any]], what: str) -> str:
    """The one unit these runs' throughput is in; runs in different units are refused, never added or divided."""
    units = sorted({s["throughput"]["unit"] for s in summaries})
    if len(units) != 1:
        raise results.ResultError(f"{what}: runs count throughput in different units ({', '.join(units)}): "
                                  "no figure compares them")
    return units[0]


def fraction(value: float) -> str:
    """A utilization as a percentage, with three significant digits: 41.3%, and a CPU's 0.0412% is not shown as 0."""
    return f"{100 * value:.3g}%"


def per_sec(unit: str) -> str:
    """A throughput's unit as a reader takes it in: images/s, tokens/s."""
    return f"{unit}/s"


def input_shape(workload: dict[str, Any]) -> str:
    """What one sample is: an image's size, or a sequence's length in tokens."""
    return f"{workload['image_size']}px" if "image_size" in workload else f"seq{workload['sequence_length']}"


def cpu_only(summary: dict[str, Any]) -> bool:
    """The run asked for no GPU and saw none (summaries made before asked_gpu was recorded: saw none)."""
    return not summary.get("asked_gpu") and not summary["provenance"].get("gpus")


def shown_versions(summaries: list[dict[str, Any]]) -> list[str]:
    """The version names worth showing for these runs: the GPU stack's only where some run used GPUs."""
    names = list(dict.fromkeys(name for s in summaries for name in s["versions"]))
    if all(cpu_only(s) for s in summaries):
        names = [name for name in names if name not in GPU_VERSIONS]
    return names


def point(summary: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two runs measurements of the same point: stack, rank count and every axis the report groups by."""
    return (summary["stack"], summary["ranks"], tuple(sorted(axes(summary).items())))


def workload_label(workload: dict[str, Any]) -> str:
    label = f"{workload['model']} {workload['data']} b{workload['batch_size']} {input_shape(workload)}"
    # The founding framework goes unnamed, so labels of runs from before there were two stay what they were.
    if workload.get("framework", frameworks.DEFAULT) != frameworks.DEFAULT:
        label = f"{workload['framework']} {label}"
    if workload["precision"] != "fp32":
        label += f" {workload['precision']}"
    label += " xla" if workload.get("xla") else ""
    return label + (f" preset={workload['preset']}" if workload.get("preset") else "")


def read_runs(results_dir: Path, run_ids: Iterable[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Training summaries and allreduce sweeps of the given runs, validated on load, and why each run that could
    not be read was not (its file and the problem)."""
    summaries, sweeps, unreadable = [], [], []
    for run_id in run_ids:
        run_dir = results_dir / run_id
        sweep = run_dir / "raw" / results.SWEEP_JSON
        try:
            if sweep.exists():
                sweeps.append(results.load(results.ALLREDUCE_RESULT, sweep))
            else:
                summaries.append(results.load(results.SUMMARY, run_dir / "summary.json"))
        except results.ResultError as exc:
            unreadable.append(str(exc))
    return summaries, sweeps, unreadable


def load_runs(results_dir: Path, run_ids: Iterable[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """As read_runs, for callers that need every run: one that cannot be read is an error naming its file."""
    summaries, sweeps, unreadable = read_runs(results_dir, run_ids)
    if unreadable:
        raise results.ResultError("; ".join(unreadable))
    return summaries, sweeps


def _text(value: Any) -> str:
    return "-" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def axes(summary: dict[str, Any]) -> dict[str, str]:
    """Everything a run was measured with besides its stack and GPU count: workload, network, launcher, container,
    versions."""
    # Settings an older summary predates read as benchrunner then trained, so it compares with newer runs on them.
    found = {key: _text(value) for key, value in workload_module.complete_record(summary["workload"]).items()}
    found |= {"network": summary["network"], "launcher": summary["launcher"],
              "container": containers.recorded(summary)["runtime"]}
    found |= {key: _text(value) for key, value in summary["versions"].items() if key not in TOOL_VERSIONS}
    return found


def differing_axes(summaries: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The axes in which these runs differ, with their values."""
    values: dict[str, set[str]] = defaultdict(set)
    for summary in summaries:
        for key, value in axes(summary).items():
            values[key].add(value)
    return {key: sorted(found) for key, found in sorted(values.items()) if len(found) > 1}


def _by_workload(summaries: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for summary in summaries:
        found[workload_label(summary["workload"])].append(summary)
    return found


def split_axes(summaries: list[dict[str, Any]], pooled: Iterable[str] = ()) -> dict[str, dict[str, list[str]]]:
    """Per workload, the axes beyond its name in which its runs differ (pooled ones excepted), with their values."""
    out = {}
    for label, members in sorted(_by_workload(summaries).items()):
        differing = {k: v for k, v in differing_axes(members).items() if k not in set(pooled) and k not in LABEL_AXES}
        if differing:
            out[label] = differing
    return out


def series(summaries: list[dict[str, Any]], variant_of: Any, pooled: Iterable[str] = ()) -> list[Series]:
    """Runs grouped by variant and by every axis in which runs of one workload differ (pooled axes excepted):
    no figure mixes them."""
    split = split_axes(summaries, pooled)
    grouped: dict[tuple[str, tuple[tuple[str, str], ...]], Series] = {}
    for base, members in _by_workload(summaries).items():
        names = list(split.get(base, {}))
        for summary in members:
            found = axes(summary)
            key = (("workload", base), *((name, found.get(name, "-")) for name in names))
            label = " ".join([base, *(f"{name}={value}" for name, value in key[1:])])
            variant = variant_of(summary)
            grouped.setdefault((variant, key), Series(variant, label, key)).by_gpus[summary["ranks"]].append(summary)
    return sorted(grouped.values(), key=lambda s: (s.workload, _variant_rank(s.variant)))


def _variant_rank(variant: str) -> tuple[int, str]:
    return (REFERENCE_ORDER.index(variant) if variant in REFERENCE_ORDER else len(REFERENCE_ORDER), variant)


def _ci(summary: stats.Summary) -> str:
    return f"{summary.ci95_low:.1f} - {summary.ci95_high:.1f}" if summary.n > 1 else "- (1 run)"


def _mfu(runs: list[dict[str, Any]], figure: str) -> str:
    """The mean over repeats of a run figure of utilization (mfu, mfu_vs_probe: each run's mean over its ranks), or
    "-" where any run has none (its page says why)."""
    values = [(s.get("utilization") or {}).get(figure) for s in runs]
    if any(v is None for v in values):
        return "-"
    return fraction(stats.describe([v["mean"] for v in values]).mean)


def throughput_table(all_series: list[Series]) -> Table:
    rows = []
    # MFU columns only where some run measured utilization (image models have no FLOPs count yet).
    measured = any(s.get("utilization") for series_ in all_series for runs in series_.by_gpus.values() for s in runs)
    for s in all_series:
        for gpus in sorted(s.by_gpus):
            t = s.throughput(gpus)
            runs = s.by_gpus[gpus]
            elapsed = [r["elapsed_s"] for r in runs if r["elapsed_s"] is not None]
            # The share of step time the rank that waited most spent waiting for input (summaries made before it
            # was measured have none).
            waits = [r["input"]["wait_fraction"] for r in runs if r.get("input", {}).get("wait_fraction") is not None]
            rows.append((s.workload, s.variant, str(gpus), per_sec(s.unit), str(t.n), f"{t.mean:.1f}",
                         f"{t.median:.1f}", f"{t.stdev:.1f}", _ci(t), f"{100 * (t.ci95_high - t.ci95_low) / 2 / t.mean:.1f}%",
                         f"{t.mean / gpus:.1f}",
                         *((_mfu(runs, "mfu"), _mfu(runs, "mfu_vs_probe")) if measured else ()),
                         f"{100 * stats.describe(waits).mean:.1f}%" if waits else "-",
                         f"{stats.describe(elapsed).mean:.1f}" if elapsed else "-",
                         f"{stats.describe([r['time_to_first_step_s'] for r in runs]).mean:.1f}"))
    return Table("Throughput (total over ranks, in each workload's unit; statistics over repeats)",
                 ("workload", "stack", "GPUs", "unit", "runs", "mean", "median", "stdev", "95% CI", "CI half-width",
                  "mean per device", *(("MFU vs peak", "MFU vs probe") if measured else ()),
                  "input wait", "job elapsed (s)", "time to first step (s)"), rows,
                 "Per device: the mean over GPUs (ranks). "
                 + ("MFU: model FLOPs over the device's dense peak at the run's precision, and over what a GEMM "
                    "probe reached on it, mean over ranks and repeats; - where a run has none (its page says why). "
                    if measured else "")
                 + "Input wait: the share of step time spent waiting for the next batch, on the rank that waited most "
                 "(mean over repeats); synthetic data has no input pipeline.")


def scaling_table(all_series: list[Series]) -> Table:
    rows = []
    for s in all_series:
        counts = sorted(s.by_gpus)
        base = counts[0]
        base_mean = s.throughput(base).mean
        for gpus in counts:
            mean = s.throughput(gpus).mean
            ideal = base_mean * gpus / base
            rows.append((s.workload, s.variant, str(gpus), f"{mean:.1f} {per_sec(s.unit)}", f"{ideal:.1f}",
                         f"{100 * mean / ideal:.1f}%"))
    return Table("Scaling efficiency", ("workload", "stack", "GPUs", "throughput", "ideal (linear from the smallest count)",
                                        "efficiency"), rows,
                 "Efficiency = measured throughput / (throughput at the smallest GPU count x GPUs / that count).")


def ratio(a: stats.Summary, b: stats.Summary,
          spread: tuple[stats.Summary, stats.Summary] | None = None) -> tuple[float, float]:
    """b/a and the half-width of its approximate 95% CI: first-order propagation of both means' CIs, or of `spread`'s
    (another interval of each side, such as one run's over its batch means), each relative to its own mean."""
    value = b.mean / a.mean
    rel = math.hypot(*((s.ci95_high - s.mean) / s.mean for s in spread or (a, b)))
    return value, value * rel


# What a ratio's interval is over, as its cell says it: every side's repeats (said by no label), or, where a side has
# a single run, that run's batch means of consecutive steps, which is within one run and never a repeat interval.
REPEATS = "repeats"
BATCH_MEANS = "batch means, 1 run"
SOME_BATCH_MEANS = "batch means of the 1-run side, repeats of the other"


@dataclass(frozen=True)
class Ratio:
    workload: str
    variant: str
    gpus: int
    value: float
    # None: a side has one run and that run no batch means (too few steps): no interval can be given.
    half_width: float | None
    # REPEATS, BATCH_MEANS or SOME_BATCH_MEANS; None with no interval.
    interval: str | None


def _ratio(ref: Series, s: Series, gpus: int) -> Ratio:
    """s's throughput over ref's at `gpus`, with the interval its runs allow (see REPEATS)."""
    a, b = ref.throughput(gpus), s.throughput(gpus)
    if min(a.n, b.n) > 1:
        return Ratio(s.workload, s.variant, gpus, *ratio(a, b), interval=REPEATS)
    spread_a, spread_b = ref.spread(gpus), s.spread(gpus)
    if spread_a is None or spread_b is None:
        return Ratio(s.workload, s.variant, gpus, b.mean / a.mean, None, None)
    interval = BATCH_MEANS if max(a.n, b.n) == 1 else SOME_BATCH_MEANS
    return Ratio(s.workload, s.variant, gpus, *ratio(a, b, (spread_a, spread_b)), interval=interval)


def ratios(all_series: list[Series], reference: str, bound: Iterable[str] = STACK_BOUND_AXES) -> list[Ratio]:
    """Each variant's throughput over the reference's, only between series alike in everything but the variant and
    the axes `bound` to it."""
    references = {s.like_for_like(bound): s for s in all_series if s.variant == reference}
    out = []
    for s in all_series:
        ref = references.get(s.like_for_like(bound))
        if s.variant == reference or ref is None:
            continue
        if ref.unit != s.unit:
            raise results.ResultError(f"{s.workload}: {s.variant} counts {s.unit}, {reference} {ref.unit}: no ratio "
                                      "between runs of different units")
        out.extend(_ratio(ref, s, gpus) for gpus in sorted(set(ref.by_gpus) & set(s.by_gpus)))
    return out


def unmatched(all_series: list[Series], reference: str) -> Table | None:
    """Series of other variants with no like-for-like reference: why no ratio is given for them."""
    references = [s for s in all_series if s.variant == reference]
    rows = []
    for s in all_series:
        if s.variant == reference or any(r.like_for_like() == s.like_for_like() for r in references):
            continue
        mine = dict(s.like_for_like())
        nearest = min(references, default=None,
                      key=lambda r: sum(mine.get(k) != v for k, v in r.like_for_like()))
        differs = ", ".join(f"{k} ({v} vs {mine.get(k, '-')})" for k, v in (nearest.like_for_like() if nearest else ())
                            if mine.get(k) != v) or f"no {reference} runs"
        rows.append((s.workload, s.variant, differs))
    if not rows:
        return None
    return Table(f"Not compared with {reference}: the runs differ in more than the stack", ("runs", "stack",
                 f"differs from the nearest {reference} runs in"), rows,
                 "Pool an axis on purpose with --pool AXIS; the report then says which it pooled.")


def _ratio_interval(r: Ratio) -> str:
    """A ratio's interval, saying what it is over where that is not every side's repeats."""
    if r.half_width is None:
        return "- (1 run)"
    return f"+/- {r.half_width:.3f}" + ("" if r.interval == REPEATS else f" ({r.interval})")


def _ratio_cells(r: Ratio) -> tuple[str, str, str]:
    """A ratio's value, its interval and the difference it makes."""
    return f"{r.value:.3f}", _ratio_interval(r), f"{100 * (r.value - 1):+.1f}%"


# How a ratio table's notes say what its intervals are over.
INTERVAL_NOTE = ("The interval propagates both sides' 95% intervals of the mean over repeats; where a side has a "
                 f"single run, that run's over batch means of consecutive steps, labelled ({BATCH_MEANS}): spread "
                 "within one run, not between repeats, so it leaves out what varies from run to run. - (1 run): a side's one "
                 "run has too few steps for batch means.")


def ratio_table(found: list[Ratio], reference: str) -> Table | None:
    if not found:
        return None
    rows = [(r.workload, f"{r.variant} / {reference}", str(r.gpus), *_ratio_cells(r)) for r in found]
    return Table(f"Throughput relative to {reference}", ("workload", "ratio", "GPUs", "value", "95% CI (approx.)",
                                                          "difference"), rows, INTERVAL_NOTE)


def _runtime(document: dict[str, Any]) -> str:
    return containers.recorded(document)["runtime"]


def _launcher(s: Series) -> str:
    """The launcher of a series' runs (one: runs of a workload that differ in it are series of their own)."""
    return next(iter(s.by_gpus.values()))[0]["launcher"]


def _versions_between(ref: Series, peer: Series, names: Iterable[str]) -> str:
    """The versions in which the runs of two series differ (the image's software against the virtualenv's)."""
    def values(s: Series, name: str) -> str:
        return ", ".join(sorted({_text(r["versions"].get(name)) for runs in s.by_gpus.values() for r in runs}))
    return "; ".join(f"{name} {values(peer, name)} vs {values(ref, name)}" for name in names
                     if values(peer, name) != values(ref, name)) or "none"


def container_table(summaries: list[dict[str, Any]], runtimes: Iterable[str] = ()) -> Table | None:
    """Each container's throughput over the virtualenv's, between runs of one stack alike in all else (workload,
    framework, launcher, network, GPUs), and every such pair one side of which has no completed run. `runtimes`: the
    containers the runs were planned in, so that one none of whose runs completed is missed by name too."""
    found = sorted(({_runtime(s) for s in summaries} | set(runtimes)) - {containers.NONE})
    if not found:
        return None
    # The image's software is meant to match the virtualenv's; where it does not, the pair is still compared, and
    # the versions that differ are listed beside its ratio.
    versions = sorted({name for s in summaries for name in s["versions"]} - set(TOOL_VERSIONS))
    rows = []
    for stack in sorted({s["stack"] for s in summaries}, key=_variant_rank):
        all_series = series([s for s in summaries if s["stack"] == stack], _runtime,
                            pooled=("container", *versions))
        measured = {(r.workload, r.variant, r.gpus): r for r in ratios(all_series, containers.NONE, bound=())}
        alike: dict[tuple[tuple[str, str], ...], dict[str, Series]] = defaultdict(dict)
        for s in all_series:
            alike[s.like_for_like(())][s.variant] = s
        for group in alike.values():
            ref = group.get(containers.NONE)
            for runtime in found:
                peer = group.get(runtime)
                # No run in this container, and none could be: the virtualenv runs' launcher cannot start one.
                if peer is None and (ref is None or runtime not in launchers.get(_launcher(ref)).containers):
                    continue
                sides = [s for s in (ref, peer) if s is not None]
                for gpus in sorted({g for s in sides for g in s.by_gpus}):
                    r = measured.get((sides[0].workload, runtime, gpus))
                    if r is None:
                        absent = runtime if ref is not None and gpus in ref.by_gpus else f"{containers.NONE} (virtualenv)"
                        rows.append((sides[0].workload, stack, f"{runtime} / {containers.NONE}", str(gpus), "MISSING", "-",
                                     f"no {absent} run of this point completed (failed or not run)", "-"))
                        continue
                    rows.append((r.workload, stack, f"{runtime} / {containers.NONE}", str(gpus), *_ratio_cells(r),
                                 _versions_between(group[containers.NONE], group[runtime], versions)))
    return Table("Throughput in a container relative to the virtualenv", (
        "workload", "stack", "ratio", "GPUs", "value", "95% CI (approx.)", "difference",
        "versions that differ (container vs virtualenv)"), rows,
        "Between runs of one stack alike in workload, framework, launcher, network and GPU count. " + INTERVAL_NOTE
        + " MISSING: one side of the pair has no completed run (the campaign's failed runs are listed above).")


def container_lines(summaries: list[dict[str, Any]]) -> list[str]:
    """The container runtime, image (path and digest) and mounts the containerized runs used; a runtime whose runs
    used different images is called out."""
    images: dict[str, set[str]] = defaultdict(set)
    for s in summaries:
        found = containers.recorded(s)
        if found["runtime"] != containers.NONE:
            images[found["runtime"]].add(f"image {found['image']} ({found['digest']}), mounts "
                                         f"{', '.join(found['mounts']) or 'none'}")
    return [f"container {runtime}: {'; '.join(sorted(used))}" + (" (DIFFERS between runs)" if len(used) > 1 else "")
            for runtime, used in sorted(images.items())]


def allreduce_table(sweeps: list[dict[str, Any]], variant_of: Any) -> Table | None:
    busbw = allreduce_curves(sweeps, variant_of)
    if not busbw:
        return None
    algbw = allreduce_curves(sweeps, variant_of, "algbw_bytes_per_s")
    # Small messages are latency-bound: their bandwidth rounds to 0.000 GB/s, their time is the figure.
    latency = allreduce_curves(sweeps, variant_of, "time_s")
    rows = []
    for (variant, ranks), points in sorted(busbw.items()):
        for size, values in sorted(points.items()):
            b = stats.describe(values)
            a = stats.describe(algbw[(variant, ranks)][size])
            t = stats.describe(latency[(variant, ranks)][size])
            rows.append((variant, str(ranks), _bytes(size), f"{t.mean * 1e6:.1f}", f"{a.mean / 1e9:.3f}",
                         f"{b.mean / 1e9:.3f}", _ci_scaled(b, 1e-9)))
    return Table("Allreduce time and bandwidth", ("stack", "ranks", "message", "time mean (us)", "algbw mean (GB/s)",
                                                  "busbw mean (GB/s)", "busbw 95% CI (GB/s)"), rows,
                 "Time: microseconds per operation, the slowest rank's (small messages are latency-bound: their time "
                 "is the figure). busbw = algbw x 2(n-1)/n, as nccl-tests define it; 0 for a single rank.")


def allreduce_curves(sweeps: list[dict[str, Any]], variant_of: Any,
                     metric: str = "busbw_bytes_per_s") -> dict[tuple[str, int], dict[int, list[float]]]:
    curves: dict[tuple[str, int], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for sweep in sweeps:
        for point in sweep["points"]:
            curves[(variant_of(sweep), sweep["ranks"])][point["bytes"]].append(point[metric])
    return curves


def _ci_scaled(summary: stats.Summary, scale: float) -> str:
    if summary.n < 2:
        return "- (1 run)"
    return f"{summary.ci95_low * scale:.3f} - {summary.ci95_high * scale:.3f}"


def _bytes(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:g} {unit}"
    return f"{size} B"


def _pyplot() -> Any:
    import matplotlib  # noqa: PLC0415 - heavy, only when a report is drawn

    matplotlib.use("Agg")  # off-screen: no display needed
    import matplotlib.pyplot as plt  # noqa: PLC0415 - only once the backend is chosen
    return plt


def _save(plt: Any, fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _losses(values: list[float | None]) -> list[float]:
    return [math.nan if v is None else v for v in values]


def throughput_plot(all_series: list[Series], path: Path) -> Path:
    plt = _pyplot()
    fig, (ax_t, ax_e) = plt.subplots(1, 2, figsize=(12, 4.5))
    for s in all_series:
        counts = sorted(s.by_gpus)
        summaries = [s.throughput(g) for g in counts]
        label = f"{s.workload} ({s.variant})"
        ax_t.errorbar(counts, [t.mean for t in summaries], yerr=[t.mean - t.ci95_low for t in summaries],
                      marker="o", capsize=4, label=label)
        base = summaries[0].mean / counts[0]
        ax_e.plot(counts, [100 * t.mean / (base * g) for t, g in zip(summaries, counts)], marker="o", label=label)
    counts = sorted({g for s in all_series for g in s.by_gpus})
    means = [s.throughput(g).mean for s in all_series for g in s.by_gpus]
    if max(means) > 10 * min(means):
        # Models an order of magnitude apart: a linear axis would flatten the slower ones.
        ax_t.set_yscale("log")
    units = ", ".join(sorted({per_sec(s.unit) for s in all_series}))
    ax_t.set(xlabel="GPUs (ranks)", ylabel=f"{units} (total)", title="Throughput, 95% CI over repeats", xticks=counts)
    ax_e.set(xlabel="GPUs (ranks)", ylabel="scaling efficiency (%)", title="Scaling efficiency", ylim=(0, 110),
             xticks=counts)
    for ax in (ax_t, ax_e):
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return _save(plt, fig, path)


def ratio_plot(found: list[Ratio], reference: str, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    lines: dict[str, tuple[list[int], list[float], list[float]]] = defaultdict(lambda: ([], [], []))
    for r in found:
        xs, ys, es = lines[f"{r.workload} {r.variant} / {reference}"]
        xs.append(r.gpus)
        ys.append(r.value)
        # No bar where there is no interval, rather than one of no width.
        es.append(math.nan if r.half_width is None else r.half_width)
    for label, (xs, ys, es) in lines.items():
        ax.errorbar(xs, ys, yerr=es, marker="o", capsize=4, label=label)
    ax.axhline(1.0, color="grey", linewidth=1)
    within = any(r.interval not in (REPEATS, None) for r in found)
    ax.set(xlabel="GPUs (ranks)", ylabel="throughput ratio",
           title=f"Relative to {reference}, 95% CI" + (" (over batch means where a side has 1 run)" if within else ""),
           xticks=sorted({x for xs, _, _ in lines.values() for x in xs}))
    ax.legend(fontsize="small")
    return _save(plt, fig, path)


def loss_plot(curves: list[tuple[str, list[float | None]]], path: Path, warmup_steps: int | None = None) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, losses in curves:
        ax.plot(range(1, len(losses) + 1), _losses(losses), label=label)
    if warmup_steps:
        ax.axvline(warmup_steps + 0.5, color="grey", linestyle="--", label="end of warmup")
    ax.set(xlabel="step", ylabel="training loss (rank 0)", title="Loss curves")
    ax.legend(fontsize="small")
    return _save(plt, fig, path)


def allreduce_plot(curves: dict[tuple[str, int], dict[int, list[float]]], path: Path,
                   raw: dict[str, Any] | None = None) -> Path:
    """Bus bandwidth by message size; with the link's raw bandwidth (a raw-bandwidth result) as a reference line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    highest = 0.0
    for (variant, ranks), points in sorted(curves.items()):
        sizes = sorted(points)
        means = [stats.describe(points[b]).mean / 1e9 for b in sizes]
        highest = max(highest, *means)
        ax.plot(sizes, means, marker=".", label=f"{variant}, {ranks} ranks")
    if raw:
        highest = max(highest, raw["bytes_per_s"] / 1e9)
        ax.axhline(raw["bytes_per_s"] / 1e9, color="grey", linestyle="--",
                   label=f"raw link bandwidth ({raw['tool']}): {raw['bytes_per_s'] / 1e9:.3f} GB/s")
    ax.set(xscale="log", xlabel="message size (bytes)", ylabel="bus bandwidth (GB/s)", title="Allreduce")
    # From zero, so the gap to the reference line reads as the fraction it is; headroom above the highest line.
    ax.set_ylim(0, 1.15 * highest or None)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    return _save(plt, fig, path)


def plots(all_series: list[Series], sweeps: list[dict[str, Any]], variant_of: Any, reference: str,
          out_dir: Path) -> list[Path]:
    written = []
    if all_series:
        written.append(throughput_plot(all_series, out_dir / "throughput.png"))
        found = ratios(all_series, reference)
        if found:
            written.append(ratio_plot(found, reference, out_dir / "ratio.png"))
        curves = [(f"{s.workload} ({s.variant}, {max(s.by_gpus)} GPUs)", s.by_gpus[max(s.by_gpus)][0]["loss"]["rank0"])
                  for s in all_series]
        written.append(loss_plot(curves, out_dir / "loss.png"))
    bandwidth = allreduce_curves(sweeps, variant_of)
    if bandwidth:
        written.append(allreduce_plot(bandwidth, out_dir / "allreduce.png"))
    return written


def raw_bandwidth_line(sweep: dict[str, Any], raw: dict[str, Any] | None) -> str:
    """The largest message's bus bandwidth against the link's raw bandwidth, or why there is no reference."""
    largest = max(sweep["points"], key=lambda p: p["bytes"])
    busbw = f"largest message ({_bytes(largest['bytes'])}): busbw {largest['busbw_bytes_per_s'] / 1e9:.3f} GB/s"
    if sweep["ranks"] == 1:
        # nccl-tests' bus factor 2(n-1)/n is 0 for one rank: nothing crosses a link, whatever the algorithm bandwidth.
        return (f"{busbw}: one rank, so no data crosses between ranks and the algorithm bandwidth is a copy within "
                "the rank; run two or more to measure a link")
    if raw is None:
        return f"{busbw}; no raw link bandwidth recorded (raw/{results.RAW_BANDWIDTH_JSON}), so no reference line"
    return (f"{busbw} = {100 * largest['busbw_bytes_per_s'] / raw['bytes_per_s']:.0f}% of the raw link bandwidth, "
            f"{raw['bytes_per_s'] / 1e9:.3f} GB/s ({raw['tool']} between {' and '.join(raw['hosts'])})")


def sweep_point(sweep: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two sweeps measurements of the same point: ranks, and how they were run and with what."""
    prov = sweep["provenance"]
    framework = frameworks.get(sweep.get("framework", frameworks.DEFAULT))
    return (sweep["ranks"], prov["stack"], prov["launcher"], prov["network"], prov.get("mpi"),
            *sorted(framework.versions(prov).items()))


def _largest_busbw(sweep: dict[str, Any]) -> float:
    return max(sweep["points"], key=lambda p: p["bytes"])["busbw_bytes_per_s"]


def sweep_previous_line(run_dir: Path, sweep: dict[str, Any]) -> list[str]:
    """The previous sweep of the same point in the results folder, and the change of the largest message's busbw."""
    if not sweep.get("measured_at"):
        return ["previous run of this point: not looked for (this sweep recorded no date)"]
    others, unreadable = earlier_documents(run_dir, results.ALLREDUCE_RESULT)
    earlier = [s for s in others if s.get("measured_at") and sweep_point(s) == sweep_point(sweep)
               and when(s["measured_at"]) < when(sweep["measured_at"])]
    if not earlier:
        line = f"previous run of this point: none in {run_dir.parent} (same ranks, stack, launcher, network, versions)"
    else:
        previous = max(earlier, key=lambda s: when(s["measured_at"]))
        change = 100 * (_largest_busbw(sweep) / _largest_busbw(previous) - 1)
        line = (f"previous run of this point: {previous['run_id']} ({day(previous['measured_at'])}), largest "
                f"message busbw {_largest_busbw(previous) / 1e9:.3f} GB/s; change since: {change:+.1f}%")
    return [line, *unreadable_line(unreadable)]


def deferred_plots_line(run_dir: Path) -> str:
    """What a run's report says in place of its plot when drawing it was left for later (a campaign draws every run's
    plot once, at its end, rather than paying for matplotlib in every run)."""
    return f"plots: not drawn yet (a campaign draws them at its end; `benchrunner report {run_dir}` draws them now)"


def write_sweep(run_dir: Path, sweep: dict[str, Any], *, plots: bool = True) -> Path:
    """report.md, report.html and a plot for one allreduce run, with the link's raw bandwidth where it was measured
    (raw/raw-bandwidth.json) as the reference line; plots=False leaves the plot for later and says so."""
    def stack_of(document: dict[str, Any]) -> str:
        return document["provenance"]["stack"]

    raw_path = run_dir / "raw" / results.RAW_BANDWIDTH_JSON
    raw = results.load(results.RAW_BANDWIDTH, raw_path) if raw_path.exists() else None
    table = allreduce_table([sweep], stack_of)
    tables = [table] if table else []
    figures = [allreduce_plot(allreduce_curves([sweep], stack_of), run_dir / SWEEP_PLOT, raw)] if plots else []
    title = f"Allreduce sweep {sweep['run_id']}"
    intro = [f"run date: {day(sweep['measured_at']) if sweep.get('measured_at') else 'not recorded'}",
             f"{sweep['ranks']} ranks, stack {sweep['provenance']['stack']}, launcher {sweep['provenance']['launcher']}, "
             f"network {sweep['provenance']['network']}",
             raw_bandwidth_line(sweep, raw), *sweep_previous_line(run_dir, sweep),
             *([] if plots else [deferred_plots_line(run_dir)])]
    links = job_files(run_dir)
    results.write_atomic(run_dir / REPORT_MD, markdown(title, intro, tables, figures, run_dir, links))
    results.write_atomic(run_dir / REPORT_HTML, html_page(title, intro, tables, figures, links))
    return run_dir / REPORT_MD


def write_stalled(run_dir: Path, stalled: dict[str, Any]) -> Path:
    """report.md and report.html of a job the watchdog ended as stalled: which rank, on which host, and every rank's
    state; nothing was measured."""
    gathered = sorted((run_dir / "raw").glob("rank-*.json"))
    intro = [f"STALLED: {stalled['reason'].removeprefix('stalled: ')}",
             f"detected: {day(stalled['detected_at'])}, {stalled['elapsed_s']:.0f} s after the launch (stall timeout "
             f"{stalled['stall_timeout_s']:g} s); the launching node ended the job, so nothing was measured",
             f"rank results that reached the control host: {len(gathered)} of {len(stalled['ranks'])}"]
    rows = [(str(r["rank"]), r["host"] or "-", r["state"] + (" (STALLED)" if r["rank"] in stalled["stalled"] else ""),
             str(r["steps"]), f"{r['silent_s']:.1f}") for r in stalled["ranks"]]
    tables = [Table("Ranks", ("rank", "host", "state", "completed steps", "since its last beat (s)"), rows,
                    "Every rank beats on its output every few seconds and after each step; a rank that beats no "
                    "more is stopped or wedged, and ranks that all beat but complete no step wait in a hung "
                    "collective.")]
    title = f"Run {stalled['run_id']}: stalled"
    links = job_files(run_dir)
    results.write_atomic(run_dir / REPORT_MD, markdown(title, intro, tables, [], run_dir, links))
    results.write_atomic(run_dir / REPORT_HTML, html_page(title, intro, tables, [], links))
    return run_dir / REPORT_MD


def job_files(run_dir: Path) -> list[str]:
    """What the job asked for, kept in the run folder beside the results: its document, and what its launcher left
    (the list the benchmark play gathers); none for a run without its job."""
    path = run_dir / launchers.JOB_JSON
    if not path.is_file():
        return []
    job = results.strict_loads(path.read_text())
    kept = launchers.kept_files(job["launcher"], job["stack"])
    return [name for name in kept if (run_dir / name).is_file()]


def when(timestamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(timestamp)


def day(timestamp: str) -> str:
    """A recorded date-time as a reader takes it in: 2026-11-23 12:37 UTC."""
    return when(timestamp).astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def earlier_documents(run_dir: Path, kind: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The other runs' summaries (or sweeps) in run_dir's results folder, and why any could not be read."""
    found, unreadable = [], []
    for other in sorted(run_dir.parent.iterdir()):
        path = other / ("summary.json" if kind == results.SUMMARY else f"raw/{results.SWEEP_JSON}")
        if other.resolve() == run_dir.resolve() or other.is_symlink() or not path.exists():
            continue
        try:
            found.append(results.load(kind, path))
        except results.ResultError as exc:
            unreadable.append(str(exc))
    return found, unreadable


def unreadable_line(unreadable: list[str]) -> list[str]:
    if not unreadable:
        return []
    return [f"could not read {len(unreadable)} other run(s) when looking for the previous one: " + "; ".join(unreadable)]


def markdown(title: str, intro: list[str], tables: list[Table], figures: list[Path], out_dir: Path,
             links: Iterable[str] = ()) -> str:
    """links: files beside the report (the job's document and script), linked under the intro."""
    lines = [f"# {title}", "", *intro, ""]
    links = list(links)
    if links:
        lines += ["job: " + " · ".join(f"[{name}]({name})" for name in links), ""]
    for table in tables:
        lines += [f"## {table.title}", "", "| " + " | ".join(table.header) + " |",
                  "|" + "|".join("---" for _ in table.header) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in table.rows]
        lines += ["", table.note, ""] if table.note else [""]
    for figure in figures:
        lines += [f"![{figure.stem}]({figure.relative_to(out_dir)})", ""]
    return "\n".join(lines)


def html_page(title: str, intro: list[str], tables: list[Table], figures: list[Path], links: Iterable[str] = ()) -> str:
    """One file with the figures inlined, so it can be mailed or attached as it is; links point beside it."""
    e = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>"
             "body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#eee}"
             "td:first-child,td:nth-child(2),th:first-child,th:nth-child(2){text-align:left}"
             "p{margin:0.3em 0}.warn{color:#b00000}</style></head><body>", f"<h1>{e(title)}</h1>"]
    parts += [_intro_html(line) for line in intro if line]
    links = list(links)
    if links:
        parts.append("<p>job: " + " · ".join(f"<a href='{e(name)}'>{e(name)}</a>" for name in links) + "</p>")
    for table in tables:
        parts.append(f"<h2>{e(table.title)}</h2><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in table.header) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>" for row in table.rows]
        parts.append("</table>" + (f"<p>{e(table.note)}</p>" if table.note else ""))
    for figure in figures:
        data = base64.b64encode(figure.read_bytes()).decode()
        parts.append(f"<figure><img alt='{e(figure.stem)}' src='data:image/png;base64,{data}'></figure>")
    return "\n".join([*parts, "</body></html>"]) + "\n"


# Words in an intro line that a reader must not miss.
WARNINGS = ("FAILED", "SHORT", "DIFFERS", "POOLED", "STALLED", "could not read")


def _intro_html(line: str) -> str:
    """An intro line with its label ("sanity:") in bold, in red where it warns."""
    e = html.escape
    label, sep, rest = line.partition(": ")
    text = f"<b>{e(label)}:</b> {e(rest)}" if sep and len(label) < 40 else e(line)
    warn = " class='warn'" if any(word in line for word in WARNINGS) else ""
    return f"<p{warn}>{text}</p>"


def provenance_lines(summaries: list[dict[str, Any]]) -> list[str]:
    """What the runs were measured with; differing versions across runs are called out."""
    lines = []
    for name in sorted(shown_versions(summaries)):
        values = sorted({str(s["versions"].get(name)) for s in summaries})
        flag = "" if len(values) == 1 else " (DIFFERS between runs)"
        lines.append(f"{name}: {', '.join(values)}{flag}")
    return lines


def _axes_text(differing: dict[str, list[str]]) -> str:
    return "; ".join(f"{k} ({', '.join(v)})" for k, v in differing.items())


def grouping_lines(summaries: list[dict[str, Any]], pooled: Iterable[str]) -> list[str]:
    """Which axes split a workload's runs into rows of their own, and which were pooled on request."""
    pooled = list(pooled)
    lines = [f"Runs of {label} differ in {_axes_text(differing)}: each value has rows of its own."
             for label, differing in split_axes(summaries, pooled).items()]
    lines = lines or ["Runs of one workload differ in no axis beyond their stack and GPU count."]
    for label, members in sorted(_by_workload(summaries).items()):
        merged = {k: v for k, v in differing_axes(members).items() if k in pooled}
        if merged:
            lines.append(f"POOLED on request although runs of {label} differ in: {_axes_text(merged)}.")
    return lines


def write(out_dir: Path, title: str, summaries: list[dict[str, Any]], sweeps: list[dict[str, Any]],
          variant_of: Any, intro: list[str], reference: str | None = None, pooled: Iterable[str] = (),
          runtimes: Iterable[str] = ()) -> Path:
    """Write report.md, report.html and plots/ for these runs into out_dir. Ratios are to `reference` (default: the
    first present of REFERENCE_ORDER), between runs alike in every axis but the stack and the `pooled` ones; each
    container's to the virtualenv's (`runtimes`: the containers runs were planned in, see container_table)."""
    if not summaries and not sweeps:
        raise results.ResultError("no completed runs to report on")
    pooled = list(pooled)
    unknown = sorted(set(pooled) - {key for summary in summaries for key in axes(summary)})
    if unknown:
        raise results.ResultError(f"cannot pool {', '.join(unknown)}: not an axis of these runs")
    all_series = series(summaries, variant_of, pooled)
    variants = sorted({s.variant for s in all_series} | {variant_of(s) for s in sweeps}, key=_variant_rank)
    reference = reference or variants[0]
    tables = [throughput_table(all_series), scaling_table(all_series)] if all_series else []
    tables += [t for t in (ratio_table(ratios(all_series, reference), reference),
                           unmatched(all_series, reference), container_table(summaries, runtimes),
                           allreduce_table(sweeps, variant_of)) if t]
    figures = plots(all_series, sweeps, variant_of, reference, out_dir / PLOTS_DIR)
    if summaries:
        intro = [*intro, "", *grouping_lines(summaries, pooled),
                 "Measured with: " + "; ".join(provenance_lines(summaries)), *container_lines(summaries)]
    results.write_atomic(out_dir / REPORT_MD, markdown(title, intro, tables, figures, out_dir))
    results.write_atomic(out_dir / REPORT_HTML, html_page(title, intro, tables, figures))
    return out_dir / REPORT_MD
