#!/usr/bin/env python3
"""Checks that what the documentation and the code comments name exists.

Reads README.md, docs/*.md, conf/README and the comments of every source
file (C, shell, make, awk, Python, JavaScript, INI) and reports:
  - a path of the tree (core/x.c, backends/avx2/, mk/static.mk ...) that is
    not there;
  - a bare file name (model.c, plugin.h) that no file of the tree has;
  - a function or symbol named with its file (`core/plugins.c: check_entry`,
    `model.c: mm_rows`, (`core/gguf.c`, `gguf_default_limits`),
    `build_model` (core/model.c), `build_sampling` in core/sampling.c) that
    does not occur in that file;
  - a Markdown link whose target file or #anchor is missing;
  - a date, a session or issue number, or a machine path (history lives in
    git, not in the text).
Usage: docrefs.py [--root DIR] [FILE...]   (default: the whole tree)
Prints one line per problem (file:line: what) and exits 1 if there is any.
"""
import os
import re
import sys

SKIP_DIRS = {".git", "node_modules", "__pycache__"}
TOP = ("core", "backends", "tools", "tests", "formats", "plugins", "include",
       "mk", "conf", "docs", "fuzz", "models", ".ci")
CODE_EXT = {".c": "c", ".h": "c", ".cpp": "c", ".mjs": "c", ".js": "c",
            ".sh": "hash", ".mk": "hash", ".awk": "hash", ".py": "hash",
            ".ini": "ini"}
# file names that are not the tree's: system and library headers, Debian's
# data files, files the build or a tool makes
EXTERNAL = {
    "ini.h", "stdio.h", "stdlib.h", "string.h", "math.h", "immintrin.h",
    "arm_neon.h", "riscv_vector.h", "sys/auxv.h", "cpuid.h", "dlfcn.h",
    "elf.h", "pthread.h", "microhttpd.h", "json.h", "UnicodeData.txt",
    "PropList.txt", "unicode_table.h", "page_html.c", "table.c", "picolm.pc",
    "libinih.a", "libpicolm.a", "ggml.c", "ggml-quants.c", "llama.cpp",
    "llama-vocab.cpp", "unicode.cpp", "llama-sampling.cpp", "ops.cpp",
    "simd-mappings.h", "iqk_mul_mat.cpp", "convert_hf_to_gguf.py",
    "gguf.py", "bench.js", "package.json", "index.js", "x.c", "app.c",
    "my.c", "myformat.c", "mybackend.c", "plugin.so", "e_exp2f_data.c",
    "qemu-plugin.h", "test-chat-template.cpp", "llama.h",
}
# History belongs in git: none of these in the text (built so that this
# file does not match itself).
MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)(?:uary|ruary|ch|il|e|y|ust|tember|ober|ember)?"
HISTORY = [re.compile(r"\b[s]essions? [0-9]|\b[i]ssues? [0-9]|/work/[a-z]", re.I),
           re.compile(r"\b[0-9]{1,2} %s\b|\b%s (?:[0-9]{1,2}|20[0-9]{2})\b|\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b" % (MONTH, MONTH))]

ID = r"[A-Za-z_][A-Za-z0-9_]*"
PATHCH = r"[A-Za-z0-9_.+/-]"
PATH_RE = re.compile(r"(?<![A-Za-z0-9_./$-])((?:%s)/%s*)" % ("|".join(re.escape(t) for t in TOP), PATHCH))
BARE_RE = re.compile(r"(?<![A-Za-z0-9_./$<-])([A-Za-z0-9_][A-Za-z0-9_-]*\.(?:c|h|mk|sh|py|awk|mjs|ini|md))(?![A-Za-z0-9_/-])")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
FILE_TOK = r"(?:(?:%s)/%s*|[A-Za-z0-9_][A-Za-z0-9_-]*\.(?:c|h|mk|sh|py))" % ("|".join(re.escape(t) for t in TOP), PATHCH)
# `FILE: ident` / FILE:ident, FILE then `, `ident``, `ident` (FILE), ident() in FILE
SYM_AFTER = re.compile(r"`?(%s)`?:[ ]?(`?)(%s)(\(\))?(`?)" % (FILE_TOK, ID))
SYM_COMMA = re.compile(r"`?(%s)`?, `(%s)(?:\(\))?`" % (FILE_TOK, ID))
# docs/perf.md, "Build flags": a section by (the start of) its heading
SECTION = re.compile(r"((?:docs/)?[a-z]+\.md)[,:]? (?:section )?\"([^\"]+)")
SNAKE = r"[a-z][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]"
SYM_BEFORE = re.compile(r"(?:`(%s)(?:\(\))?`|\b(%s)(?:\(\))?) \(`?(%s)`?[,;)]" % (ID, SNAKE, FILE_TOK))
SYM_IN = re.compile(r"(?:`(%s)(?:\(\))?`|\b(%s)\(\)|\b(%s)) in `?(%s)`?" % (ID, ID, SNAKE, FILE_TOK))
SYM_PAREN = re.compile(r"`?(%s)`? \(`?(%s)(?:\(\))?`?[,;)]" % (FILE_TOK, SNAKE))


STATS = {"files": 0, "paths": 0, "symbols": 0, "links": 0, "unchecked": 0}
VERBOSE = bool(os.environ.get("VERBOSE"))


class Tree:
    def __init__(self, root):
        self.root = root
        self.by_base = {}
        self.files = []
        for d, dirs, files in os.walk(root):
            rel = os.path.relpath(d, root)
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not (rel == "." and x.startswith("build"))]
            for f in files:
                p = os.path.normpath(os.path.join(rel, f))
                self.files.append(p)
                self.by_base.setdefault(f, []).append(p)
        self.cache = {}
        self.shared = None

    def add_shared(self, d):
        if os.path.isdir(d):
            self.shared = Tree(d)

    def exists(self, p):
        return os.path.exists(os.path.join(self.root, p))

    def text(self, p):
        if p not in self.cache:
            try:
                with open(os.path.join(self.root, p), encoding="utf-8", errors="replace") as f:
                    self.cache[p] = f.read()
            except OSError:
                self.cache[p] = ""
        return self.cache[p]

    def targets(self, name):
        """the files a path or a bare file name stands for (a directory: its files)"""
        name = name.rstrip("/")
        if "/" in name:
            if os.path.isdir(os.path.join(self.root, name)):
                return [f for f in self.files if f.startswith(name + "/")]
            return [name] if self.exists(name) else []
        return self.by_base.get(name, [])

    def has_symbol(self, name, ident):
        w = re.compile(r"\b%s\b" % re.escape(ident))
        return any(w.search(self.text(f)) for f in self.targets(name))


def comment_lines(path, text):
    """(line number, text) of each comment line of a source file"""
    kind = CODE_EXT.get(os.path.splitext(path)[1])
    if os.path.basename(path) == "Makefile" or path == os.path.join(".ci", "run"):
        kind = "hash"
    if path.endswith("conf/README"):
        kind = "all"
    out = []
    if kind == "c":
        for m in re.finditer(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", text, re.S):
            s = m.group(0)
            if s[0] in "\"'":
                continue
            line = text.count("\n", 0, m.start()) + 1
            for i, l in enumerate(s.split("\n")):
                out.append((line + i, l))
    elif kind in ("hash", "ini"):
        mark = "#;" if kind == "ini" else "#"
        for i, l in enumerate(text.split("\n"), 1):
            # a # that starts a comment: line start or after a blank, not in $#, ${#
            bare = re.sub(r"\"(?:\\.|[^\"\\])*\"|'[^']*'", lambda q: " " * len(q.group(0)), l)
            m = re.search(r"(?:^|\s)[%s]" % mark, bare)
            if m:
                out.append((i, l[m.end() - 1:]))
    elif kind == "all":
        out = list(enumerate(text.split("\n"), 1))
    return out


def slug(h):
    h = h.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(tree, md):
    a = set()
    for l in tree.text(md).split("\n"):
        m = re.match(r"#+ (.*)", l)
        if m:
            a.add(slug(m.group(1)))
    return a


def headings(tree, md):
    return [re.sub(r"[`*]", "", l.lstrip("#").strip()).lower() for l in tree.text(md).split("\n") if re.match(r"#+ ", l)]


def check_line(tree, src, n, line, md, errs):
    def err(msg):
        errs.append("%s:%d: %s" % (src, n, msg))

    for h in HISTORY:
        m = h.search(line)
        if m:
            err("history in the text (%r): dates, sessions, issues and machine paths belong in git" % m.group(0).strip())
    for m in PATH_RE.finditer(line):
        p = m.group(1).rstrip(".,:;")
        nxt = line[m.end():m.end() + 1]
        if nxt in "<*{$" and nxt != "" or re.search(r"[A-Z]{4,}|\.\.\.|XX", p):
            continue  # a pattern or placeholder: backends/<name>/, conf/*.ini, tests/t_NAME.sh
        STATS["paths"] += 1
        if os.path.basename(p).startswith("my") or os.path.basename(p) in EXTERNAL or tree.exists(p) or tree.exists(p + ".c") or tree.exists(p + ".sh"):
            continue  # your own file, or a test program (built from its .c)
        err("names %s, which does not exist" % p)
    for m in BARE_RE.finditer(line):
        f = m.group(1)
        STATS["paths"] += 1
        if f in EXTERNAL or f.startswith(("my", "your", "foo")) or re.search(r"[A-Z]{4,}", f):
            continue
        if not tree.by_base.get(f) and not (tree.shared and tree.shared.by_base.get(f)):
            if tree.shared is None:  # may be one of the shared data's files: cannot tell
                STATS["unchecked"] += 1
                continue
            err("names %s, which no file of the tree is" % f)
    found = []
    for m in SYM_AFTER.finditer(line):
        if m.group(2) or m.group(4) or "_" in m.group(3):  # backticked, called, or snake_case
            found.append((m.group(1), m.group(3)))
    for m in SYM_COMMA.finditer(line):
        found.append((m.group(1), m.group(2)))
    for m in SYM_BEFORE.finditer(line):
        found.append((m.group(3), m.group(1) or m.group(2)))
    for m in SYM_IN.finditer(line):
        found.append((m.group(4), m.group(1) or m.group(2) or m.group(3)))
    for m in SYM_PAREN.finditer(line):
        found.append((m.group(1), m.group(2)))
    for f, ident in found:
        f = f.rstrip(".,:;")
        STATS["symbols"] += 1
        if VERBOSE:
            print("%s:%d: symbol %s in %s" % (src, n, ident, f))
        if not tree.targets(f) or ident.endswith("_") or f.endswith((".md", ".ini", ".sh")) and ident.islower() and "_" not in ident:
            continue  # a missing file is reported above
        if not tree.has_symbol(f, ident):
            err("names %s in %s, which has no such symbol" % (ident, f))
    for m in SECTION.finditer(line):
        doc = m.group(1) if m.group(1).startswith("docs/") or m.group(1) == "README.md" else "docs/" + m.group(1)
        title = m.group(2).strip().lower()
        STATS["links"] += 1
        if tree.exists(doc) and not any(h.startswith(title) or slug(title) == h for h in headings(tree, doc)):
            err("names the section \"%s\" of %s, which has no such heading" % (m.group(2), doc))
    if md:
        for m in LINK_RE.finditer(line):
            t = m.group(1)
            if re.match(r"[a-z]+:", t):
                continue
            STATS["links"] += 1
            path, _, frag = t.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(src), path)) if path else src
            if path and not tree.exists(target):
                err("links to %s, which does not exist" % t)
            elif frag and target.endswith(".md") and frag not in anchors(tree, target):
                err("links to %s, but %s has no heading #%s" % (t, target, frag))


def main(argv):
    root = "."
    if len(argv) > 1 and argv[1] == "--root":
        root, argv = argv[2], argv[2:]
    tree = Tree(root)
    tree.add_shared(os.path.join(root, os.environ.get("PICOLM_SHARED", "../shared")))
    files = argv[1:]
    if not files:
        files = ["README.md"] + [f for f in tree.files if f.startswith("docs/") and f.endswith(".md")]
        files += [f for f in tree.files
                  if f.split("/")[0] in TOP and f.split("/")[0] != "docs" and "/corpus/" not in f
                  and (os.path.splitext(f)[1] in CODE_EXT or f in ("conf/README", ".ci/run"))]
        files.append("Makefile")
    errs = []
    for src in sorted(set(files)):
        text = tree.text(src)
        md = src.endswith(".md")
        STATS["files"] += 1
        lines = list(enumerate(text.split("\n"), 1)) if md else comment_lines(src, text)
        for n, line in lines:
            check_line(tree, src, n, line, md, errs)
    for e in errs:
        print(e)
    print("# %(files)d files read: %(paths)d file names, %(symbols)d symbols with their file, %(links)d links checked" % STATS)
    if STATS["unchecked"]:
        print("# SKIP: %d bare file names not found in the tree left unchecked: the shared data is absent" % STATS["unchecked"])
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
