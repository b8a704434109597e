"""Checking an untrusted ``tokenizer.json`` in a child process under a time limit.

A tokenizer is code in disguise: its normalizer and pre-tokenizer may hold regular
expressions, and one that backtracks catastrophically makes encoding take minutes (or
panic). Before a tokenizer is stored (upload) or used (a worker, a simulated endpoint,
a local run), :func:`check_tokenizer` loads it in a fresh ``python -m
scenarios.tokenizers.probe`` child and encodes a probe text with it: ordinary prose,
digits, punctuation, non-ASCII letters, runs of one character ended by another (what
backtracking regexes choke on) and prompts made of the tokenizer's own vocabulary (what
workers send). The child is killed when it outlives ``TOKENIZER_PROBE_TIMEOUT_S``; a
panic in the tokenizer library is a refusal too. A tokenizer that passed is remembered
by its content hash for the life of the process.

A worker counts a dataset's rows with an uploaded tokenizer the same way
(:func:`count_in_child`): those rows are the submitter's own text, which the probe
cannot anticipate, so the count runs in a child too, killed after the probe's limit
plus a second per ``MIN_COUNT_CHARS_PER_S`` characters.

Protocol: a mode line (``probe`` or ``count``) then the tokenizer's bytes (``probe``)
or ``{"tokenizer": ..., "texts": [...]}`` (``count``) on the child's stdin; one JSON
line on its stdout, ``{"ok": true, "vocab": N}`` / ``{"ok": true, "counts": [...]}`` or
``{"ok": false, "message": ...}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import OrderedDict
from typing import Any, Final

from scenarios.limits import (
    MIN_COUNT_CHARS_PER_S,
    TOKENIZER_PROBE_DATA_BYTES,
    TOKENIZER_PROBE_TIMEOUT_S,
    cap_data_memory,
)
from scenarios.tokenizers.files import TokenizerUnavailable, tokenizer_from_bytes, tokenizers_module

__all__ = ["check_tokenizer", "count_in_child", "main", "probe_texts"]

_PROSE: Final = (
    "The quick brown fox jumps over the lazy dog while seven wizards box quietly; "
    "benchmarks measure time to first token, inter-token latency and throughput. "
    "Numbers like 3.14159, 2026-12-04, 0x7f and 1,234,567 appear in prompts, "
    "as do e-mail@example.com, https://example.com/a?b=c and C:\\temp\\file.txt. "
    "Ünïcödé wörds, 日本語のテキスト, emoji 🙂 and tabs\tand\nnewlines too.\n"
)
# Characters whose runs (ended by a character the run's class does not hold) make a
# backtracking regex try every way of splitting the run.
_RUN_CHARS: Final = ("a", "Z", "0", " ", ".", "-", "é", "\n")
_RUN_LENGTHS: Final = (8, 16, 24, 48)
# Words of the tokenizer's vocabulary joined into the prompts workers make from it.
_VOCAB_WORDS: Final = 400
_KEPT_PASSES: Final = 64
_passed: OrderedDict[str, int] = OrderedDict()


def probe_texts(vocab_words: list[str]) -> list[str]:
    """The texts a tokenizer must encode within the time limit (a few KB in all)."""
    runs = "".join(
        char * length + ("!" if char != "!" else "?")
        for char in _RUN_CHARS
        for length in _RUN_LENGTHS
    )
    words = [w for w in vocab_words if w.isalpha()][:_VOCAB_WORDS]
    prompt = " ".join(words) + "."
    return [_PROSE * 4, runs, prompt, prompt.upper()]


def check_tokenizer(data: bytes, source: str, timeout_s: float = TOKENIZER_PROBE_TIMEOUT_S) -> int:
    """Load ``data`` and encode the probe in a child process killed after ``timeout_s``;
    returns the vocabulary size. Raises TokenizerUnavailable naming ``source`` when the
    library is missing, the bytes are not a tokenizer, or encoding fails or takes too
    long. Blocking: call it off the event loop."""
    tokenizers_module()  # the reason to install it, rather than a child's traceback
    digest = hashlib.sha256(data).hexdigest()
    known = _passed.get(digest)
    if known is not None:
        _passed.move_to_end(digest)
        return known
    answer = _in_child(
        b"probe\n" + data,
        timeout_s,
        f"{source}: the tokenizer did not finish encoding a {_probe_size()}-character probe "
        f"within {timeout_s:.0f} s (a normalizer or pre-tokenizer regex that backtracks "
        "catastrophically?): refused",
        source,
    )
    vocab = int(answer["vocab"])
    _passed[digest] = vocab
    while len(_passed) > _KEPT_PASSES:
        _passed.popitem(last=False)
    return vocab


def count_in_child(tokenizer_json: str, texts: list[str], source: str) -> list[int]:
    """Tokens of each text (no special tokens), counted in a child process killed after
    the probe's time limit plus a second per ``MIN_COUNT_CHARS_PER_S`` characters: a
    submitter's dataset rows, counted with a submitter's tokenizer, may hold exactly the
    text its regex backtracks on. Raises TokenizerUnavailable naming ``source``."""
    chars = sum(len(text) for text in texts)
    timeout_s = TOKENIZER_PROBE_TIMEOUT_S + chars / MIN_COUNT_CHARS_PER_S
    payload = json.dumps({"tokenizer": tokenizer_json, "texts": texts}).encode()
    answer = _in_child(
        b"count\n" + payload,
        timeout_s,
        f"{source}: the tokenizer did not finish counting {len(texts)} rows ({chars} "
        f"characters) within {timeout_s:.0f} s (a regex that backtracks on this text?)",
        source,
    )
    counts: list[int] = [int(n) for n in answer["counts"]]
    return counts


def _in_child(request: bytes, timeout_s: float, too_slow: str, source: str) -> dict[str, Any]:
    """Run ``python -m scenarios.tokenizers.probe`` on ``request``; its answer, or
    TokenizerUnavailable (``too_slow`` when it was killed at ``timeout_s``)."""
    # One thread: the check costs one core, never all of them.
    env = {**os.environ, "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    try:
        child = subprocess.run(
            [sys.executable, "-m", "scenarios.tokenizers.probe"],
            input=request,
            capture_output=True,
            timeout=timeout_s,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:  # run() has killed and reaped the child
        raise TokenizerUnavailable(too_slow) from None
    line = child.stdout.partition(b"\n")[0]
    try:
        answer: dict[str, Any] = json.loads(line)
    except ValueError:
        answer = {"ok": False, "message": f"the check process failed ({child.returncode})"}
    if not answer.get("ok"):
        raise TokenizerUnavailable(f"{source}: {answer.get('message', 'refused')}")
    return answer


def _probe_size() -> int:
    return sum(len(text) for text in probe_texts([]))


def _probe(data: bytes) -> dict[str, object]:
    tokenizer = tokenizer_from_bytes(data, "the file")
    vocab = tokenizer.get_vocab()
    words = [word for word, _ in sorted(vocab.items(), key=lambda item: item[1])]
    for text in probe_texts(words):
        tokenizer.encode(text)
        tokenizer.encode_batch(text.split(" ")[:64], add_special_tokens=False)
    return {"ok": True, "vocab": tokenizer.get_vocab_size()}


def _count(payload: bytes) -> dict[str, Any]:
    request = json.loads(payload)
    tokenizer = tokenizer_from_bytes(request["tokenizer"].encode(), "the tokenizer")
    encoded = tokenizer.encode_batch(request["texts"], add_special_tokens=False)
    return {"ok": True, "counts": [len(encoding.ids) for encoding in encoded]}


def main() -> int:
    """Child side: check the tokenizer (``probe``) or count texts with it (``count``),
    as the first line on stdin says; answer one JSON line on stdout."""
    cap_data_memory(TOKENIZER_PROBE_DATA_BYTES)
    mode, _, data = sys.stdin.buffer.read().partition(b"\n")
    try:
        answer = _count(data) if mode == b"count" else _probe(data)
    except TokenizerUnavailable as exc:
        answer = {"ok": False, "message": str(exc).removeprefix("the file: ")}
    except BaseException as exc:  # the Rust side panics with a BaseException
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        what = "counting the rows" if mode == b"count" else "encoding the probe"
        answer = {"ok": False, "message": f"{what} failed ({reason}): refused"}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
