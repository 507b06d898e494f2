"""What every plugin kind shares: a YAML name, validated options, the run's generator and a
results label."""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from dcsim.errors import ConfigError
from dcsim.validation import ConfigModel, first_error


class Configurable:
    """A plugin class: ``name`` (the identifier used in YAML), an optional nested
    ``Options`` pydantic model (unknown keys rejected) and the label results use."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    kind: ClassVar[str] = "plugin"  # "allocator", "scheduler": used in error messages

    class Options(ConfigModel):
        model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    options: BaseModel
    rng: np.random.Generator

    def __init__(self, options: BaseModel | None = None, *,
                 rng: np.random.Generator | None = None):
        """``options``: the validated ``Options`` (default: every field's default).
        ``rng``: the run's generator for this plugin, which the engine always passes (every
        seed its own, independent of the workload's). Built by hand, outside a run, a plugin
        without one gets a fixed ``default_rng(0)``, so it is still reproducible."""
        self.options = options if options is not None else self.Options()
        self.rng = rng if rng is not None else np.random.default_rng(0)

    @classmethod
    def parse_options(cls, raw: dict[str, Any] | None, where: str = "options") -> BaseModel:
        """Validate ``raw`` (from YAML) into ``cls.Options``; errors name the field."""
        try:
            return cls.Options.model_validate(raw or {})
        except ValidationError as e:
            raise ConfigError(first_error(e, where, unknown=None,
                                          suffix=f" ({cls.kind} {cls.name!r})")) from None

    @classmethod
    def validate(cls, options: BaseModel, spec: Any) -> None:  # noqa: B027 - optional hook
        """Refuse an experiment this plugin cannot run, before anything runs: raise
        :class:`~dcsim.errors.ConfigError` (or ``ValueError``) saying why. ``spec`` is the
        validated sweep point (its sections typed: ``spec.topology`` a ``TopologySpec`` in
        loss mode, ``spec.vm``, ``spec.gpu``, ...). ``dcsim validate`` and ``dcsim run``
        call it once per sweep point; the message is reported under the plugin's entry
        (``allocators.2: ...``). Default: every experiment is fine."""

    @classmethod
    def label_for(cls, options: BaseModel) -> str:
        """The name results use for this plugin with ``options`` (e.g. ``ahab(kraken)``).

        Default: ``name`` alone, or ``name(key=value, ...)`` listing the options that differ
        from their defaults; a value that names a file shows as the file's name and a short
        hash of its contents (``checkpoint=ck.npz@1a2b3c4d``, :mod:`dcsim.labels`), never
        its folder. Override for a shorter composition label.
        """
        from dcsim.labels import for_label

        changed = {
            k: v for k, v in options.model_dump().items()
            if k in type(options).model_fields
            and v != type(options).model_fields[k].get_default(call_default_factory=True)
        }
        if not changed:
            return cls.name
        return f"{cls.name}({', '.join(f'{k}={for_label(v)}' for k, v in changed.items())})"

    @property
    def label(self) -> str:
        """This instance's label: ``label_for(self.options)``."""
        return self.label_for(self.options)


def view_last(cls: type, method: str, old_names: tuple[str, ...], new: str) -> None:
    """Keep a subclass written for the old argument order of ``method`` working: if ``cls``
    defines ``method`` with its view first (a first parameter named one of ``old_names``,
    e.g. ``place(self, state, vm)``), warn once, at class creation, with a
    :class:`DeprecationWarning` naming the new signature ``new``, and call it with the
    arguments swapped. Every policy kind takes ``(item, view)`` now."""
    fn = cls.__dict__.get(method)
    if fn is None or not callable(fn):
        return
    params = list(inspect.signature(fn).parameters)
    if len(params) < 3 or params[1] not in old_names:
        return
    warnings.warn(f"{cls.__module__}.{cls.__qualname__}.{method}({params[1]}, {params[2]}) "
                  f"is the old argument order; write {method}{new}: the view comes last, "
                  "as in every plugin kind (the old order still works for now)",
                  DeprecationWarning, stacklevel=3)

    @functools.wraps(fn)
    def swapped(self: Any, item: Any, view: Any, *rest: Any, **kw: Any) -> Any:
        return fn(self, view, item, *rest, **kw)

    setattr(cls, method, swapped)
