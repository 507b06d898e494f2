"""Topology builders, specs and topology files."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dcsim.errors import ConfigError
from dcsim.model.topologies import (
    FABRIC_PRESETS,
    TOPOLOGY_KINDS,
    FatTreeSpec,
    FileSpec,
    build_topology,
)
from dcsim.model.topology_io import load_topology, save_topology

DATA = Path(__file__).parent / "data"


def tier_caps(topo, tier):
    return topo.link_capacity[topo.link_tier == tier]


def n_switches(topo, tier):
    return sum(1 for _, d in topo.graph.nodes(data=True)
               if d["kind"] == "switch" and d["tier"] == tier)


# ---------------------------------------------------------------------------- fat tree
def test_ahab_k12_preset():
    """AHAB's k=12 tree: 432 hosts of 8 CU, 3456 CU, uplinks 8/48/288 BU."""
    t = build_topology({"kind": "fat_tree", "preset": "ahab_k12"})
    assert t.n_servers == 432 and t.resources == ("cpu",)
    assert t.total_capacity().tolist() == [3456.0]
    assert (n_switches(t, 1), n_switches(t, 2), n_switches(t, 3)) == (72, 12, 1)
    assert t.n_links == 432 + 72 + 12
    assert set(tier_caps(t, 1)) == {8.0} and set(tier_caps(t, 2)) == {48.0}
    assert set(tier_caps(t, 3)) == {288.0}
    assert t.tier_names == {1: "host", 2: "rack", 3: "pod"}
    assert t.is_tree()


def test_ahab_fig1_preset():
    """AHAB Fig. 1: 2 pods x 2 racks x 2 hosts of 4 CU, links of 6, 12 and 24 BU."""
    t = build_topology({"kind": "fat_tree", "preset": "ahab_fig1"})
    assert t.n_servers == 8 and t.total_capacity().tolist() == [32.0]
    assert t.link_capacity[t.link_tier == 1].tolist() == [6.0] * 8
    assert tier_caps(t, 2).tolist() == [12.0] * 4 and tier_caps(t, 3).tolist() == [24.0] * 2


def test_fat_tree_server_order_is_pod_major():
    """Servers are h0, h1, ... in pod, rack, host order and carry global rack and pod ids."""
    t = build_topology({"kind": "fat_tree", "pods": 2, "racks": 3, "hosts": 2})
    assert t.servers == [f"h{i}" for i in range(12)]
    assert t.server_rack.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert t.server_pod.tolist() == [0] * 6 + [1] * 6
    assert t.graph.has_edge("h7", "r3") and t.graph.has_edge("r3", "p1")
    assert t.link_tier.tolist() == sorted(t.link_tier.tolist())


def test_fat_tree_oversubscription_and_explicit_links():
    """Oversubscription divides the summed uplinks; explicit rack_link/pod_link win."""
    t = build_topology({"kind": "fat_tree", "pods": 2, "racks": 4, "hosts": 6, "host_link": 10,
                        "oversubscription": {"rack": 2, "pod": 3}})
    assert set(tier_caps(t, 2)) == {30.0} and set(tier_caps(t, 3)) == {40.0}
    t = build_topology({"kind": "fat_tree", "preset": "ahab_fig1", "rack_link": 5})
    assert set(tier_caps(t, 2)) == {5.0} and set(tier_caps(t, 3)) == {10.0}
    assert t.params["rack_link"] == 5 and t.params["pod_link"] == 10


def test_explicit_fields_override_preset():
    """A preset fills only the fields the user left out."""
    t = build_topology({"kind": "fat_tree", "preset": "ahab_k12", "pods": 2,
                        "server": {"cpu": 8, "mem": 32}})
    assert t.n_servers == 72 and t.resources == ("cpu", "mem")
    assert t.total_capacity().tolist() == [576.0, 2304.0]
    assert t.name == "ahab_k12"


def test_build_accepts_a_spec_model():
    """build_topology takes a validated spec model as well as a dict."""
    t = build_topology(FatTreeSpec(pods=1, racks=1, hosts=3, name="mini"))
    assert t.name == "mini" and t.n_servers == 3


# ---------------------------------------------------------------------------- fabric
@pytest.mark.parametrize("preset", ["alpha", "beta", "gamma", "delta", "α", "δ"])
def test_fabric_presets_counts(preset):
    """Node and link counts of Nara's α β γ δ follow from the table's parameters."""
    t = build_topology({"kind": "fabric", "preset": preset})
    p = FABRIC_PRESETS[{"α": "alpha", "δ": "delta"}.get(preset, preset)]
    racks = p["pods"] * p["racks"]
    fabric = p["pods"] * p["fabric"]
    spines = p["fabric"] * p["spines"]
    assert t.n_servers == racks * p["servers"]
    assert (n_switches(t, 1), n_switches(t, 2), n_switches(t, 3)) == (racks, fabric, spines)
    assert t.n_links == t.n_servers + racks * p["fabric"] + fabric * p["spines"]
    assert set(tier_caps(t, 2)) == {p["rf"]} and set(tier_caps(t, 3)) == {p["fs"]}
    assert t.total_capacity().tolist() == [10.0 * t.n_servers] * 2


def test_fabric_alpha_matches_paper():
    """α: 40 servers in 4 racks, 4 fabric switches, 2 spines, 40 + 8 + 4 = 52 links."""
    t = build_topology({"kind": "fabric", "preset": "alpha"})
    assert (t.n_servers, n_switches(t, 1), n_switches(t, 2), n_switches(t, 3)) == (40, 4, 4, 2)
    assert t.n_links == 52 and t.name == "fabric-alpha"
    assert t.tier_names == {1: "server-rack", 2: "rack-fabric", 3: "fabric-spine"}


def test_fabric_wiring_uses_planes():
    """Racks reach every fabric switch of their pod; fabric switch j reaches plane j only."""
    t = build_topology({"kind": "fabric", "pods": 3, "racks": 2, "servers": 1, "fabric": 2,
                        "spines": 2})
    g = t.graph
    assert sorted(g["r3"]) == ["f1_0", "f1_1", "h3"]
    assert sorted(n for n in g["f2_1"] if n.startswith("s")) == ["s1_0", "s1_1"]
    assert sorted(g["s0_1"]) == ["f0_0", "f1_0", "f2_0"]


def test_fabric_params_keep_server_total():
    """describe() reports the total server count; per-rack count is servers_per_rack."""
    d = build_topology({"kind": "fabric", "preset": "gamma"}).describe()
    assert d["servers"] == 640 and d["servers_per_rack"] == 40


# ---------------------------------------------------------------------------- optical
@pytest.mark.parametrize("n", [8, 16, 32])
@pytest.mark.parametrize("ovs,mult,bottom_top", [("1:16", (2, 0.5), 16), ("1:8", (4, 1), 8),
                                                  ("1:4", (4, 2), 4)])
def test_optical_channels(n, ovs, mult, bottom_top):
    """The 9 optical topologies: n channels at tier 1, (2n, n/2), (4n, n), (4n, 2n) above."""
    t = build_topology({"kind": "optical", "channels": n, "oversubscription": ovs})
    assert t.n_servers == 64 and t.total_capacity().tolist() == [1024.0, 1024.0]
    assert set(tier_caps(t, 1)) == {n}
    assert set(tier_caps(t, 2)) == {mult[0] * n} and set(tier_caps(t, 3)) == {mult[1] * n}
    assert (n_switches(t, 1), n_switches(t, 2), n_switches(t, 3)) == (4, 4, 4)
    rack_down, rack_up = 16 * n, 2 * mult[0] * n  # each rack: 16 servers, 2 tier-2 switches
    agg_down, agg_up = 2 * mult[0] * n, 2 * mult[1] * n  # each tier-2: 2 racks, 2 spines
    assert (rack_down / rack_up) * (agg_down / agg_up) == bottom_top
    assert tier_caps(t, 3).sum() / 2 == 32 * n / bottom_top  # per pod, servers vs. top


def test_optical_parameters_are_free():
    """Counts and channels are free; an odd n keeps n/2 channels at tier 3 for 1:16."""
    t = build_topology({"kind": "optical", "pods": 4, "racks": 4, "channels": 5,
                        "oversubscription": "1:16"})
    assert t.n_servers == 4 * 4 * 16 and set(tier_caps(t, 3)) == {2.5}
    t = build_topology({"kind": "optical", "tier3_channels": 3})
    assert set(tier_caps(t, 3)) == {3.0}


def switch_ratios(topo, tier):
    """Down/up capacity of every tier-``tier`` switch, read off the graph's links."""
    g = topo.graph
    out = set()
    for node, d in g.nodes(data=True):
        if d["kind"] == "switch" and d["tier"] == tier:
            down = sum(g.edges[node, v]["capacity"] for v in g[node] if g.nodes[v]["tier"] < tier)
            up = sum(g.edges[node, v]["capacity"] for v in g[node] if g.nodes[v]["tier"] > tier)
            out.add(down / up)
    return out


@pytest.mark.parametrize("n", [8, 16, 32])
@pytest.mark.parametrize("ovs", ["1:16", "1:8", "1:4"])
def test_optical_scaled_keeps_every_oversubscription(n, ovs):
    """The scaled preset has 1024 servers (16x) and the same per-switch down/up ratio at
    each tier as the 64-server topology, hence the same bottom-to-top oversubscription."""
    small = build_topology({"kind": "optical", "channels": n, "oversubscription": ovs})
    big = build_topology({"kind": "optical", "preset": "scaled", "channels": n,
                          "oversubscription": ovs})
    assert big.n_servers == 1024 and big.name == f"optical-{n}-{ovs}-scaled"
    assert big.total_capacity().tolist() == [16384.0, 16384.0]
    for tier in (1, 2):
        assert switch_ratios(big, tier) == switch_ratios(small, tier)
        assert len(switch_ratios(small, tier)) == 1
    (r1,), (r2,) = switch_ratios(big, 1), switch_ratios(big, 2)
    assert r1 * r2 == int(ovs.split(":")[1])
    assert (n_switches(big, 1), n_switches(big, 2), n_switches(big, 3)) == (64, 8, 32)


def test_optical_preset_fields_override():
    """An explicit count wins over the preset's."""
    t = build_topology({"kind": "optical", "preset": "scaled", "pods": 2})
    assert t.n_servers == 2 * 16 * 16


# ---------------------------------------------------------------------------- flat
def test_flat_has_servers_and_no_links():
    """A flat topology is servers only: zero links, no tiers."""
    t = build_topology({"kind": "flat", "servers": 5, "server": {"cpu": 10, "mem": 20}})
    assert t.n_servers == 5 and t.n_links == 0 and t.tiers() == []
    assert t.total_capacity().tolist() == [50.0, 100.0]


# ---------------------------------------------------------------------------- spec errors
@pytest.mark.parametrize("spec,message", [
    ({"kind": "fat_tree", "pods": 0}, "topology.pods: Input should be greater than 0"),
    ({"kind": "fat_tree", "oversubscription": {"rack": -1}}, "topology.oversubscription.rack"),
    ({"kind": "fabric", "preset": "epsilon"}, "topology.preset"),
    ({"kind": "fabric", "bogus": 1}, "topology.bogus: Extra inputs are not permitted"),
    ({"kind": "flat", "server": {"cpu": -1}}, "topology.server.cpu"),
    ({"kind": "flat", "server": {}}, "topology.server"),
    ({"kind": "optical", "oversubscription": "1:2"}, "topology.oversubscription"),
    ({"kind": "torus"}, "topology.kind: unknown kind 'torus'"),
    ({"pods": 2}, "topology.kind"),
])
def test_invalid_spec_names_the_field(spec, message):
    """An invalid spec is a ConfigError that names the offending field."""
    with pytest.raises(ConfigError) as exc:
        build_topology(spec)
    assert str(exc.value).startswith(message)


def test_every_kind_is_listed():
    """TOPOLOGY_KINDS lists exactly the kinds build_topology accepts."""
    assert TOPOLOGY_KINDS == ("fat_tree", "fabric", "optical", "flat", "file")


# ---------------------------------------------------------------------------- files
def test_json_and_graphml_load_the_same_network():
    """tiny.json and tiny.graphml (untyped strings) give identical topologies."""
    a, b = load_topology(DATA / "tiny.json"), load_topology(DATA / "tiny.graphml")
    for t in (a, b):
        assert t.name == "tiny" and t.servers == ["h0", "h1", "h2", "h3"]
        assert t.resources == ("cpu", "mem")
    assert np.array_equal(a.server_capacity, b.server_capacity)
    assert np.array_equal(a.link_capacity, b.link_capacity)
    assert a.link_tier.tolist() == [1, 1, 1, 1, 2, 2] and a.server_rack.tolist() == [0, 0, 1, 1]
    assert a.tier_names == {1: "server-tor", 2: "tor-core"}


def test_edges_key_is_accepted(tmp_path):
    """Node-link JSON with an 'edges' list loads like one with 'links'."""
    data = json.loads((DATA / "tiny.json").read_text())
    data["edges"] = data.pop("links")
    (tmp_path / "t.json").write_text(json.dumps(data))
    assert load_topology(tmp_path / "t.json").n_links == 6


def test_explicit_resources_and_format(tmp_path):
    """`resources` picks and orders the resources; `format` overrides the extension."""
    path = tmp_path / "tiny.txt"
    path.write_text((DATA / "tiny.json").read_text())
    t = load_topology(path, format="json", resources=["mem"])
    assert t.resources == ("mem",) and t.total_capacity().tolist() == [48.0]


@pytest.mark.parametrize("name,message", [
    ("missing_mem.json", "server 'h3' has no resource 'mem'"),
    ("negative_capacity.json", "link 'tor0'-'core' capacity is negative"),
    ("disconnected.json", "not connected"),
    ("truncated.json", "not valid json"),
    ("truncated.graphml", "not valid graphml"),
    ("no_such_file.json", "no such topology file"),
    ("tiny.yaml", "unknown topology format"),
])
def test_broken_files_report_path_and_reason(name, message):
    """Every problem with a topology file is a ConfigError starting with the file path."""
    path = DATA / name
    with pytest.raises(ConfigError) as exc:
        load_topology(path)
    assert str(exc.value).startswith(f"{path}: ") and message in str(exc.value)


def test_non_numeric_capacity_is_reported(tmp_path):
    """A capacity that is not a number names the link."""
    data = json.loads((DATA / "tiny.json").read_text())
    data["links"][0]["capacity"] = "fast"
    (tmp_path / "t.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="link 'h0'-'tor0' capacity is not a number"):
        load_topology(tmp_path / "t.json")


@pytest.mark.parametrize("spec", [{"kind": "fat_tree", "preset": "ahab_fig1"},
                                  {"kind": "fabric", "preset": "beta"},
                                  {"kind": "optical", "channels": 8}])
def test_save_and_load_round_trip(tmp_path, spec):
    """An exported builtin loads back with the same servers, links, capacities and names."""
    t = build_topology(spec)
    save_topology(t, tmp_path / "t.json")
    u = build_topology({"kind": "file", "path": str(tmp_path / "t.json")})
    assert (u.name, u.servers, u.links, u.resources) == (t.name, t.servers, t.links, t.resources)
    assert np.array_equal(u.server_capacity, t.server_capacity)
    assert np.array_equal(u.link_capacity, t.link_capacity)
    assert np.array_equal(u.link_tier, t.link_tier)
    assert np.array_equal(u.server_rack, t.server_rack)
    assert np.array_equal(u.server_pod, t.server_pod)
    assert u.tier_names == t.tier_names and u.params["kind"] == "file"


def test_file_spec_name_override():
    """A file spec may rename the topology."""
    t = build_topology(FileSpec(path=str(DATA / "tiny.graphml"), name="mine"))
    assert t.name == "mine" and t.n_servers == 4


def test_model_package_never_imports_simpy():
    """dcsim.model (builders, files, paths included) stays free of SimPy."""
    code = ("import sys, dcsim.model, dcsim.model.topologies, dcsim.model.topology_io, "
            "dcsim.model.paths; assert 'simpy' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(("preset", "pods", "racks", "tier3", "links"),
                         [("authors_small", 2, 2, 1, 64 + 8 + 4),
                          ("authors_large", 8, 8, 4, 1024 + 128 + 64)])
def test_authors_wirings(preset, pods, racks, tier3, links):
    """The authors' code's topologies: 16-unit servers, 16 per rack, each rack linked to
    both tier-2 switches of its pod, tier-2 switch j of every pod to each of the ``tier3``
    tier-3 switches of plane j; channels per tier n, m2·n, m3·n as dcsim's optical."""
    t = build_topology({"kind": "optical", "preset": preset, "channels": 8,
                        "oversubscription": "1:16"})
    assert t.n_servers == pods * racks * 16
    assert t.name == f"optical-8-1:16-{preset}"
    assert t.n_links == links
    g = t.graph
    spines = sorted(v for v in g if g.nodes[v].get("tier") == 3)
    assert len(spines) == 2 * tier3 and all(g.degree(v) == pods for v in spines)
    for p in range(pods):
        for j in range(2):
            up = sorted(v for v in g.adj[f"f{p}_{j}"] if g.nodes[v].get("tier") == 3)
            assert up == sorted(v for v in spines if v.startswith(f"s{j}_"))
            assert len(up) == tier3
    caps = sorted({float(c) for c in t.link_capacity})
    assert caps == [4.0, 8.0, 16.0]   # 1:16: n/2 at tier 3, n, 2n at tier 2



def test_a_resource_listed_twice_is_named(tmp_path):
    """#47: ``resources: [cpu, cpu]`` was accepted and a workload's mem then blamed."""
    import json

    data = json.loads((DATA / "tiny.json").read_text())
    listed = data.setdefault("graph", {}).get("resources") or ["cpu"]
    data["graph"]["resources"] = [listed[0], listed[0]]
    (tmp_path / "dup.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=f"resources lists '{listed[0]}' twice"):
        load_topology(tmp_path / "dup.json")


@pytest.mark.parametrize("fmt", ["json", "graphml"])
def test_a_topology_file_beyond_its_bounds_is_refused_before_it_is_parsed(tmp_path, fmt):
    """#47 item 4: a file's bytes, nodes and links are bounded (LIMITS) before the graph is
    built, each with one line naming the bound and the key that raises it."""
    from dcsim.model.topologies import build_topology

    src = DATA / f"tiny.{fmt}"
    path = tmp_path / src.name
    shutil.copy(src, path)
    topo = load_topology(path)
    n, m = topo.graph.number_of_nodes(), topo.graph.number_of_edges()
    size = path.stat().st_size
    for limits, what in (({"max_bytes": size - 1}, f"{size:,} bytes, above the {size - 1:,}"),
                         ({"max_nodes": n - 1}, f"{n:,} nodes, above the {n - 1:,}"),
                         ({"max_links": m - 1}, f"{m:,} links, above the {m - 1:,}")):
        with pytest.raises(ConfigError, match=re.escape(what)):
            load_topology(path, limits=limits)
        key = next(iter(limits))
        with pytest.raises(ConfigError, match=f"set topology.{key}"):
            build_topology({"kind": "file", "path": str(path), **limits})
    # the bound raised for a trusted file reads it
    assert build_topology({"kind": "file", "path": str(path), "max_nodes": n}).n_servers == \
        topo.n_servers


def test_a_json_topology_nested_too_deep_is_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ConfigError, match="deep.json: not valid json: nested too deep"):
        load_topology(path)
