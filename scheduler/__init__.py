"""A standalone, nova-style compute scheduler built on the oslo libraries."""

import warnings

# eventlet, and the oslo libraries that still use it, warn on import that
# it is deprecated.  The scheduler uses it on purpose (see
# scheduler.concurrency); the warning is noise in every log and test run.
warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
warnings.filterwarnings('ignore', message=r'.*eventlet.*deprecated',
                        category=DeprecationWarning)
