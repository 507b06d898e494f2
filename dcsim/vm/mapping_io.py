"""Load and save VM-to-host mappings in the VMR²L authors' JSON format.

The format (the authors' ``reset_vm_pm*.json`` files load as they are)::

    {"cluster_list": [{
        "cluster_name": "...",
        "host_info": [{"node_id": "h1", "status": "ACTIVE" | "DISABLED" | "OUTAGE",
                       "node_cpu": 88, "node_mem_mb": 368776, "rack_id": 2,
                       "numa": [{"node": 0, "total_cpu": 44, "free_cpu": 4,
                                 "memory_huge_total_mb": 184388,
                                 "memory_huge_free_mb": 102468},
                                {"node": 1, ...}]}],
        "vm_instance": [{"instance_id": "i-1", "instance_type": "ecs.c1.xlarge",
                         "host_id": "h1", "numa": [{"node": 0, "cpu": 4, "mem_mb": 8192}],
                         "allow_migration": true}],
        ...}],
     "vm_type_list": [...], "general_requirement": {...}}

How it is read (the decisions are ours where the authors' code is silent or buggy):

* A host's capacity is its two ``numa`` entries' ``total_cpu`` and ``memory_huge_total_mb``
  (``node`` 0 and 1, exactly two). ``node_cpu``/``node_mem_mb`` are not used.
* Free capacity is *derived* from the placements. The files' ``free_cpu`` and
  ``memory_huge_free_mb`` are ignored (the authors' writer copies NUMA 0's free memory into
  NUMA 1's, for one); each (host, NUMA) whose stated free values disagree with the derived
  ones counts once in :attr:`LoadedMapping.free_mismatches`, with a message in
  :attr:`LoadedMapping.warnings`.
* Only ``ACTIVE`` hosts are part of the problem. VMs on a ``DISABLED`` or ``OUTAGE`` host
  are not part of it either: they do not count in the fragment rate, cannot move and
  nothing can move onto their host (as in the authors' environment, whose FR and action
  space cover active hosts only). They are kept verbatim for writing back and listed in
  :attr:`LoadedMapping.skipped_vms`.
* A VM with one ``numa`` entry is single-NUMA on that node; with two (nodes 0 and 1, the
  same cpu and memory in both) it is double-NUMA, its total being the sum. The NUMA count
  is per instance, not per type: the authors' data deploys some types either way.
* ``allow_migration: false`` keeps the VM where it is (the authors' environment overrides
  it to true; we do not). A missing ``allow_migration`` means true.
* All clusters' active hosts form one pool (as in the authors' scheduler, which lists the
  active hosts of every cluster together).
* Numbers may be integers or integral floats (``4.0``); anything else is an error.

Errors are :class:`dcsim.errors.ConfigError` naming the file and the JSON path, e.g.
``m.json: cluster_list[0].vm_instance[12].numa[1].cpu: expected a whole number, got 2.5``.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dcsim.atomic import write_atomic
from dcsim.errors import ConfigError, StateError
from dcsim.vm.model import BOTH, NUMAS, VM, Host, MappingState

STATUSES = ("ACTIVE", "DISABLED", "OUTAGE")


@dataclass
class LoadedMapping:
    """A parsed mapping: the :class:`MappingState` of the active hosts plus what is needed to
    write the file back (:func:`mapping_to_json`)."""

    state: MappingState
    source: str
    free_mismatches: int = 0
    warnings: list[str] = field(default_factory=list)
    skipped_hosts: list[str] = field(default_factory=list)
    skipped_vms: list[str] = field(default_factory=list)
    doc: dict[str, Any] = field(default_factory=dict, repr=False)
    #: per state host / VM: (cluster index, index in host_info / vm_instance)
    host_loc: list[tuple[int, int]] = field(default_factory=list, repr=False)
    vm_loc: list[tuple[int, int]] = field(default_factory=list, repr=False)


class _Reader:
    def __init__(self, source: str):
        self.source = source

    def fail(self, path: str, msg: str) -> ConfigError:
        return ConfigError(f"{self.source}: {path}: {msg}" if path else f"{self.source}: {msg}")

    def get(self, obj: Any, key: str, path: str, *, required: bool = True, default=None):
        if not isinstance(obj, dict):
            raise self.fail(path, f"expected an object, got {type(obj).__name__}")
        if key not in obj:
            if required:
                raise self.fail(path, f"missing {key!r}")
            return default
        return obj[key]

    def items(self, obj: Any, key: str, path: str) -> list:
        value = self.get(obj, key, path)
        if not isinstance(value, list):
            raise self.fail(_join(path, key), f"expected a list, got {type(value).__name__}")
        return value

    def whole(self, obj: Any, key: str, path: str, *, minimum: int = 0) -> int:
        value = self.get(obj, key, path)
        where = _join(path, key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(where, f"expected a number, got {value!r}")
        if value != value or value in (float("inf"), float("-inf")) or value != int(value):
            raise self.fail(where, f"expected a whole number, got {value!r}")
        if value < minimum:
            raise self.fail(where, f"must be >= {minimum}, got {value!r}")
        return int(value)

    def ident(self, obj: Any, key: str, path: str) -> str:
        value = self.get(obj, key, path)
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise self.fail(_join(path, key), f"expected a string id, got {value!r}")
        return str(value)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def parse_mapping(doc: Any, source: str = "<mapping>") -> LoadedMapping:
    """Parse an already-decoded JSON document (see the module docstring)."""
    r = _Reader(source)
    clusters = r.items(doc, "cluster_list", "")
    hosts: list[Host] = []
    host_loc: list[tuple[int, int]] = []
    host_paths: list[str] = []
    status_of: dict[str, str] = {}
    stated_free: list[list[tuple[int | None, int | None]]] = []
    skipped_hosts: list[str] = []
    # pass 1: hosts
    for c, cluster in enumerate(clusters):
        cpath = f"cluster_list[{c}]"
        for i, h in enumerate(r.items(cluster, "host_info", cpath)):
            hpath = f"{cpath}.host_info[{i}]"
            hid = r.ident(h, "node_id", hpath)
            if hid in status_of:
                raise r.fail(_join(hpath, "node_id"), f"duplicate host id {hid!r}")
            status = r.get(h, "status", hpath)
            if status not in STATUSES:
                raise r.fail(_join(hpath, "status"),
                             f"expected one of {', '.join(STATUSES)}, got {status!r}")
            status_of[hid] = status
            numas = r.items(h, "numa", hpath)
            if len(numas) != NUMAS:
                raise r.fail(_join(hpath, "numa"), f"expected 2 NUMA entries, got {len(numas)}")
            cpu = [0, 0]
            mem = [0, 0]
            free: list[tuple[int | None, int | None]] = [(None, None), (None, None)]
            seen = set()
            for j, nu in enumerate(numas):
                npath = f"{hpath}.numa[{j}]"
                node = r.whole(nu, "node", npath)
                if node not in (0, 1) or node in seen:
                    raise r.fail(_join(npath, "node"),
                                 f"expected NUMA nodes 0 and 1 once each, got {node}")
                seen.add(node)
                cpu[node] = r.whole(nu, "total_cpu", npath)
                mem[node] = r.whole(nu, "memory_huge_total_mb", npath)
                fc = r.whole(nu, "free_cpu", npath, minimum=-(2**62)) \
                    if isinstance(nu, dict) and "free_cpu" in nu else None
                fm = r.whole(nu, "memory_huge_free_mb", npath, minimum=-(2**62)) \
                    if isinstance(nu, dict) and "memory_huge_free_mb" in nu else None
                free[node] = (fc, fm)
            if status != "ACTIVE":
                skipped_hosts.append(hid)
                continue
            hosts.append(Host(hid, (cpu[0], cpu[1]), (mem[0], mem[1])))
            host_loc.append((c, i))
            host_paths.append(hpath)
            stated_free.append(free)
    index = {h.id: n for n, h in enumerate(hosts)}
    # pass 2: VMs
    vms: list[VM] = []
    placement: list[tuple[int, int]] = []
    vm_loc: list[tuple[int, int]] = []
    vm_paths: list[str] = []
    skipped_vms: list[str] = []
    seen_vms: set[str] = set()
    for c, cluster in enumerate(clusters):
        cpath = f"cluster_list[{c}]"
        for i, v in enumerate(r.items(cluster, "vm_instance", cpath)):
            vpath = f"{cpath}.vm_instance[{i}]"
            vid = r.ident(v, "instance_id", vpath)
            if vid in seen_vms:
                raise r.fail(_join(vpath, "instance_id"), f"duplicate VM id {vid!r}")
            seen_vms.add(vid)
            hid = r.ident(v, "host_id", vpath)
            if hid not in status_of:
                raise r.fail(_join(vpath, "host_id"), f"no host {hid!r} in host_info")
            vtype = r.get(v, "instance_type", vpath, required=False, default="")
            allow = r.get(v, "allow_migration", vpath, required=False, default=True)
            if not isinstance(allow, bool):
                raise r.fail(_join(vpath, "allow_migration"), f"expected true or false, got "
                             f"{allow!r}")
            numas = r.items(v, "numa", vpath)
            if len(numas) not in (1, 2):
                raise r.fail(_join(vpath, "numa"), f"expected 1 or 2 NUMA entries, got "
                             f"{len(numas)}")
            parts = []
            for j, nu in enumerate(numas):
                npath = f"{vpath}.numa[{j}]"
                node = r.whole(nu, "node", npath)
                if node not in (0, 1):
                    raise r.fail(_join(npath, "node"), f"expected NUMA node 0 or 1, got {node}")
                parts.append((node, r.whole(nu, "cpu", npath, minimum=1),
                              r.whole(nu, "mem_mb", npath)))
            if len(parts) == 2:
                if {parts[0][0], parts[1][0]} != {0, 1}:
                    raise r.fail(_join(vpath, "numa"), "a double-NUMA VM needs nodes 0 and 1")
                if parts[0][1:] != parts[1][1:]:
                    raise r.fail(_join(vpath, "numa[1]"),
                                 f"a double-NUMA VM needs the same cpu and memory on both "
                                 f"nodes, got {parts[0][1:]} and {parts[1][1:]}")
            if status_of[hid] != "ACTIVE":
                skipped_vms.append(vid)
                continue
            cpu = sum(p[1] for p in parts)
            mem = sum(p[2] for p in parts)
            vms.append(VM(vid, cpu, mem, len(parts), allow, str(vtype)))
            placement.append((index[hid], parts[0][0] if len(parts) == 1 else BOTH))
            vm_loc.append((c, i))
            vm_paths.append(vpath)
    if not hosts:
        why = (f" ({len(skipped_hosts)} skipped as not in service)" if skipped_hosts else "")
        raise ConfigError(f"{source}: cluster_list: no host to reschedule on{why}")
    if not vms:
        raise ConfigError(f"{source}: cluster_list: no VM to reschedule (every host's "
                          "vm_instance is empty)")
    try:
        state = MappingState(hosts, vms, placement)
    except StateError as e:
        # name the host whose capacity the placements exceed
        raise r.fail(_overflow_path(hosts, vms, placement, host_paths, vm_paths), str(e)) \
            from None
    warnings = []
    for n, free in enumerate(stated_free):
        for j in (0, 1):
            fc, fm = free[j]
            dc, dm = int(state.free_cpu[n, j]), int(state.free_mem[n, j])
            bad = []
            if fc is not None and fc != dc:
                bad.append(f"free_cpu {fc} (derived {dc})")
            if fm is not None and fm != dm:
                bad.append(f"memory_huge_free_mb {fm} (derived {dm})")
            if bad:
                warnings.append(f"{host_paths[n]}.numa[{j}]: {', '.join(bad)}")
    return LoadedMapping(state, source, len(warnings), warnings, skipped_hosts, skipped_vms,
                         doc, host_loc, vm_loc)


def _overflow_path(hosts, vms, placement, host_paths, vm_paths) -> str:
    """The JSON path of the VM whose placement first overflows its host."""
    used = {}
    for k, (h, n) in enumerate(placement):
        v = vms[k]
        for j in ((0, 1) if n == BOTH else (n,)):
            c, m = used.get((h, j), (0, 0))
            c, m = c + v.cpu // v.numas, m + v.mem // v.numas
            used[(h, j)] = (c, m)
            if c > hosts[h].cpu[j] or m > hosts[h].mem[j]:
                return vm_paths[k]
    return ""


def load_mapping(path: str | os.PathLike) -> LoadedMapping:
    """Read and parse a mapping file; errors name the file and the JSON path."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{p}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not UTF-8 text (byte {e.start})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{p}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") \
            from None
    return parse_mapping(doc, str(p))


def mapping_to_json(loaded: LoadedMapping, state: MappingState | None = None) -> dict:
    """The document of ``loaded`` with the placements of ``state`` (default: the loaded
    state): each VM's ``host_id`` and ``numa`` entries rewritten, each active host's
    ``free_cpu``/``memory_huge_free_mb`` set to the derived values, everything else kept.
    A VM that moved to a host of another cluster is listed under that cluster."""
    state = loaded.state if state is None else state
    doc = copy.deepcopy(loaded.doc)
    clusters = doc["cluster_list"]
    for n, (c, i) in enumerate(loaded.host_loc):
        numas = clusters[c]["host_info"][i]["numa"]
        for entry in numas:
            j = int(entry["node"])
            entry["free_cpu"] = int(state.free_cpu[n, j])
            entry["memory_huge_free_mb"] = int(state.free_mem[n, j])
    cluster_of_host = {n: c for n, (c, _) in enumerate(loaded.host_loc)}
    originals = [list(cl.get("vm_instance", [])) for cl in clusters]
    target: dict[tuple[int, int], int] = {}  # (cluster, index) of a state VM -> new cluster
    for k, (c, i) in enumerate(loaded.vm_loc):
        entry = originals[c][i]
        h, numa = int(state.vm_host[k]), int(state.vm_numa[k])
        entry["host_id"] = state.host_ids[h]
        cpu, mem = int(state.vm_cpu[k]), int(state.vm_mem[k])
        entry["numa"] = ([{"node": 0, "cpu": cpu, "mem_mb": mem},
                          {"node": 1, "cpu": cpu, "mem_mb": mem}] if numa == BOTH
                         else [{"node": numa, "cpu": cpu, "mem_mb": mem}])
        target[(c, i)] = cluster_of_host[h]
    for cl in clusters:
        if "vm_instance" in cl:
            cl["vm_instance"] = []
    for c, entries in enumerate(originals):
        for i, entry in enumerate(entries):
            clusters[target.get((c, i), c)].setdefault("vm_instance", []).append(entry)
    return doc


def save_mapping(path: str | os.PathLike, loaded: LoadedMapping,
                 state: MappingState | None = None) -> None:
    """Write :func:`mapping_to_json` to ``path`` atomically."""
    doc = mapping_to_json(loaded, state)
    write_atomic(path, (json.dumps(doc, indent=None, separators=(",", ":")) + "\n").encode())


def migration_columns(state: MappingState, records) -> dict[str, np.ndarray]:
    """One column per field of a migration (``step``, ``vm_id``, ``from_host``,
    ``from_numa``, ``to_host``, ``to_numa``; NUMA −1 = both), one row per record of
    ``records`` (:class:`~dcsim.vm.model.MoveRecord`), ids from ``state``: the rows of the
    ``migrations`` table (:data:`dcsim.results.schema.VM_MIGRATIONS`)."""
    rows = [state.describe(r) for r in records]
    text = ("vm_id", "from_host", "to_host")
    return {k: np.array([r[k] for r in rows], dtype=str if k in text else np.int64)
            for k in ("step", "vm_id", "from_host", "from_numa", "to_host", "to_numa")}
