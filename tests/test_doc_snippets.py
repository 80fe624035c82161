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
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
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
        if _PYTHON_INFO.match(info):
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
            "from baselines.policies import ScriptedPolicy\n"
            "from baselines.policies.scripted import byte_render as renderer\n"
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
SKIP: dict[tuple[str, str], str] = {}


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
