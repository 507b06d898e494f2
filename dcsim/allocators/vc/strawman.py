"""STRAWMAN: the AHAB paper's fixed admission rule — reject every VC with B > 4.

Zerwas et al. 2018 (Sec. V-B, Fig. 3) compare AHAB's learned admission control with this
hand-made one: KRAKEN accepts fewer high-bandwidth VCs than it should reject, so STRAWMAN
rejects each VC whose per-VM bandwidth B exceeds ``threshold`` (4 BU) and embeds the rest
with ``embed`` (any registered VC embedder, KRAKEN by default), to which it passes its
``host_link`` and ``embed_options``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dcsim.allocators.vc.embedder import VCAllocator, embedder_label_extra, make_embedder
from dcsim.hookspecs import hookimpl
from dcsim.model import StateView


class Strawman(VCAllocator):
    """Reject VCs with B above a threshold; embed the others with a VC embedder."""

    name = "strawman"
    description = "reject VCs with B > threshold, embed the rest with kraken (AHAB paper)"

    class Options(VCAllocator.Options):
        threshold: float = Field(4, description="reject every VC whose B exceeds this")
        embed: str = Field("kraken", description="registered VC embedder for the rest")
        embed_options: dict[str, Any] = Field(
            default_factory=dict, description="options of the embedder (not host_link)")

    @classmethod
    def label_for(cls, options: Options) -> str:
        extra = "" if options.threshold == 4 else f",threshold={options.threshold:g}"
        extra += embedder_label_extra(options)
        return f"strawman({options.embed}{extra})"

    def setup(self, view: StateView) -> None:
        super().setup(view)
        self.embedder = make_embedder(self.options.embed, self.label, view.topology, self.rng,
                                      self.options.embed_options, self.host_link)
        self.embedder.setup(view)

    def embed(self, free_cpu, link_free, n, s, b):
        if b > self.options.threshold:
            return None
        return self.embedder.embed(free_cpu, link_free, n, s, b)


@hookimpl
def register_allocators(register):
    register(Strawman)
