"""The computed-prose guard (lib.sphinxext.prose): a typed copy of a number that a page
attributes to a claim fails; a typed parameter or threshold never does, whatever a run
measured elsewhere (the guard must not depend on coincidences between machines)."""

from lib.sphinxext.prose import allowed_numbers, prose_of, sentences, typed_run_numbers

REC = [
    {"id": "07/a", "measured": 0.2734, "criterion": "< 0.5"},
    {"id": "07/b", "measured": [145.0, 3.0], "criterion": ">= 1"},
    {"id": "07/c", "measured": {"size": 100, "min": 2.9e-16, "max": 0.5}, "criterion": "< 1e-12"},
    # chapter 01's case from the fresh-clone failure: a run measured 0.03453 for this claim
    {
        "id": "01/lm/all-improve",
        "measured": [0.04996, 0.04993, 0.0466, 0.0502, 0.03453],
        "criterion": "> 0",
    },
    {"id": "01/ablation/101-vs-11", "measured": 0.012, "criterion": "< 0.03"},
]


def test_typed_copies_of_attributed_measurements_are_found():
    text = (
        "The ratio of `07/a` was 0.27. The certificate {claim}`07/b` held at 145 steps, and "
        "{claim}`07/c` saw errors near $3\\times10^{-16}$."
    )
    found = typed_run_numbers(text, REC)
    assert found == [("0.27", "07/a"), ("145", "07/b"), ("3\\times10^{-16}", "07/c")]


def test_a_typed_copy_of_a_headline_fails():
    text = "- **Token level.** The smallest gain, {claim}`01/lm/all-improve`, was 0.035."
    assert typed_run_numbers(text, REC) == [("0.035", "01/lm/all-improve")]


def test_a_typed_parameter_equal_to_a_measured_value_passes():
    # the sentence that failed the fresh-clone gate: 0.03 is a threshold of another claim,
    # and equals 01/lm/all-improve's 0.03453 at two decimals only by coincidence
    text = (
        "Our reconstruction's criterion that $(10,1)$ ends within 0.03 of $(1,1)$ holds. "
        "Every run improved by at least 0.05 on a warm-up of 145 steps, the ratio of 0.27."
    )
    assert typed_run_numbers(text, REC) == []


def test_a_claims_own_threshold_and_other_claims_values_are_not_flagged():
    text = (
        "Claim `01/ablation/101-vs-11` requires a gap below 0.03; in the same sentence "
        "`07/a`'s threshold 0.5 is typed, and 0.05 is neither claim's measurement."
    )
    assert typed_run_numbers(text, REC) == []
    # a number only another sentence's claim measured is not attributed here
    text = "Claim `07/a` held. The certificate held at 145 steps."
    assert typed_run_numbers(text, REC) == []


def test_glued_code_and_configuration_numbers_are_not_flagged():
    text = (
        "Claim `07/a`: the ratio was {glue:text}`rates::ratio:.2f`, see `0.27`. We ran 300 "
        "steps at step size 0.5 and 3 seeds.\n```{code-cell} ipython3\nx = 0.27\n```\n"
    )
    assert "0.27" not in prose_of(text).replace("300", "")
    assert typed_run_numbers(text, REC) == []


def test_a_declared_constant_is_allowed():
    text = "Claim `07/a`: the exponent 0.27 <!-- typed-ok: 0.27 (a constant of the theorem) -->."
    assert allowed_numbers(text) == {"0.27"}
    assert typed_run_numbers(text, REC) == []
    assert typed_run_numbers("Claim `07/a`: the exponent 0.27.", REC) == [("0.27", "07/a")]


def test_sentences_split_prose_and_list_items_and_drop_code():
    text = (
        "---\ntitle: x\n---\nFirst one. Second one with 0.27.\n\n- item a\n- item b\n\n"
        "```{code-cell}\nx = 1\n```\n"
    )
    units = [u.strip() for u in sentences(text)]
    assert units == ["First one.", "Second one with 0.27.", "- item a", "item b"]
