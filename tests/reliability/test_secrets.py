"""Issue 9, fault 7: masking, for text the project does not control (log records, exception messages, cache keys).

Since issue 36 a secret given by value is refused before any work (tests/reliability/test_no_secret_anywhere.py);
what masking remains is checked here, and must leave YAML that parses."""

from __future__ import annotations

import pytest

from rag.core.secrets import mask_text, redact, secrets_in_overrides

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
    assert secrets_in_overrides(["+llm.api_key=SECRETVALUE123", "retriever.k=5", "generator.max_tokens=8"]) \
        == {"SECRETVALUE123"}
    assert redact({"llm": {"api_key": "SECRETVALUE123", "base_url": "http://u:p4ssw0rd@h/v1", "k": 5}}) == \
        {"llm": {"api_key": "***", "base_url": "http://***@h/v1", "k": 5}}


@pytest.mark.slow
def test_masking_masks_values_never_the_words_of_a_message():
    """`retriever.api_key: *** takes no argument 'api_key'` once hid the class name the message was about."""
    message = "retriever.api_key: PineconeRetriever takes no argument 'api_key'"
    assert mask_text(message) == message
    # a masked YAML value is quoted: a plain `***` would be an alias, and the file would no longer parse
    assert mask_text("retriever.api_key: sk-abc123") == "retriever.api_key: '***'"
    assert mask_text("llm:\n  api_key: sk-abc123\n  model: m") == "llm:\n  api_key: '***'\n  model: m"
    assert mask_text("{api_key: sk-abc123, b: 2}") == "{api_key: '***', b: 2}"
    assert mask_text("api_key: sk-abc123  # from the vault") == "api_key: '***'  # from the vault"
    assert mask_text('{"api_key": "sk-abc123"}') == '{"api_key": "***"}'
    # a value known to be secret (passed on the command line) is masked wherever it stands in a sentence
    assert mask_text("the key api_key: sk-abc123 was refused", known=["sk-abc123"]) == \
        "the key api_key: *** was refused"
    assert mask_text(mask_text("api_key: sk-abc123")) == "api_key: '***'"  # masking twice changes nothing


def test_masked_yaml_parses_and_the_sweep_tools_read_a_sweep_masked_by_an_older_version(hotpot_data, tmp_path):
    """Issue 36: masking wrote `api_key: ***` into multirun.yaml and every `.hydra/config.yaml` (a YAML alias, so
    the files no longer parsed) and eval.summary, rag.report, jobs.status and jobs.resubmit exited 1 on that
    sweep. Masking now quotes the value; sweeps an older version masked are read with the mask quoted."""
    import yaml

    from rag.core.secrets import mask_file
    from tests.cluster.helpers import CHEAP, rag_env, rag_main, run_module

    sweep = tmp_path / "sweep"
    proc = rag_main(["-m", *CHEAP, "generator=extractive", "dataset.limit=2", "retriever.k=4,5", "logger=none",
                     f"hydra.sweep.dir={sweep}"], rag_env(tmp_path), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cells = sorted(p for p in sweep.iterdir() if (p / ".hydra").is_dir())
    # what masking writes now: a YAML file that still parses, the key gone
    probe = tmp_path / "probe.yaml"
    probe.write_text((cells[0] / ".hydra" / "config.yaml").read_text().replace(
        "generation:\n", "generation:\n  api_key: sk-abc123\n", 1))
    assert mask_file(probe) and yaml.safe_load(probe.read_text())["generation"]["api_key"] == "***"
    # what an older version wrote: `api_key: ***` in every Hydra file of the sweep
    for path in [sweep / "multirun.yaml", *(c / ".hydra" / "config.yaml" for c in cells)]:
        path.write_text(path.read_text().replace("generation:\n", "generation:\n  api_key: ***\n", 1))
        with pytest.raises(yaml.YAMLError):
            yaml.safe_load(path.read_text())
    for module, args in (("eval.summary", [str(sweep), "--no-wandb"]), ("rag.report", [str(sweep), "--formats",
                                                                                        "png"]),
                         ("jobs.status", [str(sweep)]), ("jobs.resubmit", [str(sweep), "--dry-run"])):
        proc = run_module(module, args, rag_env(tmp_path))
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (module, (proc.stdout + proc.stderr)[-2000:])
    assert "complete" in run_module("jobs.status", [str(sweep)], rag_env(tmp_path)).stdout
