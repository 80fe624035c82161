"""The module paths of 0.1 still import, warn, and are the modules at the new paths."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from baselines._moved import MOVED_MODULES


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_MODULES.items()))
def test_an_old_module_path_is_the_new_module_with_a_warning(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_old_from_imports_still_work():
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "from baselines.magrpo_credit import tree_credit\n"
        "from baselines.advantages import center_advantages\n"
        "from baselines.grpo_assembly import mask_runs\n"
        "import baselines.magrpo.credit as new\n"
        "assert tree_credit is new.tree_credit\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_light_modules_of_trainer_packages_do_not_import_torch():
    code = (
        "import sys\n"
        "import baselines.magrpo.credit, baselines.grpo.assembly, baselines.data\n"
        "import baselines.is_trainer, baselines.magrpo, baselines.grpo\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("package", ["is_trainer", "magrpo", "grpo"])
def test_each_trainer_package_runs_as_a_module(package):
    done = subprocess.run(
        [sys.executable, "-m", f"baselines.{package}", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"python -m baselines.{package}" in done.stdout


def test_the_changelog_lists_every_moved_module():
    changelog = (Path(__file__).resolve().parents[2] / "CHANGELOG.md").read_text()
    for old, new in MOVED_MODULES.items():
        assert f"| `{old}` | `{new}` |" in changelog, old


@pytest.mark.parametrize("package", ["is_trainer", "magrpo", "grpo"])
def test_a_lazy_package_lists_its_own_names(package):
    module = importlib.import_module(f"baselines.{package}")
    listed = dir(module)
    assert set(module.__all__) <= set(listed)
    assert "lazy_attributes" in listed  # the package's own globals
    assert "warnings" not in listed  # not those of the module that builds __dir__
