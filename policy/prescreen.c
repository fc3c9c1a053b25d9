/* Pre-screening: normalise (prescreen_norm.c), then run the rule set of each normalised segment
 * (PCRE2, compiled once, JIT when available), map matches back to the original line/column. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "policy/prescreen.h"

#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "policy/prescreen_norm.h"
#include "policy/prescreen_unicode.h"

enum { L_PY = 1, L_SH = 2, L_JS = 4, L_ALL = 7 };

struct rule {
    const char *id;
    int langs;
    enum tc_severity sev;
    const char *message;
    const char *re;
};

/* Word-ish end of a path argument in shell text or inside a string literal. */
#define END     "(?=[\\s;|&)\"'`]|$)"
#define SHELLS  "(?:sudo\\s+)?(?:\\S*/)?(?:ba|z|da|k|c|tc)?sh\\b"
#define SYSDIRS "(?:etc|usr|var|home|boot|bin|sbin|lib|lib64|root|opt|srv|dev|proc|sys)"
/* Python namespaces that hold the builtins or a module's globals */
#define PYNS "(?:__builtins__|\\bbuiltins|\\bglobals\\(\\)|\\blocals\\(\\)|\\bvars\\(\\))"

static const struct rule rules[] = {
    /* ---- every language (shell commands also hide in string literals) ---- */
    {"destructive_rm", L_ALL, TC_SEV_CRITICAL,
     "recursive delete of the root, home or a system directory",
     "\\brm\\s+(?:-[\\w-]+\\s+)*-\\w*[rR]\\w*(?:\\s+-[\\w-]+)*\\s+[\"']?(?:/\\*?|~/?\\*?|\\$HOME/"
     "?\\*?|\\$\\{HOME\\}/?\\*?|/" SYSDIRS "/?\\*?)[\"']?" END
     "|\\brm\\s+(?:-[\\w-]+\\s+)*--no-preserve-root\\b"
     "|\\bcd\\s+/\\s*(?:&&|;)\\s*rm\\s+-\\w*[rR]\\w*\\s+\\*"},
    {"disk_wipe", L_ALL, TC_SEV_CRITICAL, "overwrites or formats a block device",
     "\\bdd\\b[^\\n]*\\bof=/dev/(?:sd|hd|nvme|xvd|vd|mmcblk|disk|mapper|md)"
     "|\\bmkfs(?:\\.\\w+)?\\s+(?:-\\S+\\s+)*/dev/"
     "|>\\s*/dev/(?:sd[a-z]|nvme\\d|hd[a-z]|xvd[a-z]|vd[a-z]|mmcblk\\d)"
     "|\\bshred\\b[^\\n]*/dev/|\\bwipefs\\s"},
    {"chmod_777_root", L_ALL, TC_SEV_CRITICAL,
     "opens permissions on the whole filesystem or a system directory",
     "\\bchmod\\s+(?:-\\w+\\s+)*(?:0?777|a\\+rwx|ugo\\+rwx|o\\+w)\\s+(?:-\\w+\\s+)*[\"']?(?:/"
     "\\*?|/" SYSDIRS "/?\\*?)[\"']?" END "|\\bchown\\s+-R\\s+\\S+\\s+/" END},
    {"fork_bomb", L_ALL, TC_SEV_CRITICAL, "fork bomb",
     ":\\s*\\(\\s*\\)\\s*\\{\\s*:\\s*\\|\\s*:\\s*&\\s*\\}\\s*;\\s*:"
     "|\\b(\\w+)\\s*\\(\\s*\\)\\s*\\{\\s*\\1\\s*\\|\\s*\\1\\s*&\\s*\\}"
     "|while\\s*(?:True|1|\\(\\s*true\\s*\\))\\s*[:{]\\s*(?:os\\.fork|fork)\\(\\)"},
    {"dev_tcp", L_ALL, TC_SEV_CRITICAL,
     "network connection through /dev/tcp or /dev/udp (reverse shell)", "/dev/(?:tcp|udp)/"},
    {"reverse_shell", L_ALL, TC_SEV_CRITICAL, "reverse or bind shell",
     "\\b(?:nc|ncat|netcat|nc\\.traditional)\\b[^\\n|;]*\\s-\\w*[ec]\\w*\\s+[\"']?(?:/bin/|/usr/"
     "bin/)?(?:ba|z|da)?sh\\b"
     "|\\b(?:nc|ncat|netcat)\\b[^\\n]*\\s-e\\s"
     "|\\bsocat\\b[^\\n]*\\b(?:exec|system):"
     "|\\b(?:ba)?sh\\s+-i\\s*(?:[<>]|\\d>)&?"
     "|\\bmkfifo\\b[^\\n]*\\b(?:nc|ncat|telnet|openssl)\\b"
     "|\\btelnet\\s+\\S+\\s+\\d+\\s*\\|\\s*(?:/bin/)?(?:ba)?sh\\b"
     "|\\bopenssl\\s+s_client\\b[^\\n]*\\|\\s*(?:/bin/)?(?:ba)?sh\\b"
     "|\\bos\\.dup2\\("
     "|\\.pipe\\(\\s*[\\w.]+\\.stdin\\s*\\)[^\\n]*\\n?[^\\n]*\\.stdout\\.pipe\\("
     "|\\bchild_process\\.spawn(?:Sync)?\\(\\s*\"(?:/bin/"
     ")?(?:ba|z|da)?sh\"[^\\n]*\\n?[^\\n]*\\.pipe\\("
     "|python[23]?\\s+-c\\s+[^\\n]*socket[^\\n]*(?:dup2|pty|subprocess|/bin/(?:ba)?sh)"},
    {"pipe_to_shell", L_ALL, TC_SEV_CRITICAL,
     "downloads code and runs it in a shell or interpreter",
     "\\b(?:curl|wget|fetch)\\b[^\\n|;]*\\|\\s*" SHELLS
     "|\\b(?:ba|z|da)?sh\\s+<\\(\\s*(?:curl|wget)\\b"
     "|\\b(?:ba|z|da)?sh\\s+-c\\s+[\"']?\\$\\(\\s*(?:curl|wget)\\b"
     "|\\b(?:curl|wget)\\b[^\\n|;]*\\|\\s*(?:sudo\\s+)?(?:python[23]?|perl|ruby|node)\\b"
     "|\\beval\\s+[\"']?\\$\\(\\s*(?:curl|wget)\\b"},
    {"decode_to_shell", L_ALL, TC_SEV_CRITICAL, "decoded data is executed by a shell",
     "(?:\\bbase64\\s+(?:-\\w*[dD]\\w*|--decode)|\\bxxd\\s+(?:-\\w+\\s+)*-\\w*r|\\|\\s*rev\\b|"
     "\\bopenssl\\s+(?:enc\\s+)?-?base64\\s+-d"
     "|\\btr\\s+[\"']?(?:A-Za-z|a-zA-Z)[\"']?\\s+[\"']?(?:N-ZA-Mn-za-m|n-za-mN-ZA-M))[^\\n;]*\\|"
     "\\s*" SHELLS "|\\becho\\s+\"\\x01[^\\n]*\\|\\s*" SHELLS
     "|\\beval\\s+\"\\x01|\\b(?:ba|z|da)?sh\\s+-c\\s+\"\\x01|\\b(?:ba|z|da)?sh\\s+<<<\\s*\"\\x01"
     "|(?:^|[\\s;&|(])(?:\\.|source|(?:ba|z|da)?sh)\\s+<\\(\\s*echo\\s+\"\\x01"},
    {"credential_read", L_ALL, TC_SEV_HIGH,
     "reads credential files (SSH keys, cloud credentials, shadow)",
     "(?:~|\\$HOME|\\$\\{HOME\\}|/home/[\\w.-]+|/root)/\\.ssh\\b"
     "|(?<![\\w.])\\.ssh/"
     "(?:id_\\w+|authorized_keys|known_hosts|config)\\b|\"\\x01?\\.ssh\"|\\bid_(?:rsa|dsa|ecdsa|"
     "ed25519)\\b"
     "|\\.aws/(?:credentials|config)\\b|\"\\.aws\"|/etc/shadow\\b|/etc/gshadow\\b|\\.docker/"
     "config\\.json"
     "|\\.kube/config\\b|(?<![\\w.])\\.netrc\\b|\\.git-credentials\\b|\\.config/"
     "gcloud\\b|(?<![\\w.])\\.pgpass\\b"
     "|/proc/(?:self|\\d+)/environ\\b|(?<![\\w.])\\.gnupg\\b|\\.azure/|\\.password-store\\b"},
    {"pickle_gadget", L_ALL, TC_SEV_CRITICAL,
     "a pickle that imports a command or code runner (runs it when loaded)",
     "\\bc(?:os|posix|nt|subprocess|builtins|__builtin__|commands|pty)[ \\n]"
     "(?:system|popen|Popen|exec\\w*|eval|spawn\\w*|check_output|getoutput|call|run)\\b"
     "|\\x8c[\\x01-\\x20](?:os|posix|nt|subprocess|builtins)\\x94?\\x8c[\\x01-\\x20]"
     "(?:system|popen|Popen|exec\\w*|eval|check_output|getoutput)"},
    {"cloud_metadata", L_ALL, TC_SEV_HIGH, "queries a cloud instance metadata service",
     "169\\.254\\.169\\.254|metadata\\.google\\.internal|100\\.100\\.100\\.200|fd00:ec2::254"},
    {"persistence", L_ALL, TC_SEV_HIGH,
     "installs persistence (shell profiles, cron, services, preload)",
     ">>?\\s*[\"']?\\S*(?:\\.bashrc|\\.bash_profile|\\.zshrc|\\.profile|authorized_keys|/etc/"
     "crontab|/etc/cron\\.\\w+/\\S*"
     "|/etc/rc\\.local|/etc/ld\\.so\\.preload|/etc/sudoers|/etc/passwd)\\b"
     "|\\bcrontab\\s+-r\\b|\\(\\s*crontab\\s+-l|\\|\\s*crontab\\s+-|\\bsystemctl\\s+enable\\b|/etc/"
     "ld\\.so\\.preload"
     "|\\bLD_PRELOAD="},
    {"setuid", L_ALL, TC_SEV_HIGH, "sets the setuid/setgid bit",
     "\\bchmod\\s+(?:-\\w+\\s+)*(?:[ugoa]*\\+s|[0-7]?[2-7][0-7]{3})\\s"},
    {"crypto_miner", L_ALL, TC_SEV_HIGH, "cryptocurrency miner",
     "\\bxmrig\\b|stratum\\+(?:tcp|ssl)://|\\bminerd\\b|\\bcpuminer\\b|cryptonight|coinhive"},
    {"kill_all", L_ALL, TC_SEV_HIGH, "kills every process or powers the machine off",
     "\\bkill\\s+-(?:9|KILL|SIGKILL)\\s+-1\\b|\\bkillall5\\b|\\bpkill\\s+-9\\s+-u\\b|\\bos\\."
     "kill\\(\\s*-1\\b"
     "|\\bprocess\\.kill\\(\\s*-1\\b"},
    {"exfiltration", L_ALL, TC_SEV_HIGH, "sends local files or the environment to a remote host",
     "\\bcurl\\b[^\\n]*(?:-d|--data(?:-binary|-raw|-urlencode)?|-F|-T|--upload-file)\\s*[\"']?\\w*="
     "?@(?:/etc/|~|\\$HOME|/root|/home|[^\\s\"']*(?:\\.ssh|\\.aws|passwd|shadow|\\.env\\b))"
     "|\\b(?:env|printenv|set)\\s*\\|\\s*(?:curl|nc|ncat|wget)\\b"
     "|\\bnc\\s+(?:-\\w+\\s+)*\\S+\\s+\\d+\\s*<\\s*/(?:etc|home|root)"
     "|\\bscp\\s+[^\\n]*(?:\\.ssh|\\.aws|/etc/shadow)"
     "|JSON\\.stringify\\(\\s*process\\.env\\s*\\)"
     "|(?:requests\\.(?:post|put)|urlopen|fetch)\\([^\\n]*(?:os\\.environ|process\\.env)\\b"},
    {"history_tampering", L_ALL, TC_SEV_MEDIUM, "hides traces (history, logs)",
     "\\bhistory\\s+-c\\b|\\bunset\\s+HISTFILE\\b|HISTFILE=/dev/null|HISTSIZE=0|>\\s*/var/log/"
     "\\S+|\\brm\\s+(?:-\\w+\\s+)*/var/log/"},
    {"firewall_off", L_ALL, TC_SEV_MEDIUM, "disables a firewall or security module",
     "\\biptables\\s+-F\\b|\\bufw\\s+disable\\b|\\bsetenforce\\s+0\\b"},
    {"system_passwd_read", L_ALL, TC_SEV_MEDIUM, "reads the system account database",
     "/etc/passwd\\b"},

    /* ---- Python ---- */
    {"py_exec_decoded", L_PY, TC_SEV_CRITICAL, "decoded or obfuscated code is executed",
     "(?:(?<![\\w.])|" PYNS "(?:\\.__dict__)?\\.)(?:exec|eval|compile|execfile)\\("
     "\\s*\"\\x01"},
    {"py_exec_remote", L_PY, TC_SEV_CRITICAL, "code downloaded at run time is executed",
     "(?:(?<![\\w.])|" PYNS "(?:\\.__dict__)?\\.)(?:exec|eval)\\([^\\n]*(?:"
     "urlopen|requests\\.get|urllib\\.request|http\\.client)"},
    {"py_exec", L_PY, TC_SEV_HIGH, "dynamic code execution (exec/eval/compile)",
     "(?:(?<![\\w.])|" PYNS "(?:\\.__dict__)?\\.)(?:exec|eval|execfile)\\(|(?<!["
     "\\w.])compile\\([^\\n]*\"exec\""
     "|" PYNS "(?:\\.__dict__)?\\.(?:exec|eval|compile)\\b"},
    {"py_shell", L_PY, TC_SEV_MEDIUM, "runs a command through os or subprocess",
     "\\bos\\.(?:system|popen\\d?|exec[lv]p?e?|spawn[lv]p?e?|posix_spawnp?)\\("
     "|\\bsubprocess\\.(?:run|call|check_call|check_output|Popen|getoutput|getstatusoutput)\\(|"
     "\\bcommands\\.getoutput\\("},
    {"evasion_decoded_command", L_PY, TC_SEV_HIGH,
     "a command that was decoded or assembled from character codes is run",
     "\\b(?:os\\.(?:system|popen\\d?|exec\\w*|spawn\\w*|posix_spawnp?)|subprocess\\.\\w+|"
     "commands\\."
     "getoutput|pty\\.spawn)\\(\\s*\\[?\\s*\"\\x01"},
    {"py_pty_spawn", L_PY, TC_SEV_HIGH, "spawns an interactive shell on a pseudo-terminal",
     "\\bpty\\.spawn\\("},
    {"py_rmtree_root", L_PY, TC_SEV_CRITICAL, "deletes the root, home or a system directory",
     "\\bshutil\\.rmtree\\(\\s*\"(?:/|~|/" SYSDIRS
     ")/?\"|\\bos\\.(?:remove|unlink|rmdir)\\(\\s*\"/(?:etc|bin|usr|boot)/"},
    {"py_system_write", L_PY, TC_SEV_HIGH, "writes a system or shell start-up file",
     "\\bopen\\(\\s*\"[^\"]*(?:/etc/"
     "|\\.bashrc|\\.bash_profile|\\.profile|\\.zshrc|authorized_keys)[^\"]*\"\\s*,\\s*\"[wa]"},
    {"py_native_code", L_PY, TC_SEV_HIGH,
     "loads native code or executable memory (ctypes, mmap PROT_EXEC)",
     "\\bctypes\\.(?:CDLL|cdll|windll|memmove|CFUNCTYPE|cast|pythonapi)\\b|\\bPROT_EXEC\\b"},
    {"py_marshal", L_PY, TC_SEV_HIGH, "unmarshals code objects",
     "\\bmarshal\\.loads\\(|\\btypes\\.CodeType\\("},
    {"py_pickle", L_PY, TC_SEV_MEDIUM, "unpickles data (can run code)",
     "\\b(?:pickle|cPickle|dill)\\.loads?\\("},
    {"py_socket", L_PY, TC_SEV_MEDIUM, "opens a network socket",
     "\\bsocket\\.socket\\(|\\bsocket\\.create_connection\\("},
    {"py_setuid", L_PY, TC_SEV_MEDIUM, "changes process identity",
     "\\bos\\.set(?:e?[ug]id|res[ug]id)\\("},
    /* Evasion: these constructs exist to reach what a plain call would show. */
    {"evasion_object_graph", L_PY, TC_SEV_HIGH,
     "walks the object graph (subclasses of object, function globals, frames, the builtins "
     "dictionary) to reach code a plain call would show",
     "(?:\\bobject|\\btype|__class__|__base__|__bases__\\s*\\[[^\\]\\n]*\\]|__mro__\\s*\\[[^\\]\\n]"
     "*\\])"
     "\\s*\\.\\s*__subclasses__\\b"
     "|\\.__globals__\\b|\\bfunc_globals\\b|\\bf_builtins\\b"
     "|\\bf_globals\\s*(?:\\[|\\.\\s*(?:get|__builtins__|__import__)\\b)"
     "|\\b(?:gi|cr|ag)_frame\\s*\\.\\s*f_(?:globals|locals|builtins)\\b"
     "|\\b__builtins__\\s*(?:\\[|\\.\\s*(?:__dict__|get|__import__|__loader__)\\b)"
     "|\\.__builtins__\\b|\\bbuiltins\\s*\\.\\s*(?:__dict__|__import__)\\b"
     "|\\bvars\\(\\s*(?:__builtins__|builtins)\\s*\\)"
     "|\\b__loader__\\s*\\.\\s*load_module\\b|\\bgc\\.get_(?:objects|referrers|referents)\\b"
     "|\\btype\\(\\s*lambda\\b[^\\n]*?\\)\\s*\\(|\\.__code__\\s*(?:=(?!=)|\\.replace\\()"
     "|\\b(?:globals|locals|vars)\\(\\)\\.(?:__import__|system|popen|spawn\\w*|exec\\w*|eval|"
     "compile|"
     "getattr|Popen|check_output|getoutput)\\b"},

    /* ---- JavaScript ---- */
    {"js_eval_decoded", L_JS, TC_SEV_CRITICAL, "decoded or obfuscated code is executed",
     "(?:(?<![\\w.$])|\\b(?:window|global|globalThis)\\.)(?:eval|Function|setTimeout|setInterval)"
     "\\(\\s*\"\\x01"
     "|\\bnew Function\\([^)]*\"\\x01|\\bvm\\.\\w+\\(\\s*\"\\x01"},
    {"js_eval", L_JS, TC_SEV_HIGH, "dynamic code execution (eval, Function, vm)",
     "(?:(?<![\\w.$])|\\b(?:window|global|globalThis|self)\\.)eval\\(|\\bnew "
     "Function\\(|(?<![\\w.$])Function\\s*\\("
     "|\\bvm\\.(?:runInNewContext|runInThisContext|runInContext|Script|compileFunction)\\b|\\bset(?"
     ":Timeout|Interval)\\(\\s*\""},
    {"js_child_process", L_JS, TC_SEV_MEDIUM, "runs a command through child_process",
     "\\bchild_process\\.(?:exec|execSync|spawn|spawnSync|execFile|execFileSync|fork)\\("},
    {"evasion_decoded_command", L_JS, TC_SEV_HIGH,
     "a command that was decoded or assembled from character codes is run",
     "\\bchild_process\\.(?:exec|execSync|spawn|spawnSync|execFile|execFileSync|fork)\\(\\s*"
     "\"\\x01"},
    {"js_native", L_JS, TC_SEV_HIGH, "reaches into Node internals or native code",
     "\\bprocess\\.(?:binding|dlopen|_linkedBinding)\\(|\\bprocess\\.mainModule\\b"},
    {"js_rm_root", L_JS, TC_SEV_CRITICAL, "deletes the root, home or a system directory",
     "\\bfs\\.(?:rmSync|rmdirSync|rm|rmdir|promises\\.rm)\\(\\s*\"(?:/|~|/" SYSDIRS ")/?\""},
    {"js_system_write", L_JS, TC_SEV_HIGH, "writes a system or shell start-up file",
     "\\bfs\\.(?:writeFileSync|appendFileSync|writeFile|appendFile)\\(\\s*\"[^\"]*(?:/etc/"
     "|\\.bashrc|\\.profile|\\.zshrc|authorized_keys)"},
    {"js_socket", L_JS, TC_SEV_MEDIUM, "opens a raw network socket",
     "\\bnet\\.(?:connect|createConnection|Socket)\\b"},
    {"evasion_object_graph", L_JS, TC_SEV_HIGH,
     "reaches the Function constructor or Node's module loader through the object graph",
     "\\.constructor\\s*\\.\\s*constructor\\b"
     "|(?<!\\bnew\\s)\\b[\\w$]+(?:\\.[\\w$]+)*\\.constructor\\s*\\(\\s*\"|[\\])]\\s*\\."
     "constructor\\s*\\(\\s*\""
     "|\\}\\s*\\)\\s*\\.constructor\\b|\\bgetPrototypeOf\\(\\s*(?:async\\s+)?function\\b"
     "|\\[\\s*\\]\\s*\\.\\s*[\\w$]+\\s*\\.\\s*constructor\\b"
     "|\\bmodule\\.constructor\\b|\\bModule\\._load\\b|\\b_load\\s*\\(|\\brequire\\.main\\."
     "require\\b"
     "|(?:\\bObject\\.(?:keys|values|entries|getOwnPropertyNames|getOwnPropertyDescriptors)|"
     "\\bReflect\\.ownKeys)\\(\\s*(?:globalThis|global|window|self|process)\\s*\\)"},
    {"evasion_indirect_exec", L_JS, TC_SEV_HIGH,
     "runs generated code indirectly (eval or Function passed around as a value, indirect eval)",
     "(?:[(,=:?|&]|\\breturn)\\s*(?:eval|Function)\\s*(?:[),;\\]]|$)"
     "|\\b(?:eval|Function)\\s*\\.\\s*(?:call|apply|bind)\\s*\\("
     "|\\b(?:globalThis|global|window|self)\\.Function\\s*\\("},

    /* ---- shell ---- */
    {"sh_eval", L_SH, TC_SEV_MEDIUM, "evaluates a constructed command", "(?:^|[\\s;&|(])eval\\s"},
    {"sh_download_exec", L_SH, TC_SEV_HIGH, "downloads a file and executes it",
     "\\b(?:curl|wget)\\b[^\\n]*(?:-o|-O|>)\\s*(\\S+)[^\\n]*(?:&&|;)\\s*(?:chmod\\s+\\+x|(?:ba)?"
     "sh\\s+|\\./|python[23]?\\s)"},
    {"sh_find_delete_root", L_SH, TC_SEV_CRITICAL, "deletes files across the whole filesystem",
     "\\bfind\\s+/\\s[^\\n]*(?:-delete\\b|-exec\\s+rm\\b)"},
    {"sh_shutdown", L_SH, TC_SEV_HIGH, "powers the machine off or reboots it",
     "(?:^|[;&|(]\\s*|\\bsudo\\s+)(?:shutdown|reboot|halt|poweroff)\\b|(?:^|[;&|(]\\s*|\\bsudo\\s+)"
     "init\\s+[06]\\b"},
    {"sh_sudo", L_SH, TC_SEV_MEDIUM, "uses sudo", "(?:^|[\\s;&|(])sudo\\s"},
};

#define NRULES (sizeof(rules) / sizeof(rules[0]))

static pcre2_code *compiled[NRULES];
static pthread_once_t compile_once = PTHREAD_ONCE_INIT;
static int compile_error = 0;
static bool no_jit;

void tc_prescreen_once(void)
{
    no_jit = true;
}

bool tc_prescreen_jit(void)
{
    return !no_jit;
}

static void compile_rules(void)
{
    for (size_t i = 0; i < NRULES; i++) {
        int err;
        PCRE2_SIZE off;
        compiled[i] = pcre2_compile((PCRE2_SPTR)rules[i].re, PCRE2_ZERO_TERMINATED, PCRE2_MULTILINE,
                                    &err, &off, NULL);
        if (!compiled[i]) {
            compile_error = -EINVAL; /* a bug in the table above; test_prescreen catches it */
            continue;
        }
        if (!no_jit) /* (the interpreter if the JIT is unavailable) */
            (void)pcre2_jit_compile(compiled[i], PCRE2_JIT_COMPLETE);
    }
}

const char *tc_severity_name(enum tc_severity s)
{
    static const char *const n[] = {"low", "medium", "high", "critical"};
    return (unsigned)s < 4 ? n[s] : "low";
}

const char *tc_prescreen_action_name(enum tc_prescreen_action a)
{
    static const char *const n[] = {"run", "warn", "approve", "block"};
    return (unsigned)a < 4 ? n[a] : "run";
}

static enum ps_lang lang_of(const char *language)
{
    if (!language)
        return PS_NONE;
    if (strcmp(language, "python") == 0)
        return PS_PYTHON;
    if (strcmp(language, "shell") == 0)
        return PS_SHELL;
    if (strcmp(language, "javascript") == 0)
        return PS_JS;
    return PS_NONE;
}

struct finding {
    const char *rule;
    enum tc_severity sev;
    const char *message;
    uint32_t src;
    char excerpt[TC_PRESCREEN_MAX_EXCERPT + 1];
    unsigned line, col;
};

struct flist {
    struct finding *v;
    size_t n, alloc;
};

/* Copy up to TC_PRESCREEN_MAX_EXCERPT bytes as valid UTF-8 without control characters; a
 * bidi control or invisible character becomes a visible "⟪U+202E⟫". */
static void make_excerpt(char *dst, const char *s, size_t n)
{
    size_t o = 0, i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == PS_DECODED_MARK))
        i++;
    while (i < n && o < TC_PRESCREEN_MAX_EXCERPT) {
        unsigned char c = (unsigned char)s[i];
        if (c == (unsigned char)PS_DECODED_MARK) {
            i++;
            continue;
        }
        if (c < 0x20 || c == 0x7f) {
            dst[o++] = ' ';
            i++;
            continue;
        }
        if (c < 0x80) {
            dst[o++] = (char)c;
            i++;
            continue;
        }
        uint32_t cp;
        size_t len = tc_utf8_next(s + i, n - i, &cp);
        enum tc_hidden h = len ? tc_hidden_class(cp, NULL) : TC_HIDDEN_NONE;
        if (len && h != TC_HIDDEN_NONE && h != TC_HIDDEN_SPACE) {
            char m[24];
            size_t mn = tc_hidden_marker(cp, m, sizeof(m));
            if (o + mn > TC_PRESCREEN_MAX_EXCERPT)
                break;
            memcpy(dst + o, m, mn);
            o += mn;
            i += len;
        } else if (len) {
            if (o + len > TC_PRESCREEN_MAX_EXCERPT)
                break;
            memcpy(dst + o, s + i, len);
            o += len;
            i += len;
        } else {
            dst[o++] = '?';
            i++;
        }
    }
    while (o > 0 && dst[o - 1] == ' ')
        o--;
    dst[o] = '\0';
}

static int add_finding(struct flist *f, const struct rule *r, enum tc_severity sev,
                       const char *message, uint32_t src, const char *ex, size_t exn)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i].src == src && f->v[i].rule == r->id)
            return 0;
    if (f->n >= 4096)
        return 0;
    if (f->n == f->alloc) {
        size_t na = f->alloc ? f->alloc * 2 : 16;
        struct finding *nv = realloc(f->v, na * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        f->v = nv;
        f->alloc = na;
    }
    struct finding *x = &f->v[f->n++];
    *x = (struct finding){.rule = r->id, .sev = sev, .message = message, .src = src};
    make_excerpt(x->excerpt, ex, exn);
    return 0;
}

static int scan_segment(struct ps_norm *n, size_t from, size_t to, enum ps_lang lang,
                        struct flist *f, pcre2_match_data *md, pcre2_match_context *mc)
{
    int mask = lang == PS_PYTHON ? L_PY : lang == PS_SHELL ? L_SH : L_JS;
    const char *subj = n->text.data + from;
    size_t len = to - from;
    int r = 0;
    for (size_t i = 0; i < NRULES && r >= 0; i++) {
        if (!(rules[i].langs & mask) || !compiled[i])
            continue;
        size_t off = 0;
        for (int hits = 0; off <= len && hits < 256; hits++) {
            int rc = pcre2_match(compiled[i], (PCRE2_SPTR)subj, len, off, 0, md, mc);
            if (rc < 0)
                break;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t s = ov[0], e = ov[1];
            /* Rules that start with a delimiter ("(?:^|[\s;&|(])eval\s") match the newline that
             * ends the line before: locate the finding at its first significant byte, as the
             * excerpt starts there, so that line and column point at the code itself. */
            size_t at = s;
            while (at < e && (subj[at] == ' ' || subj[at] == '\t' || subj[at] == '\n' ||
                              subj[at] == PS_DECODED_MARK))
                at++;
            if (at == e)
                at = s;
            if ((r = add_finding(f, &rules[i], rules[i].sev, rules[i].message, n->map[from + at],
                                 subj + s, e - s)) < 0)
                break;
            off = e > s ? e : s + 1;
            /* one finding per rule per line is enough */
            const char *nl = memchr(subj + off, '\n', len - (off < len ? off : len));
            if (!nl)
                break;
            off = (size_t)(nl - subj) + 1;
        }
    }
    return r;
}

static int fcmp(const void *a, const void *b)
{
    const struct finding *x = a, *y = b;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    if (x->col != y->col)
        return x->col < y->col ? -1 : 1;
    if (x->sev != y->sev)
        return x->sev > y->sev ? -1 : 1;
    return strcmp(x->rule, y->rule);
}

/* ---- characters a reviewer cannot see ---- */

static const struct rule hidden_rules[] = {
    {"bidi_control", L_ALL, TC_SEV_HIGH,
     "Unicode bidirectional control character: the code may run differently from how it reads "
     "(Trojan Source, CVE-2021-42574)",
     NULL},
    {"hidden_text", L_ALL, TC_SEV_HIGH,
     "invisible characters that can carry text or form names (Unicode tag characters, Hangul or "
     "Khmer fillers)",
     NULL},
    {"invisible_character", L_ALL, TC_SEV_MEDIUM,
     "invisible or zero-width character, line separator, variation selector or control "
     "character: what runs is not what a reader sees",
     NULL},
    {"mixed_script_identifier", L_ALL, TC_SEV_MEDIUM,
     "a word mixes Latin with Cyrillic or Greek letters (look-alike characters)", NULL},
};

static bool is_cyr_greek(uint32_t cp)
{
    return (cp >= 0x0370 && cp <= 0x03ff) || (cp >= 0x0400 && cp <= 0x052f);
}

static bool is_word(uint32_t cp)
{
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
           cp == '_' || (cp >= 0xc0 && cp != 0xd7 && cp != 0xf7 && cp < 0x2000);
}

static int scan_hidden(const char *code, size_t len, struct flist *f)
{
    uint32_t prev = 0;
    size_t line = 1, last[4] = {0, 0, 0, 0};
    size_t wstart = 0;
    bool w_latin = false, w_other = false, in_word = false;
    int r = 0;
    for (size_t i = 0; i < len && r >= 0;) {
        uint32_t cp, next = 0;
        size_t n = tc_utf8_next(code + i, len - i, &cp);
        if (n == 0) { /* invalid byte: not text we can judge */
            i++;
            prev = 0xfffd;
            in_word = false;
            continue;
        }
        if (i + n < len)
            (void)tc_utf8_next(code + i + n, len - i - n, &next);
        enum tc_hidden h = tc_hidden_class(cp, NULL);
        int rule = -1;
        switch (h) {
        case TC_HIDDEN_BIDI:
            rule = 0;
            break;
        case TC_HIDDEN_TAG:
        case TC_HIDDEN_FILLER:
            rule = 1;
            break;
        case TC_HIDDEN_INVISIBLE:
            /* joiners inside emoji sequences and non-Latin words; a BOM at the start */
            if ((cp == 0x200d || cp == 0x200c) && prev >= 0x80 && next >= 0x80)
                break;
            if (cp == 0xfeff && i == 0)
                break;
            rule = 2;
            break;
        case TC_HIDDEN_VARIATION:
            if (cp != 0xfe0e && cp != 0xfe0f) /* text/emoji presentation: ordinary */
                rule = 2;
            break;
        case TC_HIDDEN_MARK:
        case TC_HIDDEN_SEPARATOR:
            rule = 2;
            break;
        case TC_HIDDEN_CONTROL:
            if (!(cp == '\r' && next == '\n') && cp != '\f')
                rule = 2;
            break;
        default:
            break;
        }
        if (rule >= 0 && last[rule] != line) {
            last[rule] = line;
            size_t ls = i, le = i;
            while (ls > 0 && code[ls - 1] != '\n' && i - ls < 40)
                ls--;
            while (le < len && code[le] != '\n' && le - i < 60)
                le++;
            r = add_finding(f, &hidden_rules[rule], hidden_rules[rule].sev,
                            hidden_rules[rule].message, (uint32_t)i, code + ls, le - ls);
        }
        /* words mixing Latin and Cyrillic/Greek letters */
        if (is_word(cp)) {
            if (!in_word)
                wstart = i, w_latin = w_other = false, in_word = true;
            w_latin |= (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
            w_other |= is_cyr_greek(cp);
        }
        if ((!is_word(cp) || i + n >= len) && in_word) {
            if (w_latin && w_other && last[3] != line && r >= 0) {
                last[3] = line;
                size_t we = is_word(cp) ? i + n : i;
                r = add_finding(f, &hidden_rules[3], hidden_rules[3].sev, hidden_rules[3].message,
                                (uint32_t)wstart, code + wstart, we - wstart);
            }
            in_word = false;
        }
        if (cp == '\n')
            line++;
        prev = cp;
        i += n;
    }
    return r;
}

static int fcmp_severity(const void *a, const void *b)
{
    const struct finding *x = a, *y = b;
    if (x->sev != y->sev)
        return x->sev > y->sev ? -1 : 1;
    return fcmp(a, b);
}

int tc_prescreen(const char *language, const char *code, size_t len, json_t **ret_findings)
{
    enum ps_lang lang = lang_of(language);
    struct ps_norm n = {0};
    struct flist f = {0};
    pcre2_match_data *md = NULL;
    pcre2_match_context *mc = NULL;
    json_t *arr = NULL;
    int r = 0;

    pthread_once(&compile_once, compile_rules);
    if (!code)
        len = 0;
    if (len > TC_PRESCREEN_MAX_CODE)
        len = TC_PRESCREEN_MAX_CODE;
    if (!(arr = json_array()))
        return -ENOMEM;
    if (len == 0 || !language || strcmp(language, "none") == 0)
        goto done;
    /* hidden characters in any language (also "other"); the rules only in the three we know */
    if ((r = scan_hidden(code, len, &f)) < 0)
        goto out;
    if (lang == PS_NONE)
        goto positions;
    if (!(md = pcre2_match_data_create(4, NULL)) || !(mc = pcre2_match_context_create(NULL))) {
        r = -ENOMEM;
        goto out;
    }
    pcre2_set_match_limit(mc, 200000);
    pcre2_set_depth_limit(mc, 2000);

    /* the code itself, then every queued payload (each job may queue more, up to the depth cap) */
    struct seg {
        size_t from, to;
        enum ps_lang lang;
    } *segs = NULL;
    size_t nsegs = 0, segalloc = 0;
    for (size_t k = 0;; k++) {
        size_t from = n.text.len;
        enum ps_lang l;
        if (k == 0) {
            l = lang;
            r = ps_normalise(lang, code, len, 0, 0, &n);
        } else {
            if (k - 1 >= n.njobs)
                break;
            struct ps_job j = n.jobs[k - 1];
            l = j.lang;
            r = ps_normalise(j.lang, j.code, j.len, j.depth, j.src, &n);
        }
        if (r < 0)
            break;
        if (nsegs == segalloc) {
            size_t na = segalloc ? segalloc * 2 : 8;
            struct seg *ns = realloc(segs, na * sizeof(*ns));
            if (!ns) {
                r = -ENOMEM;
                break;
            }
            segs = ns;
            segalloc = na;
        }
        segs[nsegs++] = (struct seg){from, n.text.len, l};
    }
    for (size_t k = 0; k < nsegs && r >= 0; k++)
        if (segs[k].to > segs[k].from)
            r = scan_segment(&n, segs[k].from, segs[k].to, segs[k].lang, &f, md, mc);
    free(segs);
    if (r < 0)
        goto out;
    for (size_t k = 0; k < n.nnotes && r >= 0; k++) {
        struct rule nr = {.id = n.notes[k].rule};
        const struct ps_note *pn = &n.notes[k];
        size_t ls = pn->src < len ? pn->src : len, le = ls;
        while (le < len && code[le] != '\n')
            le++;
        r = add_finding(&f, &nr, (enum tc_severity)pn->severity, pn->message, pn->src, code + ls,
                        le - ls);
    }
    if (r < 0)
        goto out;

positions:
    /* line and column of each finding in the original code */
    {
        size_t line = 1, ls = 0, pos = 0;
        /* sort by src first to walk the code once */
        for (size_t a = 1; a < f.n; a++)
            for (size_t b = a; b > 0 && f.v[b - 1].src > f.v[b].src; b--) {
                struct finding t = f.v[b];
                f.v[b] = f.v[b - 1];
                f.v[b - 1] = t;
            }
        for (size_t k = 0; k < f.n; k++) {
            size_t target = f.v[k].src < len ? f.v[k].src : len;
            while (pos < target) {
                if (code[pos] == '\n')
                    line++, ls = pos + 1;
                pos++;
            }
            f.v[k].line = (unsigned)line;
            f.v[k].col = (unsigned)(target - ls + 1);
        }
        if (f.n > 1)
            qsort(f.v, f.n, sizeof(*f.v), fcmp);
    }
    if (f.n > TC_PRESCREEN_MAX_FINDINGS) {
        /* too many: keep the most severe (then the earliest), so the decision sees them */
        qsort(f.v, f.n, sizeof(*f.v), fcmp_severity);
        f.n = TC_PRESCREEN_MAX_FINDINGS;
        qsort(f.v, f.n, sizeof(*f.v), fcmp);
    }
    for (size_t k = 0; k < f.n; k++) {
        json_t *o =
            json_pack("{s:s, s:s, s:I, s:I, s:s, s:s}", "rule", f.v[k].rule, "severity",
                      tc_severity_name(f.v[k].sev), "line", (json_int_t)f.v[k].line, "column",
                      (json_int_t)f.v[k].col, "excerpt", f.v[k].excerpt, "message", f.v[k].message);
        if (!o || json_array_append_new(arr, o) < 0) {
            r = -ENOMEM;
            goto out;
        }
    }
done:
    *ret_findings = arr;
    arr = NULL;
    r = 0;
out:
    json_decref(arr);
    free(f.v);
    ps_norm_free(&n);
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    return r;
}

const char *tc_prescreen_language(const struct tc_tool *tool)
{
    json_t *ps = tool && tool->raw ? json_object_get(tool->raw, "prescreen") : NULL;
    const char *rules_ = json_string_value(json_object_get(ps, "rules"));
    if (rules_)
        return rules_;
    return tool && tool->language ? tool->language : "other";
}

enum tc_prescreen_action tc_prescreen_decide(const struct tc_tool *tool, json_t *findings)
{
    static const enum tc_prescreen_action defaults[] = {TC_ACTION_WARN, TC_ACTION_WARN,
                                                        TC_ACTION_APPROVE, TC_ACTION_BLOCK};
    json_t *acts = tool && tool->raw
                       ? json_object_get(json_object_get(tool->raw, "prescreen"), "actions")
                       : NULL;
    enum tc_prescreen_action best = TC_ACTION_RUN;
    size_t i;
    json_t *f;

    json_array_foreach(findings, i, f)
    {
        const char *sev = json_string_value(json_object_get(f, "severity"));
        int s = -1;
        for (int k = 0; k < 4 && sev; k++)
            if (strcmp(sev, tc_severity_name((enum tc_severity)k)) == 0)
                s = k;
        if (s < 0)
            continue;
        enum tc_prescreen_action a = defaults[s];
        const char *m = json_string_value(json_object_get(acts, sev));
        if (m)
            a = strcmp(m, "block") == 0     ? TC_ACTION_BLOCK
                : strcmp(m, "approve") == 0 ? TC_ACTION_APPROVE
                                            : TC_ACTION_WARN;
        if (a > best)
            best = a;
    }
    return best;
}
