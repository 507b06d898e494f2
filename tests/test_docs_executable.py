"""The tutorial and the how-tos are executable: every shell and Python block they show runs,
in order, in a scratch folder holding a copy of ``experiments/`` (and ``plugins/``), and
every ``text`` block right after one is what that block prints (each line of it appears in
the output, wall times aside). A doc that drifts from the code fails here (issue #16,
item 15).

A how-to says what a reader does besides running commands with an HTML comment on the line
before a block (invisible when rendered):

- ``<!-- doc-test: file PATH -->``: the block is the content of file PATH (the reader saves
  it there); it is written, not run;
- ``<!-- doc-test: install -->``: a ``pip install -e .`` of the plugin in the current folder;
  it is installed into a scratch folder that only the commands after it see;
- ``<!-- doc-test: reduced ARGS -->``: a long experiment, run with ARGS added to each
  ``dcsim run`` line (``--seeds 1 --set workload.requests=20``): the command as shown, on a
  small config;
- ``<!-- doc-test: skip (why) -->``: not run (a long training, a cluster that is not here);
- ``<!-- doc-test: not output -->``: a text block that is not the previous block's output.

Shell blocks run in bash and may ``cd``: the next block starts where the last one ended."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.pip import can_build_offline

ROOT = Path(__file__).parents[1]
FENCE = re.compile(r"(?:^<!-- doc-test: (.*?) -->\n\n?)?^```(\w*)\n(.*?)^```\n", re.S | re.M)
#: what differs between two runs of the same commands: wall-clock durations
VOLATILE = [(re.compile(r"\bin \d+(\.\d+)? ?s\b|\bin \d+ min \d+ s\b"), "in <t>")]


def directed_blocks(md: Path) -> list[tuple[str, str, str]]:
    """(doc-test directive or "", language, text) of every fenced block, in order."""
    return [(m.group(1) or "", m.group(2), m.group(3)) for m in FENCE.finditer(md.read_text())]


def normal(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        for rx, sub in VOLATILE:
            line = rx.sub(sub, line)
        if line.strip() and line.strip() != "...":  # "..." in a doc: lines left out
            out.append(line.rstrip())
    return out


def _dcsim_only(text: str) -> list[list[str]] | None:
    """The argument lists of a shell block made only of ``dcsim`` commands, else None."""
    commands = [c.strip() for c in text.replace("\\\n", " ").splitlines() if c.strip()]
    if not commands or not all(c.startswith("dcsim ") for c in commands):
        return None
    return [shlex.split(c)[1:] for c in commands]


class Reader:
    """Runs a doc's blocks as its reader would: where they are, with what they installed."""

    def __init__(self, cwd: Path):
        self.root = self.cwd = cwd
        self.site: Path | None = None  # where `doc-test: install` put plugins

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        if self.site is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(self.site), env.get("PYTHONPATH", "")) if p)
        return env

    def run(self, lang: str, text: str) -> tuple[str, int]:
        """What the block prints, and its exit status (the last failing command's).
        ``dcsim`` commands and Python run in this process (fast) unless a plugin was
        installed; other shell lines in bash."""
        dcsim = _dcsim_only(text) if lang == "bash" and self.site is None else None
        if lang == "python":
            old = os.getcwd()
            os.chdir(self.cwd)
            try:
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    exec(compile(text, "<doc>", "exec"), {"__name__": "__doc_test__"})
                return buf.getvalue(), 0
            finally:
                os.chdir(old)
        if dcsim is not None:
            from click.testing import CliRunner

            from dcsim.cli import main

            old = os.getcwd()
            os.chdir(self.cwd)
            try:
                out, status = [], 0
                for args in dcsim:
                    r = CliRunner().invoke(main, args)
                    out.append(r.stdout + r.stderr)
                    status = r.exit_code or status
                return "".join(out), status
            finally:
                os.chdir(old)
        where = self.cwd / ".doc-test-cwd"
        script = f"status=0\ntrap 'status=$?' ERR\n{text}\npwd > {shlex.quote(str(where))}\n" \
                 "exit $status"
        r = subprocess.run(["bash", "-c", script], cwd=self.cwd, env=self.env(),
                           capture_output=True, text=True, timeout=300)
        if where.exists():
            self.cwd = Path(where.read_text().strip())
            where.unlink()
        return r.stdout + r.stderr, r.returncode

    def install(self) -> None:
        """``pip install -e .`` of the plugin here, into a scratch folder only later blocks
        see (the environment running the tests never does)."""
        self.site = self.site or self.root / ".doc-test-site"
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
               str(self.site), "."]
        if can_build_offline():
            cmd.insert(-1, "--no-build-isolation")
        r = subprocess.run(cmd, cwd=self.cwd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr

    def write(self, path: str, text: str) -> None:
        target = self.cwd / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def reduced(text: str, args: str) -> str:
    """``text`` with ``args`` added to each ``dcsim run`` command (before its comment)."""
    out = []
    for line in text.splitlines():
        if line.startswith("dcsim run "):
            command, hash_, comment = line.partition(" #")
            line = f"{command.rstrip()} {args}" + (f"  #{comment}" if hash_ else "")
        out.append(line)
    return "\n".join(out) + "\n"


def run_tutorial(md: Path, cwd: Path) -> list[tuple[str, list[str], list[str]]]:
    """Run ``md``'s blocks in ``cwd``: for each text block that follows a shell or Python
    block, (the command, the lines the doc shows, the lines the command printed). A block
    that fails (non-zero exit) must be followed by the output it shows (an error the doc
    demonstrates); otherwise the run stops with an AssertionError."""
    reader = Reader(cwd)
    checks = []
    last: tuple[str, str, int] | None = None
    for directive, lang, text in directed_blocks(md):
        if last is not None and last[2] != 0 and not (
                lang == "text" and directive != "not output"):
            raise AssertionError(f"{md.name}: this block failed (exit {last[2]}) and the doc "
                                 f"shows no output for it:\n{last[0]}\nit printed:\n{last[1]}")
        if directive.startswith("skip"):
            last = None
        elif directive.startswith("file "):
            reader.write(directive.split(None, 1)[1].strip(), text)
            last = None
        elif directive == "install":
            reader.install()
            last = None
        elif directive.startswith("reduced "):
            last = (text, *reader.run(lang, reduced(text, directive.split(None, 1)[1])))
        elif lang in ("bash", "python"):
            if "pip install" in text:  # the reader's environment is this one already
                last = None
                continue
            last = (text, *reader.run(lang, text))
        elif lang == "text" and last is not None and directive != "not output":
            checks.append((last[0], normal(text), normal(last[1])))
            last = None
        else:
            last = None
    if last is not None and last[2] != 0:
        raise AssertionError(f"{md.name}: the last block failed (exit {last[2]}):\n{last[0]}"
                             f"\nit printed:\n{last[1]}")
    return checks


def drift(checks) -> list[str]:
    out = []
    for cmd, shown, printed in checks:
        missing = [line for line in shown if line not in printed]
        if missing:
            out.append(f"after\n{cmd}\nthe doc shows lines the command did not print: "
                       f"{missing}\nit printed:\n" + "\n".join(printed))
    return out


def test_the_tutorial_runs_as_written(tmp_path):
    shutil.copytree(ROOT / "experiments", tmp_path / "experiments")
    checks = run_tutorial(ROOT / "docs" / "tutorial" / "quickstart.md", tmp_path)
    assert len(checks) >= 8
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize(("doc", "ran"), [
    ("```bash\necho a\n```\n\n```text\na\n```\n", True),
    ("```bash\necho a\n```\n\n```text\nb\n```\n", False),
])
def test_the_harness_catches_drift(tmp_path, doc, ran):
    md = tmp_path / "t.md"
    md.write_text(doc)
    [(cmd, shown, printed)] = run_tutorial(md, tmp_path)
    assert (shown == printed) is ran


def test_a_failing_command_needs_the_output_it_fails_with(tmp_path):
    """A block that exits non-zero passes only when the doc shows what it prints (an error
    on purpose); a failing block followed by prose or another command is an error. Files
    and cd carry over from block to block."""
    md = tmp_path / "t.md"
    md.write_text("<!-- doc-test: file sub/a.txt -->\n```text\nhello\n```\n\n"
                  "```bash\ncd sub\n```\n\n```bash\ncat a.txt; cat nope.txt\n```\n\n"
                  "```text\nhello\ncat: nope.txt: No such file or directory\n```\n")
    [(_, shown, printed)] = run_tutorial(md, tmp_path)
    assert shown == printed
    for doc in ("```bash\nfalse\n```\n\nprose\n\n```bash\ntrue\n```\n",
                "```bash\nfalse\n```\n"):
        md.write_text(doc)
        with pytest.raises(AssertionError, match="failed"):
            run_tutorial(md, tmp_path)


@pytest.mark.slow
def test_the_allocator_howto_runs_as_written(tmp_path):
    """docs/howto/write-an-allocator.md from a checkout: copy the template, write the files
    it shows, install the plugin (into a scratch folder), list it, run and validate its
    experiments, run its tests; every output it shows is what dcsim prints."""
    checkout = tmp_path / "dcsim"
    shutil.copytree(ROOT / "plugins", checkout / "plugins", ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    checks = run_tutorial(ROOT / "docs" / "howto" / "write-an-allocator.md", checkout)
    assert (tmp_path / "dcsim-worst-fit" / "results" / "worst_fit" / "summary.parquet").exists()
    assert len(checks) >= 5
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)


@pytest.mark.slow
def test_the_rescheduling_howto_runs_as_written(tmp_path):
    """docs/howto/vm-rescheduling.md: build a mapping, reschedule it with greedy, the MIP and
    the shipped learned policy (the FR, migrations and statuses are what dcsim prints); the
    two experiments, reduced, and their report."""
    _checkout(tmp_path, "experiments", "traces")
    checks = run_tutorial(ROOT / "docs" / "howto" / "vm-rescheduling.md", tmp_path)
    assert (tmp_path / "resched" / "summary.json").exists()
    assert len(checks) == 2
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)


def test_the_environments_reference_runs_as_written(tmp_path):
    """docs/reference/environments.md's example: make an environment by id after
    ``import dcsim`` and read its observation keys."""
    pytest.importorskip("gymnasium")
    checks = run_tutorial(ROOT / "docs" / "reference" / "environments.md", tmp_path)
    assert len(checks) == 1
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("sb3_contrib") is None,
                    reason="the how-to needs sb3-contrib (pip install sb3-contrib)")
def test_the_sb3_howto_runs_as_written(tmp_path):
    """docs/howto/train-with-sb3.md: MaskablePPO trains on dcsim/Nara-v0 and on
    dcsim/VMR2L-TwoStep-v0 without wrappers, the plugin it writes installs and is listed,
    and runs both policies in `dcsim run` and `dcsim reschedule` (issue #36)."""
    checks = run_tutorial(ROOT / "docs" / "howto" / "train-with-sb3.md", tmp_path)
    summary = pd.read_parquet(tmp_path / "results" / "sb3_nara" / "summary.parquet")
    assert set(summary["allocator"]) >= {"tetris", "random_multi"}
    assert summary["allocator"].str.startswith("sb3_nara").sum() == 3
    assert len(checks) == 4
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)


def _checkout(tmp_path: Path, *folders: str) -> Path:
    """A scratch copy of the repository's ``folders`` (what a how-to's commands read)."""
    for f in folders:
        shutil.copytree(ROOT / f, tmp_path / f, ignore=shutil.ignore_patterns(
            "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    return tmp_path


@pytest.mark.slow
def test_the_trace_howto_runs_as_written(tmp_path):
    """docs/howto/use-a-trace.md: replay the slices, the column errors, a bad row, the
    importer from the shell and from Python; every output it shows is what dcsim prints."""
    cwd = _checkout(tmp_path, "experiments", "traces", "tests/data/traces")
    checks = run_tutorial(ROOT / "docs" / "howto" / "use-a-trace.md", cwd)
    assert len(checks) >= 7
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)


def test_the_topology_howto_runs_as_written(tmp_path):
    """docs/howto/custom-topology.md: export alpha, edit it, load it, run an experiment on
    it; what it prints is what the how-to shows."""
    checks = run_tutorial(ROOT / "docs" / "howto" / "custom-topology.md", tmp_path)
    assert (tmp_path / "alpha-edited.json").exists() and len(checks) == 2
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)


def _break(data: dict, how: str) -> None:
    """``alpha.json`` with one thing broken, as each line of the how-to's error list."""
    def server(name):
        return next(n for n in data["nodes"] if n["id"] == name)

    link = data["links"][0]  # h0 - r0
    {"nocap": lambda: link.pop("capacity"),
     "str": lambda: link.update(capacity="ten"),
     "nomem": lambda: server("h3").pop("mem"),
     "nores": lambda: data["graph"].update(resources=["cpu", "gpu"]),
     "neg": lambda: server("h3").update(cpu=-1.0),
     "kind": lambda: server("h3").update(kind="host"),
     "tier": lambda: server("h3").update(rack="a"),
     "noserv": lambda: [n.update(kind="switch") for n in data["nodes"]],
     "disc": lambda: data["links"].remove(link),
     "loop": lambda: data["links"].append({"source": "h1", "target": "h1", "capacity": 1}),
     "par": lambda: data.update(multigraph=True) or data["links"].append(dict(link)),
     "dup": lambda: data["nodes"].append(dict(server("h3"))),
     "dangling": lambda: data["links"].append({"source": "h1", "target": "x9",
                                                "capacity": 1}),
     "directed": lambda: data.update(directed=True)}[how]()


def test_the_topology_howto_lists_the_real_errors(tmp_path, monkeypatch):
    """Every line of custom-topology.md's list of validation errors is what loading that
    file says."""
    import json

    from dcsim import ConfigError
    from dcsim.model.topologies import build_topology
    from dcsim.model.topology_io import load_topology, save_topology

    monkeypatch.chdir(tmp_path)
    save_topology(build_topology({"kind": "fabric", "preset": "alpha"}), "alpha.json")
    (tmp_path / "alpha.yaml").write_text("{}")
    md = (ROOT / "docs" / "howto" / "custom-topology.md").read_text()
    listed = md.split("one thing broken;")[1].split("```text\n")[1].split("```")[0]
    lines = listed.strip().splitlines()
    assert len(lines) == 16
    for line in lines:
        path = line.split(":")[0]
        stem = path.split(".")[0]
        if stem not in ("alpha", "none"):
            data = json.loads((tmp_path / "alpha.json").read_text())
            _break(data, stem)
            (tmp_path / path).write_text(json.dumps(data))
        with pytest.raises(ConfigError) as e:
            load_topology(path)
        assert str(e.value) == line


#: the how-tos a test above runs as written
RUN_AS_WRITTEN = {"write-an-allocator.md", "vm-rescheduling.md", "use-a-trace.md",
                  "custom-topology.md", "queue-scheduling.md", "nara-optical-agent.md",
                  "failures.md", "train-with-sb3.md", "workloads-in-time.md",
                  "energy.md", "gpu-clusters.md", "network-aware-allocator.md",
                  "extend-dcsim.md"}


@pytest.mark.slow
def test_the_network_aware_allocator_howto_runs_as_written(tmp_path):
    """docs/howto/network-aware-allocator.md: the topology helpers, the free bandwidth
    between servers and the multi-server step one choice at a time; the worked plugin of
    plugins/dcsim-widest-path installed (into a scratch folder), listed, its experiment run
    and its tests. Every output it shows is what dcsim prints."""
    cwd = _checkout(tmp_path, "plugins")
    checks = run_tutorial(ROOT / "docs" / "howto" / "network-aware-allocator.md", cwd)
    assert (cwd / "plugins" / "dcsim-widest-path" / "results" / "widest_path"
            / "summary.parquet").exists()
    assert len(checks) >= 8
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)


def test_the_network_aware_howto_shows_the_shipped_plugin():
    """Every file network-aware-allocator.md has the reader write is the file
    plugins/dcsim-widest-path ships, byte for byte: the guide and the plugin cannot drift."""
    md = ROOT / "docs" / "howto" / "network-aware-allocator.md"
    files = [(d.split(None, 1)[1].strip(), text) for d, _, text in directed_blocks(md)
             if d.startswith("file ")]
    assert files
    for path, text in files:
        shipped = ROOT / "plugins" / "dcsim-widest-path" / path
        assert shipped.read_text() == text, f"{path} differs from {shipped}"


@pytest.mark.slow
def test_the_gpu_howto_runs_as_written(tmp_path):
    """docs/howto/gpu-clusters.md: the FGD experiment, reduced; its summary, pods and
    timeseries read with pandas; the authors' unstated choices as options; a GPU allocator
    plugin made from plugins/dcsim-gpu-first-fit, installed (into a scratch folder), listed,
    tested and run. Every output it shows is what dcsim prints."""
    cwd = _checkout(tmp_path, "experiments", "traces", "plugins")
    checks = run_tutorial(ROOT / "docs" / "howto" / "gpu-clusters.md", cwd)
    assert (cwd / "plugins" / "dcsim-least-allocated" / "results" / "least_allocated"
            / "summary.parquet").exists()
    assert len(checks) >= 8
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)


@pytest.mark.slow
def test_the_energy_howto_runs_as_written(tmp_path):
    """docs/howto/energy.md: idle on/off for a spreading and a packing allocator, the time
    series' power, switch-ons and a carbon trace, the shipped experiment reduced and its
    report; every output it shows is what dcsim prints."""
    cwd = _checkout(tmp_path, "experiments")
    checks = run_tutorial(ROOT / "docs" / "howto" / "energy.md", cwd)
    assert (cwd / "results" / "energy_consolidation" / "report" / "figures"
            / "metric_energy_j.png").exists() or importlib.util.find_spec("matplotlib") is None
    assert len(checks) >= 4
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("md", sorted(p.name for p in (ROOT / "docs" / "howto").glob("*.md")))
def test_every_howto_command_is_run_or_skipped_with_a_reason(md):
    """A how-to is run as written by a test here, or every shell and Python block it shows
    carries `doc-test: skip (why)`; a new how-to, or a new block in a skipped one, must
    choose."""
    blocks_ = directed_blocks(ROOT / "docs" / "howto" / md)
    skips = [d for d, _, _ in blocks_ if d.startswith("skip")]
    assert all(re.fullmatch(r"skip \(.+\)", d) for d in skips), skips
    if md in RUN_AS_WRITTEN:
        return
    unmarked = [text.splitlines()[0] for d, lang, text in blocks_
                if lang in ("bash", "python") and not d.startswith("skip")
                and "pip install" not in text]
    assert not unmarked, f"{md}: run these in a test, or mark them skip (why): {unmarked}"


@pytest.mark.slow
def test_the_queue_howto_runs_as_written(tmp_path):
    """docs/howto/queue-scheduling.md: the load sweep (reduced) and its report, the
    scheduler plugin code (the training is skipped)."""
    cwd = _checkout(tmp_path, "experiments")
    assert run_tutorial(ROOT / "docs" / "howto" / "queue-scheduling.md", cwd) == []
    assert (cwd / "results" / "deeprm_load_sweep" / "summary.parquet").exists()


@pytest.mark.slow
def test_the_optical_agent_howto_runs_as_written(tmp_path):
    """docs/howto/nara-optical-agent.md: the learned agents' experiment, reduced (the
    trainings are skipped)."""
    cwd = _checkout(tmp_path, "experiments")
    assert run_tutorial(ROOT / "docs" / "howto" / "nara-optical-agent.md", cwd) == []
    assert (cwd / "results" / "nara_optical_learned" / "summary.parquet").exists()


def test_reduced_adds_the_arguments_to_each_run_command():
    text = "dcsim run a.yaml --jobs 2   # a comment\npython r.py\ndcsim run b.yaml\n"
    assert reduced(text, "--seeds 1") == ("dcsim run a.yaml --jobs 2 --seeds 1  # a comment\n"
                                          "python r.py\ndcsim run b.yaml --seeds 1\n")


@pytest.mark.slow
def test_the_failures_howto_runs_as_written(tmp_path):
    """docs/howto/failures.md: drawn failures with drop and reallocate, a replayed trace and
    its component_failures rows, a bad row's error, the shipped experiment reduced."""
    _checkout(tmp_path, "experiments")
    checks = run_tutorial(ROOT / "docs" / "howto" / "failures.md", tmp_path)
    assert (tmp_path / "results" / "failures_fabric" / "summary.parquet").exists()
    assert len(checks) >= 4
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)


def test_the_workloads_in_time_howto_runs_as_written(tmp_path):
    """docs/howto/workloads-in-time.md: a diurnal experiment with heavy-tailed durations, its
    acceptance by time of day and its counts against the integrated rate, a rate table,
    bursts and a trace-derived curve swapped in with --set, a refused amplitude."""
    cwd = _checkout(tmp_path, "traces")
    checks = run_tutorial(ROOT / "docs" / "howto" / "workloads-in-time.md", cwd)
    assert (cwd / "results" / "trace" / "summary.parquet").exists()
    assert len(checks) >= 5
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)


@pytest.mark.slow
def test_the_extend_howto_runs_as_written(tmp_path):
    """docs/howto/extend-dcsim.md from a checkout: each kind's package written as shown,
    installed (into a scratch folder), listed and selected from YAML; every output it shows
    is what dcsim prints."""
    checkout = tmp_path / "dcsim"
    shutil.copytree(ROOT / "plugins", checkout / "plugins", ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    checks = run_tutorial(ROOT / "docs" / "howto" / "extend-dcsim.md", checkout)
    problems = drift(checks)
    assert not problems, "\n\n".join(problems)
