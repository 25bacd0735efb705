#!/usr/bin/env python3
"""Generate tests/bad/: a tiny valid Llama GGUF (good.gguf) and crafted
hostile variants of it, plus tests/bad/expected.txt.

    python3 tools/mkbad.py [OUTDIR]      (default: tests/bad)

Deterministic: running it again produces byte-identical files, so the
committed outputs can be checked against it (tests/t_bad_gguf.sh does when
python3 is present).  The outputs are committed so the tests never need
python.

expected.txt has one line per file:  FILE  GGUF  LOGITS  CLI  SUBSTRING
GGUF/LOGITS/CLI say what `picolm-gguf info`, `picolm-logits` and `picolm`
must do with it:  rej = exit 1 or 2 and the combined output contains
SUBSTRING;  ok = exit 0;  any = exit 0, 1 or 2 (never a signal or hang).
"""
import os
import random
import struct
import sys

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
# tensor types
T_F32, T_F16, T_Q8_0 = 0, 1, 8

N_EMBD, N_FF, N_HEAD, N_HEAD_KV, N_CTX = 32, 64, 4, 2, 64
ALIGN = 32
U2581 = "\u2581"


def s_str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
              F32: "<f", BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}


def s_val(t, v):
    if t == STR:
        return s_str(v)
    if t == ARR:
        et, items = v
        out = struct.pack("<IQ", et, len(items))
        for it in items:
            out += s_val(et, it)
        return out
    return struct.pack(SCALAR_FMT[t], v)


class KV:
    def __init__(self, key, t, v, raw=None):
        self.key, self.t, self.v, self.raw = key, t, v, raw

    def bytes(self):
        if self.raw is not None:
            return self.raw
        return s_str(self.key) + struct.pack("<I", self.t) + s_val(self.t, self.v)


class Tensor:
    def __init__(self, name, ne, ttype, data):
        self.name, self.ne, self.type, self.data = name, list(ne), ttype, data
        self.offset = None  # None: laid out automatically
        self.n_dims = None  # None: len(ne)


def q8_0(rng, n):
    """n elements of Q8_0: fp16 scale + 32 int8 per block.  Blocks come from
    a small pool so that the committed files compress well."""
    pool = [bytes(rng.randrange(256) for _ in range(32)) for _ in range(8)]
    out = bytearray()
    for _ in range(n // 32):
        out += struct.pack("<e", rng.choice((0.01, 0.02, -0.015)))
        out += rng.choice(pool)
    return bytes(out)


def f32_ones(n):
    return struct.pack("<%df" % n, *([1.0] * n))


def vocab():
    toks, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [2, 3, 3]
    for b in range(256):
        toks.append("<0x%02X>" % b)
        scores.append(0.0)
        types.append(6)
    pieces = [U2581, "e", "t", "a", "o", "i", "n", "s", "h", "r", "d", "l", "u", "m", "R", "O", "M", "E", ":",
              U2581 + "t", "he", U2581 + "the", "hi", U2581 + "h", "in", "er", "an", "on", U2581 + "a", "or",
              "RO", "ME", "ROME", "ROMEO", U2581 + "s", "ou", "is", U2581 + "m", "en", "es", "th"]
    for i, p in enumerate(pieces):
        toks.append(p)
        scores.append(-float(i))
        types.append(1)
    return toks, scores, types  # 3 + 256 + 41 = 300 tokens


class Model:
    """A GGUF file as editable lists; serialize() lays it out."""

    def __init__(self):
        rng = random.Random(1234)
        toks, scores, types = vocab()
        self.n_vocab = len(toks)
        self.version = 3
        self.magic = b"GGUF"
        self.n_tensors = None  # None: actual counts
        self.n_kv = None
        self.kv = [
            KV("general.architecture", STR, "llama"),
            KV("general.name", STR, "picolm-bad-base"),
            KV("general.alignment", U32, ALIGN),
            KV("llama.context_length", U32, N_CTX),
            KV("llama.embedding_length", U32, N_EMBD),
            KV("llama.block_count", U32, 1),
            KV("llama.feed_forward_length", U32, N_FF),
            KV("llama.rope.dimension_count", U32, N_EMBD // N_HEAD),
            KV("llama.attention.head_count", U32, N_HEAD),
            KV("llama.attention.head_count_kv", U32, N_HEAD_KV),
            KV("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
            KV("llama.rope.freq_base", F32, 10000.0),
            KV("tokenizer.ggml.model", STR, "llama"),
            KV("tokenizer.ggml.tokens", ARR, (STR, toks)),
            KV("tokenizer.ggml.scores", ARR, (F32, scores)),
            KV("tokenizer.ggml.token_type", ARR, (I32, types)),
            KV("tokenizer.ggml.bos_token_id", U32, 1),
            KV("tokenizer.ggml.eos_token_id", U32, 2),
            KV("tokenizer.ggml.unknown_token_id", U32, 0),
            KV("tokenizer.ggml.add_bos_token", BOOL, 1),
            KV("tokenizer.ggml.add_eos_token", BOOL, 0),
        ]
        kvd = N_HEAD_KV * (N_EMBD // N_HEAD)
        self.tensors = [
            Tensor("token_embd.weight", [N_EMBD, self.n_vocab], T_Q8_0, q8_0(rng, N_EMBD * self.n_vocab)),
            Tensor("output_norm.weight", [N_EMBD], T_F32, f32_ones(N_EMBD)),
            Tensor("blk.0.attn_norm.weight", [N_EMBD], T_F32, f32_ones(N_EMBD)),
            Tensor("blk.0.ffn_norm.weight", [N_EMBD], T_F32, f32_ones(N_EMBD)),
            Tensor("blk.0.attn_q.weight", [N_EMBD, N_EMBD], T_Q8_0, q8_0(rng, N_EMBD * N_EMBD)),
            Tensor("blk.0.attn_k.weight", [N_EMBD, kvd], T_Q8_0, q8_0(rng, N_EMBD * kvd)),
            Tensor("blk.0.attn_v.weight", [N_EMBD, kvd], T_Q8_0, q8_0(rng, N_EMBD * kvd)),
            Tensor("blk.0.attn_output.weight", [N_EMBD, N_EMBD], T_Q8_0, q8_0(rng, N_EMBD * N_EMBD)),
            Tensor("blk.0.ffn_gate.weight", [N_EMBD, N_FF], T_Q8_0, q8_0(rng, N_EMBD * N_FF)),
            Tensor("blk.0.ffn_up.weight", [N_EMBD, N_FF], T_Q8_0, q8_0(rng, N_EMBD * N_FF)),
            Tensor("blk.0.ffn_down.weight", [N_FF, N_EMBD], T_Q8_0, q8_0(rng, N_FF * N_EMBD)),
        ]

    def getkv(self, key):
        return next(k for k in self.kv if k.key == key)

    def tensor(self, name):
        return next(t for t in self.tensors if t.name == name)

    def serialize(self):
        """Returns (bytes, marks): marks name byte offsets of the sections."""
        marks = {}
        out = bytearray(self.magic)
        marks["version"] = len(out)
        out += struct.pack("<I", self.version)
        marks["counts"] = len(out)
        nt = len(self.tensors) if self.n_tensors is None else self.n_tensors
        nkv = len(self.kv) if self.n_kv is None else self.n_kv
        out += struct.pack("<QQ", nt, nkv)
        marks["kv"] = len(out)
        for k in self.kv:
            marks["kv:" + str(k.key)] = len(out)
            out += k.bytes()
        marks["tensor_info"] = len(out)
        off = 0
        layout = []
        for t in self.tensors:
            o = t.offset
            if o is None:
                o = off
                off = (off + len(t.data) + ALIGN - 1) // ALIGN * ALIGN
            layout.append(o)
            marks["ti:" + t.name] = len(out)
            nd = len(t.ne) if t.n_dims is None else t.n_dims
            out += s_str(t.name) + struct.pack("<I", nd)
            for d in t.ne:
                out += struct.pack("<Q", d)
            out += struct.pack("<IQ", t.type, o)
        marks["tensor_info_end"] = len(out)
        pad = (-len(out)) % ALIGN
        out += b"\0" * pad
        data_start = len(out)
        marks["data"] = data_start
        size = max([o + len(t.data) for o, t in zip(layout, self.tensors) if t.offset is None] + [0])
        data = bytearray(size)
        for o, t in zip(layout, self.tensors):
            if o < (1 << 40) and t.offset is None:
                data[o:o + len(t.data)] = t.data
        out += data
        return bytes(out), marks


CASES = []  # (name, gguf, logits, cli, substring, builder(model) -> bytes)


def case(name, gguf, logits, cli, substr):
    def deco(fn):
        CASES.append((name, gguf, logits, cli, substr, fn))
        return fn
    return deco


def edit(fn):
    """Decorator helper: fn edits the model; serialize afterwards."""
    def run(m):
        fn(m)
        return m.serialize()[0]
    return run


def truncate_at(mark, delta=0):
    def run(m):
        b, marks = m.serialize()
        return b[:marks[mark] + delta]
    return run


# ---- the valid base model (positive control) ----
case("good", "ok", "ok", "ok", "-")(lambda m: m.serialize()[0])

# ---- truncations at every section boundary ----
case("trunc_magic", "rej", "rej", "rej", "too small")(truncate_at("version", -2))
case("trunc_version", "rej", "rej", "rej", "too small")(truncate_at("version", 2))
case("trunc_counts", "rej", "rej", "rej", "too small")(truncate_at("counts", 8))
case("trunc_header_only", "rej", "rej", "rej", "cannot fit")(truncate_at("kv"))
case("trunc_in_first_key", "rej", "rej", "rej", "cannot fit")(truncate_at("kv", 12))
case("trunc_in_key", "rej", "rej", "rej", "metadata #16: key at offset")(
    truncate_at("kv:tokenizer.ggml.bos_token_id", 12))
case("trunc_in_value_type", "rej", "rej", "rej", "truncated value type")(
    truncate_at("kv:tokenizer.ggml.eos_token_id", 8 + len("tokenizer.ggml.eos_token_id") + 2))
case("trunc_in_string_value", "rej", "rej", "rej", "tokenizer.ggml.model': string")(
    truncate_at("kv:tokenizer.ggml.model", 8 + len("tokenizer.ggml.model") + 4 + 8 + 2))
case("trunc_in_u32_value", "rej", "rej", "rej", "truncated value")(
    truncate_at("kv:tokenizer.ggml.unknown_token_id", 8 + len("tokenizer.ggml.unknown_token_id") + 4 + 2))
case("trunc_in_string_array", "rej", "rej", "rej", "tokenizer.ggml.tokens")(
    truncate_at("kv:tokenizer.ggml.scores", -1000))
case("trunc_in_array_header", "rej", "rej", "rej", "truncated array header")(
    truncate_at("kv:tokenizer.ggml.tokens", 8 + len("tokenizer.ggml.tokens") + 4 + 6))
case("trunc_in_f32_array", "rej", "rej", "rej", "tokenizer.ggml.scores")(
    truncate_at("kv:tokenizer.ggml.token_type", -10))
case("trunc_tensor_info_start", "rej", "rej", "rej", "tensor #0")(truncate_at("tensor_info"))
case("trunc_in_tensor_name", "rej", "rej", "rej", "tensor #0: name")(truncate_at("tensor_info", 12))
case("trunc_in_tensor_shape", "rej", "rej", "rej", "truncated shape")(
    truncate_at("ti:blk.0.attn_q.weight", 8 + len("blk.0.attn_q.weight") + 4 + 10))
case("trunc_in_tensor_offset", "rej", "rej", "rej", "truncated")(truncate_at("tensor_info_end", -3))
case("trunc_before_data", "rej", "rej", "rej", "truncated before the tensor data")(truncate_at("tensor_info_end"))
case("trunc_in_data", "rej", "rej", "rej", "outside the file")(truncate_at("data", 5000))
case("trunc_last_byte", "rej", "rej", "rej", "outside the file")(lambda m: m.serialize()[0][:-1])


# ---- header ----
@case("bad_magic", "rej", "rej", "rej", "bad magic")
@edit
def _(m): m.magic = b"GGUG"


@case("version_1", "rej", "rej", "rej", "unsupported GGUF version 1")
@edit
def _(m): m.version = 1


@case("version_4", "rej", "rej", "rej", "unsupported GGUF version 4")
@edit
def _(m): m.version = 4


@case("tensors_2p61", "rej", "rej", "rej", "tensor count")
@edit
def _(m): m.n_tensors = 1 << 61


@case("tensors_cannot_fit", "rej", "rej", "rej", "cannot fit")
@edit
def _(m): m.n_tensors = 60000


@case("kv_count_2p61", "rej", "rej", "rej", "metadata count")
@edit
def _(m): m.n_kv = 1 << 61


@case("kv_count_too_small", "rej", "rej", "rej", "tensor")
@edit
def _(m): m.n_kv = 3  # the rest of the metadata is parsed as tensor infos


@case("zero_metadata", "ok", "rej", "rej", "missing general.architecture")
@edit
def _(m): m.kv = []


# ---- metadata ----
@case("key_len_2p40", "rej", "rej", "rej", "longer than the limit max_string")
@edit
def _(m): m.kv.insert(0, KV(None, None, None, raw=struct.pack("<Q", 1 << 40) + b"general.x"))


@case("string_len_2p62", "rej", "rej", "rej", "general.name")
@edit
def _(m): m.getkv("general.name").raw = s_str("general.name") + struct.pack("<IQ", STR, 1 << 62) + b"x"


@case("array_count_2p60", "rej", "rej", "rej", "exceeds the limit")
@edit
def _(m): m.kv.insert(0, KV(None, None, None, raw=s_str("a.b") + struct.pack("<IIQ", ARR, U8, 1 << 60)))


@case("string_array_overrun", "rej", "rej", "rej", "overruns the file")
@edit
def _(m): m.kv.insert(0, KV(None, None, None, raw=s_str("a.b") + struct.pack("<IIQ", ARR, STR, 1 << 24)))


@case("u32_array_overrun", "rej", "rej", "rej", "overruns the file")
@edit
def _(m): m.kv.insert(0, KV(None, None, None, raw=s_str("a.b") + struct.pack("<IIQ", ARR, U32, 1 << 24)))


@case("nested_array", "rej", "rej", "rej", "nested arrays")
@edit
def _(m): m.kv.insert(0, KV(None, None, None, raw=s_str("a.b") + struct.pack("<IIQ", ARR, ARR, 1) + struct.pack("<IQ", U8, 1) + b"\1"))


@case("invalid_value_type", "rej", "rej", "rej", "invalid value type 13")
@edit
def _(m): m.kv.insert(0, KV(None, None, None, raw=s_str("a.b") + struct.pack("<I", 13) + b"\0" * 8))


@case("invalid_value_type_huge", "rej", "rej", "rej", "invalid value type")
@edit
def _(m): m.kv.insert(0, KV(None, None, None, raw=s_str("a.b") + struct.pack("<I", 0xFFFFFFFF) + b"\0" * 8))


@case("invalid_array_type", "rej", "rej", "rej", "invalid array element type")
@edit
def _(m): m.kv.insert(0, KV(None, None, None, raw=s_str("a.b") + struct.pack("<IIQ", ARR, 200, 1) + b"\0" * 8))


@case("duplicate_key", "rej", "rej", "rej", "duplicate metadata key")
@edit
def _(m): m.kv.append(KV("llama.block_count", U32, 1))


@case("alignment_3", "rej", "rej", "rej", "general.alignment")
@edit
def _(m): m.getkv("general.alignment").v = 3


@case("alignment_0", "rej", "rej", "rej", "general.alignment")
@edit
def _(m): m.getkv("general.alignment").v = 0


@case("alignment_string", "rej", "rej", "rej", "general.alignment")
@edit
def _(m): m.getkv("general.alignment").t, m.getkv("general.alignment").v = STR, "32"


# ---- tensor infos ----
@case("dims_40", "rej", "rej", "rej", "40 dimensions")
@edit
def _(m): m.tensors[3].n_dims = 40


@case("dims_0", "rej", "rej", "rej", "0 dimensions")
@edit
def _(m):
    m.tensors[3].n_dims = 0
    m.tensors[3].ne = []


@case("dim_zero", "rej", "rej", "rej", "dimension 1 is 0")
@edit
def _(m): m.tensor("blk.0.attn_q.weight").ne[1] = 0


@case("dim_2p40", "rej", "rej", "rej", "dimension 0 is 1099511627776")
@edit
def _(m): m.tensor("blk.0.attn_q.weight").ne[0] = 1 << 40


@case("dim_u64_max", "rej", "rej", "rej", "dimension 1 is 18446744073709551615")
@edit
def _(m): m.tensor("blk.0.attn_q.weight").ne[1] = (1 << 64) - 1


@case("elements_overflow", "rej", "rej", "rej", "element count overflows")
@edit
def _(m): m.tensor("blk.0.attn_q.weight").ne = [1 << 32, 1 << 32, 1 << 32]


@case("huge_tensor", "rej", "rej", "rej", "outside the file")
@edit
def _(m): m.tensor("blk.0.attn_q.weight").ne = [1 << 32, 1 << 20]


@case("tensor_name_2p40", "rej", "rej", "rej", "tensor #0: name")
def _(m):
    b, marks = m.serialize()
    o = marks["tensor_info"]
    return b[:o] + struct.pack("<Q", 1 << 40) + b[o + 8:]


@case("offset_out_of_file", "rej", "rej", "rej", "outside the file")
@edit
def _(m): m.tensor("blk.0.ffn_down.weight").offset = 1 << 30


@case("offset_u64_max", "rej", "rej", "rej", "not a multiple of the alignment 32")
@edit
def _(m): m.tensor("blk.0.ffn_down.weight").offset = (1 << 64) - 1


@case("offset_huge_aligned", "rej", "rej", "rej", "outside the file")
@edit
def _(m): m.tensor("blk.0.ffn_down.weight").offset = (1 << 64) - 32


@case("overlap", "rej", "rej", "rej", "overlap")
@edit
def _(m): m.tensor("blk.0.attn_k.weight").offset = 0


@case("misaligned_offset", "rej", "rej", "rej", "not a multiple of the alignment 32")
@edit
def _(m): m.tensor("blk.0.attn_k.weight").offset = 16


@case("unknown_type_99", "rej", "rej", "rej", "type 99")
@edit
def _(m): m.tensor("blk.0.attn_q.weight").type = 99


@case("unknown_type_huge", "rej", "rej", "rej", "type 4294967295")
@edit
def _(m): m.tensor("blk.0.attn_q.weight").type = 0xFFFFFFFF


@case("row_not_block_multiple", "rej", "rej", "rej", "not a multiple of the block size")
@edit
def _(m):
    t = m.tensor("blk.0.attn_q.weight")
    t.ne = [16, 64]


@case("duplicate_tensor", "rej", "rej", "rej", "duplicate tensor name")
@edit
def _(m): m.tensor("blk.0.attn_k.weight").name = "blk.0.attn_v.weight"


# ---- model validation (the parser accepts these) ----
@case("attn_q_wrong_rows", "ok", "rej", "rej", "blk.0.attn_q.weight' has shape")
@edit
def _(m):
    t = m.tensor("blk.0.attn_q.weight")
    t.ne = [N_EMBD, N_EMBD // 2]
    t.data = t.data[:len(t.data) // 2]


@case("ffn_down_transposed", "ok", "rej", "rej", "blk.0.ffn_down.weight' has shape")
@edit
def _(m): m.tensor("blk.0.ffn_down.weight").ne = [N_EMBD, N_FF]


@case("norm_wrong_length", "ok", "rej", "rej", "output_norm.weight' has 16 elements")
@edit
def _(m):
    t = m.tensor("output_norm.weight")
    t.ne, t.data = [16], t.data[:64]


@case("token_embd_3d", "ok", "rej", "rej", "token_embd.weight")
@edit
def _(m): m.tensor("token_embd.weight").ne = [N_EMBD, m.n_vocab // 3, 3]


@case("missing_tensor", "ok", "rej", "rej", "missing tensor 'blk.0.ffn_up.weight'")
@edit
def _(m): m.tensors.remove(m.tensor("blk.0.ffn_up.weight"))


@case("block_count_2", "ok", "rej", "rej", "missing tensor 'blk.1.")
@edit
def _(m): m.getkv("llama.block_count").v = 2


@case("block_count_huge", "ok", "rej", "rej", "llama.block_count")
@edit
def _(m): m.getkv("llama.block_count").t, m.getkv("llama.block_count").v = U64, 1 << 40


@case("embd_negative", "ok", "rej", "rej", "llama.embedding_length")
@edit
def _(m): m.getkv("llama.embedding_length").t, m.getkv("llama.embedding_length").v = I32, -32


@case("embd_is_string", "ok", "rej", "rej", "is not an integer")
@edit
def _(m): m.getkv("llama.embedding_length").t, m.getkv("llama.embedding_length").v = STR, "32"


@case("missing_head_count", "ok", "rej", "rej", "missing metadata 'llama.attention.head_count'")
@edit
def _(m): m.kv.remove(m.getkv("llama.attention.head_count"))


@case("arch_gpt2", "ok", "rej", "rej", "not supported")
@edit
def _(m): m.getkv("general.architecture").v = "gpt2"


@case("heads_not_dividing_embd", "ok", "rej", "rej", "not divisible by head_count")
@edit
def _(m):
    m.getkv("llama.attention.head_count").v = 3
    m.getkv("llama.attention.head_count_kv").v = 1


@case("kv_heads_not_dividing_heads", "ok", "rej", "rej", "not a multiple of head_count_kv")
@edit
def _(m): m.getkv("llama.attention.head_count_kv").v = 3


@case("kv_heads_zero", "ok", "rej", "rej", "head_count_kv")
@edit
def _(m): m.getkv("llama.attention.head_count_kv").v = 0


@case("head_count_zero", "ok", "rej", "rej", "head_count")
@edit
def _(m): m.getkv("llama.attention.head_count").v = 0


@case("rope_dim_odd", "ok", "rej", "rej", "rope.dimension_count")
@edit
def _(m): m.getkv("llama.rope.dimension_count").v = 3


@case("rope_dim_huge", "ok", "rej", "rej", "rope.dimension_count")
@edit
def _(m): m.getkv("llama.rope.dimension_count").v = 1 << 20


@case("rms_eps_nan", "ok", "rej", "rej", "not finite")
@edit
def _(m): m.getkv("llama.attention.layer_norm_rms_epsilon").v = float("nan")


@case("rope_base_negative", "ok", "rej", "rej", "rope")
@edit
def _(m): m.getkv("llama.rope.freq_base").v = -1.0


@case("context_zero", "ok", "any", "rej", "context_length")
@edit
def _(m): m.getkv("llama.context_length").v = 0


@case("vocab_size_mismatch", "ok", "rej", "rej", "vocab_size")
@edit
def _(m): m.kv.append(KV("llama.vocab_size", U32, m.n_vocab + 1))


# ---- architectures (core/model.c's llama_archs table) ----
def to_arch(m, arch, extra=()):
    """m as architecture `arch`: its keys under arch's prefix, plus tensors
    (name suffix, length) added to every layer as F32 ones."""
    m.getkv("general.architecture").v = arch
    for kv in m.kv:
        if kv.key and kv.key.startswith("llama."):
            kv.key = arch + kv.key[5:]
    for name, n in extra:
        m.tensors.append(Tensor("blk.0." + name, [n], T_F32, f32_ones(n)))


HEAD_DIM = N_EMBD // N_HEAD
KVD = N_HEAD_KV * HEAD_DIM
QWEN2 = [("attn_q.bias", N_EMBD), ("attn_k.bias", KVD), ("attn_v.bias", KVD)]
QWEN3 = [("attn_q_norm.weight", HEAD_DIM), ("attn_k_norm.weight", HEAD_DIM)]


@case("llama_rope_freqs", "ok", "ok", "ok", "-")
@edit
def _(m): m.tensors.append(Tensor("rope_freqs.weight", [HEAD_DIM // 2], T_F32, f32_ones(HEAD_DIM // 2)))


@case("rope_freqs_wrong_length", "ok", "rej", "rej", "rope_freqs.weight' has 3 elements, expected 4")
@edit
def _(m): m.tensors.append(Tensor("rope_freqs.weight", [3], T_F32, f32_ones(3)))


@case("rope_scaling_yarn", "ok", "rej", "rej", "llama.rope.scaling.type' = 'yarn' is not supported")
@edit
def _(m): m.kv.append(KV("llama.rope.scaling.type", STR, "yarn"))


@case("llama_attn_output_bias", "ok", "rej", "rej", "tensor 'blk.0.attn_output.bias' is not part of architecture 'llama'")
@edit
def _(m): m.tensors.append(Tensor("blk.0.attn_output.bias", [N_EMBD], T_F32, f32_ones(N_EMBD)))


@case("qwen2_good", "ok", "ok", "ok", "-")
@edit
def _(m): to_arch(m, "qwen2", QWEN2)


@case("qwen2_missing_bias", "ok", "rej", "rej", "missing tensor 'blk.0.attn_v.bias'")
@edit
def _(m): to_arch(m, "qwen2", QWEN2[:2])


@case("qwen2_bias_wrong_length", "ok", "rej", "rej", "blk.0.attn_k.bias' has 32 elements, expected 16")
@edit
def _(m): to_arch(m, "qwen2", [QWEN2[0], ("attn_k.bias", N_EMBD), QWEN2[2]])


@case("qwen2_old_keys", "ok", "rej", "rej", "missing metadata 'qwen2.embedding_length'")
@edit
def _(m):
    to_arch(m, "qwen2", QWEN2)
    m.getkv("qwen2.embedding_length").key = "llama.embedding_length"


@case("qwen3_good", "ok", "ok", "ok", "-")
@edit
def _(m): to_arch(m, "qwen3", QWEN3)


@case("qwen3_missing_k_norm", "ok", "rej", "rej", "missing tensor 'blk.0.attn_k_norm.weight'")
@edit
def _(m): to_arch(m, "qwen3", QWEN3[:1])


@case("qwen3_q_norm_wrong_length", "ok", "rej", "rej", "blk.0.attn_q_norm.weight' has 32 elements, expected 8")
@edit
def _(m): to_arch(m, "qwen3", [("attn_q_norm.weight", N_EMBD), QWEN3[1]])


@case("qwen3_bias", "ok", "rej", "rej", "tensor 'blk.0.attn_q.bias' is not part of architecture 'qwen3'")
@edit
def _(m): to_arch(m, "qwen3", QWEN3 + QWEN2[:1])


@case("qwen3_key_length_16", "ok", "rej", "rej", "blk.0.attn_q.weight' has shape [32, 32, 1, 1], expected [32, 64]")
@edit
def _(m):
    to_arch(m, "qwen3", QWEN3)
    m.kv.append(KV("qwen3.attention.key_length", U32, 16))


@case("value_length_differs", "ok", "rej", "rej", "llama.attention.value_length 4 differs from the key length 8")
@edit
def _(m): m.kv.append(KV("llama.attention.value_length", U32, 4))


# ---- tokenizer metadata (only the CLI builds the tokenizer) ----
@case("tokens_fewer_than_embd_rows", "ok", "any", "rej", "tokens")
@edit
def _(m):
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        kv = m.getkv(key)
        kv.v = (kv.v[0], kv.v[1][:-1])


@case("scores_length_mismatch", "ok", "any", "rej", "tokenizer.ggml.scores has 299 entries")
@edit
def _(m):
    kv = m.getkv("tokenizer.ggml.scores")
    kv.v = (F32, kv.v[1][:-1])


@case("token_type_invalid", "ok", "any", "rej", "invalid type")
@edit
def _(m):
    kv = m.getkv("tokenizer.ggml.token_type")
    kv.v = (I32, kv.v[1][:10] + [77] + kv.v[1][11:])


@case("tokens_not_strings", "ok", "any", "rej", "not an array of strings")
@edit
def _(m): m.getkv("tokenizer.ggml.tokens").v = (I32, list(range(m.n_vocab)))


@case("token_invalid_utf8", "ok", "any", "rej", "not valid UTF-8")
@edit
def _(m):
    kv = m.getkv("tokenizer.ggml.tokens")
    kv.v = (STR, kv.v[1][:290] + [b"\xff\xfe"] + kv.v[1][291:])


@case("bos_outside_vocab", "ok", "any", "rej", "outside the vocabulary")
@edit
def _(m): m.getkv("tokenizer.ggml.bos_token_id").v = m.n_vocab


@case("eos_u32_max", "ok", "any", "rej", "outside the vocabulary")
@edit
def _(m): m.getkv("tokenizer.ggml.eos_token_id").v = 0xFFFFFFFF


@case("unk_negative", "ok", "any", "rej", "outside the vocabulary")
@edit
def _(m): m.getkv("tokenizer.ggml.unknown_token_id").t, m.getkv("tokenizer.ggml.unknown_token_id").v = I32, -5


@case("tokenizer_model_gpt2", "ok", "any", "rej", "merges is missing")
@edit
def _(m): m.getkv("tokenizer.ggml.model").v = "gpt2"


@case("tokenizer_model_bert", "ok", "any", "rej", "unsupported tokenizer model")
@edit
def _(m): m.getkv("tokenizer.ggml.model").v = "bert"


@case("tokenizer_pre_unknown", "ok", "any", "rej", "nonsense-pre")
@edit
def _(m):
    m.getkv("tokenizer.ggml.model").v = "gpt2"
    m.kv.append(KV("tokenizer.ggml.pre", STR, "nonsense-pre"))


@case("tokenizer_merges_not_strings", "ok", "any", "rej", "merges is not an array of strings")
@edit
def _(m):
    m.getkv("tokenizer.ggml.model").v = "gpt2"
    m.kv.append(KV("tokenizer.ggml.merges", ARR, (I32, [1, 2, 3])))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "bad")
    os.makedirs(out, exist_ok=True)
    lines = ["# generated by tools/mkbad.py: FILE GGUF LOGITS CLI SUBSTRING (see the script)"]
    for name, g, l, c, sub, fn in CASES:
        data = fn(Model())
        with open(os.path.join(out, name + ".gguf"), "wb") as f:
            f.write(data)
        lines.append("%s.gguf %s %s %s %s" % (name, g, l, c, sub))
    with open(os.path.join(out, "expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("%d files in %s" % (len(CASES), out))


if __name__ == "__main__":
    main()
