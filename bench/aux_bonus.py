"""Benchmark: what ``aux_bonus="when_called"`` costs per program (its two split runs).

Every HumanEval problem, and every CoopHumanEval problem that is a HumanEval
problem, played as a collaboration: the helper's ``aux`` is the canonical
solution, main returns ``aux(...)``. Each is a program the seed's rule pays a
bonus, so under ``"when_called"`` each runs three times (scored, true split,
varied split); under ``"as_written"`` once. For reference, ``"one split"`` is
the scored run plus one plain split run (the rule before the variation: a call
counted by the judge).

Two numbers per rule: the median over programs of one program's evaluation,
each evaluated alone (best of ``--repeat``; the latency a single ``env.step``
sees), and the wall time of evaluating all of them in one batch, per program
(the throughput of a ``step_batch``).

Run from the repository root, with the data:

    LLM_ENVS_DATA_DIR=/work/shared/data python bench/aux_bonus.py [--repeat N] [--workers N]
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from llm_envs.code_collab.rewards import CodeEvaluation, assemble, evaluate_many
from llm_envs.sandbox import Sandbox, SandboxJob
from llm_envs.tasks import CodeProblem, load_coophumaneval, load_humaneval

Item = tuple[CodeProblem, str, str]


def collaboration(problem: CodeProblem, canonical: str) -> Item:
    """The canonical solution as ``aux``; main a thin wrapper that calls it."""
    module = ast.parse(problem.prompt)
    (function,) = (
        node
        for node in module.body
        if isinstance(node, ast.FunctionDef) and node.name == problem.entry_point
    )
    parameters = ast.unparse(function.args)
    names = ", ".join(a.arg for a in function.args.args)
    helper = f"def aux({parameters}):\n{canonical}"
    main = f"def {problem.entry_point}({parameters}):\n    return aux({names})\n"
    return problem, helper, main


def items() -> dict[str, list[Item]]:
    data = Path(os.environ.get("LLM_ENVS_DATA_DIR", "")) / "HumanEval.jsonl.gz"
    with gzip.open(data, "rt") as lines:
        canonical = {
            record["entry_point"]: record["canonical_solution"] for record in map(json.loads, lines)
        }
    coop = [p for p in load_coophumaneval() if p.entry_point in canonical]
    return {
        "HumanEval": [collaboration(p, canonical[p.entry_point]) for p in load_humaneval()],
        "CoopHumanEval (HumanEval's)": [collaboration(p, canonical[p.entry_point]) for p in coop],
    }


def one_split(pool: Sandbox, batch: list[Item]) -> None:
    """The scored runs, then one plain split run each (aux's calls counted, values unvaried)."""
    programs = [assemble(*item) for item in batch]
    jobs = [
        SandboxJob(p.source, p.problem.tests, p.problem.test_setup, p.problem.entry_point)
        for p in programs
    ]
    pool.run_tests_many(jobs)
    split = [
        SandboxJob(
            p.main_source,
            p.problem.tests,
            p.problem.test_setup,
            p.problem.entry_point,
            helper=f"{p.aux_preamble}\n\n{p.aux.source}\n",
        )
        for p in programs
    ]
    pool.run_tests_many(split)


def rules(pool: Sandbox) -> dict[str, Callable[[list[Item]], object]]:
    def rule(name: str) -> Callable[[list[Item]], list[CodeEvaluation]]:
        return lambda batch: evaluate_many(batch, pool, aux_bonus=name)  # type: ignore[arg-type]

    return {
        "as_written": rule("as_written"),
        "one split": lambda batch: one_split(pool, batch),
        "when_called": rule("when_called"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with Sandbox(workers=args.workers, timeout=30.0) as pool:
        run = rules(pool)
        for data_set, batch in items().items():
            seed = evaluate_many(batch, pool, aux_bonus="as_written")
            checked = evaluate_many(batch, pool, aux_bonus="when_called")
            passed = sum(e.reward.passed == e.reward.total_tests for e in checked)
            print(
                f"{data_set}: {len(batch)} programs, {passed} pass every test; mean bonus "
                f"as_written {statistics.mean(e.reward.bonus for e in seed):.3f}, "
                f"when_called {statistics.mean(e.reward.bonus for e in checked):.3f}"
            )
            alone: dict[str, list[float]] = {name: [] for name in run}
            for item in batch:  # the rules interleaved, so that drift hits them alike
                best = dict.fromkeys(run, float("inf"))
                for _ in range(args.repeat):
                    for name, evaluate in run.items():
                        start = time.perf_counter()
                        evaluate([item])
                        best[name] = min(best[name], time.perf_counter() - start)
                for name, seconds in best.items():
                    alone[name].append(seconds)
            header = f"{'alone: median ms':>17s} {'p90 ms':>8s} {'batch: ms/program':>18s}"
            print(f"  {'rule':12s} {header}")
            for name, evaluate in run.items():
                start = time.perf_counter()
                evaluate(batch)
                per_program = (time.perf_counter() - start) / len(batch)
                times = sorted(alone[name])
                p90 = times[int(0.9 * (len(times) - 1))]
                print(
                    f"  {name:12s} {statistics.median(times) * 1e3:17.1f} {p90 * 1e3:8.1f} "
                    f"{per_program * 1e3:18.1f}"
                )


if __name__ == "__main__":
    main()
