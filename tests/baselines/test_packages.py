"""The trainer packages: light to import, and each runs as a module."""

import subprocess
import sys

import pytest


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
