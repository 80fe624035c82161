"""Package-level promises: version, import boundaries, registration."""

import re
import subprocess
import sys
from pathlib import Path

import pettingzoo

import llm_envs
from llm_envs.registration import BUILTIN_ENVIRONMENTS

ROOT = Path(__file__).resolve().parents[1]


def test_citation_version_matches_package_version():
    citation = (ROOT / "CITATION.cff").read_text()
    assert re.search(r"^cff-version: 1\.2\.0$", citation, re.M)
    match = re.search(r"^version: (\S+)$", citation, re.M)
    assert match is not None, "CITATION.cff has no version line"
    assert match.group(1) == llm_envs.__version__


def test_llm_envs_never_imports_torch_or_baselines():
    packages = (ROOT / "llm_envs").iterdir()
    names = sorted(p.name for p in packages if (p / "__init__.py").exists())
    modules = ["llm_envs", *(f"llm_envs.{name}" for name in names)]
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'baselines', "
        "'transformers'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_registered_environment_can_be_made():
    for entry in BUILTIN_ENVIRONMENTS:
        env = pettingzoo.make(entry.env_type, entry.id)
        env.reset(seed=0)
        env.close()
