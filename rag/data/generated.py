"""Questions of a generated folder: the DataMorgana TSV, keeping every category column the run wrote.

`DataMorganaQA` keeps only the LiveRAG dev set's category columns; a generated set may use other
categorizations (RAGtifier's Fig. 3), whose `question_*` / `user_*` columns this loader keeps as well.
"""

from __future__ import annotations

from rag.data.questions import DataMorganaQA
from rag.records import Question

NOT_CATEGORIES = {"question", "question_length"}


class GeneratedQA(DataMorganaQA):
    def load(self) -> list[Question]:
        questions = super().load()
        file = self.file()
        rows = self._rows_tsv(file) if ".tsv" in file.suffixes else self._rows_jsonl(file)
        extra = {}
        for _where, row in rows:
            qid = str(row.get("qid", row.get("id", ""))).strip()
            extra[qid] = {k: str(v) for k, v in row.items()
                          if k.startswith(("question_", "user_")) and k not in NOT_CATEGORIES and v not in (None, "")}
        for question in questions:
            question.categories = {**extra.get(question.id, {}), **question.categories}
        return questions
