/* Plugin loader and dispatch tables: see plugins.h. */
#include "plugins.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"
#include "gguf.h"
#include "ops.h"
#include "threadpool.h"

/* ---------------- host API handed to plugins ---------------- */

static void host_log(int level, const char *msg) {
    static const char *lv[] = {"error", "warning", "info", "debug"};
    if (level > PICOLM_LOG_INFO && !getenv("PICOLM_DEBUG")) return;
    fprintf(stderr, "picolm: plugin %s: %s\n", lv[level < 0 ? 0 : level > 3 ? 3 : level], msg);
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

static struct threadpool *g_pool; /* the host's pool for parallel_for */

static void host_parallel_for(int64_t n, picolm_task_fn fn, void *ctx) {
    if (g_pool) threadpool_run(g_pool, n, fn, ctx);
    else if (n > 0) fn(ctx, 0, n, 0);
}

void registry_set_pool(pl_registry *r, struct threadpool *pool) {
    g_pool = pool;
    r->host.n_threads = pool ? threadpool_size(pool) : 1;
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

/* A format's row group (1 = plain rows); 1 when the plugin's struct predates the member. */
static uint32_t format_row_group(const picolm_format_vtable *v, const picolm_format *f) {
    if (v->format_size < offsetof(picolm_format, row_group) + sizeof f->row_group) return 1;
    return f->row_group ? f->row_group : 1;
}

/* The vtable must at least reach its first array/function members. */
static int vtable_ok(const picolm_plugin *d, char *why, size_t n) {
    if (!d->vtable) { snprintf(why, n, "descriptor has no vtable"); return 0; }
    if (d->kind == PICOLM_KIND_FORMAT) {
        const picolm_format_vtable *v = d->vtable;
        if (v->struct_size < sizeof(picolm_format_vtable)) { snprintf(why, n, "format vtable too small (%u bytes)", v->struct_size); return 0; }
        if (v->format_size < offsetof(picolm_format, vec_dot) + sizeof(void *) || (v->n_formats && !v->formats)) {
            snprintf(why, n, "format table malformed (entry size %u)", v->format_size);
            return 0;
        }
        for (uint32_t i = 0; i < v->n_formats; i++) {
            const picolm_format *f = format_at(v, i);
            if (!f->name || !f->block_size || !f->type_size || !f->dequantize_row || f->type_id >= PICOLM_TYPE_MAX) {
                snprintf(why, n, "format #%u (%s) is missing a required member or has an invalid type id", i, f->name ? f->name : "?");
                return 0;
            }
            if ((f->flags & PICOLM_FMT_WEIGHT) && !f->vec_dot) {
                snprintf(why, n, "weight format %s has no reference vec_dot", f->name);
                return 0;
            }
            const uint32_t g = format_row_group(v, f);
            if (g != 1 && g != 2 && g != 4 && g != 8 && g != 16) {
                snprintf(why, n, "format %s has row_group %u (allowed: 0, 1, 2, 4, 8, 16)", f->name, g);
                return 0;
            }
        }
    } else if (d->kind == PICOLM_KIND_BACKEND) {
        const picolm_backend_vtable *v = d->vtable;
        if (v->struct_size < offsetof(picolm_backend_vtable, score)) { snprintf(why, n, "backend vtable too small (%u bytes)", v->struct_size); return 0; }
        if ((v->n_kernels && (!v->kernels || v->kernel_size < offsetof(picolm_kernel, gemm))) ||
            (v->n_act_quants && (!v->act_quants || v->act_quant_size < sizeof(picolm_act_quant)))) {
            snprintf(why, n, "backend kernel tables malformed");
            return 0;
        }
        for (uint32_t i = 0; i < v->n_kernels; i++) {
            const picolm_kernel *k = kernel_at(v, i);
            if (k->type_id >= PICOLM_TYPE_MAX || k->vec_dot_type >= PICOLM_TYPE_MAX || !k->vec_dot) {
                snprintf(why, n, "kernel #%u is missing vec_dot or has an invalid type id", i);
                return 0;
            }
        }
    } else {
        const picolm_sampler_vtable *v = d->vtable;
        if (v->struct_size < offsetof(picolm_sampler_vtable, accept)) { snprintf(why, n, "sampler vtable too small (%u bytes)", v->struct_size); return 0; }
        if (!v->create || !v->apply || (v->role != PICOLM_SAMPLER_PROCESS && v->role != PICOLM_SAMPLER_SELECT)) {
            snprintf(why, n, "sampler vtable lacks create/apply or has an invalid role");
            return 0;
        }
    }
    return 1;
}

static void copy_str(char *dst, size_t n, const char *s) { snprintf(dst, n, "%s", s ? s : ""); }

static int check_entry(pl_registry *r, pl_plugin *p, picolm_entry_fn entry);

int registry_load_file(pl_registry *r, const char *path) {
    pl_plugin *p = push(r);
    if (!p) return -1;
    copy_str(p->path, sizeof p->path, path);
    /* RTLD_LOCAL: plugins cannot see each other's symbols or the core's. */
    p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p->handle) {
        const char *e = dlerror();
        reject(p, "cannot load: %s", e ? e : "dlopen failed");
        return r->n - 1;
    }
    picolm_entry_fn entry;
    *(void **)(&entry) = dlsym(p->handle, PICOLM_ENTRY);
    if (!entry) { reject(p, "no entry symbol '%s': not a picolm plugin", PICOLM_ENTRY); return r->n - 1; }
    return check_entry(r, p, entry);
}

/* The checks every plugin passes, loaded from a file or built in: call the
   entry, check the descriptor's head, shadowing, CPU features and vtable,
   and only then run its init.  p is the registry's last item. */
static int check_entry(pl_registry *r, pl_plugin *p, picolm_entry_fn entry) {
    const picolm_plugin *d = entry();
    if (!d) { reject(p, "entry symbol returned no descriptor"); return r->n - 1; }
    /* Check the fixed head before reading anything else. */
    if (d->abi_version != PICOLM_ABI_VERSION) {
        reject(p, "ABI version %u, this picolm speaks ABI %u", d->abi_version, PICOLM_ABI_VERSION);
        return r->n - 1;
    }
    if (d->struct_size < offsetof(picolm_plugin, vtable) + sizeof(void *)) {
        reject(p, "descriptor too small (%u bytes, need %zu)", d->struct_size, offsetof(picolm_plugin, vtable) + sizeof(void *));
        return r->n - 1;
    }
    if (d->kind < PICOLM_KIND_FORMAT || d->kind > PICOLM_KIND_SAMPLER) { reject(p, "unknown plugin kind %u", d->kind); return r->n - 1; }
    if (!d->name || !d->name[0] || !d->version) { reject(p, "descriptor lacks a name or version"); return r->n - 1; }
    p->kind = d->kind;
    copy_str(p->name, sizeof p->name, d->name);
    copy_str(p->version, sizeof p->version, d->version);
    copy_str(p->description, sizeof p->description, d->description);
    p->cpu_required = d->cpu_required;
    for (int i = 0; i < r->n - 1; i++)
        if (r->items[i].ok && r->items[i].kind == p->kind && !strcmp(r->items[i].name, p->name)) {
            reject(p, "shadowed by %s", r->items[i].path);
            return r->n - 1;
        }
    const uint64_t missing = d->cpu_required & ~r->cpu;
    if (missing) {
        char buf[256];
        cpu_features_str(missing, buf, sizeof buf);
        reject(p, "CPU lacks required feature(s): %s", buf[0] ? buf : "(unknown bits)");
        return r->n - 1;
    }
    char why[256];
    if (!vtable_ok(d, why, sizeof why)) { reject(p, "%s", why); return r->n - 1; }
    /* Only now may plugin code run. */
    if (d->init) {
        char e[256] = "";
        if (d->init(&r->host, e, sizeof e)) { reject(p, "init failed: %s", e[0] ? e : "(no message)"); return r->n - 1; }
    }
    p->desc = d;
    p->ok = 1;
    if (d->kind == PICOLM_KIND_BACKEND) {
        const picolm_backend_vtable *v = d->vtable;
        p->score = d->priority + (v->score ? v->score(r->cpu) : 0);
    }
    return r->n - 1;
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
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 512)
        if (ends_with(e->d_name, ".so")) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str); /* deterministic order */
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        registry_load_file(r, path);
        free(names[i]);
    }
}

/* The plugins a static build links in (mk/static.mk generates the
   NULL-terminated table); weak, so that a dynamic build has none. */
extern const picolm_entry_fn picolm_builtin_plugins[] __attribute__((weak));

static void load_builtins(pl_registry *r) {
    size_t used = strlen(r->searched);
    snprintf(r->searched + used, sizeof r->searched - used, "%sbuilt-in", used ? ", " : "");
    for (const picolm_entry_fn *e = picolm_builtin_plugins; *e; e++) {
        pl_plugin *p = push(r);
        if (!p) return;
        copy_str(p->path, sizeof p->path, "(built-in)");
        check_entry(r, p, *e);
    }
}

static void exe_dir(char *buf, size_t n) {
    ssize_t len = readlink("/proc/self/exe", buf, n - 1);
    if (len <= 0) { snprintf(buf, n, "."); return; }
    buf[len] = 0;
    char *slash = strrchr(buf, '/');
    if (slash) *slash = 0;
}

static void init_host(pl_registry *r) {
    r->cpu = cpu_probe();
    r->host.abi_version = PICOLM_ABI_VERSION;
    r->host.struct_size = sizeof(picolm_host);
    r->host.cpu_features = r->cpu;
    r->host.log = host_log;
    r->host.alloc = host_alloc;
    r->host.free = host_free;
    r->host.parallel_for = host_parallel_for;
    r->host.n_threads = 1;
    r->host.caps = PICOLM_HOST_ROW_GROUPS;
}

static void load_path_list(pl_registry *r, const char *list) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
        if (*tok) load_dir(r, tok);
}

int registry_load(pl_registry *r, const char *plugin_dir, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    init_host(r);
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

void registry_free(pl_registry *r) {
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

int dispatch_type_size(void *ctx, uint32_t type, uint32_t *block_size, uint32_t *type_size) {
    const pl_dispatch *d = ctx;
    if (type >= PICOLM_TYPE_MAX || !d->types[type].fmt) return 0;
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
    for (int i = 0; i < r->n; i++) {
        const pl_plugin *p = &r->items[i];
        if (!p->ok || p->kind != PICOLM_KIND_FORMAT) continue;
        const picolm_format_vtable *v = p->desc->vtable;
        FOR_FORMATS(v, f, j) {
            pl_type *t = &d->types[f->type_id];
            if (t->fmt) continue;
            t->fmt = f;
            t->row_group = format_row_group(v, f);
            t->fmt_plugin = p->name;
            t->vec_dot_type = f->vec_dot_type;
            t->vec_dot = f->vec_dot;
            t->kernel_from = "reference";
        }
    }
    for (uint32_t ty = 0; ty < PICOLM_TYPE_MAX; ty++) {
        pl_type *t = &d->types[ty];
        if (t->fmt && t->vec_dot && t->vec_dot_type < PICOLM_TYPE_MAX && d->types[t->vec_dot_type].fmt)
            t->act_quant = d->types[t->vec_dot_type].fmt->quantize_row;
    }
    ops_reference(&d->ops);
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
        t->gemm = bv->kernel_size >= offsetof(picolm_kernel, gemm) + sizeof(void *) ? k->gemm : NULL;
        t->act_quant = q;
        t->kernel_from = be->name;
    }
    /* 2b. a layout the backend has no kernels for runs its base type's on
       groups unpacked by the format's to_base (same values, same kernels,
       same results), rather than the layout's slow reference code */
    for (int i = 0; i < r->n; i++) {
        const pl_plugin *p = &r->items[i];
        if (!p->ok || p->kind != PICOLM_KIND_FORMAT) continue;
        const picolm_format_vtable *v = p->desc->vtable;
        if (v->format_size < offsetof(picolm_format, to_base) + sizeof(void *)) continue;
        FOR_FORMATS(v, f, j) {
            pl_type *t = &d->types[f->type_id];
            if (t->fmt != f || !f->to_base || f->base_type >= PICOLM_TYPE_MAX || strcmp(t->kernel_from, "reference")) continue;
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
    }
    /* 3. primitives (only the members this backend's struct_size covers) */
#define OVERLAY(m) \
    if (bv->struct_size >= offsetof(picolm_backend_vtable, m) + sizeof(void *) && bv->m) d->ops.m = bv->m
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
    for (int i = 0; i < r->n; i++) {
        if (!r->items[i].ok || r->items[i].kind != PICOLM_KIND_FORMAT) continue;
        const picolm_format_vtable *v = r->items[i].desc->vtable;
        for (uint32_t j = 0; j < v->n_formats; j++)
            if (format_at(v, j)->type_id == type) return format_at(v, j)->name;
    }
    return gguf_type_name(type);
}

void registry_print(const pl_registry *r, const char *chosen, void *stream) {
    FILE *out = stream;
    char feats[512], model[128];
    cpu_features_str(r->cpu, feats, sizeof feats);
    cpu_model_name(model, sizeof model);
    fprintf(out, "CPU: %s\nfeatures: %s\nsearched: %s\n\n", model, feats, r->searched);
    static const uint32_t kinds[] = {PICOLM_KIND_BACKEND, PICOLM_KIND_FORMAT, PICOLM_KIND_SAMPLER};
    for (int k = 0; k < 3; k++) {
        fprintf(out, "%ss:\n", kind_name(kinds[k]));
        for (int i = 0; i < r->n; i++) {
            const pl_plugin *p = &r->items[i];
            if (p->kind != kinds[k] && !(k == 0 && p->kind == 0)) continue;
            const char *status = !p->ok ? "rejected" : (kinds[k] == PICOLM_KIND_BACKEND && chosen && !strcmp(chosen, p->name)) ? "CHOSEN" : "ok";
            fprintf(out, "  %-10s %-8s %-8s", p->name[0] ? p->name : "?", p->version, status);
            if (kinds[k] == PICOLM_KIND_BACKEND && p->ok) fprintf(out, " score %d", p->score);
            if (p->cpu_required) {
                char req[256];
                cpu_features_str(p->cpu_required, req, sizeof req);
                fprintf(out, " needs [%s]", req);
            }
            fprintf(out, "\n             %s\n", p->path);
            if (!p->ok) fprintf(out, "             why: %s\n", p->why);
            if (p->ok && p->kind == PICOLM_KIND_FORMAT) {
                const picolm_format_vtable *v = p->desc->vtable;
                fprintf(out, "             types:");
                FOR_FORMATS(v, f, j) fprintf(out, " %s(%u)", f->name, f->type_id);
                fprintf(out, "\n");
            }
            if (p->ok && p->kind == PICOLM_KIND_BACKEND) {
                const picolm_backend_vtable *v = p->desc->vtable;
                fprintf(out, "             kernels:");
                for (uint32_t j = 0; j < v->n_kernels; j++) {
                    const picolm_kernel *kk = kernel_at(v, j);
                    fprintf(out, " %s%s", registry_type_name(r, kk->type_id), kk->gemm ? "+gemm" : "");
                }
                fprintf(out, "%s\n", v->n_kernels ? "" : " (none: reference fallback)");
            }
            if (p->ok && p->kind == PICOLM_KIND_SAMPLER && p->description[0]) fprintf(out, "             %s\n", p->description);
        }
    }
}
