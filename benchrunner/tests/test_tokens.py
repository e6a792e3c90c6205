"""Token folders: text tokenised into a flat array of ids and its manifest, the check before launch, and the batches a
torch rank reads from them or makes up."""

from __future__ import annotations

import hashlib
import json
import sys
import types
from array import array
from pathlib import Path

import pytest
import torch

from benchrunner import cli, dataset, tokens
from benchrunner.frameworks._torch import tokens as torch_tokens
from benchrunner.frameworks._torch.distributed import Placement
from benchrunner.workload import Workload

CPU = torch.device("cpu")
# Multi-byte UTF-8 (2, 3 and 4 bytes a character), Windows line ends and blank lines, which must survive as they are.
TEXTS = ("naïve café: 日本語のテキスト\r\nsecond line\n\n  indented 🙂\n", "Ünïcödé ends without a line end")


def write_texts(folder: Path, *texts: str) -> list[Path]:
    paths = []
    for index, text in enumerate(texts):
        path = folder / f"text{index}.txt"
        path.write_bytes(text.encode())
        paths.append(path)
    return paths


def ids_of(folder: Path) -> list[int]:
    values = array("H", (folder / tokens.BIN).read_bytes())
    if sys.byteorder != "little":
        values.byteswap()
    return values.tolist()


def workload(folder: Path, sequence_length: int = 8, batch_size: int = 4) -> Workload:
    return Workload(model="llama-tiny", framework="pytorch-ddp", data="tokens", data_dir=str(folder),
                    sequence_length=sequence_length, batch_size=batch_size)


@pytest.fixture
def folder(tmp_path):
    return tmp_path / "tokens"


@pytest.fixture
def made(tmp_path, folder):
    tokens.write(folder, write_texts(tmp_path, *TEXTS))
    return folder


def test_bytes_round_trip_two_files_joined_by_end_of_text(tmp_path, folder, monkeypatch):
    # Pieces of 7 characters: every file is read in several, cut through words and multi-byte characters' neighbours.
    monkeypatch.setattr(tokens, "PIECE_CHARS", 7)
    sources = write_texts(tmp_path, *TEXTS)
    manifest = tokens.write(folder, sources)
    ids = ids_of(folder)
    assert ids.index(tokens.BYTES_END_OF_TEXT) == len(TEXTS[0].encode())
    first, second = ids[:len(TEXTS[0].encode())], ids[len(TEXTS[0].encode()) + 1:]
    assert bytes(first).decode() == TEXTS[0] and bytes(second).decode() == TEXTS[1]
    assert manifest == json.loads((folder / tokens.MANIFEST).read_text())
    assert manifest["dtype"] == "uint16" and manifest["vocab_size"] == 257 and manifest["tokenizer"] == "bytes"
    assert manifest["tokens"] == len(ids) == len(TEXTS[0].encode()) + 1 + len(TEXTS[1].encode())
    assert manifest["sha256"] == hashlib.sha256((folder / tokens.BIN).read_bytes()).hexdigest()
    assert manifest["sources"] == [
        {"path": str(sources[0]), "bytes": len(TEXTS[0].encode()), "tokens": len(TEXTS[0].encode()), "forced_cuts": 0},
        {"path": str(sources[1]), "bytes": len(TEXTS[1].encode()), "tokens": len(TEXTS[1].encode()), "forced_cuts": 0}]
    assert tokens.read(folder) == tokens.Folder(folder / tokens.BIN, "uint16", 257, "bytes", len(ids))
    # Nothing but the array and its manifest: no temporary file left behind.
    assert sorted(p.name for p in folder.iterdir()) == [tokens.BIN, tokens.MANIFEST]


def test_a_file_that_is_not_utf8_is_refused_and_the_folder_kept(tmp_path, made):
    before = {p.name: p.read_bytes() for p in made.iterdir()}
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("café".encode("latin-1"))
    with pytest.raises(ValueError, match=rf"--text {latin}: not UTF-8 text \(unexpected end of data\)"):
        tokens.write(made, [latin])
    assert {p.name: p.read_bytes() for p in made.iterdir()} == before


def test_missing_and_empty_texts_are_refused_before_anything_is_written(tmp_path, folder):
    with pytest.raises(ValueError, match=rf"--text {tmp_path / 'absent.txt'}: no such file; --text {tmp_path}: not a file"):
        tokens.write(folder, [tmp_path / "absent.txt", tmp_path])
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match=rf"--text {empty}: no text to tokenise"):
        tokens.write(folder, [empty])
    assert not folder.exists() or not list(folder.iterdir())


def test_manifest_and_array_that_disagree_are_refused(made):
    count = tokens.read(made).tokens
    with open(made / tokens.BIN, "ab") as handle:
        handle.write(b"\x00\x00")
    expected = (f"{made / tokens.BIN}: {2 * count + 2} bytes, but {tokens.MANIFEST} says {count} uint16 tokens "
                f"({2 * count} bytes): the array and its manifest disagree")
    assert tokens.problem(made, 8, 1000) == expected
    (made / tokens.BIN).unlink()
    assert tokens.problem(made, 8, 1000) == f"{made / tokens.BIN}: No such file or directory; tokens.json describes it"


def test_a_manifest_missing_or_of_another_shape_is_refused(made):
    manifest = json.loads((made / tokens.MANIFEST).read_text())
    (made / tokens.MANIFEST).write_text(json.dumps({**manifest, "dtype": "int8"}))
    assert "dtype 'int8', byte order 'little': token arrays are uint16 or uint32, little-endian" in tokens.problem(
        made, 8, 1000)
    (made / tokens.MANIFEST).write_text(json.dumps({**manifest, "tokens": True}))
    assert tokens.problem(made, 8, 1000) == f"{made / tokens.MANIFEST}: tokens True: must be integers >= 1"
    (made / tokens.MANIFEST).unlink()
    assert "tokens.json: No such file or directory; an unfinished or never made token folder" in tokens.problem(
        made, 8, 1000)


def test_a_file_shorter_than_one_window_is_refused_with_the_sizes(made):
    count = tokens.read(made).tokens
    assert tokens.problem(made, count - 1, 1000) is None
    assert tokens.problem(made, count, 1000) == (
        f"{made / tokens.BIN}: {count} tokens, fewer than one window of {count + 1} (sequence length {count} + 1 for "
        "the targets): tokenise more text, or shorten the sequence")


def test_ids_beyond_the_models_vocabulary_are_refused(made):
    assert tokens.problem(made, 8, 257) is None
    assert tokens.problem(made, 8, 256) == (
        f"{made / tokens.MANIFEST}: tokenizer bytes has 257 ids, more than the model's vocabulary of 256: use a "
        "tokenizer whose ids fit (--tokenizer bytes has 257)")


def test_tiktoken_not_installed_is_refused_with_the_reason(tmp_path, folder, monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import raises ImportError
    with pytest.raises(ValueError, match=r"--tokenizer tiktoken:gpt2 needs tiktoken, which this Python cannot import "
                                         r"\(.*\): install it \(pip install tiktoken\), or use --tokenizer bytes"):
        tokens.write(folder, write_texts(tmp_path, "text"), "tiktoken:gpt2")
    assert not folder.exists()
    for name in ("tiktoken:", "gpt2", "byte"):
        with pytest.raises(ValueError, match=rf"--tokenizer '{name}' is neither 'bytes' nor tiktoken:ENCODING"):
            tokens.tokenizer(name)


class FakeEncoding:
    """tiktoken's Encoding as tokens uses it, with a vocabulary beyond uint16: one id per character, each piece kept."""
    n_vocab = 100_000
    eot_token = 99_999

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def encode_ordinary(self, text: str) -> list[int]:
        self.pieces.append(text)
        return [ord(c) for c in text]


@pytest.fixture
def encoding(monkeypatch):
    encoding = FakeEncoding()
    module = types.SimpleNamespace(get_encoding=lambda name: encoding if name == "o200k_base" else None)
    monkeypatch.setitem(sys.modules, "tiktoken", module)
    monkeypatch.setattr(tokens, "PIECE_CHARS", 10)
    return encoding


def test_tiktoken_pieces_end_where_no_token_spans_and_ids_beyond_uint16_take_uint32(tmp_path, folder, encoding):
    text = "alpha beta\n\n  gamma\ndelta epsilon zeta\n eta\ntheta"
    manifest = tokens.write(folder, write_texts(tmp_path, text, "x"), "tiktoken:o200k_base")
    assert "".join(encoding.pieces) == text + "x" and len(encoding.pieces) > 2
    for piece, following in zip(encoding.pieces, encoding.pieces[1:]):
        if following != "x":  # the second file
            assert piece.endswith("\n") and not following[0].isspace(), encoding.pieces
    assert (manifest["dtype"], manifest["vocab_size"], manifest["end_of_text"]) == ("uint32", 100_000, 99_999)
    ids = array("I", (folder / tokens.BIN).read_bytes()).tolist()
    assert ids == [ord(c) for c in text] + [99_999, ord("x")]
    assert [source["forced_cuts"] for source in manifest["sources"]] == [0, 0]


def test_text_that_cannot_be_cut_where_no_token_spans_is_cut_anyway_and_counted(tmp_path, folder, encoding):
    text = "".join(f"  line {n}\n" for n in range(30))  # every line indented: no cut keeps tokens whole
    manifest = tokens.write(folder, write_texts(tmp_path, text), "tiktoken:o200k_base")
    assert "".join(encoding.pieces) == text
    # Pieces grow to FORCE_CUT (16) reads of 10 characters, then are cut: 290 characters in two.
    assert len(text) == 290 and [len(piece) for piece in encoding.pieces] == [160, 130]
    assert manifest["sources"][0]["forced_cuts"] == 1


def test_the_check_before_launch_reads_token_folders(tmp_path, made):
    assert dataset.dataset_problem(workload(made), 4) is None
    assert dataset.dataset_problem(workload(made, sequence_length=4096), 4).endswith(
        f"tokenise more text, or shorten the sequence; `benchrunner dataset --tokens {made} --text FILE [FILE ...]` "
        "makes a token folder")
    absent = tmp_path / "absent"
    assert dataset.dataset_problem(workload(absent), 4).startswith(
        f"data_dir {absent} does not exist on ")


def test_the_dataset_command_makes_a_token_folder(tmp_path, folder, capsys):
    sources = write_texts(tmp_path, *TEXTS)
    assert cli.main(["dataset", "--tokens", str(folder), "--text", *map(str, sources)]) == 0
    count = tokens.read(folder).tokens
    assert capsys.readouterr().out == (f"{folder / tokens.BIN}: {count} tokens (uint16) of 2 text files by tokenizer "
                                       "bytes, vocabulary 257\n")


@pytest.mark.parametrize(("argv", "refused"), [
    (["--tokens", "T", "--text", "a.txt", "--images", "4", "--seed", "1"],
     "--tokens makes a token folder from --text files: leave out the image dataset's --images, --seed"),
    (["D", "--tokens", "T", "--text", "a.txt"], "leave out the image dataset's DIRECTORY"),
    (["D", "--text", "a.txt", "--tokenizer", "bytes"],
     "--text, --tokenizer belong to a token folder: name its folder with --tokens DIR"),
    (["--tokens", "T"], "--tokens needs the text files to tokenise: --text FILE [FILE ...]"),
    ([], "give the image dataset's folder (benchrunner dataset DIRECTORY), or a token folder's"),
])
def test_the_dataset_command_refuses_a_mix_of_both_kinds(tmp_path, monkeypatch, argv, refused, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["dataset", *argv]) == 2
    err = capsys.readouterr().err
    assert refused in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


def draws(made: Path, rank: int, count: int = 3) -> list[tuple[torch.Tensor, torch.Tensor]]:
    batches = torch_tokens.batches(workload(made), 257, Placement(rank, 2, rank, 2, "torchrun"), CPU)
    return [next(batches) for _ in range(count)]


def test_token_file_windows_are_the_files_ids_shifted_by_one(made):
    ids = ids_of(made)
    for inputs, targets in draws(made, 0):
        assert inputs.shape == targets.shape == (4, 8) and inputs.dtype == targets.dtype == torch.int64
        assert torch.equal(inputs[:, 1:], targets[:, :-1])
        for row, target in zip(inputs.tolist(), targets[:, -1].tolist()):
            # Each row is a window of the array, its target the token after it.
            starts = [s for s in range(len(ids) - 8) if ids[s:s + 8] == row and ids[s + 8] == target]
            assert starts, row


def test_token_file_windows_differ_between_ranks_and_draws_and_repeat_in_a_new_run(made):
    first, again, other = draws(made, 0), draws(made, 0), draws(made, 1)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(first, again))
    assert not any(torch.equal(a[0], b[0]) for a, b in zip(first, other))
    assert not torch.equal(first[0][0], first[1][0])


def test_a_token_folder_that_does_not_fit_is_refused_when_the_rank_starts(made):
    with pytest.raises(ValueError, match="more than the model's vocabulary of 100"):
        torch_tokens.batches(workload(made), 100, Placement(0, 1, 0, 1, "single"), CPU)


def test_synthetic_tokens_are_one_batch_below_the_vocabulary_seeded_by_rank(tmp_path):
    text = Workload(model="llama-tiny", framework="pytorch-ddp", batch_size=3, sequence_length=16)
    batches = [torch_tokens.batches(text, 50, Placement(rank, 2, rank, 2, "torchrun"), CPU) for rank in (0, 0, 1)]
    (inputs, targets), (same_inputs, _), (other_inputs, _) = (next(b) for b in batches)
    assert inputs.shape == targets.shape == (3, 16) and inputs.dtype == torch.int64
    assert 0 <= int(inputs.min()) and int(torch.cat([inputs, targets]).max()) < 50
    assert torch.equal(inputs[:, 1:], targets[:, :-1])
    assert torch.equal(inputs, same_inputs) and not torch.equal(inputs, other_inputs)
    # Made once: every step gets the very same tensors.
    assert next(batches[0])[0] is inputs
