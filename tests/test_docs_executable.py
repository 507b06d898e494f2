"""The tutorial is executable: every shell and Python block it shows runs, in order, in a
scratch folder holding a copy of ``experiments/``, and every ``text`` block right after one
is what that block prints (each line of it appears in the output, wall times aside). A
tutorial that drifts from the code fails here (issue #16, item 15)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
#: what differs between two runs of the same commands: wall-clock durations
VOLATILE = [(re.compile(r"\bin \d+(\.\d+)? s\b|\bin \d+ min \d+ s\b"), "in <t>")]


def blocks(md: Path) -> list[tuple[str, str]]:
    """(language, text) of every fenced block, in order."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(md.read_text())]


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


def _run_block(lang: str, text: str, cwd: Path) -> str:
    """What the block prints. ``dcsim`` commands and Python run in this process (fast);
    other shell lines in bash."""
    dcsim = _dcsim_only(text) if lang == "bash" else None
    old = os.getcwd()
    os.chdir(cwd)
    try:
        if dcsim is not None:
            from click.testing import CliRunner

            from dcsim.cli import main

            out = []
            for args in dcsim:
                r = CliRunner().invoke(main, args)
                out.append(r.stdout + r.stderr)
            return "".join(out)
        if lang == "python":
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(compile(text, "<tutorial>", "exec"), {"__name__": "__tutorial__"})
            return buf.getvalue()
        r = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=300)
        return r.stdout + r.stderr
    finally:
        os.chdir(old)


def run_tutorial(md: Path, cwd: Path) -> list[tuple[str, list[str], list[str]]]:
    """Run ``md``'s blocks in ``cwd``: for each text block that follows a shell or Python
    block, (the command, the lines the doc shows, the lines the command printed)."""
    checks = []
    last: tuple[str, str] | None = None
    for lang, text in blocks(md):
        if lang in ("bash", "python"):
            if "pip install" in text:  # the reader's environment is this one already
                last = None
                continue
            last = (text, _run_block(lang, text, cwd))
        elif lang == "text" and last is not None:
            checks.append((last[0], normal(text), normal(last[1])))
            last = None
        else:
            last = None
    return checks


def test_the_tutorial_runs_as_written(tmp_path):
    shutil.copytree(ROOT / "experiments", tmp_path / "experiments")
    checks = run_tutorial(ROOT / "docs" / "tutorial" / "quickstart.md", tmp_path)
    assert len(checks) >= 8
    drift = []
    for cmd, shown, printed in checks:
        missing = [line for line in shown if line not in printed]
        if missing:
            drift.append(f"after\n{cmd}\nthe tutorial shows lines the command did not print: "
                         f"{missing}\nit printed:\n" + "\n".join(printed))
    assert not drift, "\n\n".join(drift)


@pytest.mark.parametrize(("doc", "ran"), [
    ("```bash\necho a\n```\n\n```text\na\n```\n", True),
    ("```bash\necho a\n```\n\n```text\nb\n```\n", False),
])
def test_the_harness_catches_drift(tmp_path, doc, ran):
    md = tmp_path / "t.md"
    md.write_text(doc)
    [(cmd, shown, printed)] = run_tutorial(md, tmp_path)
    assert (shown == printed) is ran
