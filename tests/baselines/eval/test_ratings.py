"""Debate-tournament ratings: what counts, the Bradley-Terry fit, the bootstrap, the table.

Table tests carry hand-computed numbers (the working is in the comments);
property tests check the invariants any rating must have (relabelling, order,
monotonicity) and compare the fit with an independent maximization of the
same likelihood.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from baselines.eval import (
    ELO_SCALE,
    FIRST_WINS,
    OUTCOMES,
    SECOND_WINS,
    TIE,
    Judgement,
    Leaderboard,
    bradley_terry,
    judgements_from_votes,
    rate_models,
)
from llm_envs.debate.env import DebateEnv
from llm_envs.debate.protocol import format_response
from llm_envs.judgements import Vote

J = Judgement
REF = "referee"  # an outside judge: never one of the rated models
MODELS = ("m0", "m1", "m2", "m3")


def points(odds: float) -> float:
    """The rating gap that gives these odds: 400 * log10(odds)."""
    return 400.0 * math.log10(odds)


def ratings(board: Leaderboard) -> dict[str, float]:
    return {e.model: e.rating for e in board.entries}


def games(first: str, second: str, wins: int, ties: int, losses: int, debate: int = 0) -> list:
    """``wins`` + ``ties`` + ``losses`` judgements of first against second, by the referee."""
    outcomes = [FIRST_WINS] * wins + [TIE] * ties + [SECOND_WINS] * losses
    return [J(debate, REF, first, second, outcome) for outcome in outcomes]


def reference_log_strengths(wins_KK: np.ndarray, prior_wins: float) -> np.ndarray:
    """The same maximum by plain gradient ascent: slow, simple, and independent of the module.

    log L = sum_ij W_ij log sigma(theta_i - theta_j), W with prior_wins added off the diagonal;
    d log L / d theta_i = sum_j W_ij (1 - p_ij) - W_ji p_ij.
    """
    k = len(wins_KK)
    w = np.asarray(wins_KK, dtype=float) + prior_wins * (1 - np.eye(k))
    theta = np.zeros(k)
    step = 1.0 / (w + w.T).sum()  # below 2 / (largest curvature): every step goes uphill
    for _ in range(1_000_000):
        p = 1.0 / (1.0 + np.exp(theta[None, :] - theta[:, None]))  # p[i, j] = P(i beats j)
        gradient = (w * (1 - p)).sum(axis=1) - (w.T * p).sum(axis=1)
        if np.abs(gradient).max() < 1e-11:
            break
        theta += step * gradient
    return theta - theta.mean()


# ----------------------------------------------------------------- the fit, by hand


# (wins, ties, losses of "a" against "b", prior_wins, a's rating minus b's)
# Two models have a closed form: P(a beats b) = (w + t/2 + p) / (w + t + l + 2p).
TWO_MODELS = [
    # (3 + 1) / (4 + 2) = 2/3: odds 2:1, 400 log10 2 = 120.41
    pytest.param(3, 0, 1, 1.0, 120.412, id="3-1"),
    # (3 + 1) / (3 + 2) = 4/5: odds 4:1 = 240.82 (always wins, finite)
    pytest.param(3, 0, 0, 1.0, 240.824, id="3-0"),
    # (5 + 0.5) / (5 + 1) = 11/12: odds 11:1 = 416.56 (a smaller prior, a larger gap)
    pytest.param(5, 0, 0, 0.5, 416.557, id="5-0-small-prior"),
    # (2 + 1 + 0.5) / (4 + 1) = 3.5/5: odds 7:3 = 147.19 (a tie is half a win to each)
    pytest.param(2, 2, 0, 0.5, 147.191, id="ties-count-half"),
    # (10 + 1) / (20 + 2) = 1/2: level
    pytest.param(10, 0, 10, 1.0, 0.0, id="level"),
    # (0 + 2 + 1) / (4 + 2) = 1/2: all ties, level
    pytest.param(0, 4, 0, 1.0, 0.0, id="all-ties"),
]


@pytest.mark.parametrize(("w", "t", "l", "prior", "gap"), TWO_MODELS)
def test_two_models_match_the_closed_form(w, t, l, prior, gap):  # noqa: E741 - l for losses
    board = rate_models(games("a", "b", w, t, l), prior_wins=prior, num_bootstrap=0)
    expected = points((w + t / 2 + prior) / (l + t / 2 + prior))
    assert expected == pytest.approx(gap, abs=1e-3)
    # Mean 0: the two ratings are +gap/2 and -gap/2.
    assert ratings(board) == pytest.approx({"a": gap / 2, "b": -gap / 2}, abs=1e-3)
    assert board.entry("a").wins == w and board.entry("a").ties == t
    assert board.entry("a").losses == l and board.entry("a").comparisons == w + t + l


def test_one_strong_model_against_two_level_ones():
    # a beats b 3 times and c 3 times; b and c tie once; prior 1. By symmetry
    # g_b = g_c = 1; a's likelihood equation, 2 * (3 + 1) = 2 * (3 + 2) * x / (x + 1),
    # gives x = (w + p) / p = 4: a is 400 log10 4 = 240.82 above b and c.
    # Mean 0: a = 2/3 * 240.82 = 160.55, b = c = -80.27.
    js = games("a", "b", 3, 0, 0) + games("a", "c", 3, 0, 0) + games("b", "c", 0, 1, 0)
    board = rate_models(js, num_bootstrap=0)
    assert ratings(board) == pytest.approx({"a": 160.549, "b": -80.275, "c": -80.275}, abs=1e-3)
    assert board.models == ("a", "b", "c")  # equal ratings: by name


# A hand-made three-model tournament with no symmetry: wins[i][j] = wins of i over j.
THREE_MODELS = np.array([[0, 7, 4], [3, 0, 6], [2, 1, 0]], dtype=float)


@pytest.mark.parametrize("prior", [0.25, 1.0, 3.0])
def test_three_models_agree_with_gradient_ascent(prior):
    js = []
    names = ("x", "y", "z")
    for i, j in np.argwhere(THREE_MODELS > 0):
        js += games(names[i], names[j], int(THREE_MODELS[i, j]), 0, 0)
    board = rate_models(js, prior_wins=prior, num_bootstrap=0)
    expected = ELO_SCALE * reference_log_strengths(THREE_MODELS, prior)
    assert [board.entry(n).rating for n in names] == pytest.approx(expected, abs=1e-6)
    assert bradley_terry(THREE_MODELS, prior) * ELO_SCALE == pytest.approx(expected, abs=1e-6)


def test_three_models_agree_with_scipy():
    optimize = pytest.importorskip("scipy.optimize")
    w = THREE_MODELS + 1.0 * (1 - np.eye(3))

    def minus_log_likelihood(theta):
        diff = theta[:, None] - theta[None, :]
        return float((w * np.logaddexp(0.0, -diff)).sum())

    found = optimize.minimize(minus_log_likelihood, np.zeros(3), method="BFGS", tol=1e-12).x
    assert bradley_terry(THREE_MODELS, 1.0) == pytest.approx(found - found.mean(), abs=1e-5)


def test_a_little_data_does_not_make_a_winner_first():
    # The prior shrinks: a beat b once, while b beat c 20 times. a's equation
    # 3 * sigma(a - b) + 2 * sigma(a - c) = 3 with c far below gives
    # sigma(a - b) ~ 1/3: a ranks below b, though it never lost.
    js = games("a", "b", 1, 0, 0) + games("b", "c", 20, 0, 0)
    board = rate_models(js, num_bootstrap=0)
    assert board.models == ("b", "a", "c")
    assert board.entry("a").losses == 0


def test_anchor_rates_the_named_model_zero_and_keeps_the_gaps():
    js = games("a", "b", 3, 0, 1) + games("b", "c", 2, 1, 0, debate=1)
    free = rate_models(js, num_bootstrap=50)
    anchored = rate_models(js, num_bootstrap=50, anchor="c")
    assert anchored.entry("c").rating == 0.0
    assert anchored.entry("c").low == anchored.entry("c").high == 0.0
    for model in "ab":
        gap = free.entry(model).rating - free.entry("c").rating
        assert anchored.entry(model).rating == pytest.approx(gap, abs=1e-9)
    with pytest.raises(ValueError, match="anchor 'd' is not rated"):
        rate_models(js, anchor="d")


# ----------------------------------------------------------------- what counts


# (judgements, used, self-judgements dropped, same-model dropped)
COUNTING = [
    pytest.param([], 0, 0, 0, id="empty"),
    pytest.param([J(0, "c", "a", "b", 1.0)], 1, 0, 0, id="outside-judge"),
    pytest.param([J(0, "a", "a", "b", 1.0)], 0, 1, 0, id="judge-is-first"),
    pytest.param([J(0, "b", "a", "b", 0.5)], 0, 1, 0, id="judge-is-second"),
    pytest.param([J(0, "c", "a", "a", 1.0)], 0, 0, 1, id="same-model"),
    # Both apply: counted once, as same-model.
    pytest.param([J(0, "a", "a", "a", 0.0)], 0, 0, 1, id="same-model-judged-by-itself"),
    pytest.param(
        [J(0, "c", "a", "b", 1.0), J(0, "a", "a", "b", 1.0), J(1, "c", "b", "b", 0.5)] * 2,
        2,
        2,
        2,
        id="mixed",
    ),
]


@pytest.mark.parametrize(("js", "used", "self_dropped", "same_dropped"), COUNTING)
def test_self_and_same_model_judgements_are_dropped_and_counted(
    js, used, self_dropped, same_dropped
):
    board = rate_models(js, num_bootstrap=10)
    assert board.judgements_used == used
    assert board.self_judgements_dropped == self_dropped
    assert board.same_model_dropped == same_dropped
    assert sum(e.comparisons for e in board.entries) == 2 * used  # two sides each


def test_dropped_judgements_change_nothing():
    kept = games("a", "b", 2, 1, 1) + games("b", "c", 1, 0, 2, debate=1)
    dropped = [J(0, "a", "a", "b", FIRST_WINS), J(1, "b", "c", "b", SECOND_WINS)]
    dropped += [J(2, "c", "a", "a", TIE), J(3, REF, "d", "d", FIRST_WINS)]
    with_dropped = rate_models(kept + dropped, num_bootstrap=100, seed=3)
    without = rate_models(kept, num_bootstrap=100, seed=3)
    assert with_dropped.entries == without.entries
    assert "d" not in with_dropped.models  # in no judgement that counts: not rated


def test_a_two_model_tournament_judged_by_itself_rates_nothing():
    # Each judge is one of the two models: every judgement is self-interested.
    js = [J(d, "a", "a", "b", FIRST_WINS) for d in range(5)]
    js += [J(d, "b", "a", "b", SECOND_WINS) for d in range(5)]
    board = rate_models(js)
    assert board.entries == () and board.self_judgements_dropped == 10


def test_empty_input_gives_an_empty_leaderboard():
    board = rate_models([])
    assert board.entries == () and board.models == ()
    assert board.win_fraction == () and board.comparison_counts == ()
    assert board.num_debates == 0 and board.judgements_used == 0
    assert board.to_markdown() == (
        "| rank | model | rating | 95% interval | comparisons | W/T/L |\n"
        "| ---: | --- | ---: | --- | ---: | --- |"
    )


# ----------------------------------------------------------------- judgements


@pytest.mark.parametrize("outcome", [0.7, 2, -1.0, math.nan, "1.0", None, True])
def test_an_unknown_outcome_is_a_value_error_naming_it(outcome):
    with pytest.raises(ValueError, match=rf"outcome must be .*, got {re.escape(repr(outcome))}$"):
        J(0, REF, "a", "b", outcome)


@pytest.mark.parametrize("outcome", [1, 0, 0.5, np.float64(1.0)])
def test_outcomes_equal_to_a_valid_one_are_stored_as_floats(outcome):
    judgement = J(0, REF, "a", "b", outcome)
    assert judgement.outcome in OUTCOMES and type(judgement.outcome) is float


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"debate": 1.5}, "debate must be a str or int id, got 1.5"),
        ({"debate": False}, "debate must be a str or int id, got False"),
        ({"judge": 3}, "judge must be a model name"),
        ({"second": None}, "second must be a model name"),
    ],
)
def test_a_judgement_names_a_bad_field(kwargs, message):
    fields = {"debate": 0, "judge": REF, "first": "a", "second": "b", "outcome": 1.0}
    with pytest.raises(TypeError, match=message):
        J(**{**fields, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prior_wins": 0.0}, "prior_wins must be finite and > 0, got 0.0"),
        ({"prior_wins": math.inf}, "prior_wins must be finite and > 0, got inf"),
        ({"prior_wins": "1"}, "prior_wins must be a number > 0, got '1'"),
        ({"num_bootstrap": -1}, "num_bootstrap must be an int >= 0, got -1"),
        ({"num_bootstrap": 10.0}, "num_bootstrap must be an int >= 0, got 10.0"),
        ({"confidence": 1.0}, r"confidence must be in \(0, 1\), got 1.0"),
        ({"confidence": 0}, r"confidence must be in \(0, 1\), got 0"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        rate_models(games("a", "b", 1, 0, 0), **kwargs)


def test_items_that_are_not_judgements_are_a_type_error():
    with pytest.raises(TypeError, match="judgements must be Judgement objects"):
        rate_models([(0, REF, "a", "b", 1.0)])


def test_votes_become_judgements_between_the_models_in_the_seats():
    seats = ("llama", "qwen", "qwen", "mistral")
    votes = [
        Vote(3, 0, ">", 1),  # mistral: llama beats qwen
        Vote(0, 1, "=", 2),  # llama: qwen ties qwen (same model: dropped later)
        Vote(1, 0, ">", 3),  # qwen: llama beats mistral
        Vote(2, 1, ">", 0),  # qwen: qwen beats llama (self-interested: dropped later)
        Vote(0, 1, ">", 9),  # malformed: no agent 9
        Vote(0, 1, "<", 2),  # malformed: the ledger holds only > and =
        Vote(7, 0, ">", 1),  # no seat 7 judged
    ]
    js = judgements_from_votes(votes, seats, debate="q")
    assert js == (
        J("q", "mistral", "llama", "qwen", FIRST_WINS),
        J("q", "llama", "qwen", "qwen", TIE),
        J("q", "qwen", "llama", "mistral", FIRST_WINS),
        J("q", "qwen", "qwen", "llama", FIRST_WINS),
    )
    board = rate_models(js, num_bootstrap=0)
    assert (board.judgements_used, board.self_judgements_dropped, board.same_model_dropped) == (
        2,
        1,
        1,
    )
    with pytest.raises(ValueError, match="seats must name the model of at least two agents"):
        judgements_from_votes(votes, ("llama",), debate="q")


def test_a_played_debate_yields_judgements_from_its_vote_ledger():
    env = DebateEnv(num_agents=3, max_rounds=1, questions=["1 + 1?"])
    env.reset(seed=0)
    comparisons = {
        "agent_0": "Agent 1 > Agent 2",
        "agent_1": "Agent 0 > Agent 2\nAgent 1 > Agent 0",  # the self-comparison is not a vote
        "agent_2": "Agent 0 = Agent 1",
    }
    for agent in env.agent_iter():
        if env.terminations[agent] or env.truncations[agent]:
            env.step(None)
            continue
        env.step(format_response(solution="2", comparison=comparisons[agent], consensus=True))
    js = judgements_from_votes(env.votes, ("a", "b", "c"), debate=0)
    assert js == (
        J(0, "a", "b", "c", FIRST_WINS),
        J(0, "b", "a", "c", FIRST_WINS),
        J(0, "c", "a", "b", TIE),
    )
    assert ratings(rate_models(js, num_bootstrap=0))["a"] > 0


# ----------------------------------------------------------------- the table and the matrix


def test_markdown_table():
    js = games("alpha", "beta", 3, 1, 0) + games("beta", "g|h", 2, 0, 0, debate=1)
    board = rate_models(js, num_bootstrap=0)
    # alpha 3/1/0 against beta; beta 2/0/0 against g|h and 0/1/3 against alpha.
    lines = board.to_markdown().splitlines()
    assert lines[:2] == [
        "| rank | model | rating | 95% interval | comparisons | W/T/L |",
        "| ---: | --- | ---: | --- | ---: | --- |",
    ]
    assert [line.split(" | ")[1] for line in lines[2:]] == ["alpha", "beta", "g\\|h"]
    assert lines[2].endswith(" | n/a | 4 | 3/1/0 |")
    assert lines[3].endswith(" | n/a | 6 | 2/1/3 |")
    with_intervals = rate_models(js, num_bootstrap=20, confidence=0.9)
    assert "| 90% interval |" in with_intervals.to_markdown()


def test_vote_matrix_holds_win_fractions_without_the_prior():
    js = games("a", "b", 3, 1, 0) + games("b", "c", 2, 0, 0, debate=1)
    board = rate_models(js, num_bootstrap=0)
    assert board.models == ("a", "b", "c")
    # a-b: a scored 3.5 of 4, b 0.5; b-c: b scored 2 of 2, c none; a and c never met.
    expected = [[None, 3.5 / 4, None], [0.5 / 4, None, 1.0], [None, 0.0, None]]
    for row, expected_row in zip(board.win_fraction, expected, strict=True):
        for got, want in zip(row, expected_row, strict=True):
            assert math.isnan(got) if want is None else got == want
    assert board.comparison_counts == ((0, 4, 0), (4, 0, 2), (0, 2, 0))


# ----------------------------------------------------------------- properties

judgement_lists = st.lists(
    st.builds(
        Judgement,
        debate=st.integers(0, 5),
        judge=st.sampled_from((*MODELS, REF)),
        first=st.sampled_from(MODELS),
        second=st.sampled_from(MODELS),
        outcome=st.sampled_from(OUTCOMES),
    ),
    max_size=30,
)


def assert_same_boards(one: Leaderboard, other: Leaderboard, rename: dict[str, str]) -> None:
    assert {rename[e.model] for e in one.entries} == set(other.models)
    for e in one.entries:
        f = other.entry(rename[e.model])
        assert (f.wins, f.ties, f.losses, f.comparisons) == (
            e.wins,
            e.ties,
            e.losses,
            e.comparisons,
        )
        assert [f.rating, f.low, f.high] == pytest.approx([e.rating, e.low, e.high], abs=1e-6)


@given(judgement_lists, st.permutations(MODELS), st.integers(0, 2**32))
def test_relabelling_models_relabels_the_ratings(js, permuted, seed):
    rename = dict(zip(MODELS, permuted, strict=True)) | {REF: REF}
    relabelled = [
        J(j.debate, rename[j.judge], rename[j.first], rename[j.second], j.outcome) for j in js
    ]
    board = rate_models(js, num_bootstrap=20, seed=seed)
    other = rate_models(relabelled, num_bootstrap=20, seed=seed)
    assert_same_boards(board, other, rename)
    assert (other.self_judgements_dropped, other.same_model_dropped) == (
        board.self_judgements_dropped,
        board.same_model_dropped,
    )


@given(judgement_lists.flatmap(lambda js: st.tuples(st.just(js), st.permutations(js))))
def test_the_order_of_judgements_changes_nothing(lists):
    js, shuffled = lists
    board = rate_models(js, num_bootstrap=20)
    other = rate_models(shuffled, num_bootstrap=20)
    assert other.entries == board.entries  # bit for bit
    np.testing.assert_array_equal(other.win_fraction, board.win_fraction)


@given(
    st.integers(2, 4),
    st.integers(1, 3),
    st.data(),
    st.sampled_from([0.1, 1.0, 5.0]),
)
def test_a_model_that_always_wins_a_balanced_tournament_ranks_first(others, rounds, data, prior):
    # Every pair meets equally often (a round robin per debate); the champion wins
    # every judgement it takes part in, the others' outcomes are arbitrary.
    names = [f"m{i}" for i in range(others)]
    js = []
    for debate in range(rounds):
        js += [J(debate, REF, "champion", name, FIRST_WINS) for name in names]
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                js.append(J(debate, REF, first, second, data.draw(st.sampled_from(OUTCOMES))))
    board = rate_models(js, prior_wins=prior, num_bootstrap=0)
    top = board.entries[0]
    assert top.model == "champion" and math.isfinite(top.rating)
    assert top.rating > board.entries[1].rating


@given(judgement_lists, st.data(), st.booleans())
def test_one_more_win_never_lowers_a_rating(js, data, model_first):
    board = rate_models(js, num_bootstrap=0)
    if len(board.models) < 2:
        return
    model = data.draw(st.sampled_from(board.models))
    opponent = data.draw(st.sampled_from([m for m in board.models if m != model]))
    # A win in a new debate, with the model on either side.
    win = (
        J(99, REF, model, opponent, FIRST_WINS)
        if model_first
        else J(99, REF, opponent, model, SECOND_WINS)
    )
    after = rate_models([*js, win], num_bootstrap=0)
    assert after.entry(model).rating >= board.entry(model).rating - 1e-9
    assert after.entry(opponent).rating <= board.entry(opponent).rating + 1e-9


@given(judgement_lists, st.integers(0, 2**32))
def test_bootstrap_intervals_contain_the_rating_and_repeat_with_the_seed(js, seed):
    board = rate_models(js, num_bootstrap=50, seed=seed)
    again = rate_models(js, num_bootstrap=50, seed=np.random.default_rng(seed))
    assert again.entries == board.entries
    for e in board.entries:
        assert e.low <= e.rating <= e.high, e


def test_an_interval_is_widened_to_contain_its_rating():
    # m0 lost once to each of three models, in three debates. Spread like this
    # its losses rate it lowest: every resample that repeats a debate rates it
    # higher. Of these 40 resamples only one is the original, so the 2.5th
    # percentile, between the two lowest refits, lies above the rating (-553.5
    # against -601.3): the interval is widened down to the rating.
    js = [J(d, REF, "m0", other, SECOND_WINS) for d, other in enumerate(("m3", "m2", "m1"))]
    board = rate_models(js, prior_wins=0.01, num_bootstrap=40, seed=230)
    m0 = board.entry("m0")
    assert m0.rating == pytest.approx(-601.296, abs=1e-3)
    assert m0.low == m0.rating < m0.high


def test_bootstrap_resamples_debates_not_votes():
    # One debate, however many votes: every resample is that debate, so the
    # interval has no width. Votes spread over debates give a real interval.
    one_debate = games("a", "b", 6, 0, 4)
    board = rate_models(one_debate, num_bootstrap=100)
    assert board.entry("a").low == board.entry("a").rating == board.entry("a").high
    spread = [
        J(d, j.judge, j.first, j.second, j.outcome) for d, j in enumerate(one_debate, start=1)
    ]
    board = rate_models(spread, num_bootstrap=100)
    assert board.entry("a").low < board.entry("a").rating < board.entry("a").high
    assert board.num_debates == 10


@given(
    st.lists(
        st.lists(st.lists(st.integers(0, 6), min_size=3, max_size=3), min_size=3, max_size=3),
        min_size=1,
        max_size=5,
    )
)
def test_a_batched_fit_equals_the_fits_one_by_one(batch):
    wins_BKK = np.array(batch, dtype=float) * (1 - np.eye(3))
    together = bradley_terry(wins_BKK, 1.0)
    for wins_KK, theta_K in zip(wins_BKK, together, strict=True):
        np.testing.assert_array_equal(bradley_terry(wins_KK, 1.0), theta_K)
        assert theta_K.sum() == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    ("wins", "message"),
    [
        ([1.0, 2.0], "square"),
        ([[0, 1], [1, 0], [0, 0]], "square"),
        ([[0, -1], [1, 0]], "non-negative"),
        ([[0, math.nan], [1, 0]], "finite"),
        ([[1, 1], [1, 0]], "zero diagonal"),
    ],
)
def test_bradley_terry_names_a_bad_wins_matrix(wins, message):
    with pytest.raises(ValueError, match=message):
        bradley_terry(wins, 1.0)
