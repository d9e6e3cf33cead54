"""Build tiny, randomly initialised XLM-RoBERTa models on disk (no download) for reranker tests.

The tokenizer is a small WordPiece vocabulary trained on the texts the test uses, wrapped as an XLM-RoBERTa fast
tokenizer with XLM-R's special-token ids (<s>=0, <pad>=1, </s>=2, <unk>=3), so FlagEmbedding's real code path
(tokenise pairs, pad, run `AutoModelForSequenceClassification`) runs unchanged.
"""

from __future__ import annotations

from pathlib import Path

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def build_tiny_xlmr(path: Path, texts: list[str], hidden: int = 32, layers: int = 2, heads: int = 2,
                    max_length: int = 512, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import XLMRobertaConfig, XLMRobertaForSequenceClassification, XLMRobertaTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="<unk>"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=400, special_tokens=SPECIALS))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
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
    return path
