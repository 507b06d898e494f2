"""A trace format: what reads a raw trace into dcsim's standard request table.

``dcsim import-trace FORMAT SRC OUT`` and ``workload.trace.format`` select one by its
``name`` among the registered formats (the built-ins, :mod:`dcsim.workload.trace_formats`,
and every plugin's, through the ``register_trace_formats`` hook). Its ``Options`` are the
format's settings (``--option key=value``, ``workload.trace.options``), validated before
anything is read, an error naming the option.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
from pydantic import BaseModel, ValidationError

from dcsim.errors import ConfigError
from dcsim.plugin_base import Configurable

#: pydantic error types that mean "not a value of this option's type" (the message then
#: says what the option takes, from its annotation, and what it got)
_TYPE_ERRORS = frozenset({
    "bool_type", "bool_parsing", "int_type", "int_parsing", "int_from_float", "float_type",
    "float_parsing", "string_type", "literal_error", "tuple_type", "list_type", "set_type",
    "none_required", "bool_number", "is_instance_of",
})


class TraceFormat(Configurable):
    """A raw trace format: ``name`` (what ``workload.trace.format`` and ``dcsim
    import-trace`` select), ``description``, an ``Options`` model (unknown keys refused) and
    :meth:`read`.

    :meth:`read` returns the standard request table (a :class:`pandas.DataFrame`): one row
    per request, sorted by arrival (stable), with ``id``, ``arrival`` and ``duration`` (s,
    float64), the demand columns (``cpu``, ``mem``, ...) and any extras; a table of request
    *kinds* (for ``trace.resample: true``) may have no ``arrival`` / ``duration``. It
    records what it read and dropped in ``df.attrs['rows_read']`` and
    ``df.attrs['dropped']`` (a mapping reason -> rows; :func:`read_trace` fills both in
    when a format leaves them out). A file that is not of this format is a
    :class:`~dcsim.errors.ConfigError` naming it (a ``ValueError``, ``KeyError`` or
    ``TypeError`` is reported as "does not read as a <name> trace").
    """

    kind: ClassVar[str] = "trace format"
    #: what ``src`` is: ``"file"`` or ``"directory"`` (azure2017's folder of rnn files)
    source: ClassVar[str] = "file"

    def read(self, src: Path) -> pd.DataFrame:
        """The standard request table of the trace at ``src``, read with ``self.options``."""
        raise NotImplementedError(f"{type(self).__name__}.read")

    @classmethod
    def parse_options(cls, raw: dict[str, Any] | None, where: str = "options",
                      sep: str = ".") -> BaseModel:
        """``raw`` validated into ``cls.Options``; the first error names the option
        (``<where><sep><option>: expected true or false, got 'maybe'``)."""
        raw = dict(raw or {})
        try:
            return cls.Options.model_validate(raw)
        except ValidationError as e:
            raise ConfigError(_option_error(cls, e, raw, where, sep)) from None


def _option_error(cls: type[TraceFormat], exc: ValidationError, raw: dict[str, Any],
                  where: str, sep: str) -> str:
    err = exc.errors()[0]
    fields = cls.Options.model_fields
    loc = [str(x) for x in err["loc"] if not str(x).startswith("function-")]
    key = loc[0] if loc else str((err.get("ctx") or {}).get("field", ""))
    head = sep.join(x for x in (where, key) if x)
    if err["type"] == "extra_forbidden":
        known = ", ".join(fields) or "no options"
        return f"{head}: unknown option; {cls.name} takes {known}"
    want = _expected(fields[key].annotation) if key in fields else None
    if err["type"] in _TYPE_ERRORS and want is not None:
        shown = repr(raw.get(key, err.get("input")))
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return f"{head}: expected {want}, got {shown}"
    reason = err["msg"].removeprefix("Value error, ")
    return f"{head}: {reason}"


def _expected(ann: Any) -> str | None:
    """What a value of ``ann`` is, in words (``true or false``, ``an integer or null``,
    ``'mid', 'lower' or 'uniform'``); None for a type it does not describe."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Annotated:
        return _expected(args[0])
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        words = [_expected(a) for a in rest]
        if any(w is None for w in words):
            return None
        if "a number" in words:  # float | int reads "a number"
            words = [w for w in words if w != "an integer"]
        return " or ".join(words) + (" or null" if len(rest) < len(args) else "")
    if origin is typing.Literal:
        shown = [repr(a) for a in args]
        return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
    if origin in (list, tuple, set, frozenset):
        items = [a for a in args if a is not Ellipsis]
        return "a list of names" if items and all(
            _expected(a) == "a string" for a in items) else "a list"
    return {bool: "true or false", int: "an integer", float: "a number",
            str: "a string"}.get(ann)


def read_trace(fmt: type[TraceFormat], src: str | Path, options: BaseModel) -> pd.DataFrame:
    """The table ``fmt`` reads from ``src`` with the validated ``options``: an empty file is
    refused before the format sees it, and a format's own ``ValueError`` / ``KeyError`` /
    ``TypeError`` is a :class:`ConfigError` naming the file; ``attrs['rows_read']`` and
    ``attrs['dropped']`` are there whether or not the format set them."""
    path = Path(src)
    if path.is_file() and path.stat().st_size == 0:
        raise ConfigError(f"{src}: the file is empty (0 bytes); nothing to import as "
                          f"{fmt.name}")
    try:
        df = fmt(options).read(path)
    except (TypeError, ValueError, KeyError) as e:
        raise ConfigError(f"{src}: does not read as a {fmt.name} trace ({e})") from None
    if not isinstance(df, pd.DataFrame):
        raise ConfigError(f"trace format {fmt.name!r} returned {type(df).__name__} for {src}, "
                          "not a table (a pandas DataFrame)")
    df.attrs.setdefault("rows_read", len(df))
    df.attrs.setdefault("dropped", {})
    return df
