"""Write a new environment package from the templates in ``templates/`` (package data).

Each ``*.tmpl`` file is rendered with :class:`string.Template` (``${name}``,
``${title}``...; a literal dollar is ``$$``) to the same place in the new
package, a folder ``package`` becoming the package ``NAME`` and a file
``test_package.py`` becoming ``test_NAME.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import keyword
import re
import string
import sys
from collections.abc import Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath

__all__ = ["MAX_NAME_LENGTH", "check_name", "main", "new_env", "template_files"]

MAX_NAME_LENGTH = 40
"""The longest NAME: it is a package, a file and class names (``GuessNumEnv``) too."""
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*\Z")
_TEMPLATES = "templates"
_SUFFIX = ".tmpl"


def template_files() -> dict[PurePosixPath, str]:
    """Every template, by its path under ``templates/`` (suffix kept), with its text."""
    found: dict[PurePosixPath, str] = {}

    def walk(folder: Traversable, under: PurePosixPath) -> None:
        for item in sorted(folder.iterdir(), key=lambda t: t.name):
            if item.is_dir():
                walk(item, under / item.name)
            elif item.name.endswith(_SUFFIX):
                found[under / item.name] = item.read_text(encoding="utf-8")

    walk(resources.files("llm_envs.scaffold") / _TEMPLATES, PurePosixPath())
    return found


def check_name(name: str) -> str:
    """``name`` if it can be the package's import name and its ``--env`` name.

    Raises:
        ValueError: longer than :data:`MAX_NAME_LENGTH`, not a lowercase Python
            identifier, a keyword, a module Python imports already (the
            standard library's, an installed package's: one would hide the
            other), or the name of a registered family.

    Example:
        >>> check_name("guess_num")
        'guess_num'
        >>> check_name("Guess-Num")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: NAME must be a lowercase Python identifier (...), got 'Guess-Num': ...
    """
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(
            f"NAME may be {MAX_NAME_LENGTH} characters at most (it names classes, files and "
            f"--env), got {len(name)}: {name[:60]!r}..."
        )
    if not _IDENTIFIER.match(name):
        suggestion = re.sub(r"\W+", "_", name.lower()).strip("_") or "my_env"
        if suggestion[0].isdigit():
            suggestion = f"env_{suggestion}"
        raise ValueError(
            "NAME must be a lowercase Python identifier (letters, digits and '_', not starting "
            f"with a digit), got {name!r}: it is the package's import name and what --env "
            f"takes; e.g. {suggestion!r}"
        )
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        raise ValueError(f"NAME {name!r} is a Python keyword; choose another, e.g. '{name}_env'")
    spec = importlib.util.find_spec(name)
    origin = None if spec is None else spec.origin
    if name in sys.stdlib_module_names or origin not in (None, "namespace"):
        where = origin if name not in sys.stdlib_module_names else "the standard library"
        raise ValueError(
            f"NAME {name!r} is a module Python imports already ({where}), and a package of "
            f"that name would hide it or be hidden; choose another, e.g. '{name}_env'"
        )
    from llm_envs.registration import family_names

    if name in family_names():
        raise ValueError(
            f"NAME {name!r} is a registered family already; choose another, e.g. '{name}_2'"
        )
    return name


def _title(name: str) -> str:
    """The class-name prefix of ``name``: ``guess_num`` -> ``GuessNum``."""
    title = "".join(part[:1].upper() + part[1:] for part in name.split("_"))
    return title or "Env"


def _target(path: PurePosixPath, name: str) -> PurePosixPath:
    parts = [name if p == "package" else p for p in path.parts]
    last = parts[-1].removesuffix(_SUFFIX)
    parts[-1] = f"test_{name}.py" if last == "test_package.py" else last
    return PurePosixPath(*parts)


def new_env(name: str, directory: str | Path | None = None) -> Path:
    """Write the package of a new environment family ``name`` into ``directory``; return it.

    Args:
        name: the package's import name and the family's ``--env`` name.
        directory: where to write it (default: ``./NAME``); it must not exist
            or be empty.

    Raises:
        ValueError: a bad name (see :func:`check_name`), or a ``directory``
            that is a file or holds anything.
    """
    from llm_envs import __version__

    check_name(name)
    root = Path(directory if directory is not None else name)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        what = "a file" if not root.is_dir() else "a folder that is not empty"
        raise ValueError(
            f"{str(root)!r} is {what}; new-env writes only into a new or empty folder (nothing "
            f"is overwritten): give another DIR, e.g. llm-envs new-env {name} {name}_env"
        )
    title = _title(name)
    values = {
        "name": name,
        "title": title,
        "distribution": name.replace("_", "-"),
        "env_id": f"{name}/{title}-v0",
        "llm_envs_version": __version__,
    }
    rendered = {
        _target(path, name): string.Template(text).substitute(values)
        for path, text in template_files().items()
    }
    for path, text in rendered.items():
        out = root.joinpath(*path.parts)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    return root


def main(argv: Sequence[str] | None = None, *, prog: str = "llm-envs new-env") -> int:
    """``llm-envs new-env NAME [DIR]``; return the exit status (2 for a bad NAME or DIR)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Write a package of a new environment family: a two-player game, its family, "
            "scripted players, a config, conformance tests, a README and the entry point "
            "that makes --env NAME work in every llm-envs command once it is installed."
        ),
        epilog=(
            "Then: cd DIR && pip install -e '.[test]' && pytest (docs/your_own_environment.md)."
        ),
    )
    parser.add_argument("name", metavar="NAME", help="the package's import name and --env name")
    parser.add_argument(
        "directory", metavar="DIR", nargs="?", help="where to write it (default: ./NAME)"
    )
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        root = new_env(args.name, args.directory)
    except ValueError as exc:
        parser.error(str(exc))
    print(f"wrote the package {args.name!r} in {root}/; next:")
    # The test extra brings pytest, which llm-envs' own extras but `test` do not.
    print(f"  cd {root} && pip install -e '.[test]' && pytest")
    print(f"  llm-envs check {args.name}")
    print(f"  python -m baselines.is_trainer --env {args.name} --model tiny")
    return 0
