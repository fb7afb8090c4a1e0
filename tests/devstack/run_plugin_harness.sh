#!/usr/bin/env bash
# Run devstack/plugin.sh through its phases against stub devstack functions.
#
#     tests/devstack/run_plugin_harness.sh
#
# No devstack, no root, no network: the devstack functions the plugin calls
# are replaced by stubs that append each call to a log, and every path
# (DEST, DATA_DIR, the configuration directory, the console scripts) lives
# under a temporary directory that stands for "/" and is removed at exit.
# iniset and iniset_multiline really write the file.  sudo runs its
# command without privileges and refuses absolute paths outside the
# temporary root; pip, systemctl, apt-get and friends are replaced on PATH
# by commands that fail, so a plugin that reaches for the real system
# fails here instead.
#
# Like devstack, it sources devstack/settings and then plugin.sh for
# "stack install", "stack post-config" and "stack extra" in one shell (as
# stack.sh does), "unstack" in a second (unstack.sh) and "clean" in a
# third (clean.sh), and checks the calls and the written scheduler.conf.
#
# Environment:
#   SCHEDULER_HARNESS_PYTHON       a python that can import scheduler and
#                                  oslo.config: also load scheduler.conf
#                                  with scheduler.config.parse_args
#                                  (default: python3, skipped when it cannot)
#   SCHEDULER_HARNESS_MANAGE_HAS_DB=1
#                                  the stub scheduler-manage accepts "db"
#                                  (default: it rejects it, as today's does)
#   SCHEDULER_HARNESS_USE_JOURNAL=False
#                                  local.conf sets SCHEDULER_USE_JOURNAL to
#                                  this (default: left out, so on)
#   SCHEDULER_HARNESS_KEEP=1       keep the temporary directory
#
# Output, in sections: "### calls" (one call a line, fields separated by
# tabs, the temporary root written <ROOT>; "RUN" starts a devstack script
# run, "PHASE" a plugin.sh phase), "### scheduler.conf" (as written by
# "stack post-config"), "### oslo.config", "### checks" (ok/FAIL lines),
# "### trace" (xtrace of the runs, on failure only), then "HARNESS OK" or
# "HARNESS FAILED: <n>".  Exit status 0 only when every check passed.

set -o errexit -o nounset -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HARNESS_PYTHON=${SCHEDULER_HARNESS_PYTHON:-python3}
MANAGE_HAS_DB=${SCHEDULER_HARNESS_MANAGE_HAS_DB:-0}
KEEP=${SCHEDULER_HARNESS_KEEP:-0}
USE_JOURNAL=${SCHEDULER_HARNESS_USE_JOURNAL:-}

# Nothing from the caller's environment leaks into the plugin's settings.
for _var in $(compgen -v SCHEDULER_); do
    case "$_var" in
        SCHEDULER_HARNESS_*) ;;
        *) unset "$_var" ;;
    esac
done
unset _var

WORK=$(mktemp -d "${TMPDIR:-/tmp}/scheduler-devstack-harness.XXXXXX")
WORK=$(cd "$WORK" && pwd -P)
export WORK REPO
function _harness_cleanup {
    if [[ "$KEEP" == "1" ]]; then
        echo "harness: kept $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap _harness_cleanup EXIT

export HARNESS_ROOT=$WORK/root          # stands for "/"
export HARNESS_CALLS=$WORK/calls.log
HARNESS_TRACE=$WORK/trace.log
STUB_BIN=$WORK/stub-bin
mkdir -p "$HARNESS_ROOT/etc" "$HARNESS_ROOT/opt/stack/data" \
    "$HARNESS_ROOT/usr/local/bin" "$HARNESS_ROOT/devstack" "$STUB_BIN" \
    "$WORK/home" "$WORK/tmp"
: > "$HARNESS_CALLS"
: > "$HARNESS_TRACE"


# Commands on PATH
# ----------------

# Recording stand-ins for the database clients.
for _cmd in mysql dropdb createdb psql; do
    cat > "$STUB_BIN/$_cmd" <<'EOF'
#!/usr/bin/env bash
line=$(basename "$0")
for arg in "$@"; do line+=$'\t'"${arg//$HARNESS_ROOT/<ROOT>}"; done
printf '%s\n' "$line" >> "$HARNESS_CALLS"
EOF
done
# Commands that would change the real system.
for _cmd in pip pip3 systemctl apt-get apt yum dnf service useradd chown \
        mysqladmin rabbitmqctl; do
    cat > "$STUB_BIN/$_cmd" <<'EOF'
#!/usr/bin/env bash
line="FORBIDDEN"$'\t'$(basename "$0")
for arg in "$@"; do line+=$'\t'"${arg//$HARNESS_ROOT/<ROOT>}"; done
printf '%s\n' "$line" >> "$HARNESS_CALLS"
echo "harness: $(basename "$0") is not allowed here" >&2
exit 1
EOF
done
unset _cmd

# The console scripts setup_develop would have installed.
export HARNESS_MANAGE_HAS_DB=$MANAGE_HAS_DB
cat > "$HARNESS_ROOT/usr/local/bin/scheduler-manage" <<'EOF'
#!/usr/bin/env bash
line=scheduler-manage
for arg in "$@"; do line+=$'\t'"${arg//$HARNESS_ROOT/<ROOT>}"; done
printf '%s\n' "$line" >> "$HARNESS_CALLS"
for arg in "$@"; do
    if [[ "$arg" == db && "$HARNESS_MANAGE_HAS_DB" != 1 ]]; then
        echo "scheduler-manage: error: argument command: invalid choice: 'db'" >&2
        exit 2
    fi
done
exit 0
EOF
# The daemons must never run: run_process only records.
for _cmd in scheduler-service scheduler-compute-sim; do
    cat > "$HARNESS_ROOT/usr/local/bin/$_cmd" <<'EOF'
#!/usr/bin/env bash
printf 'FORBIDDEN\t%s\n' "$(basename "$0")" >> "$HARNESS_CALLS"
exit 1
EOF
done
unset _cmd
chmod +x "$STUB_BIN"/* "$HARNESS_ROOT"/usr/local/bin/*

export PATH="$STUB_BIN:$PATH"
export HOME=$WORK/home
export TMPDIR=$WORK/tmp


# The devstack environment and stub functions
# -------------------------------------------

# What stackrc and local.conf's localrc would set; written to a file that
# every "devstack run" below sources.
cat > "$WORK/localrc" <<EOF
TOP_DIR=$HARNESS_ROOT/devstack
DEST=$HARNESS_ROOT/opt/stack
DATA_DIR=$HARNESS_ROOT/opt/stack/data
STACK_USER=$(id -un)
ENABLED_SERVICES=rabbit,mysql,key,sch-sim
ENABLE_DEBUG_LOG_LEVEL=True
API_WORKERS=2
DATABASE_TYPE=mysql
DATABASE_HOST=127.0.0.1
MYSQL_HOST=127.0.0.1
DATABASE_USER=root
DATABASE_PASSWORD=secretdb
# Overrides a user would put in local.conf.
SCHEDULER_CONF_DIR=$HARNESS_ROOT/etc/scheduler
SCHEDULER_ENABLED_FILTERS=ComputeFilter,RamFilter,VCPUFilter
SCHEDULER_AVAILABLE_FILTERS="scheduler.filters.all_filters scheduler.filters.ram.RamFilter"
SCHEDULER_SIM_HOSTS=3
EOF
if [[ -n "$USE_JOURNAL" ]]; then
    echo "SCHEDULER_USE_JOURNAL=$USE_JOURNAL" >> "$WORK/localrc"
fi

cat > "$WORK/stubs.sh" <<'STUBS'
# shellcheck shell=bash
# Stand-ins for the devstack functions plugin.sh and settings call.

function _harness_log {
    local line=$1 arg
    shift
    for arg in "$@"; do
        line+=$'\t'"${arg//$HARNESS_ROOT/<ROOT>}"
    done
    printf '%s\n' "$line" >> "$HARNESS_CALLS"
}

# Set option = value(s) in section of an ini file, as devstack's iniset
# and iniset_multiline do: every existing line of the option in the
# section is replaced; the section is added at the end when missing.
function _harness_ini_write {
    local file=$1 section=$2 option=$3
    shift 3
    local values
    values=$(printf '%s\n' "$@")
    [[ -e "$file" ]] || : > "$file"
    INI_SECTION=$section INI_OPTION=$option INI_VALUES=$values awk '
        function emit(   i) {
            for (i = 1; i <= n; i++) print opt " = " vals[i]
            done = 1
        }
        BEGIN {
            sec = ENVIRON["INI_SECTION"]; opt = ENVIRON["INI_OPTION"]
            n = split(ENVIRON["INI_VALUES"], vals, "\n")
            insec = 0; seen = 0; done = 0
        }
        /^[ \t]*\[[^]]*\][ \t]*$/ {
            name = $0
            gsub(/^[ \t]*\[[ \t]*|[ \t]*\][ \t]*$/, "", name)
            if (insec && !done) emit()
            insec = (name == sec)
            if (insec) seen = 1
            print
            next
        }
        insec && index($0, "=") > 0 {
            key = substr($0, 1, index($0, "=") - 1)
            gsub(/^[ \t]+|[ \t]+$/, "", key)
            if (key == opt) {
                if (!done) emit()
                next
            }
        }
        { print }
        END {
            if (insec && !done) emit()
            if (!seen) {
                if (NR > 0) print ""
                print "[" sec "]"
                emit()
            }
        }
    ' "$file" > "$file.harness-new"
    mv "$file.harness-new" "$file"
}

function iniset {
    if [[ "$1" == "-sudo" ]]; then
        shift
    fi
    _harness_log iniset "$@"
    [[ $# -eq 4 ]] || die $LINENO "iniset takes 4 arguments, got $#: $*"
    _harness_check_path "$1"
    _harness_ini_write "$1" "$2" "$3" "$4"
}

function iniset_multiline {
    if [[ "$1" == "-sudo" ]]; then
        shift
    fi
    _harness_log iniset_multiline "$@"
    [[ $# -ge 4 ]] || die $LINENO "iniset_multiline needs a value"
    _harness_check_path "$1"
    _harness_ini_write "$@"
}

function die {
    local line=${1:-}
    shift || true
    _harness_log die "$line" "$@"
    echo "harness: die at line $line: $*" >&2
    exit 1
}

function echo_summary {
    _harness_log echo_summary "$@"
}

# devstack's trueorfalse, verbatim in behaviour.
function trueorfalse {
    local default=$1
    [[ -n "${2:-}" ]] || die $LINENO "variable to normalize required"
    local testval=${!2:-}
    case "$testval" in
        "1" | [yY]es | "YES" | [tT]rue | "TRUE" ) echo "True" ;;
        "0" | [nN]o | "NO" | [fF]alse | "FALSE" ) echo "False" ;;
        * ) echo "$default" ;;
    esac
}

function is_service_enabled {
    local service
    for service in "$@"; do
        [[ ,${ENABLED_SERVICES}, =~ ,${service}, ]] && return 0
    done
    return 1
}

function enable_service {
    local service
    _harness_log enable_service "$@"
    for service in "$@"; do
        is_service_enabled "$service" ||
            ENABLED_SERVICES=${ENABLED_SERVICES:+$ENABLED_SERVICES,}$service
    done
}

function disable_service {
    local service
    _harness_log disable_service "$@"
    for service in "$@"; do
        ENABLED_SERVICES=$(echo ",$ENABLED_SERVICES," |
            sed -e "s/,$service,/,/g" -e 's/^,//' -e 's/,$//')
    done
}

function get_python_exec_prefix {
    echo "$HARNESS_ROOT/usr/local/bin"
}

function setup_develop {
    _harness_log setup_develop "$@"
}

function setup_package {
    _harness_log setup_package "$@"
}

function pip_install {
    _harness_log pip_install "$@"
}

function pip_install_gr {
    _harness_log pip_install_gr "$@"
}

function get_transport_url {
    _harness_log get_transport_url "$@"
    echo "rabbit://stackrabbit:secretrabbit@127.0.0.1:5672/"
}

function database_connection_url {
    _harness_log database_connection_url "$@"
    echo "mysql+pymysql://root:secretdb@127.0.0.1/$1?charset=utf8"
}

function recreate_database {
    _harness_log recreate_database "$@"
}

# devstack's run_process starts only enabled services and, under systemd,
# dies unless the command starts with an absolute path.
function run_process {
    local service=$1 command=$2
    is_service_enabled "$service" || return 0
    _harness_log run_process "$@"
    [[ "$command" == /* ]] ||
        die $LINENO "run_process $service: '$command' is not an absolute path"
    local binary=${command%% *}
    [[ -x "$binary" ]] ||
        die $LINENO "run_process $service: $binary is not executable"
}

function stop_process {
    local service=$1
    is_service_enabled "$service" || return 0
    _harness_log stop_process "$@"
}

function _harness_check_path {
    local path=$1
    if [[ "$path" == /* && "$path" != "$HARNESS_ROOT"/* ]]; then
        _harness_log FORBIDDEN path "$path"
        echo "harness: $path is outside the temporary root" >&2
        return 1
    fi
}

# sudo [options] command args...: runs the command unprivileged, only on
# paths inside the temporary root.
function sudo {
    local arg
    while [[ $# -gt 0 && "$1" == -* ]]; do
        case "$1" in
            -u|-g) shift 2 ;;
            *) shift ;;
        esac
    done
    _harness_log sudo "$@"
    for arg in "${@:2}"; do
        _harness_check_path "$arg" || return 1
    done
    "$@"
}
STUBS

# One devstack script run (stack.sh, unstack.sh or clean.sh): a new bash
# process with errexit, as devstack runs, then the stub library, localrc,
# the plugin settings, and plugin.sh once per "mode phase" argument.  (A
# separate process, because errexit does not apply inside a function or
# subshell that is tested by "if" or "||".)
cat > "$WORK/devstack_run.sh" <<'EOF'
# shellcheck shell=bash
set -o errexit -o nounset -o pipefail
# shellcheck disable=SC1091
source "$WORK/stubs.sh"
# shellcheck disable=SC1091
source "$WORK/localrc"
_harness_log RUN "$@"
# shellcheck disable=SC1091
source "$REPO/devstack/settings"
for step in "$@"; do
    _harness_log PHASE "$step"
    # shellcheck disable=SC1091,SC2086  # "stack install" is two words
    source "$REPO/devstack/plugin.sh" $step
done
# What the settings resolved to, for the checks.
printf '%s\n' "ENABLED_SERVICES=$ENABLED_SERVICES" \
    "SCHEDULER_CONF=$SCHEDULER_CONF" \
    "SCHEDULER_STATE_PATH=$SCHEDULER_STATE_PATH" \
    "SCHEDULER_DIR=$SCHEDULER_DIR" > "$WORK/resolved"
EOF

function devstack_run {
    bash "$WORK/devstack_run.sh" "$@" >> "$HARNESS_TRACE" 2>&1
}


# Checks
# ------

FAILURES=0
CHECKS=()
function ok { CHECKS+=("ok: $*"); }
function fail { CHECKS+=("FAIL: $*"); FAILURES=$((FAILURES + 1)); }
function check { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }

# A call line, exactly (fields joined by tabs).
function called {
    local line=$1 arg
    shift
    for arg in "$@"; do line+=$'\t'"$arg"; done
    grep -qxF -- "$line" "$HARNESS_CALLS"
}

function not_called_prefix {
    ! grep -q -- "^$1" "$HARNESS_CALLS"
}

# iniget: the value of option in section ("a\nb" for repeated options).
function ini_get {
    awk -v sec="$2" -v opt="$3" '
        /^[ \t]*\[[^]]*\][ \t]*$/ {
            name = $0; gsub(/^[ \t]*\[[ \t]*|[ \t]*\][ \t]*$/, "", name)
            insec = (name == sec); next
        }
        insec && index($0, "=") > 0 {
            key = substr($0, 1, index($0, "=") - 1)
            gsub(/^[ \t]+|[ \t]+$/, "", key)
            if (key == opt) {
                val = substr($0, index($0, "=") + 1)
                gsub(/^[ \t]+|[ \t]+$/, "", val)
                print val
            }
        }
    ' "$1"
}

function ini_is {
    [[ "$(ini_get "$1" "$2" "$3")" == "$4" ]]
}

R='<ROOT>'
CONF_FILE=$HARNESS_ROOT/etc/scheduler/scheduler.conf
BIN="$R/usr/local/bin"
RC=0

# stack.sh
if devstack_run "stack install" "stack post-config" "stack extra"; then
    ok "stack install, post-config, extra ran"
else
    fail "stack phases exited non-zero (trace below)"
    RC=1
fi
SNAPSHOT=$WORK/scheduler.conf.after-stack
if [[ -f "$CONF_FILE" ]]; then
    cp "$CONF_FILE" "$SNAPSHOT"
fi

check "settings enabled the service sch" \
    grep -sqx "ENABLED_SERVICES=rabbit,mysql,key,sch-sim,sch" "$WORK/resolved"
check "SCHEDULER_DIR defaults to this checkout" \
    grep -sqxF "SCHEDULER_DIR=$REPO" "$WORK/resolved"
check "install: setup_develop of the repository" called setup_develop "$REPO"
check "install: no pip_install of anything else" not_called_prefix pip_install
check "post-config: config dir created through sudo" \
    called sudo install -d -o "$(id -un)" -m 755 "$R/etc/scheduler"
check "post-config: transport_url from get_transport_url" called get_transport_url
check "post-config: database_connection_url scheduler" \
    called database_connection_url scheduler
check "post-config: recreate_database scheduler" called recreate_database scheduler
check "post-config: scheduler-manage db --help probed" \
    called scheduler-manage db --help
if [[ "$MANAGE_HAS_DB" == "1" ]]; then
    check "post-config: scheduler-manage db sync" \
        called scheduler-manage --config-file "$R/etc/scheduler/scheduler.conf" db sync
else
    check "post-config: no db sync without a db command" \
        not_called_prefix $'scheduler-manage\t--config-file'
fi
check "extra: run_process sch scheduler-service" \
    called run_process sch "$BIN/scheduler-service --config-file $R/etc/scheduler/scheduler.conf"
check "extra: run_process sch-sim scheduler-compute-sim" \
    called run_process sch-sim "$BIN/scheduler-compute-sim --config-file $R/etc/scheduler/scheduler.conf --hosts 3"

if [[ -f "$SNAPSHOT" ]]; then
    ok "scheduler.conf written"
    C=$SNAPSHOT
    check "conf: [DEFAULT] transport_url" \
        ini_is "$C" DEFAULT transport_url "rabbit://stackrabbit:secretrabbit@127.0.0.1:5672/"
    check "conf: [DEFAULT] debug" ini_is "$C" DEFAULT debug True
    if [[ -z "$USE_JOURNAL" ]]; then
        check "conf: [DEFAULT] use_journal (on by default)" \
            ini_is "$C" DEFAULT use_journal True
    else
        # $1 is the inner shell's argument: single quotes on purpose.
        # shellcheck disable=SC2016
        check "conf: no use_journal (SCHEDULER_USE_JOURNAL=$USE_JOURNAL)" \
            bash -c '! grep -q "^use_journal" "$1"' _ "$C"
    fi
    check "conf: [DEFAULT] state_path" \
        ini_is "$C" DEFAULT state_path "$HARNESS_ROOT/opt/stack/data/scheduler"
    check "conf: [database] connection" \
        ini_is "$C" database connection "mysql+pymysql://root:secretdb@127.0.0.1/scheduler?charset=utf8"
    check "conf: [scheduler] driver" ini_is "$C" scheduler driver filter_scheduler
    check "conf: [scheduler] topic" ini_is "$C" scheduler topic scheduler
    check "conf: [scheduler] workers (API_WORKERS)" ini_is "$C" scheduler workers 2
    check "conf: [filter_scheduler] enabled_filters" \
        ini_is "$C" filter_scheduler enabled_filters ComputeFilter,RamFilter,VCPUFilter
    check "conf: [filter_scheduler] available_filters, two lines" \
        ini_is "$C" filter_scheduler available_filters \
        $'scheduler.filters.all_filters\nscheduler.filters.ram.RamFilter'
    check "conf: weight_classes left to the default" \
        ini_is "$C" filter_scheduler weight_classes ""
else
    fail "scheduler.conf written at $R/etc/scheduler/scheduler.conf"
fi

# The file as oslo.config reads it, through the project's own parser.
cat > "$WORK/load_conf.py" <<'EOF'
import sys

try:
    from oslo_config import cfg

    from scheduler import config
except ImportError as e:
    print('cannot import scheduler.config: %s' % e)
    sys.exit(3)

config.parse_args(['--config-file', sys.argv[1]], default_config_files=[],
                  setup_logging=False)
conf = cfg.CONF
for name, value in [
        ('transport_url', conf.transport_url),
        ('debug', conf.debug),
        ('use_journal', conf.use_journal),
        ('database.connection', conf.database.connection),
        ('scheduler.driver', conf.scheduler.driver),
        ('scheduler.workers', conf.scheduler.workers),
        ('filter_scheduler.enabled_filters',
         ','.join(conf.filter_scheduler.enabled_filters)),
        ('filter_scheduler.available_filters',
         ' '.join(conf.filter_scheduler.available_filters))]:
    print('%s=%s' % (name, value))
EOF
function oslo_has { grep -qxF -- "$1" <<< "$OSLO_OUT"; }
OSLO_OUT=""
OSLO_RC=0
if [[ -f "$SNAPSHOT" ]]; then
    OSLO_OUT=$(PYTHONPATH=$REPO "$HARNESS_PYTHON" "$WORK/load_conf.py" \
        "$SNAPSHOT" 2>&1) || OSLO_RC=$?
else
    OSLO_OUT="skipped: no scheduler.conf"
    OSLO_RC=3
fi
if [[ $OSLO_RC -eq 3 ]]; then
    ok "oslo.config check skipped ($HARNESS_PYTHON: ${OSLO_OUT##*$'\n'})"
elif [[ $OSLO_RC -ne 0 ]]; then
    fail "oslo.config parses scheduler.conf (exit $OSLO_RC)"
else
    ok "oslo.config parses scheduler.conf"
    check "oslo.config: transport_url" \
        oslo_has "transport_url=rabbit://stackrabbit:secretrabbit@127.0.0.1:5672/"
    check "oslo.config: debug is True" oslo_has "debug=True"
    check "oslo.config: use_journal is ${USE_JOURNAL:-True}" \
        oslo_has "use_journal=${USE_JOURNAL:-True}"
    check "oslo.config: [database] connection" \
        oslo_has "database.connection=mysql+pymysql://root:secretdb@127.0.0.1/scheduler?charset=utf8"
    check "oslo.config: driver" oslo_has "scheduler.driver=filter_scheduler"
    check "oslo.config: workers is 2" oslo_has "scheduler.workers=2"
    check "oslo.config: enabled_filters" \
        oslo_has "filter_scheduler.enabled_filters=ComputeFilter,RamFilter,VCPUFilter"
    check "oslo.config: available_filters has both values" \
        oslo_has "filter_scheduler.available_filters=scheduler.filters.all_filters scheduler.filters.ram.RamFilter"
fi

# unstack.sh
if devstack_run "unstack"; then
    ok "unstack ran"
else
    fail "unstack exited non-zero (trace below)"
    RC=1
fi
check "unstack: stop_process sch" called stop_process sch
check "unstack: stop_process sch-sim" called stop_process sch-sim
check "unstack: configuration kept" test -f "$CONF_FILE"

# clean.sh
if devstack_run "clean"; then
    ok "clean ran"
else
    fail "clean exited non-zero (trace below)"
    RC=1
fi
check "clean: sudo rm -rf of the config dir" called sudo rm -rf "$R/etc/scheduler"
check "clean: config dir gone" test ! -e "$HARNESS_ROOT/etc/scheduler"
check "clean: state dir gone" test ! -e "$HARNESS_ROOT/opt/stack/data/scheduler"
check "clean: database dropped" \
    called mysql -uroot -psecretdb -h127.0.0.1 -e "DROP DATABASE IF EXISTS scheduler;"

check "nothing forbidden was called" not_called_prefix FORBIDDEN
check "no die" not_called_prefix die

echo "### calls"
sed "s|$HARNESS_ROOT|$R|g" "$HARNESS_CALLS"
echo "### scheduler.conf"
if [[ -f "$SNAPSHOT" ]]; then
    sed "s|$HARNESS_ROOT|$R|g" "$SNAPSHOT"
fi
echo "### oslo.config"
printf '%s\n' "${OSLO_OUT//$HARNESS_ROOT/$R}"
echo "### checks"
printf '%s\n' "${CHECKS[@]}"
if [[ $FAILURES -gt 0 || $RC -ne 0 ]]; then
    echo "### trace"
    sed "s|$HARNESS_ROOT|$R|g" "$HARNESS_TRACE"
    echo "HARNESS FAILED: $FAILURES"
    exit 1
fi
echo "HARNESS OK"
