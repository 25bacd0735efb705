/* Plugin loader and dispatch tables: see plugins.h. */
#include "plugins.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu.h"
#include "gguf.h"
#include "ops.h"
#include "threadpool.h"
#include "util.h"

/* ---------------- host API handed to plugins ---------------- */

static void host_log(int level, const char *msg) {
    static const char *lv[] = {"error", "warning", "info", "debug"};
    level = level < 0 ? 0 : level > 3 ? 3 : level;
    pl_log(level, "plugin %s: %s", lv[level], msg);
}

static void *host_alloc(size_t size, size_t align) {
    if (align < sizeof(void *)) align = sizeof(void *);
    if (align & (align - 1)) return NULL;
    size_t n = (size + align - 1) / align * align;
    if (n < size) return NULL;
    void *p = aligned_alloc(align, n ? n : align);
    if (p) memset(p, 0, n);
    return p;
}

static void host_free(void *p) { free(p); }

/* threadpool_run runs inline when the pool is NULL */
static void host_parallel_for(const picolm_host *h, int64_t n, picolm_task_fn fn, void *ctx) {
    threadpool_run(h->core_data, n, fn, ctx);
}

void registry_set_pool(pl_registry *r, struct threadpool *pool) {
    r->host.core_data = pool;
    r->host.n_threads = threadpool_size(pool);
}

/* ---------------- loading ---------------- */

static pl_plugin *push(pl_registry *r) {
    if (r->n == r->cap) {
        int nc = r->cap ? r->cap * 2 : 16;
        pl_plugin *p = realloc(r->items, (size_t)nc * sizeof *p);
        if (!p) return NULL;
        r->items = p;
        r->cap = nc;
    }
    pl_plugin *p = &r->items[r->n++];
    memset(p, 0, sizeof *p);
    return p;
}

static void reject(pl_plugin *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, sizeof p->why, fmt, ap);
    va_end(ap);
    p->ok = 0;
    if (p->handle) dlclose(p->handle);
    p->handle = NULL;
    p->desc = NULL;
}

static const char *kind_name(uint32_t k) {
    return k == PICOLM_KIND_FORMAT ? "format" : k == PICOLM_KIND_BACKEND ? "backend" : k == PICOLM_KIND_SAMPLER ? "sampler" : "?";
}

/* Entry i of a plugin's table: the table's own entry size is the stride,
   so a plugin built against an older (shorter) struct still indexes right. */
static const picolm_format *format_at(const picolm_format_vtable *v, uint32_t i) {
    return (const picolm_format *)((const char *)v->formats + (size_t)i * v->format_size);
}
static const picolm_kernel *kernel_at(const picolm_backend_vtable *v, uint32_t i) {
    return (const picolm_kernel *)((const char *)v->kernels + (size_t)i * v->kernel_size);
}
static const picolm_act_quant *act_quant_at(const picolm_backend_vtable *v, uint32_t i) {
    return (const picolm_act_quant *)((const char *)v->act_quants + (size_t)i * v->act_quant_size);
}

/* A format's row group (1 = plain rows). */
static uint32_t format_row_group(const picolm_format *f) { return f->row_group ? f->row_group : 1; }

/* The v1 size of a struct: through its last v1 member.  It stays the
   minimum a plugin must provide when members are appended later (the core
   then reads those only where a plugin's size covers them). */
#define V1_SIZE(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))
#define V1_PLUGIN V1_SIZE(picolm_plugin, vtable)
#define V1_FORMAT_VTABLE V1_SIZE(picolm_format_vtable, formats)
#define V1_FORMAT V1_SIZE(picolm_format, to_base)
#define V1_BACKEND_VTABLE V1_SIZE(picolm_backend_vtable, attn_f16)
#define V1_KERNEL V1_SIZE(picolm_kernel, gemm)
#define V1_ACT_QUANT V1_SIZE(picolm_act_quant, quantize_row)
#define V1_SAMPLER_VTABLE V1_SIZE(picolm_sampler_vtable, reset)

/* A size a plugin gives for one of the ABI's structs covers v1's members. */
static int size_ok(uint32_t have, size_t need, const char *what, char *why, size_t n) {
    if (have >= need) return 1;
    snprintf(why, n, "%s too small (%u bytes, ABI v1 needs %zu)", what, have, need);
    return 0;
}

/* The vtable and its tables cover v1 and are well formed. */
static int vtable_ok(const picolm_plugin *d, char *why, size_t n) {
    if (!d->vtable) { snprintf(why, n, "descriptor has no vtable"); return 0; }
    if (d->kind == PICOLM_KIND_FORMAT) {
        const picolm_format_vtable *v = d->vtable;
        if (!size_ok(v->struct_size, V1_FORMAT_VTABLE, "format vtable", why, n) ||
            (v->n_formats && !size_ok(v->format_size, V1_FORMAT, "format table entry", why, n)))
            return 0;
        if (v->n_formats && !v->formats) { snprintf(why, n, "format table missing (%u entries)", v->n_formats); return 0; }
        for (uint32_t i = 0; i < v->n_formats; i++) {
            const picolm_format *f = format_at(v, i);
            if (!f->name || !f->block_size || !f->type_size || !f->dequantize_row || f->type_id >= PL_TYPE_MAX) {
                snprintf(why, n, "format #%u (%s) is missing a required member or has an invalid type id", i, f->name ? f->name : "?");
                return 0;
            }
            if ((f->flags & PICOLM_FMT_WEIGHT) && !f->vec_dot) {
                snprintf(why, n, "weight format %s has no reference vec_dot", f->name);
                return 0;
            }
            const uint32_t g = format_row_group(f);
            if (g != 1 && g != 2 && g != 4 && g != 8 && g != 16) {
                snprintf(why, n, "format %s has row_group %u (allowed: 0, 1, 2, 4, 8, 16)", f->name, g);
                return 0;
            }
        }
    } else if (d->kind == PICOLM_KIND_BACKEND) {
        const picolm_backend_vtable *v = d->vtable;
        if (!size_ok(v->struct_size, V1_BACKEND_VTABLE, "backend vtable", why, n) ||
            (v->n_kernels && !size_ok(v->kernel_size, V1_KERNEL, "kernel table entry", why, n)) ||
            (v->n_act_quants && !size_ok(v->act_quant_size, V1_ACT_QUANT, "act_quant table entry", why, n)))
            return 0;
        if ((v->n_kernels && !v->kernels) || (v->n_act_quants && !v->act_quants)) {
            snprintf(why, n, "backend kernel tables malformed (%u kernels, %u act_quants, an array missing)", v->n_kernels, v->n_act_quants);
            return 0;
        }
        for (uint32_t i = 0; i < v->n_kernels; i++) {
            const picolm_kernel *k = kernel_at(v, i);
            if (k->type_id >= PL_TYPE_MAX || k->vec_dot_type >= PL_TYPE_MAX || !k->vec_dot) {
                snprintf(why, n, "kernel #%u is missing vec_dot or has an invalid type id", i);
                return 0;
            }
        }
    } else {
        const picolm_sampler_vtable *v = d->vtable;
        if (!size_ok(v->struct_size, V1_SAMPLER_VTABLE, "sampler vtable", why, n)) return 0;
        if (!v->create || !v->apply || (v->role != PICOLM_SAMPLER_PROCESS && v->role != PICOLM_SAMPLER_SELECT)) {
            snprintf(why, n, "sampler vtable lacks create/apply or has an invalid role");
            return 0;
        }
    }
    return 1;
}

static void copy_str(char *dst, size_t n, const char *s) { snprintf(dst, n, "%s", s ? s : ""); }

/* ---------------- the plugin note (read from the file, never run) ---------------- */

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__i386__)
#define HOST_MACHINE EM_386
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__arm__)
#define HOST_MACHINE EM_ARM
#elif defined(__riscv)
#define HOST_MACHINE EM_RISCV
#else
#define HOST_MACHINE EM_NONE /* unknown: only the class is compared */
#endif
#define HOST_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)
#define NOTE_SEGMENT_MAX 65536u /* larger PT_NOTE segments are not read */
#define PHDR_MAX 256u

static uint32_t rd16(const unsigned char *b) { return (uint32_t)b[0] | (uint32_t)b[1] << 8; }
static uint32_t rd32(const unsigned char *b) { return rd16(b) | rd16(b + 2) << 16; }
static uint64_t rd64(const unsigned char *b) { return (uint64_t)rd32(b) | (uint64_t)rd32(b + 4) << 32; }

/* Exactly n bytes at off, or -1. */
static int read_at(int fd, uint64_t off, void *buf, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (k <= 0) return -1;
        got += (size_t)k;
    }
    return 0;
}

static const char *machine_name(uint32_t m) {
    return m == EM_X86_64 ? "x86-64" : m == EM_386 ? "i386" : m == EM_AARCH64 ? "AArch64" : m == EM_ARM ? "ARM"
         : m == EM_RISCV ? "RISC-V" : "another machine";
}

/* A terminated, non-empty name of letters, digits, _ - . (safe to print). */
static int name_ok(const picolm_note *n) {
    const char *end = memchr(n->name, 0, sizeof n->name);
    if (!end || end == n->name) return 0;
    for (const char *c = n->name; c < end; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '.'))
            return 0;
    return 1;
}

/* Check a note's facts on their own (any source: a file or a built-in
   descriptor).  0 or -1 with the reason in why. */
static int note_valid(const picolm_note *n, char *why, size_t wn) {
    if (n->abi_version != PICOLM_ABI_VERSION) {
        snprintf(why, wn, "ABI version %u, this picolm speaks ABI %u", n->abi_version, PICOLM_ABI_VERSION);
        return -1;
    }
    if (n->kind < PICOLM_KIND_FORMAT || n->kind > PICOLM_KIND_SAMPLER) { snprintf(why, wn, "unknown plugin kind %u", n->kind); return -1; }
    if (!size_ok(n->desc_size, V1_PLUGIN, "descriptor", why, wn)) return -1;
    if (!memchr(n->name, 0, sizeof n->name) || !n->name[0]) { snprintf(why, wn, "the note lacks a name (or it is not terminated)"); return -1; }
    if (!name_ok(n)) { snprintf(why, wn, "the note's name has a character other than letters, digits, _ - ."); return -1; }
    return 0;
}

/* Decode one picolm note's descriptor bytes (little-endian words); checked
   later by note_valid. */
static int note_decode(const unsigned char *d, uint64_t size, picolm_note *n, char *why, size_t wn) {
    memset(n, 0, sizeof *n);
    if (size < 4) { snprintf(why, wn, "picolm note truncated (%" PRIu64 " bytes)", size); return -1; }
    n->abi_version = rd32(d);
    if (n->abi_version != PICOLM_ABI_VERSION) return 0; /* another layout: note_valid names the version */
    if (size < sizeof *n) {
        snprintf(why, wn, "picolm note truncated (%" PRIu64 " bytes, ABI %u needs %zu)", size, PICOLM_ABI_VERSION, sizeof *n);
        return -1;
    }
    n->kind = rd32(d + 4);
    n->desc_size = rd32(d + 8);
    n->cpu_required_lo = rd32(d + 12);
    n->cpu_required_hi = rd32(d + 16);
    memcpy(n->name, d + 20, sizeof n->name);
    return 0;
}

/* Walk the notes of one PT_NOTE segment (records aligned to 4 bytes, or 8
   where the segment says so); counts picolm notes in *found and decodes the
   first.  -1 on a malformed segment or a truncated picolm note. */
static int notes_scan(const unsigned char *b, uint64_t size, uint64_t align, picolm_note *n, int *found, char *why, size_t wn) {
    uint64_t pos = 0;
    const uint64_t a = align == 8 ? 8 : 4;
#define ALIGN_UP(x) (((x) + a - 1) & ~(a - 1))
    while (size - pos >= 12) {
        const uint64_t namesz = rd32(b + pos), descsz = rd32(b + pos + 4), type = rd32(b + pos + 8);
        const uint64_t name_at = pos + 12, desc_at = ALIGN_UP(name_at + namesz);
        if (namesz > size - name_at || desc_at > size || descsz > size - desc_at) {
            snprintf(why, wn, "malformed ELF note (sizes %" PRIu64 "/%" PRIu64 " past the segment's %" PRIu64 " bytes)", namesz, descsz, size);
            return -1;
        }
        if (namesz == sizeof PICOLM_NOTE_NAME && !memcmp(b + name_at, PICOLM_NOTE_NAME, namesz) && type == PICOLM_NOTE_TYPE) {
            if (++*found == 1 && note_decode(b + desc_at, descsz, n, why, wn)) return -1;
        }
        const uint64_t next = ALIGN_UP(desc_at + descsz);
        if (next > size) break; /* the last note's padding may be missing */
        pos = next;
    }
#undef ALIGN_UP
    return 0;
}

int registry_read_note(const char *path, picolm_note *n, char *why, size_t wn) {
    memset(n, 0, sizeof *n);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) { snprintf(why, wn, "cannot open: %s", strerror(errno)); return -1; }
    int rc = -1, found = 0;
    unsigned char eh[64], ph[56], *seg = NULL;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) { snprintf(why, wn, "not a regular file"); goto done; }
    const uint64_t fsize = (uint64_t)st.st_size;
    if (fsize < 52 || read_at(fd, 0, eh, 52) || memcmp(eh, ELFMAG, SELFMAG)) { snprintf(why, wn, "not an ELF file"); goto done; }
    const int cls = eh[EI_CLASS], is64 = cls == ELFCLASS64;
    if (cls != ELFCLASS32 && cls != ELFCLASS64) { snprintf(why, wn, "unknown ELF class %d", cls); goto done; }
    if (eh[EI_DATA] != ELFDATA2LSB) { snprintf(why, wn, "not a little-endian ELF file"); goto done; }
    if (is64 && (fsize < 64 || read_at(fd, 0, eh, 64))) { snprintf(why, wn, "truncated ELF header"); goto done; }
    const uint32_t type = rd16(eh + 16), machine = rd16(eh + 18);
    if (type != ET_DYN) { snprintf(why, wn, "not a shared object (ELF type %u)", type); goto done; }
    const uint64_t phoff = is64 ? rd64(eh + 32) : rd32(eh + 28);
    const uint32_t phentsize = rd16(eh + (is64 ? 54 : 42)), phnum = rd16(eh + (is64 ? 56 : 44));
    const uint32_t need = is64 ? 56 : 32;
    if (phentsize < need || phnum == 0 || phnum > PHDR_MAX || phoff > fsize || (uint64_t)phnum * phentsize > fsize - phoff) {
        snprintf(why, wn, "malformed ELF program headers");
        goto done;
    }
    for (uint32_t i = 0; i < phnum; i++) {
        if (read_at(fd, phoff + (uint64_t)i * phentsize, ph, need)) { snprintf(why, wn, "cannot read the program headers"); goto done; }
        if (rd32(ph) != PT_NOTE) continue;
        const uint64_t off = is64 ? rd64(ph + 8) : rd32(ph + 4), size = is64 ? rd64(ph + 32) : rd32(ph + 16);
        const uint64_t align = is64 ? rd64(ph + 48) : rd32(ph + 28);
        if (off > fsize || size > fsize - off) { snprintf(why, wn, "ELF note segment outside the file"); goto done; }
        if (size > NOTE_SEGMENT_MAX) continue;
        free(seg);
        if (!(seg = malloc(size ? size : 1)) || read_at(fd, off, seg, size)) { snprintf(why, wn, "cannot read an ELF note segment"); goto done; }
        if (notes_scan(seg, size, align, n, &found, why, wn)) goto done;
    }
    if (found == 0) snprintf(why, wn, "no picolm note: not a picolm plugin (or built without PICOLM_PLUGIN_NOTE)");
    else if (found > 1) snprintf(why, wn, "%d picolm notes (a plugin file has one)", found);
    else if (cls != HOST_CLASS || (HOST_MACHINE != EM_NONE && machine != HOST_MACHINE)) /* *n stays filled in */
        snprintf(why, wn, "built for %s (%d-bit), this is %s (%d-bit)", machine_name(machine), is64 ? 64 : 32, machine_name(HOST_MACHINE),
                 HOST_CLASS == ELFCLASS64 ? 64 : 32);
    else rc = note_valid(n, why, wn);
done:
    free(seg);
    close(fd);
    return rc;
}

/* ---------------- the checks every plugin goes through ---------------- */

static uint64_t note_cpu(const picolm_note *n) { return (uint64_t)n->cpu_required_hi << 32 | n->cpu_required_lo; }

/* Before any code of the plugin runs: its note is valid, no accepted
   plugin of the same kind has its name, the CPU has what it needs. */
static int check_note(pl_registry *r, pl_plugin *p, const picolm_note *n) {
    char why[256];
    if (note_valid(n, why, sizeof why)) { reject(p, "%s", why); return -1; }
    p->kind = n->kind;
    copy_str(p->name, sizeof p->name, n->name);
    p->cpu_required = note_cpu(n);
    for (int i = 0; i < r->n; i++)
        if (&r->items[i] != p && r->items[i].ok && r->items[i].kind == p->kind && !strcmp(r->items[i].name, p->name)) {
            reject(p, "by %s", r->items[i].path);
            p->shadowed = 1;
            return -1;
        }
    const uint64_t missing = p->cpu_required & ~r->cpu;
    if (missing) {
        cpu_features_str(missing, why, sizeof why);
        reject(p, "CPU lacks required feature(s): %s", why[0] ? why : "(unknown bits)");
        return -1;
    }
    return 0;
}

/* After check_note: the descriptor agrees with the note and is well formed;
   then (only then) the plugin's init runs. */
static int accept_desc(pl_registry *r, pl_plugin *p, const picolm_note *n, const picolm_plugin *d) {
    if (!d) { reject(p, "entry symbol returned no descriptor"); return -1; }
    if (d->abi_version != n->abi_version || d->struct_size != n->desc_size || d->kind != n->kind || !d->name ||
        strcmp(d->name, n->name) || d->cpu_required != note_cpu(n)) {
        reject(p, "the descriptor disagrees with the note (ABI %u/%u, size %u/%u, kind %u/%u, name '%.40s'/'%s', cpu %s)",
               d->abi_version, n->abi_version, d->struct_size, n->desc_size, d->kind, n->kind, d->name ? d->name : "(none)", n->name,
               d->cpu_required == note_cpu(n) ? "same" : "differs");
        return -1;
    }
    if (!d->version) { reject(p, "descriptor lacks a version"); return -1; }
    copy_str(p->version, sizeof p->version, d->version);
    copy_str(p->description, sizeof p->description, d->description);
    char why[256];
    if (!vtable_ok(d, why, sizeof why)) { reject(p, "%s", why); return -1; }
    /* Only now may plugin code run. */
    if (d->init) {
        char e[256] = "";
        if (d->init(&r->host, e, sizeof e)) { reject(p, "init failed: %s", e[0] ? e : "(no message)"); return -1; }
        /* an init may fill the tables (backends/level.h): check them again */
        if (!vtable_ok(d, why, sizeof why)) { reject(p, "after init: %s", why); return -1; }
    }
    p->desc = d;
    p->ok = 1;
    if (d->kind == PICOLM_KIND_BACKEND) {
        const picolm_backend_vtable *v = d->vtable;
        p->score = d->priority + (v->score ? v->score(r->cpu) : 0);
    }
    return 0;
}

int registry_load_file(pl_registry *r, const char *path) {
    pl_plugin *p = push(r);
    if (!p) return -1;
    const int idx = r->n - 1;
    copy_str(p->path, sizeof p->path, path);
    picolm_note n;
    char why[256];
    if (registry_read_note(path, &n, why, sizeof why)) {
        /* a whole note of this ABI (built for another machine, say): list it under its kind and name */
        if (n.abi_version == PICOLM_ABI_VERSION && n.kind >= PICOLM_KIND_FORMAT && n.kind <= PICOLM_KIND_SAMPLER && name_ok(&n)) {
            p->kind = n.kind;
            copy_str(p->name, sizeof p->name, n.name);
            p->cpu_required = note_cpu(&n);
        } else {
            p->skipped = 1; /* no note this picolm can read */
        }
        reject(p, "%s", why);
        return idx;
    }
    if (check_note(r, p, &n)) return idx;
    /* RTLD_LOCAL: plugins cannot see each other's symbols or the core's. */
    p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p->handle) {
        const char *e = dlerror();
        reject(p, "cannot load: %s", e ? e : "dlopen failed");
        return idx;
    }
    picolm_entry_fn entry;
    *(void **)(&entry) = dlsym(p->handle, PICOLM_ENTRY);
    if (!entry) { reject(p, "no entry symbol '%s': not a picolm plugin", PICOLM_ENTRY); return idx; }
    accept_desc(r, p, &n, entry());
    return idx;
}

int registry_add_builtin(pl_registry *r, const picolm_plugin *d, const char *label) {
    pl_plugin *p = push(r);
    if (!p) return -1;
    const int idx = r->n - 1;
    snprintf(p->path, sizeof p->path, "(built in%s%s)", label && label[0] ? ": " : "", label ? label : "");
    if (!d) { reject(p, "no descriptor"); return idx; }
    /* the note a file would carry, checked the same way */
    picolm_note n = {d->abi_version, d->kind, d->struct_size, (uint32_t)d->cpu_required, (uint32_t)(d->cpu_required >> 32), ""};
    if (d->abi_version == PICOLM_ABI_VERSION) copy_str(n.name, sizeof n.name, d->name);
    if (check_note(r, p, &n)) return idx;
    accept_desc(r, p, &n, d);
    return idx;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void load_dir(pl_registry *r, const char *dir) {
    DIR *d = opendir(dir);
    size_t used = strlen(r->searched);
    snprintf(r->searched + used, sizeof r->searched - used, "%s%s%s", used ? ", " : "", dir, d ? "" : " (missing)");
    if (!d) return;
    char *names[512];
    int n = 0, more = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (ends_with(e->d_name, ".so")) {
            if (n == 512) { more++; continue; }
            if ((names[n] = strdup(e->d_name))) n++;
        }
    closedir(d);
    if (more) { /* say so rather than skip them silently */
        used = strlen(r->searched);
        snprintf(r->searched + used, sizeof r->searched - used, " (%d more .so files past the first 512 not read)", more);
    }
    qsort(names, (size_t)n, sizeof *names, cmp_str); /* deterministic order */
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        registry_load_file(r, path);
        free(names[i]);
    }
}

/* The plugins a static build links in (mk/static.mk generates the
   NULL-terminated table of their entries); weak, so that a dynamic build
   has none. */
extern const picolm_entry_fn picolm_builtin_plugins[] __attribute__((weak));

static void load_builtins(pl_registry *r) {
    size_t used = strlen(r->searched);
    snprintf(r->searched + used, sizeof r->searched - used, "%sbuilt in", used ? ", " : "");
    for (const picolm_entry_fn *e = picolm_builtin_plugins; *e; e++) registry_add_builtin(r, (*e)(), NULL);
}

static void exe_dir(char *buf, size_t n) {
    ssize_t len = readlink("/proc/self/exe", buf, n - 1);
    if (len <= 0) { snprintf(buf, n, "."); return; }
    buf[len] = 0;
    char *slash = strrchr(buf, '/');
    if (slash) *slash = 0;
}

void build_registry(pl_registry *r) {
    memset(r, 0, sizeof *r);
    r->cpu = cpu_probe();
    r->host.abi_version = PICOLM_ABI_VERSION;
    r->host.struct_size = sizeof(picolm_host);
    r->host.cpu_features = r->cpu;
    r->host.log = host_log;
    r->host.alloc = host_alloc;
    r->host.free = host_free;
    r->host.parallel_for = host_parallel_for;
    r->host.n_threads = 1;
    const cpu_id id = cpu_probe_id();
    r->host.cpu_vendor = id.vendor;
    r->host.cpu_family = id.family;
    r->host.cpu_model = id.model;
}

static void load_path_list(pl_registry *r, const char *list) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
        if (*tok) load_dir(r, tok);
}

int registry_load(pl_registry *r, const char *plugin_dir, char *err, size_t errlen) {
    build_registry(r);
    if (plugin_dir && plugin_dir[0]) load_path_list(r, plugin_dir);
    const char *env = getenv("PICOLM_PLUGIN_DIR");
    if (env && env[0]) load_path_list(r, env);
    if (picolm_builtin_plugins) {
        /* one file to copy onto a board: its own plugins stand in for the
           directories next to the executable (those above still shadow them) */
        load_builtins(r);
    } else {
        char ed[PATH_MAX], p[PATH_MAX + 32];
        exe_dir(ed, sizeof ed);
        snprintf(p, sizeof p, "%s/../plugins", ed);
        load_dir(r, p);
        snprintf(p, sizeof p, "%s/../lib/picolm", ed);
        load_dir(r, p);
    }
    int formats = 0;
    for (int i = 0; i < r->n; i++) formats += r->items[i].ok && r->items[i].kind == PICOLM_KIND_FORMAT;
    if (!formats) {
        snprintf(err, errlen, "no format plugins found (searched: %s); set plugin_dir in the INI or PICOLM_PLUGIN_DIR", r->searched);
        return -1;
    }
    return 0;
}

void free_registry(pl_registry *r) {
    for (int i = 0; i < r->n; i++) {
        if (r->items[i].desc && r->items[i].desc->fini) r->items[i].desc->fini();
        if (r->items[i].handle) dlclose(r->items[i].handle);
    }
    free(r->items);
    memset(r, 0, sizeof *r);
}

const pl_plugin *registry_find(const pl_registry *r, uint32_t kind, const char *name) {
    for (int i = 0; i < r->n; i++)
        if (r->items[i].ok && r->items[i].kind == kind && !strcmp(r->items[i].name, name)) return &r->items[i];
    return NULL;
}

/* ---------------- dispatch ---------------- */

#define FOR_FORMATS(v, f, i)                                                                       \
    for (uint32_t i = 0; i < (v)->n_formats; i++)                                                  \
        for (const picolm_format *f = format_at((v), i); f; f = NULL)
/* Every format f of every accepted format plugin p, in load order. */
#define FOR_LOADED_FORMATS(r, p, f)                                                                \
    for (int p##_i = 0; p##_i < (r)->n; p##_i++)                                                   \
        for (const pl_plugin *p = &(r)->items[p##_i]; p; p = NULL)                                 \
            if (p->ok && p->kind == PICOLM_KIND_FORMAT)                                            \
                FOR_FORMATS((const picolm_format_vtable *)p->desc->vtable, f, p##_j)

int dispatch_type_size(void *ctx, uint32_t type, uint32_t *block_size, uint32_t *type_size) {
    const pl_dispatch *d = ctx;
    if (type >= PL_TYPE_MAX || !d->types[type].fmt) return 0;
    *block_size = d->types[type].fmt->block_size;
    *type_size = d->types[type].fmt->type_size;
    return 1;
}

static const pl_plugin *pick_backend(const pl_registry *r, const char *name, char *err, size_t errlen) {
    const pl_plugin *best = NULL;
    if (!name || !name[0] || !strcmp(name, "auto")) {
        for (int i = 0; i < r->n; i++)
            if (r->items[i].ok && r->items[i].kind == PICOLM_KIND_BACKEND && (!best || r->items[i].score > best->score))
                best = &r->items[i];
        return best; /* NULL is fine: reference kernels only */
    }
    if (!strcmp(name, "reference")) return NULL; /* the format plugins' portable code only */
    if ((best = registry_find(r, PICOLM_KIND_BACKEND, name))) return best;
    for (int i = 0; i < r->n; i++)
        if (r->items[i].kind == PICOLM_KIND_BACKEND && !strcmp(r->items[i].name, name)) {
            snprintf(err, errlen, "backend '%s' (%s) cannot be used: %s", name, r->items[i].path, r->items[i].why);
            return NULL;
        }
    char avail[512] = "";
    for (int i = 0; i < r->n; i++)
        if (r->items[i].ok && r->items[i].kind == PICOLM_KIND_BACKEND) {
            size_t u = strlen(avail);
            snprintf(avail + u, sizeof avail - u, "%s%s", u ? ", " : "", r->items[i].name);
        }
    snprintf(err, errlen, "no backend named '%s' (available: auto, reference%s%s)", name, avail[0] ? ", " : "", avail);
    return NULL;
}

int registry_dispatch(const pl_registry *r, const char *backend, pl_dispatch *d, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    err[0] = 0;
    const pl_plugin *be = pick_backend(r, backend, err, errlen);
    if (!be && err[0]) return -1;
    d->backend = be;
    /* 1. formats: the portable reference code, first provider wins */
    FOR_LOADED_FORMATS(r, p, f) {
        pl_type *t = &d->types[f->type_id];
        if (t->fmt) continue;
        t->fmt = f;
        t->row_group = format_row_group(f);
        t->fmt_plugin = p->name;
        t->vec_dot_type = f->vec_dot_type;
        t->vec_dot = f->vec_dot;
        t->kernel_from = "reference";
    }
    for (uint32_t ty = 0; ty < PL_TYPE_MAX; ty++) {
        pl_type *t = &d->types[ty];
        if (t->fmt && t->vec_dot && t->vec_dot_type < PL_TYPE_MAX && d->types[t->vec_dot_type].fmt)
            t->act_quant = d->types[t->vec_dot_type].fmt->quantize_row;
    }
    ref_ops(&d->ops);
    if (!be) return 0;
    /* 2. overlay the backend's kernels where their activation type can be produced */
    const picolm_backend_vtable *bv = be->desc->vtable;
    for (uint32_t i = 0; i < bv->n_kernels; i++) {
        const picolm_kernel *k = kernel_at(bv, i);
        pl_type *t = &d->types[k->type_id];
        if (!t->fmt) continue; /* a kernel for a format nobody describes */
        picolm_from_float_fn q = NULL;
        for (uint32_t j = 0; j < bv->n_act_quants; j++) {
            const picolm_act_quant *a = act_quant_at(bv, j);
            if (a->type_id == k->vec_dot_type) q = a->quantize_row;
        }
        if (!q && d->types[k->vec_dot_type].fmt) q = d->types[k->vec_dot_type].fmt->quantize_row;
        if (!q) continue;
        t->vec_dot = k->vec_dot;
        t->vec_dot_type = k->vec_dot_type;
        t->gemm = k->gemm;
        t->act_quant = q;
        t->kernel_from = be->name;
    }
    /* 2b. a layout the backend has no kernels for runs its base type's on
       groups unpacked by the format's to_base (same values, same kernels,
       same results), rather than the layout's slow reference code */
    FOR_LOADED_FORMATS(r, p, f) {
        pl_type *t = &d->types[f->type_id];
        if (t->fmt != f || !f->to_base || f->base_type >= PL_TYPE_MAX || strcmp(t->kernel_from, "reference")) continue;
        const pl_type *b = &d->types[f->base_type];
        if (!b->fmt || b->row_group != 1 || !strcmp(b->kernel_from, "reference") || b->fmt->block_size != f->block_size)
            continue;
        t->vec_dot = b->vec_dot;
        t->vec_dot_type = b->vec_dot_type;
        t->gemm = b->gemm;
        t->act_quant = b->act_quant;
        t->kernel_from = b->kernel_from;
        t->to_base = f->to_base;
        t->base_type = f->base_type;
    }
    /* 3. primitives */
#define OVERLAY(m) \
    if (bv->m) d->ops.m = bv->m
    OVERLAY(rmsnorm);
    OVERLAY(dot_f32);
    OVERLAY(dot_f32_f16);
    OVERLAY(scale_axpy_f16);
    OVERLAY(swiglu);
    OVERLAY(f32_to_f16);
    OVERLAY(attn_f16);
#undef OVERLAY
    return 0;
}

/* ---------------- report ---------------- */

const char *registry_type_name(const pl_registry *r, uint32_t type) {
    FOR_LOADED_FORMATS(r, p, f)
        if (f->type_id == type) return f->name;
    return gguf_type_name(type);
}

static const char *status_of(const pl_plugin *p, const char *chosen) {
    if (p->ok) return p->kind == PICOLM_KIND_BACKEND && chosen && !strcmp(chosen, p->name) ? "CHOSEN" : "ok";
    return p->skipped ? "skipped" : p->shadowed ? "shadowed" : "rejected";
}

void registry_print(const pl_registry *r, const char *chosen, void *stream) {
    FILE *out = stream;
    char feats[512], model[128];
    cpu_features_str(r->cpu, feats, sizeof feats);
    cpu_model_name(model, sizeof model);
    char vendor[32];
    cpu_vendor_str(r->host.cpu_vendor, vendor, sizeof vendor);
    fprintf(out, "CPU: %s [%s, family %u, model %u]\nfeatures: %s\nsearched: %s\n\n", model, vendor, r->host.cpu_family,
            r->host.cpu_model, feats, r->searched);
    /* columns as wide as the longest name and version */
    int wn = 10, wv = 8;
    for (int i = 0; i < r->n; i++) {
        const int ln = (int)strlen(r->items[i].name), lv = (int)strlen(r->items[i].version);
        if (ln > wn) wn = ln;
        if (lv > wv) wv = lv;
    }
    const int ind = 2 + wn + 1; /* details start under the version */
    static const uint32_t kinds[] = {PICOLM_KIND_BACKEND, PICOLM_KIND_FORMAT, PICOLM_KIND_SAMPLER, 0};
    for (int k = 0; k < 4; k++) {
        int any = 0;
        for (int i = 0; i < r->n; i++) any |= r->items[i].kind == kinds[k];
        if (!any && !kinds[k]) continue;
        fprintf(out, "%s:\n", kinds[k] ? kinds[k] == PICOLM_KIND_BACKEND ? "backends" : kinds[k] == PICOLM_KIND_FORMAT ? "formats" : "samplers"
                                       : "skipped (no picolm note this picolm can use)");
        for (int i = 0; i < r->n; i++) {
            const pl_plugin *p = &r->items[i];
            if (p->kind != kinds[k]) continue;
            if (!kinds[k]) { /* no usable note: nothing but the file and why */
                fprintf(out, "  %s\n%*swhy: %s\n", p->path, ind, "", p->why);
                continue;
            }
            char rest[320] = "", req[256];
            if (kinds[k] == PICOLM_KIND_BACKEND && p->ok) snprintf(rest, sizeof rest, " score %d", p->score);
            if (p->cpu_required) {
                cpu_features_str(p->cpu_required, req, sizeof req);
                size_t u = strlen(rest);
                snprintf(rest + u, sizeof rest - u, " needs [%s]", req);
            }
            fprintf(out, "  %-*s %-*s %-*s%s\n", wn, p->name, wv, p->version[0] ? p->version : "-", rest[0] ? 8 : 0,
                    status_of(p, chosen), rest);
            fprintf(out, "%*s%s\n", ind, "", p->path);
            if (!p->ok) fprintf(out, "%*s%s %s\n", ind, "", p->shadowed ? "shadowed" : "why:", p->why);
            if (p->ok && p->kind == PICOLM_KIND_FORMAT) {
                const picolm_format_vtable *v = p->desc->vtable;
                fprintf(out, "%*stypes:", ind, "");
                FOR_FORMATS(v, f, j) fprintf(out, " %s(%u)", f->name, f->type_id);
                fprintf(out, "\n");
            }
            if (p->ok && p->kind == PICOLM_KIND_BACKEND) {
                const picolm_backend_vtable *v = p->desc->vtable;
                fprintf(out, "%*skernels:", ind, "");
                for (uint32_t j = 0; j < v->n_kernels; j++) {
                    const picolm_kernel *kk = kernel_at(v, j);
                    fprintf(out, " %s%s", registry_type_name(r, kk->type_id), kk->gemm ? "+gemm" : "");
                }
                fprintf(out, "%s\n", v->n_kernels ? "" : " (none: reference fallback)");
            }
            if (p->ok && p->kind == PICOLM_KIND_SAMPLER && p->description[0]) fprintf(out, "%*s%s\n", ind, "", p->description);
        }
    }
}

void registry_log_unloaded(const pl_registry *r) {
    for (int i = 0; i < r->n; i++) {
        const pl_plugin *p = &r->items[i];
        if (p->ok) continue;
        if (p->skipped) pl_log(PICOLM_LOG_INFO, "plugin file %s skipped: %s", p->path, p->why);
        else pl_log(PICOLM_LOG_INFO, "%s plugin %s (%s) %s: %s", kind_name(p->kind), p->name, p->path,
                    p->shadowed ? "shadowed" : "rejected", p->why);
    }
}
