"""A hung rank named: ranks beat on their stdout, and the watchdog that reads it ends a job whose ranks stop.

Every rank started through `benchrunner launch` by a launcher whose job is watched (Launcher.beats) prints a beat
line every BEAT_S seconds from a daemon thread, and a last one when it is done:
`BENCHRUNNER-BEAT:1:<rank>:<host>:<stage>:<steps>:<run|done>`, stage being the last start-up stage it finished
(train.STARTUP_STAGES; STARTED before the first) and steps the steps (or sweep points) it completed.
The thread keeps beating while the main thread waits inside a collective (the frameworks release the GIL there)
and falls silent when the process is stopped (SIGSTOP) or wedged, so two stalls tell apart:
  silent       a rank beat no more for stall_timeout_s: that rank, on that host, is stopped or wedged;
  no progress  every rank beats but none finished a start-up stage or completed a step for stall_timeout_s (for
               startup_timeout_s until every rank completed its first step): a collective hung; the ranks at the
               lowest step are named, as the ones the others wait for.
A first step can take far longer than the rest (a compile, the communicators' setup, on shared or loaded nodes), so
start-up has its own limit, as torchtitan gives initialization and the first step a longer timeout than training's.

supervise() runs the launcher as a child in its own process group, passes its output through (beat lines taken
out), and on a stall kills the group, writes STALLED_JSON in the run's folder (gathered to the control host with
the rank results) and exits STALLED_EXIT; past the job's timeout_s it kills the group and exits TIMED_OUT_EXIT.
It runs on the launching node around the launcher (launchers.execute), or inside the job around the launcher where
the ranks' output reaches only the job (`benchrunner watch` in srun's batch script, on the batch host).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from benchrunner import results
from benchrunner.rank_env import LAUNCHER_VARIABLES, SINGLE, variables_source

MARKER = "BENCHRUNNER-BEAT:1"
# A rank's stage before it finished any of its start-up.
STARTED = "started"
# Seconds between a rank's beats; a stall timeout is at least MIN_BEATS of them, so that a late beat is no stall.
BEAT_S = 2.0
MIN_BEATS = 5
MIN_STALL_TIMEOUT_S = BEAT_S * MIN_BEATS
# A rank heard within this long is alive: a job whose ranks all are, and none progresses, waits in a hung collective;
# one rank heard longer ago is going silent, and is named as such once its silence reaches the stall timeout.
ALIVE_S = 3 * BEAT_S
STALLED_JSON = "stalled.json"
# The benchrunner command that runs a launcher watched where its job runs (srun's batch script).
COMMAND = "watch"
# Exit statuses of `benchrunner launch` for a job it ended: 124 is timeout(1)'s, which the benchmark play wraps it in.
STALLED_EXIT = 3
TIMED_OUT_EXIT = 124
# After SIGTERM, how long the launcher has to take its ranks down before its process group is killed.
GRACE_S = 10.0
# After the launcher exited, how long output still held open (by a rank it left) is read.
DRAIN_S = 2.0
TICK_S = 0.2
_BEAT = re.compile(rf"{MARKER}:(?P<rank>\d+):(?P<host>[^:\s]+):(?P<stage>[a-z_]+):(?P<progress>\d+):"
                   r"(?P<state>run|done)")


# The rank's side.

class Beater:
    """One rank's beats: from a daemon thread every interval, and whenever asked (its last, done)."""

    def __init__(self, rank: int, host: str, interval_s: float = BEAT_S,
                 write: Callable[[str], None] = lambda line: _write_line(1, line)):
        self.rank, self.host, self.interval_s, self.write = rank, host, interval_s, write
        self.stage = STARTED
        self.progress = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="benchrunner-beat", daemon=True)

    def line(self, state: str) -> str:
        return f"{MARKER}:{self.rank}:{self.host}:{self.stage}:{self.progress}:{state}\n"

    def start(self) -> None:
        self.write(self.line("run"))
        self._thread.start()

    def stop(self, done: bool) -> None:
        self._stop.set()
        self._thread.join()
        if done:
            self.write(self.line("done"))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.write(self.line("run"))


def _write_line(fd: int, line: str) -> None:
    # One write(2) of a short line: whole in a pipe (PIPE_BUF), never cut by the main thread's buffered output.
    os.write(fd, line.encode())


_beater: Beater | None = None


def rank_of(environ: Mapping[str, str]) -> int | None:
    """This rank's number as its launcher's variables say (Horovod's own where none of those are), else None."""
    source = variables_source(environ)
    value = environ.get("HOROVOD_RANK", "0") if source == SINGLE else environ.get(dict(LAUNCHER_VARIABLES)[source][0], "")
    return int(value) if value.isascii() and value.isdigit() else None


@contextmanager
def beating(enabled: bool, environ: Mapping[str, str] = os.environ) -> Iterator[None]:
    """Beat while the rank program runs (enabled: its launcher's node reads the beats); a last beat says it is done,
    none if it failed (its launcher ends the job)."""
    global _beater
    rank = rank_of(environ)
    if not enabled or rank is None:
        yield
        return
    _beater = Beater(rank, socket.gethostname())
    _beater.start()
    done = False
    try:
        yield
        done = True
    finally:
        _beater.stop(done)
        _beater = None


def advance() -> None:
    """One more step (or sweep point) completed: what tells a stalled job from a slow one."""
    if _beater is not None:
        _beater.progress += 1


def reached(stage: str) -> None:
    """A start-up stage finished: progress too, so that a start longer than the stall timeout is no stall unless one
    of its stages is."""
    if _beater is not None:
        _beater.stage = stage


# The launching node's side.

@dataclass(frozen=True)
class Beat:
    rank: int
    host: str
    stage: str
    progress: int
    done: bool


def parse(line: str) -> Beat | None:
    """The beat a line of the launcher's output carries (after a tag mpirun may put before it), else None."""
    start = line.find(MARKER)
    match = _BEAT.fullmatch(line[start:].rstrip("\r\n")) if start >= 0 else None
    if match is None:
        return None
    return Beat(int(match["rank"]), match["host"], match["stage"], int(match["progress"]), match["state"] == "done")


@dataclass
class RankState:
    rank: int
    # Where it beat from; None before its first beat.
    host: str | None = None
    stage: str = STARTED
    progress: int = 0
    done: bool = False
    heard_at: float | None = None

    def silent_s(self, now: float, since: float) -> float:
        """Since its last beat; one never heard from, since `since`."""
        return now - (self.heard_at if self.heard_at is not None else since)

    def record(self, now: float, since: float) -> dict[str, Any]:
        silent = self.silent_s(now, since)
        state = "done" if self.done else ("running" if self.heard_at is not None else "never heard")
        return {"rank": self.rank, "host": self.host, "stage": self.stage, "steps": self.progress, "state": state,
                "silent_s": round(silent, 3)}


@dataclass
class Stall:
    cause: str  # "silent" or "no progress"
    ranks: list[RankState]
    seconds: float

    def reason(self) -> str:
        named = ", ".join(f"rank {r.rank} on host {r.host}" if r.host else f"rank {r.rank} (never heard from)"
                          for r in self.ranks)
        if self.cause == "silent":
            at = ", ".join(f"after {r.progress} completed step{'' if r.progress == 1 else 's'}" if r.progress
                           else f"starting, at stage {r.stage}" for r in self.ranks)
            return f"stalled: {named} went silent (no beat for {self.seconds:.0f} s, {at}): stopped or wedged"
        starting = " (start-up and first step: the start-up timeout)" if self.ranks[0].progress == 0 else ""
        return (f"stalled: {named} at the lowest step ({self.ranks[0].progress} completed): no rank finished a "
                f"step or start-up stage for {self.seconds:.0f} s{starting} though every rank beats (a hung "
                "collective)")


@dataclass
class Watch:
    """What the beats said of each rank, and whether that is a stall. The clocks start at the first beat: before it
    the launcher itself is starting (torchrun imports torch, mpirun reaches its nodes), which only the job's timeout
    bounds; from it, a rank never heard from is as silent as one that stopped beating."""

    stall_timeout_s: float
    started: float
    ranks: dict[int, RankState] = field(default_factory=dict)
    first_heard: float | None = None
    progress_at: float = 0.0
    # Without progress before every rank's first step.
    startup_timeout_s: float = 0.0

    @classmethod
    def of(cls, ranks: int, stall_timeout_s: float, started: float,
           startup_timeout_s: float | None = None) -> Watch:
        """startup_timeout_s None: the stall timeout."""
        return cls(stall_timeout_s, started, {rank: RankState(rank) for rank in range(ranks)},
                   startup_timeout_s=stall_timeout_s if startup_timeout_s is None else startup_timeout_s)

    def since(self, now: float) -> float:
        return self.first_heard if self.first_heard is not None else now

    def heard(self, beat: Beat, now: float) -> None:
        state = self.ranks.setdefault(beat.rank, RankState(beat.rank, beat.host))
        if self.first_heard is None:
            self.first_heard = self.progress_at = now
        if beat.progress > state.progress or beat.stage != state.stage or (beat.done and not state.done):
            self.progress_at = now
        state.host, state.stage, state.progress, state.done = beat.host, beat.stage, beat.progress, beat.done
        state.heard_at = now

    def stall(self, now: float) -> Stall | None:
        running = [r for r in self.ranks.values() if not r.done]
        if not running:
            return None
        if self.first_heard is None:
            return None
        silent = [r for r in running if r.silent_s(now, self.first_heard) > self.stall_timeout_s]
        if silent:
            return Stall("silent", silent, min(r.silent_s(now, self.first_heard) for r in silent))
        lowest = min(r.progress for r in running)
        limit = self.startup_timeout_s if lowest == 0 else self.stall_timeout_s
        if now - self.progress_at > limit and all(r.silent_s(now, self.first_heard) <= ALIVE_S for r in running):
            return Stall("no progress", [r for r in running if r.progress == lowest], now - self.progress_at)
        return None

    def document(self, run_id: str, stall: Stall, now: float) -> dict[str, Any]:
        return {"kind": results.STALLED, "schema_version": results.version_of(results.STALLED), "run_id": run_id,
                "detected_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "stall_timeout_s": self.stall_timeout_s,
                "startup_timeout_s": self.startup_timeout_s,
                "elapsed_s": round(now - self.started, 3),
                "cause": stall.cause, "reason": stall.reason(),
                "stalled": [r.rank for r in stall.ranks],
                "ranks": [r.record(now, self.since(now)) for _, r in sorted(self.ranks.items())]}


@dataclass(frozen=True)
class Limits:
    timeout_s: float
    stall_timeout_s: float
    # None: the stall timeout.
    startup_timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.startup_timeout_s is None:
            object.__setattr__(self, "startup_timeout_s", self.stall_timeout_s)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class _Output:
    """The launcher's stdout passed through line by line, its beats taken out and handed to the watch."""

    def __init__(self, out: BinaryIO, heard: Callable[[Beat], None]):
        self.out, self.heard, self.pending = out, heard, b""

    def feed(self, data: bytes) -> None:
        *lines, self.pending = (self.pending + data).split(b"\n")
        for line in lines:
            beat = parse(line.decode("utf-8", "replace"))
            if beat is None:
                self.out.write(line + b"\n")
            else:
                self.heard(beat)
        self.out.flush()

    def close(self) -> None:
        if self.pending:
            self.feed(b"\n")


def _child(start: Callable[[], int], out_w: int, err_w: int) -> None:
    """In the forked child: its own process group, output into the pipes, the launcher started; never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        code = start()
    except (ValueError, OSError) as exc:
        print(f"benchrunner: {exc}", file=sys.stderr)
        code = 2
    except BaseException:  # whatever it was is printed: the child must not return into the caller
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def supervise(start: Callable[[], int], *, run_id: str, run_dir: Path, ranks: int, limits: Limits,
              clock: Callable[[], float] = time.monotonic, grace_s: float = GRACE_S) -> int:
    """Run start() (which starts the launcher and returns its exit status, or replaces the process with it) as a
    child in its own process group, watching the beats of its `ranks` ranks; its exit status, or STALLED_EXIT /
    TIMED_OUT_EXIT for a job ended here."""
    # An earlier attempt's record (a campaign's run again, same run id) must not pass for this one's.
    (run_dir / STALLED_JSON).unlink(missing_ok=True)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        _child(start, out_w, err_w)
    os.close(out_w)
    os.close(err_w)
    try:
        os.setpgid(pid, pid)  # also here, so the group exists before the first signal whoever runs first
    except OSError:
        pass  # the child made it already (EACCES once it has exec'd) or has exited
    watch = Watch.of(ranks, limits.stall_timeout_s, clock(), limits.startup_timeout_s)
    output = _Output(sys.stdout.buffer, lambda beat: watch.heard(beat, clock()))
    # Ctrl-C and timeout(1)'s SIGTERM reach this process only: the launcher's group gets them too.
    forwarded = {sig: signal.signal(sig, lambda number, _: _signal_group(pid, number))
                 for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _follow(pid, {out_r: output.feed, err_r: _passthrough(sys.stderr.buffer)}, watch, limits, run_id,
                       run_dir, clock, grace_s, output)
    finally:
        for sig, handler in forwarded.items():
            signal.signal(sig, handler)


def _passthrough(out: BinaryIO) -> Callable[[bytes], None]:
    def write(data: bytes) -> None:
        out.write(data)
        out.flush()

    return write


def _signal_group(pid: int, number: int) -> None:
    try:
        os.killpg(pid, number)
    except ProcessLookupError:
        pass  # the group is gone already


def _descendants(root: int) -> set[int]:
    """Every process below root, from /proc (none where there is no /proc): torchrun starts its ranks in sessions of
    their own, out of reach of the launcher's process group."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal_all(pid: int, processes: set[int], *numbers: int) -> None:
    """The launcher's process group and these processes below it, each signal in turn."""
    for number in numbers:
        _signal_group(pid, number)
        for process in processes:
            try:
                os.kill(process, number)
            except ProcessLookupError:
                pass  # ended meanwhile


def _follow(pid: int, readers: dict[int, Callable[[bytes], None]], watch: Watch, limits: Limits, run_id: str,
            run_dir: Path, clock: Callable[[], float], grace_s: float, output: _Output) -> int:
    selector = selectors.DefaultSelector()
    for fd in readers:
        selector.register(fd, selectors.EVENT_READ)
    status: int | None = None
    ended: int | None = None  # STALLED_EXIT or TIMED_OUT_EXIT once this process ended the job
    killed_at = exited_at = 0.0
    below: set[int] = set()  # the launcher's processes when the job was ended
    while selector.get_map():
        for key, _ in selector.select(TICK_S):
            data = os.read(key.fd, 65536)
            if data:
                readers[key.fd](data)
            else:
                selector.unregister(key.fd)
                os.close(key.fd)
        now = clock()
        if status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status, exited_at = raw, now
        if status is not None:
            if now - exited_at > DRAIN_S:
                break
            continue
        if ended is None:
            stall = watch.stall(now)
            if stall is not None:
                results.save(results.STALLED, watch.document(run_id, stall, now), run_dir / STALLED_JSON)
                print(f"benchrunner: {stall.reason()}; the job was ended (see {run_dir / STALLED_JSON})",
                      file=sys.stderr, flush=True)
                ended = STALLED_EXIT
            elif now - watch.started > limits.timeout_s:
                states = "; ".join(f"rank {r['rank']} on {r['host'] or 'a host not known'}: {r['state']}, "
                                   f"{r['steps']} steps"
                                   for r in (s.record(now, watch.since(now)) for _, s in sorted(watch.ranks.items())))
                print(f"benchrunner: the job's timeout_s ({limits.timeout_s:g} s) passed with no stall seen; the job "
                      f"was ended ({states})", file=sys.stderr, flush=True)
                ended = TIMED_OUT_EXIT
            if ended is not None:
                killed_at, below = now, _descendants(pid)
                # A stopped rank acts on SIGTERM only once continued.
                _signal_all(pid, below, signal.SIGTERM, signal.SIGCONT)
        elif now - killed_at > grace_s:
            below |= _descendants(pid)
            _signal_all(pid, below, signal.SIGKILL)
            killed_at = float("inf")
    for fd in list(selector.get_map()):
        os.close(fd)
    selector.close()
    output.close()
    if ended is not None:
        # Whatever is left of the launcher's processes, before its leader is reaped.
        _signal_all(pid, below | _descendants(pid), signal.SIGKILL)
    if status is None:
        _, status = os.waitpid(pid, 0)
    return ended if ended is not None else _exit_code(status)
