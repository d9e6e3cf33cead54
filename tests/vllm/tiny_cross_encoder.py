"""A tiny, randomly initialised XLM-RoBERTa cross-encoder with a real Unigram (sentencepiece-style) tokenizer,
built on disk for `rerank=bge` in the vLLM environment.

transformers 5 rebuilds an XLM-R tokenizer from its Unigram vocabulary, as the real bge-reranker-v2-m3 has one;
the main suite's fixture (tests/backends/tiny_models.py: a WordPiece vocabulary under XLM-R's name) loads only
with transformers 4.x.
"""

from __future__ import annotations

from pathlib import Path

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def build_tiny_unigram_xlmr(path: Path, texts: list[str], hidden: int = 32, layers: int = 2, heads: int = 2,
                            max_length: int = 512, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import (
        AutoTokenizer,
        XLMRobertaConfig,
        XLMRobertaForSequenceClassification,
        XLMRobertaTokenizerFast,
    )

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator([t.lower() for t in texts],
                            trainers.UnigramTrainer(vocab_size=300, special_tokens=SPECIALS, unk_token="<unk>"))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    fast = XLMRobertaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                   cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                                   model_max_length=max_length)
    assert [fast.convert_tokens_to_ids(t) for t in SPECIALS[:4]] == [0, 1, 2, 3]
    torch.manual_seed(seed)
    config = XLMRobertaConfig(vocab_size=len(fast), hidden_size=hidden, num_hidden_layers=layers,
                              num_attention_heads=heads, intermediate_size=hidden * 2,
                              max_position_embeddings=max_length + 2, pad_token_id=1, bos_token_id=0,
                              eos_token_id=2, num_labels=1)
    model = XLMRobertaForSequenceClassification(config).eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    fast.save_pretrained(path)
    reloaded = AutoTokenizer.from_pretrained(path)  # what FlagEmbedding will do
    assert reloaded("a b", "c")["input_ids"][0] == 0
    return path
