"""One seat of a family as TRL's ``environment_factory`` (llm_envs.bridges.trl).

The fast tests play the adapter by hand, as TRL would call it, against the same
episode played through :class:`llm_envs.seats.SeatView` directly. The slow ones
train a real ``GRPOTrainer`` on CPU for two steps, with a tiny Qwen2 model
whose weights make it write ``take_turn`` calls (see :func:`tool_calling_model`),
so TRL's own generation, tool-call parsing, tool loop, reward and loss run.
"""

from __future__ import annotations

import os

import pytest

from llm_envs.bridges.trl import EPISODE_OVER, SeatEnvironment, SeatEnvironmentFactory
from llm_envs.family import FamilyBase
from llm_envs.registration import make_family
from llm_envs.seats import family_seat
from llm_envs.seeding import derive_seed

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

# 50 problems: the debate's reference players learn every answer of the task first.
ARITHMETIC = {"task": "arithmetic", "task_kwargs": {"max_digits": 1, "num_problems": 50}}
DEBATE = {"env": "debate", "env_kwargs": {"num_agents": 3, "max_rounds": 2}, **ARITHMETIC}
TICTACTOE = {"env": "textarena", "env_kwargs": {"game": "TicTacToe-v0"}}

ANSWER_0 = (
    "<solution>The answer is 0.</solution><evaluation>N/A</evaluation>"
    "<comparison>N/A</comparison><consensus>NO</consensus><consensus_reason>first round"
    "</consensus_reason>"
)
VOTE = (
    "<solution>The answer is 0.</solution><evaluation>Both differ.</evaluation>"
    "<comparison>Agent 0 = Agent 2</comparison><consensus>NO</consensus>"
    "<consensus_reason>no agreement</consensus_reason>"
)


def _direct(settings, seat, problem, moves, seed=0):
    """The seat's episode played through SeatView: first chat, observations, rewards, record."""
    family = make_family(
        settings["env"],
        settings["env_kwargs"],
        task=settings.get("task", "default"),
        seed=seed,
        task_kwargs=settings.get("task_kwargs"),
    )
    view, reset_seed, options = family_seat(
        family, seat, problem=problem, seed=derive_seed(seed, problem)
    )
    first, _ = view.reset(seed=reset_seed, options=options)
    observations, rewards = [], []
    for move in moves:
        if view.done:
            break
        observation, reward, *_ = view.step(move)
        observations.append(observation)
        rewards.append(reward)
    return first, observations, rewards, view


# ------------------------------------------------------------------ the adapter, by hand


@pytest.mark.parametrize(
    ("settings", "seat", "problem", "moves", "expected_return"),
    [
        (DEBATE, "agent_1", 2, [ANSWER_0, VOTE], None),  # two rounds, pairwise reward at the end
        (DEBATE, "agent_0", 0, ["no tags at all"], -1.0),  # a parse error ends the debate
        (TICTACTOE, "agent_0", 0, ["[8]", "[7]", "[5]"], -1.0),  # the minimax player wins
        (TICTACTOE, "agent_1", 1, ["[4]", "[4]", "[4]"], -1.0),  # invalid moves lose the game
    ],
    ids=["debate-two-rounds", "debate-parse-error", "tictactoe-first", "tictactoe-invalid"],
)
def test_the_tool_plays_the_seat_view_episode(settings, seat, problem, moves, expected_return):
    factory = SeatEnvironmentFactory(**settings, seat=seat)
    row = factory.dataset(problem + 1)[problem]
    env = factory()
    assert env.reset(**row) is None  # the prompt is already the first observation
    results = [env.take_turn(move) for move in moves if not env.done]
    episode_return = env.get_reward()

    first, observations, rewards, view = _direct(settings, seat, problem, moves)
    assert row == {"problem": problem, "prompt": first["messages"]}
    assert view.done and env.done and env.unplayed_turns == 0
    assert env.turns == len(results) == len(rewards)
    assert episode_return == pytest.approx(sum(rewards)) == env.episode_return
    if expected_return is not None:
        assert episode_return == expected_return
    assert env.record == view.record()
    # Each result is what the seat saw next: the new last message (the debate rebuilds
    # its prompt, the game's chat grows), and the episode's end after the last move.
    for result, observation in zip(results[:-1], observations, strict=False):
        assert result == observation["messages"][-1]["content"]
    assert results[-1] == observations[-1]["messages"][-1]["content"] + "\n\n" + EPISODE_OVER


def test_a_rollout_that_stops_early_leaves_its_turns_to_silence():
    # The model stopped calling the tool: its unplayed turns are the empty string,
    # which the environment scores (a debate: a parse error, -1; the game: invalid moves).
    debate = SeatEnvironmentFactory(**DEBATE, seat="agent_2")
    env = debate()
    env.reset(**debate.dataset(1)[0])
    assert (env.get_reward(), env.turns, env.unplayed_turns) == (-1.0, 0, 1)
    *_, view = _direct(DEBATE, "agent_2", 0, [""])
    assert env.record == view.record()
    assert [t["text"] for t in env.record["turns"] if t["agent"] == "agent_2"] == [""]

    game = SeatEnvironmentFactory(**TICTACTOE, seat="agent_0")
    env = game()
    env.reset(**game.dataset(1)[0])
    env.take_turn("[4]")
    episode_return = env.get_reward()
    _, _, rewards, view = _direct(TICTACTOE, "agent_0", 0, ["[4]"] + [""] * 10)
    assert episode_return == pytest.approx(sum(rewards)) == -1.0
    assert env.unplayed_turns == len(rewards) - 1 >= 1
    assert env.record == view.record()
    assert env.get_reward() == episode_return  # asked again: the same return, nothing played


def test_the_dataset_is_one_row_per_problem_that_every_copy_replays():
    factory = SeatEnvironmentFactory(**TICTACTOE, seat="agent_1", seed=3)
    rows = factory.dataset(3, first_problem=4)
    assert rows.column_names == ["problem", "prompt"]
    assert rows["problem"] == [4, 5, 6]
    for row in rows:
        first, *_ = _direct(TICTACTOE, "agent_1", row["problem"], [], seed=3)
        assert row["prompt"] == first["messages"]
    # TRL gives each of a group's num_generations copies of a row its own environment.
    copies = [factory() for _ in range(3)]
    results = []
    for env in copies:
        env.reset(**rows[0])
        results.append(env.take_turn("[8]"))
    assert len(set(results)) == 1 and factory.environments == copies
    # TRL reuses its environments: a reset starts afresh.
    copies[0].reset(**rows[1])
    assert (copies[0].problem, copies[0].turns, copies[0].episode_return) == (5, 0, 0.0)


def test_other_players_and_one_seat_families():
    from llm_envs.textarena.players import RandomKuhnPokerPlayer

    # Against players you give rather than the game's reference players (fresh each episode).
    poker = SeatEnvironmentFactory(
        "textarena",
        {"game": "KuhnPoker-v0"},
        seat="agent_0",
        players=lambda: {"agent_1": RandomKuhnPokerPlayer(seed=3)},
    )
    row = poker.dataset(1)[0]
    played = []
    for env in (poker(), poker()):
        env.reset(**row)
        played.append((env.take_turn("[check]"), env.get_reward(), env.record))
    assert played[0] == played[1]
    # The solver of expert iteration is its family's only seat: no players needed.
    solver = SeatEnvironmentFactory("expert_iteration", seat="solver")
    row = solver.dataset(1)[0]
    assert row["prompt"][0]["content"].startswith("What is 65 * 80?")
    env = solver()
    env.reset(**row)
    assert env.take_turn("The answer is \\boxed{5200}.") == EPISODE_OVER
    assert env.get_reward() == 1.0


class _HintedSolver(FamilyBase):
    """A one-seat family whose first turn carries a training context (an answer hint)."""

    name = "hinted"
    agents = ("solver",)

    def eval_episode(self, problem, seed):
        from llm_envs.expert_iteration import plan_groups
        from llm_envs.tasks import ArithmeticTask

        plan = plan_groups([ArithmeticTask(seed=0)[problem]], {"answer_hint": 1}, seed=seed)
        return plan.make_envs()[0], plan.seeds[0], dict(plan.options[0])


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: SeatEnvironmentFactory(**DEBATE, seat="agent_7"), ValueError, "agent_7"),
        (lambda: SeatEnvironmentFactory("debate", {"num_agents": 3}), ValueError, "reference"),
        (
            lambda: SeatEnvironmentFactory("textarena", {"game": "ConnectFour-v0"}),
            ValueError,
            "reference players for TicTacToe and KuhnPoker only",
        ),
        (lambda: SeatEnvironmentFactory(**TICTACTOE).dataset(0), ValueError, "num_problems >= 1"),
        (
            lambda: SeatEnvironmentFactory(**DEBATE, players=lambda: {}),
            ValueError,
            r"no player for \['agent_1', 'agent_2'\]",
        ),
        (
            lambda: SeatEnvironment(_HintedSolver(), "solver").reset(problem=0),
            ValueError,
            "context swap",
        ),
    ],
    ids=["seat", "no-reference", "no-reference-game", "no-rows", "missing-players", "swap"],
)
def test_bad_settings_are_refused_with_the_fix(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_more_problems_than_the_family_has_are_refused():
    from llm_envs.debate import scripted_debaters

    factory = SeatEnvironmentFactory(
        "debate",
        {"num_agents": 3, "max_rounds": 1},
        players=lambda: scripted_debaters(3),  # the built-in questions have no answers
    )
    available = factory.family.num_eval_problems
    assert len(factory.dataset(available)) == available
    with pytest.raises(ValueError, match=f"has {available} problems"):
        factory.dataset(2, first_problem=available - 1)


def test_misuse_is_refused_with_the_fix():
    factory = SeatEnvironmentFactory(**DEBATE, seat="agent_0")
    rows = factory.dataset(2)
    env = factory()
    with pytest.raises(RuntimeError, match="call reset"):
        env.take_turn("x")
    with pytest.raises(RuntimeError, match="call reset"):
        env.get_reward()
    with pytest.raises(ValueError, match="no 'problem' column"):
        env.reset(prompt=rows[0]["prompt"])
    with pytest.raises(ValueError, match="not agent_0's first observation of problem 1"):
        env.reset(problem=1, prompt=rows[0]["prompt"])
    env.reset(**rows[0])
    env.take_turn("no tags at all")
    # TRL hands the model a tool's error as the tool's result: the episode is over.
    with pytest.raises(RuntimeError, match=EPISODE_OVER):
        env.take_turn("x")


@pytest.mark.parametrize("served", [False, True], ids=["in-process", "served"])
def test_trl_sees_reset_get_reward_and_one_tool(served):
    import inspect

    from transformers.utils import get_json_schema

    from llm_envs.bridges.trl import RemoteSeatEnvironment

    # TRL makes a tool of every public function of the class but reset and get_reward.
    environment = RemoteSeatEnvironment if served else SeatEnvironment
    public = {
        name
        for name, _ in inspect.getmembers(environment, predicate=inspect.isfunction)
        if not name.startswith("_")
    }
    assert public == {"reset", "take_turn", "get_reward"}
    schema = get_json_schema(SeatEnvironmentFactory(**TICTACTOE)().take_turn)["function"]
    assert schema["name"] == "take_turn"
    assert schema["parameters"]["required"] == ["text"]
    text = schema["parameters"]["properties"]["text"]
    assert text["type"] == "string" and "format the instructions ask for" in text["description"]
    assert "the instructions ask" in schema["description"]


# ------------------------------------------------------------------ a real GRPOTrainer

CALL_OPEN = '<tool_call>\n{"name": "take_turn", "arguments": {"text": "'
CALL_CLOSE = '"}}\n</tool_call>'


def tool_calling_model(tiny_dir, target, moves):
    """The tiny random Qwen2 model, rewired to write ``take_turn`` calls, in ``target``.

    TRL's tool calling needs a chat template that renders tools and a parser for
    the model's calls: the tokenizer gets TRL's Qwen2.5 template (TRL knows its
    response format). A random model never writes a tool call, so the weights
    make this one a bigram sampler: both layers' output projections are zeroed
    (each position's hidden state is its token's embedding), the chain's tokens
    get basis-vector embeddings, and the untied output head maps the end of the
    generation prompt to the call's opening (about 80%) or to the end of the
    turn (no call: the model stays silent), the opening to one of ``moves``
    (uniformly), a move to the call's closing, and that to ``<|im_end|>``. The
    call's two fixed parts and each move are single added tokens. Every other
    logit is 0 against the chain's 22, so sampling follows the chain; the
    weights still train (their gradients are not zero).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer.add_tokens([CALL_OPEN, CALL_CLOSE, *moves])
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(torch.zeros_like(model.lm_head.weight))
    token = tokenizer.convert_tokens_to_ids
    prompt_end = tokenizer.apply_chat_template(
        [{"role": "user", "content": "x"}], add_generation_prompt=True, return_dict=False
    )[-1]
    # Dimension k of the hidden state says "the current token is chain[k]".
    chain = [prompt_end, token(CALL_OPEN), token(CALL_CLOSE), *map(token, moves)]
    end, opening, closing, first_move = range(4)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embedding, head = model.model.embed_tokens.weight, model.lm_head.weight
        for k, t in enumerate(chain):
            embedding[t] = 0.0
            embedding[t, k] = 1.0
        # The final norm scales a basis vector by sqrt(128): a weight of 2 is a logit of 22.6.
        head[token(CALL_OPEN), end] = 2.0
        head[tokenizer.eos_token_id, end] = 2.0 - 0.12  # exp(-0.12 * sqrt(128)) = 1/4: 20%
        for k, move in enumerate(moves):
            head[token(move), opening] = 2.0
            head[token(CALL_CLOSE), first_move + k] = 2.0
        head[tokenizer.eos_token_id, closing] = 2.0
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def train(model_dir, factory, tmp_path, *, max_tool_calling_iterations, steps=2, group=4):
    """Two steps of GRPO; return the trainer, the parameter change and each step's episodes."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path / "run"),
        bf16=False,
        use_cpu=True,
        report_to="none",
        gradient_checkpointing=False,
        per_device_train_batch_size=group,
        num_generations=group,
        max_steps=steps,
        logging_steps=1,
        learning_rate=1e-4,
        max_completion_length=1024,
        max_tool_calling_iterations=max_tool_calling_iterations,
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        train_dataset=factory.dataset(steps),
        environment_factory=factory,
        args=args,
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    episodes = []
    generate_and_score = trainer._generate_and_score_completions

    def capture(inputs):
        out = generate_and_score(inputs)
        # TRL has just asked each rollout's get_reward; asked again, it answers the same.
        episodes.append([(e.get_reward(), e) for e in trainer.environments])
        return out

    trainer._generate_and_score_completions = capture
    trainer.train()
    changed = sum(
        (p.detach() - before[n]).abs().sum().item() for n, p in trainer.model.named_parameters()
    )
    return trainer, changed, episodes


def check_the_environment_reached_trl(trainer, episodes, seat, moves):
    means = [h["rewards/SeatEnvironment/mean"] for h in trainer.state.log_history if "reward" in h]
    assert len(means) == len(episodes) == 2
    for mean, step in zip(means, episodes, strict=True):
        assert len(step) == 4
        assert mean == pytest.approx(sum(r for r, _ in step) / len(step), abs=1e-6)
        for _, env in step:
            assert env.done
            texts = [t["text"] for t in env.record["turns"] if t["agent"] == seat]
            # What the model wrote through the tool, as it wrote it; the empty string for
            # the turns it left (get_reward); nothing else.
            assert all(text in moves for text in texts if text)
            assert (len(texts) - texts.count(""), texts.count("")) == (
                env.turns,
                env.unplayed_turns,
            )
    assert any(h.get("tools/call_frequency", 0) > 0 for h in trainer.state.log_history)
    return [env.turns for step in episodes for _, env in step]


@pytest.mark.slow
@pytest.mark.training
def test_grpo_trains_a_debate_seat_through_environment_factory(tiny_model_dir, tmp_path):
    moves = [ANSWER_0, "no tags at all"]
    model_dir = tool_calling_model(tiny_model_dir, tmp_path / "model", moves)
    factory = SeatEnvironmentFactory(
        "debate", {"num_agents": 3, "max_rounds": 1}, seat="agent_0", **ARITHMETIC
    )
    trainer, changed, episodes = train(
        model_dir, factory, tmp_path, max_tool_calling_iterations=factory.max_turns
    )
    turns = check_the_environment_reached_trl(trainer, episodes, "agent_0", moves)
    assert max(turns) == 1  # some completions called the tool; one round, one answer each
    rewards = {r for step in episodes for r, _ in step}
    assert -1.0 in rewards and len(rewards) > 1  # a broken answer or silence, and a valid one
    assert changed > 0  # the rewards differed within a group: a real gradient step


@pytest.mark.slow
@pytest.mark.training
def test_grpo_trains_a_tictactoe_seat_through_environment_factory(tiny_model_dir, tmp_path):
    moves = ["[0]", "[4]", "[8]"]
    model_dir = tool_calling_model(tiny_model_dir, tmp_path / "model", moves)
    factory = SeatEnvironmentFactory(**TICTACTOE, seat="agent_0")
    trainer, _, episodes = train(model_dir, factory, tmp_path, max_tool_calling_iterations=4)
    turns = check_the_environment_reached_trl(trainer, episodes, "agent_0", moves)
    assert max(turns) >= 2  # several moves through TRL's tool loop in one completion
