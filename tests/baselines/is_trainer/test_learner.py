"""The learner and the sub-configs: each helper gets what it reads; old run folders still load."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import typing
import warnings
from pathlib import Path

import pytest

from baselines.config import flat_fields, flat_values
from baselines.is_trainer import evaluation, league, warm_start
from baselines.is_trainer.config import (
    TEACHER_FIELDS,
    EvalSettings,
    ISTrainerConfig,
    LeagueSettings,
    SamplerSettings,
    WarmStartSettings,
)
from baselines.run_directory import RunDirectory

OLD_CONFIG = Path(__file__).with_name("old_run_config.json")
"""A ``config.json`` written before the settings were grouped (every setting at the top)."""

# Each helper module, the sub-config it is handed, and its functions that take it.
HELPERS = [
    (evaluation, EvalSettings, [evaluation.EvaluationPolicies, evaluation.evaluate]),
    (league, LeagueSettings, [league.new_league, league.LeaguePlay]),
    (warm_start, WarmStartSettings, [warm_start.warm_start]),
]


def _reads(module: object, name: str = "settings") -> set[str]:
    """The attributes read from ``settings`` or ``self.settings`` in a module's source."""
    found = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):  # type: ignore[arg-type]
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if (isinstance(owner, ast.Name) and owner.id == name) or (
            isinstance(owner, ast.Attribute) and owner.attr == name
        ):
            found.add(node.attr)
    return found


def test_the_config_groups_every_prefixed_setting_in_a_sub_config():
    groups = {f.name: f.group for f in flat_fields(ISTrainerConfig)}
    for name, group in groups.items():
        if name.startswith(("league_", "warm_start_", "sampler", "vllm_")):
            assert group in ("league", "warm_start", "sampling"), name
        if name.startswith("eval_") and name != "eval_every":  # the loop's schedule
            assert group == "evaluation", name
    holders = typing.get_type_hints(ISTrainerConfig)
    assert holders["sampling"] is SamplerSettings and holders["league"] is LeagueSettings


@pytest.mark.parametrize(("module", "settings", "functions"), HELPERS)
def test_each_helper_takes_its_sub_config_and_reads_all_of_it_and_nothing_else(
    module, settings, functions
):
    # Typed: the helper's signature names its sub-config, never the whole config or the trainer.
    for function in functions:
        hints = typing.get_type_hints(function.__init__ if inspect.isclass(function) else function)
        assert settings in hints.values(), function
        assert not {ISTrainerConfig} & set(hints.values()), function
        names = set(inspect.signature(function).parameters)
        assert not {"config", "trainer"} & names, function
    # What it reads from the settings is its sub-config, all of it.
    reads = _reads(module)
    if module is warm_start:  # the teacher's options are read by name (TEACHER_FIELDS)
        reads |= {option for _, option, _ in TEACHER_FIELDS}
    assert reads == {f.name for f in dataclasses.fields(settings)}
    # And no helper module knows the trainer.
    source = inspect.getsource(module)
    assert "ISTrainer" not in source and not re.search(r"(?<![\w.])trainer\.", source)


def test_a_config_takes_flat_names_and_sub_configs_alike():
    flat = ISTrainerConfig(eval_groups=3, warm_start_steps=2, task="arithmetic")
    nested = ISTrainerConfig(
        evaluation=EvalSettings(groups=3), warm_start=WarmStartSettings(steps=2), task="arithmetic"
    )
    assert flat == nested and flat.evaluation.groups == 3
    # Flat names beside a whole sub-config replace its settings (dataclasses.replace does so).
    assert dataclasses.replace(flat, eval_groups=5).evaluation == EvalSettings(groups=5)
    with pytest.warns(DeprecationWarning, match=r"read config\.evaluation\.groups"):
        assert flat.eval_groups == 3  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        _ = flat.eval_grups  # type: ignore[attr-defined]


def test_an_old_flat_config_json_loads_into_the_grouped_config():
    old = json.loads(OLD_CONFIG.read_text())
    config = ISTrainerConfig.from_json(OLD_CONFIG.read_text())
    assert config.league.group_size == 2 and config.league.anchors == ("scripted:random",)
    assert config.evaluation == EvalSettings(groups=3, scripted=True)
    assert config.sampling.sampler == "transformers" and config.adam_betas == (0.8, 0.9)
    # Written again, it is the same file: the keys are the flags' names, as before, and the
    # settings added since at their defaults.
    written = json.loads(config.to_json())
    assert written == json.loads(json.dumps(flat_values(config)))
    assert {k: v for k, v in written.items() if k in old} == old
    assert {k: v for k, v in written.items() if k not in old} == {"debates_per_question": 1}


def test_an_old_run_folder_resumes_without_a_changed_settings_warning(tmp_path):
    folder = RunDirectory(tmp_path / "run")
    folder.create()
    folder.config_path.write_text(OLD_CONFIG.read_text())
    (folder.path / "run.json").write_text(json.dumps({"trainer": "is_trainer"}))
    config = ISTrainerConfig.from_json(OLD_CONFIG.read_text())
    folder.claim("is_trainer", config.to_json())  # the same run: no RunFolderError
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "resuming ... with changed settings" would raise
        folder.start(config.to_json(), resume_from=1)


def test_the_report_reads_an_old_run_folder(tmp_path):
    from baselines.report.summary import run_summary

    (tmp_path / "config.json").write_text(OLD_CONFIG.read_text())
    assert "textarena" in run_summary(tmp_path, trainer="llm-envs train", report=None)


@pytest.mark.slow
@pytest.mark.training
def test_the_warm_start_steps_run_at_its_rate_then_the_run_at_its_own(
    tmp_path, tiny_model_dir, monkeypatch
):
    import torch

    from baselines.is_trainer.trainer import train
    from tests.baselines.is_trainer.test_trainer import tiny_config

    rates: list[float] = []
    step = torch.optim.AdamW.step

    def recording(self, *args, **kwargs):
        rates.append(self.param_groups[0]["lr"])
        return step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording)
    config = tiny_config(
        tmp_path,
        tiny_model_dir,
        env_kwargs={"num_agents": 3, "max_rounds": 1},
        task="arithmetic",
        num_iterations=1,
        groups_per_batch=1,
        warm_start_steps=2,
        warm_start_groups=1,
        warm_start_datums=2,
        warm_start_learning_rate=3e-3,
    )
    train(config)
    assert rates[:2] == [3e-3, 3e-3] and rates[2:] and set(rates[2:]) == {config.learning_rate}
