"""Nothing a program or an agent writes can stop a run from writing its files.

Arbitrary code points (lone surrogates included, which no UTF-8 file can hold)
and arbitrary bytes go through every path a program's text takes (its stdout
and stderr, its exception's message, a value an assertion shows) and through
the agent's own text, into a code-collaboration episode record, and from there
into an episode file that must write, and read back as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baselines.run_directory import RunDirectory
from llm_envs.code_collab.env import parallel_env
from llm_envs.sandbox import Sandbox
from llm_envs.tasks import CodeProblem

# Any code point: surrogates (category Cs) included.
ANY_TEXT = st.text(st.characters(codec=None, categories=["Cs", "L", "N", "P", "S", "Z", "C"]))
CODE_POINTS = st.lists(
    st.one_of(st.integers(0xD800, 0xDFFF), st.integers(0, 0x10FFFF)), min_size=1, max_size=12
)


@pytest.fixture(scope="module")
def pool() -> Iterator[Sandbox]:
    with Sandbox(workers=1, timeout=10.0) as sandbox:
        yield sandbox


def _program(points: list[int], raw: bytes) -> str:
    """A main agent's answer whose function prints, writes and raises ``points`` and ``raw``."""
    return (
        "def add(a, b):\n"
        "    import os, sys\n"
        f"    text = ''.join(map(chr, {points!r}))\n"
        "    print(text, flush=True)\n"
        "    sys.stderr.write(text)\n"
        "    sys.stderr.flush()\n"
        f"    os.write(1, {raw!r})\n"
        f"    os.write(2, {raw!r})\n"
        "    if a == 1:\n"
        "        raise ValueError(text)\n"
        "    if a == 2:\n"
        "        raise type('Error' + str(len(text)), (Exception,), {})(text)\n"
        "    return text\n"
    )


PROBLEM = CodeProblem(
    task_id="Surrogates/0",
    prompt="def add(a, b):\n",
    tests=("assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(3, 3) == 6"),
    entry_point="add",
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(points=CODE_POINTS, raw=st.binary(max_size=16), helper=ANY_TEXT, prose=ANY_TEXT)
def test_any_text_reaches_an_episode_file(
    pool: Sandbox, tmp_path: Path, points: list[int], raw: bytes, helper: str, prose: str
) -> None:
    env = parallel_env(problems=[PROBLEM], num_turns=2, sandbox=pool)
    env.reset(seed=0)
    main = _program(points, raw)
    for _ in range(2):
        env.step({"helper": helper, "main": prose + "\n```python\n" + main + "```\n"})
    record = env.unwrapped.record()
    run = RunDirectory(tmp_path / "run")
    path = run.write_episodes("step_0", [record])
    assert path is not None
    text = path.read_bytes().decode("utf-8")  # valid UTF-8, whatever was written
    lines = text.split("\n")  # (not splitlines: U+0085 and friends are not JSONL's separators)
    assert lines[1:] == [""]
    assert json.loads(lines[0])["turns"]
