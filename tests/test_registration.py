"""The registry: register from anywhere, installed packages' entry points, ``module:name``.

A family outside this project joins in three ways (``llm_envs.registration``):
``llm_envs.register`` from the user's code, an entry point of the
``llm_envs.families`` group in an installed package (loaded lazily), and
``--env package.module:name``. The installed package here is a real one: a
folder with a ``.dist-info`` that ``importlib.metadata`` reads, put on the path
of a fresh interpreter, so nothing of this process's registry is involved.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pettingzoo
import pytest

import llm_envs
from llm_envs import registration
from llm_envs.debate.family import DebateFamily
from llm_envs.registration import (
    BUILTIN_ENVIRONMENTS,
    ENTRY_POINT_GROUP,
    entries,
    family_class,
    family_names,
    is_family,
    register,
    unregister,
)

ROOT = Path(__file__).resolve().parents[1]

# A family of its own: the debate's, under another class (what the registry stores is the class).
PLUGIN_FAMILY = """
from llm_envs.debate.family import DebateFamily


class GuessFamily(DebateFamily):
    name = "guessnum"
"""
PLUGIN_REGISTER = """
import llm_envs


def register():
    llm_envs.register(
        "guessnum",
        "guess_pkg.family:GuessFamily",
        aec="llm_envs.debate.env:env",
        env_id="guess_pkg/Guess-v0",
    )
"""


@pytest.fixture
def registered():
    """Register names for one test; take them out afterwards, whatever the test did."""
    names: list[str] = []

    def add(name: str, *args, **kwargs) -> None:
        register(name, *args, **kwargs)
        names.append(name)

    yield add
    for name in names:
        if name in family_names():
            unregister(name)


def test_register_is_seen_by_every_reader(registered):
    before = entries()
    registered("shout", DebateFamily, aec="llm_envs.debate.env:env", env_id="shout_pkg/Shout-v0")
    assert "shout" in family_names()
    assert family_class("shout") is DebateFamily
    assert is_family("shout")
    assert len(entries()) == len(before) + 1
    env = pettingzoo.make("aec", "shout_pkg/Shout-v0", num_agents=3)  # PettingZoo's make too
    env.reset(seed=0)
    env.close()


def test_a_registered_family_goes_with_unregister():
    register("short_lived", DebateFamily, aec="llm_envs.debate.env:env", env_id="a/B-v0")
    unregister("short_lived")
    assert "short_lived" not in family_names()
    assert not is_family("short_lived")
    with pytest.raises(pettingzoo.env_registry.exceptions.NamespaceNotFound):
        pettingzoo.make("aec", "a/B-v0")
    with pytest.raises(ValueError, match="no env 'short_lived' is registered"):
        unregister("short_lived")


def test_the_same_entry_twice_is_a_no_op(registered):
    registered("twice", "llm_envs.debate.family:DebateFamily")
    register("twice", "llm_envs.debate.family:DebateFamily")
    assert family_names().count("twice") == 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: register("debate", "my_pkg.family:MyFamily"),
            "the env name 'debate' is taken \\(by llm_envs.debate.family:DebateFamily\\); "
            "register yours under another name, or unregister\\(\\) the other first",
        ),
        (
            lambda: register("my:game", DebateFamily),
            "a family name is letters, digits, '_', '.' and '-'.*got 'my:game'",
        ),
        (lambda: register("", DebateFamily), "got ''"),
        (
            lambda: register("game", DebateFamily, aec="llm_envs.debate.env:env"),
            "needs env_id, the id pettingzoo.make takes: env_id='my_pkg/MyGame-v0'",
        ),
    ],
)
def test_bad_registrations_are_refused_by_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_an_unknown_name_lists_the_registered_ones_and_says_how_to_register():
    with pytest.raises(ValueError, match="unknown env") as refused:
        family_class("chess")
    message = str(refused.value)
    assert message.startswith(
        "unknown env 'chess'; the registered ones are: debate, expert_iteration, code_collab, "
        "textarena"
    )
    assert "llm_envs.register('chess', YourFamily)" in message
    assert ENTRY_POINT_GROUP in message
    assert "--env your.module:chess" in message


def test_the_old_tuple_name_warns_and_reads_the_live_registry(registered):
    registered("late", DebateFamily)
    with pytest.warns(DeprecationWarning, match="call llm_envs.registration.entries"):
        old = registration.ENVIRONMENTS
    assert "late" in {e.family for e in old}


def test_the_builtin_families_are_registered_at_import():
    assert family_names()[:4] == ("debate", "expert_iteration", "code_collab", "textarena")
    assert set(BUILTIN_ENVIRONMENTS) <= set(entries())
    assert llm_envs.register is register


def _package(tmp_path: Path, entry_point: str, register_module: str = PLUGIN_REGISTER) -> Path:
    """An installed package ``guess_pkg`` in ``tmp_path``: its modules and its dist-info."""
    package = tmp_path / "guess_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "family.py").write_text(PLUGIN_FAMILY)
    (package / "plugin.py").write_text(register_module)
    info = tmp_path / "guess_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: guess-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_point}\n")
    return tmp_path


def _python(path: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": f"{path}:{ROOT}", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def test_an_installed_package_is_loaded_at_the_first_lookup_of_its_name(tmp_path):
    path = _package(tmp_path, "guessnum = guess_pkg.plugin:register")
    ran = _python(
        path,
        """
        import sys
        import pettingzoo
        import llm_envs
        from llm_envs.registration import family_class, family_names
        assert "guess_pkg.plugin" not in sys.modules   # nothing imported until asked
        print(family_class("guessnum").__name__)
        assert "guess_pkg.plugin" in sys.modules
        print(family_names())
        env = pettingzoo.make("aec", "guess_pkg/Guess-v0", num_agents=3)
        env.reset(seed=0)
        print("made")
        """,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "GuessFamily",
        "('debate', 'expert_iteration', 'code_collab', 'textarena', 'guessnum')",
        "made",
    ]


def test_an_entry_point_may_name_the_family_class(tmp_path):
    path = _package(tmp_path, "guessnum = guess_pkg.family:GuessFamily")
    ran = _python(
        path,
        "from llm_envs.registration import family_names\nprint(family_names()[-1])\n",
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "guessnum"


def test_a_broken_package_breaks_only_its_own_name(tmp_path):
    path = _package(tmp_path, "guessnum = guess_pkg.plugin:register", "raise ImportError('no')\n")
    ran = _python(
        path,
        """
        import warnings
        from llm_envs.registration import family_class, family_names
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            print(family_names())
        print(caught[0].message)
        print(family_class("debate").__name__)
        """,
    )
    assert ran.returncode == 0, ran.stderr
    names, warned, debate = ran.stdout.splitlines()
    assert names == "('debate', 'expert_iteration', 'code_collab', 'textarena')"
    assert warned.startswith(
        "the installed package that declares env 'guessnum' (guess_pkg.plugin:register, "
        "entry-point group llm_envs.families) failed to load: ImportError: no"
    )
    assert debate == "DebateFamily"
    asked = _python(path, "import llm_envs.registration as r\nr.family_class('guessnum')")
    assert asked.returncode == 1
    assert "failed to load: ImportError: no" in asked.stderr


def test_module_colon_name_imports_the_module_that_registers(tmp_path):
    path = _package(tmp_path, "other = guess_pkg.plugin:register")
    (path / "guess_pkg" / "registers.py").write_text(
        PLUGIN_REGISTER.replace("def register():", "if True:")
    )
    ran = _python(
        path,
        """
        from llm_envs.registration import family_class, is_family, make_family
        print(family_class("guess_pkg.registers:guessnum").__name__)
        print(is_family("guess_pkg.registers:guessnum"), is_family("guess_pkg.nothing:guessnum"))
        print(type(make_family("guess_pkg.registers:guessnum")).__name__)
        """,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["GuessFamily", "True False", "GuessFamily"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "no_such_pkg.mod:game",
            "--env 'no_such_pkg.mod:game': cannot import 'no_such_pkg.mod' \\(No module named "
            "'no_such_pkg'\\); install its package, or put its folder on PYTHONPATH",
        ),
        (
            "llm_envs.debate:game",
            "importing 'llm_envs.debate' registered no env 'game'; the registered ones are: "
            "debate, .*Its import must call llm_envs.register\\('game', ...\\)",
        ),
        (":game", "--env ':game': write it as package.module:name"),
    ],
)
def test_a_bad_module_colon_name_says_what_is_wrong(spec, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=message):
            family_class(spec)
