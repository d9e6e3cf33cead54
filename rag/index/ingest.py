"""What ingestion into a service (OpenSearch, Pinecone) shares: batches, a journal of finished batches, ids.

A part's passages are cut into batches of `backend.batch_size` in corpus order, so batch b of a part is always
the same passages. After a batch is acknowledged its number goes to `<build>/ingest/<part>.jsonl` (appended and
fsynced): a killed or requeued task, or one that ended on a service error, resumes after the last finished
batch (nothing is sent twice, and what is sent twice is harmless: both services overwrite by id). The part's
ids are kept as for local indexes, so the merge refuses duplicate passage ids the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rag.core.io import JsonlJournal
from rag.index.plan import BuildFolder, Part
from rag.index.sources import SourcePassage
from rag.index.store import PartWriter

log = logging.getLogger(__name__)


def journal(folder: BuildFolder, part: Part) -> JsonlJournal:
    return JsonlJournal(folder.dir / "ingest" / f"{part.name}.jsonl")


def ingest_part(folder: BuildFolder, part: Part, tmp: Path, batches: Iterator[list[SourcePassage]],
                send: Callable[[list[SourcePassage]], None]) -> dict[str, Any]:
    """Send every batch the journal does not list as finished; return the part's counts."""
    log_ = journal(folder, part)
    finished = {int(row["batch"]) for row in log_.read()}
    writer = PartWriter(tmp, with_text=False)
    sent = skipped = 0
    for number, batch in enumerate(batches):
        for item in batch:
            writer.add(item)
        if number in finished:
            skipped += 1
            continue
        send(batch)
        log_.append([{"batch": number, "passages": len(batch), "first": batch[0].passage.passage_id,
                      "last": batch[-1].passage.passage_id}])
        sent += 1
    if skipped:
        log.info("%s: %d batch(es) already in the journal were not sent again", part.name, skipped)
    return {"passages": writer.close(), "batches_sent": sent, "batches_resumed": skipped}
