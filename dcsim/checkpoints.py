"""Pickle-free policy checkpoints: a ``.npz`` of plain float arrays and a ``.json`` beside it.

Shared by the learned policies (DeepRM's scheduler, Nara's allocator): each writes its
arrays and a JSON document with a ``format`` tag, and reads them back through
:func:`read_checkpoint`, which checks the tag, the array names, dtypes, shapes and values,
and never unpickles anything (``np.load(..., allow_pickle=False)``). Every problem is a
:class:`ConfigError` naming the file.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from dcsim.atomic import write_atomic
from dcsim.errors import ConfigError


def float_arrays(weights: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]]
                 ) -> dict[str, np.ndarray]:
    """``weights`` as contiguous float32 arrays, exactly the names of ``shapes`` (ValueError
    naming the array whose shape differs)."""
    arrays = {k: np.ascontiguousarray(weights[k], dtype=np.float32) for k in shapes}
    for k, s in shapes.items():
        if arrays[k].shape != s:
            raise ValueError(f"array {k!r} has shape {arrays[k].shape}, expected {s}")
    return arrays


def write_checkpoint(path: str | Path, arrays: dict[str, np.ndarray],
                     doc: dict[str, Any]) -> Path:
    """``path`` (.npz of ``arrays`` as float32) and the .json of ``doc`` beside it."""
    path = Path(path)
    arrays = {k: np.asarray(v, dtype=np.float32) for k, v in arrays.items()}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_atomic(path, buf.getvalue())
    write_atomic(path.with_suffix(".json"), (json.dumps(doc, indent=2) + "\n").encode())
    return path


def resolve(value: str, shipped: dict[str, Path], what: str = "") -> Path:
    """The ``.npz`` a ``checkpoint`` option names: a shipped policy's name (``shipped``)
    that file, anything else a file path (``~`` expanded, relative to the working
    directory). A bare word that is neither is a ConfigError listing ``what`` is shipped."""
    if value in shipped:
        return shipped[value]
    path = Path(value).expanduser().resolve()
    if not path.exists() and path.suffix != ".npz" and "/" not in value:
        kind = f"{what} policy" if what else "policy"
        raise ConfigError(f"checkpoint: {value!r} is neither a shipped {kind} "
                          f"({', '.join(shipped) or 'none shipped'}) nor a file")
    return path


def shorten(text: str, limit: int = 200) -> str:
    """``text`` cut to about ``limit`` characters for a message (a sidecar may hold megabytes)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def check_field(meta: dict[str, Any], section: str, key: str, allowed: Any, jpath: Path,
                why: str) -> None:
    """``meta[section][key]``, when present, must be one of ``allowed`` (a list); else a
    ConfigError naming the file and the field, and saying ``why`` it matters."""
    sec = meta.get(section)
    if not isinstance(sec, dict) or key not in sec:
        return
    if sec[key] not in allowed:
        shown = " or ".join(repr(a) for a in allowed)
        raise ConfigError(f"{jpath}: {section}.{key}: {shorten(repr(sec[key]))} is not "
                          f"{shown} ({why})")


def read_metadata(path: str | Path, fmt: str, what: str) -> dict[str, Any]:
    """The .json beside checkpoint ``path``, checked to be a ``fmt`` document (``what``
    names the kind in errors, e.g. ``"DeepRM"``)."""
    path = Path(path)
    jpath = path.with_suffix(".json")
    if not path.is_file():
        raise ConfigError(f"{path}: checkpoint not found")
    if not jpath.is_file():
        raise ConfigError(f"{jpath}: checkpoint metadata missing (expected beside {path.name})")
    try:
        meta = json.loads(jpath.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"{jpath}: not valid JSON: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        raise ConfigError(f"{jpath}: not a dcsim {what} checkpoint (format must be {fmt!r})")
    for section in SIZED_SECTIONS:
        _check_sizes(meta.get(section), f"{jpath}: {section}")
    return meta


#: sections of a checkpoint's JSON whose integers size arrays or loops
SIZED_SECTIONS = ("architecture", "image")
#: the largest integer such a section may hold, and the most parameters a checkpoint may have
MAX_DIMENSION = 1 << 16
MAX_PARAMETERS = 50_000_000


def _check_sizes(section: Any, where: str) -> None:
    """Every integer of ``section`` (nested lists and mappings included) in
    [0, MAX_DIMENSION]: a sidecar asking for 10^9 layers is refused before anything is
    allocated for it."""
    items = (section.items() if isinstance(section, dict)
             else enumerate(section) if isinstance(section, list) else ())
    for k, v in items:
        if isinstance(v, dict | list):
            _check_sizes(v, f"{where}.{k}")
        elif isinstance(v, int) and not isinstance(v, bool) and not 0 <= v <= MAX_DIMENSION:
            raise ConfigError(f"{where}.{k}: {v} is outside [0, {MAX_DIMENSION}]")


def read_arrays(path: str | Path, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """The arrays of checkpoint ``path``: exactly the names of ``shapes``, finite floats of
    those shapes (as float32); object arrays are refused, not unpickled."""
    path = Path(path)
    total = sum(int(np.prod(s, dtype=np.float64)) for s in shapes.values())
    if total > MAX_PARAMETERS:
        raise ConfigError(f"{path}: the architecture in {path.with_suffix('.json').name} asks "
                          f"for {total:,} parameters (at most {MAX_PARAMETERS:,})")
    try:
        with np.load(path, allow_pickle=False) as z:
            names = set(z.files)
            if names != set(shapes):
                missing, extra = sorted(set(shapes) - names), sorted(names - set(shapes))
                raise ConfigError(
                    f"{path}: the arrays do not match the architecture in "
                    f"{path.with_suffix('.json').name}: " + "; ".join(
                        f"{what} {len(v)} ({shorten(', '.join(v), 200)})"
                        for what, v in (("missing", missing), ("unexpected", extra)) if v))
            arrays = {k: z[k] for k in shapes}
    except ConfigError:
        raise
    except Exception as e:  # zip/format errors, object arrays (pickle refused), …
        raise ConfigError(f"{path}: cannot read checkpoint arrays: {e}") from None
    for k, shape in shapes.items():
        a = arrays[k]
        if a.dtype.kind != "f":
            raise ConfigError(f"{path}: array {k!r} has dtype {a.dtype}, expected float")
        if a.shape != tuple(shape):
            raise ConfigError(f"{path}: array {k!r} has shape {a.shape}, expected {shape} "
                              f"from {path.with_suffix('.json').name}")
        if not np.all(np.isfinite(a)):
            raise ConfigError(f"{path}: array {k!r} has non-finite values")
        arrays[k] = a.astype(np.float32, copy=False)
    return arrays


# --------------------------------------------------------------------------- state files
#: the array of a state file that holds its JSON document (UTF-8 bytes as uint8)
STATE_DOC = "__doc__"
#: dtype kinds a state file may hold: bool, signed/unsigned integers, floats (no objects)
STATE_KINDS = "biuf"


def write_state(path: str | Path, arrays: dict[str, np.ndarray], doc: dict[str, Any]
                ) -> Path:
    """One ``.npz`` holding ``arrays`` with their dtypes kept (optimiser moments, random
    generator states, counters; no object arrays) and the JSON document ``doc`` as the
    uint8 array ``__doc__``, written atomically: the arrays and the document that
    describes them are replaced together or not at all (a training-resume state)."""
    path = Path(path)
    if STATE_DOC in arrays:
        raise ValueError(f"{STATE_DOC!r} is reserved for the document")
    out = {}
    for k, v in arrays.items():
        a = np.asarray(v)
        if a.dtype.kind not in STATE_KINDS:
            raise ValueError(f"array {k!r} has dtype {a.dtype}; a state file holds only "
                             "bool, integer and float arrays")
        out[k] = a
    out[STATE_DOC] = np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **out)
    write_atomic(path, buf.getvalue())
    return path


def read_state(path: str | Path, fmt: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and the document of a :func:`write_state` file whose document has
    ``format: fmt``; read with ``allow_pickle=False``. Every problem is a
    :class:`ConfigError` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: not found")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        doc = json.loads(arrays.pop(STATE_DOC).tobytes().decode())
    except KeyError:
        raise ConfigError(f"{path}: not a dcsim state file (no {STATE_DOC} array)") from None
    except Exception as e:  # zip/format errors, object arrays (pickle refused), bad JSON
        raise ConfigError(f"{path}: cannot read state file: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise ConfigError(f"{path}: not a {fmt!r} state file")
    for k, a in arrays.items():
        if a.dtype.kind not in STATE_KINDS:
            raise ConfigError(f"{path}: array {k!r} has dtype {a.dtype}")
    return arrays, doc
