"""Configuration files as text: YAML read safely (syntax errors name the line, alias bombs
refused), ``--set dotted.key=value`` overrides. Used by experiment files
(:mod:`dcsim.runner.config`) and training configs (:mod:`dcsim.learn.config`) alike, so it
sits below both and imports neither."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from dcsim.errors import ConfigError

#: the most values a config may hold once its YAML aliases are expanded (a 541-byte "billion
#: laughs" file would otherwise expand to gigabytes wherever the config is printed or hashed)
MAX_EXPANDED_VALUES = 200_000


def expanded_size(data: Any, limit: int = MAX_EXPANDED_VALUES) -> int:
    """How many values ``data`` holds with shared (aliased) parts counted every time they
    appear, computed once per distinct object; stops counting past ``limit``."""
    memo: dict[int, int] = {}

    def size(x: Any) -> int:
        if not isinstance(x, dict | list):
            return 1
        known = memo.get(id(x))
        if known is not None:
            return known
        memo[id(x)] = limit + 1  # a cycle counts as too large
        items = x.values() if isinstance(x, dict) else x
        n = 1
        for v in items:
            n += size(v)
            if n > limit:
                break
        memo[id(x)] = n
        return n

    return size(data)


def load_yaml(text: str, source: str) -> Any:
    """Parse YAML ``text`` (from ``source``, for messages): syntax errors name the line, and
    aliases that expand past :data:`MAX_EXPANDED_VALUES` values are refused."""
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise ConfigError(f"{source}: invalid YAML at {where}: {e.problem}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: invalid YAML: {e}") from None
    except RecursionError:
        raise ConfigError(f"{source}: the YAML nests too deeply") from None
    if expanded_size(data) > MAX_EXPANDED_VALUES:
        raise ConfigError(f"{source}: the YAML's aliases (*name) expand to more than "
                          f"{MAX_EXPANDED_VALUES:,} values; write the repeated part once")
    return data


def read_text(path: Path) -> str:
    """``path``'s text; unreadable or not UTF-8 is one ConfigError naming the file."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}: "
                          f"{e.object[e.start:e.start + 1]!r})") from None


def read_yaml(path: Path) -> dict[str, Any]:
    """Parse ``path``; syntax errors name the line."""
    data = load_yaml(read_text(path), str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    return data


def set_dotted(data: dict[str, Any], key: str, value: Any, where: str = "--set") -> None:
    """Set ``a.b.0.c`` in nested dicts/lists, creating dicts on the way."""
    parts = key.split(".")
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            try:
                idx = int(part)
                node[idx]  # noqa: B018 - bounds check
            except (ValueError, IndexError):
                raise ConfigError(f"{where}: {key}: {part!r} is not an index of a list") from None
            if last:
                node[idx] = value
            else:
                if isinstance(node[idx], str):  # allocator given by name only
                    node[idx] = {"name": node[idx]}
                node = node[idx]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
        else:
            raise ConfigError(f"{where}: {key}: cannot descend into {'.'.join(parts[:i])}")


def parse_set(item: str) -> tuple[str, Any]:
    """``key=value`` with the value parsed as YAML (so numbers and lists keep their type)."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected dotted.key=value")
    key, _, raw = item.partition("=")
    if not key.strip():
        raise ConfigError(f"--set {item!r}: the key before = is empty")
    if any(not part.strip() for part in key.strip().split(".")):
        raise ConfigError(f"--set {item!r}: the key {key.strip()!r} is malformed (an empty "
                          "name between dots); expected dotted.key=value")
    try:
        value = load_yaml(raw, f"--set {item!r}")
    except ConfigError as e:
        if "expand" in str(e):
            raise
        value = raw
    return key.strip(), value


def resolve_path(path: str, base_dir: str | os.PathLike | None) -> Path:
    """``path``, relative to ``base_dir`` (the experiment file's directory) when given."""
    p = Path(path).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    return p
