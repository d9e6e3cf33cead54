"""System-by-system battles over a sweep: an LLM judge compares two cells' answers per topic, ties allowed.

TREC RAG 2026 evaluates RAG responses by battles (TREC-RAG/trec-rag-skills,
`skills/trec-rag-2026-track-guidelines/references/rag-task.md`, "Evaluation: System-by-System Battles"): per topic,
two systems' responses side by side, identities hidden, presentation order randomized, the better one or a tie.
This runs that protocol over a finished sweep's complete cells, with the project's engines:

1. schedule: per topic (question id), every pair of the cells that answered it, or `pairs_per_topic` pairs of a
   balanced schedule (the pair list shuffled once with `seed`, topic k taking the next N pairs round-robin, so every
   pair is judged floor or ceil of topics * N / pairs times); which cell is shown first is drawn with `seed`. A
   sweep over several question sets (`dataset=hotpotqa,musique`: `rag.sweep.question_sets`) is scheduled and rated
   within each set, since cells that share no topic never meet and Bradley-Terry strengths of two unconnected
   groups have no common origin; a cell alone in its set is listed as unrated;
2. judge: every pair in BOTH orders (A/B, then swapped), the prompt `eval/prompts/battle.yaml` (no cell names in
   it), one batch through the engine's response cache (`rag.llm.cache.ResponseCache`, so a rerun resumes), re-asks of
   unparseable verdicts (`rag.llm.asking.ask_with_retries`); a verdict still unparseable is recorded as null with
   its raw text and counted in every output, never read as a tie;
3. ratings: Bradley-Terry log-strengths fitted by maximum likelihood with a tie model (`TIE_MODELS`), on Chatbot
   Arena's scale (1000 + 400 * log10 strength, centred), with percentile intervals from a bootstrap over topics;
   Elo as ragnarok defines it beside them (`elo_ratings`); the tie rate, the position-bias rate and the judge's
   self-consistency across the two orders (`order_rates`);
4. write `SWEEP/battles/battles.jsonl` (one line per judgment, with its question set), `ratings.csv` and `ratings.json`
   (ranks within each set, a `questions` column naming it), atomically, and the
   sweep summary again, whose agreement table then has the battle ranking (`battles/score`) as one more evaluation.

Ties in Bradley-Terry. `davidson` (the default; R. R. Davidson, "On extending the Bradley-Terry model to accommodate
ties in paired comparison experiments", JASA 65, 1970): P(i beats j) = pi_i / D, P(tie) = nu sqrt(pi_i pi_j) / D,
D = pi_i + pi_j + nu sqrt(pi_i pi_j). Its sufficient statistic for a cell's strength is its points, wins + ties / 2:
exactly how ragnarok's Elo (`BattleResult.get_score`: a tie is 0.5) and Chatbot Arena's Bradley-Terry fit (a tie
counted as half a win for each side) score a tie, so the ranking follows theirs, while the tie probability nu is
fitted rather than assumed and the likelihood stays a proper one (the intervals see the ties as ties). `rao_kupper`
(P. V. Rao & L. L. Kupper, JASA 62, 1967: P(i beats j) = pi_i / (pi_i + theta pi_j), theta >= 1) is the other
published model; `half_win` is Chatbot Arena's reading (a plain Bradley-Terry likelihood on points). Without any tie
the three are the same Bradley-Terry fit. `ridge` (choix's `alpha`: ridge * sum(log-strength^2)) keeps ratings
finite when a cell wins or loses every battle (Ford's 1957 condition for a finite MLE fails); 0 is the plain MLE.

Elo follows castorini/ragnarok: `docs/elo.md` (the Elo leaderboard; it defines the rating as Wikipedia's Elo
system) and its implementation `src/ragnarok/api/elo.py`: every rating starts at INIT_RATING = 1000, expected score
E_a = 1 / (1 + 10^((R_b - R_a) / 400)), update R_a += K (S_a - E_a), R_b += K (1 - S_a - E_b) with K = 5, S_a = 1
(A wins), 0.5 (tie), 0 (B wins), one battle at a time in the order they happened; here that is battles.jsonl's order
(topics in sweep order, the schedule's pairs, the first presentation before the swapped one), A the answer shown
first. ragnarok's eligibility rules (an LLM, retrieval or whole-RAG leaderboard by which settings differ) split one
arena into three; a sweep's cells are compared as whole RAG systems, one leaderboard.

    python -m eval.battles SWEEP                          # the first complete cell's llm judges every pair
    python -m eval.battles SWEEP llm=gemma3_27b --pairs-per-topic 3 --tie-model rao_kupper
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import logging
import math
import random
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize

from eval.battle_files import (
    BATTLES_DIR,
    BATTLES_FILE,
    RATINGS_CSV,
    RATINGS_JSON,
    TIE,
    VERDICTS,
    Judgment,
    topic_scores,
)
from eval.judges import EVAL_PROMPT_DIR, cut_text
from rag.core.errors import ONE_LINE_ERRORS, ConfigError, DataError
from rag.core.io import atomic_write_json, atomic_write_jsonl, atomic_write_text
from rag.core.parsing import extract_json_object, normalise_quotes
from rag.llm.asking import ask_with_retries, make_params
from rag.llm.base import LLMEngine, LLMRequest
from rag.metrics.stats import percentile_ci, too_few_units
from rag.prompts import load_prompt
from rag.records import AnswerRecord

log = logging.getLogger(__name__)

TIE_MODELS = ("davidson", "rao_kupper", "half_win")
#: why a cell has no rating: ratings.json's `unrated` entries
UNRATED_REASON = "no other cell answered its questions (alone in its question set): nothing to battle"
DEFAULT_TIE_MODEL = "davidson"
#: ragnarok's Elo (src/ragnarok/api/elo.py): BASE, SCALE, INIT_RATING, K; Chatbot Arena's rating scale too
ELO_BASE = 10.0
ELO_SCALE = 400.0
ELO_INIT = 1000.0
ELO_K = 5.0


# -- verdicts -------------------------------------------------------------------------------------------------
_TIE_WORDS = {"tie", "tied", "draw", "equal", "equally good", "same", "neither", "both", "both equal", "c"}
_LABEL = re.compile(r"^(?:response|answer|assistant|system|option)?\s*\[?\[?\(?([ab])\)?\]?\]?$")
_VERDICT_LINE = re.compile(r"(?:final\s+)?(?:verdict|winner|preference|decision|better(?:\s+response)?)"
                           r"[\"'*\s]*[:=][\"'*\s]*([^\n\"'*.,;]+)", re.IGNORECASE)
_BRACKETS = re.compile(r"\[\[\s*(A|B|C|tie)\s*\]\]", re.IGNORECASE)


def normalise_verdict(value: Any) -> str | None:
    """One of `VERDICTS` from a label as a judge writes it ("A", "Response B", "[[A]]", "Tie", "draw"); None else."""
    if not isinstance(value, str):
        return None
    text = " ".join(value.strip().lower().replace("_", " ").split()).strip(".!")
    if text in _TIE_WORDS or text.startswith(("tie", "neither", "both")):
        return TIE
    match = _LABEL.match(text)
    return match.group(1).upper() if match else None


def parse_verdict(text: str) -> str | None:
    """The verdict of a reply: the JSON object's `verdict` (or `winner` / `preference`), else a `verdict: X` line,
    else MT-Bench's `[[A]]` / `[[B]]` / `[[C]]` (tie), else a reply that is only a label. None when unreadable or
    contradictory (two different bracketed verdicts): never guessed."""
    text = normalise_quotes(text or "")
    obj = extract_json_object(text)
    if obj is not None:
        lowered = {str(k).lower(): v for k, v in obj.items()}
        for key in ("verdict", "winner", "preference", "better"):
            if key in lowered:
                return normalise_verdict(lowered[key])
    line = _VERDICT_LINE.search(text)
    if line:
        found = normalise_verdict(line.group(1))
        if found:
            return found
    brackets = {normalise_verdict(m) for m in _BRACKETS.findall(text)}
    if len(brackets) == 1:
        return brackets.pop()
    return normalise_verdict(text)


# -- schedule -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Matchup:
    """One scheduled pair on one topic; `first` is shown as A in the first presentation, B in the second."""

    topic: str
    pair: int
    first: str
    second: str
    #: the question set's label (`rag.sweep.question_sets`; "" when the sweep answered one)
    questions: str = ""


def schedule(topics: Mapping[str, Sequence[str]], pairs_per_topic: int | None = None,
             seed: int = 0, questions: str = "") -> list[Matchup]:
    """The matchups of one question set (`questions`, its label): per topic (in the given order) every pair of the
    cells that answered it, or `pairs_per_topic` pairs of a balanced schedule. Which cell is shown first is drawn
    with `seed` (`random.Random`)."""
    if pairs_per_topic is not None and pairs_per_topic < 1:
        raise ConfigError(f"battle.pairs_per_topic={pairs_per_topic}: at least 1 (or null: every pair)")
    rng = random.Random(seed)
    cells = list(dict.fromkeys(c for answered in topics.values() for c in answered))
    every = list(itertools.combinations(cells, 2))
    rng.shuffle(every)
    out: list[Matchup] = []
    cursor = 0
    for topic, answered in topics.items():
        here = set(answered)
        available = [p for p in every if p[0] in here and p[1] in here]
        if pairs_per_topic is None or pairs_per_topic >= len(available):
            chosen = sorted(available, key=lambda p: (cells.index(p[0]), cells.index(p[1])))
        else:  # round-robin over the shuffled pair list: pair counts differ by at most one across the sweep
            chosen = []
            while len(chosen) < pairs_per_topic:
                pair = every[cursor % len(every)]
                cursor += 1
                if pair in available and pair not in chosen:
                    chosen.append(pair)
        for index, (x, y) in enumerate(chosen):
            first, second = (x, y) if rng.random() < 0.5 else (y, x)
            out.append(Matchup(topic, index, first, second, questions))
    return out


@dataclass
class BattleJudge:
    """The battle judge: its prompt file, sampling settings and re-asks; the engine is passed in."""

    prompt: str = "battle"
    prompt_dir: str | None = None
    params: dict[str, Any] = field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 256})
    max_retries: int = 2
    retry_temperature: float = 0.2
    max_answer_chars: int | None = 6000
    max_explanation_chars: int = 400

    def schema(self) -> dict[str, Any]:
        """The reply's JSON schema (where the engine takes one): the explanation first, then the verdict."""
        return {"type": "object", "additionalProperties": False, "required": ["explanation", "verdict"],
                "properties": {"explanation": {"type": "string", "maxLength": self.max_explanation_chars},
                               "verdict": {"type": "string", "enum": list(VERDICTS)}}}

    def request(self, engine: LLMEngine, question: str, answer_a: str, answer_b: str) -> LLMRequest:
        template = load_prompt(self.prompt, prompt_dir=str(self.prompt_dir or EVAL_PROMPT_DIR))
        shown = [cut_text(a, self.max_answer_chars) or "(no answer)" for a in (answer_a, answer_b)]
        return LLMRequest(messages=template.messages(question=question, answer_a=shown[0], answer_b=shown[1]),
                          params=make_params(self.params, engine, self.schema()), stop_plain=template.stop_plain)

    def judge(self, engine: LLMEngine, matchups: Sequence[Matchup],
              answers: Mapping[str, Mapping[str, AnswerRecord]]) -> list[Judgment]:
        """Both presentations of every matchup, in one batch (plus batched re-asks); `answers[cell][topic]`."""
        shown: list[tuple[Matchup, int, str, str]] = []
        for m in matchups:
            shown += [(m, 1, m.first, m.second), (m, 2, m.second, m.first)]
        requests = [self.request(engine, answers[a][m.topic].question, answers[a][m.topic].answer,
                                 answers[b][m.topic].answer) for m, _o, a, b in shown]
        asked = ask_with_retries(engine, requests, lambda _i, text: parse_verdict(text), self.max_retries,
                                 self.retry_temperature, desc="battles")
        return [Judgment(m.topic, m.pair, order, a, b, got.value, got.attempts, got.raw, m.questions)
                for (m, order, a, b), got in zip(shown, asked)]


# -- Bradley-Terry with ties ----------------------------------------------------------------------------------
@dataclass
class Fit:
    """A Bradley-Terry fit: centred log-strengths per item and the tie parameter (Davidson's nu, Rao-Kupper's
    theta; 0 / 1 without ties, None for half_win)."""

    theta: np.ndarray
    tie_parameter: float | None
    model: str
    nll: float
    converged: bool

    @property
    def ratings(self) -> np.ndarray:
        """On the Elo scale Chatbot Arena reports Bradley-Terry on: 1000 + 400 * log10(strength), centred."""
        return ELO_INIT + ELO_SCALE / math.log(ELO_BASE) * (self.theta - self.theta.mean())


def _counts(n: int, games: Iterable[tuple[int, int, float]]) -> tuple[np.ndarray, np.ndarray]:
    """W[i, j]: battles i won against j; T[i, j] (i < j): ties between them."""
    wins, ties = np.zeros((n, n)), np.zeros((n, n))
    for i, j, s in games:
        if i == j:
            raise ValueError(f"a battle of item {i} against itself")
        if s == 1.0:
            wins[i, j] += 1
        elif s == 0.0:
            wins[j, i] += 1
        elif s == 0.5:
            ties[min(i, j), max(i, j)] += 1
        else:
            raise ValueError(f"a battle's score is 1, 0.5 or 0, got {s}")
    return wins, ties


def _nll(params: np.ndarray, n: int, wins: np.ndarray, ties: np.ndarray, model: str,
         ridge: float) -> tuple[float, np.ndarray]:
    """The penalised negative log-likelihood and its gradient; params = log-strengths (+ the tie parameter's log
    for davidson: log nu; rao_kupper: log(theta - 1))."""
    theta = params[:n]
    iu, ju = np.triu_indices(n, 1)
    w_ij, w_ji, t = wins[iu, ju], wins[ju, iu], ties[iu, ju]
    total = w_ij + w_ji + t
    keep = total > 0
    iu, ju, w_ij, w_ji, t, total = iu[keep], ju[keep], w_ij[keep], w_ji[keep], t[keep], total[keep]
    d = theta[iu] - theta[ju]
    grad = np.zeros_like(params)
    if model == "half_win":
        s_ij, s_ji = w_ij + t / 2, w_ji + t / 2
        value = -np.sum(-s_ij * np.logaddexp(0, -d) - s_ji * np.logaddexp(0, d))
        dd = -(s_ij - total / (1 + np.exp(-d)))
    elif model == "davidson":
        a = d / 2
        log_nu = params[n] if len(params) > n else -np.inf
        log_s = np.logaddexp(np.logaddexp(a, -a), log_nu)
        p_i, p_j, p_t = np.exp(a - log_s), np.exp(-a - log_s), np.exp(log_nu - log_s)
        value = -np.sum(w_ij * (a - log_s) + w_ji * (-a - log_s) + (t * (log_nu - log_s) if len(params) > n else 0))
        dd = -(w_ij - w_ji - total * (p_i - p_j)) / 2
        if len(params) > n:
            grad[n] = -np.sum(t - total * p_t)
    elif model == "rao_kupper":  # in logs throughout: far from the optimum nothing under- or overflows
        tied = len(params) > n
        eta = params[n] if tied else -np.inf
        log_c = np.logaddexp(0, eta)  # c = 1 + e^eta >= 1
        log_pi, log_pj = -np.logaddexp(0, log_c - d), -np.logaddexp(0, log_c + d)
        p_i, p_j = np.exp(log_pi), np.exp(log_pj)
        value = -np.sum(w_ij * log_pi + w_ji * log_pj)
        dd = -(w_ij * (1 - p_i) - w_ji * (1 - p_j))
        if tied:  # P(tie) = (c^2 - 1) / ((e^d + c) (e^-d + c)); log(c^2 - 1) = eta + log(2 + e^eta)
            log_pt = eta + np.logaddexp(np.log(2.0), eta) - np.logaddexp(d, log_c) - np.logaddexp(-d, log_c)
            value -= np.sum(t * log_pt)
            dd = dd - t * (p_j - p_i)
            dl = 1 / (1 + np.exp(-eta))  # d log c / d eta
            dpt = 1 + 1 / (1 + 2 * np.exp(-eta)) - (2 - p_i - p_j) * dl
            grad[n] = -np.sum(-w_ij * (1 - p_i) * dl - w_ji * (1 - p_j) * dl + t * dpt)
    else:
        raise ConfigError(f"battle.tie_model={model!r}: one of {', '.join(TIE_MODELS)}")
    np.add.at(grad, iu, dd)
    np.add.at(grad, ju, -dd)
    value += ridge * float(np.sum(theta ** 2))
    grad[:n] += 2 * ridge * theta
    return float(value), grad


def fit_bradley_terry(n: int, games: Iterable[tuple[int, int, float]], model: str = DEFAULT_TIE_MODEL,
                      ridge: float = 0.0) -> Fit:
    """Maximum-likelihood Bradley-Terry log-strengths of `n` items from battles (i, j, score of i: 1, 0.5, 0),
    ties by `model` (`TIE_MODELS`). L-BFGS-B with the analytic gradient; the log-strengths are centred (their
    scale has no origin). Without ties the tie parameter is fixed at "no ties" (Davidson's nu = 0, Rao-Kupper's
    theta = 1): their MLE sits on that boundary, and the fit is Bradley-Terry's."""
    if model not in TIE_MODELS:
        raise ConfigError(f"battle.tie_model={model!r}: one of {', '.join(TIE_MODELS)}")
    wins, ties = _counts(n, games)
    tied = model != "half_win" and ties.sum() > 0
    start = np.zeros(n + (1 if tied else 0))
    bounds = [(-50.0, 50.0)] * n + ([(-30.0, 30.0)] if tied else [])
    result = minimize(_nll, start, args=(n, wins, ties, model, ridge), jac=True, method="L-BFGS-B", bounds=bounds,
                      options={"maxiter": 10000, "ftol": 1e-12, "gtol": 1e-9})
    theta = result.x[:n] - result.x[:n].mean()
    tie_parameter: float | None = None
    if model == "davidson":
        tie_parameter = float(np.exp(result.x[n])) if tied else 0.0
    elif model == "rao_kupper":
        tie_parameter = float(1 + np.exp(result.x[n])) if tied else 1.0
    return Fit(theta, tie_parameter, model, float(result.fun), bool(result.success))


# -- Elo (ragnarok) -------------------------------------------------------------------------------------------
def elo_ratings(items: Sequence[str], games: Iterable[tuple[str, str, float]], k: float = ELO_K,
                init: float = ELO_INIT, base: float = ELO_BASE, scale: float = ELO_SCALE) -> dict[str, float]:
    """Online Elo as ragnarok's `compute_elo` (src/ragnarok/api/elo.py; docs/elo.md): games (a, b, S_a) in order,
    E_a = 1 / (1 + base^((R_b - R_a) / scale)), R_a += k (S_a - E_a), R_b += k (1 - S_a - E_b)."""
    rating = {item: float(init) for item in items}
    for a, b, s_a in games:
        ra, rb = rating[a], rating[b]
        e_a = 1 / (1 + base ** ((rb - ra) / scale))
        e_b = 1 / (1 + base ** ((ra - rb) / scale))
        rating[a] = ra + k * (s_a - e_a)
        rating[b] = rb + k * (1 - s_a - e_b)
    return rating


# -- rates ----------------------------------------------------------------------------------------------------
def order_rates(judgments: Sequence[Judgment]) -> dict[str, Any]:
    """What the two presentations of each pair say about the judge.

    Over judgments: `unparseable` (count and share), `tie_rate` (ties among parsed verdicts), `first_shown_wins`
    (share of decisive verdicts that chose Response A: 0.5 without a position preference). Over pairs with both
    verdicts parsed: `self_consistency` (the same outcome in cell terms both times: the same cell wins, or two
    ties), `position_bias_rate` (the winner flips with the order: the judge chose the same position twice) and
    `partial_flip_rate` (a tie in one order only); the three add up to 1.
    """
    parsed = [j for j in judgments if j.verdict is not None]
    decisive = [j for j in parsed if j.verdict != TIE]
    pairs: dict[tuple[str, int], dict[int, Judgment]] = {}
    for j in judgments:
        pairs.setdefault((j.topic, j.pair), {})[j.order] = j
    both = [(p[1], p[2]) for p in pairs.values() if 1 in p and 2 in p and p[1].verdict and p[2].verdict]
    same = sum(1 for x, y in both if x.winner == y.winner)
    flipped = sum(1 for x, y in both if TIE not in (x.verdict, y.verdict) and x.winner != y.winner)
    partial = len(both) - same - flipped

    def share(count: int, of: int) -> float | None:
        return count / of if of else None

    return {"n_judgments": len(judgments), "n_parsed": len(parsed), "unparseable": len(judgments) - len(parsed),
            "unparseable_share": share(len(judgments) - len(parsed), len(judgments)),
            "n_ties": len(parsed) - len(decisive), "tie_rate": share(len(parsed) - len(decisive), len(parsed)),
            "first_shown_wins": share(sum(1 for j in decisive if j.verdict == "A"), len(decisive)),
            "n_pairs": len(pairs), "n_pairs_both_parsed": len(both),
            "self_consistency": share(same, len(both)), "position_bias_rate": share(flipped, len(both)),
            "partial_flip_rate": share(partial, len(both))}


# -- ratings with intervals -----------------------------------------------------------------------------------
@dataclass
class Settings:
    """How ratings are fitted and their intervals drawn."""

    tie_model: str = DEFAULT_TIE_MODEL
    ridge: float = 1e-3
    bootstrap: int = 1000
    confidence: float = 0.95
    seed: int = 0


@dataclass
class Ratings:
    cells: list[str]
    fit: Fit
    #: cell -> (low, high) of the Bradley-Terry rating, and of Elo
    intervals: dict[str, tuple[float, float]]
    elo: dict[str, float]
    elo_intervals: dict[str, tuple[float, float]]
    record: dict[str, dict[str, int]]
    n_topics: int
    ci_reason: str = ""
    confidence: float = 0.95
    #: the question set these cells answered (`rag.sweep.question_sets`; "" when the sweep answered one)
    questions: str = ""

    def rows(self) -> list[dict[str, Any]]:
        """ratings.csv: one row per cell, best Bradley-Terry rating first."""
        order = sorted(range(len(self.cells)), key=lambda i: -self.fit.ratings[i])
        rows = []
        for rank, i in enumerate(order, start=1):
            cell = self.cells[i]
            lo, hi = self.intervals[cell]
            elo_lo, elo_hi = self.elo_intervals[cell]
            rows.append({"questions": self.questions, "rank": rank, "cell": cell,
                         "rating": float(self.fit.ratings[i]), "rating_lo": lo,
                         "rating_hi": hi, "log_strength": float(self.fit.theta[i]), "elo": self.elo[cell],
                         "elo_lo": elo_lo, "elo_hi": elo_hi, **self.record[cell]})
        return rows


def _games(judgments: Iterable[Judgment], index: Mapping[str, int]) -> list[tuple[int, int, float]]:
    return [(index[j.cell_a], index[j.cell_b], j.score_a) for j in judgments if j.score_a is not None]


def rate(cells: Sequence[str], judgments: Sequence[Judgment], settings: Settings | None = None,
         questions: str = "") -> Ratings:
    """Bradley-Terry (with `settings.tie_model`) and Elo ratings of `cells` (one question set's, `questions`), with
    percentile intervals from
    `settings.bootstrap` resamples of the topics (with replacement, seeded; a topic drawn twice counts twice; Elo
    replays each resample's battles in their drawn order)."""
    settings = settings or Settings()
    cells = list(cells)
    index = {c: i for i, c in enumerate(cells)}
    fit = fit_bradley_terry(len(cells), _games(judgments, index), settings.tie_model, settings.ridge)
    elo_games = [(j.cell_a, j.cell_b, j.score_a) for j in judgments if j.score_a is not None]
    elo = elo_ratings(cells, elo_games)
    record = {c: {"battles": 0, "wins": 0, "losses": 0, "ties": 0} for c in cells}
    for j in judgments:
        if j.winner is None:
            continue
        for cell in (j.cell_a, j.cell_b):
            record[cell]["battles"] += 1
            record[cell]["ties" if j.winner == TIE else "wins" if j.winner == cell else "losses"] += 1
    by_topic: dict[str, list[Judgment]] = {}
    for j in judgments:
        by_topic.setdefault(j.topic, []).append(j)
    topics = list(by_topic)
    nan2 = (math.nan, math.nan)
    ci_reason = too_few_units(len(topics), "topic")
    intervals = {c: nan2 for c in cells}
    elo_intervals = {c: nan2 for c in cells}
    if not ci_reason and settings.bootstrap > 0:
        rng = np.random.default_rng(settings.seed)
        boot, boot_elo = [], []
        for _ in range(settings.bootstrap):
            drawn = [j for t in rng.integers(0, len(topics), len(topics)) for j in by_topic[topics[t]]]
            boot.append(fit_bradley_terry(len(cells), _games(drawn, index), settings.tie_model,
                                          settings.ridge).ratings)
            replay = elo_ratings(cells, [(j.cell_a, j.cell_b, j.score_a) for j in drawn if j.score_a is not None])
            boot_elo.append([replay[c] for c in cells])
        samples, samples_elo = np.array(boot), np.array(boot_elo)
        intervals = {c: percentile_ci(samples[:, i].tolist(), settings.confidence) for i, c in enumerate(cells)}
        elo_intervals = {c: percentile_ci(samples_elo[:, i].tolist(), settings.confidence)
                         for i, c in enumerate(cells)}
    return Ratings(cells, fit, intervals, elo, elo_intervals, record, len(topics), ci_reason, settings.confidence,
                   questions)


# -- the sweep ------------------------------------------------------------------------------------------------
@dataclass
class BattleOutcome:
    sweep: Path
    cells: list[str]
    judgments: list[Judgment]
    #: question set label -> its ratings (one entry, "", when the sweep answered one set)
    ratings: dict[str, Ratings]
    rates: dict[str, Any]
    files: dict[str, Path] = field(default_factory=dict)
    #: cell -> its question set, for cells no other cell shares a topic with: nothing to battle, so no rating
    unrated: dict[str, str] = field(default_factory=dict)

    def rows(self) -> list[dict[str, Any]]:
        """ratings.csv's rows: each question set's cells, best first, sets in sweep order."""
        return [row for ratings in self.ratings.values() for row in ratings.rows()]


def sweep_answers(sweep_dir: str | Path) -> dict[str, dict[str, AnswerRecord]]:
    """Cell name -> topic -> record, over the sweep's complete cells with answers (`rag.sweep.cells.load_sweep`,
    `rag.folders.RunFolder.records`), in cell order."""
    return _sweep_answers(sweep_dir)[0]


def _sweep_answers(sweep_dir: str | Path) -> tuple[dict[str, dict[str, AnswerRecord]], dict[str, str]]:
    """`sweep_answers` and each of those cells' question set label (`rag.sweep.question_sets`)."""
    from rag.sweep.cells import load_sweep
    from rag.sweep.question_sets import question_sets

    sweep = load_sweep(sweep_dir)
    cells = [cell for cell in sweep.cells if cell.complete and cell.run.has_answers]
    labels = question_sets(cells)
    return {cell.name: {r.id: r for r in cell.run.records()} for cell in cells}, labels


def battle_topics(answers: Mapping[str, Mapping[str, AnswerRecord]]) -> dict[str, list[str]]:
    """Topic -> the cells that answered it, for topics at least two cells answered (in first-seen order)."""
    topics: dict[str, list[str]] = {}
    for cell, records in answers.items():
        for topic in records:
            topics.setdefault(topic, []).append(cell)
    return {t: c for t, c in topics.items() if len(c) >= 2}


def run_battles(sweep_dir: str | Path, engine: LLMEngine, judge: BattleJudge | None = None,
                pairs_per_topic: int | None = None, seed: int = 0, settings: Settings | None = None,
                source: Mapping[str, Any] | None = None) -> BattleOutcome:
    """Schedule, judge (both orders), rate and write SWEEP/battles/; `source` (the judge's engine config) is
    recorded in ratings.json."""
    sweep = Path(sweep_dir).expanduser().resolve()
    answers, labels = _sweep_answers(sweep)
    if len(answers) < 2:
        raise DataError(f"{sweep}: battles need at least two complete cells with answers, found {len(answers)}")
    by_set: dict[str, dict[str, dict[str, AnswerRecord]]] = {}
    for cell, records in answers.items():
        by_set.setdefault(labels.get(cell, ""), {})[cell] = records
    topics = {label: battle_topics(members) for label, members in by_set.items()}
    if not any(topics.values()):
        raise DataError(f"{sweep}: no topic was answered by two complete cells")
    judge = judge or BattleJudge()
    settings = settings or Settings(seed=seed)
    matchups = [m for label, on in topics.items() for m in schedule(on, pairs_per_topic, seed, label)]
    judgments = judge.judge(engine, matchups, answers)
    cells = list(answers)
    ratings = {label: rate(list(by_set[label]), [j for j in judgments if j.questions == label], settings, label)
               for label, on in topics.items() if on}
    alone = {cell: label for label, on in topics.items() if not on for cell in by_set[label]}
    if alone:
        log.warning("battles: %d cell(s) share no topic with another cell (alone in their question set), so they "
                    "are not rated: %s", len(alone), ", ".join(alone))
    rates = order_rates(judgments)
    if rates["unparseable"]:
        log.warning("battles: %d of %d verdicts unparseable after the re-asks: left out of the ratings, counted in "
                    "ratings.json", rates["unparseable"], rates["n_judgments"])
    outcome = BattleOutcome(sweep, cells, judgments, ratings, rates, unrated=alone)
    meta = {"judge": {"model": engine.model, "llm": dict(source or {}), "prompt": judge.prompt,
                      "prompt_source": load_prompt(judge.prompt, str(judge.prompt_dir or EVAL_PROMPT_DIR)).source,
                      "params": judge.params, "max_retries": judge.max_retries},
            "schedule": {"pairs_per_topic": pairs_per_topic, "seed": seed, "n_matchups": len(matchups),
                         "both_orders": True}}
    outcome.files = write(outcome, settings, meta)
    return outcome


def _blank(value: Any) -> Any:
    return "" if isinstance(value, float) and math.isnan(value) else value


def ratings_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """ratings.csv from `BattleOutcome.rows` (or one `Ratings.rows`)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: _blank(v) for k, v in row.items()} for row in rows)
    return buffer.getvalue()


def write(outcome: BattleOutcome, settings: Settings, meta: Mapping[str, Any]) -> dict[str, Path]:
    """battles.jsonl, ratings.csv and ratings.json in SWEEP/battles/, each written atomically."""
    out = outcome.sweep / BATTLES_DIR
    files = {"battles": out / BATTLES_FILE, "ratings_csv": out / RATINGS_CSV, "ratings_json": out / RATINGS_JSON}
    per_set = list(outcome.ratings.values())
    one = per_set[0] if len(per_set) == 1 else None
    atomic_write_jsonl(files["battles"], [j.to_json() for j in outcome.judgments])
    atomic_write_text(files["ratings_csv"], ratings_csv(outcome.rows()))
    atomic_write_json(files["ratings_json"], {
        "sweep": str(outcome.sweep), **meta,
        "ratings": {"tie_model": settings.tie_model, "tie_parameter": one.fit.tie_parameter if one else None,
                    "ridge": settings.ridge, "converged": all(r.fit.converged for r in per_set),
                    "bootstrap": settings.bootstrap, "confidence": settings.confidence, "seed": settings.seed,
                    "n_topics": sum(r.n_topics for r in per_set),
                    "ci_note": "; ".join(f"{r.questions}: {r.ci_reason}" if r.questions else r.ci_reason
                                         for r in per_set if r.ci_reason),
                    "scale": "1000 + 400 * log10(strength), centred",
                    "elo": {"k": ELO_K, "init": ELO_INIT, "base": ELO_BASE, "scale": ELO_SCALE,
                            "source": "castorini/ragnarok docs/elo.md, src/ragnarok/api/elo.py"}},
        "question_sets": [{"questions": r.questions, "cells": r.cells, "n_topics": r.n_topics,
                           "tie_parameter": r.fit.tie_parameter, "converged": r.fit.converged,
                           "ci_note": r.ci_reason} for r in per_set],
        "rates": outcome.rates,
        "cells": [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
                  for row in outcome.rows()],
        "unrated": [{"cell": cell, "questions": label, "reason": UNRATED_REASON}
                    for cell, label in outcome.unrated.items()],
        "topic_scores": topic_scores(outcome.judgments)})
    return files


def describe(outcome: BattleOutcome) -> str:
    """The terminal's lines: the ratings table and the judge's rates."""
    r = outcome.rates

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    per_set = list(outcome.ratings.values())
    lines = [f"{outcome.sweep}: {r['n_judgments']} judgments of {r['n_pairs']} pairs over "
             f"{sum(x.n_topics for x in per_set)} topics ({len(outcome.cells)} cells, both orders); "
             f"unparseable {r['unparseable']} ({pct(r['unparseable_share'])}), tie rate {pct(r['tie_rate'])}, "
             f"position-bias rate {pct(r['position_bias_rate'])}, self-consistency {pct(r['self_consistency'])}, "
             f"first shown wins {pct(r['first_shown_wins'])}"]
    for ratings in per_set:
        within = f" within {ratings.questions} ({ratings.n_topics} topics)" if ratings.questions else ""
        lines.append(f"Bradley-Terry ({ratings.fit.model}) and Elo (ragnarok){within}, "
                     f"{100 * ratings.confidence:.0f}% bootstrap intervals over topics"
                     f"{' (none: ' + ratings.ci_reason + ')' if ratings.ci_reason else ''}:")
        for row in ratings.rows():
            lines.append(f"  {row['rank']}. {row['cell']}: {row['rating']:.1f} [{row['rating_lo']:.1f}, "
                         f"{row['rating_hi']:.1f}]  elo {row['elo']:.1f}  W/L/T {row['wins']}/{row['losses']}/"
                         f"{row['ties']}")
    if outcome.unrated:
        lines.append(f"Not rated ({UNRATED_REASON}): {', '.join(outcome.unrated)}")
    lines.append("files: " + ", ".join(str(p) for p in outcome.files.values()))
    return "\n".join(lines)


# -- command line ---------------------------------------------------------------------------------------------
def compose_battles(overrides: Sequence[str]) -> Any:
    """conf/battles.yaml with Hydra-style overrides (the compose API, as eval.judge composes eval.yaml)."""
    from hydra import compose, initialize_config_dir

    conf = Path(__file__).resolve().parent.parent / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        return compose(config_name="battles", overrides=list(overrides))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.battles", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path, help="the sweep folder (Hydra multirun folder of cells)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of conf/battles.yaml (llm=..., battle.*=...)")
    parser.add_argument("--pairs-per-topic", type=int, default=None, help="a balanced schedule of N pairs per topic")
    parser.add_argument("--seed", type=int, default=None, help="schedule, presentation order and bootstrap seed")
    parser.add_argument("--bootstrap", type=int, default=None, help="resamples over topics for the intervals")
    parser.add_argument("--tie-model", choices=TIE_MODELS, default=None, help="Bradley-Terry's tie model")
    parser.add_argument("--no-summary", action="store_true", help="do not write the sweep summary again")
    args = parser.parse_intermixed_args(argv)  # overrides before or after the flags
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from omegaconf import OmegaConf

    from eval.main import complete_from_run, run_cache_dir
    from rag.core.secrets import redact, refuse_secret_arguments
    from rag.llm.factory import EngineFactory, to_plain

    flags = {"pairs_per_topic": args.pairs_per_topic, "seed": args.seed, "bootstrap": args.bootstrap,
             "tie_model": args.tie_model}
    try:
        refuse_secret_arguments(list(args.overrides))
        overrides = [*args.overrides, *(f"battle.{k}={v}" for k, v in flags.items() if v is not None)]
        try:
            cfg = compose_battles(overrides)
        except Exception as err:  # noqa: BLE001 - Hydra's errors for a bad override: one line
            raise ConfigError(f"overrides: {' '.join(str(err).split())}") from None
        answers = sweep_answers(args.sweep_dir)
        if not answers:
            raise DataError(f"{args.sweep_dir}: no complete cell with answers")
        first = Path(args.sweep_dir).expanduser().resolve() / next(iter(answers))
        cfg = complete_from_run(cfg, first)
        node = cfg.battle
        cache_dir = run_cache_dir(cfg, first)
        llm = to_plain(node.llm)
        judge = BattleJudge(prompt=str(node.prompt), prompt_dir=node.prompt_dir, params=dict(to_plain(node.params)),
                            max_retries=int(node.max_retries), retry_temperature=float(node.retry_temperature),
                            max_answer_chars=node.max_answer_chars,
                            max_explanation_chars=int(node.max_explanation_chars))
        settings = Settings(tie_model=str(node.tie_model), ridge=float(node.ridge), bootstrap=int(node.bootstrap),
                            confidence=float(node.confidence), seed=int(node.seed))
        if settings.tie_model not in TIE_MODELS:
            raise ConfigError(f"battle.tie_model={settings.tie_model!r}: one of {', '.join(TIE_MODELS)}")
        engines = EngineFactory(cache_dir, cache_enabled=bool(OmegaConf.select(cfg, "cache.llm_responses",
                                                                               default=True)))
        try:
            outcome = run_battles(args.sweep_dir, engines.get(node.llm), judge,
                                  None if node.pairs_per_topic is None else int(node.pairs_per_topic),
                                  int(node.seed), settings, source=redact(llm) if isinstance(llm, dict) else {})
        finally:
            engines.close()
        if node.summary and not args.no_summary:
            from eval.summary import summarize

            summary = summarize(outcome.sweep, wandb=False)
            outcome.files.update({f"summary {k}": v for k, v in summary.files.items()})
    except ONE_LINE_ERRORS as err:
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return 2
    print(describe(outcome), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
