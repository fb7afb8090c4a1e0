"""SchedulerAPI: the client that callers (a conductor) import.

It speaks the newest scheduler RPC API version the servers can take:
``[upgrade_levels] scheduler`` caps it during rolling upgrades (or
``auto`` asks a running scheduler), and every call falls back to what
the capped version allows, down to the legacy dict API of 1.0.
Objects are backported to the versions the server knows, and the
server backports the Selections it returns to ours.  Unset, the cap is
the newest version; before its first message that only a newer
scheduler can hear, the client makes sure a scheduler speaks it
(``SchedulerTooOld`` otherwise), so a skipped upgrade step fails at the
sender instead of losing casts.
"""

import threading
import time

from amqp import exceptions as amqp_exceptions
from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging

from scheduler import exception
from scheduler import objects
from scheduler.objects import base as objects_base
from scheduler.objects import host_state as host_state_obj
from scheduler import rpc

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: Calls and casts the broker must route to a queue, or hand back as an
#: error (``rpc.call`` sends such a call again until a queue takes it).
MANDATORY = oslo_messaging.TransportOptions(at_least_once=True)

#: RequestSpec fields the legacy dicts of API 1.0 cannot carry.
_NOT_IN_LEGACY = ('requested_destination', 'numa_topology', 'pci_requests')


def _check_legacy(spec_obj, method: str) -> None:
    """Raise ``SchedulerTooOld`` for a request capped at 1.0 that sets
    a field the legacy dicts drop: sent without it, the instance would
    be placed where the request says it must not be."""
    lost = [name for name in _NOT_IN_LEGACY if spec_obj.obj_get(name)]
    if lost:
        raise exception.SchedulerTooOld(
            topic=CONF.scheduler.topic, method=method, needed='1.1',
            why='the cap is 1.0, whose legacy dicts have no %s'
            % ', '.join(lost))


#: Seconds before the queues that say "a scheduler older than 1.4" are
#: looked at again (``SchedulerAPI._judge_by_queues``).
OLD_CONFIRM_AFTER = 2.0


class SchedulerAPI:
    """Client side of the scheduler RPC API (see SchedulerManager)."""

    VERSION = '1.6'
    #: The version that put compute and operator casts on their own
    #: topics: what ``_check_uncapped`` makes sure the schedulers hear.
    TOPICS_VERSION = '1.4'
    #: The version of liveness messages (``report_alive``).
    ALIVE_VERSION = '1.6'

    #: Seconds a check that the schedulers hear our newest version
    #: waits for the bus; when it cannot tell, it is done again that
    #: often in the background (meanwhile messages go unchecked).
    VERIFY_TIMEOUT = 10
    VERIFY_AGAIN_AFTER = 15

    def __init__(self, transport=None, timeout: int | None = None,
                 cast_retry: int | None = None):
        """``cast_retry``: how often a state-changing cast is tried again
        while the broker is unreachable.  None (oslo.messaging's
        default) waits until it is back, as a compute's reports should;
        a command-line tool sets a small number, so that it ends.
        """
        self._transport = transport
        self._timeout = timeout
        self._cast_retry = cast_retry
        self._client = None
        self._cast_clients: dict = {}
        self._server_manifest: dict | None = None
        #: With no cap: '' when the schedulers hear our newest version,
        #: why not when they do not, None until that can be told.
        self._verdict: str | None = None
        self._verifying = False
        self._verify_lock = threading.Lock()
        #: Reports on the intake (1.5) and liveness messages (1.6).
        self._intake = _Heard(rpc.intake_topic, '1.5',
                              'Schedulers take reports on %s (API 1.5): '
                              'each report goes to one of them')
        self._alive = _Heard(rpc.alive_topic, self.ALIVE_VERSION,
                             'Schedulers take liveness messages on %s '
                             '(API 1.6): a report with nothing new goes '
                             'as one')
        #: (host, nodename) -> the digest of the last full report sent
        #: by ``report`` (``objects.host_state.content_digest``).
        self._full_sent: dict = {}
        self._full_sent_lock = threading.Lock()

    # -- version negotiation --------------------------------------------

    @property
    def client(self):
        if self._client is None:
            cap = CONF.upgrade_levels.scheduler
            manifest = None
            if cap == 'auto':
                cap, manifest = self._probe_version(self._timeout)
            target = oslo_messaging.Target(topic=CONF.scheduler.topic,
                                           version='1.0')
            self._client = rpc.get_client(target, version_cap=cap,
                                          transport=self._transport,
                                          timeout=self._timeout)
            self._server_manifest = manifest
            LOG.debug('Scheduler RPC client capped at %s', cap or 'latest')
        return self._client

    def _probe_version(self, timeout: float | None) -> tuple:
        """(API version, object manifest) of a running scheduler."""
        target = oslo_messaging.Target(topic=CONF.scheduler.topic,
                                       version='1.0')
        probe = rpc.get_client(target, transport=self._transport,
                               timeout=timeout)
        from scheduler import context as ctx_mod
        try:
            info = rpc.call(probe.prepare(version='1.2',
                                          transport_options=MANDATORY),
                            ctx_mod.get_admin_context(), 'get_version_info')
        except oslo_messaging.MessagingTimeout:
            # No answer is not an old scheduler: nothing is cached, the
            # next call asks again.
            raise
        except (oslo_messaging.RemoteError,
                oslo_messaging.MessagingException) as e:
            # A 1.0/1.1 server has no get_version_info.
            LOG.info('Scheduler did not tell its version (%s); assuming '
                     '1.1', e.__class__.__name__)
            return '1.1', objects_base.MANIFEST_AT_RPC_1_1
        return info['rpc_version'], info['objects']

    def can_send_version(self, version: str) -> bool:
        return self.client.can_send_version(version)

    def _manifest_for_server(self) -> dict | None:
        """Object versions the server can read, when not our own."""
        # Negotiate first: with ``auto`` the manifest is what the
        # scheduler answers, and the first message must honour it too.
        client = self.client
        if self._server_manifest is not None:
            return self._server_manifest
        if not client.can_send_version('1.2'):
            return objects_base.MANIFEST_AT_RPC_1_1
        return None

    def _backport(self, obj):
        manifest = self._manifest_for_server()
        if manifest is None:
            return obj
        return objects_base.obj_to_primitive_for(obj, manifest)

    # -- calls ------------------------------------------------------------

    def select_destinations(self, ctxt, spec_obj, instance_uuids=None,
                            return_objects: bool = True,
                            return_alternates: bool = False):
        """Choose destinations for ``spec_obj.num_instances`` instances.

        With ``return_objects`` (the default) returns one list of
        Selections per instance (first choice, then alternates when
        ``return_alternates``); otherwise the legacy list of dicts.
        Raises ``NoValidHost`` when the instances cannot all be placed.
        """
        client = self.client
        if client.can_send_version('1.1'):
            version = '1.2' if client.can_send_version('1.2') else '1.1'
            kwargs = {'spec_obj': self._backport(spec_obj),
                      'instance_uuids': instance_uuids,
                      'return_objects': return_objects,
                      'return_alternates': return_alternates}
            if version == '1.2':
                kwargs['peer_manifest'] = objects_base.obj_manifest()
            return rpc.call(client.prepare(version=version,
                                           transport_options=MANDATORY),
                            ctxt, 'select_destinations', **kwargs)
        _check_legacy(spec_obj, 'select_destinations')
        request_spec = spec_obj.to_legacy_request_spec_dict()
        if instance_uuids:
            request_spec['instance_uuids'] = list(instance_uuids)
        dests = rpc.call(
            client.prepare(version='1.0', transport_options=MANDATORY), ctxt,
            'select_destinations',
            request_spec=request_spec,
            filter_properties=spec_obj.to_legacy_filter_properties_dict())
        if not return_objects:
            return dests
        return [[objects.Selection.from_legacy_dict(d)] for d in dests]

    def schedule_run_instance(self, ctxt, spec_obj, instance_uuids) -> None:
        """Cast: place the instances and start them on their hosts.

        Published with the AMQP mandatory flag: when no queue takes it
        (no scheduler ever ran on the topic, or the broker lost the
        queue) it raises ``oslo_messaging.MessageUndeliverable`` here
        instead of vanishing.  A scheduler that took it serves it, even
        when told to stop (``scheduler.taken_messages``).
        """
        client = self.client
        if client.can_send_version('1.1'):
            client.prepare(version='1.1', transport_options=MANDATORY).cast(
                ctxt, 'schedule_run_instance',
                spec_obj=self._backport(spec_obj),
                instance_uuids=list(instance_uuids))
            return
        _check_legacy(spec_obj, 'schedule_run_instance')
        request_spec = spec_obj.to_legacy_request_spec_dict()
        request_spec['instance_uuids'] = list(instance_uuids)
        client.prepare(version='1.0', transport_options=MANDATORY).cast(
            ctxt, 'schedule_run_instance', request_spec=request_spec,
            filter_properties=spec_obj.to_legacy_filter_properties_dict())

    # Casts that change state: from 1.4 on their own topics and
    # exchanges (see rpc.reports_topic/operator_topic), so that broker
    # permissions can keep them to computes and operators.

    def update_service_capabilities(self, ctxt, host_state) -> None:
        """A compute agent's report: one node's state.

        To the schedulers' shared intake queue when they speak 1.5 (one
        worker of the deployment takes it); else the fanout cast of
        1.4 and before, to every worker.  A report the broker refuses
        on the intake (a compute credential that may publish only on
        the fanout exchange, as before 1.5) goes by the fanout, and so
        do the next ones for ``INTAKE_REFUSED_WAIT`` seconds.
        """
        host_state = self._backport(host_state)
        if self._intake_heard():
            try:
                self._cast_client('intake', rpc.intake_target,
                                  version='1.5').prepare(
                    retry=self._cast_retry).cast(
                        ctxt, 'update_service_capabilities',
                        host_state=host_state)
                return
            except oslo_messaging.MessageDeliveryFailure as e:
                self._intake_refused(e)
        self._state_cast(rpc.reports_topic(), '1.0', ctxt,
                         'update_service_capabilities',
                         host_state=host_state)

    def report(self, ctxt, host_state) -> bool:
        """A compute's periodic or changed report of one node: the full
        report when it says something new, else a liveness message.

        A liveness message (``report_alive``, API 1.6) names the node
        and the digest of its last full report
        (``objects.host_state.content_digest``, at the HostState version
        the schedulers read): the scheduler renews the node without
        decoding or writing a report.  The full report goes
        (``update_service_capabilities``) when the node's digest is not
        that of the last full report this client sent, when
        ``want_full_report`` asked for it, and whenever the schedulers
        do not take liveness messages (``_alive_heard``).

        Only a compute that serves ``send_report`` (compute API 1.1)
        may use this: a scheduler that does not hold the digest a
        liveness message names asks for the full report that way, and
        renews nothing until it comes.  Returns True when a liveness
        message went, False for a full report.
        """
        return self.report_many(ctxt, [host_state]) == 1

    #: Most nodes one liveness message names (schedulers take 1,000).
    ALIVE_BATCH = 500

    def report_many(self, ctxt, host_states: list) -> int:
        """``report`` of several nodes at once (a compute of many nodes,
        a simulated fleet): each changed one's full report, and one
        liveness message for up to ``ALIVE_BATCH`` quiet ones.  Returns
        how many nodes went as liveness."""
        heard = self._alive_heard()
        version = self._report_version() if heard else None
        quiet, full = [], []
        for state in host_states:
            key = (state.host, state.nodename)
            digest = (host_state_obj.content_digest(state, version)
                      if heard else None)
            with self._full_sent_lock:
                same = heard and self._full_sent.get(key) == digest
            (quiet if same else full).append((state, key, digest))
        alive = 0
        for start in range(0, len(quiet), self.ALIVE_BATCH):
            chunk = quiet[start:start + self.ALIVE_BATCH]
            if not self._send_alive(ctxt, [[key[0], key[1], digest]
                                           for _s, key, digest in chunk]):
                full.extend(quiet[start:])
                break
            alive += len(chunk)
        for state, key, digest in full:
            self.update_service_capabilities(ctxt, state)
            with self._full_sent_lock:
                if digest is None:
                    self._full_sent.pop(key, None)
                else:
                    self._full_sent[key] = digest
        return alive

    def want_full_report(self, host: str, nodename: str) -> None:
        """The next ``report`` of the node sends the full report (a
        scheduler asked: compute API 1.1 ``send_report``)."""
        with self._full_sent_lock:
            self._full_sent.pop((host, nodename), None)

    def report_alive(self, ctxt, nodes: list) -> None:
        """Cast a liveness message (API 1.6): ``nodes`` is
        ``[[host, nodename, digest]]``, nodes alive whose state is that
        of their last full report.  Raises ``MessageDeliveryFailure``
        when the broker refuses it."""
        self._cast_client('alive', rpc.alive_target,
                          version=self.ALIVE_VERSION).prepare(
                              retry=self._cast_retry).cast(
            ctxt, 'report_alive', nodes=[list(node) for node in nodes],
            sent_at=time.time())

    def _send_alive(self, ctxt, nodes: list) -> bool:
        """``report_alive``, False (and none for a while) when the broker
        refuses it: the caller sends the full report instead."""
        try:
            self.report_alive(ctxt, nodes)
            return True
        except oslo_messaging.MessageDeliveryFailure as e:
            self._alive.refused(self.INTAKE_REFUSED_WAIT)
            LOG.warning('The broker refused a liveness message on '
                        '%(queue)s: %(error)s. Sending full reports '
                        'instead, and trying again in %(wait)d s',
                        {'queue': rpc.alive_topic(), 'error': e,
                         'wait': self.INTAKE_REFUSED_WAIT})
            return False

    def _report_version(self) -> str:
        """The HostState version full reports reach the schedulers at."""
        manifest = self._manifest_for_server()
        if manifest and manifest.get('HostState'):
            return manifest['HostState']
        return objects.HostState.VERSION

    def _alive_heard(self) -> bool:
        """Whether liveness messages may go (API 1.6).

        Never unless ``[scheduler] report_liveness`` is set.  As
        ``_intake_heard``, of which it needs the conditions too:
        with a cap (or ``auto``), when it allows 1.6; without one, when
        the liveness queue has consumers at the broker (only 1.6
        schedulers consume it; elsewhere, when a scheduler says it
        speaks 1.6), asked again every ``VERIFY_AGAIN_AFTER`` seconds
        until it has.
        """
        return (CONF.scheduler.report_liveness and self._intake_heard()
                and self._heard(self._alive))

    #: Seconds a client whose report the broker refused on the intake
    #: sends by the fanout before it tries the intake again (time for an
    #: operator to widen the permission, without an error every report).
    INTAKE_REFUSED_WAIT = 600

    def _intake_refused(self, error: Exception) -> None:
        """The broker refused a report on the intake: the fanout for
        ``INTAKE_REFUSED_WAIT`` seconds, and a WARNING that says why."""
        self._intake.refused(self.INTAKE_REFUSED_WAIT)
        LOG.warning('The broker refused a report on the schedulers\' '
                    'intake (exchange %(exchange)s): %(error)s. Sending '
                    'reports by the fanout exchange %(exchange)s_fanout '
                    'instead (every scheduler worker takes each one), and '
                    'trying the intake again in %(wait)d s. Give this '
                    'compute\'s broker user write and configure on '
                    '%(exchange)s (admin guide, "Security and trust"), or '
                    'set [scheduler] report_intake = false',
                    {'exchange': rpc.reports_topic(), 'error': error,
                     'wait': self.INTAKE_REFUSED_WAIT})

    def _intake_heard(self) -> bool:
        """Whether reports may go to the intake queue (API 1.5).

        Never unless ``[scheduler] report_intake`` is set, nor for a
        while after the broker refused one there (``_intake_refused``).
        With a cap (or ``auto``), when it allows 1.5.  Without one,
        when the intake queue has consumers at the broker (on
        transports without queues: when a scheduler says it speaks
        1.5); until then reports go the 1.4 way, which every scheduler
        since 1.4 hears, and the question is asked again every
        ``VERIFY_AGAIN_AFTER`` seconds.  A deployment whose
        schedulers are not all 1.5 yet caps its computes at 1.4 (admin
        guide, rolling upgrades): the queue has consumers as soon as
        one scheduler is 1.5.
        """
        return CONF.scheduler.report_intake and self._heard(self._intake)

    def _heard(self, kind: '_Heard') -> bool:
        """Whether the schedulers take ``kind``, as ``_intake_heard``
        says: once told, kept; until then asked again every
        ``VERIFY_AGAIN_AFTER`` seconds."""
        if time.monotonic() < kind.refused_until:
            return False
        if CONF.upgrade_levels.scheduler is not None:
            return self.client.can_send_version(kind.version)
        if kind.heard is not None:
            return kind.heard
        now = time.monotonic()
        if now - kind.asked < self.VERIFY_AGAIN_AFTER:
            return False
        kind.asked = now
        heard = self._schedulers_take(kind.topic(), kind.version)
        if heard:
            kind.heard = True
            LOG.info(kind.told, kind.topic())
        return heard

    def _schedulers_take(self, queue: str, version: str) -> bool:
        """Whether schedulers consume ``queue`` (API ``version``).

        On AMQP, whether the queue has consumers at the broker; on
        transports without queues, whether a scheduler says it speaks
        ``version`` (False when none answers in time).
        """
        url = rpc.transport_url_of(self._transport)
        if rpc.is_amqp(transport_url=url):
            return bool(self._queue_consumers(url, queue))
        server = self._server_version()
        return server is not None and \
            _version_tuple(server) >= _version_tuple(version)

    def _server_version(self) -> str | None:
        """A running scheduler's API version; None when none answers
        within ``VERIFY_TIMEOUT``."""
        try:
            return self._probe_version(
                min(self._timeout or CONF.rpc_response_timeout,
                    self.VERIFY_TIMEOUT))[0]
        except oslo_messaging.MessagingTimeout:
            return None

    def _cast_client(self, key: str, target_of, *args, **kwargs):
        """The client of casts ``key``, to ``target_of(*args, **kwargs)``
        (made once)."""
        if key not in self._cast_clients:
            self._cast_clients[key] = rpc.get_client(
                target_of(*args, **kwargs), transport=self._transport,
                timeout=self._timeout)
        return self._cast_clients[key]

    def update_instance_info(self, ctxt, host_name, instance_uuids) -> None:
        self._state_cast(rpc.reports_topic(), '1.1', ctxt,
                         'update_instance_info', host_name=host_name,
                         instance_uuids=list(instance_uuids))

    def delete_instance_info(self, ctxt, host_name, instance_uuid) -> None:
        """Needs an admin context: it releases the instance's resources."""
        self._state_cast(rpc.reports_topic(), '1.1', ctxt,
                         'delete_instance_info', host_name=host_name,
                         instance_uuid=instance_uuid)

    def sync_instance_info(self, ctxt, host_name, instance_uuids) -> None:
        """Needs an admin context: placements not listed are dropped."""
        self._state_cast(rpc.reports_topic(), '1.1', ctxt,
                         'sync_instance_info', host_name=host_name,
                         instance_uuids=list(instance_uuids))

    def update_aggregates(self, ctxt, aggregates) -> None:
        """Needs an admin context (an operator's).  A WARNING here when
        no scheduler consumed the topic (``_warn_if_unheard``)."""
        self._state_cast(rpc.operator_topic(), '1.1', ctxt,
                         'update_aggregates', confirm=True,
                         aggregates=[self._backport(a) for a in aggregates])

    def delete_aggregate(self, ctxt, aggregate) -> None:
        """Needs an admin context (an operator's).  A WARNING here when
        no scheduler consumed the topic (``_warn_if_unheard``)."""
        self._state_cast(rpc.operator_topic(), '1.1', ctxt,
                         'delete_aggregate', confirm=True,
                         aggregate=self._backport(aggregate))

    def explain(self, ctxt, spec_obj) -> dict:
        """The scheduler's decisions for ``spec_obj``; nothing is claimed.

        Needs a 1.3 scheduler; admins get per-host reasons and ranking.
        """
        if not self.client.can_send_version('1.3'):
            raise exception.InvalidRequest(
                reason='explain needs scheduler API 1.3; this client is '
                       'capped lower by [upgrade_levels] scheduler')
        return rpc.call(self.client.prepare(version='1.3',
                                            transport_options=MANDATORY),
                        ctxt, 'explain', spec_obj=self._backport(spec_obj))

    def get_version_info(self, ctxt) -> dict:
        return rpc.call(self.client.prepare(version='1.2',
                                            transport_options=MANDATORY),
                        ctxt, 'get_version_info')

    def _state_cast(self, topic: str, legacy_version: str, ctxt,
                    method: str, confirm: bool = False, **kwargs) -> None:
        """Fanout cast to ``topic`` (1.4), or to the request topic before.

        ``legacy_version`` is the version that introduced ``method`` on
        the request topic: below it the cast is not sent at all.
        ``confirm``: look at the broker afterwards whether a scheduler
        consumed the topic (``_warn_if_unheard``); for the rare
        operator casts, not for a fleet's reports.
        """
        client = self.client
        if client.can_send_version('1.4'):
            self._check_uncapped(method, '1.4')
            self._cast_client(topic, rpc.own_exchange_target, topic,
                              version='1.4').prepare(
                fanout=True, retry=self._cast_retry).cast(
                    ctxt, method, **kwargs)
            if confirm:
                self._warn_if_unheard(method, topic)
            return
        if not client.can_send_version(legacy_version):
            LOG.debug('Not sending %s: the scheduler API is capped below '
                      '%s', method, legacy_version)
            return
        client.prepare(fanout=True, version=legacy_version,
                       retry=self._cast_retry).cast(ctxt, method, **kwargs)
        if confirm:
            self._warn_if_unheard(method, CONF.scheduler.topic)

    def _warn_if_unheard(self, method: str, topic: str) -> bool:
        """Log a WARNING if no scheduler consumes ``topic``; whether
        one was seen to (False also when it cannot be told).

        oslo.messaging publishes a fanout cast without the AMQP
        mandatory flag, so the broker drops one that no queue is bound
        for without a word: an aggregate update sent while no scheduler
        hears the topic (none runs, or only schedulers older than the
        version this client sends at, a rolling upgrade's skipped step)
        was lost unseen.  Every scheduler worker that hears the topic
        consumes its shared queue ``<topic>`` beside its fanout queue:
        no consumer there, nobody got the cast.  Only on AMQP
        transports, and silent (DEBUG) when the broker cannot be asked.
        """
        url = rpc.transport_url_of(self._transport)
        if not rpc.is_amqp(transport_url=url):
            return False
        consumers = self._queue_consumers(url, topic)
        if consumers is None:
            return False
        if consumers == 0:
            LOG.warning('%(method)s was cast to topic %(topic)s (fanout '
                        'exchange %(topic)s_fanout) but no scheduler '
                        'consumes that topic: the broker dropped it. Start '
                        'a scheduler, or, during a rolling upgrade with '
                        'schedulers older than %(needed)s, set '
                        '[upgrade_levels] scheduler = auto on this client '
                        'and send it again',
                        {'method': method, 'topic': topic,
                         'needed': self.TOPICS_VERSION})
            return False
        return True

    def _queue_consumers(self, url: str | None, queue: str) -> int | None:
        """Consumers of ``queue`` at the broker: 0 when it does not
        exist, None when the broker cannot be asked."""
        try:
            with rpc.amqp_connection(connect_timeout=self.VERIFY_TIMEOUT,
                                     transport_url=url) as connection:
                try:
                    return connection.channel().queue_declare(
                        queue=queue, passive=True).consumer_count
                except amqp_exceptions.NotFound:
                    return 0  # never declared: nobody ever consumed it
        except Exception as e:  # the bus is down: cannot tell
            LOG.debug('Could not look at queue %s: %s', queue, e)
            return None

    def _check_uncapped(self, method: str, needed: str) -> None:
        """Raise ``SchedulerTooOld`` if no scheduler can hear ``method``.

        Only without a cap: an operator's cap (or ``auto``) already says
        what the schedulers speak.  A message at ``needed`` that only a
        newer scheduler can hear (the casts on their own topics, 1.4)
        would otherwise vanish unseen during a rolling upgrade whose
        "set the cap" step was skipped: nothing consumes it and a fanout
        cast has no receipt (oslo.messaging sends fanouts without the
        mandatory flag).  So before the first such message the client
        finds out whether the schedulers hear it (``_judge``).  When it
        cannot tell (no scheduler yet), the message goes, and a thread
        asks again every ``VERIFY_AGAIN_AFTER`` seconds until it can.
        """
        if CONF.upgrade_levels.scheduler is not None:
            return
        verdict = self._verdict
        if verdict is None:
            with self._verify_lock:
                verdict = self._verdict
                if verdict is None and not self._verifying:
                    verdict = self._judge()
                    if verdict is None:
                        self._verify_in_background()
        if verdict:
            raise exception.SchedulerTooOld(
                topic=CONF.scheduler.topic, method=method, needed=needed,
                why=verdict)

    def _judge(self) -> str | None:
        """'' when the schedulers hear this version, why not otherwise,
        None when it cannot be told; kept once told."""
        url = rpc.transport_url_of(self._transport)
        if rpc.is_amqp(transport_url=url):
            verdict = self._judge_by_queues(url)
        elif (server := self._server_version()) is None:
            verdict = None
        elif _version_tuple(server) < _version_tuple(self.TOPICS_VERSION):
            verdict = 'the scheduler speaks %s' % server
        else:
            verdict = ''
        if verdict is None:
            return None
        self._verdict = verdict
        if verdict:
            # Once per client: every refused message raises, this says
            # what to do in one line.
            LOG.error('Scheduler RPC API %(ours)s is not heard on topic '
                      '%(topic)s: %(why)s, and [upgrade_levels] scheduler '
                      'is unset here, so messages only %(ours)s schedulers '
                      'hear are refused. Set [upgrade_levels] scheduler = '
                      'auto (or the schedulers\' version) for the rolling '
                      'upgrade',
                      {'ours': self.VERSION, 'topic': CONF.scheduler.topic,
                       'why': verdict})
        return verdict

    def _judge_by_queues(self, url: str | None) -> str | None:
        """From the consumers of the topics' queues, at the broker.

        A 1.4 scheduler consumes ``<topic>_reports``; an older one only
        ``<topic>``.  A passive queue declaration needs no permission,
        so a compute with the admin guide's publish-only credentials can
        ask it (it could not call ``get_version_info``: no reply queue).
        """
        for look in range(2):
            if look:
                # A scheduler starting or stopping its servers shows the
                # same shape for a moment; the verdict is kept.
                time.sleep(OLD_CONFIRM_AFTER)
            new = self._queue_consumers(url, rpc.reports_topic())
            if new is None:
                return None  # the bus is down: cannot tell yet
            if new:
                return ''
            old = self._queue_consumers(url, CONF.scheduler.topic)
            if not old:
                return None
        return ('its %d consumer(s) take %s but not %s, as schedulers '
                'older than %s do' % (old, CONF.scheduler.topic,
                                      rpc.reports_topic(),
                                      self.TOPICS_VERSION))

    def _verify_in_background(self) -> None:
        """Ask again until it can be told, without holding casts.

        A compute may start before any scheduler: its reports go out
        unchecked meanwhile, and the first cast after the schedulers
        turn out to be older raises.
        """
        # INFO: a compute starting before the schedulers is normal; an
        # older scheduler found later is the ERROR.
        LOG.info('No scheduler on topic %(topic)s yet to check the RPC '
                 'API version against ([upgrade_levels] scheduler is '
                 'unset): sending at %(version)s unchecked, checking '
                 'again every %(every)ss',
                 {'topic': CONF.scheduler.topic, 'version': self.VERSION,
                  'every': self.VERIFY_AGAIN_AFTER})
        self._verifying = True

        def run() -> None:
            while self._verdict is None:
                time.sleep(self.VERIFY_AGAIN_AFTER)
                try:
                    self._judge()
                except Exception as e:  # the bus may be down: next time
                    LOG.debug('Checking the scheduler version failed: %s', e)

        threading.Thread(target=run, name='scheduler-version-check',
                         daemon=True).start()


def _version_tuple(version: str) -> tuple:
    return tuple(int(part) for part in version.split('.'))


class _Heard:
    """Whether the schedulers take one kind of message newer than the
    casts of 1.4 (``SchedulerAPI._heard``)."""

    def __init__(self, topic, version: str, told: str):
        #: ``topic()``: its queue; ``told``: the line once they do.
        self.topic, self.version, self.told = topic, version, told
        #: True once told, None until then; when it was last asked.
        self.heard: bool | None = None
        self.asked = 0.0
        #: Until when (monotonic) none goes: the broker refused one.
        self.refused_until = 0.0

    def refused(self, wait: float) -> None:
        self.heard = None
        self.refused_until = time.monotonic() + wait
