"""The compiled kernels' disk cache: a private folder of the user's, or none.

numba's ``@njit(cache=True)`` keeps compiled kernels in ``.nbi`` / ``.nbc`` files and reads
them back with :mod:`pickle`, which runs whatever a pickle says. By default numba looks in
``__pycache__`` next to the source, then in ``NUMBA_CACHE_DIR`` (often shared): whoever
could write there could run code in every ``dcsim run`` that uses a kernel, and a corrupt
file failed those runs with an ``UnpicklingError`` naming neither the cache nor the fix.

The kernel modules (``single_kernel``, ``vc/lookahead_kernel``, ``vc/*/kernel``) therefore
decorate with :func:`njit` from here: numba's own cache is off, and each kernel gets a
:class:`GuardedCache` that reads and writes only

* ``$DCSIM_KERNEL_CACHE`` when set (``off`` turns the disk cache off), else
* ``$XDG_CACHE_HOME/dcsim/numba-py<XY>-<numba version>`` (``~/.cache/...`` without
  ``XDG_CACHE_HOME``),

made with mode 0o700 where missing, and used only when it is a folder owned by the user,
not writable by group or others, under folders that others cannot write (unless sticky,
like ``/tmp``) and that belong to the user or root. A folder that fails that is not read:
one :class:`KernelCacheWarning` names it and why, and the kernels are compiled for the
process only. A kernel whose cached files cannot be loaded (a truncated or corrupt file,
anything its loading raises) is compiled again: the folder's files are set aside and
removed, one warning names the folder, and the fresh compilations are cached there.
``NUMBA_CACHE_DIR`` does not apply to dcsim's kernels.

Imported only by the kernel modules: it needs numba.
"""

from __future__ import annotations

import inspect
import os
import shutil
import stat
import sys
import tempfile
import uuid
import warnings
from pathlib import Path

import numba

#: dcsim's own variable for the folder (``off`` / ``none`` / ``0``: no disk cache)
ENV = "DCSIM_KERNEL_CACHE"
OFF = ("off", "none", "0", "false", "no")


class KernelCacheWarning(UserWarning):
    """The compiled-kernel cache was not used, or was discarded (the message says why)."""


def default_folder() -> Path:
    """``$XDG_CACHE_HOME/dcsim/numba-py<XY>-<numba version>`` (``~/.cache`` when
    ``XDG_CACHE_HOME`` is unset or not absolute)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    v = sys.version_info
    return root / "dcsim" / f"numba-py{v.major}{v.minor}-{numba.__version__}"


def chosen_folder() -> Path | None:
    """The folder ``DCSIM_KERNEL_CACHE`` names (else :func:`default_folder`), unchecked;
    None when the variable turns the cache off."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() in OFF and value:
        return None
    return Path(os.path.abspath(Path(value).expanduser())) if value else default_folder()


def problem(folder: Path) -> str | None:
    """Why ``folder`` is not safe to load pickles from, or None: it must be a folder owned
    by this user and writable by nobody else, and no folder above it may let someone else
    replace it (writable by group or others without the sticky bit, or owned by another
    user than this one or root)."""
    me = os.geteuid()
    try:
        st = os.stat(folder)
    except OSError as e:
        return f"it cannot be read ({e.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    if st.st_uid != me:
        return f"it belongs to uid {st.st_uid}, not to you (uid {me})"
    if st.st_mode & 0o022:
        return (f"it is writable by group or others (mode {stat.S_IMODE(st.st_mode):#o}; "
                "a cache folder must be 0o700)")
    real = Path(os.path.realpath(folder))
    for up in real.parents:
        try:
            ust = os.stat(up)
        except OSError as e:
            return f"its parent {up} cannot be read ({e.strerror})"
        if ust.st_uid not in (me, 0):
            return f"its parent {up} belongs to uid {ust.st_uid} (someone else could replace it)"
        if ust.st_mode & 0o022 and not ust.st_mode & stat.S_ISVTX:
            return (f"its parent {up} is writable by group or others (mode "
                    f"{stat.S_IMODE(ust.st_mode):#o}; someone else could replace it)")
    return None


def make_private(folder: Path) -> str | None:
    """Create ``folder`` (and the missing folders above it) with mode 0o700, check it
    (:func:`problem`) and that it is writable; None when it is fit for the cache, else
    why not. A folder that exists is never chmod-ed: its owner decides."""
    missing = []
    p = folder
    while not os.path.lexists(p) and p != p.parent:
        missing.append(p)
        p = p.parent
    try:
        for d in reversed(missing):
            try:
                os.mkdir(d, 0o700)
            except FileExistsError:
                continue  # another process made it: checked below like any other
            os.chmod(d, 0o700)  # ours, just made: whatever the umask
    except OSError as e:
        return f"it cannot be created ({e.strerror})"
    why = problem(folder)
    if why is None:
        try:
            tempfile.TemporaryFile(dir=folder).close()
        except OSError as e:
            why = f"it is not writable ({e.strerror})"
    return why


# -- the folder of this process ---------------------------------------------------------
_UNSET = object()
_root: object = _UNSET  # the checked folder, None (no disk cache) or _UNSET (not yet)
_folders: dict[str, Path | None] = {}  # subfolder name -> checked subfolder or None
_discarded: set[Path] = set()  # subfolders set aside after a load error, this process
_warned: set[str] = set()


def _warn(key: str, message: str) -> None:
    """One warning per ``key`` and process."""
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, KernelCacheWarning, stacklevel=3)


def _cause(error: BaseException) -> str:
    """``Type: message`` of ``error`` on one line (an unpickling error's message can span
    two, and a warning is one line)."""
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def _fix(folder: Path) -> str:
    return (f"make it private (chmod 700 {folder}) if it is yours, or set {ENV} to a "
            f"private folder ({ENV}=off: no disk cache)")


def cache_root() -> Path | None:
    """The checked cache folder of this process, or None (off, or refused with a
    warning); decided once."""
    global _root
    if _root is _UNSET:
        try:
            folder = chosen_folder()
        except RuntimeError:  # no home folder to put ~/.cache in
            folder, why = None, None
            _warn("home", f"dcsim: no home folder for the compiled-kernel cache; set {ENV} "
                          "to a private folder. The kernels are compiled for this process "
                          "only.")
        else:
            why = None if folder is None else make_private(folder)
        if why is not None:
            _warn("root", f"dcsim: not using the compiled-kernel cache {folder}: {why}. "
                          f"The kernels are compiled for this process only (not cached); "
                          f"{_fix(folder)}.")
            folder = None
        _root = folder
    return _root  # type: ignore[return-value]


def cache_folder(subpath: str) -> Path | None:
    """``subpath`` of :func:`cache_root` (one per source folder, as numba names them),
    made and checked like the root; None: no disk cache for it."""
    if subpath not in _folders:
        root = cache_root()
        folder = None if root is None else root / subpath
        if folder is not None:
            why = make_private(folder)
            if why is not None:
                _warn("sub", f"dcsim: not using the compiled-kernel cache {folder}: {why}. "
                             f"The kernels are compiled for this process only (not "
                             f"cached); {_fix(folder)}.")
                folder = None
        _folders[subpath] = folder
    return _folders[subpath]


def discard(folder: Path, error: BaseException, what: str) -> None:
    """A cached kernel in ``folder`` could not be loaded: set the folder aside and remove
    it, make it afresh (the kernels compiled now are cached there) and warn once."""
    if folder in _discarded:
        return  # discarded already by this process: a race with another one; recompile
    _discarded.add(folder)
    aside = folder.with_name(f"{folder.name}.unreadable-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(folder, aside)
    except OSError:
        pass  # another process set it aside first
    else:
        shutil.rmtree(aside, ignore_errors=True)
    fresh = None
    for sub, f in list(_folders.items()):
        if f == folder:
            del _folders[sub]
            fresh = cache_folder(sub)
    message = (f"dcsim: could not load the compiled kernel {what} from the cache {folder} "
               f"({_cause(error)}); ")
    if fresh is None:
        message += "it was discarded, and the kernels are compiled for this process only."
    else:
        message += ("its files were discarded, and the kernels are compiled again into the "
                    f"fresh folder {fresh}.")
    _warn("load", message)


# -- numba -----------------------------------------------------------------------------
# numba has no public API for a cache of one's own: the cache subclasses its public Cache,
# but the locator's bases (private in numba 0.60, the oldest supported) and installing the
# cache as the dispatcher's ``_cache`` are numba's internals (the one private write
# tests/test_architecture.py lists outside the engine)
try:
    from numba.core.caching import (
        Cache,
        CompileResultCacheImpl,
        IndexDataCacheFile,
        _CacheLocator,
        _SourceFileBackedLocatorMixin,
    )
except ImportError:  # numba moved its internals: no disk cache rather than numba's own
    GuardedCache = None
else:

    class _Locator(_SourceFileBackedLocatorMixin, _CacheLocator):
        """A function's source stamp and name (numba's), in dcsim's folder."""

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self.subpath = self.get_suitable_cache_subpath(py_file)

        def get_cache_path(self):
            folder = cache_folder(self.subpath)
            return "" if folder is None else str(folder)

        def ensure_cache_path(self):
            if cache_folder(self.subpath) is None:
                raise OSError(f"no compiled-kernel cache folder ({ENV})")

    class _Impl(CompileResultCacheImpl):
        """numba's serialisation of compile results, with :class:`_Locator` only (neither
        ``__pycache__`` nor ``NUMBA_CACHE_DIR``)."""

        def __init__(self, py_func):
            self._lineno = py_func.__code__.co_firstlineno
            source = inspect.getfile(py_func)
            self._locator = _Locator(py_func, source)
            modname = os.path.splitext(os.path.basename(source))[0]
            self._filename_base = self.get_filename_base(
                f"{modname}.{py_func.__qualname__}", getattr(sys, "abiflags", ""))

    class GuardedCache(Cache):
        """numba's per-function cache (index and data files; its index keys), in dcsim's
        checked folder: a load that raises is a miss (and discards the folder,
        :func:`discard`); a save that raises is skipped."""

        def __init__(self, py_func):
            self._py_func = py_func
            self._name = repr(py_func)
            self._impl = _Impl(py_func)
            self._enabled = True
            self._folder: Path | None = None
            self._file = None

        def __repr__(self):
            return f"<GuardedCache py_func={self._name}>"

        @property
        def cache_path(self):
            return "" if self._folder is None else str(self._folder)

        def enable(self):
            self._enabled = True

        def disable(self):
            self._enabled = False

        def _cache_file(self):
            folder = cache_folder(self._impl.locator.subpath)
            if folder is None:
                return None
            if folder != self._folder or self._file is None:
                self._folder = folder
                self._file = IndexDataCacheFile(str(folder), self._impl.filename_base,
                                                self._impl.locator.get_source_stamp())
            return self._file

        def flush(self):
            f = self._cache_file()
            if f is not None:
                f.flush()

        def load_overload(self, sig, target_context):
            target_context.refresh()
            if not self._enabled:
                return None
            f = self._cache_file()
            if f is None:
                return None
            try:
                key = self._index_key(sig, target_context.codegen())
                data = f.load(key)
                return None if data is None else self._impl.rebuild(target_context, data)
            except Exception as e:  # noqa: BLE001 - any failure to load is a miss
                discard(self._folder, e, self._py_func.__qualname__)
                self._file = None
                return None

        def save_overload(self, sig, data):
            if not self._enabled or not self._impl.check_cachable(data):
                return
            f = self._cache_file()
            if f is None:
                return
            try:
                f.save(self._index_key(sig, data.codegen), self._impl.reduce(data))
            except Exception as e:  # noqa: BLE001 - a kernel not cached is no error
                _warn("save", f"dcsim: could not cache a compiled kernel in {self._folder} "
                              f"({_cause(e)}); it is compiled again next time.")


def njit(*args, cache: bool = False, **options):
    """``numba.njit`` for dcsim's kernels: ``cache=True`` caches in dcsim's checked folder
    (:class:`GuardedCache`), never in numba's default places."""

    def wrap(fn):
        dispatcher = numba.njit(**options)(fn)
        if cache and GuardedCache is not None:
            dispatcher._cache = GuardedCache(fn)
        return dispatcher

    if args and callable(args[0]) and len(args) == 1:
        return wrap(args[0])
    if args:
        raise TypeError("dcsim's njit takes no signature (compile lazily)")
    return wrap
