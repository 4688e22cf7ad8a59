"""The computed-prose guard (lib.sphinxext.prose): a typed number that a claim measured fails."""

from lib.sphinxext.prose import allowed_numbers, prose_of, typed_run_numbers

REC = [
    {"id": "07/a", "measured": 0.2734},
    {"id": "07/b", "measured": [145.0, 3.0]},
    {"id": "07/c", "measured": {"size": 100, "min": 2.9e-16, "max": 0.5}},
]


def test_typed_numbers_that_a_claim_measured_are_found():
    text = "The ratio was 0.27, with 145 certified steps, and errors near $3\\times10^{-16}$."
    found = typed_run_numbers(text, REC)
    assert [t for t, _ in found] == ["0.27", "145", "3\\times10^{-16}"]
    assert [c for _, c in found] == ["07/a", "07/b", "07/c"]


def test_glued_code_and_configuration_numbers_are_not_flagged():
    text = (
        "The ratio was {glue:text}`rates::ratio:.2f`, see `0.27`. We ran 300 steps at "
        "step size 0.5 and 3 seeds.\n```{code-cell} ipython3\nx = 0.27\n```\n"
    )
    assert "0.27" not in prose_of(text).replace("300", "")
    assert typed_run_numbers(text, REC) == []


def test_a_declared_constant_is_allowed():
    text = "The decay exponent 0.27 <!-- typed-ok: 0.27 (a constant of the theorem) -->."
    assert allowed_numbers(text) == {"0.27"}
    assert typed_run_numbers(text, REC) == []
    assert typed_run_numbers("The decay exponent 0.27.", REC) == [("0.27", "07/a")]
