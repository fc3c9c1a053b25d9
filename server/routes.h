/* The route table: method, path pattern ("{}" matches one segment), roles, handler. */
#pragma once
#include "server/http.h"

struct tc_route {
    const char *method;
    const char *pattern;
    unsigned roles; /* 0: no authentication */
    tc_handler handler;
};

extern const struct tc_route tc_routes[];
