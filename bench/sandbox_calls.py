"""Benchmark: what one call from a test into the program costs (the judge/program round trip).

A test calls the program's function ``n`` times in a loop; the run's duration
with ``n`` calls minus its duration with none, divided by ``n``, is the cost of
one proxied call: encoding the arguments, the two pipe hops, the program's
side, decoding the result. Measured for a few argument and result shapes, best
of ``--repeat`` runs each, on one worker.

Run from the repository root:

    python bench/sandbox_calls.py [--calls N] [--repeat N]
"""

from __future__ import annotations

import argparse

from llm_envs.sandbox import Sandbox

SHAPES = {
    "int -> int": ("def f(x):\n    return x + 1\n", "7"),
    "str -> str": ("def f(x):\n    return x[::-1]\n", "'hello world'"),
    "100 ints -> sorted list": ("def f(x):\n    return sorted(x)\n", "list(range(100, 0, -1))"),
    "list argument sorted in place": ("def f(x):\n    x.sort()\n", "list(range(100, 0, -1))"),
    "dict -> dict": ("def f(x):\n    return dict(x)\n", "{str(i): i for i in range(20)}"),
}


def duration(pool: Sandbox, program: str, argument: str, calls: int, repeat: int) -> float:
    test = f"value = {argument}\nfor _ in range({calls}):\n    f(value)\n"
    best = float("inf")
    for _ in range(repeat):
        report = pool.run_tests(program, [test])
        assert report.all_passed, report
        best = min(best, report.duration)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with Sandbox(workers=1, timeout=60.0) as pool:
        print(f"one proxied call (best of {args.repeat}, {args.calls} calls per run)")
        for name, (program, argument) in SHAPES.items():
            base = duration(pool, program, argument, 0, args.repeat)
            loaded = duration(pool, program, argument, args.calls, args.repeat)
            print(f"  {name:32s} {(loaded - base) / args.calls * 1e6:7.1f} us")


if __name__ == "__main__":
    main()
