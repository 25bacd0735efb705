/*
 * GGUF v2/v3 reader over a read-only mmap.  Zero-copy: strings, arrays and
 * tensor data point into the mapping.  Every length, count, offset, shape
 * and type is checked against the file size before use; on any problem the
 * parser returns non-zero with a message saying what and where.
 */
#ifndef PICOLM_GGUF_H
#define PICOLM_GGUF_H
#include <stddef.h>
#include <stdint.h>

enum gguf_vtype {
    GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3,
    GGUF_UINT32 = 4, GGUF_INT32 = 5, GGUF_FLOAT32 = 6, GGUF_BOOL = 7,
    GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_UINT64 = 10, GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12, GGUF_VTYPE_COUNT
};

/* Limits (override at compile time; runtime limits live in gguf_limits). */
#define GGUF_MAX_DIMS 4

typedef struct gguf_limits {
    uint64_t max_kv;          /* metadata pairs */
    uint64_t max_tensors;
    uint64_t max_string;      /* bytes in one string */
    uint64_t max_array;       /* elements in one array */
    int64_t  max_dim;         /* one dimension */
} gguf_limits;
extern const gguf_limits gguf_default_limits;

typedef struct gguf_str {
    uint64_t len;
    const char *ptr;          /* into the mapping, NOT NUL-terminated */
} gguf_str;

typedef struct gguf_kv {
    gguf_str key;
    uint32_t type;            /* enum gguf_vtype */
    union {
        uint64_t u;           /* UINT8..UINT64, BOOL */
        int64_t i;            /* INT8..INT64 */
        double f;             /* FLOAT32/FLOAT64 */
        gguf_str s;           /* STRING */
        struct {
            uint32_t type;    /* element type (never ARRAY) */
            uint64_t n;
            const uint8_t *data;  /* first element in the mapping */
            gguf_str *strs;   /* for string arrays: n entries, decoded once */
        } arr;
    } v;
} gguf_kv;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the row length; unused dims = 1 */
    uint32_t type;             /* GGUF tensor type id */
    uint64_t offset;           /* relative to the data section */
    const void *data;          /* set by gguf_bind_types() */
    uint64_t nbytes;           /* set by gguf_bind_types() */
    int64_t nelements;
} gguf_tensor;

typedef struct gguf_file {
    const uint8_t *base;      /* mapping (or caller buffer) */
    size_t size;
    int mapped;               /* 1 if base was mmap'd by build_gguf */
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset;     /* start of the tensor data section */
} gguf_file;

/* The library's picolm_gguf (picolm.h): a file of its own, or a view of a
   model's (picolm_model_gguf). */
struct picolm_gguf {
    gguf_file own;
    const gguf_file *f;       /* &own, or the model's file */
};

/* Size of one row of n elements of a type: returns 0 when unknown. */
typedef int (*gguf_type_size_fn)(void *ctx, uint32_t type, uint32_t *block_size, uint32_t *type_size);

/* Map and parse a file.  limits may be NULL (defaults). */
int build_gguf(gguf_file *f, const char *path, const gguf_limits *limits, char *err, size_t errlen);
/* Parse a buffer the caller owns (used by fuzzers and tests). */
int gguf_parse(gguf_file *f, const void *data, size_t size, const gguf_limits *limits, char *err, size_t errlen);
/* Resolve each tensor's byte size with the format table and check that its
   data lies inside the file, is aligned and overlaps no other tensor.  A
   type the table does not know is an error naming the tensor and type. */
int gguf_bind_types(gguf_file *f, gguf_type_size_fn size_fn, void *ctx, char *err, size_t errlen);
void free_gguf(gguf_file *f);

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);
int gguf_str_eq(gguf_str s, const char *c);

/* Typed getters: 0 on success; -1 when absent; -2 when the type is wrong.
   Integer getters accept any integer type whose value fits. */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out);
int gguf_get_f32(const gguf_file *f, const char *key, float *out);
int gguf_get_bool(const gguf_file *f, const char *key, int *out);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* Arrays: type must match elem_type; *n receives the count. */
const gguf_kv *gguf_get_arr(const gguf_file *f, const char *key, uint32_t elem_type, uint64_t *n);

const char *gguf_vtype_name(uint32_t t);
/* ggml's name of a tensor type id ("Q4_K"), or "type<N>" for unknown ids (static buffer). */
const char *gguf_type_name(uint32_t type);
/* Element size of a scalar value type, 0 for STRING/ARRAY/invalid. */
size_t gguf_vtype_size(uint32_t t);

#endif
