"""SentencePiece models as references, for tests.

spm.py convert MODEL OUT_DIR   writes OUT_DIR/tokenizer.json from a
    SentencePiece BPE .model, in the shape the Hub publishes for Llama 2 and
    Mistral v0.1-v0.3 (Prepend/Replace normalizers, no pre-tokenizer,
    byte-fallback decoders), with merges ordered by piece score as
    transformers 4.x did. transformers 5.23 orders them by id instead, which
    merges Mistral's whitespace runs (score -1e9) first and so disagrees
    with SentencePiece; the tests check this conversion against
    SentencePiece itself.
spm.py                         JSON lines {"model": path, "text": str} in,
    {"ids": [...]} out, encoded by the sentencepiece library.
spm.py train CORPUS OUT_DIR    trains the small BPE models under
    core/tokenizer/bpe/testdata/spm (deterministic for a given corpus).
spm.py mistral                 prints the directory of mistral-common's
    .model files (without importing the package, whose dependencies are
    not installed).
"""

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import sentencepiece as spm
from refio import serve
from sentencepiece import sentencepiece_model_pb2 as pb
from transformers.tokenization_utils_base import generate_merges

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPACE = "\u2581"


def convert(model_path: str, out: Path) -> None:
    m = pb.ModelProto()
    m.ParseFromString(Path(model_path).read_bytes())
    t, n = m.trainer_spec, m.normalizer_spec
    if t.model_type != pb.TrainerSpec.BPE:
        raise SystemExit(f"{model_path}: only BPE models are converted (model_type {t.model_type})")
    if n.precompiled_charsmap or n.name not in ("identity", ""):
        raise SystemExit(f"{model_path}: normalizer {n.name!r} with a charsmap is not converted")
    if n.remove_extra_whitespaces or t.treat_whitespace_as_suffix:
        raise SystemExit(f"{model_path}: remove_extra_whitespaces/treat_whitespace_as_suffix are not converted")
    vocab = {p.piece: i for i, p in enumerate(m.pieces)}
    # Only normal and user-defined pieces are produced by merging.
    scores = {p.piece: p.score for p in m.pieces if p.type in (NORMAL, USER_DEFINED)}
    merges = generate_merges(vocab, scores)
    added = [
        {
            "id": i,
            "content": p.piece,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": p.type != USER_DEFINED,
        }
        for i, p in enumerate(m.pieces)
        if p.type in (UNKNOWN, CONTROL, USER_DEFINED)
    ]
    norms: list[dict[str, Any]] = []
    if n.add_dummy_prefix:
        norms.append({"type": "Prepend", "prepend": SPACE})
    norms.append({"type": "Replace", "pattern": {"String": " "}, "content": SPACE})
    decoders: list[dict[str, Any]] = [
        {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ]
    if n.add_dummy_prefix:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    unk = m.pieces[t.unk_id].piece if t.unk_id >= 0 else None
    bos = m.pieces[t.bos_id].piece if t.bos_id >= 0 else None
    tok: dict[str, Any] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": norms},
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": unk,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": t.byte_fallback,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [[a, b] for a, b in merges],
        },
    }
    if bos is not None:
        tok["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": bos, "type_id": 1}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {bos: {"id": bos, "ids": [t.bos_id], "tokens": [bos]}},
        }
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False, indent=1) + "\n")


_procs: dict[str, spm.SentencePieceProcessor] = {}


def encode(case: dict[str, Any]) -> dict[str, Any]:
    path = case["model"]
    if path not in _procs:
        _procs[path] = spm.SentencePieceProcessor(model_file=path)
    return {"ids": _procs[path].encode(case["text"])}


def train(corpus: str, out: Path) -> None:
    # Yi's shape (no dummy prefix) and Llama's (dummy prefix), both with
    # byte fallback, split digits and whitespace-only pieces.
    for name, prefix in (("noprefix", False), ("prefix", True), ("unigram", True)):
        (out / name).mkdir(parents=True, exist_ok=True)
        spm.SentencePieceTrainer.train(
            input=corpus,
            model_prefix=str(out / name / "tokenizer"),
            model_type="unigram" if name == "unigram" else "bpe",
            vocab_size=600,
            character_coverage=0.995,
            byte_fallback=True,
            split_digits=True,
            allow_whitespace_only_pieces=True,
            remove_extra_whitespaces=False,
            add_dummy_prefix=prefix,
            normalization_rule_name="identity",
            user_defined_symbols=["<tool>", "</tool>"],
            control_symbols=["[INST]", "[/INST]"],
            num_threads=1,
            minloglevel=2,
            max_sentence_length=1 << 20,
        )
        (out / name / "tokenizer.vocab").unlink()
        # The trainer records its arguments' paths: keep only the names.
        model = pb.ModelProto()
        model.ParseFromString((out / name / "tokenizer.model").read_bytes())
        model.trainer_spec.model_prefix = "tokenizer"
        model.trainer_spec.input[:] = [Path(corpus).name]
        (out / name / "tokenizer.model").write_bytes(model.SerializeToString())
        if name != "unigram":  # convert writes BPE models only; Go reads the .model
            convert(str(out / name / "tokenizer.model"), out / name)


def mistral_dir() -> str:
    spec = importlib.util.find_spec("mistral_common")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("mistral-common is not installed")
    return str(Path(list(spec.submodule_search_locations)[0]) / "data")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "convert":
        convert(sys.argv[2], Path(sys.argv[3]))
    elif cmd == "":
        serve(encode)
    elif cmd == "train":
        train(sys.argv[2], Path(sys.argv[3]))
    elif cmd == "mistral":
        print(mistral_dir())
    else:
        raise SystemExit(__doc__)
