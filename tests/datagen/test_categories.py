"""Category presets, validation and the per-pair draw (no LLM)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from omegaconf import OmegaConf
from scipy.stats import chisquare

from rag.core.errors import ConfigError
from rag.datagen.categories import CategorySet
from rag.datagen.report import chi_square, draw_counts
from tests.conftest import ROOT
from tests.datagen.helpers import compose_datagen


def categories(preset: str, *overrides: str) -> CategorySet:
    cfg = compose_datagen([f"categories={preset}", *overrides])
    return CategorySet(**OmegaConf.to_container(cfg.categories, resolve=True))


def test_presets_compose_with_their_categorizations():
    ragtifier = categories("ragtifier")
    assert [c.column for c in ragtifier.all] == [
        "question_quantitative-nature", "question_verification-difficulty", "question_multi-doc",
        "user_decision-making-style", "user_trust-orientation", "user_behavior-patterns"]
    assert ragtifier.multi_doc_probability == pytest.approx(0.5)
    liverag = categories("liverag")
    # the LiveRAG dev file's category columns, in its order
    assert liverag.columns() == ["question_factuality", "question_premise", "question_phrasing",
                                 "question_linguistic_variation", "question_multi-doc",
                                 "user_expertise-categorization"]
    assert {c.name for c in liverag.all[4].categories if c.is_multi_doc} == {"multi-aspect", "comparison"}


@pytest.mark.parametrize("preset", ["ragtifier", "liverag"])
def test_10000_draws_match_requested_shares(preset):
    cats = categories(preset)
    counts = draw_counts(cats, seed=0, n=10_000)
    for cz in cats.all:
        test = chi_square(dict(counts[cz.column]), cz)
        assert test["n"] == 10_000
        assert test["p_value"] > 0.001, (cz.column, dict(counts[cz.column]))
        # the same counts against wrong shares (first category doubled) are rejected: the test has power
        wrong = [c.probability for c in cz.categories]
        wrong[0] *= 2
        wrong = [w / sum(wrong) for w in wrong]
        observed = [counts[cz.column][c.name] for c in cz.categories]
        assert chisquare(observed, f_exp=[w * 10_000 for w in wrong]).pvalue < 1e-6


def test_draws_are_fixed_by_seed_and_pair_index():
    cats = categories("liverag")
    first = [{k: c.name for k, c in cats.draw(7, i).items()} for i in range(50)]
    assert first == [{k: c.name for k, c in cats.draw(7, i).items()} for i in range(50)]
    assert first != [{k: c.name for k, c in cats.draw(8, i).items()} for i in range(50)]
    # pair 30's draw does not depend on the pairs drawn before it (resume draws the same categories)
    assert {k: c.name for k, c in cats.draw(7, 30).items()} == first[30]


def test_probabilities_not_summing_to_one_name_the_categorization():
    with pytest.raises(ConfigError, match=r"'quantitative-nature'.*sum to 1\.05"):
        categories("ragtifier", "categories.question_categorizations.0.categories.0.probability=0.45")
    # within 1e-6 is accepted
    categories("ragtifier", "categories.question_categorizations.0.categories.0.probability=0.4000000001")


def test_bad_category_specs_are_one_clear_error():
    with pytest.raises(ConfigError, match="negative probability"):
        CategorySet(question_categorizations=[{"name": "x", "categories": [
            {"name": "a", "description": "d", "probability": -0.5},
            {"name": "b", "description": "d", "probability": 1.5}]}])
    with pytest.raises(ConfigError, match="needs a `name` and a `description`"):
        CategorySet(user_categorizations=[{"name": "x", "categories": [{"name": "a", "probability": 1.0}]}])
    with pytest.raises(ConfigError, match="no question_categorizations or user_categorizations"):
        CategorySet()


def test_cli_reports_bad_probabilities_in_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "rag.datagen", "corpus=unused.jsonl.gz", "n=5", "categories=liverag",
         "categories.user_categorizations.0.categories.1.probability=0.7", f"out={tmp_path / 'out'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "ConfigError" in line]
    assert len(errors) == 1 and "'expertise-categorization'" in errors[0] and "sum to 1.2" in errors[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "liverag_dm").exists()
