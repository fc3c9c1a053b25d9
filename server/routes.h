/* The route table: method, path pattern ("{}" matches one segment), roles, handler. */
#pragma once
#include "server/http.h"

struct tc_route {
    const char *method;
    const char *pattern;
    unsigned roles; /* 0: no authentication; see TC_ROUTE_CONSOLE */
    tc_handler handler;
};

/* Or'ed into roles: a console page, authenticated by session cookie (console/console.h)
 * instead of an API key; the other bits are the console roles allowed (none: public). */
#define TC_ROUTE_CONSOLE (1u << 16)

extern const struct tc_route tc_routes[];
