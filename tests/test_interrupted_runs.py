"""Interrupted runs: Ctrl-C (SIGINT) at start-up, during a command or during ``--jobs 2``
ends with one line and exit 130, says what was kept and how to go on, and stops a plugin
that hangs."""

from __future__ import annotations

import os
import time

import yaml

from tests.helpers.runs import QUICKSTART, patch_loss_runs, small_quickstart


def test_ctrl_c_says_what_was_kept_and_how_to_go_on(tmp_path):
    """SIGINT to the whole process group (a terminal's Ctrl-C) during --jobs 2: exit 130
    with one line naming the runs kept and the --resume command; no worker traceback."""
    import signal
    import subprocess
    import sys
    import time


    cfg = yaml.safe_load(QUICKSTART.read_text())
    cfg.update(seeds=4)
    cfg["workload"]["requests"] = 60000
    f = tmp_path / "big.yaml"
    f.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "o"
    p = subprocess.Popen([sys.executable, "-m", "dcsim", "run", str(f), "--out", str(out),
                          "--jobs", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True,
                         # as from a terminal, even when this test runs in the background
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 90
    while time.time() < deadline and not list((out / "runs").glob("*.json")):
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGINT)
    text, _ = p.communicate(timeout=120)
    assert p.returncode == 130, text
    kept = len(list((out / "runs").glob("*.json")))
    assert f"interrupted: {kept} of 12 runs are finished and kept in {out}" in text
    assert f"--out {out} --jobs 2 --resume` runs the other {12 - kept}" in text
    assert "Traceback" not in text and "Exception ignored" not in text


def test_an_interrupt_stops_a_hung_plugin(tmp_path, monkeypatch):
    """A plugin that ignores signals and never returns does not keep `dcsim run --jobs 2`
    alive after SIGINT to the parent alone: its worker is killed after a grace period."""
    import signal
    import threading

    from tests.helpers.cli import invoke

    def hang(plan):
        if plan.label == "random":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(0.05)

    patch_loss_runs(monkeypatch, hang)
    out = tmp_path / "o"
    # a process a shell started in the background inherits SIGINT ignored: give this one
    # Python's handler, as dcsim has on a terminal
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        r = invoke("run", small_quickstart(tmp_path), "--out", out, "--jobs", "2")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert r.exit_code == 130 and "interrupted:" in r.stderr
    assert time.monotonic() - t0 < 30  # without the kill: about a minute


def _interrupt(args, ready, env=None, timeout=60.0):
    """Start ``python -m dcsim ARGS``, wait until ``ready()``, send SIGINT; (rc, stderr)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    p = subprocess.Popen([sys.executable, "-m", "dcsim", *map(str, args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, **(env or {})})
    try:
        end = time.monotonic() + timeout
        while not ready() and time.monotonic() < end and p.poll() is None:
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=timeout)
    finally:
        p.kill()
    return p.returncode, err


def test_ctrl_c_during_startup_imports_is_one_line(tmp_path):
    """The ``dcsim`` program (:func:`dcsim.cli.program`, the console script's entry) on a
    slow disk: its first import of one of dcsim's own modules takes its time. Ctrl-C then
    is one line and status 130, not an import's traceback. ``import dcsim`` itself installs
    no handler."""
    import signal
    import subprocess
    import sys
    import time

    marker = tmp_path / "importing"
    script = tmp_path / "slow_disk.py"
    script.write_text(
        "import pathlib, signal, sys, time\n"
        "import dcsim.cli\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
        "class SlowDisk:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('dcsim.'):\n"
        f"            pathlib.Path({str(marker)!r}).touch()\n"
        "            time.sleep(30)\n"
        "sys.meta_path.insert(0, SlowDisk())\n"
        "sys.argv = ['dcsim', '--version']\n"
        "dcsim.cli.program()\n")
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < end and p.poll() is None:
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert marker.exists(), err
    assert (p.returncode, err.strip()) == (130, "interrupted"), err


def test_ctrl_c_during_a_command_is_one_line(tmp_path):
    import os

    fifo = tmp_path / "exp.yaml"
    os.mkfifo(fifo)
    held = []

    def reading():  # the command has opened the config: opening the writing end succeeds
        try:
            held.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return False
        return True

    try:
        rc, err = _interrupt(["validate", fifo], reading)
    finally:
        for fd in held:
            os.close(fd)
    assert held
    assert (rc, err.strip()) == (130, "interrupted"), err
