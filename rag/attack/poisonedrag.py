"""PoisonedRAG's black-box attack ("LM_targeted", Zou et al., USENIX Security 2025).

For each target question an incorrect target answer, then `texts_per_question` texts written by the attacker
LLM to support it in at most `words` words (their section 4.2), each drawn with its own seed so that the texts
differ; the planted passage is the question followed by the text (`CorpusAttack.passage`). Their released texts
came from GPT-4; ours come from `attack.llm`, a config choice.
"""

from __future__ import annotations

from typing import Any

from rag.attack.base import CORRECT, INCORRECT, QUESTION, CorpusAttack
from rag.core.text import first_words
from rag.llm.base import LLMEngine


class PoisonedRAG(CorpusAttack):
    name = "poisonedrag"
    option = "poisonedrag"
    texts_from_llm = True

    def __init__(self, words: int = 30, corpus_prompt: str = "poisonedrag_corpus", text_temperature: float = 0.7,
                 text_max_tokens: int = 80, **kwargs: Any):
        super().__init__(**kwargs)
        self.words, self.corpus_prompt = words, corpus_prompt
        self.text_temperature, self.text_max_tokens = text_temperature, text_max_tokens

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "words": self.words, "corpus_prompt": self._prompt_text(self.corpus_prompt),
                "text_temperature": self.text_temperature, "text_max_tokens": self.text_max_tokens}

    def _texts(self, rows: list[dict[str, Any]], engine: LLMEngine | None) -> list[list[str]]:
        assert engine is not None  # checked by the caller (`_need`)
        template = self.prompt(self.corpus_prompt)
        requests = [self._request(template, self.text_max_tokens, self.seed + j, self.text_temperature,
                                  question=row[QUESTION], target=row[INCORRECT], correct=row[CORRECT],
                                  words=self.words)
                    for row in rows for j in range(self.texts_per_question)]
        completions = engine.generate(requests, desc="attack poisonedrag: poison texts")
        out = []
        for i, row in enumerate(rows):
            texts = [first_words(c.text, self.words) or row[INCORRECT]
                     for c in completions[i * self.texts_per_question:(i + 1) * self.texts_per_question]]
            out.append(texts)
        return out


