"""Reading and writing user topology files (networkx node-link JSON or GraphML).

The file follows the graph conventions of :mod:`dcsim.model.topology`: nodes with ``kind``
(``server``/``switch``), ``tier``, optional ``rack``/``pod`` and one numeric attribute per
server resource; edges with ``capacity``. Every problem is a :class:`ConfigError` whose
message starts with the file path. ``save_topology`` writes node-link JSON, so a user can
export a built-in topology, edit it and load it back::

    save_topology(build_topology({"kind": "fabric", "preset": "alpha"}), "alpha.json")
    topo = load_topology("alpha.json")
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import ParseError

import networkx as nx
import numpy as np

from dcsim.csv_tables import count_in_file
from dcsim.errors import ConfigError
from dcsim.model.topology import DEFAULT_RESOURCES, Topology

FORMATS = ("json", "graphml")
_EXTENSIONS = {".json": "json", ".graphml": "graphml", ".xml": "graphml"}
_TEXT_KEYS = {"kind", "label", "name", "id", "type"}
_INT_KEYS = {"tier", "rack", "pod", "plane"}
_NON_RESOURCE = _TEXT_KEYS | _INT_KEYS


#: a topology file's bounds, checked before it is parsed (a 10^7-node file would take
#: minutes and gigabytes to refuse otherwise); ``topology.max_bytes`` / ``max_nodes`` /
#: ``max_links`` raise them for a trusted file
LIMITS = {"max_bytes": 512 * 2**20, "max_nodes": 1_000_000, "max_links": 4_000_000}


def _check_bounds(p: Path, src: str, fmt: str, limits: dict[str, int]) -> None:
    lim = {**LIMITS, **limits}
    size = p.stat().st_size
    if size > lim["max_bytes"]:
        raise ConfigError(f"{src}: {size:,} bytes, above the {lim['max_bytes']:,} a topology "
                          "file may have; set topology.max_bytes to read a larger trusted "
                          "file")
    if fmt == "graphml":   # parsing is the slow part: count the elements first
        for token, key, what in ((b"<node", "max_nodes", "nodes"),
                                 (b"<edge", "max_links", "links")):
            n = count_in_file(p, token)
            if n > lim[key]:
                raise ConfigError(f"{src}: {n:,} {what}, above the {lim[key]:,} a topology "
                                  f"may have; set topology.{key} to read a larger trusted "
                                  "file")


def _check_counts(nodes: int, links: int, src: str, limits: dict[str, int]) -> None:
    lim = {**LIMITS, **limits}
    for n, key, what in ((nodes, "max_nodes", "nodes"), (links, "max_links", "links")):
        if n > lim[key]:
            raise ConfigError(f"{src}: {n:,} {what}, above the {lim[key]:,} a topology may "
                              f"have; set topology.{key} to read a larger trusted file")


def load_topology(
    path: str | os.PathLike[str],
    format: str | None = None,
    resources: list[str] | tuple[str, ...] | None = None,
    limits: dict[str, int] | None = None,
) -> Topology:
    """Load and validate a topology file; ``format`` defaults from the extension;
    ``limits`` raise or lower :data:`LIMITS` (bytes, nodes and links, checked before the
    graph is built)."""
    src = str(path)
    p = Path(path)
    fmt = format or _EXTENSIONS.get(p.suffix.lower())
    if fmt not in FORMATS:
        raise ConfigError(
            f"{src}: unknown topology format {format or p.suffix!r}; "
            "use .json (node-link) or .graphml, or set format: json|graphml"
        )
    if not p.is_file():
        raise ConfigError(f"{src}: no such topology file")
    limits = dict(limits or {})
    _check_bounds(p, src, fmt, limits)
    try:
        graph_attrs: dict[str, Any] = {}
        if fmt == "json":
            graph, graph_attrs = _read_json(p, src, limits)
        else:
            graph = nx.read_graphml(p)
            graph_attrs = dict(graph.graph)
    except ConfigError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{src}: cannot read: {exc}") from None
    except (json.JSONDecodeError, ParseError) as exc:
        raise ConfigError(f"{src}: not valid {fmt}: {exc}") from None
    except (nx.NetworkXError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{src}: not a {fmt} graph: {exc!r}") from None
    graph = _simple_graph(graph, src)
    _coerce(graph, src)
    if resources is None:
        listed = graph_attrs.get("resources")
        resources = list(listed) if isinstance(listed, list) else _infer(graph, src)
    tier_names = _tier_names(graph_attrs.get("tier_names"))
    name = graph_attrs.get("name") or p.stem
    params = graph_attrs.get("params") if isinstance(graph_attrs.get("params"), dict) else {}
    graph.graph.clear()
    return Topology.from_graph(graph, name=str(name), resources=resources,
                               tier_names=tier_names, params=params, source=src)


def save_topology(topo: Topology, path: str | os.PathLike[str]) -> None:
    """Write ``topo`` as node-link JSON (``links`` key) that :func:`load_topology` reads."""
    data = nx.node_link_data(topo.graph, edges="links")
    data["graph"] = {
        "name": topo.name,
        "resources": list(topo.resources),
        "tier_names": {str(k): v for k, v in topo.tier_names.items()},
        "params": topo.params,
    }
    text = json.dumps(data, indent=1, default=_jsonable)
    Path(path).write_text(text + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------- helpers
def _read_json(p: Path, src: str, limits: dict[str, int]) -> tuple[nx.Graph, dict[str, Any]]:
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except RecursionError:
        raise ConfigError(f"{src}: not valid json: nested too deep") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise ConfigError(f"{src}: expected a node-link object with a 'nodes' list")
    key = "links" if "links" in data else "edges"
    if not isinstance(data.get(key, []), list):
        raise ConfigError(f"{src}: '{key}' must be a list")
    _check_counts(len(data["nodes"]), len(data.get(key, [])), src, limits)
    data = dict(data)
    data.setdefault(key, [])
    if data.get("directed"):
        raise ConfigError(f"{src}: directed: true: dcsim's links are undirected (one capacity "
                          "shared by both directions); list each link once, directed: false")
    ids: set[Any] = set()
    for i, node in enumerate(data["nodes"]):
        if not isinstance(node, dict) or "id" not in node:
            raise ConfigError(f"{src}: node #{i} is not an object with an 'id'")
        try:
            hash(node["id"])
        except TypeError:
            raise ConfigError(f"{src}: node #{i} has id {node['id']!r}; use a string or "
                              "number") from None
        if node["id"] in ids:
            raise ConfigError(f"{src}: node #{i}: id {node['id']!r} is used twice")
        ids.add(node["id"])
    pairs: set[frozenset[Any]] = set()
    for i, link in enumerate(data[key]):
        if not isinstance(link, dict) or "source" not in link or "target" not in link:
            raise ConfigError(f"{src}: link #{i} needs 'source' and 'target'")
        for end in ("source", "target"):
            try:
                known = link[end] in ids
            except TypeError:
                known = False
            if not known:
                raise ConfigError(f"{src}: link #{i}: {end} {link[end]!r} is not a node")
        pair = frozenset((link["source"], link["target"]))
        if pair in pairs and not data.get("multigraph"):
            raise ConfigError(f"{src}: link #{i}: a second link between {link['source']!r} "
                              f"and {link['target']!r}")
        pairs.add(pair)
    graph_attrs = data.get("graph") if isinstance(data.get("graph"), dict) else {}
    data["graph"] = {}
    data["directed"] = bool(data.get("directed", False))
    data["multigraph"] = bool(data.get("multigraph", False))
    graph = nx.node_link_graph(data, edges=key)
    return graph, graph_attrs


def _simple_graph(graph: nx.Graph, src: str) -> nx.Graph:
    """An undirected simple graph; parallel links are an error, self-loops too."""
    if graph.is_multigraph():
        seen: set[frozenset[Any]] = set()
        for u, v in graph.edges():
            pair = frozenset((u, v))
            if pair in seen:
                raise ConfigError(f"{src}: parallel links between {u!r} and {v!r}")
            seen.add(pair)
    if graph.is_directed() or graph.is_multigraph():
        graph = nx.Graph(graph.to_undirected() if graph.is_directed() else graph)
    loops = list(nx.selfloop_edges(graph))
    if loops:
        raise ConfigError(f"{src}: link from {loops[0][0]!r} to itself")
    return graph


def _coerce(graph: nx.Graph, src: str) -> None:
    """Turn numeric strings (GraphML's untyped attributes) into numbers, in place."""
    for n, d in graph.nodes(data=True):
        kind = d.get("kind", "switch")
        if kind not in ("server", "switch"):
            raise ConfigError(f"{src}: node {n!r} has kind {kind!r}; use 'server' or 'switch'")
        for k, v in list(d.items()):
            if k in _TEXT_KEYS:
                continue
            num = _to_number(v)
            if k in _INT_KEYS:
                if num is None or num != int(num):
                    raise ConfigError(f"{src}: node {n!r} {k} is not an integer: {v!r}")
                d[k] = int(num)
            elif num is not None:
                d[k] = num
    for u, v, d in graph.edges(data=True):
        if "capacity" not in d:
            raise ConfigError(f"{src}: link {u!r}-{v!r} has no 'capacity'")
        num = _to_number(d["capacity"])
        if num is None:
            raise ConfigError(f"{src}: link {u!r}-{v!r} capacity is not a number: "
                              f"{d['capacity']!r}")
        d["capacity"] = num


def _to_number(v: Any) -> float | int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float | np.integer | np.floating):
        return v.item() if isinstance(v, np.generic) else v
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return None
        return int(f) if f.is_integer() and "." not in v and "e" not in v.lower() else f
    return None


def _infer(graph: nx.Graph, src: str) -> list[str]:
    """Resources = numeric attributes any server has (cpu and mem first).

    A union, not an intersection: a server that lacks one is then reported by name.
    """
    servers = [d for _, d in graph.nodes(data=True) if d.get("kind", "switch") == "server"]
    if not servers:
        raise ConfigError(f"{src}: no node has kind='server'")
    found = {k for d in servers for k, v in d.items()
             if k not in _NON_RESOURCE and _to_number(v) is not None}
    if not found:
        raise ConfigError(f"{src}: servers have no numeric resource attribute (e.g. cpu, mem)")
    ordered = [r for r in DEFAULT_RESOURCES if r in found]
    return ordered + sorted(found - set(DEFAULT_RESOURCES))


def _tier_names(raw: Any) -> dict[int, str]:
    if not isinstance(raw, dict):
        return {}
    out = {}
    for k, v in raw.items():
        try:
            out[int(k)] = str(v)
        except (TypeError, ValueError):
            continue
    return out


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, tuple | set | frozenset):
        return list(obj)
    return str(obj)
