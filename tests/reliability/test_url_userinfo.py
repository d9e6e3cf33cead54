"""Issue 52, row 1: URL userinfo of any shape is a credential.

A token as the user name (`http://TOKEN@host`, GitHub's way), a password alone (`http://:PASS@host`) and
percent-encoded userinfo reached `.hydra/`, config.json, main.log, run files, the response cache key, W&B files,
sweep folder names and the console, since the check needed `user:password@`. Now each is refused on the command
line (and in the composed config) in one line naming the setting and the variable to export instead, and the token
is in no file, folder name or console line.
"""

from __future__ import annotations

import pytest

from rag.core.secrets import mask_url, secret_arguments, value_problem
from tests.cluster.helpers import rag_env
from tests.reliability.test_no_secret_anywhere import _found, _run

TOKEN = "TOKEN123"
SHAPES = [f"http://{TOKEN}@127.0.0.1:9/v1", f"http://:{TOKEN}@127.0.0.1:9/v1", f"http://%54{TOKEN}%3Ax@127.0.0.1:9/v1",
          f"https://x-access-token:{TOKEN}@example.org/v1"]


@pytest.mark.parametrize("url", SHAPES)
def test_every_shape_of_userinfo_is_refused_and_masked(url):
    problem = value_problem("llm.base_url", url, variables={"api_key_env": "RAG_LLM_API_KEY"})
    assert problem and "RAG_LLM_API_KEY" in problem and TOKEN not in problem
    assert TOKEN not in mask_url(url) and "://***@" in mask_url(url)
    assert secret_arguments([f"backend.service.host={url}"])  # rag.index's service host too
    assert secret_arguments([f"backend.service.host={TOKEN}@search.example.org"])  # a bare host with a token
    assert not secret_arguments(["llm.base_url=http://127.0.0.1:9/v1", "hydra.run.dir=runs/a@b",
                                 "llm.model=user@example"])


def test_rag_main_refuses_a_token_as_the_url_user_in_one_line_and_writes_it_nowhere(tmp_path):
    env = rag_env(tmp_path)
    proc = _run("rag.main", ["llm=llamacpp_server", f"llm.base_url=http://{TOKEN}@127.0.0.1:9/v1", "logger=none",
                             "dataset=hotpotqa", "dataset.limit=1"], tmp_path, env, timeout=120)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith("ConfigError: refused: llm.base_url:") and "RAG_LLM_API_KEY" in lines[0], lines
    assert _found(tmp_path, proc.stdout + proc.stderr, (TOKEN,)) == []


def test_rag_index_and_a_composed_config_refuse_every_shape(tmp_path):
    env = rag_env(tmp_path)
    for url in SHAPES[:3]:
        proc = _run("rag.index", ["backend=opensearch", "corpus=docs.jsonl", f"backend.service.host={url}"],
                    tmp_path, env, timeout=120)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1, lines
        assert lines[0].startswith("ConfigError: refused: backend.service.host:") and "OPENSEARCH_PASSWORD" in lines[0]
    # through a config's `${oc.env:RAG_LLM_BASE_URL,...}`: the entry checks' callback, before anything is written
    proc = _run("rag.main", ["llm=llamacpp_server", "logger=none", "dataset=hotpotqa"], tmp_path,
                {**env, "RAG_LLM_BASE_URL": SHAPES[1]}, timeout=120)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "RAG_LLM_API_KEY" in lines[0], lines
    assert _found(tmp_path, proc.stdout + proc.stderr, (TOKEN,)) == [] and not any(tmp_path.rglob("*"))
