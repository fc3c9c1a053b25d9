/* Applies the numbered SQL files embedded from migrations/ under an advisory lock. */
#pragma once
#include <libpq-fe.h>

/* Applies every migration not yet in schema_migrations, each in its own transaction.
 * app_role: the runtime role to grant privileges to (NULL or "" for none).
 * Returns the number applied (>= 0) or -EIO with *ret_error set (caller frees). */
int tc_migrate(PGconn *conn, const char *app_role, char **ret_error);
