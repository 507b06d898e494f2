"""Packaging beyond pyproject.toml (which holds everything else): one start-up file.

``dcsim-gymnasium.pth`` goes to site-packages beside the top-level module
``_dcsim_gymnasium``; Python runs it at every start, and it installs the import hook that
registers dcsim's Gymnasium environments when ``gymnasium`` is imported (Gymnasium 1.0
loads no entry-point plugins; see dcsim/environments.py). pyproject.toml cannot place a
file at the top of site-packages, so ``build_py`` adds it to regular wheels and
``editable_wheel`` to the wheel of ``pip install -e``. Should a future setuptools build
editable wheels otherwise, an editable install goes on without the file (``import dcsim``
then registers the environments, as documented), never fails for want of it.
"""

import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH = "dcsim-gymnasium.pth"
HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPy(build_py):
    """The regular wheel: the start-up file at the top of the build."""

    def run(self):
        super().run()
        self.copy_file(os.path.join(HERE, PTH), os.path.join(self.build_lib, PTH),
                       preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH)]


class EditableWheel(editable_wheel):
    """``pip install -e``: the start-up file beside setuptools' own ``__editable__`` one."""

    def _run_build_commands(self, dist_name, unpacked_wheel, build_lib, tmp_dir):
        out = super()._run_build_commands(dist_name, unpacked_wheel, build_lib, tmp_dir)
        shutil.copy(os.path.join(HERE, PTH), os.path.join(unpacked_wheel, PTH))
        return out


setup(cmdclass={"build_py": BuildPy, "editable_wheel": EditableWheel})
