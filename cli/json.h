/* A tiny streaming JSON writer: objects, arrays, strings, numbers, booleans
 * and null, pretty-printed with two-space indentation.  The caller names a
 * key for every value inside an object and passes NULL inside arrays. */
#ifndef FASTCLOCK_CLI_JSON_H
#define FASTCLOCK_CLI_JSON_H

#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

struct json {
    FILE *f;
    int depth;
    int count[JSON_MAX_DEPTH]; /* values written at each level */
};

void json_init(struct json *j, FILE *f);
void json_begin_object(struct json *j, const char *key);
void json_end_object(struct json *j);
void json_begin_array(struct json *j, const char *key);
void json_end_array(struct json *j);
void json_string(struct json *j, const char *key, const char *v); /* NULL -> null */
void json_int(struct json *j, const char *key, int64_t v);
void json_uint(struct json *j, const char *key, uint64_t v);
/* NaN and infinities become null (JSON has no spelling for them). */
void json_double(struct json *j, const char *key, double v, int decimals);
void json_bool(struct json *j, const char *key, int v);
/* A tri-state (see util.h): true, false or null. */
void json_tri(struct json *j, const char *key, int v);
void json_null(struct json *j, const char *key);
/* Ends the document with a newline. */
void json_finish(struct json *j);

/* Writes s as a JSON string literal, quotes included. */
void json_write_escaped(FILE *f, const char *s);

#endif
