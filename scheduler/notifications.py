"""Versioned notifications about scheduling decisions.

Event types, published as ``scheduler:<host>``:

* ``scheduler.select_destinations.start`` (INFO): a request arrived;
* ``scheduler.select_destinations.end`` (INFO): where the instances go;
* ``scheduler.select_destinations.error`` (ERROR): NoValidHost or
  another failure, with the exception;
* ``scheduler.claim.expired`` (WARN): a claim was released because the
  compute never reported the instance (a build probably lost).

Enable them with ``[oslo_messaging_notifications] driver = messagingv2``
(and ``topics``, default ``notifications``).  A notification that cannot
be sent is logged and dropped: it never fails a scheduling request.
"""

from oslo_config import cfg
from oslo_log import log as logging

from scheduler import metrics
from scheduler.objects import notification as payloads
from scheduler import rpc

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

EVENT_PREFIX = 'scheduler.select_destinations'


def _enabled() -> bool:
    return bool(CONF.oslo_messaging_notifications.driver)


def _send(ctxt, priority: str, event: str, payload) -> None:
    try:
        notifier = rpc.get_notifier('scheduler:%s' % CONF.host)
        getattr(notifier, priority)(ctxt, event, payload)
    except Exception as e:  # notifications must never fail a request
        LOG.warning('Could not send notification %s: %s', event, e)


def _send_select(ctxt, priority: str, suffix: str, payload_cls, spec_obj,
                 **fields) -> None:
    if _enabled():
        _send(ctxt, priority, EVENT_PREFIX + suffix, payload_cls(
            request_spec=payloads.RequestSpecPayload.from_spec(spec_obj),
            **fields))


def select_start(ctxt, spec_obj, driver: str) -> None:
    _send_select(ctxt, 'info', '.start', payloads.SelectDestinationsPayload,
                 spec_obj, destinations=[], driver=driver)


def select_end(ctxt, spec_obj, driver: str, selections: list) -> None:
    _send_select(ctxt, 'info', '.end', payloads.SelectDestinationsPayload,
                 spec_obj, driver=driver,
                 destinations=[[alts[0].service_host, alts[0].nodename]
                               for alts in selections])


def select_error(ctxt, spec_obj, driver: str, error: Exception) -> None:
    _send_select(ctxt, 'error', '.error', payloads.ExceptionPayload,
                 spec_obj, exception=type(error).__name__,
                 exception_message=str(error), driver=driver)


def claim_expired(claim) -> None:
    """A claim expired unfulfilled: log an ERROR, count and notify.

    The only trace of a build whose ``run_instance`` cast never reached
    its compute (one the broker took into the compute's queue and lost
    with it in a restart, for one): a lost build, so an ERROR naming it,
    like the builds no compute took (``driver``).  Operators alert on
    the ERROR, the ``scheduler_claims_expired_total`` counter or this
    notification.
    """
    LOG.error('Claim of instance %(uuid)s on %(host)s expired (node '
              '%(node)s): the compute never reported it (build lost?); '
              'its resources are released',
              {'uuid': claim.instance_uuid, 'host': claim.host,
               'node': claim.nodename})
    metrics.record_claim_expired()
    if not _enabled():
        return
    from scheduler import context
    _send(context.get_admin_context(), 'warn', 'scheduler.claim.expired',
          payloads.ClaimExpiredPayload(
              instance_uuid=claim.instance_uuid, host=claim.host,
              nodename=claim.nodename, claimed_at=float(claim.claimed_at),
              project_id=claim.project_id, user_id=claim.user_id))
