# shellcheck shell=bash
# plugin.sh - devstack plugin for openstack-scheduler
#
# Enable it in local.conf:
#     [[local|localrc]]
#     enable_plugin openstack-scheduler <repository URL> main
#
# devstack sources this file as "plugin.sh <mode> <phase>" from stack.sh,
# unstack.sh and clean.sh, after devstack/settings.  Settings are in
# devstack/settings; see devstack/README.rst.
#
# Functions it uses from devstack: setup_develop, iniset, iniset_multiline,
# get_transport_url, database_connection_url, recreate_database,
# is_service_enabled, run_process, stop_process, echo_summary, sudo.

# Save trace setting
_XTRACE_SCHEDULER=$(set +o | grep xtrace)
set -o xtrace


# Helpers
# -------

# True when a devstack SQL server runs: the inventory goes there, else to
# SQLite under $SCHEDULER_STATE_PATH.
function _scheduler_uses_sql_server {
    is_service_enabled mysql postgresql
}

function _scheduler_sqlite_file {
    echo "$SCHEDULER_STATE_PATH/scheduler.sqlite"
}

function _scheduler_drop_database {
    case "${DATABASE_TYPE:-}" in
        mysql)
            mysql -u"$DATABASE_USER" -p"$DATABASE_PASSWORD" \
                -h"${MYSQL_HOST:-$DATABASE_HOST}" \
                -e "DROP DATABASE IF EXISTS $SCHEDULER_DB_NAME;" ||
                echo "WARNING: could not drop database $SCHEDULER_DB_NAME" >&2
            ;;
        postgresql)
            dropdb -h"$DATABASE_HOST" -U"$DATABASE_USER" --if-exists \
                "$SCHEDULER_DB_NAME" ||
                echo "WARNING: could not drop database $SCHEDULER_DB_NAME" >&2
            ;;
        *)
            echo "WARNING: unknown DATABASE_TYPE '${DATABASE_TYPE:-}':" \
                "database $SCHEDULER_DB_NAME left in place" >&2
            ;;
    esac
}


# Phases
# ------

# stack install: the package and its console scripts, in development mode,
# under devstack's upper constraints.
function install_scheduler {
    setup_develop "$SCHEDULER_DIR"
}

# stack post-config: write $SCHEDULER_CONF from scratch.
function configure_scheduler {
    sudo install -d -o "$STACK_USER" -m 755 "$SCHEDULER_CONF_DIR"
    rm -f "$SCHEDULER_CONF"
    touch "$SCHEDULER_CONF"
    mkdir -p "$SCHEDULER_STATE_PATH"

    iniset "$SCHEDULER_CONF" DEFAULT transport_url "$(get_transport_url)"
    iniset "$SCHEDULER_CONF" DEFAULT debug "$SCHEDULER_DEBUG"
    iniset "$SCHEDULER_CONF" DEFAULT state_path "$SCHEDULER_STATE_PATH"
    if [[ "$SCHEDULER_USE_JOURNAL" == "True" ]]; then
        iniset "$SCHEDULER_CONF" DEFAULT use_journal True
    fi

    iniset "$SCHEDULER_CONF" scheduler driver "$SCHEDULER_DRIVER"
    iniset "$SCHEDULER_CONF" scheduler topic "$SCHEDULER_TOPIC"
    iniset "$SCHEDULER_CONF" scheduler workers "$SCHEDULER_WORKERS"

    if [[ -n "$SCHEDULER_AVAILABLE_FILTERS" ]]; then
        # One "available_filters = ..." line per value.
        local -a available
        read -r -a available <<< "$SCHEDULER_AVAILABLE_FILTERS"
        iniset_multiline "$SCHEDULER_CONF" filter_scheduler \
            available_filters "${available[@]}"
    fi
    if [[ -n "$SCHEDULER_ENABLED_FILTERS" ]]; then
        iniset "$SCHEDULER_CONF" filter_scheduler enabled_filters \
            "$SCHEDULER_ENABLED_FILTERS"
    fi
    if [[ -n "$SCHEDULER_WEIGHT_CLASSES" ]]; then
        iniset "$SCHEDULER_CONF" filter_scheduler weight_classes \
            "$SCHEDULER_WEIGHT_CLASSES"
    fi

    if _scheduler_uses_sql_server; then
        iniset "$SCHEDULER_CONF" database connection \
            "$(database_connection_url "$SCHEDULER_DB_NAME")"
    else
        iniset "$SCHEDULER_CONF" database connection \
            "sqlite:///$(_scheduler_sqlite_file)"
    fi
}

# stack post-config: an empty inventory with the current schema.
function init_scheduler {
    if _scheduler_uses_sql_server; then
        recreate_database "$SCHEDULER_DB_NAME"
    else
        rm -f "$(_scheduler_sqlite_file)"
    fi
    # scheduler-service migrates the schema itself at start; use the
    # explicit command where this version of scheduler-manage has one.
    if "$SCHEDULER_BIN_DIR/scheduler-manage" db --help >/dev/null 2>&1; then
        "$SCHEDULER_BIN_DIR/scheduler-manage" --config-file "$SCHEDULER_CONF" \
            db sync
    else
        echo "scheduler-manage has no 'db' command: scheduler-service" \
            "syncs the schema when it starts"
    fi
}

# stack extra: the daemon, as devstack@$SCHEDULER_SERVICE_NAME (or a screen
# window of that name), and the optional compute simulator.
function start_scheduler {
    run_process "$SCHEDULER_SERVICE_NAME" \
        "$SCHEDULER_BIN_DIR/scheduler-service --config-file $SCHEDULER_CONF"
    if is_service_enabled "$SCHEDULER_SIM_SERVICE_NAME"; then
        run_process "$SCHEDULER_SIM_SERVICE_NAME" \
            "$SCHEDULER_BIN_DIR/scheduler-compute-sim --config-file $SCHEDULER_CONF --hosts $SCHEDULER_SIM_HOSTS"
    fi
}

# unstack
function stop_scheduler {
    stop_process "$SCHEDULER_SIM_SERVICE_NAME"
    stop_process "$SCHEDULER_SERVICE_NAME"
}

# clean (after unstack): configuration, state and database.
function cleanup_scheduler {
    sudo rm -rf "${SCHEDULER_CONF_DIR:?}"
    rm -rf "${SCHEDULER_STATE_PATH:?}"
    if _scheduler_uses_sql_server; then
        _scheduler_drop_database
    fi
}


# Dispatch
# --------

if is_service_enabled "$SCHEDULER_SERVICE_NAME"; then
    if [[ "${1:-}" == "stack" && "${2:-}" == "install" ]]; then
        echo_summary "Installing openstack-scheduler"
        install_scheduler
    elif [[ "${1:-}" == "stack" && "${2:-}" == "post-config" ]]; then
        echo_summary "Configuring openstack-scheduler"
        configure_scheduler
        init_scheduler
    elif [[ "${1:-}" == "stack" && "${2:-}" == "extra" ]]; then
        echo_summary "Starting openstack-scheduler"
        start_scheduler
    fi

    if [[ "${1:-}" == "unstack" ]]; then
        stop_scheduler
    fi

    if [[ "${1:-}" == "clean" ]]; then
        cleanup_scheduler
    fi
fi

# Restore xtrace
$_XTRACE_SCHEDULER
