"""The import paths of dcsim's allocators before they were grouped by family (#35) keep
working: each old module re-exports the public names of the modules its code moved to, as
the very same objects, so a third-party plugin written against the old paths still runs."""

from __future__ import annotations

import importlib

import pytest

#: old path -> the new modules its code lives in
MOVED = {
    "builtin": ["single"],
    "vc_base": ["vc.embedder"],
    "nara": ["multi.baselines"],
    "index": ["multi.rack_index"],
    "rack_search": ["multi.rack_search"],
    "ahab": ["vc.ahab", "vc.lookahead"],
    "kraken": ["vc.kraken", "vc.kraken.batch"],
    "oktopus": ["vc.oktopus", "vc.oktopus.batch", "vc.oktopus.reference"],
    "vc_tetris": ["vc.tetris", "vc.tetris.batch", "vc.tetris.reference"],
    "nara_learned": ["multi.learned"],
    "nara_learned.checkpoint": ["multi.learned.checkpoint"],
    "nara_learned.network": ["multi.learned.network"],
    "nara_learned.observation": ["multi.learned.observation"],
}


def public(module) -> set[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and getattr(v, "__module__", module.__name__) == module.__name__
                 and not isinstance(v, type(module))]
    return set(names)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_gives_the_new_modules_public_names(old):
    shim = importlib.import_module(f"dcsim.allocators.{old}")
    for new in MOVED[old]:
        home = importlib.import_module(f"dcsim.allocators.{new}")
        names = public(home)
        assert names, new
        for name in names:
            assert getattr(shim, name) is getattr(home, name), (old, new, name)


def test_the_names_plugin_authors_use_still_import_from_where_the_docs_put_them():
    from dcsim.allocators.base import Allocator  # noqa: F401
    from dcsim.allocators.builtin import BestFitAllocator, FirstFitAllocator  # noqa: F401
    from dcsim.allocators.multi import MultiServerAllocator  # noqa: F401
    from dcsim.allocators.vc_base import VCAllocator  # noqa: F401
