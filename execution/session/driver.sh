# toolcage session driver for shell tools (docs/sessions.md). Run by the tool's shell as its
# program in a session's sandbox, it keeps one shell for every call of the session: the
# working directory, variables and functions live on.
#
# Requests come on stdin, one at a time, each a header line
#     TCS1 <nonce> <code bytes> <stdin bytes> <flags>
# followed by the code and then the call's stdin. Each call's code is sourced (so `return`
# ends it and its variables are the shell's), with stdin its call's own. The call's end is
# a marker the server looks for in the raw output: "\036TCS1 <nonce> <json>\n" on stdout and
# "\036TCS1 <nonce>\n" on stderr. An interrupt (SIGINT, the server's: a timeout or a cancel)
# stops the command the call waits for and returns from the call's code; between calls it
# is ignored. `exit` ends the session.
exec {__tc_ctl}<&0 </dev/null
__tc_dir=$(mktemp -d /tmp/.toolcage-session.XXXXXX) || exit 2
while :; do
    trap '' INT
    LC_ALL=C IFS=' ' read -r __tc_magic __tc_nonce __tc_ncode __tc_nin __tc_flags <&"$__tc_ctl" || exit 0
    [ "$__tc_magic" = TCS1 ] || exit 2
    : >"$__tc_dir/code" && : >"$__tc_dir/stdin" || exit 2
    [ "$__tc_ncode" -gt 0 ] && { head -c "$__tc_ncode" >"$__tc_dir/code"; } <&"$__tc_ctl"
    [ "$__tc_nin" -gt 0 ] && { head -c "$__tc_nin" >"$__tc_dir/stdin"; } <&"$__tc_ctl"
    trap 'return 130' INT
    . "$__tc_dir/code" <"$__tc_dir/stdin"
    __tc_rc=$?
    trap '' INT
    __tc_status=exit
    [ "$__tc_rc" = 130 ] && __tc_status=interrupted
    printf '\036TCS1 %s\n' "$__tc_nonce" >&2
    printf '\036TCS1 %s {"status":"%s","exit_code":%d,"result":null,"error":null}\n' \
        "$__tc_nonce" "$__tc_status" "$__tc_rc"
done
