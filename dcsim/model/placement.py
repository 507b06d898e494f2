"""What a placement takes: resources from each chosen server, bandwidth from each link."""

from __future__ import annotations

import numpy as np

_EMPTY_INT = np.zeros(0, dtype=np.int64)
_EMPTY_INT.flags.writeable = False
_EMPTY_FLOAT = np.zeros(0, dtype=np.float64)
_EMPTY_FLOAT.flags.writeable = False


class Placement:
    """Resources taken by one request.

    ``servers[i]`` gives ``amounts[i]`` (one value per topology resource); ``links[j]`` carries
    ``bandwidth[j]``. Server and link indices are unique within a placement. Treat it as
    immutable: the engine keeps it until the request departs. (A plain slotted class rather
    than a frozen dataclass: one is built per accepted request, on the hot path.)
    """

    __slots__ = ("servers", "amounts", "links", "bandwidth")

    def __init__(
        self,
        servers: np.ndarray,
        amounts: np.ndarray,
        links: np.ndarray = _EMPTY_INT,
        bandwidth: np.ndarray = _EMPTY_FLOAT,
    ):
        self.servers = servers  # (k,) int64
        self.amounts = amounts  # (k, n_resources) float64
        self.links = links  # (m,) int64
        self.bandwidth = bandwidth  # (m,) float64

    def __repr__(self) -> str:
        return (
            f"Placement(servers={self.servers.tolist()}, amounts={self.amounts.tolist()}, "
            f"links={self.links.tolist()}, bandwidth={self.bandwidth.tolist()})"
        )

    @classmethod
    def single(cls, server: int, demand: np.ndarray) -> Placement:
        """The whole ``demand`` on one server, no network."""
        return cls(np.array([server], dtype=np.int64), demand.reshape(1, -1))

    @classmethod
    def build(
        cls,
        servers: object,
        amounts: object,
        links: object = (),
        bandwidth: object = (),
    ) -> Placement:
        """Coerce sequences to the array types a placement holds."""
        s = np.asarray(servers, dtype=np.int64).reshape(-1)
        a = np.asarray(amounts, dtype=np.float64).reshape(len(s), -1)
        ln = np.asarray(links, dtype=np.int64).reshape(-1)
        bw = np.asarray(bandwidth, dtype=np.float64).reshape(-1)
        if bw.size == 1 and ln.size > 1:
            bw = np.full(ln.size, bw[0])
        return cls(s, a, ln, bw)

    @property
    def footprint(self) -> float:
        """Total bandwidth reserved over all links."""
        return float(self.bandwidth.sum()) if self.bandwidth.size else 0.0

    @property
    def total(self) -> np.ndarray:
        """Resources taken, summed over servers."""
        return self.amounts.sum(axis=0)
