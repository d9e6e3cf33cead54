"""A query stage that writes queries for named retrieval sources (`query=rewrite | preqrag`: `query.sparse_source`,
`query.dense_source`) crossed with a fusion retriever (`retriever.sources`).

A query meant for a source the fusion lacks goes to every source (rag/retrieve/fusion.py, `routes`): that is how
the default names (sparse, dense) still search a fusion whose sources are named otherwise. When some of the query
stage's names are sources and another is not, the other is a typo (`query.sparse_source=bm25x` beside the fusion's
`sparse` and `dense`): its queries would silently search every source. The preflight refuses it in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the query settings that name a retrieval source
SOURCE_SETTINGS = ("sparse_source", "dense_source")


def unknown_query_sources(data: Mapping[str, Any]) -> str | None:
    """One line when the query stage names a source the fusion retriever lacks while naming others it has."""
    query, retriever = data.get("query"), data.get("retriever")
    if not isinstance(query, Mapping) or not isinstance(retriever, Mapping):
        return None
    sources = retriever.get("sources")
    if not isinstance(sources, Mapping) or not sources:
        return None
    named = {f"query.{key}": query[key] for key in SOURCE_SETTINGS if isinstance(query.get(key), str)}
    unknown = {setting: name for setting, name in named.items() if name not in sources}
    if not unknown or len(unknown) == len(named):
        return None
    settings = ", ".join(f"{setting}={name}" for setting, name in unknown.items())
    return (f"{settings}: retriever.sources has no such source (it has {', '.join(sources)}); its queries would "
            f"search every source. Name one of the fusion's sources")
