"""Issue 9, fault 7: a key passed as an override never reaches a file, a folder name or the terminal.

A real `python -m rag.main` multirun (basic launcher, Gemma 270M, one question per cell) with key-like overrides;
every file under the output folder, every folder name and the captured stdout/stderr are searched for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag.core.secrets import mask_text, redact, secrets_in_overrides
from tests.cluster.helpers import CHEAP, rag_env, rag_main, sweep_dirs

SECRETS = ["SECRETVALUE123", "TOKENVALUE456", "PASSWORD789XYZ"]


def test_mask_text_masks_key_like_names_and_url_credentials_only():
    text = ("+retriever.api_key=SECRETVALUE123,retriever.k=5 llm.max_tokens=8 "
            "api_key_env: PINECONE_API_KEY\npassword: PASSWORD789XYZ\n"
            '{"auth_token": "TOKENVALUE456"} base_url=https://bob:PW123456@host.example/v1 tokenizer: bert')
    masked = mask_text(text)
    for secret in (*SECRETS, "PW123456"):
        assert secret not in masked
    for kept in ("retriever.k=5", "llm.max_tokens=8", "api_key_env: PINECONE_API_KEY", "host.example/v1",
                 "tokenizer: bert"):
        assert kept in masked
    assert secrets_in_overrides(["+llm.extra_key=SECRETVALUE123", "retriever.k=5", "generator.max_tokens=8"]) \
        == {"SECRETVALUE123"}
    assert redact({"llm": {"extra_key": "SECRETVALUE123", "base_url": "http://u:p4ssw0rd@h/v1", "k": 5}}) == \
        {"llm": {"extra_key": "***", "base_url": "http://***@h/v1", "k": 5}}


def _all_text(root: Path) -> str:
    parts = []
    for path in root.rglob("*"):
        parts.append(str(path))
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(parts)


@pytest.mark.slow
def test_masking_masks_values_never_the_words_of_a_message():
    """`retriever.api_key: *** takes no argument 'api_key'` once hid the class name the message was about."""
    message = "retriever.api_key: PineconeRetriever takes no argument 'api_key'"
    assert mask_text(message) == message
    assert mask_text("retriever.api_key: sk-abc123") == "retriever.api_key: ***"
    assert mask_text("llm:\n  api_key: sk-abc123\n  model: m") == "llm:\n  api_key: ***\n  model: m"
    assert mask_text("{api_key: sk-abc123, b: 2}") == "{api_key: ***, b: 2}"
    assert mask_text("api_key: sk-abc123  # from the vault") == "api_key: ***  # from the vault"
    assert mask_text('{"api_key": "sk-abc123"}') == '{"api_key": "***"}'
    # a value known to be secret (passed on the command line) is masked wherever it stands in a sentence
    assert mask_text("the key api_key: sk-abc123 was refused", known=["sk-abc123"]) == \
        "the key api_key: *** was refused"


def test_override_secrets_reach_no_output_folder_name_or_log(hotpot_data, tmp_path):
    args = ["-m", *CHEAP, "dataset.limit=1", "logger=none", "retriever.k=4,5",
            f"+generation.api_token={SECRETS[1]}", f"+generation.api_key={SECRETS[0]}", f"+generation.password={SECRETS[2]}"]
    proc = rag_main(args, rag_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    [sweep] = sweep_dirs(tmp_path / "outputs")
    cells = sorted(p for p in sweep.iterdir() if (p / ".hydra").is_dir())
    assert len(cells) == 2 and all((c / "metrics.json").is_file() for c in cells)
    assert all("api_key=***" in c.name for c in cells), [c.name for c in cells]
    assert (sweep / "multirun.yaml").is_file() and (cells[0] / ".hydra" / "overrides.yaml").is_file()
    everything = _all_text(tmp_path / "outputs") + proc.stdout + proc.stderr
    for secret in SECRETS:
        assert secret not in everything, secret
    assert "retriever.k=4" in everything  # overrides themselves are still recorded
