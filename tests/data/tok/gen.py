#!/usr/bin/python3
# Regenerates tiny-shakespeare.inp/.out: expected ids (no BOS) from the
# SentencePiece library for the tiny-shakespeare vocabulary.  Run from the
# repo root: /usr/bin/python3 tests/data/tok/gen.py ../shared
# (needs Debian's python3-sentencepiece; the tests only read the output).
import os, random, sys
import sentencepiece as spm

shared = sys.argv[1] if len(sys.argv) > 1 else "../shared"
sp = spm.SentencePieceProcessor(model_file=os.path.join(shared, "models/tiny-shakespeare-tok.model"))
SEP = "\n__ggml_vocab_test__\n"
rng = random.Random(1234)

cases = ["", " ", "  ", "\n", "\t", "a", "A", " a", "a ", "ROMEO:", "ROMEO:\n", "\n\nKING HENRY VI:\n",
         "Hello world", " Hello world", "Hello  world", "Hello\nworld", "x" * 300, " " * 40,
         "café naïve — Привет, мир! 你好。 🙂🙃 ∑∫√", "\u00e9\u0301", "\u2581", "\u2581 \u2581",
         "1234567890 3.14159 2,148,271", "<s> </s> <unk> <0x0A>", "a<s>b</s>", "'tis \"quoted\" (paren) [brack] {brace}",
         "\r\n\r\n", "\u00a0nbsp", "tab\there", "ALL CAPS SHOUTING", "O, O, O, O!"]
held = open(os.path.join(shared, "models/heldout.txt"), encoding="utf-8").read()
lines = [l for l in held.split("\n") if l]
for _ in range(60):
    i = rng.randrange(len(lines)); cases.append(lines[i])
for _ in range(20):
    i = rng.randrange(len(held) - 600); cases.append(held[i:i + rng.randrange(50, 600)])
alpha = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n\t.,;:!?'\"-") + \
        list("éèàüöß—–“”‘’…ПриветмирΩπλ你好世界日本語한국어") + ["🙂", "🎭", "\u2581", "<", ">", "/"]
for _ in range(60):
    n = rng.randrange(1, 80)
    cases.append("".join(rng.choice(alpha) for _ in range(n)))
# also the llama.cpp reference strings, under this vocabulary
inp = open(os.path.join(shared, "reference/tokenizer/ggml-vocab-llama-spm.gguf.inp"), encoding="utf-8").read()
parts = inp.split(SEP)
if parts and parts[-1] == "":
    parts.pop()
cases += parts

assert all(SEP not in c for c in cases)
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "tiny-shakespeare.inp"), "w", encoding="utf-8", newline="") as f:
    for c in cases:
        f.write(c + SEP)
with open(os.path.join(here, "tiny-shakespeare.out"), "w", encoding="utf-8", newline="") as f:
    for c in cases:
        f.write(" " + " ".join(str(i) for i in sp.encode(c)) + "\n" if c else "\n")
print(len(cases), "cases")
