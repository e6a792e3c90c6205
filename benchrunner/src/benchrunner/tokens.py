"""Token folders: text files tokenised once into a flat array of token ids, what text models train on from a file.

The array is nanoGPT's train.bin (data/openwebtext/prepare.py): the ids one after the other, uint16 where the
vocabulary fits in 65536 ids, uint32 beyond it, little-endian; the files' texts are joined by the tokenizer's
end-of-text id. Beside it a manifest says how to read it (dtype, vocabulary, tokenizer, token count) and what it was
made from (the sha256 of the array, each source file with its size). The manifest is written last: a folder without
one is unfinished. No torch here: the folder is made and checked on the control host."""

from __future__ import annotations

import hashlib
import sys
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from benchrunner import results

BIN = "tokens.bin"
MANIFEST = "tokens.json"
FORMAT = "benchrunner-tokens"
# Each dtype's array typecode (of the machine's own order: written swapped on a big-endian one) and size in bytes.
DTYPES = {"uint16": ("H", 2), "uint32": ("I", 4)}
BYTE_ORDER = "little"
TIKTOKEN = "tiktoken:"
# The byte-level tokenizer: one id per UTF-8 byte, then the end-of-text id.
BYTES = "bytes"
BYTES_END_OF_TEXT = 256
# Characters read at a time from a text file: a few MiB of text, whatever the file's size.
PIECE_CHARS = 1 << 20
# Pieces' worth of text a BPE tokenizer's piece may grow to before it is cut where a token may span the cut.
FORCE_CUT = 16


@dataclass(frozen=True)
class Tokenizer:
    name: str
    vocab_size: int
    end_of_text: int
    encode: Callable[[str], Sequence[int]]
    # Whether a text may be cut anywhere and its pieces encoded apart (bytes); a BPE tokenizer's pieces end at a
    # line end followed by a non-space, where none of tiktoken's patterns joins characters into one token.
    cut_anywhere: bool


def tokenizer(name: str) -> Tokenizer:
    """The tokenizer `bytes` or `tiktoken:ENCODING`; tiktoken must be importable, and is never replaced by another."""
    if name == BYTES:
        return Tokenizer(BYTES, BYTES_END_OF_TEXT + 1, BYTES_END_OF_TEXT, lambda text: text.encode(), True)
    if not name.startswith(TIKTOKEN) or name == TIKTOKEN:
        raise ValueError(f"--tokenizer {name!r} is neither {BYTES!r} nor {TIKTOKEN}ENCODING (e.g. {TIKTOKEN}gpt2)")
    encoding_name = name[len(TIKTOKEN):]
    try:
        import tiktoken  # noqa: PLC0415 - optional: only this tokenizer needs it
    except ImportError as exc:
        raise ValueError(f"--tokenizer {name} needs tiktoken, which this Python cannot import ({exc}): install it "
                         f"(pip install tiktoken), or use --tokenizer {BYTES}") from None
    # tiktoken raises ValueError for a name it does not know, and its download's own errors where the encoding's
    # file is not cached: either way there is no such tokenizer here.
    try:
        encoding = tiktoken.get_encoding(encoding_name)
    except Exception as exc:
        raise ValueError(f"--tokenizer {name}: tiktoken cannot load encoding {encoding_name!r} ({exc})") from None
    # Text is encoded as it stands: an "<|endoftext|>" in a file is text, not the id between files (as nanoGPT does).
    return Tokenizer(name, encoding.n_vocab, encoding.eot_token, encoding.encode_ordinary, False)


def dtype_for(vocab_size: int) -> str:
    """The smallest dtype that holds every id below the vocabulary."""
    return "uint16" if vocab_size <= 1 << 16 else "uint32"


def _cut(text: str) -> int:
    """Where the text may end a piece for a BPE tokenizer: after its last line end followed by a non-space (0: none)."""
    end = len(text) - 1
    while (end := text.rfind("\n", 0, end)) >= 0:
        if not text[end + 1].isspace():
            return end + 1
    return 0


def pieces(path: Path, cut_anywhere: bool) -> Iterator[tuple[str, bool]]:
    """The file's text in pieces of about PIECE_CHARS characters, decoded strictly as UTF-8 without newline
    translation (bytes survive as they are), each with whether it was cut where the tokenizer does not allow: a
    piece that cannot be cut where it allows grows up to FORCE_CUT pieces' worth, then is cut anyway (a file whose
    every line begins with a space, or a single line), so that no file is held whole."""
    with open(path, encoding="utf-8", errors="strict", newline="") as handle:
        carry = ""
        while block := handle.read(PIECE_CHARS):
            text = carry + block
            cut = len(text) if cut_anywhere else _cut(text)
            forced = not cut and len(text) >= FORCE_CUT * PIECE_CHARS
            if cut or forced:
                cut = cut or len(text)
                yield text[:cut], forced
            carry = text[cut:]
        if carry:
            yield carry, False


def _sources(texts: Sequence[Path]) -> list[Path]:
    problems = []
    for path in texts:
        if not path.is_file():
            problems.append(f"--text {path}: {'not a file' if path.exists() else 'no such file'}")
    if problems or not texts:
        raise ValueError("; ".join(problems) or "--text needs one file at least")
    return [path.resolve() for path in texts]


def write(directory: Path, texts: Sequence[Path], tokenizer_name: str = BYTES) -> dict[str, Any]:
    """Tokenise the text files, in order, into the folder's BIN and write its MANIFEST; return the manifest. Streamed:
    a piece of one file is held at a time. A file that is not UTF-8, or texts holding no token, leave the folder as
    it was; a manifest it held is removed just before the new array takes the old one's place, so an old manifest
    never describes a new array."""
    sources = _sources(texts)
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"{directory}: exists and is not a folder; give the token folder a folder of its own")
    tok = tokenizer(tokenizer_name)
    dtype = dtype_for(tok.vocab_size)
    typecode, _ = DTYPES[dtype]
    digest, count, records = hashlib.sha256(), 0, []
    with results.atomic(directory / BIN) as handle:
        for index, path in enumerate(sources):
            count += _flush(typecode, [tok.end_of_text] if index else [], handle, digest)
            before, forced_cuts = count, 0
            try:
                for piece, forced in pieces(path, tok.cut_anywhere):
                    count += _flush(typecode, tok.encode(piece), handle, digest)
                    forced_cuts += forced
            except UnicodeDecodeError as exc:
                raise ValueError(f"--text {path}: not UTF-8 text ({exc.reason})") from None
            # The file's own tokens, without the end-of-text id before it; where a piece was cut anyway, a token
            # may have been split in two there.
            records.append({"path": str(path), "bytes": path.stat().st_size, "tokens": count - before,
                            "forced_cuts": forced_cuts})
        if not count:
            raise ValueError(f"--text {', '.join(map(str, sources))}: no text to tokenise (empty files)")
        (directory / MANIFEST).unlink(missing_ok=True)
    manifest = {"format": FORMAT, "bin": BIN, "dtype": dtype, "byte_order": BYTE_ORDER,
                "tokenizer": tok.name, "vocab_size": tok.vocab_size, "end_of_text": tok.end_of_text,
                "tokens": count, "sha256": digest.hexdigest(), "sources": records}
    results.write_atomic(directory / MANIFEST, results.dumps(manifest))
    return manifest


def _flush(typecode: str, values: Sequence[int], handle: BinaryIO, digest: Any) -> int:
    """Write the ids little-endian and hash them; how many were written."""
    ids = array(typecode)
    ids.extend(values)  # array(typecode, b"...") would take bytes as raw memory, not as ids
    if sys.byteorder != BYTE_ORDER:
        ids.byteswap()
    data = ids.tobytes()
    handle.write(data)
    digest.update(data)
    return len(ids)


@dataclass(frozen=True)
class Folder:
    """A token folder as its manifest describes it."""
    bin: Path
    dtype: str
    vocab_size: int
    tokenizer: str
    tokens: int

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype][1]


def read(directory: Path) -> Folder:
    """The folder's manifest, checked against its array: ValueError naming the file and what is wrong."""
    manifest_path = directory / MANIFEST
    try:
        manifest = results.strict_loads(manifest_path.read_text())
    except OSError as exc:
        raise ValueError(f"{manifest_path}: {exc.strerror}; an unfinished or never made token folder") from None
    except ValueError as exc:
        raise ValueError(f"{manifest_path}: not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{manifest_path}: not a {FORMAT} manifest")
    if manifest.get("dtype") not in DTYPES or manifest.get("byte_order") != BYTE_ORDER:
        raise ValueError(f"{manifest_path}: dtype {manifest.get('dtype')!r}, byte order {manifest.get('byte_order')!r}: "
                         f"token arrays are {' or '.join(DTYPES)}, {BYTE_ORDER}-endian")
    counts = {key: manifest.get(key) for key in ("tokens", "vocab_size")}
    wrong = [f"{key} {value!r}" for key, value in counts.items()
             if not isinstance(value, int) or isinstance(value, bool) or value < 1]
    if wrong:
        raise ValueError(f"{manifest_path}: {', '.join(wrong)}: must be integers >= 1")
    if manifest["vocab_size"] > (1 << 8 * DTYPES[manifest["dtype"]][1]):
        raise ValueError(f"{manifest_path}: a vocabulary of {manifest['vocab_size']} ids does not fit {manifest['dtype']}")
    folder = Folder(directory / BIN, manifest["dtype"], manifest["vocab_size"], str(manifest.get("tokenizer")),
                    manifest["tokens"])
    try:
        size = folder.bin.stat().st_size
    except OSError as exc:
        raise ValueError(f"{folder.bin}: {exc.strerror}; {manifest_path.name} describes it") from None
    if size != folder.tokens * folder.itemsize:
        raise ValueError(f"{folder.bin}: {size} bytes, but {manifest_path.name} says {folder.tokens} {folder.dtype} "
                         f"tokens ({folder.tokens * folder.itemsize} bytes): the array and its manifest disagree")
    return folder


def problem(directory: Path, sequence_length: int, vocab_size: int) -> str | None:
    """Why the folder cannot feed a model of this vocabulary with windows of sequence_length + 1 tokens (a sequence
    and its targets, shifted by one), or None. The array's size is checked against the manifest, not its hash: a
    check before every launch must not read a file of billions of tokens."""
    try:
        folder = read(directory)
    except ValueError as exc:
        return str(exc)
    window = sequence_length + 1
    if folder.tokens < window:
        return (f"{folder.bin}: {folder.tokens} tokens, fewer than one window of {window} (sequence length "
                f"{sequence_length} + 1 for the targets): tokenise more text, or shorten the sequence")
    if folder.vocab_size > vocab_size:
        return (f"{directory / MANIFEST}: tokenizer {folder.tokenizer} has {folder.vocab_size} ids, more than the "
                f"model's vocabulary of {vocab_size}: use a tokenizer whose ids fit (--tokenizer {BYTES} has "
                f"{BYTES_END_OF_TEXT + 1})")
    return None
