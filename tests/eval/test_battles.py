"""System-by-system battles (eval.battles): Bradley-Terry with ties against hand-worked fits, choix and an
independent scipy fit; Elo against ragnarok's definition by hand; verdict parsing; the balanced schedule; rates from
recorded verdicts; end to end on a real 3-cell sweep with a scripted judge and with the instant OpenAI-compatible
endpoint through the command line, the battle ranking in the agreement table and summary.md."""

from __future__ import annotations

import csv
import json
import math
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import choix
import numpy as np
import pytest
import yaml
from evaltools import REPO, ScriptedEngine, prompt_text
from scipy.optimize import minimize
from scipy.stats import kendalltau

from eval.battle_files import SCORE, Judgment, read_judgments
from eval.battles import (
    BattleJudge,
    Settings,
    elo_ratings,
    fit_bradley_terry,
    main,
    order_rates,
    parse_verdict,
    rate,
    run_battles,
    schedule,
)
from rag.core.io import atomic_write_jsonl, read_jsonl
from rag.llm.base import LLMRequest
from rag.llm.cache import ResponseCache
from tests.instant_endpoint import InstantEndpoint

LOG10 = 400 / math.log(10)  # rating points per unit of log-strength


# -- Bradley-Terry --------------------------------------------------------------------------------------------
def test_bradley_terry_hand_worked_chain():
    """A beats B 2 of 3, B beats C 2 of 3, A and C never meet; no ties, so every tie model is Bradley-Terry.

    The likelihood equations (wins of i = sum_j n_ij pi_i / (pi_i + pi_j)) for A: 2 = 3 pA / (pA + pB), so
    pA = 2 pB; for C: 1 = 3 pC / (pB + pC), so pC = pB / 2; B's equation then holds: 1 + 2 = 3 (1/3) + 3 (2/3).
    Log-strengths ln 2, 0, -ln 2 (already centred); ratings 1000 + 400 log10(2) = 1120.41, 1000, 879.59.
    """
    games = [(0, 1, 1.0)] * 2 + [(0, 1, 0.0)] + [(1, 2, 1.0)] * 2 + [(1, 2, 0.0)]
    for model in ("davidson", "rao_kupper", "half_win"):
        fit = fit_bradley_terry(3, games, model, ridge=0.0)
        assert fit.converged
        assert fit.theta == pytest.approx([math.log(2), 0.0, -math.log(2)], abs=1e-6)
        assert fit.ratings == pytest.approx([1120.412, 1000.0, 879.588], abs=1e-3)


def test_tie_models_hand_worked_two_players():
    """A and B: 4 wins of A, 1 of B, 2 ties (7 battles). With two players every model has as many free parameters
    as the data (three outcome shares), so the MLE reproduces the shares 4/7, 1/7, 2/7:

    Davidson: P(A) / P(B) = pA / pB = 4, P(tie) / P(B) = nu sqrt(pA pB) / pB = nu sqrt(4) = 2, so nu = 1 and
    log-strengths +-ln(4)/2 = +-0.6931, ratings 1000 +- 400 log10(2) = 1120.41 / 879.59.
    Rao-Kupper (r = pA / pB): 1 / (1 + theta / r) = 4/7 and 1 / (1 + theta r) = 1/7, so theta / r = 3/4 and
    theta r = 6: theta^2 = 4.5 (theta = 2.1213), r^2 = 8, ln r = 1.5 ln 2 = 1.0397.
    Half a win per tie (Chatbot Arena): points 5 and 2 of 7, so r = 5/2, ln r = 0.9163.
    """
    games = [(0, 1, 1.0)] * 4 + [(1, 0, 1.0)] + [(0, 1, 0.5), (1, 0, 0.5)]
    davidson = fit_bradley_terry(2, games, "davidson", ridge=0.0)
    assert davidson.theta[0] - davidson.theta[1] == pytest.approx(math.log(4), abs=1e-6)
    assert davidson.tie_parameter == pytest.approx(1.0, abs=1e-6)
    assert davidson.ratings == pytest.approx([1000 + 400 * math.log10(2), 1000 - 400 * math.log10(2)], abs=1e-3)
    rao_kupper = fit_bradley_terry(2, games, "rao_kupper", ridge=0.0)
    assert rao_kupper.theta[0] - rao_kupper.theta[1] == pytest.approx(1.5 * math.log(2), abs=1e-6)
    assert rao_kupper.tie_parameter == pytest.approx(math.sqrt(4.5), abs=1e-6)
    half = fit_bradley_terry(2, games, "half_win", ridge=0.0)
    assert half.theta[0] - half.theta[1] == pytest.approx(math.log(5 / 2), abs=1e-6)


def _battles(n_items: int, n_games: int, seed: int, tie_share: float) -> list[tuple[int, int, float]]:
    """Random battles where item i is stronger the larger i is; a share of them ties."""
    rng = np.random.default_rng(seed)
    strength = np.linspace(-1, 1, n_items)
    out = []
    for _ in range(n_games):
        i, j = (int(x) for x in rng.choice(n_items, 2, replace=False))
        if rng.random() < tie_share:
            out.append((i, j, 0.5))
        else:
            out.append((i, j, 1.0 if rng.random() < 1 / (1 + math.exp(strength[j] - strength[i])) else 0.0))
    return out


@pytest.mark.parametrize("ridge", [0.0, 1e-3, 0.1])
def test_no_ties_equals_choix(ridge):
    """Without ties the fit is Bradley-Terry's: choix's penalised ML (same penalty convention, alpha * sum theta^2)
    and, unpenalised, its iterative Luce spectral ranking."""
    games = _battles(5, 120, seed=3, tie_share=0.0)
    data = [(i, j) if s == 1.0 else (j, i) for i, j, s in games]
    ours = fit_bradley_terry(5, games, "davidson", ridge=ridge).theta
    theirs = choix.opt_pairwise(5, data, alpha=ridge, tol=1e-10) if ridge else choix.ilsr_pairwise(5, data, tol=1e-12)
    assert ours == pytest.approx(theirs - theirs.mean(), abs=1e-5)
    for model in ("rao_kupper", "half_win"):
        assert fit_bradley_terry(5, games, model, ridge=ridge).theta == pytest.approx(ours, abs=1e-6)


def test_half_win_equals_choix_on_doubled_battles():
    """A tie as half a win each way is choix's Bradley-Terry on the battles counted twice, a tie as one win each
    way (the same likelihood, doubled)."""
    games = _battles(4, 150, seed=5, tie_share=0.3)
    doubled = []
    for i, j, s in games:
        doubled += [(i, j), (i, j)] if s == 1.0 else [(j, i), (j, i)] if s == 0.0 else [(i, j), (j, i)]
    theirs = choix.ilsr_pairwise(4, doubled, tol=1e-12)
    assert fit_bradley_terry(4, games, "half_win", ridge=0.0).theta == pytest.approx(theirs - theirs.mean(),
                                                                                     abs=1e-5)


def _independent_fit(n: int, games: list[tuple[int, int, float]], model: str) -> tuple[np.ndarray, float]:
    """The published likelihoods written out per battle on the strengths pi (pi_0 = 1) and maximised by scipy's
    Nelder-Mead: nothing shared with eval.battles."""

    def nll(x: np.ndarray) -> float:
        pi = np.exp(np.concatenate([[0.0], x[:n - 1]]))
        tie = math.exp(x[n - 1])
        total = 0.0
        for i, j, s in games:
            if model == "davidson":  # Davidson (1970)
                denominator = pi[i] + pi[j] + tie * math.sqrt(pi[i] * pi[j])
                p = {1.0: pi[i], 0.0: pi[j], 0.5: tie * math.sqrt(pi[i] * pi[j])}[s] / denominator
            else:  # Rao & Kupper (1967), theta = 1 + e^x
                theta = 1 + tie
                win_i, win_j = pi[i] / (pi[i] + theta * pi[j]), pi[j] / (pi[j] + theta * pi[i])
                p = {1.0: win_i, 0.0: win_j, 0.5: 1 - win_i - win_j}[s]
            total -= math.log(p)
        return total

    result = minimize(nll, np.zeros(n), method="Nelder-Mead",
                      options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 40000, "maxfev": 40000})
    theta = np.concatenate([[0.0], result.x[:n - 1]])
    tie = math.exp(result.x[n - 1])
    return theta - theta.mean(), (tie if model == "davidson" else 1 + tie)


@pytest.mark.parametrize("model", ["davidson", "rao_kupper"])
def test_tie_models_equal_an_independent_scipy_fit(model):
    games = _battles(4, 160, seed=11, tie_share=0.25)
    fit = fit_bradley_terry(4, games, model, ridge=0.0)
    theta, tie = _independent_fit(4, games, model)
    assert fit.theta == pytest.approx(theta, abs=1e-4)
    assert fit.tie_parameter == pytest.approx(tie, rel=1e-4)
    # the strongest item (the largest index) comes first, the points total orders as Davidson's ratings
    assert int(np.argmax(fit.theta)) == 3


# -- Elo ------------------------------------------------------------------------------------------------------
def test_elo_follows_ragnarok_by_hand():
    """ragnarok (src/ragnarok/api/elo.py): start 1000, K = 5, E_a = 1 / (1 + 10^((R_b - R_a) / 400)), a tie
    scores 0.5, one battle at a time.

    1. X beats Y at 1000 : 1000: E = 0.5, X = 1000 + 5 * 0.5 = 1002.5, Y = 997.5.
    2. X and Y tie: E_X = 1 / (1 + 10^(-5/400)) = 0.507194, X = 1002.5 + 5 (0.5 - 0.507194) = 1002.46403,
       Y = 997.5 + 5 (0.5 - 0.492806) = 997.53597.
    3. Z beats X (Z at 1000, X at 1002.46403): E_Z = 1 / (1 + 10^(2.46403/400)) = 0.496454,
       Z = 1000 + 5 (1 - 0.496454) = 1002.51773, X = 1002.46403 + 5 (0 - 0.503546) = 999.94630.
    """
    ratings = elo_ratings(["X", "Y", "Z"], [("X", "Y", 1.0), ("X", "Y", 0.5), ("Z", "X", 1.0)])
    assert ratings["X"] == pytest.approx(999.94630, abs=1e-4)
    assert ratings["Y"] == pytest.approx(997.53597, abs=1e-4)
    assert ratings["Z"] == pytest.approx(1002.51773, abs=1e-4)
    assert elo_ratings(["X", "Y"], [("Y", "X", 0.0)]) == {"X": 1002.5, "Y": 997.5}  # B wins: S_a = 0


# -- verdicts, schedule, rates --------------------------------------------------------------------------------
@pytest.mark.parametrize("text,verdict", [
    ('{"explanation": "A cites more.", "verdict": "A"}', "A"),
    ('```json\n{"explanation": "x", "verdict": "Response B"}\n```', "B"),
    ('{"explanation": "both fine", "verdict": "tie"}', "tie"),
    ("Verdict: Tie", "tie"),
    ("**Final verdict**: B", "B"),
    ("B is more complete. [[B]]", "B"),
    ("[[C]]", "tie"),
    ("A", "A"),
    ('{"verdict": "maybe"}', None),
    ("I like A, but B is also good.", None),
    ("[[A]] or perhaps [[B]]", None),
    ("", None),
])
def test_parse_verdict(text, verdict):
    assert parse_verdict(text) == verdict


def test_balanced_schedule_and_seeded_order():
    topics = {f"q{t}": ["c0", "c1", "c2", "c3"] for t in range(9)}
    full = schedule(topics)
    assert len(full) == 9 * 6 and {(m.topic, m.pair) for m in full} == {(f"q{t}", p) for t in range(9)
                                                                         for p in range(6)}
    budget = schedule(topics, pairs_per_topic=2, seed=7)
    per_topic = Counter(m.topic for m in budget)
    assert set(per_topic.values()) == {2}
    per_pair = Counter(frozenset((m.first, m.second)) for m in budget)
    assert len(per_pair) == 6 and max(per_pair.values()) - min(per_pair.values()) <= 1  # 18 / 6 = 3 each
    assert budget == schedule(topics, pairs_per_topic=2, seed=7)  # seeded
    firsts = Counter(m.first for m in full)
    assert len(firsts) == 4 and schedule(topics, seed=1) != full  # the shown-first cell is drawn, not fixed


def _j(topic: str, pair: int, order: int, a: str, b: str, verdict: str | None) -> Judgment:
    return Judgment(topic, pair, order, a, b, verdict)


def test_order_rates_by_hand():
    judgments = [
        _j("q1", 0, 1, "x", "y", "A"), _j("q1", 0, 2, "y", "x", "B"),      # x both times: consistent
        _j("q1", 1, 1, "x", "z", "A"), _j("q1", 1, 2, "z", "x", "A"),      # first shown both times: flip
        _j("q2", 0, 1, "y", "z", "tie"), _j("q2", 0, 2, "z", "y", "tie"),  # tie both times: consistent
        _j("q2", 1, 1, "x", "y", "tie"), _j("q2", 1, 2, "y", "x", "A"),    # tie once: partial
        _j("q3", 0, 1, "x", "y", None), _j("q3", 0, 2, "y", "x", "B"),     # unparseable: not a pair
    ]
    rates = order_rates(judgments)
    assert rates["unparseable"] == 1 and rates["n_parsed"] == 9
    assert rates["tie_rate"] == pytest.approx(3 / 9)
    assert rates["n_pairs_both_parsed"] == 4
    assert rates["self_consistency"] == pytest.approx(2 / 4)
    assert rates["position_bias_rate"] == pytest.approx(1 / 4)
    assert rates["partial_flip_rate"] == pytest.approx(1 / 4)
    assert rates["first_shown_wins"] == pytest.approx(4 / 6)  # A in 4 of the 6 decisive verdicts


def test_rate_intervals_cover_and_elo_in_recorded_order():
    judgments = [_j(f"q{t}", 0, o, a, b, v) for t in range(6)
                 for o, a, b, v in ((1, "x", "y", "A"), (2, "y", "x", "B" if t % 3 else "tie"))]
    ratings = rate(["x", "y"], judgments, Settings(bootstrap=200, seed=1))
    x, y = ratings.rows()[0], ratings.rows()[1]
    assert x["cell"] == "x" and x["wins"] == 10 and x["ties"] == 2 and y["losses"] == 10
    assert x["rating_lo"] <= x["rating"] <= x["rating_hi"] and y["rating_lo"] <= y["rating"] <= y["rating_hi"]
    expected = elo_ratings(["x", "y"], [(j.cell_a, j.cell_b, j.score_a) for j in judgments])
    assert x["elo"] == expected["x"] and x["elo"] > 1000 > y["elo"]
    one = rate(["x", "y"], judgments[:2], Settings(bootstrap=50))
    assert one.ci_reason and math.isnan(one.rows()[0]["rating_lo"])  # one topic: no interval, and why


# -- end to end -----------------------------------------------------------------------------------------------
#: per cell and topic: the answer (the scripted judge prefers more words), the judge's correctness and the nugget
#: score (for the agreement table); c2's q0 answer makes the judge ramble when it is shown first
ANSWERS = {"c0": ["good good good", "good good good", "good good"],
           "c1": ["good good", "good good", "good good"],
           "c2": ["mumble", "good", "good good"]}
CORRECTNESS = {"c0": [2, 2, 1], "c1": [1, 2, 1], "c2": [0, 0, 1]}
VITAL = {"c0": [1.0, 0.5, 0.5], "c1": [0.5, 0.5, 0.0], "c2": [0.0, 0.5, 0.0]}
QUESTIONS = ["What is fact zero?", "Which fact is biased?", "What is fact two?"]


def make_sweep(root: Path, llm: dict | None = None) -> Path:
    """A finished 3-cell sweep (Hydra's cell folders) with 3 topics; `llm`: the cells' saved engine config."""
    sweep = root / "multirun" / "2026-01-01" / "10-00-00"
    for n, cell_name in enumerate(ANSWERS):
        cell = sweep / f"{n}_generator={cell_name}"
        (cell / ".hydra").mkdir(parents=True)
        (cell / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"generator={cell_name}"]))
        rows = [{"id": f"q{t}", "question": QUESTIONS[t], "answer": ANSWERS[cell_name][t], "hop": "single",
                 "judges": {"liverag": {"correctness": CORRECTNESS[cell_name][t], "attempts": 1}},
                 "nuggets": {"vital_strict": VITAL[cell_name][t]}} for t in range(3)]
        atomic_write_jsonl(cell / "answers.jsonl", rows)
        (cell / "config.json").write_text(json.dumps({"paths": {"cache_dir": str(root / "cache")}, "seed": 0,
                                                      **({"llm": llm} if llm else {})}))
        (cell / "metrics.json").write_text(json.dumps({"judge/liverag/correctness/all": sum(CORRECTNESS[cell_name]) / 3,
                                                       "nuggets/vital_strict/all": sum(VITAL[cell_name]) / 3}))
    return sweep


def respond(request: LLMRequest) -> str:
    """The scripted judge: the response with more words wins, equal length ties; on the "biased" question it always
    picks Response A; a Response A of "mumble" gets a reply without a verdict."""
    text = prompt_text(request)
    a = re.search(r"Response A:\n(.*?)\n\nResponse B:", text, re.S).group(1)
    b = re.search(r"Response B:\n(.*?)\n\nBriefly", text, re.S).group(1)
    if a == "mumble":
        return "Hard to say, both have merits."
    if "biased" in text:
        return json.dumps({"explanation": "the first one", "verdict": "A"})
    verdict = "A" if len(a.split()) > len(b.split()) else "B" if len(b.split()) > len(a.split()) else "tie"
    return json.dumps({"explanation": "more detail", "verdict": verdict})


def expected_verdict(topic: str, a: str, b: str) -> str | None:
    t = int(topic[1:])
    shown_a, shown_b = ANSWERS[a][t], ANSWERS[b][t]
    if shown_a == "mumble":
        return None
    if t == 1:
        return "A"
    la, lb = len(shown_a.split()), len(shown_b.split())
    return "A" if la > lb else "B" if lb > la else "tie"


def test_sweep_battles_end_to_end_scripted(tmp_path):
    sweep = make_sweep(tmp_path)
    cache = ResponseCache(tmp_path / "responses")
    engine = ScriptedEngine(respond, cache=cache)
    outcome = run_battles(sweep, engine, BattleJudge(max_retries=1), seed=3, settings=Settings(bootstrap=100))
    cells = [c.name for c in sorted(sweep.iterdir()) if (c / "answers.jsonl").is_file()]
    c0, c1, c2 = cells

    recorded = read_jsonl(sweep / "battles" / "battles.jsonl")
    assert len(recorded) == 3 * 3 * 2  # topics x pairs x both orders
    for row in recorded:
        assert row["verdict"] == expected_verdict(row["topic"], row["cell_a"].split("=")[1],
                                                  row["cell_b"].split("=")[1])
        assert row["winner"] == {"A": row["cell_a"], "B": row["cell_b"], "tie": "tie", None: None}[row["verdict"]]
    for asked in engine.batches[0]:  # identities hidden: no cell name in any prompt
        assert not any(name in prompt_text(asked) or name.split("=")[1] in prompt_text(asked).split()
                       for name in cells)
    pairs = {}
    for row in recorded:
        pairs.setdefault((row["topic"], row["pair"]), {})[row["order"]] = row
    assert all({p[1]["cell_a"], p[1]["cell_b"]} == {p[2]["cell_a"], p[2]["cell_b"]} and
               p[1]["cell_a"] == p[2]["cell_b"] for p in pairs.values())  # each pair in both orders

    # the rates, recomputed from the recorded verdicts
    parsed = [r for r in recorded if r["verdict"] is not None]
    both = [(p[1], p[2]) for p in pairs.values() if p[1]["verdict"] and p[2]["verdict"]]
    data = json.loads((sweep / "battles" / "ratings.json").read_text())
    rates = data["rates"]
    assert rates["unparseable"] == len(recorded) - len(parsed) == 2  # c2's "mumble" shown first, twice
    assert rates["tie_rate"] == pytest.approx(sum(r["verdict"] == "tie" for r in parsed) / len(parsed))
    assert rates["position_bias_rate"] == pytest.approx(
        sum(x["verdict"] == y["verdict"] != "tie" for x, y in both) / len(both))
    assert rates["self_consistency"] == pytest.approx(sum(x["winner"] == y["winner"] for x, y in both) / len(both))
    assert rates["position_bias_rate"] > 0 and rates["tie_rate"] > 0
    assert data["judge"]["prompt_source"].startswith("TREC RAG 2026")

    # ratings: the cell with the longest answers first; intervals around the estimates; Elo beside them
    with open(sweep / "battles" / "ratings.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["cell"] for r in rows][0] == c0 and [r["cell"] for r in rows][-1] == c2
    for r in rows:
        assert float(r["rating_lo"]) <= float(r["rating"]) <= float(r["rating_hi"])
        assert float(r["elo"]) != 1000
    assert sum(int(r["wins"]) for r in rows) == sum(int(r["losses"]) for r in rows)
    assert outcome.ratings[""].fit.tie_parameter > 0  # one question set (""): Davidson's nu, fitted from the ties

    # the agreement table gains the battle ranking; summary.md says so
    from eval.summary import summarize

    summary = summarize(sweep, wandb=False, n_boot=50)
    assert SCORE in summary.agreement.rows
    with open(sweep / "agreement.csv") as handle:
        table = {(r["eval_a"], r["eval_b"]): r for r in csv.DictReader(handle)}
    cell = table[(SCORE, "nuggets/vital_strict")]
    points: dict[str, dict[str, list[float]]] = {}
    for r in parsed:
        s = {"A": 1.0, "tie": 0.5, "B": 0.0}[r["verdict"]]
        points.setdefault(r["cell_a"], {}).setdefault(r["topic"], []).append(s)
        points.setdefault(r["cell_b"], {}).setdefault(r["topic"], []).append(1 - s)
    means = [np.mean([np.mean(v) for v in points[c].values()]) for c in cells]
    vital = [np.mean(VITAL[c.split("=")[1]]) for c in cells]
    assert float(cell["tau_b"]) == pytest.approx(kendalltau(means, vital).statistic, abs=1e-12)
    assert cell["n_runs"] == "3" and cell["n_topics"] == "3"
    # the topic means order the cells as the Bradley-Terry ratings do (every pair judged on every topic)
    assert sorted(cells, key=lambda c: -means[cells.index(c)]) == [r["cell"] for r in rows]
    md = (sweep / "summary.md").read_text()
    assert "battles/score" in md and "Battles (18 judgments" in md and "position-bias rate" in md

    # a rerun resumes from the response cache: nothing asked again
    again = ScriptedEngine(respond, cache=cache)
    run_battles(sweep, again, BattleJudge(max_retries=1), seed=3, settings=Settings(bootstrap=100))
    assert again.batches == []
    assert [j.to_json() for j in read_judgments(sweep)] == recorded


def test_command_line_with_instant_endpoint(tmp_path, capsys):
    """`python -m eval.battles SWEEP` as eval/README.md writes it, the judge being the cells' own llm: an
    OpenAI-compatible server (the instant endpoint answers the schema's first verdict, A, every time: a judge with
    total position bias). Then any engine config by override, and a balanced budget of pairs."""
    with InstantEndpoint() as endpoint:
        llm = {"_target_": "rag.llm.openai_compat.OpenAICompatibleEngine", "model": "instant",
               "base_url": endpoint.url, "api_key_env": None, "max_retries": 0}
        sweep = make_sweep(tmp_path, llm)
        done = subprocess.run([sys.executable, "-m", "eval.battles", str(sweep)], cwd=REPO, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "position-bias rate 100.0%" in done.stdout and "tie rate 0.0%" in done.stdout

        def chats() -> int:
            return len([r for r in endpoint.requests if r["path"].endswith("/chat/completions")])

        assert chats() == 3 * 3 * 2  # 3 topics, every pair of 3 cells, both orders
        assert main([str(sweep), "--bootstrap", "40"]) == 0  # resumed from the response cache
        assert chats() == 18
        recorded = read_judgments(sweep)
        assert len(recorded) == 18 and {j.verdict for j in recorded} == {"A"}
        data = json.loads((sweep / "battles" / "ratings.json").read_text())
        assert data["rates"]["position_bias_rate"] == 1.0 and data["rates"]["self_consistency"] == 0.0
        assert data["judge"]["model"] == "instant" and data["judge"]["llm"]["base_url"] == endpoint.url
        assert (tmp_path / "cache").is_dir()  # the cells' cache_dir holds the responses
        # every cell won as often as it lost: the battle ranking is flat, and the agreement table says so
        with open(sweep / "agreement.csv") as handle:
            rows = [r for r in csv.DictReader(handle) if r["eval_a"] == SCORE]
        assert rows and all(r["reason"].startswith("constant: battles/score") for r in rows)

        assert main([str(sweep), "llm=openai_compatible", f"llm.base_url={endpoint.url}", "llm.model=instant",
                     "--pairs-per-topic", "2", "--bootstrap", "40", "--no-summary"]) == 0
        data = json.loads((sweep / "battles" / "ratings.json").read_text())
        assert len(read_judgments(sweep)) == 3 * 2 * 2 and data["schedule"]["pairs_per_topic"] == 2
    assert "judgments" in capsys.readouterr().out


def test_a_sweep_that_battles_at_its_end_has_the_ranking_in_its_summary_report_and_wandb_table(tmp_path, monkeypatch):
    """`hydra.callbacks.sweep_summary.battles=true`: when the multirun ends, `python -m eval.battles SWEEP
    --no-summary` runs (a child process) before the summary, so summary.md, the agreement table and the report (a
    ratings figure, a table equal to ratings.csv, report.md's section) have the battle ranking, and the W&B payload
    its table. The judge: the instant endpoint (always "A"), the cells' own llm."""
    from omegaconf import OmegaConf

    from eval.sweep_callback import SweepSummaryCallback
    from rag.report.build import load_report
    from rag.report.wandb_report import report_payload

    with InstantEndpoint() as endpoint:
        llm = {"_target_": "rag.llm.openai_compat.OpenAICompatibleEngine", "model": "instant",
               "base_url": endpoint.url, "api_key_env": None, "max_retries": 0}
        sweep = make_sweep(tmp_path, llm)
        callback = SweepSummaryCallback(wandb=False, bootstrap=10, battles=True,
                                        battles_overrides=["battle.bootstrap=40"])
        callback.on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}}))
        assert len([r for r in endpoint.requests if r["path"].endswith("/chat/completions")]) == 18
    data = json.loads((sweep / "battles" / "ratings.json").read_text())
    assert data["ratings"]["bootstrap"] == 40 and data["rates"]["position_bias_rate"] == 1.0
    assert "Battles (18 judgments" in (sweep / "summary.md").read_text()
    with open(sweep / "agreement.csv") as handle:
        assert any(r["eval_a"] == SCORE for r in csv.DictReader(handle))
    report = load_report(sweep)
    with open(sweep / "battles" / "ratings.csv") as handle:
        written = list(csv.DictReader(handle))
    assert [r["cell"] for r in report.tables["battles"]] == [r["cell"] for r in written]
    for mine, theirs in zip(report.tables["battles"], written):
        assert mine["rating"] == pytest.approx(float(theirs["rating"]))
        assert mine["rating_lo"] == pytest.approx(float(theirs["rating_lo"]))
        assert (mine["wins"], mine["ties"], mine["losses"]) == (int(theirs["wins"]), int(theirs["ties"]),
                                                                 int(theirs["losses"]))
    assert (report.dir / "battles.png").is_file() and "battles" not in report.skipped
    md = (report.dir / "report.md").read_text()
    assert "## Battles: ratings with intervals" in md and "position-bias rate 100.0%" in md
    assert "report/battles_table" in report_payload(sweep) and "report/battles" in report_payload(sweep)


def test_a_report_without_battles_says_how_to_get_them(tmp_path):
    from rag.report.build import build_report

    report = build_report(make_sweep(tmp_path), formats=("png",), n_boot=10)
    assert report.skipped["battles"].startswith("no battles in the sweep folder (python -m eval.battles SWEEP")


def test_command_line_errors_are_one_line(tmp_path, capsys):
    assert main([str(tmp_path / "nowhere"), "llm=openai_compatible"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nowhere" in err
    sweep = make_sweep(tmp_path)
    assert main([str(sweep), "llm=openai_compatible", "battle.tie_model=elo"]) == 2
    assert "battle.tie_model='elo'" in capsys.readouterr().err
