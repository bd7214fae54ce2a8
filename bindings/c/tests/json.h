/* A small JSON reader for the C tests only (the vectors and the library's JSON results):
 * values keep numbers as their text, strings decoded to UTF-8 (lone surrogates as WTF-8). */
#ifndef CYCLES_TEST_JSON_H
#define CYCLES_TEST_JSON_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jkind;

typedef struct jv {
    jkind kind;
    bool b;
    char *text;         /* J_NUM: the number's text; J_STR: decoded string */
    size_t len;         /* J_STR: byte length */
    struct jv **items;  /* J_ARR / J_OBJ values */
    char **keys;        /* J_OBJ keys */
    size_t n;
} jv;

jv *json_parse(const char *text);            /* NULL on a syntax error */
void json_free(jv *v);
jv *json_get(const jv *obj, const char *key);  /* NULL when absent */
char *json_dump(const jv *v);                 /* compact text; free() it */
bool json_equal(const jv *a, const jv *b);    /* objects ignore key order; numbers by value */
bool json_is(const jv *v, const char *str);   /* a string equal to str */
char *read_file(const char *path, size_t *len);

#endif
