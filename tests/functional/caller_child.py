"""The child side of ``tests.functional.caller`` (see there).

Its runtime is chosen first thing, as in the console scripts: nothing
else of the process may be imported before.
"""

from scheduler import concurrency

concurrency.setup([])

import json  # noqa: E402  (after the runtime is chosen)
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402

import oslo_messaging  # noqa: E402

from scheduler import config  # noqa: E402
from scheduler import context  # noqa: E402
from scheduler import objects  # noqa: E402
from scheduler import rpcapi  # noqa: E402


def main() -> int:
    args = sys.argv[1:]
    timeout = float(args[args.index('--timeout') + 1])
    config.parse_args(
        ['--config-file', args[args.index('--config-file') + 1]],
        default_config_files=[])
    api = rpcapi.SchedulerAPI(timeout=timeout)
    ctxt = context.RequestContext(user_id='caller', project_id='functional')
    for line in sys.stdin:
        spec = objects.RequestSpec(
            flavor=objects.Flavor(memory_mb=64, vcpus=1, root_gb=1),
            num_instances=1, project_id='functional', user_id='caller')
        started = time.monotonic()
        try:
            if line.strip() == 'cast':
                api.schedule_run_instance(ctxt, spec, [str(uuid.uuid4())])
                outcome = {'cast': 'sent'}
            else:
                [[selection]] = api.select_destinations(ctxt, spec)
                outcome = {'host': selection.service_host}
        except Exception as e:  # the outcome the test looks at
            outcome = {'error': type(e).__name__,
                       'timeout': isinstance(
                           e, oslo_messaging.MessagingTimeout),
                       'message': str(e)}
        outcome['elapsed'] = time.monotonic() - started
        sys.stdout.write(json.dumps(outcome) + '\n')
        sys.stdout.flush()
    return 0


if __name__ == '__main__':
    sys.exit(main())
