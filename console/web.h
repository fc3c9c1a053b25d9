/* Console internals shared by console/web.c (HTTP glue) and the page handlers. */
#pragma once
#include <jansson.h>

#include "console/console.h"
#include "console/session.h"

/* What tc_console_dispatch() leaves in r->state for the handler. */
struct tc_console_ctx {
    struct tc_console_user user; /* empty name when nobody is signed in (public routes) */
    json_t *form;                /* POST fields (object of strings), NULL for GET */
    char source[64];             /* client address */
    bool waited;                 /* the handler already waited (suspended) once */
};

static inline struct tc_console_ctx *tc_console_ctx(struct tc_request *r)
{
    return (struct tc_console_ctx *)r->state;
}

/* A form field, or NULL. */
const char *tc_console_form(struct tc_request *r, const char *name);

/* Render templates/<tmpl>.html with data (stolen) plus the common fields (me, csrf, nav,
 * css) and queue it with the console's security headers. */
enum MHD_Result tc_console_page(struct tc_request *r, unsigned status, const char *tmpl,
                                json_t *data);
/* A small page with a title and a message (errors, refusals). */
enum MHD_Result tc_console_message(struct tc_request *r, unsigned status, const char *title,
                                   const char *message);
/* 303 See Other to a path under /console; extra Set-Cookie values may be NULL. */
enum MHD_Result tc_console_redirect(struct tc_request *r, const char *location, const char *cookie1,
                                    const char *cookie2);
/* Add the console's security headers to a response. */
void tc_console_headers(struct MHD_Response *resp);

/* "Set-Cookie" value for the session cookie (value NULL clears it). */
void tc_console_cookie(struct tc_request *r, char *out, size_t size, const char *name,
                       const char *value);
/* The home page of a role. */
const char *tc_console_home_of(enum tc_role role);
/* "3 min", "2 h 5 min", "expired" */
void tc_console_duration(long long seconds, char *out, size_t size);
