// safetensors.c: map a .safetensors file and index its tensors.
//
// Format: u64 little-endian header size N, N bytes of JSON
//   {"__metadata__": {...}, "<name>": {"dtype": "BF16", "shape": [r, c], "data_offsets": [b, e]}, ...}
// then the data; offsets are relative to the end of the header. The data are never copied.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

// ----------------------------------------------------------------------------
// a JSON reader just large enough for the header

typedef struct {
    const char *s;
    size_t n, i;
} jr;

static void ws(jr *j) {
    while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\n' || j->s[j->i] == '\r' || j->s[j->i] == '\t'))
        j->i++;
}

static int peek(jr *j) {
    ws(j);
    return j->i < j->n ? (unsigned char)j->s[j->i] : -1;
}

static int eat(jr *j, char c) {
    if (peek(j) != c) return 0;
    j->i++;
    return 1;
}

// str reads a JSON string; *out (if not NULL) receives a malloc'ed copy with escapes resolved
// for the simple cases (\" \\ \/ \n \t); \uXXXX is kept verbatim, which names never need.
static int str(jr *j, char **out) {
    if (!eat(j, '"')) return 0;
    size_t start = j->i, end = start;
    while (end < j->n && j->s[end] != '"') end += j->s[end] == '\\' ? 2 : 1;
    char *buf = out ? malloc(end - start + 1) : NULL; // escapes only shrink the string
    if (out && !buf) return 0;
    size_t k = 0;
    while (j->i < j->n && j->s[j->i] != '"') {
        char c = j->s[j->i++];
        if (c == '\\' && j->i < j->n) {
            char e = j->s[j->i++];
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'u':
                if (buf) buf[k++] = '\\';
                c = 'u';
                break;
            default: c = e;
            }
        }
        if (buf) buf[k++] = c;
    }
    if (j->i >= j->n) {
        free(buf);
        return 0;
    }
    j->i++; // closing quote
    if (buf) {
        buf[k] = 0;
        *out = buf;
    }
    return 1;
}

static int integer(jr *j, int64_t *v) {
    ws(j);
    int neg = 0;
    if (j->i < j->n && j->s[j->i] == '-') {
        neg = 1;
        j->i++;
    }
    if (j->i >= j->n || j->s[j->i] < '0' || j->s[j->i] > '9') return 0;
    int64_t x = 0;
    while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') {
        if (x > (INT64_MAX - 9) / 10) return 0;
        x = x * 10 + (j->s[j->i++] - '0');
    }
    *v = neg ? -x : x;
    return 1;
}

static int skip(jr *j, int depth) {
    if (depth > 32) return 0;
    int c = peek(j);
    if (c == '"') return str(j, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->i++;
        if (eat(j, close)) return 1;
        for (;;) {
            if (c == '{') {
                if (!str(j, NULL) || !eat(j, ':')) return 0;
            }
            if (!skip(j, depth + 1)) return 0;
            if (eat(j, ',')) continue;
            return eat(j, close);
        }
    }
    // number, true, false, null
    size_t start = j->i;
    while (j->i < j->n && strchr(",}] \n\r\t", j->s[j->i]) == NULL) j->i++;
    return j->i > start;
}

static int int_array(jr *j, int64_t *v, int max, int *count) {
    if (!eat(j, '[')) return 0;
    *count = 0;
    if (eat(j, ']')) return 1;
    for (;;) {
        if (*count >= max) return 0;
        if (!integer(j, &v[*count])) return 0;
        (*count)++;
        if (eat(j, ',')) continue;
        return eat(j, ']');
    }
}

// ----------------------------------------------------------------------------

static int dtype_of(const char *s, dtype *dt, size_t *size) {
    if (strcmp(s, "F32") == 0) {
        *dt = DT_F32;
        *size = 4;
    } else if (strcmp(s, "BF16") == 0) {
        *dt = DT_BF16;
        *size = 2;
    } else if (strcmp(s, "F16") == 0) {
        *dt = DT_F16;
        *size = 2;
    } else {
        return 0;
    }
    return 1;
}

static iris_status fail(char *err, size_t len, iris_status s, const char *path, const char *what) {
    if (err && len) snprintf(err, len, "%s: %s", path, what);
    return s;
}

// tensor parses one {"dtype":..,"shape":..,"data_offsets":..} entry.
static iris_status tensor(jr *j, st_tensor *t, size_t data_size, char *err, size_t err_len, const char *path) {
    char msg[256];
    if (!eat(j, '{')) return fail(err, err_len, IRIS_ERR_FORMAT, path, "header: tensor entry is not an object");
    char *dt = NULL;
    int64_t off[2] = {-1, -1};
    int have_shape = 0, n_off = 0;
    for (;;) {
        char *key = NULL;
        if (!str(j, &key) || !eat(j, ':')) {
            free(key);
            free(dt);
            return fail(err, err_len, IRIS_ERR_FORMAT, path, "header: bad tensor entry");
        }
        int ok;
        if (strcmp(key, "dtype") == 0) {
            free(dt);
            dt = NULL;
            ok = str(j, &dt);
        } else if (strcmp(key, "shape") == 0) {
            ok = int_array(j, t->shape, 8, &t->ndim);
            have_shape = ok;
        } else if (strcmp(key, "data_offsets") == 0) {
            ok = int_array(j, off, 2, &n_off) && n_off == 2;
        } else {
            ok = skip(j, 0);
        }
        free(key);
        if (!ok) {
            free(dt);
            return fail(err, err_len, IRIS_ERR_FORMAT, path, "header: bad tensor field");
        }
        if (eat(j, ',')) continue;
        if (eat(j, '}')) break;
        free(dt);
        return fail(err, err_len, IRIS_ERR_FORMAT, path, "header: unterminated tensor entry");
    }
    if (!dt || !have_shape || n_off != 2) {
        free(dt);
        return fail(err, err_len, IRIS_ERR_FORMAT, path, "header: tensor entry lacks dtype, shape or offsets");
    }
    size_t esize = 0;
    int known = dtype_of(dt, &t->dt, &esize);
    if (!known) {
        snprintf(msg, sizeof msg, "tensor %s: unsupported dtype %s", t->name, dt);
        free(dt);
        return fail(err, err_len, IRIS_ERR_DTYPE, path, msg);
    }
    free(dt);
    size_t count = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0) return fail(err, err_len, IRIS_ERR_FORMAT, path, "header: negative dimension");
        count *= (size_t)t->shape[d];
    }
    if (off[0] < 0 || off[1] < off[0] || (size_t)off[1] > data_size || (size_t)(off[1] - off[0]) != count * esize) {
        snprintf(msg, sizeof msg, "tensor %s: data offsets do not match its shape or the file", t->name);
        return fail(err, err_len, IRIS_ERR_FORMAT, path, msg);
    }
    t->nbytes = (size_t)(off[1] - off[0]);
    t->data = (const void *)(uintptr_t)off[0]; // made absolute by the caller
    return IRIS_OK;
}

iris_status st_open(const char *path, st_file *f, char *err, size_t err_len) {
    memset(f, 0, sizeof(*f));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(err, err_len, IRIS_ERR_IO, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return fail(err, err_len, IRIS_ERR_IO, path, strerror(errno));
    }
    if (sb.st_size < 8) {
        close(fd);
        return fail(err, err_len, IRIS_ERR_FORMAT, path, "file too short");
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return fail(err, err_len, IRIS_ERR_IO, path, strerror(errno));
    f->map = map;
    f->size = (size_t)sb.st_size;

    const unsigned char *b = map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | b[i];
    if (hlen > f->size - 8) {
        st_close(f);
        return fail(err, err_len, IRIS_ERR_FORMAT, path, "header size exceeds the file");
    }
    const char *data = (const char *)map + 8 + hlen;
    size_t data_size = f->size - 8 - (size_t)hlen;

    jr j = {(const char *)map + 8, (size_t)hlen, 0};
    if (!eat(&j, '{')) {
        st_close(f);
        return fail(err, err_len, IRIS_ERR_FORMAT, path, "header is not a JSON object");
    }
    int cap = 0;
    iris_status st = IRIS_OK;
    if (!eat(&j, '}')) {
        for (;;) {
            char *name = NULL;
            if (!str(&j, &name) || !eat(&j, ':')) {
                free(name);
                st = fail(err, err_len, IRIS_ERR_FORMAT, path, "header: bad key");
                break;
            }
            if (strcmp(name, "__metadata__") == 0) {
                free(name);
                if (!skip(&j, 0)) {
                    st = fail(err, err_len, IRIS_ERR_FORMAT, path, "header: bad __metadata__");
                    break;
                }
            } else {
                if (f->n == cap) {
                    cap = cap ? cap * 2 : 64;
                    st_tensor *nt = realloc(f->tensors, (size_t)cap * sizeof(st_tensor));
                    if (!nt) {
                        free(name);
                        st = IRIS_ERR_NOMEM;
                        break;
                    }
                    f->tensors = nt;
                }
                st_tensor *t = &f->tensors[f->n];
                memset(t, 0, sizeof(*t));
                t->name = name;
                f->n++;
                st = tensor(&j, t, data_size, err, err_len, path);
                if (st != IRIS_OK) break;
                t->data = data + (uintptr_t)t->data;
            }
            if (eat(&j, ',')) continue;
            if (eat(&j, '}')) break;
            st = fail(err, err_len, IRIS_ERR_FORMAT, path, "header: expected , or }");
            break;
        }
    }
    if (st != IRIS_OK) {
        st_close(f);
        return st;
    }
    return IRIS_OK;
}

void st_close(st_file *f) {
    for (int i = 0; i < f->n; i++) free(f->tensors[i].name);
    free(f->tensors);
    if (f->map) munmap(f->map, f->size);
    memset(f, 0, sizeof(*f));
}
