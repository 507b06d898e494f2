"""Labels name results (the ``allocator`` column, partitions, run ids, reports), so they
never hold a folder path: a label made on one machine must read the same on another, and
must not carry a home directory into a shared report.

An option whose value names a file (a learned policy's ``checkpoint: /abs/run/ck.npz``)
is shown in a label as the file's name and a short hash of its contents
(``ck.npz@1a2b3c4d``, :func:`for_label`): two different files of the same name get two
labels, the same file moved elsewhere keeps its label. :func:`without_paths` is the last
guard on a label a plugin built itself.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

#: hex digits of the content hash a file is shown with
HASH_DIGITS = 8

#: an absolute path (``/a/b``, ``~/a``, ``C:\\a``) starting a label or after a delimiter
ABSOLUTE = re.compile(r"(?<![^\s,;(=\[{'\"])(?:~|[A-Za-z]:)?[/\\][^\s,;()\[\]{}'\"]*")

#: a file name's suffix (``.npz``; not the ``.5`` of a number)
FILE_NAME = re.compile(r"\.[A-Za-z][A-Za-z0-9]*$")

_hashes: dict[tuple[str, int, int], str] = {}


def file_hash(path: Path) -> str:
    """The first :data:`HASH_DIGITS` hex digits of the SHA-256 of the file's bytes (kept
    per path, size and modification time: a label is made once per sweep point)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _hashes:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _hashes[key] = h.hexdigest()[:HASH_DIGITS]
    return _hashes[key]


def _is_absolute(text: str) -> bool:
    return text.startswith("~") or os.path.isabs(text) or bool(
        re.match(r"[A-Za-z]:[/\\]", text))


def _file_label(text: str) -> str:
    """A string option as a label shows it: a file (absolute, or relative to the working
    directory, as the plugins that take a file resolve it) as ``name@hash``; an absolute
    path that names no file as its last part; anything else as it is."""
    if not text or "\n" in text:
        return text
    absolute = _is_absolute(text)
    if not (absolute or "/" in text or "\\" in text or FILE_NAME.search(text)):
        return text  # a plain word (a shipped policy's name): never a file's
    try:
        path = Path(text).expanduser()
        if path.is_file():
            return f"{path.name}@{file_hash(path)}"
    except (OSError, ValueError, RuntimeError):  # a name too long, no home directory
        pass
    if absolute:
        return re.split(r"[/\\]", text.rstrip("/\\"))[-1] or text[:1]
    return text


def for_label(value: Any) -> Any:
    """``value`` (an option's, as ``model_dump()`` gives it) with every string that names a
    file or an absolute path replaced as :func:`_file_label` says, in dicts, lists and
    tuples too; other values unchanged, so labels without paths stay as they were."""
    if isinstance(value, str):
        return _file_label(value)
    if isinstance(value, dict):
        return {k: for_label(v) for k, v in value.items()}
    if isinstance(value, list):
        return [for_label(v) for v in value]
    if isinstance(value, tuple):
        return tuple(for_label(v) for v in value)
    return value


def absolute_paths(label: str) -> list[str]:
    """The absolute paths in ``label`` (none in a well-made one)."""
    return [m.group(0) for m in ABSOLUTE.finditer(label) if len(m.group(0)) > 1]


def without_paths(label: str) -> str:
    """``label`` with each absolute path in it replaced by its last part."""
    def last(m: re.Match) -> str:
        text = m.group(0)
        if len(text) <= 1:
            return text
        return re.split(r"[/\\]", text.rstrip("/\\"))[-1]
    return ABSOLUTE.sub(last, label)
