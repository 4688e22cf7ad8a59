"""The answer parsing and the reward of the full-scale TRL script (benchmarks/grpo_trl_gsm8k.py).

The script imports TRL lazily, so these helpers are testable without it."""

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "grpo_trl_gsm8k.py"
spec = importlib.util.spec_from_file_location("grpo_trl_gsm8k", PATH)
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)


def test_gold_and_predicted_numbers():
    assert script.gold_number("He has 3 + 4 = 7.\n#### 1,234") == "1234"
    with pytest.raises(ValueError, match="####"):
        script.gold_number("no marker")
    assert script.predicted_number("so 12 then 15.\n#### 42.") == "42"
    assert script.predicted_number("first 3, then -7") == "-7"
    assert script.predicted_number("no digits") is None


def test_correctness_reward_handles_both_completion_formats():
    answers = ["x #### 42", "y #### 1,000", "z #### 5"]
    completions = [[{"role": "assistant", "content": "... #### 42"}], "it is 1000", "maybe 6"]
    assert script.correctness_reward(completions, answers) == [1.0, 1.0, 0.0]


def test_cli_rejects_bad_knobs(tmp_path):
    with pytest.raises(ValueError, match="--v must be a positive integer"):
        script.main(
            ["--model", str(tmp_path), "--data", str(tmp_path), "--out", str(tmp_path), "--v", "0"]
        )
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        script.main(
            ["--model", str(tmp_path / "missing"), "--data", str(tmp_path), "--out", str(tmp_path)]
        )
