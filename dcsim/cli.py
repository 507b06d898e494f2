"""The ``dcsim`` command: a thin click layer over :mod:`dcsim.runner` and :mod:`dcsim.plugins`."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from pathlib import Path

import click

from dcsim import __version__
from dcsim.durations import duration
from dcsim.errors import DcsimError
from dcsim.plugins import KINDS
from dcsim.runner.progress import ProgressLine


class _Group(click.Group):
    """Turn every error a user can cause into one line on stderr and exit status 1, and
    offer every registered command (``register_commands``) beside the built-in ones.

    The registry is asked only for a name that is not built in and for the list (``dcsim
    --help``): ``dcsim run`` loads no plugin module to find itself. A plugin command named
    like a built-in one is left out with one warning (the built-in keeps its name: a
    package cannot change what ``dcsim run`` does); a registry that cannot be read (two
    packages registering one name) is one warning, and the built-in commands still work.
    """

    #: (what the registry answered, the commands offered for it): warnings once per answer
    _offered: tuple[tuple, dict[str, click.Command]] | None = None

    def plugin_commands(self) -> dict[str, click.Command]:
        """The registered commands this group offers, by name."""
        from dcsim.plugins import registered, warn

        try:
            found = registered("command")
        except DcsimError as e:
            if self._offered is None or self._offered[0] != ("error", str(e)):
                warn(f"plugin commands left out: {e}")
                self._offered = (("error", str(e)), {})
            return self._offered[1]
        key = tuple(found.items())
        if self._offered is None or self._offered[0] != key:
            offered: dict[str, click.Command] = {}
            for name, r in found.items():
                if name in self.commands:
                    warn(f"plugin {r.package!r} registers a command named {name!r}, like "
                         f"dcsim's own `dcsim {name}`; left out (the built-in runs; rename "
                         "the plugin's command)")
                elif not isinstance(r.cls, click.Command):
                    warn(f"plugin {r.package!r} registered {r.cls!r} as command {name!r}, "
                         "which is not a click.Command; left out")
                else:
                    offered[name] = r.cls
            self._offered = (key, offered)
        return self._offered[1]

    def list_commands(self, ctx):
        return sorted({*super().list_commands(ctx), *self.plugin_commands()})

    def get_command(self, ctx, cmd_name):
        found = super().get_command(ctx, cmd_name)
        if found is not None:
            return found
        return self.plugin_commands().get(cmd_name)

    def invoke(self, ctx):
        _end_startup_interrupts()  # start-up is over
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # commands with work to save catch it themselves first
            click.echo("interrupted", err=True)
            sys.exit(130)
        except DcsimError as e:
            msg = str(e)  # a value quoted from a huge file must not make a megabyte line
            if len(msg) > 2000:
                msg = f"{msg[:2000]}... ({len(msg) - 2000:,} more characters)"
            click.echo(f"error: {msg}", err=True)
            sys.exit(1)
        except OSError as e:  # an unwritable --out, a full disk, a vanished file
            where = f"{e.filename}: " if getattr(e, "filename", None) else ""
            click.echo(f"error: {where}{e.strerror or e}", err=True)
            sys.exit(1)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="dcsim")
def main() -> None:
    """dcsim: datacenter allocation experiments with pluggable allocators."""


def _interrupted_at_startup(signum, frame):  # pragma: no cover - runs in a child process
    """Ctrl-C while the program is still starting (its imports, reading the command line):
    one line and exit status 130 (a KeyboardInterrupt there would print the traceback of
    whichever import it hit)."""
    os.write(2, b"interrupted\n")
    os._exit(130)


def _end_startup_interrupts() -> None:
    """Hand SIGINT back to Python (KeyboardInterrupt) if :func:`program`'s start-up handler
    still holds it, once a command runs, so that a command with work to save can catch the
    interrupt itself. A no-op where ``main`` is called without :func:`program`."""
    if signal.getsignal(signal.SIGINT) is _interrupted_at_startup:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def program() -> None:
    """The ``dcsim`` program (and ``python -m dcsim``): the commands, in a process where
    Ctrl-C before a command runs ends it with one line, and whose allocators keep a long
    replay's memory flat (:mod:`dcsim.process_memory`). Both are the program's, set here,
    not by ``main``, which tests and other programs call in their own processes, nor by
    ``import dcsim``."""
    signal.signal(signal.SIGINT, _interrupted_at_startup)  # ``_Group.invoke`` hands it back
    from dcsim.process_memory import tune

    tune()
    main()


@main.command()
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output directory (default: results/<experiment name>).")
@click.option("--seeds", type=int, default=None, help="Number of seeds (overrides `seeds:`).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config value, e.g. --set workload.arrival.rate=8 (repeatable).")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Runs in parallel: processes of the local pool (default 1), or workers of "
                   "the local Dask cluster (default: one per core).")
@click.option("--executor", type=click.Choice(["local", "dask"]), default=None,
              help="Where runs execute: local (in-process or a process pool; the default) or "
                   "dask (a local Dask cluster, or the scheduler at --address).")
@click.option("--address", default=None, metavar="tcp://HOST:PORT",
              help="Run on the existing Dask scheduler at this address (implies --executor "
                   "dask).")
@click.option("--resume", is_flag=True,
              help="Keep the runs already finished in the output directory and run the rest.")
@click.option("--rerun-changed", is_flag=True,
              help="Like --resume, but first run again the finished runs whose code (dcsim's, "
                   "a plugin's, a library version) changed since they ran.")
@click.option("--overwrite", is_flag=True,
              help="Delete the results in the output directory first (any configuration).")
@click.option("--progress-every", type=click.FloatRange(min=0), default=None,
              metavar="SECONDS", envvar="DCSIM_PROGRESS_EVERY", show_envvar=True,
              help="Off a terminal (a log file, a batch job): a progress line every SECONDS "
                   "(default 10; 0: one per finished run only). On a terminal the line is "
                   "redrawn every second.")
def run(config: Path, out: Path | None, seeds: int | None, sets: tuple[str, ...],
        jobs: int | None, executor: str | None, address: str | None, resume: bool,
        rerun_changed: bool, overwrite: bool, progress_every: float | None) -> None:
    """Run the experiment in CONFIG and write Parquet results."""
    import signal

    from dcsim.kernels import kernels_on
    from dcsim.runner import load_experiment, run_experiment
    from dcsim.runner.execute import RunsFailed, make_executor, unchanged_runs
    from dcsim.runner.stale_report import stale_report_note

    if resume and overwrite:
        raise click.UsageError("--resume and --overwrite exclude each other")
    if rerun_changed and overwrite:
        raise click.UsageError("--rerun-changed and --overwrite exclude each other")
    if address is not None and executor == "local":
        raise click.UsageError("--address needs --executor dask")
    if address is not None and jobs is not None:
        raise click.UsageError("--jobs sets the size of a local cluster; with --address the "
                               "cluster's own workers run the runs")

    def _interrupt(signum, frame):  # SIGTERM (a batch system's kill) ends like Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)
    exp = load_experiment(config, seeds=seeds, sets=sets)
    kernels_on()  # a bad DCSIM_KERNELS fails here, before any run
    total = len(exp.runs)

    def log(msg: str) -> None:
        click.echo(msg, err=True)

    ex = make_executor(executor or "local", jobs=jobs, address=address, log=log)
    t0 = time.perf_counter()
    target = out if out is not None else Path("results") / exp.name

    def finished_here() -> int:
        from dcsim.results.writer import finished_runs

        planned = {r.run_id for r in exp.runs}
        return len(set(finished_runs(target)) & planned) if target.is_dir() else 0

    # runs --resume keeps are reported first; they say nothing of the ETA
    before = (unchanged_runs(exp, target) if rerun_changed else
              finished_here() if resume else 0)
    try:
        with ProgressLine(total, before, sys.stderr, tty=sys.stderr.isatty(),
                          every=progress_every) as bar:
            out_dir = run_experiment(exp, out=out, overwrite=overwrite, resume=resume,
                                     rerun_changed=rerun_changed, executor=ex,
                                     on_done=lambda row: bar.update(1),
                                     on_failed=lambda failure: bar.update(1), log=log)
    except RunsFailed:
        note = stale_report_note(target)
        if note:
            log(note)
        raise
    except KeyboardInterrupt:
        kept = finished_here()
        again = " ".join(shlex.quote(a) for a in sys.argv[1:]
                         if a not in ("--resume", "--rerun-changed", "--overwrite"))
        click.echo(f"\ninterrupted: {kept} of {total} runs are finished and kept in {target}; "
                   f"`dcsim {again} --resume` runs the other {total - kept}", err=True)
        sys.exit(130)
    wall = time.perf_counter() - t0
    click.echo(f"{total} runs -> {out_dir} in {duration(wall)}")
    _print_headline(exp, out_dir)
    click.echo(f"summary: {out_dir / 'summary.parquet'}")
    note = stale_report_note(out_dir)
    if note:
        click.echo(note)


def _print_headline(exp, out_dir: Path, max_rows: int = 40) -> None:
    """The headline metrics per allocator (and sweep point): mean ± 95 % interval."""
    import pandas as pd

    from dcsim.results.stats import headline
    from dcsim.runner.plan import resolved_config

    path = out_dir / "summary.parquet"
    if not path.exists():
        return
    summary = pd.read_parquet(path)
    params = list(exp.runs[0].params) if exp.runs else []
    table, notes = headline(summary, ["allocator", *params], mode=exp.spec.mode,
                            config=resolved_config(exp))   # whether a trace replays
    if not table:
        return
    lines = table.splitlines()
    click.echo("mean ± 95 % interval over seeds:")
    click.echo("\n".join(lines[:max_rows + 2]))
    if len(lines) > max_rows + 2:
        click.echo(f"... {len(lines) - max_rows - 2} more rows in the summary")
    for note in notes:
        click.echo(f"note: {note}")


@main.command()
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--seeds", type=int, default=None)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE")
def validate(config: Path, seeds: int | None, sets: tuple[str, ...]) -> None:
    """Check CONFIG without running it; print the runs it expands to."""
    from dcsim.kernels import kernels_on
    from dcsim.runner import load_experiment

    exp = load_experiment(config, seeds=seeds, sets=sets)
    kernels_on()  # a bad DCSIM_KERNELS fails here, as in `dcsim run`
    labels = sorted({r.label for r in exp.runs})
    points = len({tuple(sorted(r.params.items(), key=str)) for r in exp.runs})
    click.echo(f"{config}: ok — {len(exp.runs)} runs: {points} sweep point(s), "
               f"{exp.spec.seeds} seed(s), allocators: {', '.join(labels)}")


@main.command()
@click.argument("results", type=click.Path(file_okay=False, path_type=Path))
@click.option("--metric", "metrics", multiple=True, metavar="M",
              help="A summary metric to report (repeatable; default: the headline ones).")
@click.option("--by", default=None, metavar="PARAM",
              help="The swept parameter on the tables' columns and the figures' x axis "
                   "(default: the first swept one).")
@click.option("--baseline", default=None, metavar="LABEL",
              help="Also the paired difference of every allocator against this one.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where to write the report (default: RESULTS/report).")
@click.option("--correction", type=click.Choice(["none", "holm", "bonferroni"]),
              default="none", show_default=True,
              help="Multiple-comparison correction of the paired differences' * (and filled "
                   "markers): over the allocators compared with the baseline at each sweep "
                   "point, per metric.")
@click.option("--point", "points", multiple=True, metavar="PARAM=VALUE",
              help="A sweep point the per-point figures (CDF, heat map, time series) draw "
                   "(repeatable; default: every point, at most 8).")
@click.option("--no-figures", is_flag=True, help="Tables only.")
def report(results: Path, metrics: tuple[str, ...], by: str | None, baseline: str | None,
           out: Path | None, correction: str, points: tuple[str, ...],
           no_figures: bool) -> None:
    """Tables (mean and 95 % interval over seeds), paired differences, figures and one HTML
    page from the output directory RESULTS of `dcsim run`."""
    from dcsim.report import make_report
    from dcsim.report.terminal import print_tables

    rep = make_report(results, list(metrics) or None, by, baseline, out,
                      draw=not no_figures, correction=correction, points=list(points))
    r = rep.results
    click.echo(f"{r.name}: {len(r.summary)} runs, {len(r.allocators)} allocators, "
               f"{r.seeds} seeds" + (f", swept: {', '.join(r.params)}" if r.params else ""))
    for note in rep.notes:
        click.echo(f"note: {note}")
    print_tables(rep, click.echo)
    where = rep.files[-1].parent
    click.echo(f"\nreport: {where / 'report.html'} (tables.md, stats.csv"
               + (", paired.csv" if rep.paired else "")
               + (f", {len(rep.figures)} figures in figures/" if rep.figures else "") + ")")
    if rep.note:
        click.echo(rep.note)


class _TraceFormats(click.Choice):
    """The registered trace formats, asked for when ``import-trace`` parses or shows its
    FORMAT (not when the program starts)."""

    def __init__(self) -> None:
        super().__init__([])

    @property
    def choices(self):
        from dcsim.workload.trace_import import trace_formats

        return tuple(trace_formats())

    @choices.setter
    def choices(self, value) -> None:  # click.Choice.__init__ sets it; the registry decides
        pass


@main.command("import-trace")
@click.argument("fmt", metavar="FORMAT", type=_TraceFormats())
@click.argument("src", type=click.Path(exists=True, path_type=Path))
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--split", type=click.Choice(["dev", "test"]), default=None,
              help="azure2017 only: which window of the rnn encoding.")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="An option of the trace format, value parsed as YAML (e.g. --option "
                   "horizon_days=14; `dcsim plugins --kind trace_format` lists them).")
def import_trace_cmd(fmt: str, src: Path, out: Path, split: str | None,
                     options: tuple[str, ...]) -> None:
    """Convert a raw trace (FORMAT at SRC) into a standard request table OUT (.parquet/.csv).

    FORMAT is any registered trace format, dcsim's or a plugin's (`dcsim plugins --kind
    trace_format` lists them and their options)."""

    from dcsim.config_files import parse_set
    from dcsim.workload.trace_import import import_trace, write_table

    opts = dict(parse_set(o) for o in options)
    if split:
        opts["split"] = split
    df = import_trace(fmt, src, **opts)
    if len(df) == 0:
        dropped = {k: v for k, v in df.attrs.get("dropped", {}).items() if v}
        raise DcsimError(f"{src}: no requests to import as {fmt} ("
                         f"{df.attrs.get('rows_read', 0):,} rows read"
                         + "".join(f", {v:,} dropped for {k}" for k, v in dropped.items())
                         + f"); {out} not written")
    tmp = out.with_name(f".tmp-{out.name}")  # keeps the suffixes that choose the format
    write_table(df, tmp)
    os.replace(tmp, out)  # never leave a torn table behind
    click.echo(f"{len(df):,} requests -> {out}")


@main.command()
@click.option("--kind", "kinds", multiple=True, type=click.Choice(KINDS),
              help="Only plugins of this kind (repeatable).")
@click.option("--markdown", is_flag=True,
              help="Print a Markdown reference page instead (one table of options per "
                   "plugin), e.g. for a plugin package's own docs.")
@click.option("--package", default=None, metavar="DIST",
              help="Only plugins provided by this distribution (\"dcsim\" for the "
                   "built-ins).")
def plugins(kinds: tuple[str, ...], markdown: bool, package: str | None) -> None:
    """List registered plugins of every kind (allocators, schedulers, reschedulers,
    placers, GPU allocators, power models, topologies, arrival processes, distributions,
    trace formats, metrics, commands), the package providing each, and their options."""
    from dcsim import plugin_reference
    from dcsim.plugins import broken

    kinds = kinds or KINDS
    if markdown:
        click.echo(plugin_reference.markdown(kinds, package), nl=False)
        return
    click.echo(plugin_reference.text(kinds, package))
    failed = broken()
    if failed:
        click.echo("broken (failed to load, left out):")
        for name, why in sorted(failed.items()):
            click.echo(f"  {name}  {why}")


@main.command()
@click.argument("mapping", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--algorithm", "-a", default="greedy", show_default=True,
              help="Rescheduler name (see `dcsim plugins`).")
@click.option("--mnl", type=click.IntRange(min=0), default=50, show_default=True,
              help="Migration number limit (steps).")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="Rescheduler option, value parsed as YAML (e.g. --option time_limit=120).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write migrations.parquet and summary.json here.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the rescheduler's random generator.")
def reschedule(mapping: Path, algorithm: str, mnl: int, options: tuple[str, ...],
               out: Path | None, seed: int) -> None:
    """Lower the fragment rate of the VM mapping in MAPPING (the VMR2L authors' JSON) by at
    most MNL migrations; print FR before/after, migrations and time."""
    from dcsim.config_files import parse_set
    from dcsim.modes.reschedule.command import reschedule_file

    s = reschedule_file(mapping, algorithm, mnl, dict(parse_set(o) for o in options), out,
                        seed=seed)
    if s["free_mismatches"]:
        click.echo(f"warning: {s['free_mismatches']} NUMA free_* fields disagree with the "
                   "placements (ignored; free capacity is derived from the placements)",
                   err=True)
    bound = f", bound {s['bound']:.4f}" if s["bound"] is not None else ""
    click.echo(f"{s['label']}: FR {s['fr_before']:.4f} -> {s['fr_after']:.4f} with "
               f"{s['migrations']} migrations in {s['seconds']:.3f} s{bound} ({s['status']})"
               + (f" -> {out}" if out else ""))


def _have_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


@main.group()
def train() -> None:
    """Train learned policies (needs PyTorch: pip install -e ".[learn]")."""


def _train_options(name: str):
    """The arguments and options every ``dcsim train <name>`` command shares."""
    def wrap(f):
        f = click.option("--resume", is_flag=True,
                         help="Continue the training stopped (Ctrl-C) or killed in --out from "
                              "its last saved state (resume.npz: iteration, weights, optimiser "
                              "and random states); the config must be the recorded one.")(f)
        f = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                         help="Override a config key (dotted for a section's entry, e.g. "
                              "topology.channels=8; value parsed as YAML). Repeatable.")(f)
        f = click.option("--seed", type=int, default=None, help="Seed (overrides `seed:`).")(f)
        f = click.option("--iterations", type=click.IntRange(min=1), default=None,
                         help="Training iterations (overrides `iterations:`).")(f)
        f = click.option("--out", type=click.Path(file_okay=False, path_type=Path),
                         default=Path(f"results/train_{name}"), show_default=True,
                         help="Output directory: progress.parquet, checkpoint.npz/.json, "
                              "last.npz/.json, resume.npz.")(f)
        return click.argument("config", type=click.Path(dir_okay=False, path_type=Path))(f)
    return wrap


def _train(name: str, module: str, config: Path, out: Path, iterations: int | None,
           seed: int | None, sets: tuple[str, ...] = (), resume: bool = False):
    """Load ``module``'s config from ``config`` (with the CLI overrides); returns (config,
    a function that trains and returns the result). Without torch: one error line, exit
    1. Interrupted (Ctrl-C, SIGTERM): one line, exit 130."""
    if not _have_torch():
        click.echo('error: training needs PyTorch, which is not installed; install it with: '
                   'pip install -e ".[learn]"', err=True)
        sys.exit(1)
    import importlib

    mod = importlib.import_module(module)
    from dcsim.config_files import parse_set

    overrides = {k: v for k, v in (("iterations", iterations), ("seed", seed)) if v is not None}
    cfg = mod.load_train_config(config, **dict(parse_set(s) for s in sets), **overrides)
    command = f"dcsim train {name} {config} --out {out}" + "".join(
        f" --{k} {v}" for k, v in overrides.items()) + "".join(
        f" --set {shlex.quote(s)}" for s in sets)
    return cfg, lambda: _run_training(mod, cfg, out, command, resume)


def _run_training(mod, cfg, out: Path, command: str, resume: bool):
    """``mod.train``; a first interrupt stops it after the iteration under way (saved,
    resumable), a second at once: either way one line on stderr and exit 130."""
    from dcsim.learn.resume import RESUME_FILE, TrainingInterrupted, saved_iteration

    state = out / RESUME_FILE
    before = state.stat().st_mtime_ns if state.is_file() else None
    again = f"`{command} --resume`"
    try:
        return mod.train(cfg, out, command=command, log=click.echo, resume=resume)
    except TrainingInterrupted as e:
        click.echo(f"interrupted: stopped after iteration {e.iteration} of {e.iterations}; "
                   f"last.npz and the state to resume from are in {out}; {again} continues",
                   err=True)
    except KeyboardInterrupt:
        ours = resume or (state.is_file() and state.stat().st_mtime_ns != before)
        k = saved_iteration(out) if ours else None
        click.echo("interrupted: stopped at once; " + (
            f"{out} keeps the state of iteration {k}; {again} continues from there"
            if k is not None else "no state was saved to resume from"), err=True)
    sys.exit(130)


@train.command("deeprm")
@_train_options("deeprm")
def train_deeprm(config: Path, out: Path, iterations: int | None, seed: int | None,
                sets: tuple[str, ...], resume: bool) -> None:
    """Train DeepRM's policy (REINFORCE) with the settings in CONFIG (YAML)."""
    cfg, run_training = _train("deeprm", "dcsim.learn.deeprm.train", config, out, iterations, seed,
                                  sets, resume)
    click.echo(f"training DeepRM: {cfg.iterations} iterations x {cfg.jobsets_per_iter} job "
               f"sets x {cfg.rollouts} rollouts -> {out}")
    result = run_training()
    click.echo(f"done in {result['wall_time_s']:.1f}s: best eval slowdown "
               f"{result['best_eval_slowdown']:.3f} at iteration {result['best_iteration']}")
    click.echo(f"checkpoint: {result['best']}")


@train.command("vmr2l")
@_train_options("vmr2l")
def train_vmr2l(config: Path, out: Path, iterations: int | None, seed: int | None,
                sets: tuple[str, ...], resume: bool) -> None:
    """Train VMR²L's two-stage transformer rescheduling policy (PPO) with CONFIG (YAML)."""
    cfg, run_training = _train("vmr2l", "dcsim.learn.vmr2l.train", config, out, iterations, seed,
                                  sets, resume)
    click.echo(f"training VMR2L ({cfg.attention} attention): {cfg.iterations} iterations x "
               f"{cfg.num_envs} envs x {cfg.num_steps} steps -> {out}")
    result = run_training()
    b = result["eval_baselines"]
    click.echo(f"done in {result['wall_time_s']:.1f}s ({result['env_steps']} steps): best eval "
               f"FR {result['best_eval_fr']:.4f} at iteration {result['best_iteration']} "
               f"(greedy {b['greedy']:.4f}, alpha_vbpp {b['alpha_vbpp']:.4f}, initial "
               f"{b['initial']:.4f})")
    click.echo(f"checkpoint: {result['best']}")


@train.command("nara")
@_train_options("nara")
def train_nara(config: Path, out: Path, iterations: int | None, seed: int | None,
                sets: tuple[str, ...], resume: bool) -> None:
    """Train Nara's GNN allocation policy (PPO) with the settings in CONFIG (YAML)."""
    cfg, run_training = _train("nara", "dcsim.learn.nara.train", config, out, iterations, seed,
                                  sets, resume)
    click.echo(f"training Nara: {cfg.iterations} iterations x {cfg.num_envs} envs x "
               f"{cfg.num_steps} steps -> {out}")
    result = run_training()
    click.echo(f"done in {result['wall_time_s']:.1f}s ({result['env_steps']} steps): best eval "
               f"acceptance {result['best_eval_acceptance']:.3f} at iteration "
               f"{result['best_iteration']} (tetris {result['eval_tetris']['acceptance']:.3f})")
    click.echo(f"checkpoint: {result['best']}")
