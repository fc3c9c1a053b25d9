#!/bin/sh
# Build the libFuzzer targets with clang (ASan + UBSan) straight from the sources, and run each
# for N seconds (default 20) on its seed corpus. A crash input is kept in tests/fuzz/crashes/;
# turn it into a regression test (tests/fuzz/regressions/<target>/) before fixing.
# The run is reproducible: a fixed seed (FUZZ_SEED, default 1) on the fresh seed corpus, so CI
# replays a prefix of the same mutation sequence a developer ran locally for longer; a slower
# machine just stops earlier. For exploratory fuzzing set FUZZ_SEED=0 (libFuzzer picks one).
# Usage: tests/fuzz/build.sh [seconds]   (0: build only)
set -eu
secs=${1:-20}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${FUZZ_OUT:-$root/build-fuzz}
mkdir -p "$out" "$root/tests/fuzz/crashes"
cc=${CC_FUZZ:-clang}
flags="-g -O1 -std=gnu17 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -I$root"
libs="$(pkg-config --cflags --libs jansson libpcre2-8 libsodium) -lpthread"
common="$root/common/buf.c $root/common/util.c"

# the five compilers at once (each is one process), then every one must have succeeded
$cc $flags -o "$out/fuzz_policy" "$root/tests/fuzz/fuzz_policy.c" "$root/policy/policy.c" "$root/policy/redact.c" "$root/image/ref.c" $common $libs &
p1=$!
$cc $flags -o "$out/fuzz_prescreen" "$root/tests/fuzz/fuzz_prescreen.c" "$root"/policy/prescreen*.c $common $libs &
p2=$!
$cc $flags -o "$out/fuzz_redact" "$root/tests/fuzz/fuzz_redact.c" "$root/policy/redact.c" $common $libs &
p3=$!
$cc $flags -Wno-unused-function -o "$out/fuzz_initcfg" "$root/tests/fuzz/fuzz_initcfg.c" &
p4=$!
$cc -g -O1 -std=gnu17 -D_GNU_SOURCE -I"$root" -o "$out/initcfg_seed" "$root/tests/fuzz/initcfg_seed.c" \
    "$root/sandbox/child.c" "$root/sandbox/spec.c" "$root/sandbox/seccomp.c" "$root/sandbox/workspace.c" \
    "$root/sandbox/egress_rules.c" "$root/sandbox/cgroup.c" $common $libs $(pkg-config --cflags --libs libseccomp) &
p5=$!
for p in $p1 $p2 $p3 $p4 $p5; do wait "$p"; done

[ "$secs" -gt 0 ] || exit 0

# seed corpora (copied so libFuzzer can add to them without touching the tree)
seed() {
    d="$out/corpus_$1"
    rm -rf "$d"
    mkdir -p "$d"
    shift
    for f in "$@"; do [ -f "$f" ] && cp "$f" "$d/" 2>/dev/null || true; done
    echo "$d"
}
pol=$(seed policy "$root"/examples/*.json "$root"/tests/unit/policy/*.json)
i=0
psd=$(seed prescreen)
for f in "$root"/tests/corpus/prescreen/*/*; do
    case "$f" in *.py) p=0 ;; *.sh) p=1 ;; *.js) p=2 ;; *) continue ;; esac
    i=$((i + 1))
    { printf "\\$(printf %03o "$p")"; cat "$f"; } > "$psd/seed_$i"
done
red=$(seed redact)
{ printf '\003\010leasedS3'; cat "$root/tests/corpus/redact/benign.txt"; } > "$red/seed_benign"
printf '\002\010leasedS3password=hunter2 10.0.0.1 /home/bob leasedS3 bGVhc2VkUzM=' > "$red/seed_rules"

# toolcage-init's configuration: a well-formed blob from the launcher's own writer
initcfg=$(seed initcfg)
"$out/initcfg_seed" "$initcfg/seed_launcher" || echo "initcfg_seed failed: fuzzing from the magic alone"
printf 'tci1' > "$initcfg/seed_magic"

# one target: its regressions, then secs of fuzzing; the report on stdout, 1 if it failed
one() {
    t=$1
    rc=0
    reg="$root/tests/fuzz/regressions/$t"
    # regression inputs first (files not starting with '.'): each must pass
    regs=$(find "$reg" -maxdepth 1 -type f ! -name '.*' 2>/dev/null | sort)
    if [ -n "$regs" ]; then
        # shellcheck disable=SC2086
        if ! "$out/fuzz_$t" $regs >"$out/fuzz_$t.regress.log" 2>&1; then
            echo "not ok - fuzz_$t regressions (see $out/fuzz_$t.regress.log)"
            tail -20 "$out/fuzz_$t.regress.log"
            rc=1
        else
            echo "ok - fuzz_$t regressions ($(echo "$regs" | wc -l) inputs)"
        fi
    fi
    case $t in policy) corp=$pol ;; prescreen) corp=$psd ;; redact) corp=$red ;; initcfg) corp=$initcfg ;; esac
    echo "fuzz_$t: ${secs}s"
    if ! "$out/fuzz_$t" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
        -seed="${FUZZ_SEED:-1}" -artifact_prefix="$root/tests/fuzz/crashes/fuzz_$t-" -print_final_stats=0 "$corp" 2>"$out/fuzz_$t.log"; then
        echo "not ok - fuzz_$t (see $out/fuzz_$t.log and tests/fuzz/crashes/)"
        tail -30 "$out/fuzz_$t.log"
        rc=1
    else
        grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs" "$out/fuzz_$t.log" | tail -1
        echo "ok - fuzz_$t"
    fi
    return $rc
}

# two targets at a time (one process each, and this machine kind has two cores: each gets the
# CPU it would get alone), their reports in order
rc=0
for pair in "policy prescreen" "redact initcfg"; do
    for t in $pair; do
        rm -f "$out/fuzz_$t.rc"
        (if one "$t" >"$out/fuzz_$t.report" 2>&1; then echo 0; else echo 1; fi >"$out/fuzz_$t.rc") &
    done
    wait
    for t in $pair; do
        cat "$out/fuzz_$t.report"
        [ "$(cat "$out/fuzz_$t.rc" 2>/dev/null || echo 1)" = 0 ] || rc=1
    done
done
exit $rc
