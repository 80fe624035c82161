"""What a new user reads names only what exists, and the README's snippet runs.

The README and every page of ``docs/`` are checked for references Sphinx does
not check (``sphinx-build -W`` checks its own cross-references):

* every relative link, ``[text](path)``, points at a file or folder;
* every repository path the text names (``examples/tour.py``, ``bench/trainer.py``,
  ``docs/tasks.md``, ``tests/conftest.py``, ``llm_envs/registration.py``...) exists;
* every ``python -m module`` can be imported, or is installed by a
  ``pip install`` on the same page (``python -m build``).

The trainers' ``--help`` is plain text: no docstring markup.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from baselines.cli import build_parser, config_table, plain_text
from baselines.grpo.config import GRPORunConfig
from baselines.is_trainer.config import ISTrainerConfig
from baselines.magrpo.config import MAGRPOConfig
from llm_envs.registration import BUILTIN_ENVIRONMENTS

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "envs").glob("*.md")),
]

_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# A path into the repository: a top-level folder, then a file name with a suffix
# (or a folder, ending with "/"). Env ids (llm_envs/Debate-v0) have no suffix.
_REPO_PATH = re.compile(
    r"(?<![\w./-])((?:examples|bench|docs|tests|llm_envs|baselines)/(?:[\w.-]+/)*(?:[\w-]+\.\w+)?)"
    r"(?![\w/-])"
)
_PYTHON_M = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_][\w.]*)")
_PIP_INSTALL = re.compile(r"\bpip\s+install\s+([^\n`&|;)]*)")


def _split(text: str) -> tuple[str, str]:
    """``(prose, code)`` of a Markdown page: code is fenced blocks plus inline code spans."""
    prose, code = [], []
    fence: str | None = None
    for line in text.splitlines():
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            else:
                code.append(line)
            continue
        code.extend(match.group(2) for match in _INLINE_CODE.finditer(line))
        prose.append(_INLINE_CODE.sub(" ", line))
    return "\n".join(prose), "\n".join(code)


def dead_links(text: str, base: Path) -> list[str]:
    """Relative links of ``text`` (a page in folder ``base``) whose target does not exist."""
    prose, _ = _split(text)
    dead = []
    for match in _LINK.finditer(prose):
        target = match.group(1)
        if target.startswith("#") or re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # an anchor on the page, or a URL (https:, mailto:)
        if not (base / target.split("#")[0]).exists():
            dead.append(target)
    return dead


def missing_paths(text: str, root: Path = ROOT) -> list[str]:
    """Repository paths named in ``text`` (prose or code; URLs aside) that do not exist."""
    text = _URL.sub(" ", text)
    named = {match.group(1) for match in _REPO_PATH.finditer(text)}
    return sorted(path for path in named if not (root / path).exists())


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package
        return False


def missing_modules(text: str) -> list[str]:
    """``python -m X`` modules of ``text`` that do not import and that the page does not install."""
    installed = {
        re.split(r"[\[<>=!~ ]", word.strip("\"'"))[0].lower().replace("-", "_")
        for match in _PIP_INSTALL.finditer(text)
        for word in match.group(1).split()
    }
    modules = {match.group(1).rstrip(".") for match in _PYTHON_M.finditer(text)}
    return sorted(
        module
        for module in modules
        if not _importable(module) and module.split(".")[0].lower() not in installed
    )


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_every_page_is_checked():
    names = {_name(page) for page in PAGES}
    assert {"README.md", "docs/quickstart.md", "docs/envs/debate.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_resolve(page):
    dead = dead_links(page.read_text(), page.parent)
    assert not dead, f"{_name(page)} links to files that do not exist: {dead}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_named_repository_files_exist(page):
    missing = missing_paths(page.read_text())
    assert not missing, f"{_name(page)} names files that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_python_m_modules_import(page):
    missing = missing_modules(page.read_text())
    assert not missing, f"{_name(page)} runs modules that do not import: {missing}"


def test_the_checks_find_broken_references(tmp_path):
    (tmp_path / "there.md").write_text("x")
    page = (
        "Run `python examples/debate_tour.py`, see [the tasks](../tasks.md), [here](there.md),\n"
        "[the web](https://example.org/docs/gone.md) and [a section](#groups).\n"
        "```bash\npython -m baselines.no_such_trainer --help\npython bench/nothing.py\n"
        "python -m baselines.is_trainer --help\npython -m build  # pip install build\n```\n"
        "The tour is examples/tour.py; llm_envs/Debate-v0 is an id; docs/_build/html is made.\n"
    )
    assert dead_links(page, tmp_path) == ["../tasks.md"]
    assert missing_paths(page) == ["bench/nothing.py", "examples/debate_tour.py"]
    assert missing_modules(page) == ["baselines.no_such_trainer"]
    # A link in code is no link; a path in a URL is not the repository's.
    assert dead_links("`[x](nowhere.md)`\n```\n[y](nowhere.md)\n```", tmp_path) == []
    assert missing_paths("https://example.org/tests/gone.py") == []


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_wheel_names_carry_the_current_version(page):
    import llm_envs

    versions = set(re.findall(r"llm_envs-([\w.+]+)-py3-none-any\.whl", page.read_text()))
    assert versions <= {llm_envs.__version__}, f"{_name(page)} names a wheel of another version"


# ------------------------------------------------------------------ the README snippet

_ANSWER = (
    "<solution>391</solution><evaluation>N/A</evaluation><comparison>N/A</comparison>"
    "<consensus>NO</consensus><consensus_reason>first round</consensus_reason>"
)


def _readme_snippet(heading: str) -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split(f"## {heading}\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def _play(answers: list[str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", _readme_snippet("Play a debate by hand")],
        input="\n".join(answers) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    )
    return result.stdout


def test_the_readme_debate_shows_the_format_the_parse_error_and_the_rewards():
    out = _play(["391"])  # not the five tags: the debate ends at once
    assert "Reply with exactly these five tags" in out  # the system prompt, with the format
    assert "parse error: missing <solution>" in out
    assert "'agent_0': -1.0" in out
    assert "agent_0 done: return -1.0" in out and "'parse_error': True" in out


def test_the_readme_debate_plays_to_the_end_with_answers_in_the_format():
    out = _play([_ANSWER] * 6)
    assert "parse error" not in out
    assert out.count("Reply with exactly these five tags") == 3  # each agent's first turn
    assert all(f"agent_{i} done: return" in out for i in range(3))


# ------------------------------------------------------------------ --help is plain text

_MARKUP = re.compile(r"``|:[a-z]+(?::[a-z]+)?:`")


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("``auto`` (CUDA when available)", "auto (CUDA when available)"),
        (":class:`~llm_envs.debate.DebateConfig`", "DebateConfig"),
        (":mod:`baselines.training.losses`", "baselines.training.losses"),
        (":func:`the factory <llm_envs.code_collab.parallel_env>`", "the factory"),
        (":py:attr:`ISTrainerConfig.task`", "ISTrainerConfig.task"),
        ('``{"max_digits": 1}``', '{"max_digits": 1}'),
        ("``a`` | `b`", "a | `b`"),
    ],
)
def test_plain_text_takes_the_docstring_markup_out(text, plain):
    assert plain_text(text) == plain


@pytest.mark.parametrize("cls", [ISTrainerConfig, MAGRPOConfig, GRPORunConfig])
def test_trainer_help_shows_no_docstring_markup(cls):
    text = build_parser(cls, prog="trainer").format_help()
    assert not _MARKUP.search(text), _MARKUP.search(text)
    assert "--env-kwargs" in text
    # The docs' tables keep the Markdown: code stays code there.
    assert "`" in config_table(cls)


def test_python_m_trainer_help_runs_and_is_plain():
    result = subprocess.run(
        [sys.executable, "-m", "baselines.is_trainer", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    )
    assert "--strategy-weights" in result.stdout
    assert not _MARKUP.search(result.stdout)


# ------------------------------------------------------------------ lists of families

_FAMILIES = tuple(dict.fromkeys(e.family for e in BUILTIN_ENVIRONMENTS))
_FAMILY_CODE = re.compile(r"`(" + "|".join(map(re.escape, _FAMILIES)) + r")`")
# Between two names of one list: what the first does (a parenthesis), then a separator.
_LIST_GAP = re.compile(r"\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*(?:,|or|and|, or|, and)\s*\Z")

# Lists of some families, by page and a piece of their line: the families with a property,
# checked against the registry (a page's other lists name every family).
SUBSET_LISTS: dict[tuple[str, str], tuple[str, Callable[[Any], bool]]] = {
    ("docs/trl_grpo.md", "| `--num-generations` |"): (
        "the families whose run options take num_generations",
        lambda family: "num_generations" in family.run_options,
    ),
}


def family_lists(text: str) -> list[tuple[int, str, list[str]]]:
    """``(line number, line, names)`` of every list of two or more families' names in code."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        names = list(_FAMILY_CODE.finditer(line))
        run = names[:1]
        for before, after in itertools.pairwise(names):
            if _LIST_GAP.match(line[before.end() : after.start()]):
                run.append(after)
                continue
            if len(run) > 1:
                found.append((number, line, [m.group(1) for m in run]))
            run = [after]
        if len(run) > 1:
            found.append((number, line, [m.group(1) for m in run]))
    return found


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("`NAME` is one of `debate`, `expert_iteration`, `code_collab`, `textarena`.", 4),
        ("`debate` (one debate, (every agent)) or `expert_iteration` (a problem)", 2),
        ("for `debate` those of DebateConfig; for `code_collab` those of", 0),
        ("only `debate`", 0),
    ],
)
def test_a_list_of_families_is_found(line, names):
    assert [len(found) for *_, found in family_lists(line)] == ([names] if names else [])


def test_every_list_of_families_is_generated_or_checked_against_the_registry():
    from llm_envs.registration import family_class

    used: set[tuple[str, str]] = set()
    for page in PAGES:
        for number, line, names in family_lists(page.read_text()):
            where = f"{_name(page)}:{number}"
            rule = next(
                (key for key in SUBSET_LISTS if key[0] == _name(page) and key[1] in line), None
            )
            if rule is not None:
                used.add(rule)
                what, has = SUBSET_LISTS[rule]
                assert names == [f for f in _FAMILIES if has(family_class(f))], f"{where}: {what}"
            elif page.name == "README.md":  # GitHub renders it: written out, and checked here
                assert names == list(_FAMILIES), f"{where} lists {names}, not every family"
            else:
                pytest.fail(
                    f"{where} lists the families {names} by hand; write {{{{ env_families }}}} "
                    "(docs/conf.py fills it from the registry), or add the list to SUBSET_LISTS"
                )
    assert used == set(SUBSET_LISTS), f"stale SUBSET_LISTS entries: {set(SUBSET_LISTS) - used}"


def test_the_docs_substitution_is_every_family_of_the_registry():
    import runpy

    conf = runpy.run_path(str(ROOT / "docs" / "conf.py"))
    assert conf["myst_substitutions"]["env_families"] == ", ".join(f"`{f}`" for f in _FAMILIES)


def test_the_readme_table_and_the_env_pages_cover_every_family():
    readme = (ROOT / "README.md").read_text()
    ids = dict.fromkeys(e.id for e in BUILTIN_ENVIRONMENTS)
    assert re.findall(r"^\| `(llm_envs/[\w-]+)` \|", readme, re.M) == list(ids)
    toctree = (ROOT / "docs" / "index.md").read_text()
    for family in _FAMILIES:
        assert (ROOT / "docs" / "envs" / f"{family}.md").exists(), family
        assert f"\nenvs/{family}\n" in toctree, family
