/* The tests' JSON reader (see json.h). Written for these tests; no library needed. */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const char *p; } rd;

static void ws(rd *r) { while (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t') r->p++; }

static jv *mk(jkind k) { jv *v = calloc(1, sizeof *v); v->kind = k; return v; }

static void push(jv *v, char *key, jv *item) {
    v->items = realloc(v->items, (v->n + 1) * sizeof *v->items);
    v->items[v->n] = item;
    if (v->kind == J_OBJ) { v->keys = realloc(v->keys, (v->n + 1) * sizeof *v->keys); v->keys[v->n] = key; }
    v->n++;
}

static int hex4(const char *p, unsigned *out) {
    unsigned u = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i]; u <<= 4;
        if (c >= '0' && c <= '9') u |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') u |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') u |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *out = u; return 1;
}

static void put_utf8(char **o, unsigned cp) {
    unsigned char *u = (unsigned char *)*o;
    if (cp < 0x80) { *u++ = (unsigned char)cp; }
    else if (cp < 0x800) { *u++ = (unsigned char)(0xC0 | (cp >> 6)); *u++ = (unsigned char)(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) { *u++ = (unsigned char)(0xE0 | (cp >> 12)); *u++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); *u++ = (unsigned char)(0x80 | (cp & 0x3F)); }
    else { *u++ = (unsigned char)(0xF0 | (cp >> 18)); *u++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F)); *u++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); *u++ = (unsigned char)(0x80 | (cp & 0x3F)); }
    *o = (char *)u;
}

static char *str(rd *r, size_t *len) {
    if (*r->p != '"') return NULL;
    r->p++;
    char *out = malloc(strlen(r->p) * 2 + 8), *o = out;
    while (*r->p && *r->p != '"') {
        if (*r->p != '\\') { *o++ = *r->p++; continue; }
        r->p++;
        char c = *r->p++;
        switch (c) {
        case 'n': *o++ = '\n'; break; case 't': *o++ = '\t'; break; case 'r': *o++ = '\r'; break;
        case 'b': *o++ = '\b'; break; case 'f': *o++ = '\f'; break;
        case '/': case '\\': case '"': *o++ = c; break;
        case 'u': {
            unsigned cp, lo;
            if (!hex4(r->p, &cp)) { free(out); return NULL; }
            r->p += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && r->p[0] == '\\' && r->p[1] == 'u' && hex4(r->p + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                r->p += 6;
            }
            put_utf8(&o, cp);
            break;
        }
        default: free(out); return NULL;
        }
    }
    if (*r->p != '"') { free(out); return NULL; }
    r->p++;
    *len = (size_t)(o - out);
    *o = 0;
    return out;
}

static jv *val(rd *r, int depth) {
    if (depth > 64) return NULL;
    ws(r);
    const char *p = r->p;
    if (*p == '{' || *p == '[') {
        int obj = *p == '{';
        jv *v = mk(obj ? J_OBJ : J_ARR);
        r->p++; ws(r);
        if (*r->p == (obj ? '}' : ']')) { r->p++; return v; }
        for (;;) {
            char *key = NULL; size_t kl;
            if (obj) {
                ws(r);
                if (!(key = str(r, &kl))) { json_free(v); return NULL; }
                ws(r);
                if (*r->p++ != ':') { free(key); json_free(v); return NULL; }
            }
            jv *item = val(r, depth + 1);
            if (!item) { free(key); json_free(v); return NULL; }
            push(v, key, item);
            ws(r);
            if (*r->p == ',') { r->p++; continue; }
            if (*r->p == (obj ? '}' : ']')) { r->p++; return v; }
            json_free(v); return NULL;
        }
    }
    if (*p == '"') { jv *v = mk(J_STR); if (!(v->text = str(r, &v->len))) { free(v); return NULL; } return v; }
    if (!strncmp(p, "null", 4)) { r->p += 4; return mk(J_NULL); }
    if (!strncmp(p, "true", 4)) { r->p += 4; jv *v = mk(J_BOOL); v->b = true; return v; }
    if (!strncmp(p, "false", 5)) { r->p += 5; return mk(J_BOOL); }
    const char *s = p;
    while (*p && strchr("+-0123456789.eE", *p)) p++;
    if (p == s) return NULL;
    jv *v = mk(J_NUM);
    v->text = strndup(s, (size_t)(p - s));
    r->p = p;
    return v;
}

jv *json_parse(const char *text) {
    rd r = { text };
    jv *v = val(&r, 0);
    if (!v) return NULL;
    ws(&r);
    if (*r.p) { json_free(v); return NULL; }
    return v;
}

void json_free(jv *v) {
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) { json_free(v->items[i]); if (v->keys) free(v->keys[i]); }
    free(v->items); free(v->keys); free(v->text); free(v);
}

jv *json_get(const jv *o, const char *key) {
    if (!o || o->kind != J_OBJ) return NULL;
    for (size_t i = 0; i < o->n; i++) if (!strcmp(o->keys[i], key)) return o->items[i];
    return NULL;
}

bool json_is(const jv *v, const char *s) { return v && v->kind == J_STR && strlen(s) == v->len && !memcmp(v->text, s, v->len); }

typedef struct { char *b; size_t n, cap; } buf;
static void app(buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) { b->cap = (b->n + n + 1) * 2; b->b = realloc(b->b, b->cap); }
    memcpy(b->b + b->n, s, n); b->n += n; b->b[b->n] = 0;
}
static void dump_str(buf *b, const char *s, size_t n) {
    app(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { char e[2] = { '\\', (char)c }; app(b, e, 2); }
        else if (c < 0x20) { char e[8]; snprintf(e, sizeof e, "\\u%04x", c); app(b, e, 6); }
        else app(b, (const char *)&s[i], 1);
    }
    app(b, "\"", 1);
}
static void dump(buf *b, const jv *v) {
    switch (v->kind) {
    case J_NULL: app(b, "null", 4); break;
    case J_BOOL: v->b ? app(b, "true", 4) : app(b, "false", 5); break;
    case J_NUM: app(b, v->text, strlen(v->text)); break;
    case J_STR: dump_str(b, v->text, v->len); break;
    case J_ARR: case J_OBJ:
        app(b, v->kind == J_OBJ ? "{" : "[", 1);
        for (size_t i = 0; i < v->n; i++) {
            if (i) app(b, ",", 1);
            if (v->kind == J_OBJ) { dump_str(b, v->keys[i], strlen(v->keys[i])); app(b, ":", 1); }
            dump(b, v->items[i]);
        }
        app(b, v->kind == J_OBJ ? "}" : "]", 1);
    }
}
char *json_dump(const jv *v) { buf b = { 0 }; app(&b, "", 0); dump(&b, v); return b.b; }

bool json_equal(const jv *a, const jv *b) {
    if (!a || !b) return a == b;
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case J_NULL: return true;
    case J_BOOL: return a->b == b->b;
    case J_NUM: return !strcmp(a->text, b->text) || strtod(a->text, NULL) == strtod(b->text, NULL);
    case J_STR: return a->len == b->len && !memcmp(a->text, b->text, a->len);
    case J_ARR:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++) if (!json_equal(a->items[i], b->items[i])) return false;
        return true;
    case J_OBJ:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++) if (!json_equal(a->items[i], json_get(b, a->keys[i]))) return false;
        return true;
    }
    return false;
}

char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *d = malloc((size_t)n + 1);
    size_t got = fread(d, 1, (size_t)n, f);
    fclose(f);
    d[got] = 0;
    if (len) *len = got;
    return d;
}
