/* Sequences over a pool of KV blocks: see kv.h. */
#include "kv.h"

#include <stdlib.h>
#include <string.h>

#include "picolm/fp16.h"
#include "util.h"

const char *kv_type_name(int kv_type) { return kv_type == KV_F16 ? "f16" : kv_type == KV_Q8_0 ? "q8_0" : "unknown"; }

static size_t kv_row_bytes(const llama_model *m, int kv_type) {
    const size_t kvd = (size_t)m->hp.n_head_kv * m->hp.head_dim;
    return kv_type == KV_Q8_0 ? kvd / 32 * 34 : kvd * 2;
}

size_t kv_state_floats(const llama_model *m) {
    return m->n_rec_layer ? (size_t)m->n_rec_layer * (size_t)(m->hp.conv_len - 1) * (size_t)m->hp.n_embd : 0;
}

size_t kv_bytes_per_token(const llama_model *m, int kv_type) { return 2 * kv_row_bytes(m, kv_type) * (size_t)m->n_kv_layer; }

size_t kv_block_bytes(const llama_model *m, int kv_type, int block_size) {
    return kv_bytes_per_token(m, kv_type) * (size_t)block_size + kv_state_floats(m) * sizeof(float);
}

int build_kv_pool(kv_pool *p, const llama_model *m, int kv_type, int n_blocks, int block_size, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    const size_t kvd = (size_t)m->hp.n_head_kv * m->hp.head_dim;
    if (n_blocks < 1 || block_size < 1) return pl_fail(err, errlen, "a KV pool needs at least one block of one position");
    if (kv_type != KV_F16 && kv_type != KV_Q8_0) return pl_fail(err, errlen, "unknown KV type %d", kv_type);
    if (kv_type == KV_Q8_0 && (kvd % 32 || m->hp.head_dim % 32 || !m->d->types[PICOLM_TYPE_Q8_0].fmt ||
                               !m->d->types[PICOLM_TYPE_Q8_0].fmt->quantize_row))
        return pl_fail(err, errlen, "kv_type q8_0 needs head_dim %% 32 == 0 and the Q8_0 format plugin");
    if (m->n_rec_layer && block_size < m->hp.conv_len - 1)
        return pl_fail(err, errlen, "blocks of %d positions are shorter than the recurrent state (%d)", block_size, m->hp.conv_len - 1);
    p->m = m;
    p->block_size = block_size;
    p->n_blocks = n_blocks;
    p->kv_type = kv_type;
    p->row_bytes = kv_row_bytes(m, kv_type);
    p->block_bytes = p->row_bytes * (size_t)m->n_kv_layer * (size_t)block_size;
    p->tail_floats = kv_state_floats(m);
    const size_t total = p->block_bytes * (size_t)n_blocks, tails = p->tail_floats * (size_t)n_blocks;
    if ((p->block_bytes && total / (size_t)n_blocks != p->block_bytes) || (p->tail_floats && tails / (size_t)n_blocks != p->tail_floats))
        return pl_fail(err, errlen, "KV pool too large");
    p->k = malloc(total ? total : 1);
    p->v = malloc(total ? total : 1);
    p->tail = tails ? calloc(tails, sizeof(float)) : NULL;
    p->ref = calloc((size_t)n_blocks, sizeof *p->ref);
    p->free_ids = malloc((size_t)n_blocks * sizeof *p->free_ids);
    if (!p->k || !p->v || (tails && !p->tail) || !p->ref || !p->free_ids) {
        free_kv_pool(p);
        return pl_fail(err, errlen, "out of memory allocating a KV pool of %d blocks (%.1f MB)", n_blocks,
                       (2.0 * (double)total + 4.0 * (double)tails) / 1e6);
    }
    /* lowest ids on top: the first blocks handed out are the first pages */
    for (int i = 0; i < n_blocks; i++) p->free_ids[i] = n_blocks - 1 - i;
    p->n_free = n_blocks;
    return 0;
}

void free_kv_pool(kv_pool *p) {
    free(p->k);
    free(p->v);
    free(p->tail);
    free(p->ref);
    free(p->free_ids);
    memset(p, 0, sizeof *p);
}

static int pool_alloc(kv_pool *p) {
    if (!p->n_free) return -1;
    const int b = p->free_ids[--p->n_free];
    p->ref[b] = 1;
    return b;
}

static void pool_unref(kv_pool *p, int b) {
    if (--p->ref[b] == 0) p->free_ids[p->n_free++] = b;
}

int build_kv_seq(kv_seq *s, kv_pool *p, int n_ctx, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    if (n_ctx <= 0) n_ctx = p->m->hp.n_ctx_train;
    const int nb = (n_ctx + p->block_size - 1) / p->block_size;
    s->pool = p;
    s->n_ctx = n_ctx;
    s->blocks = malloc((size_t)nb * sizeof *s->blocks);
    s->state = p->tail_floats ? calloc(p->tail_floats, sizeof(float)) : NULL;
    if (!s->blocks || (p->tail_floats && !s->state)) {
        free_kv_seq(s);
        return pl_fail(err, errlen, "out of memory");
    }
    for (int i = 0; i < nb; i++) s->blocks[i] = -1;
    return 0;
}

void free_kv_seq(kv_seq *s) {
    if (s->blocks) kv_seq_truncate(s, 0);
    free(s->blocks);
    free(s->state);
    memset(s, 0, sizeof *s);
}

int kv_seq_reserve(kv_seq *s, int n) {
    kv_pool *p = s->pool;
    const int bs = p->block_size;
    for (int b = s->n_past / bs; b * bs < s->n_past + n; b++) {
        const int id = s->blocks[b];
        if (id >= 0 && p->ref[id] == 1) continue;
        const int fresh = pool_alloc(p);
        if (fresh < 0) return -1;
        if (id >= 0) { /* shared: copy on write */
            memcpy(p->k + (size_t)fresh * p->block_bytes, p->k + (size_t)id * p->block_bytes, p->block_bytes);
            memcpy(p->v + (size_t)fresh * p->block_bytes, p->v + (size_t)id * p->block_bytes, p->block_bytes);
            if (p->tail_floats)
                memcpy(p->tail + (size_t)fresh * p->tail_floats, p->tail + (size_t)id * p->tail_floats, p->tail_floats * sizeof(float));
            pool_unref(p, id);
        }
        s->blocks[b] = fresh;
    }
    return 0;
}

int kv_seq_skip(kv_seq *s, int n) {
    if (n > s->n_ctx - s->n_past || kv_seq_reserve(s, n)) return -1;
    s->n_past += n;
    return 0;
}

int kv_seq_cut_point(const kv_seq *s, int n) {
    if (n > s->n_past) n = s->n_past;
    if (n < 0) n = 0;
    if (!s->pool->tail_floats || n == s->n_past) return n;
    return n - n % s->pool->block_size;
}

/* The recurrent state at block boundary n (n % block_size == 0): the
   checkpoint of the block before it, zeros at the start. */
static void restore_state(kv_seq *dst, const kv_seq *src, int n) {
    const kv_pool *p = dst->pool;
    if (!p->tail_floats) return;
    if (n == 0) memset(dst->state, 0, p->tail_floats * sizeof(float));
    else memcpy(dst->state, p->tail + (size_t)src->blocks[n / p->block_size - 1] * p->tail_floats, p->tail_floats * sizeof(float));
}

int kv_seq_truncate(kv_seq *s, int n) {
    kv_pool *p = s->pool;
    const int cut = kv_seq_cut_point(s, n), bs = p->block_size, nb = (s->n_ctx + bs - 1) / bs;
    if (cut != s->n_past) restore_state(s, s, cut);
    for (int b = (cut + bs - 1) / bs; b < nb; b++)
        if (s->blocks[b] >= 0) pool_unref(p, s->blocks[b]), s->blocks[b] = -1;
    s->n_past = cut;
    return cut;
}

int kv_seq_share(kv_seq *dst, const kv_seq *src, int n) {
    kv_pool *p = dst->pool;
    kv_seq_truncate(dst, 0);
    int cut = kv_seq_cut_point(src, n);
    if (cut > dst->n_ctx) cut = dst->n_ctx - dst->n_ctx % p->block_size;
    const int bs = p->block_size;
    for (int b = 0; b * bs < cut; b++) {
        dst->blocks[b] = src->blocks[b];
        p->ref[dst->blocks[b]]++;
    }
    if (cut == src->n_past && p->tail_floats) memcpy(dst->state, src->state, p->tail_floats * sizeof(float));
    else restore_state(dst, src, cut);
    dst->n_past = cut;
    return cut;
}

int kv_run(const kv_seq *s, int layer, int t0, int end, const uint8_t **k, const uint8_t **v) {
    const kv_pool *p = s->pool;
    const int bs = p->block_size, in = t0 % bs;
    const size_t off = (size_t)s->blocks[t0 / bs] * p->block_bytes +
                       ((size_t)p->m->layers[layer].kv_idx * bs + (size_t)in) * p->row_bytes;
    *k = p->k + off;
    *v = p->v + off;
    return bs - in < end - t0 ? bs - in : end - t0;
}

void kv_store(kv_seq *s, int layer, int pos, const float *k, const float *v) {
    const uint8_t *kr, *vr;
    kv_run(s, layer, pos, pos + 1, &kr, &vr);
    const llama_model *m = s->pool->m;
    const int kvd = m->hp.n_head_kv * m->hp.head_dim;
    if (s->pool->kv_type == KV_Q8_0) {
        const picolm_format *q8 = m->d->types[PICOLM_TYPE_Q8_0].fmt;
        q8->quantize_row(k, (uint8_t *)kr, kvd);
        q8->quantize_row(v, (uint8_t *)vr, kvd);
    } else {
        m->d->ops.f32_to_f16((uint16_t *)kr, k, kvd);
        m->d->ops.f32_to_f16((uint16_t *)vr, v, kvd);
    }
}

float *kv_state(const kv_seq *s, int layer) {
    const llama_model *m = s->pool->m;
    return s->state + (size_t)m->layers[layer].rec_idx * (size_t)(m->hp.conv_len - 1) * (size_t)m->hp.n_embd;
}

void kv_state_push(kv_seq *s, int layer, int pos, const float *x) {
    const llama_model *m = s->pool->m;
    const int keep = m->hp.conv_len - 1, w = m->hp.n_embd, bs = s->pool->block_size;
    if (keep <= 0) return;
    float *st = kv_state(s, layer);
    memmove(st, st + w, (size_t)(keep - 1) * (size_t)w * sizeof(float));
    memcpy(st + (size_t)(keep - 1) * w, x, (size_t)w * sizeof(float));
    /* the block's checkpoint is the live state as of its last position */
    if (pos % bs == bs - 1) {
        float *tail = s->pool->tail + (size_t)s->blocks[pos / bs] * s->pool->tail_floats + (st - s->state);
        memcpy(tail, st, (size_t)keep * (size_t)w * sizeof(float));
    }
}
