"""``llm-envs check`` on a family registered from outside the project, broken on purpose; on ours.

The toy family (tests/baselines/check/toy.py) is registered with
``llm_envs.register`` as a user's package would; each way of breaking it must
fail the check that guards against it, and make the command's exit status 1.
"""

from __future__ import annotations

import json

import pytest

import llm_envs
from baselines.check.__main__ import main
from baselines.check.config import parse_check_args
from baselines.check.run import run_checks
from baselines.commands import main as llm_envs_main
from tests.baselines.check import toy

SMALL = ["--groups", "2", "--judge-groups", "4", "--problems", "2", "--conformance-cycles", "5"]


@pytest.fixture(scope="module", autouse=True)
def say_check():
    llm_envs.register(toy.NAME, toy.SayFamily, aec=toy.env, env_id=toy.ENV_ID)
    yield
    llm_envs.unregister(toy.NAME)


def statuses(broken, *flags):
    argv = [toy.NAME, "--env-kwargs", json.dumps({"broken": broken}), *SMALL, *flags]
    return {r.name: r.status for r in run_checks(parse_check_args(argv)).results}


EVERY_CHECK = {
    "conformance": "PASS",
    "reference": "PASS",
    "stable_under_load": "PASS",
    "reward_variance": "PASS",
    "determinism": "PASS",
    "judge": "SKIP",  # no judging infos: not a judged family
    "reward_variance[model]": "SKIP",  # no --model
    "judge[model]": "SKIP",
    "reward_range": "PASS",
    "step_time": "PASS",
}


def test_the_sound_toy_family_passes_every_check():
    assert statuses("") == EVERY_CHECK


@pytest.mark.parametrize(
    ("broken", "flags", "failed"),
    [
        ("constant", (), {"reward_variance", "reference"}),
        ("nondeterministic", (), {"determinism", "conformance"}),
        ("reference_zero", (), {"reference", "reward_variance"}),
        ("out_of_range", (), {"reward_range"}),
        ("slow", ("--max-step-seconds", "0.01"), {"step_time"}),
        ("load", (), {"stable_under_load"}),
        ("judge", (), {"judge"}),
        ("bad_observation", (), {"conformance", "reference", "reward_variance", "determinism"}),
        ("crash", (), {"conformance", "reward_variance", "determinism"}),
    ],
)
def test_each_fault_fails_the_check_that_guards_against_it(broken, flags, failed):
    found = statuses(broken, *flags)
    assert {name for name, status in found.items() if status == "FAIL"} == failed
    assert set(found) == set(EVERY_CHECK)  # a crash of the family is a FAIL line, never a crash


def test_a_family_without_reference_players_is_skipped_naming_the_capability():
    results = {
        r.name: r
        for r in run_checks(
            parse_check_args([toy.NAME, "--env-kwargs", '{"broken": "no_reference"}', *SMALL])
        ).results
    }
    assert results["reference"].status == "SKIP"
    assert (
        "no reference_players: the toy family has no reference players"
        in results["reference"].summary
    )
    assert results["stable_under_load"].status == "SKIP"
    assert results["reward_variance"].status == "SKIP"  # only failing players: nothing to show
    assert "scripted players" in results["reward_variance"].summary
    assert results["determinism"].status == "PASS"


def test_the_exit_status_is_1_on_a_failed_check_and_0_otherwise(tmp_path, capsys):
    out = ["--output-dir", str(tmp_path)]
    assert main([toy.NAME, *SMALL, *out]) == 0
    broken = main([toy.NAME, "--env-kwargs", '{"broken": "constant"}', *SMALL, *out])
    assert broken == 1
    printed = capsys.readouterr().out
    assert "FAIL  reward_variance         0/2 training groups (0%) have unequal rewards" in printed
    assert f"{toy.NAME}: 2 checks failed" in printed
    saved = json.loads((tmp_path / toy.NAME / "check.json").read_text())
    assert saved["passed"] is False
    assert {r["name"]: r["status"] for r in saved["results"]}["reward_variance"] == "FAIL"


def test_module_colon_name_loads_a_family_the_command_never_imported(tmp_path, monkeypatch):
    # the module's import registers the family (Gymnasium's package.module:name)
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "my_say.py").write_text(
        "import llm_envs\n"
        "from tests.baselines.check import toy\n"
        "llm_envs.register('my_say', toy.SayFamily)\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    try:
        assert main(["my_say:my_say", *SMALL, "--output-dir", str(tmp_path / "out")]) == 0
    finally:
        llm_envs.unregister("my_say")
    assert (tmp_path / "out" / "say_check" / "index.html").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["no_such_env"], "unknown env 'no_such_env'"),
        (["debate", "--task", "mbpp"], "task 'mbpp' is not for env='debate'"),
        (["debate", "--min-varied-share", "1.5"], "min_varied_share"),
        (["debate", "--model", "/no/such/model"], "model '/no/such/model': no such folder"),
    ],
)
def test_a_bad_setting_exits_2_naming_it(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_llm_envs_check_on_a_built_in_family_writes_the_page(tmp_path, capsys):
    status = llm_envs_main(["check", "textarena", *SMALL, "--output-dir", str(tmp_path)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    lines = [line for line in printed.splitlines() if line[:4] in ("PASS", "FAIL", "SKIP")]
    assert [line.split()[1] for line in lines] == list(EVERY_CHECK)
    page = (tmp_path / "textarena" / "index.html").read_text()
    assert "llm-envs check: textarena" in page and "reward_variance" in page
    saved = json.loads((tmp_path / "textarena" / "check.json").read_text())
    statuses = {r["name"]: r["status"] for r in saved["results"]}
    assert statuses["reference"] == "PASS" and statuses["judge"] == "SKIP"
    assert saved["results"][1]["numbers"]["mean_return"] == {  # minimax draws; the others lose
        "reference": 0.0,
        "empty": -1.0,
        "random_text": -1.0,
    }


def test_the_page_escapes_what_the_family_names(tmp_path):
    from baselines.check.checks import CheckResult
    from baselines.check.page import write_page
    from baselines.check.run import CheckReport

    report = CheckReport("<script>x</script>", {"env": "<b>"}, players=["<i>"])
    report.results.append(CheckResult("reference", "FAIL", "raised <img src=x onerror=1>"))
    page = write_page(report, tmp_path).read_text()
    assert "<script>x" not in page and "<img" not in page and "<i>" not in page
    assert "&lt;img src=x onerror=1&gt;" in page


@pytest.mark.slow
def test_a_model_plays_the_training_groups(tmp_path, tiny_model_dir, capsys):
    argv = [toy.NAME, *SMALL, "--model", str(tiny_model_dir), "--max-tokens", "4"]
    status = main([*argv, "--output-dir", str(tmp_path)])
    saved = json.loads((tmp_path / toy.NAME / "check.json").read_text())
    results = {r["name"]: r for r in saved["results"]}
    # a random model never says "yes": every group's rewards are equal
    assert results["reward_variance[model]"]["status"] == "FAIL"
    numbers = results["reward_variance[model]"]["numbers"]
    assert (numbers["varied"], numbers["groups"], numbers["share"]) == (0, 2, 0.0)
    assert numbers["turns"] == 2 * 4 * 2  # 2 groups of 4 episodes, 2 seats
    assert numbers["sampling_seconds"] > 0
    assert results["judge[model]"]["status"] == "SKIP"
    assert status == 1


def test_the_docs_show_the_current_flags():
    from pathlib import Path

    from baselines.check.config import CheckConfig
    from baselines.cli import config_table

    page = (Path(__file__).parents[3] / "docs" / "check.md").read_text()
    assert config_table(CheckConfig) in page, (
        "docs/check.md is out of date: paste `python -m baselines.cli "
        "baselines.check.config:CheckConfig` into its Flags section"
    )
